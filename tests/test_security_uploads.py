"""The Space's uploads are bounded where they arrive: a script posting straight to Gradio's upload route,
never submitting, leaves at most the cap on disk (every file counted, whatever its name), and one address
past its bytes per hour is refused in one line. A real Gradio server on 127.0.0.1, posted to by httpx."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

gr = pytest.importorskip("gradio")
httpx = pytest.importorskip("httpx")
from fastapi.middleware import Middleware  # noqa: E402

from space.diningspace.settings import SpaceSettings  # noqa: E402
from space.diningspace.uploads import UPLOADS_MAX_BYTES, UploadGuard, sweep_uploads  # noqa: E402


def on_disk(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


@pytest.fixture
def serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """Start a Gradio app with a File input behind UploadGuard (options as given); yields (start, folder)."""
    folder = tmp_path / "uploads"
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(folder))
    demos = []

    def start(**options) -> str:
        with gr.Blocks() as demo:
            gr.File(label="Run folder (.zip)")
        _, url, _ = demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True,
                                app_kwargs={"middleware": [Middleware(UploadGuard, **options)]})
        demos.append(demo)
        return url.rstrip("/") + "/gradio_api/upload"

    yield start, folder
    for demo in demos:
        demo.close()


def post(client: httpx.Client, url: str, name: str, size: int, address: str = "") -> httpx.Response:
    headers = {"x-forwarded-for": address} if address else {}
    try:
        return client.post(url, files={"files": (name, b"\xff\xd8" + os.urandom(16) + bytes(size - 18))}, headers=headers)
    except httpx.TransportError:  # the server answered before reading the body and closed
        return httpx.Response(499)


def test_thirty_19_mb_uploads_from_one_address_are_refused_past_its_hourly_share(serve) -> None:
    start, folder = serve
    url = start(per_hour=100 << 20)  # the Space's default
    with httpx.Client(timeout=60) as client:
        answers = [post(client, url, f"photo{k}.jpg", 19 << 20) for k in range(30)]
    codes = [a.status_code for a in answers]
    assert codes[:5] == [200] * 5 and set(codes[5:]) <= {429, 499}, codes  # 5 x 19 MB = 95 of the 100 MB an hour
    refused = [a.text for a in answers if a.status_code == 429]
    assert refused and all("\n" not in text and "100 MB an hour" in text for text in refused), codes
    assert on_disk(folder) <= 5 * (19 << 20) + (1 << 20)


def test_uploads_of_any_name_from_many_addresses_leave_at_most_the_cap(serve) -> None:
    start, folder = serve
    cap = 24 << 20  # the Space's 512 MB, scaled down so that the test writes little
    url = start(per_hour=0, proxy_hops=1, max_bytes=cap)
    with httpx.Client(timeout=60) as client:
        for k in range(30):  # 30 x 2 MB, each from its own address, named as photos
            assert post(client, url, f"p{k}.jpg", 2 << 20, f"10.0.0.{k}").status_code == 200
            assert on_disk(folder) <= cap


def test_the_sweep_counts_every_file_whatever_its_name(tmp_path: Path) -> None:
    for k in range(30):
        path = tmp_path / f"sha{k}" / f"u{k}.{('jpg', 'zip', 'bin')[k % 3]}"
        path.parent.mkdir()
        path.write_bytes(b"x" * (1 << 20))
        os.utime(path, (1000 + k, 1000 + k))
    assert sweep_uploads(tmp_path, max_bytes=10 << 20, max_age=10_000, now=2000) == 20
    assert on_disk(tmp_path) == 10 << 20 and len(list(tmp_path.iterdir())) == 10  # emptied folders gone too


def test_the_space_installs_the_guard_with_its_settings() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "space"))
    from space.app import launch_options

    settings = SpaceSettings.from_env({"DININGBENCH_SPACE_UPLOAD_MB_PER_HOUR": "40", "DININGBENCH_SPACE_PROXY_HOPS": "1"})
    guard = next(m for m in launch_options(settings)["app_kwargs"]["middleware"] if m.cls.__name__ == UploadGuard.__name__)  # app.py imports it as diningspace.uploads
    assert guard.kwargs == {"per_hour": 40 << 20, "proxy_hops": 1}
    assert UPLOADS_MAX_BYTES == 512 << 20
