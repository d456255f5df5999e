"""The task registry: one object per task, asked everywhere else; a fourth task is one module.

The toy task below is what ARCHITECTURE.md's "add a task" asks for, and nothing more: a module that
subclasses `Task` and registers it. It runs end to end (requests, a baseline's answers, parsing,
scoring, metrics.json, the report's tables, the model card) on the embedded sample.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import diningbench
from eval import api, tasks
from eval.report import model_card, report
from eval.report.runs import load_run
from eval.settings import RunSettings, UsageError
from eval.tasks import Task
from tests.tools.imports import ROOT, product_files

TASK_NAMES = frozenset({"classification", "nutrition", "vqa"})
REGISTRY = "eval/tasks/"


# ---------------------------------------------------------------- no task-name comparison outside it
def _names_a_task(node: ast.AST) -> bool:
    """A string constant that is a task's name, or a tuple/list/set of them."""
    if isinstance(node, ast.Constant):
        return node.value in TASK_NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_a_task(e) for e in node.elts)
    return False


def task_name_comparisons(source: str) -> list[int]:
    """Line numbers where `source` compares something with a task's name (==, !=, in, is, match)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(_names_a_task(n) for n in (node.left, *node.comparators)):
            lines.append(node.lineno)
        elif isinstance(node, ast.match_case) and any(
                isinstance(p, ast.MatchValue) and _names_a_task(p.value) for p in ast.walk(node.pattern)):
            lines.append(node.pattern.lineno)
    return lines


def test_the_counter_sees_every_form_of_comparison():
    source = '''
if task == "vqa": pass
ok = "nutrition" != kind
both = name in ("classification", "nutrition")
where = row.get("task") is "vqa"
match task:
    case "classification":
        pass
fine = task == other and label == "vqa_category" and {"vqa": 1}["vqa"]
'''
    assert task_name_comparisons(source) == [2, 3, 4, 5, 7]


def test_no_task_name_is_compared_outside_the_registry():
    found = {rel: lines for rel in product_files() if not rel.startswith(REGISTRY)
             if (lines := task_name_comparisons((ROOT / rel).read_text(encoding="utf-8")))}
    assert found == {}, "ask the task object (eval.tasks.get(name)) instead of comparing its name"


def test_the_builtin_tasks_are_registered_in_release_order():
    assert tasks.names()[:3] == ("classification", "nutrition", "vqa")
    assert [t.figure for t in tasks.all_tasks()][:3] == ["accuracy", "avg_mape", "accuracy"]
    assert [t.judged for t in tasks.all_tasks()][:3] == [False, False, True]
    with pytest.raises(ValueError, match="unknown task 'nope'; choose one of classification, nutrition, vqa"):
        tasks.get("nope")
    with pytest.raises(UsageError, match="unknown --task 'nope'"):
        RunSettings(task="nope", model="baseline:first").validate()


# ---------------------------------------------------------------- a fourth task, end to end
class Recognise(Task):
    """Is the pictured dish the first option? (yes/no), asked of the classification config's rows."""

    name = "recognise"
    config = "classification"
    title = "Recognition"
    short = "Rec"
    hub_name = "Yes/no dish recognition"

    def prompt(self, row: Mapping[str, Any], *, lang: str, cot: bool) -> str:
        return f"Is this dish {row['options'][0]}? Answer yes or no."

    def reference(self, row: Mapping[str, Any], lang: str = "zh") -> Any:
        return "yes" if row["answer"] == "A" else "no"

    def parse(self, text: str, row: Mapping[str, Any], lang: str = "zh") -> Any:
        found = re.search(r"\b(yes|no)\b", text.lower())
        return found.group(1) if found else None

    def score(self, records: list[dict[str, Any]], parsed: Sequence[Any], rows: Sequence[Mapping[str, Any]],
              lang: str) -> dict[str, Any]:
        for record, answer in zip(records, parsed, strict=True):
            record["parsed"], record["correct"] = answer, answer is not None and answer == record["reference"]
        n = len(records)
        return {"accuracy": sum(r["correct"] for r in records) / n if n else None, "n": n,
                "parse_failures": sum(a is None for a in parsed)}


@pytest.fixture
def recognise() -> Iterator[Task]:
    task = tasks.register(Recognise())
    try:
        yield task
    finally:
        tasks.unregister(task.name)


