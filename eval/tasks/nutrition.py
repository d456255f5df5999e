"""Nutrition estimation: calories, protein, carbohydrates and fat of one serving, from its photos."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from eval import prompts
from eval.tasks.base import VALIDATE_HINT, Task, register
from eval.types import NUTRIENTS, ScoreRecord
from metrics.nutrition_error.core import parse_nutrition, score_parsed_nutrition


class Nutrition(Task):
    name = "nutrition"
    title = "Nutrition"
    short = "Nutr"
    hub_name = "Nutrition estimation"
    measure = "ape"
    components = NUTRIENTS
    answer_format = "nutrients"
    human_question = "Estimate the nutrition"
    item_fields = ("nutrition_source",)
    breakdowns = ("cuisine", "category", "nutrition_source", "n_images")
    adapter_metric = "avg_mape"

    def prompt(self, row: Mapping[str, Any], *, lang: str, cot: bool) -> str:
        return prompts.nutrition_prompt(lang, cot=cot)

    def reference(self, row: Mapping[str, Any], lang: str = "zh") -> Any:
        values = {k: row.get(k) for k in NUTRIENTS}
        usable = {k: float(v) for k, v in values.items()
                  if isinstance(v, int | float) and math.isfinite(v) and v >= 0}
        if len(usable) < len(values):
            bad = [f"{k}={v}" for k, v in values.items() if k not in usable]
            raise ValueError(f"{self.name} item {row.get('id')}: nutrition must be finite and >= 0 "
                             f"({', '.join(bad)}); {VALIDATE_HINT}")
        return usable

    def parse(self, text: str, row: Mapping[str, Any], lang: str = "zh") -> Any:
        return parse_nutrition(text)

    def score(self, records: list[ScoreRecord], parsed: Sequence[Any], rows: Sequence[Mapping[str, Any]],
              lang: str) -> dict[str, Any]:
        result = score_parsed_nutrition(list(parsed), [r["reference"] for r in records])
        for record, item in zip(records, result["per_item"], strict=True):
            record["parsed"], record["ape"], record["abs_error"] = item["parsed"], item["ape"], item["abs_error"]
        return result


TASK = register(Nutrition())
