"""`--epochs K`: each item asked K times (seeded per epoch), resumable, scored over items and epochs."""

from __future__ import annotations

import json

import pytest

from eval import api, tasks
from eval.numbers import epoch_agreement
from eval.report.tables import results_table
from eval.settings import RunSettings
from tests.helpers_harness import make_release, read_jsonl


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return make_release(tmp_path_factory.mktemp("release") / "diningbench")


def test_agreement_counts_items_answered_alike_in_every_epoch():
    rows = [{"id": i, "epoch": e, "parsed": p} for i, answers in
            (("a", "AAA"), ("b", "ABA"), ("c", "CCC")) for e, p in enumerate(answers)]
    rows.append({"id": "d", "epoch": 0, "parsed": None})
    rows += [{"id": "d", "epoch": e, "parsed": None} for e in (1, 2)]  # unparsed thrice: not "alike"
    assert epoch_agreement(tasks.get("classification"), rows) == {"epochs": 3, "items": 4, "agreement": 0.5}
    assert epoch_agreement(tasks.get("classification"), rows[::3]) is None  # epoch 0 only: nothing to agree


def test_epochs_ask_each_item_k_times_resume_and_report_agreement(release, tmp_path):
    settings = RunSettings(task="classification", model="baseline:random", dataset=str(release), epochs=3,
                           out=tmp_path / "run", n_boot=50)
    out = api.run(settings, progress=False)
    lines = read_jsonl(out / "predictions.jsonl")
    assert sorted((r["id"], r["epoch"]) for r in lines) == sorted((f"c{i}", e) for i in range(1, 7) for e in range(3))
    assert len({r["request_hash"] for r in lines}) == 18  # each epoch is its own request (seed + epoch)
    metrics = json.loads((out / "metrics.json").read_text())["classification"]
    by_item: dict[str, set[str]] = {}
    for r in lines:
        by_item.setdefault(r["id"], set()).add(r["parsed"])
    alike = sum(len(v) == 1 for v in by_item.values())
    assert metrics["n"] == 18 and metrics["epochs"] == {"epochs": 3, "items": 6, "agreement": alike / 6}
    references = {"c1": "A", "c2": "B", "c3": "A", "c4": "C", "c5": "A", "c6": "D"}
    assert metrics["accuracy"] == pytest.approx(sum(r["parsed"] == references[r["id"]] for r in lines) / 18)
    assert "3 epochs" in results_table({"classification": metrics})

    api.run(settings, progress=False)  # the same command again: nothing asked, nothing duplicated
    assert len(read_jsonl(out / "predictions.jsonl")) == 18
