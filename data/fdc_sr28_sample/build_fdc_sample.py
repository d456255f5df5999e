"""Rebuild this folder (FoodData Central CSV format) from the USDA SR28 ASCII release.

    python data/fdc_sr28_sample/build_fdc_sample.py /path/to/sr28

Takes the foods of synthetic/usda_per100g.csv (matched by description to SR28's Long_Desc; the fdc_id
is the SR Legacy id that table cites) plus a few look-alike foods, with energy, protein, fat and
carbohydrate per 100 g, and writes food.csv, nutrient.csv and food_nutrient.csv as FDC does.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TABLE = HERE.parents[1] / "synthetic" / "usda_per100g.csv"
FDC_NUTRIENTS = [("1008", "Energy", "KCAL", "208"), ("1003", "Protein", "G", "203"),
             ("1004", "Total lipid (fat)", "G", "204"), ("1005", "Carbohydrate, by difference", "G", "205")]
# The shipped table names four foods as FoodData Central does today; SR28 spells them thus.
SR28_NAMES = {"Chicken breast, skinless, boneless, meat only, raw":
              "Chicken, broiler or fryers, breast, skinless, boneless, meat only, raw",
              "Chicken thigh, meat only, raw": "Chicken, broilers or fryers, dark meat, thigh, meat only, raw",
              "Crustaceans, shrimp, raw": "Crustaceans, shrimp, raw (not previously frozen)",
              "Oil, vegetable, soybean, refined": "Oil, soybean, salad or cooking"}
EXTRA = ["Rice, brown, long-grain, cooked", "Chicken, broilers or fryers, breast, meat only, cooked, roasted",
         "Beef, ground, 80% lean meat / 20% fat, raw", "Lettuce, iceberg (includes crisphead types), raw"]


def sr28(folder: Path, name: str) -> list[list[str]]:
    text = (folder / name).read_text(encoding="latin-1")
    return [[f.strip("~") for f in line.split("^")] for line in text.splitlines() if line.strip()]


def main(folder: Path) -> None:
    with TABLE.open(encoding="utf-8") as fh:
        wanted = {r["description"]: r["fdc_id"] for r in csv.DictReader(line for line in fh if not line.startswith("#"))}
    foods = {row[2]: row[0] for row in sr28(folder, "FOOD_DES.txt")}
    values: dict[str, dict[str, str]] = {}
    for row in sr28(folder, "NUT_DATA.txt"):
        values.setdefault(row[0], {})[row[1]] = row[2]
    for fdc_name, sr_name in SR28_NAMES.items():
        if sr_name in foods:
            foods[fdc_name] = foods[sr_name]
    picked = [(fdc, desc) for desc, fdc in wanted.items() if desc in foods]
    picked += [(str(900000 + k), desc) for k, desc in enumerate(EXTRA) if desc in foods]  # not real fdc_ids: marked
    missing = sorted(set(wanted) - {d for _, d in picked})
    with (HERE / "food.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_ALL)
        w.writerow(["fdc_id", "data_type", "description", "food_category_id", "publication_date"])
        for fdc, desc in picked:
            w.writerow([fdc, "sr_legacy_food", desc, "", "2019-04-01"])
    with (HERE / "nutrient.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_ALL)
        w.writerow(["id", "name", "unit_name", "nutrient_nbr", "rank"])
        for nid, name, unit, nbr in FDC_NUTRIENTS:
            w.writerow([nid, name, unit, nbr, ""])
    with (HERE / "food_nutrient.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_ALL)
        w.writerow(["id", "fdc_id", "nutrient_id", "amount", "data_points", "derivation_id", "min", "max", "median",
                    "footnote", "min_year_acquired"])
        n = 0
        for fdc, desc in picked:
            for nid, _, _, nbr in FDC_NUTRIENTS:
                amount = values[foods[desc]].get(nbr)
                if amount is not None:
                    n += 1
                    w.writerow([n, fdc, nid, amount, "", "", "", "", "", "", ""])
    print(f"{len(picked)} foods; not in SR28 by description: {missing or 'none'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
