"""Hostile releases: a corrupt or zero-byte image, an empty `images` list, roles that do not match
the images, an answer letter beyond the options, NaN or negative nutrition, missing columns.
`python diningbench.py validate` names every broken item; `python -m eval run` refuses with one
line naming the item (or skips it with a named warning and keeps it in the denominator), or the
file, for a column missing from it.
"""

from __future__ import annotations

import json

import pytest

import diningbench
from eval import cli
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers_reliability import (
    DEFECTS,
    MISSING_COLUMNS,
    Defect,
    run_cli,
    write_hostile_release,
    write_long_release,
    write_release_missing_columns,
)

FULL_COUNTS = {"classification": 6, "nutrition": 4, "vqa": 3}
# Defects found from the dataset alone: the run must stop before asking the model anything.
REFERENCE_DEFECTS = {"answer letter beyond the options", "NaN nutrition", "negative calories"}


def test_validate_names_every_broken_item(tmp_path):
    release = write_hostile_release(tmp_path / "release", DEFECTS)
    proc = run_cli(["validate", str(release)], module="diningbench.py")
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    errors = [line for line in proc.stdout.splitlines() if line.startswith("error: ")]
    for defect in DEFECTS:
        named = [line for line in errors if line.startswith(f"error: {defect.task}/{defect.item}: ")]
        assert named, f"{defect.name}: no error names {defect.task}/{defect.item}\n{proc.stdout}"
        assert any(all(w.lower() in line.lower() for w in defect.words) for line in named), (defect.name, named)
    broken = {f"{d.task}/{d.item}" for d in DEFECTS}
    assert {line.split(": ")[1] for line in errors} == broken  # healthy items are not accused
    assert f"{len(errors)} error(s)" in proc.stdout


def test_validate_names_missing_columns(tmp_path):
    release = write_release_missing_columns(tmp_path / "release")
    proc = run_cli(["validate", str(release)], module="diningbench.py")
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    for config, column in MISSING_COLUMNS.items():
        assert any(line.startswith(f"error: {config}:") and "missing column" in line and column in line
                   for line in proc.stdout.splitlines()), proc.stdout


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """`python -m eval ARGV` in this process (the same entry point), with what it printed."""
    try:
        status = cli.main(argv)
    except SystemExit as exc:  # argparse mistakes
        status = int(exc.code or 0)
    printed = capsys.readouterr()
    return status, printed.out, printed.err


@pytest.mark.parametrize("defect", DEFECTS, ids=lambda d: d.name.replace(" ", "-"))
def test_run_refuses_or_skips_each_broken_item_by_name(defect: Defect, tmp_path, monkeypatch, capsys):
    release = write_hostile_release(tmp_path / "release", [defect])
    out = tmp_path / "run"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-data-test")
    with FakeOpenAIServer() as server:
        server.oracle = lambda request: "A"
        status, printed, err = run_main(["run", "--task", defect.task, "--model", "openai:fake-vlm",
                                         "--base-url", server.base_url, "--dataset", str(release),
                                         "--out", str(out), "--no-progress", "--timeout", "5"], capsys)
    assert "Traceback" not in printed + err
    lines = [line for line in err.splitlines() if line.strip()]
    if status != 0:  # refused: one line naming the item, and no figures computed from fewer items
        assert len(lines) == 1 and lines[0].startswith("error: ") and defect.item in lines[0], err
        assert not (out / "metrics.json").exists()
        if defect.name in REFERENCE_DEFECTS:
            assert server.requests == []
    else:  # skipped: a warning naming the item, and the item still counted in n
        assert any(defect.item in line for line in lines), err
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics[defect.task]["n"] == FULL_COUNTS[defect.task], metrics
        assert f"| {defect.task} | {FULL_COUNTS[defect.task]} |" in printed


def test_run_refuses_a_release_with_missing_columns(tmp_path, capsys):
    release = write_release_missing_columns(tmp_path / "release")
    for task, column in MISSING_COLUMNS.items():
        status, printed, err = run_main(["run", "--task", task, "--model", "baseline:first", "--dataset",
                                         str(release), "--out", str(tmp_path / task), "--no-progress"], capsys)
        lines = [line for line in err.splitlines() if line.strip()]
        assert status == 2 and len(lines) == 1 and "Traceback" not in err, err
        (shard,) = (release / "data" / task).glob("*.parquet")
        assert lines[0] == (f"error: cannot load {task!r} from {release}: {shard.name}: schema mismatch, "
                            f"missing column(s) {column}")
        assert not (tmp_path / task / "metrics.json").exists()


def test_a_release_that_is_not_a_release(tmp_path, capsys):
    (tmp_path / "junk" / "data" / "classification").mkdir(parents=True)
    (tmp_path / "junk" / "data" / "classification" / "test-00000-of-00001.parquet").write_bytes(b"not parquet")
    for source in (tmp_path / "junk", tmp_path / "nowhere"):
        status, _, err = run_main(["run", "--task", "classification", "--model", "baseline:first",
                                   "--dataset", str(source), "--out", str(tmp_path / "run")], capsys)
        lines = [line for line in err.splitlines() if line.strip()]
        assert status == 2 and len(lines) == 1 and str(source) in lines[0], err


def test_healthy_long_release_is_clean(tmp_path):
    """The fixtures themselves are valid: every error above comes from the defect, not the base."""
    release = write_long_release(tmp_path / "release", 1)
    proc = run_cli(["validate", str(release)], module="diningbench.py")
    assert proc.returncode == 0 and " 0 error(s)" in proc.stdout, proc.stdout


def test_same_named_release_folders_are_not_confused(tmp_path):
    """Two releases in folders with the same name (and the same card): each loads its own rows, not a
    cached copy of the other (the Arrow cache is keyed by the data files, not by the folder name)."""
    nan, negative = (next(d for d in DEFECTS if d.name == n) for n in ("NaN nutrition", "negative calories"))
    first = write_hostile_release(tmp_path / "a" / "release", [nan])
    second = write_hostile_release(tmp_path / "b" / "release", [negative])
    rows = [{r["id"]: (r["calories"], r["protein"]) for r in diningbench.load("nutrition", str(folder), decode_images=False)
             .remove_columns(["images"])} for folder in (first, second)]
    assert rows[0]["n2"][1] != rows[0]["n2"][1] and rows[0]["n4"] == (300.0, 0.0)  # NaN protein
    assert rows[1]["n2"] == (600.0, 30.0) and rows[1]["n4"] == (-300.0, 0.0)
