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


# ---------------------------------------------------------------- counts, not only bytes
def kept(folder: Path) -> tuple[int, int]:
    """(files, folders) in the upload folder."""
    paths = list(folder.rglob("*")) if folder.is_dir() else []
    return sum(p.is_file() for p in paths), sum(p.is_dir() for p in paths)


def post_many(client: httpx.Client, url: str, n: int, address: str = "") -> httpx.Response:
    """One request carrying `n` small files (Gradio takes up to 1,000 in one post)."""
    headers = {"x-forwarded-for": address} if address else {}
    files = [("files", (f"f{k}.jpg", os.urandom(1024))) for k in range(n)]
    try:
        return client.post(url, files=files, headers=headers)
    except httpx.TransportError:
        return httpx.Response(499)


def test_small_uploads_from_one_address_are_refused_past_its_files_an_hour(serve) -> None:
    start, folder = serve
    url = start(per_hour=100 << 20, files_per_hour=10)
    with httpx.Client(timeout=60) as client:
        codes = [post(client, url, f"tiny{k}.jpg", 1024).status_code for k in range(25)]  # 1 KB each: bytes never bind
        assert codes == [200] * 10 + [429] * 15, codes
        refused = post(client, url, "one-more.jpg", 1024)
        assert "\n" not in refused.text and "10 files an hour" in refused.text
    assert kept(folder) == (10, 10)


def test_many_files_in_one_post_count_each(serve) -> None:
    start, folder = serve
    url = start(per_hour=100 << 20, files_per_hour=10)
    with httpx.Client(timeout=60) as client:
        assert post_many(client, url, 4).status_code == 200
        assert post_many(client, url, 4).status_code == 200
        assert post_many(client, url, 4).status_code in (429, 499)  # 12 files in three posts: past the 10
        assert post(client, url, "one.jpg", 1024).status_code == 429
    assert sum(1 for p in folder.rglob("*.jpg")) == 8  # a refused post's files are never kept


def test_one_post_of_more_files_than_the_share_is_refused(serve) -> None:
    start, folder = serve
    url = start(per_hour=100 << 20, files_per_hour=10)
    with httpx.Client(timeout=60) as client:
        assert post_many(client, url, 12).status_code in (429, 499)
        assert post(client, url, "one.jpg", 1024).status_code == 429  # the 12 it posted were counted
    assert not list(folder.rglob("*.jpg"))


def test_uploads_from_many_addresses_leave_at_most_the_files_cap(serve) -> None:
    start, folder = serve
    url = start(per_hour=0, files_per_hour=0, proxy_hops=1, max_files=20)
    with httpx.Client(timeout=60) as client:
        for k in range(60):  # 60 x 1 KB, each from its own address: no address's quota binds
            assert post(client, url, f"p{k}.jpg", 1024, f"10.0.{k}.1").status_code == 200
            files, folders = kept(folder)
            assert files <= 20 and folders <= 20
    assert kept(folder) == (20, 20)


def test_a_sweep_costs_what_it_removes_not_what_the_folder_holds(tmp_path: Path, monkeypatch) -> None:
    """The ledger: after its first walk, noting one upload and sweeping back to the cap stats one file and
    removes one, whether the folder holds 100 files or 2,000; the folder is walked again only once a minute."""
    from space.diningspace import uploads

    now = [0.0]
    calls = {"lstat": 0, "walk": 0}
    lstat, walk = os.lstat, os.walk

    def counted_lstat(path, *args, **kwargs):
        calls["lstat"] += 1
        return lstat(path, *args, **kwargs)

    def counted_walk(path, *args, **kwargs):
        calls["walk"] += 1
        return walk(path, *args, **kwargs)

    def upload(root: Path, k: int) -> str:
        path = root / f"sha{k}" / "u.jpg"
        path.parent.mkdir(parents=True)
        path.write_bytes(b"x")
        os.utime(path, (1000 + k, 1000 + k))
        return str(path)

    per_upload = []
    for n in (100, 2000):
        root = tmp_path / str(n)
        for k in range(n):
            upload(root, k)
        ledger = uploads.UploadFolder(root, clock=lambda: now[0])
        monkeypatch.setattr(os, "lstat", counted_lstat)
        monkeypatch.setattr(os, "walk", counted_walk)
        assert ledger.sweep(max_files=n, now=2000) == 0 and calls["walk"] == 1  # the first walk, and the only one
        costs = []
        for k in range(n, n + 20):
            calls.update(lstat=0, walk=0)
            ledger.note([upload(root, k)])
            assert ledger.sweep(max_files=n, now=2000) == 1  # the oldest goes
            costs.append(dict(calls))
        monkeypatch.undo()
        assert len(ledger) == n and kept(root) == (n, n)
        assert not (root / "sha0").exists() and (root / f"sha{n + 19}").exists()
        per_upload.append(costs)
    assert per_upload[0] == per_upload[1] == [{"lstat": 1, "walk": 0}] * 20
    now[0] += uploads.RESCAN_S  # a minute on: files that came another way are found
    (tmp_path / "2000" / "stray.bin").write_bytes(b"y" * 10)
    assert ledger.sweep(max_files=2000, now=2000) == 1 and len(ledger) == 2000


def test_the_hourly_quota_forgets_an_hour_later(tmp_path: Path) -> None:
    from space.diningspace.uploads import UploadQuota

    now = [0.0]
    quota = UploadQuota(10 << 20, 3, clock=lambda: now[0])
    for k in range(3):
        quota.add(f"10.0.0.{k}", 1 << 20, 1)
        quota.add("10.0.0.9", 1 << 20, 1)
    assert quota.files_left("10.0.0.9") == 0 and quota.left("10.0.0.9") == 7 << 20
    assert quota.files_left("10.0.0.1") == 2 and quota.files_left(None) == float("inf")
    now[0] = 3600.0
    assert quota.files_left("10.0.0.9") == 3 and quota.left("10.0.0.9") == 10 << 20
