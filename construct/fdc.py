"""USDA FoodData Central, read from the official CSV download, for the independent nutrition check (computed
by code). `--fdc DIR` takes the unzipped download (https://fdc.nal.usda.gov/download-datasets).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from construct.errors import BuildError

NUTRIENT_NUMBERS = {"208": "calories", "203": "protein", "205": "carbohydrates", "204": "fat"}
MIN_MATCH = 0.5  # word overlap below which no FDC food is taken for an ingredient
BUNDLED = Path(__file__).resolve().parents[1] / "data" / "fdc_sr28_sample"


def load(folder: str | None) -> tuple[FoodData | None, str]:
    """(the FDC data, where it came from): `--fdc`'s folder, else the bundled subset when present."""
    if folder:
        return FoodData(folder), Path(folder).name
    if (BUNDLED / "food.csv").is_file():
        return FoodData(BUNDLED), f"the bundled SR28 subset ({BUNDLED.name})"
    return None, ""


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
            wanted = {row["id"]: NUTRIENT_NUMBERS[nbr] for row in csv.DictReader(fh)
                      if (nbr := row.get("nutrient_nbr", "").split(".")[0]) in NUTRIENT_NUMBERS
                      and (nbr != "208" or row.get("unit_name", "").upper() == "KCAL")}
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
        scored = ((len(q & words) / len(q | words), food) for food, words in self._words if q)
        score, best = max(scored, key=lambda pair: pair[0], default=(0.0, None))  # ties: the first
        return best if score >= MIN_MATCH else None


GRAMS = re.compile(r"(\d+(?:\.\d+)?)\s*(千克|公斤|kg|克|grams?|g|毫升|ml)(?![a-z])", re.I)


def entry_grams(entry: str) -> float | None:
    """The weight an ingredient entry states, in grams (millilitres read as grams), or None.

    >>> entry_grams("牛肉 120克"), entry_grams("beef 0.2 kg"), entry_grams("broth 300 ml"), entry_grams("egg 2")
    (120.0, 200.0, 300.0, None)
    """
    match = GRAMS.search(entry)
    if match is None:
        return None
    value = float(match.group(1))
    return value * 1000 if match.group(2).lower() in ("千克", "公斤", "kg") else value


def ingredient_check(data: FoodData, entries: list[str] | tuple[str, ...],
                     glossary: dict[str, str] | None = None) -> dict:
    """Per-serving values computed by code from the export's own ingredient entries: each entry's grams x its
    FDC food's per-100 g values, the food found through the lexicon (construct/lexicon.py, either language),
    else the build's glossary, else the entry's own words.

    Returns {"computed": the sums, "coverage": share of the stated grams matched to a food, "matched":
    [[entry, fdc_id]], "unmatched": [entries], "unweighed": [entries that state no grams]}."""
    from construct.lexicon import QUANTITY, fdc_description

    sums = {n: 0.0 for n in NUTRIENT_NUMBERS.values()}
    total = matched_grams = 0.0
    matched, unmatched, unweighed = [], [], []
    for entry in entries:
        grams = entry_grams(entry)
        if grams is None or grams <= 0:
            unweighed.append(entry)
            continue
        total += grams
        description = fdc_description(entry, glossary)
        food = data.lookup(description) if description else None
        if food is None:
            name = " ".join(QUANTITY.sub(" ", entry).split())
            food = data.lookup((glossary or {}).get(name, name))
        if food is None:
            unmatched.append(entry)
            continue
        matched_grams += grams
        matched.append([entry, food.fdc_id])
        for n in sums:
            sums[n] += food.per100g[n] * grams / 100.0
    return {"computed": {k: round(v, 1) for k, v in sums.items()},
            "coverage": round(matched_grams / total, 3) if total else 0.0,
            "matched": matched, "unmatched": unmatched, "unweighed": unweighed}


def kcal_gap(computed: dict[str, float], values: dict[str, float] | None) -> float | None:
    """|values' kcal - computed kcal| / computed kcal, or None without both.

    >>> kcal_gap({"calories": 500.0}, {"calories": 600.0})
    0.2
    """
    if not values or computed.get("calories", 0) <= 0:
        return None
    return round(abs(float(values["calories"]) - computed["calories"]) / computed["calories"], 3)
