"""The raw merchant export a build starts from (schema/raw_export.schema.json), read and checked.

RAW/merchants.jsonl, RAW/dishes.jsonl, RAW/photos.jsonl and the photo files they name (relative to RAW).
A malformed line is a one-line error naming the file and line: invalid JSON or UTF-8, a missing field,
an id given twice, a dish without a merchant or with an unknown one, a nutrition unit other than
per_serving / per_100g, a photo whose file does not exist. The export is read and checked whole
before a stage writes anything, so a bad export never touches a work folder's decisions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from construct.errors import BuildError
from diningbench import CUISINES, NUTRIENTS, iter_jsonl_objects

NUTRITION_UNITS = ("per_serving", "per_100g")
SCHEMA = Path(__file__).with_name("schema") / "raw_export.schema.json"


@dataclass(frozen=True)
class Merchant:
    merchant_id: str
    name: str
    cuisine: str


@dataclass(frozen=True)
class Dish:
    dish_id: str
    merchant_id: str
    name: str
    menu_category: str
    description: str
    ingredients: tuple[str, ...]
    portion: str
    nutrition: dict[str, Any] | None = None  # {"unit": per_serving|per_100g, calories, protein, carbohydrates, fat}


@dataclass(frozen=True)
class Photo:
    photo_id: str
    dish_id: str
    role: str  # reference | user
    path: str


@dataclass
class RawExport:
    root: Path
    merchants: dict[str, Merchant] = field(default_factory=dict)
    dishes: dict[str, Dish] = field(default_factory=dict)
    photos: dict[str, Photo] = field(default_factory=dict)

    def photo_path(self, photo_id: str) -> Path:
        return self.root / self.photos[photo_id].path

    def cuisine_of(self, dish_id: str) -> str:
        return self.merchants[self.dishes[dish_id].merchant_id].cuisine

    def menu(self, merchant_id: str, category: str) -> list[Dish]:
        return [d for d in self.dishes.values() if d.merchant_id == merchant_id and d.menu_category == category]


def _lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    if not path.exists():
        raise BuildError(f"raw export: {path.name} is missing in {path.parent}")
    return list(iter_jsonl_objects(path))


def _unique(table: dict[str, Any], key: str, where: str, id_field: str) -> None:
    if key in table:
        raise BuildError(f"{where}: {id_field} {key!r} appears twice")


def _need(row: dict[str, Any], where: str, *keys: str) -> None:
    missing = [k for k in keys if not isinstance(row.get(k), str) or not row[k].strip()]
    if missing:
        raise BuildError(f"{where}: missing or empty {', '.join(missing)}")


def load_raw(root: str | Path) -> RawExport:
    """Read and check a raw export folder."""
    root = Path(root)
    if not root.is_dir():
        raise BuildError(f"raw export folder {root} does not exist")
    raw = RawExport(root.resolve())
    for lineno, row in _lines(root / "merchants.jsonl"):
        where = f"merchants.jsonl line {lineno}"
        _need(row, where, "merchant_id", "name", "cuisine")
        _unique(raw.merchants, row["merchant_id"], where, "merchant_id")
        if row["cuisine"] not in CUISINES:
            raise BuildError(f"{where}: cuisine {row['cuisine']!r} is not one of {', '.join(CUISINES)}")
        raw.merchants[row["merchant_id"]] = Merchant(row["merchant_id"], row["name"], row["cuisine"])
    for lineno, row in _lines(root / "dishes.jsonl"):
        where = f"dishes.jsonl line {lineno}"
        if not isinstance(row.get("merchant_id"), str) or not row["merchant_id"].strip():
            raise BuildError(f"{where}: dish {row.get('dish_id')!r} has no merchant_id (every dish belongs to a merchant)")
        _need(row, where, "dish_id", "merchant_id", "name", "menu_category")
        _unique(raw.dishes, row["dish_id"], where, "dish_id")
        if row["merchant_id"] not in raw.merchants:
            raise BuildError(f"{where}: merchant_id {row['merchant_id']!r} is not in merchants.jsonl")
        ingredients = row.get("ingredients") or []
        if not isinstance(ingredients, list) or not all(isinstance(i, str) for i in ingredients):
            raise BuildError(f"{where}: ingredients must be a list of strings")
        nutrition = row.get("nutrition")
        if nutrition is not None:
            if not isinstance(nutrition, dict):
                raise BuildError(f"{where}: nutrition must be an object with a unit and {', '.join(NUTRIENTS)}")
            if "unit" not in nutrition:
                raise BuildError(f"{where}: nutrition needs a unit ({' or '.join(NUTRITION_UNITS)})")
            if nutrition["unit"] not in NUTRITION_UNITS:
                raise BuildError(f"{where}: nutrition unit {nutrition['unit']!r} is unknown "
                                 f"(one of {', '.join(NUTRITION_UNITS)})")
            bad = [n for n in NUTRIENTS if isinstance(nutrition.get(n), bool)
                   or not isinstance(nutrition.get(n), int | float)]
            if bad:
                raise BuildError(f"{where}: nutrition lacks numeric {', '.join(bad)}")
        raw.dishes[row["dish_id"]] = Dish(row["dish_id"], row["merchant_id"], row["name"], row["menu_category"],
                                          str(row.get("description") or ""), tuple(ingredients),
                                          str(row.get("portion") or ""), nutrition)
    for lineno, row in _lines(root / "photos.jsonl"):
        where = f"photos.jsonl line {lineno}"
        _need(row, where, "photo_id", "dish_id", "role", "path")
        _unique(raw.photos, row["photo_id"], where, "photo_id")
        if row["role"] not in ("reference", "user"):
            raise BuildError(f"{where}: role must be reference or user, got {row['role']!r}")
        if row["dish_id"] not in raw.dishes:
            raise BuildError(f"{where}: dish_id {row['dish_id']!r} is not in dishes.jsonl")
        path = (root / row["path"]).resolve()
        if raw.root not in path.parents:
            raise BuildError(f"{where}: path {row['path']!r} leaves the export folder")
        if not path.is_file():
            raise BuildError(f"{where}: photo file {row['path']!r} does not exist in {raw.root}")
        raw.photos[row["photo_id"]] = Photo(row["photo_id"], row["dish_id"], row["role"], row["path"])
    return raw