def test_a_fourth_task_runs_end_to_end(recognise, tmp_path):
    out = tmp_path / "run"
    settings = RunSettings(task="recognise", model="baseline:first", out=out, n_boot=50, limit=12)
    api.run(settings, progress=False)

    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    scores = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    assert len(predictions) == len(scores) == 12 and {p["task"] for p in predictions} == {"recognise"}
    assert all(s["reference"] in ("yes", "no") and s["parsed"] in ("yes", "no") for s in scores)
    # hand-computed: the share of lines whose parsed answer is the reference
    right = sum(s["parsed"] == s["reference"] for s in scores)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["recognise"]["accuracy"] == right / 12
    assert metrics["recognise"]["n"] == 12 and "accuracy_ci95" in metrics["recognise"]

    text = report.build_report([load_run(out)], reported=False, n_boot=50)
    assert "Rec Acc (%)" in text and "n (cls/nut/vqa/rec)" in text
    assert f"{100 * right / 12:.2f}" in text
    card = model_card.results_table([load_run(out)], n_boot=50)
    assert "Yes/no dish recognition" in card

    # resuming asks nothing again: the same request hashes
    api.run(settings, progress=False)
    assert len((out / "predictions.jsonl").read_text().splitlines()) == 12


def test_a_fourth_task_goes_through_the_framework_adapters(recognise):
    """What inspect_ai's and lmms-eval's tasks call (adapters/common.py, framework-free): the items as the
    harness asks them, each answer scored by the task object, the summary figure folded again."""
    from adapters import common

    found = common.asked(common.settings_for("recognise", lang="en"))
    items = list(common.items(found))[:6]
    assert items and all(item.prompt.startswith("Is this dish ") and item.views for item in items)
    assert [item.reference for item in items] == [recognise.reference(item.row) for item in items]
    scoring = common.scoring(recognise, "en", found.settings.protocol)
    records = [common.score_answer(scoring, item.row, "yes" if k % 2 else "no") for k, item in enumerate(items)]
    right = sum(("yes" if k % 2 else "no") == item.reference for k, item in enumerate(items))
    assert [r["correct"] for r in records] == [("yes" if k % 2 else "no") == item.reference
                                               for k, item in enumerate(items)]
    assert common.summary(recognise, records) == right / 6  # hand-counted


def test_add_a_task_in_architecture_is_one_module(recognise):
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("- **A task**", 1)[1].split("\n- **", 1)[0]
    assert "eval/tasks/" in section and "register" in section
    assert Path(ROOT / "eval/tasks/base.py").is_file()


def test_the_lmms_eval_yamls_list_each_tasks_adapter_metric():
    for task in ("classification", "nutrition", "vqa"):
        text = (ROOT / "adapters" / "lmms_eval" / f"diningbench_{task}.yaml").read_text(encoding="utf-8")
        assert re.findall(r"^\s*- metric: (\w+)", text, flags=re.M) == [tasks.get(task).adapter_metric], task


def test_a_fourth_task_imports_from_an_lmms_eval_samples_file(recognise, tmp_path):
    """lmms-eval's lines for the fourth task (as adapters/lmms_eval/utils.py builds them) become a run folder
    scored by the task object: the importer knows a task, and its record's metric name, from the registry."""
    from adapters.lmms_eval import utils as lmms_utils
    from eval.importer import import_run

    sample = ROOT / "diningbench"
    docs = list(lmms_utils.recognise_process_docs(diningbench.load("classification", str(sample), decode_images=True)))
    lines = []
    for i, doc in enumerate(docs[:8]):
        raw = "yes" if i % 2 else "no"
        lines.append({"doc_id": i, "target": lmms_utils.recognise_doc_to_target(doc), "filtered_resps": [raw],
                      "input": lmms_utils.recognise_doc_to_text(doc), **lmms_utils.recognise_process_results(doc, [raw])})
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "20260101_000000_samples_diningbench_recognise.jsonl").write_text(
        "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    out = import_run(logs, "lmms-eval", tmp_path / "run")
    scores = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    targets = [lmms_utils.recognise_doc_to_target(doc) for doc in docs[:8]]  # the task's reference of each row
    assert set(targets) <= {"yes", "no"} and [s["reference"] for s in scores] == targets
    right = sum(("yes" if i % 2 else "no") == target for i, target in enumerate(targets))  # hand-counted
    assert len(scores) == 8 and {s["task"] for s in scores} == {"recognise"}
    assert json.loads((out / "metrics.json").read_text())["recognise"]["accuracy"] == right / 8
    assert json.loads((out / "run.json").read_text())["tasks"] == ["recognise"]
