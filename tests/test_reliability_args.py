"""Hostile arguments to `python -m eval`: each is one `error:` line on stderr that names the argument
and says what to do, a non-zero exit, no traceback, and no request to any server.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eval import cli
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers_harness import make_release
from tests.helpers_reliability import assert_one_line_error, cli_env, run_cli


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_release(tmp_path_factory.mktemp("release"))


def one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str], *words: str) -> str:
    """`python -m eval ARGV` in-process: a usage error is exit 2 and one `error:` line naming `words`."""
    try:
        status = cli.main(argv)
    except SystemExit as exc:  # argparse's own mistakes
        status = exc.code
    printed = capsys.readouterr()
    lines = [line for line in printed.err.splitlines() if line.strip()]
    assert status == 2, (status, printed.err)
    assert len(lines) == 1 and lines[0].startswith("error: "), printed.err
    assert "Traceback" not in printed.err + printed.out
    for word in words:
        assert word.lower() in lines[0].lower(), f"{word!r} not in {lines[0]!r}"
    return lines[0]


RUN = ["run", "--task", "classification", "--model", "baseline:first"]
# (arguments, words the error must contain): each a mistake a user makes.
HOSTILE_ARGUMENTS = [
    (["run", "--task", "dessert", "--model", "baseline:first"], ("--task", "dessert", "classification")),
    (["run", "--task", "classification", "--model", "gpt-4o"], ("--model", "backend:model", "openai:gpt-4o")),
    (["run", "--task", "classification", "--model", "chatgpt:gpt-4o"], ("unknown backend", "chatgpt", "openai")),
    (["run", "--task", "classification", "--model", "openai:"], ("--model", "backend:model")),
    (["run", "--task", "classification", "--model", "baseline:oracle"], ("oracle",)),
    ([*RUN, "--images", "0"], ("--images", "at least 1")),
    ([*RUN, "--images", "-1"], ("--images", "at least 1")),
    ([*RUN, "--images", "two"], ("--images", "integer")),
    ([*RUN, "--limit", "0"], ("--limit", "at least 1")),
    ([*RUN, "--concurrency", "0"], ("--concurrency", "at least 1")),
    ([*RUN, "--timeout", "0"], ("--timeout", "positive")),
    ([*RUN, "--image-order", "sideways"], ("--image-order", "reference-first")),
    ([*RUN, "--lang", "fr"], ("--lang", "zh")),
    ([*RUN, "--ids", "no-such-item"], ("--ids", "no-such-item")),
    ([*RUN, "--judge", "judge-model"], ("--judge", "backend:model")),
    ([*RUN, "--base-url", "ftp://example.invalid/v1"], ("--base-url", "http")),
    ([*RUN, "--dataset", "/no/such/release"], ("/no/such/release",)),
    (["score", "/no/such/run"], ("/no/such/run",)),
    (["report", "/no/such/run"], ("/no/such/run",)),
]


@pytest.mark.parametrize("argv, words", HOSTILE_ARGUMENTS, ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_hostile_argument_is_one_clear_line(argv, words, capsys, release, tmp_path):
    if "--dataset" not in argv and argv[0] == "run":
        argv = [*argv, "--dataset", str(release), "--out", str(tmp_path / "run")]
    one_line_error(argv, capsys, *words)
    assert not (tmp_path / "run" / "predictions.jsonl").exists()


def test_missing_key_fails_before_any_network_call(tmp_path, release):
    """No OPENAI_API_KEY against api.openai.com: the client is pointed (OPENAI_BASE_URL) at a fake
    that records requests, and must receive none."""
    with FakeOpenAIServer() as server:
        env = cli_env(OPENAI_API_KEY=None, OPENAI_BASE_URL=server.base_url)
        proc = run_cli(["run", "--task", "classification", "--model", "openai:gpt-4o", "--dataset", str(release),
                        "--out", str(tmp_path / "run")], env=env)
        assert server.requests == []
    assert_one_line_error(proc, "OPENAI_API_KEY", "set")


def test_missing_gemini_key_is_one_line(tmp_path, release, capsys, monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    one_line_error(["run", "--task", "nutrition", "--model", "gemini:gemini-2.5-flash", "--dataset", str(release),
                    "--out", str(tmp_path / "run")], capsys, "GEMINI_API_KEY")


def test_unreachable_server_is_one_line_before_any_sample(release, tmp_path):
    with FakeOpenAIServer() as server:
        closed = server.port
    proc = run_cli(["run", "--task", "classification", "--model", "openai:fake-vlm", "--base-url",
                    f"http://127.0.0.1:{closed}/v1", "--dataset", str(release), "--out", str(tmp_path / "run")],
                   env=cli_env(OPENAI_API_KEY="sk-unreachable"))
    assert_one_line_error(proc, f"127.0.0.1:{closed}", "--base-url", "server running")
    assert not (tmp_path / "run" / "predictions.jsonl").exists()


def test_out_folder_of_another_run_is_refused(release, tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main([*RUN, "--dataset", str(release), "--out", str(out), "--no-progress"]) == 0
    before = (out / "predictions.jsonl").read_bytes()
    capsys.readouterr()
    one_line_error(["run", "--task", "classification", "--model", "baseline:random", "--dataset", str(release),
                    "--out", str(out)], capsys, str(out), "different run", "--overwrite")
    one_line_error([*RUN, "--lang", "en", "--dataset", str(release), "--out", str(out)], capsys, "lang")
    assert (out / "predictions.jsonl").read_bytes() == before  # the earlier run is untouched
