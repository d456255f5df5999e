"""Nutrition estimation: calories, protein, carbohydrates and fat of one serving, from its photos."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from eval import official, prompts
from eval.tasks.base import VALIDATE_HINT, Task, register
from eval.types import NUTRIENTS
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

    def score(self, records: list[dict[str, Any]], parsed: Sequence[Any], rows: Sequence[Mapping[str, Any]],
              lang: str) -> dict[str, Any]:
        result = score_parsed_nutrition(list(parsed), [r["reference"] for r in records])
        for record, item in zip(records, result["per_item"], strict=True):
            record["parsed"], record["ape"], record["abs_error"] = item["parsed"], item["ape"], item["abs_error"]
        return result


    def official_headline(self, figures: Mapping[str, Any]) -> tuple[str, float | None]:
        value = figures.get("avg_mape")  # their MAPE is in percent; tables show fractions as percent
        return "avg_mape", None if value is None else value / 100

    def official_images(self, row: Mapping[str, Any], indices: Sequence[int]) -> list[int]:
        """Their nutrition script: 0 is the merchant photo (when there is one), k the k-th customer photo;
        nothing valid: the merchant photo, else the first customer photo."""
        roles = list(row.get("image_roles") or [])
        n = len(row.get("images") or row.get("image_paths") or roles)
        standard = 1 if roles[:1] == ["reference"] else 0
        chosen = [k - 1 + standard for k in indices if (k == 0 and standard) or (k > 0 and k - 1 < n - standard)]
        return chosen or ([0] if n else [])

    def official_fails(self, row: Mapping[str, Any], indices: Sequence[int]) -> str | None:
        """Their nutrition script indexes `user_images` as a list: one given as a single string is indexed
        by character, so a customer photo it picks (an index past 0, or its fallback when the row has no
        merchant photo) is a one-character path, which is no file, and the request fails."""
        published = self.published(row)
        if not isinstance(users := published.get("user_images"), str):
            return None
        standard = published.get("standard_image")
        picked = [users[k - 1] for k in indices if 0 < k <= len(users)]
        if not picked and not standard and users:
            picked = [users[0]]  # nothing chosen and no merchant photo: their fallback, the string's first character
        return f"Image does not exist: {picked[0]}" if picked else None

    def official_item(self, model_pred: str, row: Mapping[str, Any], gt_answer: str | None = None) -> dict[str, Any]:
        answer = official.parse_nutrition_answer(model_pred.strip())
        read = None if answer is None else {k: answer[k] for k in NUTRIENTS}
        return {"read": read, "correct": None, "parse_failed": answer is None}

    def official_figures(self, rows: Sequence[Mapping[str, Any]], preds: Mapping[int, Mapping[str, Any]]
                         ) -> dict[str, Any]:
        return official.nutrition_figures(rows, preds)


TASK = register(Nutrition())
