"""The shipped USDA per-100 g table and the exact nutrition of a gram-weighed dish."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from pathlib import Path

TABLE = Path(__file__).with_name("usda_per100g.csv")


@dataclass(frozen=True)
class Ingredient:
    key: str
    fdc_id: int
    description: str
    name_zh: str
    name_en: str
    kcal: float
    protein: float
    carbohydrates: float
    fat: float


@dataclass(frozen=True)
class Nutrition:
    """Per serving: kcal and grams, as the `nutrition` config stores them."""

    calories: float
    protein: float
    carbohydrates: float
    fat: float


@cache
def table() -> dict[str, Ingredient]:
    """Load the CSV once ('#' lines are the provenance header)."""
    with TABLE.open(encoding="utf-8") as fh:
        rows = csv.DictReader(line for line in fh if not line.startswith("#"))
        return {
            r["key"]: Ingredient(r["key"], int(r["fdc_id"]), r["description"], r["name_zh"], r["name_en"],
                                 float(r["kcal"]), float(r["protein"]), float(r["carbohydrates"]), float(r["fat"]))
            for r in rows
        }


def ingredient(key: str) -> Ingredient:
    try:
        return table()[key]
    except KeyError:
        raise KeyError(f"ingredient {key!r} is not in {TABLE.name}") from None


def nutrition_of(grams: dict[str, float]) -> Nutrition:
    """Exact nutrition of a dish from its ingredient weights, computed, not estimated: Σ grams/100 × per-100 g
    value, rounded to 0.1."""
    sums = [0.0, 0.0, 0.0, 0.0]
    for key, g in grams.items():
        ing = ingredient(key)
        for i, per100 in enumerate((ing.kcal, ing.protein, ing.carbohydrates, ing.fat)):
            sums[i] += g / 100.0 * per100
    return Nutrition(*(round(v, 1) for v in sums))
