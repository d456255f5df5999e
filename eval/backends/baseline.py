"""`baseline:NAME`: reference baselines without weights, run through the same runner and metrics.

They answer from the dataset's references (passed in as the `dataset_items` option: task ->
items with id, group (menu category), vqa_category and reference), always leaving the asked item
out, so none of them can see its own answer. What each one does per task:

| baseline      | classification                    | nutrition                          | vqa                                   |
|---------------|-----------------------------------|------------------------------------|---------------------------------------|
| random        | a letter, seeded by (seed, id)    | another item's facts, seeded       | another item's answer, seeded         |
| first         | always "A" (answer-position bias) | the first other item's facts       | the first other item's answer         |
| zero          | no answer (unparsed = wrong)      | 0 for every nutrient (MAPE 100%)   | an abstention ("cannot determine")    |
| median        | most common other answer letter   | per-nutrient median of the others  | most common other answer              |
| category-mean | most common letter, same category | mean of the same menu category     | most common answer, same vqa_category |

`category-mean` falls back to the whole dataset when an item is alone in its category; ties in
"most common" go to the answer seen first in dataset order.

Chance is not one of them: a backend can only give one letter per item, so a "chance" answerer
would be `random` again, with a score that wanders around the expectation. The expectation itself is
computed instead (`eval.figures.chance_accuracy`: the mean over items of 1/number of options, 12.50% with 8
options) and every report shows it as the `chance` row of Table 2 and a dashed line on the
classification accuracy plots; `baseline:chance` is refused with a pointer there. `median` can score
below it (0% on a sample balanced over letters: its most common letter is never the answer).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from eval.backends.policy import refuse_options
from eval.types import NUTRIENTS, ConfigError, Request, Response

NAMES = ("random", "first", "zero", "median", "category-mean")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
CHANCE_NOTE = ("chance is computed, not sampled: every report's Table 2 has a `chance` row (the mean of "
               "1/number of options, 12.50% with 8) and the accuracy plots a dashed chance line; "
               "baseline:random samples one letter per item")
ABSTAIN = {"zh": "无法判断。", "en": "Cannot determine."}


def _most_common(values: Sequence[Any]) -> Any:
    counts = Counter(json.dumps(v, sort_keys=True, ensure_ascii=False) for v in values)
    best = max(counts.values())
    for value in values:  # first in dataset order among the most frequent
        if counts[json.dumps(value, sort_keys=True, ensure_ascii=False)] == best:
            return value
    return None


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


class BaselineBackend:
    """A no-skill reference answerer; `generate` is pure given (items, seed)."""

    def __init__(self, name: str, items: Mapping[str, Sequence[Mapping[str, Any]]], *, lang: str = "zh") -> None:
        if name not in NAMES:
            raise ConfigError(f"unknown baseline {name!r}; choose one of {', '.join(NAMES)}")
        self.spec = f"baseline:{name}"
        self.name = name
        self.lang = lang
        self.items = {task: list(rows) for task, rows in items.items()}

    def _others(self, task: str, item_id: str, *, same: str | None = None) -> list[Mapping[str, Any]]:
        rows = self.items.get(task)
        if rows is None:
            raise ConfigError(f"baseline:{self.name} has no dataset references for task {task!r}")
        others = [r for r in rows if r["id"] != item_id]
        if same is not None:
            mine = next((r.get(same) for r in rows if r["id"] == item_id), None)
            grouped = [r for r in others if r.get(same) == mine]
            if grouped:
                return grouped
        return others

    def answer(self, request: Request) -> str:
        task, item_id, seed = request.task, request.id, request.config.seed
        rng = random.Random(f"{self.name}:{seed}:{task}:{item_id}")
        if task == "classification":
            n_options = int(request.metadata.get("n_options") or 8)
            if self.name == "random":
                return rng.choice(LETTERS[:n_options])
            if self.name == "first":
                return "A"
            if self.name == "zero":
                return ""
            group = "group" if self.name == "category-mean" else None
            return str(_most_common([r["reference"] for r in self._others(task, item_id, same=group)]) or "")
        if task == "nutrition":
            if self.name == "zero":
                facts = dict.fromkeys(NUTRIENTS, 0.0)
            elif self.name in ("random", "first"):
                others = self._others(task, item_id)
                facts = (rng.choice(others) if self.name == "random" else others[0])["reference"]
            else:
                group = "group" if self.name == "category-mean" else None
                others = self._others(task, item_id, same=group)
                columns = {k: [float(r["reference"][k]) for r in others] for k in NUTRIENTS}
                if self.name == "median":
                    facts = {k: _median(v) for k, v in columns.items()}
                else:
                    facts = {k: sum(v) / len(v) for k, v in columns.items()}
            return json.dumps({k: round(float(facts[k]), 2) for k in NUTRIENTS})
        if task == "vqa":
            if self.name == "zero":
                return ABSTAIN.get(self.lang, ABSTAIN["en"])
            if self.name in ("random", "first"):
                others = self._others(task, item_id)
                return str((rng.choice(others) if self.name == "random" else others[0])["reference"])
            group = "vqa_category" if self.name == "category-mean" else None
            return str(_most_common([r["reference"] for r in self._others(task, item_id, same=group)]))
        raise ConfigError(f"baseline:{self.name} does not know task {task!r}")

    async def generate(self, request: Request) -> Response:
        return Response(text=self.answer(request), usage=None, finish_reason="stop")

    def describe(self) -> dict[str, Any]:
        return {"backend": "baseline", "model": self.name, "base_url_host": None,
                "note": "reference baseline without weights; leave-one-out over the dataset's references"}


def make(model: str, *, dataset_items: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
         lang: str = "zh", reasoning_effort: str | None = None, thinking_budget: int | None = None,
         **_: Any) -> BaselineBackend:
    refuse_options(f"baseline:{model}", reasoning_effort=reasoning_effort, thinking_budget=thinking_budget)
    if model == "chance":
        raise ConfigError(CHANCE_NOTE)
    if model not in NAMES:
        raise ConfigError(f"unknown baseline {model!r}; choose one of {', '.join(NAMES)}")
    if dataset_items is None:
        raise ConfigError(f"baseline:{model} needs the dataset's references (the harness passes dataset_items)")
    return BaselineBackend(model, dataset_items, lang=lang)
