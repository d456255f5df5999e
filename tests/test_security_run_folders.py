"""Run folders from elsewhere (sent by someone, submitted to the Space): `eval compare`, `eval report`,
`eval view` and the Runs tab read every line with a bound, refuse files that are links out of the folder
or not files at all, refuse a duplicated item, check every value a scorer reads, and compare only runs
made on the same release. Each hostile folder is built here; every case is one `error:` line (exit 2)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers_memory import peak_growth_mb
from helpers_report import cls_item, nut_item, write_run

from eval.cli import main as cli_main
from eval.report.items import run_items
from eval.report.runs import ReportError
from eval.store import RUN_LINE_BYTES, read_predictions

REFERENCE = {"calories": 500.0, "protein": 20.0, "carbohydrates": 60.0, "fat": 15.0}


def _cls_items(n: int = 40, *, flip: int = 0) -> list[dict]:
    """Items of one release (each id's reference fixed), answered right unless (i + flip) % 3 == 0."""
    items = []
    for i in range(n):
        right = (i + flip) % 3 != 0
        items.append({**cls_item(f"c{i}", f"m{i % 10}", True), "parsed": "A" if right else "C", "correct": right})
    return items


def _pair(tmp_path: Path, items_b: list[dict] | None = None, **settings_b) -> tuple[Path, Path]:
    a = write_run(tmp_path / "a", "openai:a", _cls_items())
    b = write_run(tmp_path / "b", "openai:b", items_b if items_b is not None else _cls_items(flip=1), **settings_b)
    return a, b


def _compare(capsys, *dirs: Path) -> tuple[int, str, str]:
    code = cli_main(["compare", *map(str, dirs), "--permutations", "99"])
    out, err = capsys.readouterr()
    return code, out, err


def _one_error_line(code: int, err: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


def _sparse(path: Path, size: int, head: bytes = b'{"task": "classification", "id": "') -> Path:
    """A file of `size` bytes that takes no disk: `head`, then zeros (a hole), no newline."""
    with path.open("wb") as fh:
        fh.write(head)
        fh.truncate(size)
    return path


# ---------------------------------------------------------------- line size, links, odd files
def test_a_huge_line_is_refused_at_the_bound_and_the_viewers_show_the_rest(tmp_path: Path, capsys) -> None:
    a, b = _pair(tmp_path)
    lines = (b / "scores.jsonl").read_bytes()
    with (b / "scores.jsonl").open("wb") as fh:  # a 300 MB line (a hole: no disk), then the genuine lines
        fh.write(b'{"task": "classification", "id": "x", "pad": "')
        fh.seek(300 << 20)
        fh.write(b'"}\n' + lines)
    line = _one_error_line(*_compare(capsys, a, b)[::2])
    assert f"scores.jsonl line 1: longer than {RUN_LINE_BYTES:,} bytes" in line
    problems: list[str] = []
    assert len(run_items(b, problems=problems)) == 40  # a viewer skips the line, reading it in chunks
    assert problems == [f"scores.jsonl:1: longer than {RUN_LINE_BYTES:,} bytes"]


def test_a_scores_file_linked_out_of_its_folder_or_not_a_file_is_refused_unread(tmp_path: Path, capsys) -> None:
    a, b = _pair(tmp_path)
    endless = _sparse(tmp_path / "elsewhere.jsonl", 4 << 30)  # 4 GiB, no newline
    (b / "scores.jsonl").unlink()
    (b / "scores.jsonl").symlink_to(endless)
    assert "a link to a file outside its folder; not read" in _one_error_line(*_compare(capsys, a, b)[::2])
    with pytest.raises(ReportError, match="outside its folder"):  # viewers refuse it too
        run_items(b, problems=[])
    (b / "scores.jsonl").unlink()
    os.mkfifo(b / "scores.jsonl")  # a reader that opened it would wait for ever
    assert "not a regular file; not read" in _one_error_line(*_compare(capsys, a, b)[::2])
    (b / "scores.jsonl").unlink()
    _sparse(b / "scores.jsonl", 4 << 30)  # in the folder, but past any run's size
    assert "at most 1,073,741,824 are read" in _one_error_line(*_compare(capsys, a, b)[::2])
    (b / "scores.jsonl").unlink()
    _sparse(b / "scores.jsonl", 900 << 20)  # under the size bound, one endless line
    assert "line 1: longer than" in _one_error_line(*_compare(capsys, a, b)[::2])


def test_predictions_linked_out_of_the_folder_or_with_a_huge_line_are_named_not_read(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "predictions.jsonl").symlink_to(_sparse(tmp_path / "elsewhere", 4 << 30))
    problems: list[str] = []
    assert read_predictions(folder / "predictions.jsonl", problems) == {}
    assert problems == ["predictions.jsonl: a link to a file outside its folder; not read"]
    (folder / "predictions.jsonl").unlink()
    _sparse(folder / "predictions.jsonl", 100 << 20)
    problems = []
    assert read_predictions(folder / "predictions.jsonl", problems) == {}
    assert problems == [f"predictions.jsonl:1: longer than {RUN_LINE_BYTES:,} bytes"]


def test_comparing_a_folder_with_a_huge_line_or_an_endless_link_costs_what_a_genuine_one_does(tmp_path: Path) -> None:
    genuine = [write_run(tmp_path / n, f"openai:{n}", _cls_items(400, flip=k)) for k, n in enumerate(("a", "b"))]
    huge = write_run(tmp_path / "huge", "openai:h", _cls_items(400))
    with (huge / "scores.jsonl").open("r+b") as fh:
        fh.write(b'{"task": "classification", "id": "x", "pad": "')
        fh.seek(300 << 20)
        fh.write(b'"}\n')
    linked = write_run(tmp_path / "linked", "openai:l", [])
    (linked / "scores.jsonl").unlink()
    (linked / "scores.jsonl").symlink_to(_sparse(tmp_path / "endless", 4 << 30))
    setup = "from eval.compare import compare_runs\nfrom eval.report.runs import ReportError"

    def growth(a: Path, b: Path) -> float:
        return peak_growth_mb(setup, f"try:\n    compare_runs([{str(a)!r}, {str(b)!r}], n_perm=99, n_boot=50)\n"
                                     "except ReportError:\n    pass")

    baseline = growth(*genuine)
    for hostile in (huge, linked):
        assert growth(genuine[0], hostile) < baseline + 100


# ---------------------------------------------------------------- duplicated items, malformed values
def test_a_duplicated_item_is_refused_naming_both_lines_and_a_viewer_counts_it_once(tmp_path: Path, capsys) -> None:
    a, b = _pair(tmp_path)
    lines = (b / "scores.jsonl").read_text().splitlines()
    (b / "scores.jsonl").write_text("\n".join(line for line in lines for _ in range(25)) + "\n")
    line = _one_error_line(*_compare(capsys, a, b)[::2])
    assert "scores.jsonl line 2: the same item as line 1 (classification 'c0', epoch 0)" in line
    problems: list[str] = []
    assert len(run_items(b, problems=problems)) == 40
    assert len(problems) == 40 * 24 and problems[0].endswith("counted once")


@pytest.mark.parametrize(("ape", "why"), [
    ("0.5", "has `ape` that is not an object"),
    ({"calories": "0.5", "protein": 0.1, "carbohydrates": 0.1, "fat": 0.1}, "has `ape.calories` '0.5'"),
    ({"calories": [1], "protein": 0.1, "carbohydrates": 0.1, "fat": 0.1}, "has `ape.calories` '[1]'"),
    ({"calories": -1.0, "protein": 0.1, "carbohydrates": 0.1, "fat": 0.1}, "has `ape.calories` '-1.0', not a number >= 0"),
    ({"protein": 0.1}, "has `ape` without `calories`"),
    ([0.1, 0.2], "has `ape` that is not an object"),
])
def test_a_malformed_ape_is_one_error_line_naming_the_file_and_line(tmp_path: Path, capsys, ape, why) -> None:
    good = [nut_item(f"n{i}", f"m{i % 5}", {**REFERENCE, "calories": 400.0 + i}, REFERENCE) for i in range(10)]
    a = write_run(tmp_path / "a", "openai:a", good)
    bad = [dict(row) for row in good]
    bad[3]["ape"] = ape
    b = write_run(tmp_path / "b", "openai:b", bad)
    line = _one_error_line(*_compare(capsys, a, b)[::2])
    assert "scores.jsonl line 4: " + why in line
    code, _, err = (cli_main(["report", str(b)]), *capsys.readouterr())
    assert "scores.jsonl line 4" in _one_error_line(code, err)


@pytest.mark.parametrize(("field", "value"), [("correct", "yes"), ("correct", 1), ("merchant_id", {"a": 1}),
                                              ("error", ["x"]), ("epoch", -1), ("n_options", float("inf")),
                                              ("n_options", "8"), ("n_options", 10**9)])
def test_a_malformed_value_a_scorer_reads_is_one_error_line(tmp_path: Path, capsys, field, value) -> None:
    items = _cls_items()
    items[5] = {**items[5], field: value}
    a, b = _pair(tmp_path, items)
    assert "scores.jsonl line 6: has " in _one_error_line(*_compare(capsys, a, b)[::2])


# ---------------------------------------------------------------- like with like
def test_runs_made_on_different_releases_are_refused(tmp_path: Path, capsys) -> None:
    a, b = _pair(tmp_path)
    for folder, fingerprint in ((a, "1111aaaa"), (b, "2222bbbb")):
        info = json.loads((folder / "run.json").read_text())
        info["dataset"]["fingerprints"] = {"classification": fingerprint}
        (folder / "run.json").write_text(json.dumps(info))
    line = _one_error_line(*_compare(capsys, a, b)[::2])
    assert "different releases (classification: fingerprint 1111aaaa vs 2222bbbb)" in line


def test_an_id_whose_reference_differs_between_the_runs_is_refused(tmp_path: Path, capsys) -> None:
    items = _cls_items(flip=1)
    items[7] = {**items[7], "reference": "H"}  # the same id, another question's answer
    a, b = _pair(tmp_path, items)
    line = _one_error_line(*_compare(capsys, a, b)[::2])
    assert "1 of 40 shared items have another reference in each run (e.g. 'c7'" in line


def test_runs_asked_differently_are_compared_and_the_first_line_says_how(tmp_path: Path, capsys) -> None:
    a, b = _pair(tmp_path, lang="en", cot=True)
    info = json.loads((b / "run.json").read_text())
    (b / "run.json").write_text(json.dumps({**info, "prompt_version": "other"}))
    info = json.loads((a / "run.json").read_text())
    (a / "run.json").write_text(json.dumps({**info, "prompt_version": "this"}))
    code, out, err = _compare(capsys, a, b)
    assert code == 0, err
    first = out.splitlines()[0]
    assert first.startswith("note: A and b were not asked the same questions")
    assert "prompt version this vs other" in first and "lang zh vs en" in first and "cot False vs True" in first
    code, out, _ = _compare(capsys, a, a)
    assert code == 0 and not out.startswith("note:")


def test_the_spaces_compare_refuses_what_eval_compare_refuses(tmp_path: Path) -> None:
    gr = pytest.importorskip("gradio")
    from space.diningspace.leaderboard_tab import LeaderboardTab
    from space.diningspace.settings import SpaceSettings

    results = tmp_path / "results"
    a, b = _pair(results)
    lines = (b / "scores.jsonl").read_text().splitlines()
    (b / "scores.jsonl").write_text("\n".join(line for line in lines for _ in range(3)) + "\n")
    for folder in (a, b):
        (folder / "metrics.json").write_text("{}")
    tab = LeaderboardTab(SpaceSettings.from_env({"DININGBENCH_SPACE_RESULTS": str(results)}, repo_root=tmp_path))
    tab.runs = lambda: ["a", "b"]  # type: ignore[method-assign]
    with pytest.raises(gr.Error, match="the same item as line 1"):
        tab.compare("a", "b")
    write_run(b, "openai:b", _cls_items(flip=1), lang="en")
    assert tab.compare("a", "b").startswith("note: A and B were not asked the same questions (lang zh vs en)")
