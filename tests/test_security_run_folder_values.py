"""A run folder may come from anywhere, with any value in its files. Genuine run folders (ours, and the
authors' protocol on a release in their layout) have values of run.json, metrics.json, scores.jsonl and
predictions.jsonl changed to values of other types and ranges, seed by seed (reproducible), and every
reader of a run folder is asked: the report, compare, the item list and one item whole, the run summary,
the model card's table, the run picker's label and the leaderboard. Each either reads the folder or refuses
it in one line (a UserError, which the CLI prints as `error: ...`); anything else, a traceback, is listed by
the file, the place, the value and the reader."""

from __future__ import annotations

import json
import shutil
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eval import api
from eval.compare import compare_runs
from eval.report.items import item_detail, run_items, run_summary
from eval.report.model_card import results_table
from eval.report.report import build_report
from eval.report.runs import load_run
from eval.report.viewer import run_label
from eval.settings import RunSettings
from eval.types import UserError
from space.diningspace.leaderboard import local_rows
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers_harness import make_release, model_oracle
from tests.helpers_official import write_folder
from tests.test_official_protocol import _judge_oracle, _model_oracle

FILES = ("run.json", "metrics.json", "scores.jsonl", "predictions.jsonl")
# What a hostile or broken writer may put where a value was: values of another type, and numbers out of range.
OF_ANOTHER_TYPE: tuple[Any, ...] = ("x", [], {"a": {"b": 1}}, True, None, "<b>x</b>", [1, "a"])
OUT_OF_RANGE: tuple[Any, ...] = (-1, 10**12, float("inf"), float("nan"), 1.5, 0, "9" * 400)


@pytest.fixture(scope="module")
def genuine(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("genuine")
    release = make_release(root / "release" / "diningbench")
    ours = RunSettings(task="all", model="openai:fake-vlm", dataset=str(release), images=2, out=root / "ours",
                       n_boot=20, max_attempts=1, circular=True)
    with FakeOpenAIServer() as server, FakeOpenAIServer(oracle=lambda r: "Agrees.\nGRADE: C") as judge:
        ours.base_url, ours.judge, ours.judge_base_url = server.base_url, "openai:judge", judge.base_url
        server.oracle = model_oracle(release, ours, wrong={"c2"})
        found = {"ours": api.run(ours, progress=False)}
    folder = write_folder(root / "authors")
    with FakeOpenAIServer(_model_oracle(folder, "vqa")) as model, FakeOpenAIServer(_judge_oracle) as judge:
        found["theirs"] = api.run(RunSettings(task="vqa", model="openai:plain-model", base_url=model.base_url,
                                              dataset=str(folder), judge="openai:judge", judge_base_url=judge.base_url,
                                              n_boot=20, out=root / "theirs"), progress=False)
    return found


def _paths(value: Any, depth: int, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value down to `depth` (a list by its first element)."""
    found = [prefix] if prefix else []
    if depth and isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, depth - 1, (*prefix, key))
    elif depth and isinstance(value, list) and value:
        found += _paths(value[0], depth - 1, (*prefix, 0))
    return found


def _replaced(value: Any, path: tuple[Any, ...], odd: Any) -> Any:
    if not path:
        return odd
    if isinstance(value, dict):
        return {**value, path[0]: _replaced(value[path[0]], path[1:], odd)}
    return [_replaced(value[0], path[1:], odd), *value[1:]]


def _changes(folder: Path) -> list[tuple[str, int | None, tuple[Any, ...], Any]]:
    """(file, line or None, place, odd value): every place of run.json and metrics.json down to three levels,
    and of the first scores and predictions line of each task down to two, each with one value of another type
    and one out of range, taken in turn from the lists (the same changes on every run of the test)."""
    places: list[tuple[str, int | None, tuple[Any, ...]]] = []
    for name in FILES:
        text = (folder / name).read_text(encoding="utf-8")
        if name.endswith(".jsonl"):
            lines = [json.loads(line) for line in text.splitlines()]
            first = {line["task"]: n for n, line in reversed(list(enumerate(lines)))}
            places += [(name, n, path) for n in sorted(first.values()) for path in _paths(lines[n], 2)]
        else:
            places += [(name, None, path) for path in _paths(json.loads(text), 3)]
    return [(name, line, path, odd) for k, (name, line, path) in enumerate(places)
            for odd in (OF_ANOTHER_TYPE[k % len(OF_ANOTHER_TYPE)], OUT_OF_RANGE[k % len(OUT_OF_RANGE)])]


def _tamper(run: Path, name: str, line: int | None, path: tuple[Any, ...], odd: Any) -> None:
    file = run / name
    if line is None:
        file.write_text(json.dumps(_replaced(json.loads(file.read_text(encoding="utf-8")), path, odd)), encoding="utf-8")
        return
    lines = [json.loads(text) for text in file.read_text(encoding="utf-8").splitlines()]
    lines[line] = _replaced(lines[line], path, odd)
    file.write_text("".join(json.dumps(item) + "\n" for item in lines), encoding="utf-8")


def _readers(run: Path, genuine_run: Path) -> dict[str, Callable[[], Any]]:
    return {
        "report": lambda: build_report([load_run(run)], reported=False, n_boot=20),
        "compare": lambda: compare_runs([genuine_run, run], n_perm=99, n_boot=20),
        "items": lambda: [item_detail(run, r["task"], r["id"]) for r in run_items(run)[:4]],
        "summary": lambda: run_summary(run),
        "model card": lambda: results_table([load_run(run)], n_boot=20),
        "run label": lambda: run_label(run.name, run),
        "leaderboard": lambda: local_rows(run.parent),
    }


@pytest.mark.slow
@pytest.mark.parametrize("which", ["ours", "theirs"])
def test_every_reader_reads_or_refuses_in_one_line_a_run_folder_of_odd_values(genuine, which, tmp_path):
    failures: dict[tuple[str, str], str] = {}
    changes = _changes(genuine[which])
    assert len(changes) > 200
    for k, (name, line, path, odd) in enumerate(changes):
        run = tmp_path / f"c{k}" / "run"
        shutil.copytree(genuine[which], run)
        _tamper(run, name, line, path, odd)
        for reader, read in _readers(run, genuine[which]).items():
            try:
                read()
            except UserError as exc:  # one line, as the CLI prints it (`error: ...`)
                assert "\n" not in str(exc), (name, path, reader)
            except Exception:  # noqa: BLE001  (any other exception is what this test looks for)
                where = f"{name}{'' if line is None else f' line {line + 1}'} {'.'.join(map(str, path))} = {odd!r:.40}"
                failures.setdefault((where, reader), traceback.format_exc().strip().splitlines()[-1])
        shutil.rmtree(run.parent)
    assert not failures, "\n".join(f"{where} [{reader}]: {error}" for (where, reader), error in failures.items())
