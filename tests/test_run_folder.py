"""Run folders under attack or misuse: one writer at a time, nothing written outside the run folder,
someone else's files never overwritten, corrupt lines repaired, a slow server bounded by --timeout,
huge answers parsed in bounded time. Each mistake is one `error:` line."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from eval import api, cli, tasks
from eval.settings import RunSettings, UsageError
from tests.helpers_harness import make_release, read_jsonl


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return make_release(tmp_path_factory.mktemp("release") / "diningbench")


def baseline(release: Path, out: Path, **overrides) -> RunSettings:
    return RunSettings(**{"task": "classification", "model": "baseline:first", "dataset": str(release), "out": out,
                          "n_boot": 20, **overrides})


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_second_run_into_the_same_folder_is_refused_while_the_first_runs(release, tmp_path, capsys):
    out = tmp_path / "run"
    with api.locked(out):  # the first run holds the folder
        with pytest.raises(UsageError, match=f"in use by pid {os.getpid()} on "):
            api.run(baseline(release, out), progress=False)
        argv = ["run", "--task", "classification", "--model", "baseline:first", "--dataset", str(release),
                "--out", str(out), "--no-progress"]
        capsys.readouterr()
        assert cli.main(argv) == 2
        assert "in use" in one_error_line(capsys)
    assert not (out / "predictions.jsonl").exists()
    api.run(baseline(release, out), progress=False)  # released: runs
    assert len(read_jsonl(out / "predictions.jsonl")) == 6


@pytest.mark.parametrize("where", ["root", "file", "foreign"])
def test_an_out_that_is_not_a_run_folder_is_refused_and_left_alone(release, tmp_path, capsys, where):
    if where == "root":
        out = Path("/")
    elif where == "file":
        out = tmp_path / "notes.txt"
        out.write_text("mine", encoding="utf-8")
    else:  # someone's own report and metrics, no run
        out = tmp_path / "mine"
        out.mkdir()
        (out / "report.md").write_text("# my report", encoding="utf-8")
        (out / "metrics.json").write_text("{\"mine\": 1}", encoding="utf-8")
    before = {p: p.read_bytes() for p in ([out] if out.is_file() else out.iterdir()) if p.is_file()} \
        if where != "root" else {}
    argv = ["run", "--task", "classification", "--model", "baseline:first", "--dataset", str(release),
            "--out", str(out), "--no-progress"]
    assert cli.main(argv) == 2
    one_error_line(capsys)
    for path, data in before.items():
        assert path.read_bytes() == data
    if where == "foreign":
        assert sorted(p.name for p in out.iterdir()) == ["metrics.json", "report.md"]
    assert not Path("/predictions.jsonl").exists() and not Path("/run.json").exists()


def test_an_unwritable_out_is_one_error_line(release, capsys):
    argv = ["run", "--task", "classification", "--model", "baseline:first", "--dataset", str(release),
            "--out", "/proc/diningbench-run", "--no-progress"]
    assert cli.main(argv) == 2
    one_error_line(capsys)


@pytest.mark.parametrize("corrupt", ["[1, 2]", '{"id": "c2", "task": ["classification"], "request_hash": "x"}',
                                     '{"id": 7, "task": "classification"}', "\x00\x01 not json"])
def test_a_corrupt_middle_line_is_repaired_not_a_traceback(release, tmp_path, corrupt):
    out = tmp_path / "run"
    api.run(baseline(release, out), progress=False)
    path = out / "predictions.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines[:3] + [corrupt] + lines[3:]) + "\n", encoding="utf-8")
    api.run(baseline(release, out), progress=False)  # resumes: nothing to ask, the bad line goes
    repaired = read_jsonl(path)
    assert sorted(r["id"] for r in repaired) == [f"c{i}" for i in range(1, 7)]
    assert json.loads((out / "metrics.json").read_text())["classification"]["n"] == 6


class _Trickle(BaseHTTPRequestHandler):
    """A server that accepts the request and then sends its body one byte a second, forever."""

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "100000")
        self.end_headers()
        try:
            for _ in range(60):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(1.0)
        except OSError:
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def trickle_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Trickle)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_timeout_is_the_wall_clock_limit_of_one_attempt(release, tmp_path, trickle_server):
    settings = RunSettings(task="classification", model="openai:slow", base_url=trickle_server,
                           dataset=str(release), out=tmp_path / "run", ids=["c1"], timeout=2.0, max_attempts=1,
                           n_boot=20)
    start = time.monotonic()
    api.run(settings, progress=False)
    assert time.monotonic() - start < 8.0  # one 2 s attempt, plus loading and scoring
    (line,) = read_jsonl(tmp_path / "run" / "predictions.jsonl")
    assert line["error"] and "timed out" in line["error"] and line["attempts"] == 1


def test_a_huge_answer_is_parsed_from_its_ends_in_bounded_time():
    row = {"options": [f"dish {i}" for i in range(8)]}
    looping = "答案：A 的理由是" * 600_000  # 6 M characters of a model looping to its limit
    start = time.monotonic()
    assert tasks.parse_output("classification", looping, row) in (None, "A")
    assert tasks.parse_output("classification", "最终答案：C\n" + "。" * 6_000_000, row) == "C"
    assert tasks.parse_output("classification", "好" * 6_000_000 + "\n最终答案：D", row) == "D"
    assert time.monotonic() - start < 10.0


def test_run_json_records_each_installed_packages_version_as_its_metadata_says():
    from importlib import metadata

    from eval.runinfo import PACKAGES, package_versions

    versions = package_versions()
    for name in PACKAGES:
        try:
            expected = metadata.version(name)
        except metadata.PackageNotFoundError:
            expected = None
        assert versions[name] == expected, name
    assert versions["numpy"] is not None and versions["python"].count(".") == 2
