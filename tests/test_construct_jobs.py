"""A model per job and a build that fails safely: the photo checks go only to their own models (each on
its own server), usage is reported per stage and per model; oversized photos are dropped from their
header; one writer per work folder; credentials in a base URL, an unreachable server and a stage whose
calls all fail each stop the build in one line, before anything is paid or announced as done."""

from __future__ import annotations

import json
import os
import socket
import zlib
from pathlib import Path

import pytest
from PIL import Image

from construct.__main__ import main
from construct.photos import prefilter
from construct.work import Stage
from eval import cli as eval_cli
from eval.store import locked
from synthetic.raw_export import write_raw_export
from tests.fakes.construct_server import construct_server
from tests.helpers_memory import peak_growth_mb

FILTERS = ("openai:judge-a", "openai:judge-b")
ROOT = Path(__file__).resolve().parents[1]
PHOTO_TASKS = ("Task: photo quality check.", "Task: reference matching.")


def big_png(path: Path, width: int, height: int) -> None:
    """A valid RGB PNG of width x height, written row by row (never held whole in memory)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")

    squeeze, row = zlib.compressobj(9), b"\0" + b"\x80" * (3 * width)
    body = b"".join(squeeze.compress(row) for _ in range(height)) + squeeze.flush()
    ihdr = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", body) + chunk(b"IEND", b""))


def big_jpeg(path: Path, width: int, height: int) -> None:
    Image.new("L", (width, height), 128).save(path, format="JPEG", quality=50)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """The synthetic export plus a 49 Mpx JPEG and a 144 Mpx PNG among merchant-01-d0's user photos."""
    root = tmp_path_factory.mktemp("jobs")
    truth = write_raw_export(root / "raw")
    big_jpeg(root / "raw" / "images" / "big-49mpx.jpg", 7000, 7000)
    big_png(root / "raw" / "images" / "big-144mpx.png", 12000, 12000)
    with (root / "raw" / "photos.jsonl").open("a", encoding="utf-8") as fh:
        for pid, path in (("big-49mpx", "images/big-49mpx.jpg"), ("big-144mpx", "images/big-144mpx.png")):
            fh.write(json.dumps({"photo_id": pid, "dish_id": "merchant-01-d0", "role": "user", "path": path}) + "\n")
    return root, truth


@pytest.fixture(scope="module")
def photo_jobs(export):
    """A build whose two photo checks go to two other models on a second server."""
    root, truth = export
    main_server, _ = construct_server(truth, FILTERS)
    photo_server, _ = construct_server(truth, FILTERS)
    env = pytest.MonkeyPatch()
    env.setenv("OPENAI_API_KEY", "test-key")
    try:
        with main_server, photo_server:
            argv = ["run", str(root / "raw"), "--out", str(root / "work"), "--model", "openai:gen",
                    "--filter-models", ",".join(FILTERS), "--base-url", main_server.base_url,
                    "--photo-quality-model", "openai:standin-iqa", "--photo-quality-base-url", photo_server.base_url,
                    "--photo-match-model", "openai:standin-match", "--photo-match-base-url", photo_server.base_url,
                    "--price-per-mtok", "1,2"]
            rc = main(argv)  # stops at the base-dish review
            rc = rc or main(["review", str(root / "work"), "--stage", "dishes", "--approve-all"]) or main(argv)
    finally:
        env.undo()
    return root, rc, main_server.requests, photo_server.requests


