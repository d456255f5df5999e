"""`python -m eval`: user errors are one `error:` line with exit status 2; a run prints its table."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from eval.cli import main
from tests.helpers_harness import make_release

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_release(tmp_path_factory.mktemp("release"))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_bad_flag_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--task", "dessert", "--model", "baseline:zero"])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and err.startswith("error: ") and "invalid choice: 'dessert'" in err
    assert "\n" not in err


@pytest.mark.parametrize("argv, needle", [
    (["run", "--task", "vqa", "--model", "gpt4o"], "not of the form backend:model"),
    (["run", "--task", "vqa", "--model", "claude:opus"], "unknown backend 'claude'"),
    (["run", "--task", "vqa", "--model", "baseline:mode"], "unknown baseline 'mode'"),
    (["run", "--task", "vqa", "--model", "openai:gpt-4o"], "set OPENAI_API_KEY"),
    (["run", "--task", "vqa", "--model", "gemini:gemini-2.5-flash"], "GEMINI_API_KEY or GOOGLE_API_KEY"),
    (["run", "--task", "vqa", "--model", "baseline:zero", "--images", "0"], "--images must be at least 1"),
    (["run", "--task", "vqa", "--model", "baseline:zero", "--images", "-1"], "--images must be at least 1"),
    (["run", "--task", "vqa", "--model", "baseline:zero", "--dataset", "/no/such/folder"], "cannot load vqa"),
    (["run", "--task", "vqa", "--model", "baseline:zero", "--ids", "zz9"], "no item with id zz9"),
    (["score", "/no/such/run"], "is not a run folder"),
])
def test_user_errors_are_one_line(argv, needle, release, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if "--dataset" not in argv and argv[0] == "run":
        argv = [*argv, "--dataset", str(release)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and needle in err and "\n" not in err, err


def test_unreachable_server_is_one_line(release, tmp_path, capsys):
    code = main(["run", "--task", "classification", "--model", "openai:m", "--dataset", str(release),
                 "--base-url", f"http://127.0.0.1:{closed_port()}/v1", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: cannot reach 127.0.0.1:") and "is the server running" in err


def test_run_prints_the_table_and_writes_the_folder(release, tmp_path):
    out = tmp_path / "demo"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "eval", "run", "--task", "all", "--model", "baseline:category-mean",
                           "--dataset", str(release), "--out", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "| classification | 6 | accuracy | 16.67 " in proc.stdout
    assert "| vqa | 3 | not scored (no judge) |" in proc.stdout and "--judge" in proc.stdout
    assert "Average MAPE" in proc.stdout
    for name in ("predictions.jsonl", "scores.jsonl", "metrics.json", "run.json", "report.md"):
        assert (out / name).is_file(), name
    run_json = json.loads((out / "run.json").read_text())
    assert run_json["prompt_version"] and run_json["dataset"]["fingerprints"]["nutrition"]

    # `score` re-scores the same predictions to the same numbers; `report` reads the folder.
    before = json.loads((out / "metrics.json").read_text())
    assert main(["score", str(out)]) == 0
    assert json.loads((out / "metrics.json").read_text()) == before
    assert main(["report", str(out), "--n-boot", "50", "--out", str(tmp_path / "report.md")]) == 0
    assert "baseline:category-mean" in (tmp_path / "report.md").read_text()


def test_corrupt_image_names_the_item(tmp_path, capsys):
    import diningbench
    from tests.helpers_harness import classification_rows, nutrition_rows, vqa_rows

    rows = classification_rows()
    rows[1]["images"][0] = {"bytes": b"not an image at all", "path": "broken.jpg"}
    release = diningbench.write_release(tmp_path / "bad", {
        "classification": (len(rows), iter(rows)), "nutrition": (4, iter(nutrition_rows())),
        "vqa": (3, iter(vqa_rows()))})
    code = main(["run", "--task", "classification", "--model", "baseline:first", "--dataset", str(release),
                 "--out", str(tmp_path / "r"), "--images", "1", "--image-order", "user-first"])
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the progress line
    assert code == 2 and last.startswith("error: ") and "item c2" in last and "cannot be decoded" in last
