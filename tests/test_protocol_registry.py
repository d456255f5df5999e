"""The protocol registry: one object per protocol, asked everywhere else; a third protocol is one module.

The toy protocol below is what ARCHITECTURE.md's "add a protocol" asks for: a module that subclasses
`Protocol` (here ours, with a lenient reading of its own beside it) and registers it. It runs end to
end (requests, answers, its reading, metrics.json, the summary table, the report, compare) on the
embedded sample, and nothing outside `eval/protocols/` and the release readers asks which protocol or
layout a run used.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from eval import api, protocols, tasks
from eval.protocols.base import TaskScoring
from eval.protocols.ours import Ours
from eval.report import report
from eval.report.runs import load_run
from eval.report.tables import results_table
from eval.settings import RunSettings, UsageError
from tests.tools.imports import ROOT

# What asking the protocol's name, the layout or a result's shape looks like (REVIEW.md's measures).
BY_NAME = r'(==|!=) ?"(official|ours)"|"official" if|in \(None, "ours"\)|not in PROTOCOLS'
BY_SHAPE = r'is_official\(|"prompt" in '
BY_RESULT = r'get\("official(_headline)?"\)|"official" in r|self\.official is not None|if authors|tally is (not )?None'


def _grep(pattern: str, *paths: str) -> list[str]:
    found = subprocess.run(["git", "grep", "-nE", pattern, "--", *paths], cwd=ROOT, capture_output=True, text=True)
    return found.stdout.splitlines()


def test_nothing_outside_the_protocols_asks_which_protocol_made_a_run():
    assert _grep(BY_NAME, "eval/*.py", "space/*.py", ":!eval/protocols") == []
    assert _grep(BY_SHAPE, "eval/*.py", "space/*.py", "adapters/*.py", ":!eval/protocols") == []
    assert _grep(BY_RESULT, "eval/*.py", "space/*.py", ":!eval/protocols") == []


def test_the_task_objects_hold_no_rule_of_a_protocol():
    for task in tasks.all_tasks():
        assert not [name for name in dir(task) if name.startswith("official")], task


def test_an_unknown_protocol_is_one_line_naming_the_known_ones():
    with pytest.raises(UsageError, match="unknown --protocol 'nope'; choose one of official, ours"):
        protocols.get("nope")


# ---------------------------------------------------------------- a third protocol, end to end
LAST_LETTER = re.compile(r"[A-H]")


class Lenient(Ours):
    """Ours, plus a lenient reading of classification answers: the last capital letter A-H anywhere in
    the answer is the choice (ours reads a marked or lone letter only); its accuracy is the headline."""

    name = "lenient"
    title = "a lenient reading"
    recorded = ("protocol",)

    def score(self, job: TaskScoring) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        records, entry = super().score(job)
        if job.spec.has_options:
            right = 0
            for record, prediction in zip(records, job.predictions, strict=True):
                letters = LAST_LETTER.findall(prediction.raw or "")
                record["lenient"] = letters[-1] if letters else None
                right += record["lenient"] == record["reference"]
            entry["lenient"] = {"acc": right / len(records) if records else None, "n": len(records)}
        return records, entry

    def own_figures(self, entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
        found = entry.get("lenient")
        return found if isinstance(found, Mapping) else None

    def headline(self, task: tasks.Task, entry: Mapping[str, Any]) -> tuple[str, float | None] | None:
        found = self.own_figures(entry)
        return None if found is None else ("acc", found.get("acc"))

    def headline_note(self, task: tasks.Task, entry: Mapping[str, Any]) -> str:
        return f"{task.name}: the headline reads the last letter A-H of each answer; ours beside it"


@pytest.fixture
def lenient() -> Iterator[protocols.Protocol]:
    protocol = protocols.register(Lenient())
    try:
        yield protocol
    finally:
        protocols.unregister(protocol.name)


def test_a_third_protocol_runs_end_to_end(lenient, tmp_path):
    out = tmp_path / "run"
    settings = RunSettings(task="classification", model="baseline:random", protocol="lenient", out=out, n_boot=50,
                           limit=16)
    api.run(settings, progress=False)

    info = json.loads((out / "run.json").read_text())
    assert info["settings"]["protocol"] == "lenient"
    scores = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    metrics = json.loads((out / "metrics.json").read_text())["classification"]
    # hand-computed from the saved answers: the share whose last letter A-H is the reference
    predictions = {p["id"]: p for p in map(json.loads, (out / "predictions.jsonl").read_text().splitlines())}
    right = sum((LAST_LETTER.findall(predictions[s["id"]]["raw"] or "") or [None])[-1] == s["reference"] for s in scores)
    assert metrics["lenient"] == {"acc": right / 16, "n": 16}

    table = results_table({"classification": metrics}, lenient)
    assert f"| lenient acc | {100 * right / 16:.2f} (ours: " in table
    assert "reads the last letter A-H" in table

    # its requests are its own (the protocol is part of their identity): a run under ours asks again
    ours = RunSettings(task="classification", model="baseline:random", out=tmp_path / "ours", n_boot=50, limit=16)
    api.run(ours, progress=False)
    hashes = {json.loads(line)["request_hash"] for line in (tmp_path / "ours" / "predictions.jsonl").read_text().splitlines()}
    assert hashes.isdisjoint(p["request_hash"] for p in predictions.values())
    assert "Cls Acc" in report.build_report([load_run(out)], reported=False, n_boot=50)


def test_the_protocol_a_run_recorded_decides_how_it_is_scored_again(lenient, tmp_path):
    out = tmp_path / "run"
    api.run(RunSettings(task="classification", model="baseline:first", protocol="lenient", out=out, n_boot=50,
                        limit=8), progress=False)
    (out / "metrics.json").unlink()
    again = api.score(out)
    assert "lenient" in again["classification"]


def test_a_new_protocol_is_one_module_in_architecture():
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("- **A protocol**", 1)[1].split("\n- **", 1)[0]
    assert "eval/protocols/" in section and "register" in section