def test_photo_checks_go_only_to_the_photo_models(photo_jobs):
    root, rc, main_requests, photo_requests = photo_jobs
    assert rc == 0
    first_line = [r.prompt.split("\n", 1)[0] for r in photo_requests]
    models = [r.body["model"] for r in photo_requests]
    # 60 photos + 2 oversized: the rules drop 5 (a re-upload, a thumbnail, a cut-off file, the two big
    # ones), 57 left; two dishes fail a free rule before any call (a vague ingredient list: 4 photos; two
    # user photos left: 3 photos): 50 quality checks. 2 are blurred, the blurred reference leaves 3 user
    # photos without one, 11 good references: 50 - 2 - 3 - 11 = 34 reference-matching checks.
    assert sorted(zip(first_line, models, strict=True)) == sorted(
        [(PHOTO_TASKS[0], "standin-iqa")] * 50 + [(PHOTO_TASKS[1], "standin-match")] * 34)
    ruled = [json.loads(line) for line in (root / "work" / "photos" / "ruled_out.jsonl").read_text().splitlines()]
    assert [(r["dish_id"], r["reason"]) for r in ruled] == [("merchant-01-d2", "too_few_user_photos"),
                                                           ("merchant-01-d3", "vague_ingredients")]
    assert main_requests and not any(r.prompt.startswith(PHOTO_TASKS) for r in main_requests)
    calls = [json.loads(line) for line in (root / "work" / "photos" / "calls.jsonl").read_text().splitlines()]
    assert sorted({c["model"] for c in calls}) == ["openai:standin-iqa", "openai:standin-match"]
    assert all(c["seconds"] >= 0 and c["truncated"] is False for c in calls)


def test_the_funnel_lists_calls_tokens_cost_and_time_per_stage_and_per_model(photo_jobs):
    root, *_ = photo_jobs
    md = (root / "work" / "funnel.md").read_text(encoding="utf-8")
    rows = {tuple(c.strip() for c in line.split("|")[1:3]): line for line in md.splitlines() if line.startswith("| ")}
    assert rows[("photos", "openai:standin-iqa")].split("|")[3].strip() == "50"
    assert rows[("photos", "openai:standin-match")].split("|")[3].strip() == "34"
    assert ("vqa", "openai:gen") in rows and ("vqa", "openai:judge-a") in rows
    per_model = [line for line in md.splitlines() if line.startswith("| openai:standin-iqa |")]
    assert len(per_model) == 1 and per_model[0].split("|")[2].strip() == "50"
    total = next(line for line in md.splitlines() if line.startswith("| **all** |")).split("|")
    prompt, completion = (int(total[k].strip().replace(",", "")) for k in (4, 5))
    assert prompt > 0 and total[6].strip() == f"{(prompt * 1 + completion * 2) / 1e6:.4f}"  # --price-per-mtok 1,2
    assert float(total[7]) > 0  # model time
    walls = json.loads((root / "work" / "stage_seconds.json").read_text(encoding="utf-8"))
    assert {"photos", "dishes", "vqa", "translate"} <= set(walls) and walls["photos"] > 0
    assert f"photos {walls['photos']:.1f} s" in next(line for line in md.splitlines() if line.startswith("Wall time"))


def test_oversized_photos_are_dropped_from_their_header_and_the_build_finishes(photo_jobs):
    root, rc, *_ = photo_jobs
    assert rc == 0
    got = {d["item"]: d for d in Stage(root / "work", "photos").decisions()}
    assert (got["big-49mpx"]["reason"], got["big-49mpx"]["detail"]["detail"]) == ("too_many_pixels", "7000x7000")
    assert (got["big-144mpx"]["reason"], got["big-144mpx"]["detail"]["detail"]) == ("too_many_pixels", "12000x12000")


def test_checking_oversized_photos_never_decodes_them(export):
    """Peak memory of the prefilter on both photos, in a fresh process: a decode of the PNG alone
    would take 432 MB (12000 x 12000 x 3)."""
    root, _ = export
    paths = [str(root / "raw" / "images" / "big-144mpx.png"), str(root / "raw" / "images" / "big-49mpx.jpg")]
    grown_mb = peak_growth_mb(
        f"""
        from construct.photos import prefilter
        paths = {paths!r}
        """,
        """
        reasons = [prefilter(open(p, 'rb').read(), 128)[0] for p in paths]
        assert reasons == ['too_many_pixels:12000x12000', 'too_many_pixels:7000x7000'], reasons
        """)
    assert grown_mb < 40, grown_mb


def test_the_pixel_limit_is_the_harness_one(tmp_path):
    from eval.images import MAX_PIXELS

    width = 8000
    height = MAX_PIXELS // width + 1  # one row over the harness's limit
    big_png(tmp_path / "over.png", width, height)
    assert prefilter((tmp_path / "over.png").read_bytes(), 128)[0] == f"too_many_pixels:{width}x{height}"


def _run(root: Path, work: str, *extra: str) -> list[str]:
    return ["run", str(root / "raw"), "--out", str(root / work), "--model", "openai:gen", *extra]


