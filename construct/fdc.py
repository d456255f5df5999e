"""USDA FoodData Central, read from the official CSV download (food.csv, nutrient.csv,
food_nutrient.csv), for the ingredient-level cross-check of nutrition estimates.

Point `--fdc DIR` at the unzipped download (https://fdc.nal.usda.gov/download-datasets, e.g. "SR Legacy").
Only energy (nutrient number 208, kcal), protein (203), fat (204) and carbohydrate (205) are kept.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from construct.errors import BuildError

NUTRIENT_NUMBERS = {"208": "calories", "203": "protein", "205": "carbohydrates", "204": "fat"}
MIN_MATCH = 0.5  # word overlap below which no FDC food is taken for an ingredient


@dataclass(frozen=True)
class Food:
    fdc_id: int
    description: str
    per100g: dict[str, float]  # calories (kcal), protein, carbohydrates, fat (g) per 100 g


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


class FoodData:
    """Foods with all four values, looked up by description."""

    def __init__(self, folder: str | Path) -> None:
        folder = Path(folder)
        for name in ("food.csv", "nutrient.csv", "food_nutrient.csv"):
            if not (folder / name).is_file():
                raise BuildError(f"--fdc {folder}: {name} is missing (expected the FoodData Central CSV download)")
        with (folder / "nutrient.csv").open(encoding="utf-8-sig", newline="") as fh:
            wanted = {row["id"]: NUTRIENT_NUMBERS[row["nutrient_nbr"].split(".")[0]] for row in csv.DictReader(fh)
                      if row.get("nutrient_nbr", "").split(".")[0] in NUTRIENT_NUMBERS
                      and (row["nutrient_nbr"].split(".")[0] != "208" or row.get("unit_name", "").upper() == "KCAL")}
        values: dict[str, dict[str, float]] = {}
        with (folder / "food_nutrient.csv").open(encoding="utf-8-sig", newline="") as fh:
            for row in csv.DictReader(fh):  # streamed: the full download is over a gigabyte
                name = wanted.get(row["nutrient_id"]) or ""
                if name and row.get("amount"):
                    values.setdefault(row["fdc_id"], {})[name] = float(row["amount"])
        self.foods: list[Food] = []
        with (folder / "food.csv").open(encoding="utf-8-sig", newline="") as fh:
            for row in csv.DictReader(fh):
                per100 = values.get(row["fdc_id"], {})
                if len(per100) == 4:
                    self.foods.append(Food(int(row["fdc_id"]), row["description"], per100))
        self._exact = {f.description.lower(): f for f in self.foods}
        self._words = [(f, _words(f.description)) for f in self.foods]

    def lookup(self, query: str) -> Food | None:
        """Exact description first, else the food whose words overlap most (Jaccard >= MIN_MATCH)."""
        if (hit := self._exact.get(query.strip().lower())) is not None:
            return hit
        q = _words(query)
        best, score = None, 0.0
        for food, words in self._words:
            s = len(q & words) / len(q | words) if q else 0.0
            if s > score:
                best, score = food, s
        return best if score >= MIN_MATCH else None


def cross_check(data: FoodData, ingredients: list[dict], estimate: dict[str, float]) -> dict:
    """Sum FDC values over the model's ingredient breakdown and compare calories with the estimate.

    Returns {"coverage": share of grams matched, "fdc": the sums, "kcal_gap": relative gap or None,
    "matched": [(ingredient, fdc_id)]}.
    """
    sums = {n: 0.0 for n in NUTRIENT_NUMBERS.values()}
    total = matched_grams = 0.0
    matched = []
    for ing in ingredients:
        try:
            grams = float(ing.get("grams") or 0)
        except (TypeError, ValueError):
            grams = 0.0
        total += grams
        food = data.lookup(str(ing.get("usda_description") or ing.get("name") or ""))
        if food is None or grams <= 0:
            continue
        matched_grams += grams
        matched.append((str(ing.get("name", "")), food.fdc_id))
        for n in sums:
            sums[n] += food.per100g[n] * grams / 100.0
    coverage = matched_grams / total if total else 0.0
    gap = abs(estimate["calories"] - sums["calories"]) / sums["calories"] if sums["calories"] > 0 else None
    return {"coverage": round(coverage, 3), "fdc": {k: round(v, 1) for k, v in sums.items()},
            "kcal_gap": None if gap is None else round(gap, 3), "matched": matched}
