"""The baselines' leave-one-out answers, prepared once per pool, equal the plain definition: scan
every other item for each item asked (the O(N^2) way the definition reads)."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import pytest

from eval import api, tasks
from eval.api import RunSettings
from eval.backends.baseline import NAMES, BaselineBackend
from eval.types import NUTRIENTS, GenerationConfig, Request


def definition(name: str, items: dict[str, list[dict[str, Any]]], task: str, item_id: str, seed: int,
               lang: str = "zh") -> str:
    """Each baseline as its table reads, by scanning every other item."""
    rows = items[task]
    rng = random.Random(f"{name}:{seed}:{task}:{item_id}")

    def others(same: str | None = None) -> list[dict[str, Any]]:
        rest = [r for r in rows if r["id"] != item_id]
        if same is not None:
            mine = next((r.get(same) for r in rows if r["id"] == item_id), None)
            grouped = [r for r in rest if r.get(same) == mine]
            if grouped:
                return grouped
        return rest

    def most_common(values: list[Any]) -> Any:
        keys = [json.dumps(v, sort_keys=True, ensure_ascii=False) for v in values]
        best = max(Counter(keys).values())
        return next(v for v, k in zip(values, keys, strict=True) if Counter(keys)[k] == best)

    def median(values: list[float]) -> float:
        ordered, mid = sorted(values), len(values) // 2
        return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2

    if task == "classification":
        if name == "random":
            return rng.choice("ABCDEFGH")
        if name in ("first", "zero"):
            return {"first": "A", "zero": ""}[name]
        return str(most_common([r["reference"] for r in others("group" if name == "category-mean" else None)]))
    if task == "nutrition":
        if name == "zero":
            facts = dict.fromkeys(NUTRIENTS, 0.0)
        elif name in ("random", "first"):
            pool = others()
            facts = (rng.choice(pool) if name == "random" else pool[0])["reference"]
        else:
            pool = others("group" if name == "category-mean" else None)
            columns = {k: [float(r["reference"][k]) for r in pool] for k in NUTRIENTS}
            facts = {k: median(v) if name == "median" else sum(v) / len(v) for k, v in columns.items()}
        return json.dumps({k: round(float(facts[k]), 2) for k in NUTRIENTS})
    if name == "zero":
        return "无法判断。"
    if name in ("random", "first"):
        pool = others()
        return str((rng.choice(pool) if name == "random" else pool[0])["reference"])
    return str(most_common([r["reference"] for r in others("vqa_category" if name == "category-mean" else None)]))


def ask(backend: BaselineBackend, task: str, item_id: str, seed: int) -> str:
    request = Request(id=item_id, task=task, messages=(), config=GenerationConfig(seed=seed), request_hash="x",
                      metadata={"n_options": 8})
    return backend.answer(request)


def sample_items() -> dict[str, list[dict[str, Any]]]:
    data = api.load_task_data(RunSettings(task="all", model="baseline:zero"))
    return api.baseline_items(data, "zh")


@pytest.mark.parametrize("name", NAMES)
def test_every_answer_on_the_sample_equals_the_definition(name):
    items = sample_items()
    backend = BaselineBackend(name, items)
    for task, rows in items.items():
        for row in rows:
            for seed in (0, 7):
                assert ask(backend, task, row["id"], seed) == definition(name, items, task, row["id"], seed), \
                    (name, task, row["id"])


def test_ties_singletons_and_unknown_items_equal_the_definition():
    """Hand-made pools: ties broken by first sighting (also when the asked item was the first
    sighting), an item alone in its group (the whole task instead), an id outside the pool."""
    nutrition = [{"id": f"n{k}", "group": g, "vqa_category": None,
                  "reference": {"calories": c, "protein": c / 7, "carbohydrates": 0.1 * k, "fat": 1 / 3 + k}}
                 for k, (g, c) in enumerate([("a", 100.0), ("a", 250.5), ("b", 33.3), ("a", 100.0), ("c", 7.0),
                                             ("a", 0.1), ("b", 12.34)])]
    classification = [{"id": f"c{k}", "group": g, "vqa_category": None, "reference": letter}
                      for k, (g, letter) in enumerate([("x", "B"), ("x", "A"), ("x", "A"), ("x", "B"), ("y", "C"),
                                                       ("x", "C"), ("z", "D"), ("z", "D")])]
    vqa = [{"id": f"v{k}", "group": None, "vqa_category": cat, "reference": answer}
           for k, (cat, answer) in enumerate([("q", "红烧"), ("q", "清蒸"), ("r", "清蒸"), ("q", "红烧"), ("q", "清蒸")])]
    items = {"classification": classification, "nutrition": nutrition, "vqa": vqa}
    for name in NAMES:
        backend = BaselineBackend(name, items)
        for task, rows in items.items():
            for item_id in [r["id"] for r in rows] + ["outside"]:
                assert ask(backend, task, item_id, 3) == definition(name, items, task, item_id, 3), \
                    (name, task, item_id)
    # A hand-checked case: c0 (B, group x) sees A, A, B, C in x: A twice, first at c1.
    assert ask(BaselineBackend("category-mean", items), "classification", "c0", 0) == "A"
    # c1 (A) sees B, A, B, C: B twice (c0 first), A once.
    assert ask(BaselineBackend("category-mean", items), "classification", "c1", 0) == "B"


def test_the_harness_passes_each_row_once_to_the_baselines():
    data = api.load_task_data(RunSettings(task="nutrition", model="baseline:zero"))
    assert [r["id"] for r in api.baseline_items(data, "zh")["nutrition"]] == [str(r["id"]) for r in data[0].rows]
    assert all(r["reference"] == tasks.reference_of("nutrition", row, "zh")
               for r, row in zip(api.baseline_items(data, "zh")["nutrition"], data[0].rows, strict=True))