def one_line(capsys) -> str:
    captured = capsys.readouterr()
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1, captured.err
    return captured.err


def test_a_second_writer_of_a_work_folder_is_refused_naming_the_holder(export, capsys, monkeypatch):
    root, _ = export
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with locked(root / "held", "work folder"):
        assert main(_run(root, "held")) == 2
        assert f"in use by pid {os.getpid()} on {socket.gethostname()}" in one_line(capsys)
        assert main(["review", str(root / "held"), "--approve-all"]) == 2
        assert "in use by pid" in one_line(capsys)
    assert not (root / "held" / "config.json").exists()  # refused before anything was written


@pytest.mark.parametrize("url", ["http://user:sk-SECRET@127.0.0.1:9/v1", "http://127.0.0.1:9/v1?api-key=sk-SECRET",
                                 "http://127.0.0.1:9/v1?foo=1&access_token=sk-SECRET"])
@pytest.mark.parametrize("flag", ["--base-url", "--photo-match-base-url"])
def test_a_credential_in_a_base_url_is_refused_in_one_line(export, capsys, monkeypatch, url, flag):
    root, _ = export
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    assert main(_run(root, "secret", flag, url)) == 2
    err = one_line(capsys)
    assert err.startswith(f"error: {flag} carries ") and "environment" in err and "sk-SECRET" not in err
    assert not (root / "secret").exists()


def test_eval_run_refuses_a_credential_in_a_base_url_too(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    rc = eval_cli.main(["run", "--task", "nutrition", "--model", "openai:x", "--out", str(tmp_path / "run"),
                        "--base-url", "http://127.0.0.1:9/v1?api_key=sk-SECRET", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "credential in its query (api_key)" in err and "sk-SECRET" not in err


def test_an_unreachable_server_stops_the_build_before_any_stage(export, capsys, monkeypatch):
    root, _ = export
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    port = free_port()
    assert main(_run(root, "unreachable", "--base-url", f"http://127.0.0.1:{port}/v1", "--connect-wait", "0")) == 2
    assert f"cannot reach 127.0.0.1:{port}" in one_line(capsys)
    assert not (root / "unreachable" / "photos").exists()


def test_a_server_still_starting_is_waited_for_then_the_build_goes_on(export, monkeypatch):
    """The server binds 1 s after the build starts (as `python -m construct.standin ... &` in a script)."""
    import threading

    from construct.pipeline import check_servers
    from construct.work import BuildSettings

    port = free_port()
    late = socket.socket()

    def bind_late() -> None:
        late.bind(("127.0.0.1", port))
        late.listen()

    timer = threading.Timer(1.0, bind_late)
    timer.start()
    try:
        check_servers(BuildSettings(model="openai:x", base_url=f"http://127.0.0.1:{port}/v1", connect_wait=30))
    finally:
        timer.join()
        late.close()


def test_a_stage_whose_calls_all_fail_stops_the_build_with_a_summary(export, capsys, monkeypatch):
    root, truth = export
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    server, _ = construct_server(truth, FILTERS)
    server.inject("401", times=10_000)  # a bad key: not retried, every call fails
    with server:
        rc = main(_run(root, "failing", "--base-url", server.base_url))
    captured = capsys.readouterr()
    assert rc == 3 and "next: review" not in captured.out
    assert captured.err.startswith("error: stage photos: 50 of 50 model call(s) failed (") and "401" in captured.err
    assert not (root / "failing" / "dishes").exists()  # no stage after the failed one ran


def test_a_hostile_model_name_is_shown_as_text_in_the_usage_tables(tmp_path):
    from construct.funnel import usage_markdown
    from construct.work import BuildSettings

    (tmp_path / "photos").mkdir()
    row = {"key": "k", "stage": "photos", "model": "openai:x|<script>`\n| fake |", "text": "{}", "seconds": 0.5,
           "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
    (tmp_path / "photos" / "calls.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    md = usage_markdown(tmp_path, BuildSettings())
    assert "<script>" not in md and "| fake |" not in md and "`" not in md.split("Cost:")[0]
    rows = [line for line in md.splitlines() if line.startswith("| photos |")]
    assert len(rows) == 1 and rows[0].count("|") == 9  # eight cells: the name breaks no column
