"""`python -m eval score DIR --judge SPEC` when the judge cannot work: one `error:` line, exit 2,
nothing rewritten (a judge without a key used to give VQA 0.00% with a judge error per item)."""

from __future__ import annotations

import pytest

from eval import api, cli
from eval.settings import RunSettings
from tests.helpers_harness import make_release


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    release = make_release(tmp_path_factory.mktemp("release") / "diningbench")
    out = tmp_path_factory.mktemp("runs") / "vqa"
    return api.run(RunSettings(task="vqa", model="baseline:random", dataset=str(release), out=out, n_boot=20),
                   progress=False)


@pytest.mark.parametrize("argv", [["--judge", "openai:gpt-4o"], ["--judge", "gemini:gemini-2.5-pro"],
                                  ["--judge", "openai:judge", "--judge-base-url", "http://127.0.0.1:9/v1"]])
def test_an_unusable_judge_writes_nothing(run_dir, monkeypatch, capsys, argv):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    capsys.readouterr()
    assert cli.main(["score", str(run_dir), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before
