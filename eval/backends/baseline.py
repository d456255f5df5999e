"""`baseline:NAME`: reference baselines without weights, run through the same runner and metrics; what each
answers per task is README.md's "Baselines" table."""

from __future__ import annotations

import bisect
import json
import math
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from eval import tasks
from eval.backends.policy import refuse_options
from eval.types import ALPHABET, BackendOptions, BackendTraits, ConfigError, Request, Response

NAMES = ("random", "first", "zero", "median", "category-mean")
# Chance is no baseline: a backend gives one letter per item, so a "chance" answerer would be `random` again,
# its score wandering around the expectation. That is computed instead (`eval.numbers.chance_accuracy`);
# `median` can score below it (0% on a sample balanced over letters: its most common letter is never right).
CHANCE_NOTE = ("chance is computed, not sampled: every report's Table 2 has a `chance` row (the mean of "
               "1/number of options, 12.50% with 8) and the accuracy plots a dashed chance line; "
               "baseline:random samples one letter per item")
ABSTAIN = {"zh": "无法判断。", "en": "Cannot determine."}


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


class _Pool:
    """The references of a set of items (a task's, or one group's), in dataset order, prepared so that each
    leave-one-out answer costs O(1) instead of a scan of every item. Leaving item i out: the most common
    answer is the best (count, first position) once i's own answer loses one count (and, when i was its first
    sighting, its first position moves on to the next one); a mean is the exact sum less i's value; a median
    is read around i's place in sorted order."""

    def __init__(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self.rows = list(rows)
        self.position = {r["id"]: k for k, r in enumerate(self.rows)}
        self.keys = [_key(r["reference"]) for r in self.rows]
        self.count = Counter(self.keys)
        self.sightings: dict[str, list[int]] = {}
        for k, key in enumerate(self.keys):
            seen = self.sightings.setdefault(key, [])
            if len(seen) < 2:
                seen.append(k)
        # Best first: most frequent, then first seen in dataset order.
        self.ranked = sorted(self.count, key=lambda key: (-self.count[key], self.sightings[key][0]))
        self._numbers: dict[str, tuple[list[float], Fraction, list[float]]] = {}

    def others(self, item_id: str) -> int:
        """How many items are left once `item_id` is left out."""
        return len(self.rows) - (item_id in self.position)

    def other(self, index: int, item_id: str) -> Mapping[str, Any]:
        """The index-th item of the pool without `item_id`."""
        mine = self.position.get(item_id)
        return self.rows[index + 1 if mine is not None and index >= mine else index]

    def most_common(self, item_id: str) -> Any:
        mine = self.position.get(item_id)
        own = self.keys[mine] if mine is not None else None
        best = next((key for key in self.ranked if key != own), None)
        candidates = [] if best is None else [(-self.count[best], self.sightings[best][0], best)]
        if own is not None and self.count[own] > 1:
            seen = self.sightings[own]
            first = seen[1] if seen[0] == mine else seen[0]
            candidates.append((-(self.count[own] - 1), first, own))
        return self.rows[min(candidates)[1]]["reference"] if candidates else None

    def _column(self, nutrient: str) -> tuple[list[float], Fraction, list[float]]:
        if nutrient not in self._numbers:
            values = [float(r["reference"][nutrient]) for r in self.rows]
            self._numbers[nutrient] = (values, sum(map(Fraction, values), Fraction(0)), sorted(values))
        return self._numbers[nutrient]

    def mean(self, nutrient: str, item_id: str) -> float:
        """The others' mean as `sum(values) / len(values)` gives it, to the 2 decimals answers keep. The exact
        mean (the pool's exact sum less this item's value) differs from the one summed in order by a few units
        in the last place; that changes the rounded answer only within that distance of a midpoint (x.xx5),
        and only then is the sum taken in order."""
        values, total, ordered = self._column(nutrient)
        mine = self.position.get(item_id)
        if mine is not None:
            total -= Fraction(values[mine])
        n = self.others(item_id)
        exact = total / n
        # Summing n floats in order errs by at most (n - 1) ulp-halves of the largest partial sum,
        # the division by one more: 4 (n + 1) 2^-53 max|x| is a generous bound on |in order - exact|.
        bound = Fraction(4 * (n + 1) * max(abs(ordered[0]), abs(ordered[-1]))) / 2**53
        hundredths = exact * 100
        if abs(hundredths - math.floor(hundredths) - Fraction(1, 2)) * Fraction(1, 100) > bound:
            return float(exact)
        return sum(v for k, v in enumerate(values) if k != mine) / n

    def median(self, nutrient: str, item_id: str) -> float:
        values, _, ordered = self._column(nutrient)
        mine = self.position.get(item_id)
        skip = None if mine is None else bisect.bisect_left(ordered, values[mine])
        n = len(ordered) - (skip is not None)

        def at(k: int) -> float:  # the k-th smallest once `skip` is left out
            return ordered[k + 1 if skip is not None and k >= skip else k]

        mid = n // 2
        return at(mid) if n % 2 else (at(mid - 1) + at(mid)) / 2


class BaselineBackend:
    """A no-skill reference answerer; `generate` is pure given (items, seed). `items` is the `dataset_items`
    option: task -> items with id, group (menu category), vqa_category and reference."""

    def __init__(self, name: str, items: Mapping[str, Sequence[Mapping[str, Any]]], *, lang: str = "zh") -> None:
        if name not in NAMES:
            raise ConfigError(f"unknown baseline {name!r}; choose one of {', '.join(NAMES)}")
        self.spec = f"baseline:{name}"
        self.name = name
        self.lang = lang
        self.items = {task: list(rows) for task, rows in items.items()}
        self._pools: dict[tuple[str, str | None, Any], _Pool] = {}
        self._groups: dict[tuple[str, str], dict[Any, list[Mapping[str, Any]]]] = {}
        self._group_of: dict[tuple[str, str], dict[str, Any]] = {}

    def _pool(self, task: str, item_id: str, *, same: str | None = None) -> _Pool:
        """The items an answer is drawn from, `item_id` left out by the pool: the task's items, or
        those of the item's own group (`same`) when any other item shares it."""
        rows = self.items.get(task)
        if rows is None:
            raise ConfigError(f"baseline:{self.name} has no dataset references for task {task!r}")
        key: tuple[str, str | None, Any] = (task, None, None)
        if same is not None:
            if (task, same) not in self._groups:
                groups: dict[Any, list[Mapping[str, Any]]] = {}
                for row in rows:
                    groups.setdefault(_key(row.get(same)), []).append(row)
                self._groups[(task, same)] = groups
                self._group_of[(task, same)] = {r["id"]: _key(r.get(same)) for r in rows}
            group_of = self._group_of[(task, same)]
            group = group_of.get(item_id, _key(None))
            members = self._groups[(task, same)].get(group, [])
            if len(members) > (item_id in group_of):  # another item shares the group
                key, rows = (task, same, group), members
        if key not in self._pools:
            self._pools[key] = _Pool(rows)
        return self._pools[key]

    def answer(self, request: Request) -> str:
        task, item_id, seed = request.task, request.id, request.config.seed
        rng = random.Random(f"{self.name}:{seed}:{task}:{item_id}")
        if not tasks.is_task(task):
            raise ConfigError(f"baseline:{self.name} does not know task {task!r}")
        spec = tasks.get(task)
        if spec.answer_format == "letter":
            n_options = int(request.metadata.get("n_options") or 8)
            if self.name == "random":
                return rng.choice(ALPHABET[:n_options])
            if self.name == "first":
                return "A"
            if self.name == "zero":
                return ""
            group = "group" if self.name == "category-mean" else None
            return str(self._pool(task, item_id, same=group).most_common(item_id) or "")
        if spec.answer_format == "nutrients":
            parts = spec.components
            if self.name == "zero":
                facts = dict.fromkeys(parts, 0.0)
            elif self.name in ("random", "first"):
                pool = self._pool(task, item_id)
                index = rng.randrange(pool.others(item_id)) if self.name == "random" else 0
                facts = pool.other(index, item_id)["reference"]
            else:
                group = "group" if self.name == "category-mean" else None
                pool = self._pool(task, item_id, same=group)
                statistic = pool.median if self.name == "median" else pool.mean
                facts = {k: statistic(k, item_id) for k in parts}
            return json.dumps({k: round(float(facts[k]), 2) for k in parts})
        if spec.answer_format == "text":
            if self.name == "zero":
                return ABSTAIN.get(self.lang, ABSTAIN["en"])
            if self.name in ("random", "first"):
                pool = self._pool(task, item_id)
                index = rng.randrange(pool.others(item_id)) if self.name == "random" else 0
                return str(pool.other(index, item_id)["reference"])
            group = (spec.slice_field or "group") if self.name == "category-mean" else None
            return str(self._pool(task, item_id, same=group).most_common(item_id))
        raise ConfigError(f"baseline:{self.name} does not know task {task!r}")

    async def generate(self, request: Request) -> Response:
        return Response(text=self.answer(request), usage=None, finish_reason="stop")

    def describe(self) -> dict[str, Any]:
        return {"backend": "baseline", "model": self.name, "base_url_host": None,
                "note": "reference baseline without weights; leave-one-out over the dataset's references"}


TRAITS = BackendTraits()  # no weights, no key, no server: leave-one-out over the references


def make(model: str, options: BackendOptions) -> BaselineBackend:
    refuse_options(f"baseline:{model}", reasoning_effort=options.generation.reasoning_effort,
                   thinking_budget=options.generation.thinking_budget)
    if model == "chance":
        raise ConfigError(CHANCE_NOTE)
    if model not in NAMES:
        raise ConfigError(f"unknown baseline {model!r}; choose one of {', '.join(NAMES)}")
    if options.dataset_items is None:
        raise ConfigError(f"baseline:{model} needs the dataset's references (the harness passes dataset_items)")
    return BaselineBackend(model, options.dataset_items, lang=options.lang)
