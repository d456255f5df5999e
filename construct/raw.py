"""The raw merchant export a build starts from (schema/raw_export.schema.json), read and checked.

A malformed line is a one-line error naming the file and line: invalid JSON or UTF-8, a missing field, an
id given twice, a dish without a merchant or with an unknown one, a nutrition unit other than per_serving /
per_100g, a photo whose file does not exist. The export is checked whole before a stage writes anything, so
a bad export never touches a work folder's decisions."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from construct.errors import BuildError
from diningbench import CUISINES, NUTRIENTS, iter_jsonl_objects

NUTRITION_UNITS = ("per_serving", "per_100g")
EXPORT_INDEX = "export.sqlite"  # the photo index in a work folder
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


class PhotoIndex:
    """The export's photos, on disk (SQLite), looked up by id and read in dish order, never held whole:
    ~1.2 KB a photo in memory would be ~24 GiB at the paper's 20M photos."""

    COLUMNS = "photo_id, dish_id, role, path"

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __getitem__(self, photo_id: str) -> Photo:
        row = self.db.execute(f"SELECT {self.COLUMNS} FROM photos WHERE photo_id = ?", (photo_id,)).fetchone()
        if row is None:
            raise KeyError(photo_id)
        return Photo(*row)

    def __contains__(self, photo_id: object) -> bool:
        return self.db.execute("SELECT 1 FROM photos WHERE photo_id = ?", (photo_id,)).fetchone() is not None

    def __len__(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM photos").fetchone()[0])

    def __iter__(self) -> Iterator[str]:
        return (pid for pid, *_ in self.ordered())

    def ordered(self, page: int = 2000) -> Iterator[tuple[str, str, str, str]]:
        """(photo_id, dish_id, role, path) by dish, the reference first, then user photos by id; read a page
        at a time (no cursor stays open while a caller writes elsewhere)."""
        last: tuple[str, int, str] = ("", -1, "")
        while True:
            rows = self.db.execute(
                f"SELECT {self.COLUMNS}, rank FROM photos WHERE (dish_id, rank, photo_id) > (?, ?, ?)"
                " ORDER BY dish_id, rank, photo_id LIMIT ?", (*last, page)).fetchall()
            if not rows:
                return
            yield from (row[:4] for row in rows)
            pid, dish, _, _, user = rows[-1]
            last = (dish, user, pid)

    def values(self) -> Iterator[Photo]:
        return (Photo(*row) for row in self.ordered())

    def dishes_with(self, role: str) -> set[str]:
        """The dishes with at least one photo of `role` (a set the size of the menu, not of the photos)."""
        return {d for (d,) in self.db.execute("SELECT DISTINCT dish_id FROM photos WHERE role = ?", (role,))}


@dataclass
class RawExport:
    root: Path
    merchants: dict[str, Merchant] = field(default_factory=dict)
    dishes: dict[str, Dish] = field(default_factory=dict)
    photos: PhotoIndex = field(default_factory=lambda: PhotoIndex(_open_index(":memory:")))
    fingerprint: str = ""  # a hash of the export's three JSON-lines files

    def photo_path(self, photo_id: str) -> Path:
        return self.root / self.photos[photo_id].path

    def photo_refs(self, shown: Iterable[tuple[str, str]]) -> tuple[tuple[str, str, str], ...]:
        """(file path, role, photo id) of each (photo id, role): what an `Ask` names, read when it is sent."""
        return tuple((str(self.photo_path(pid)), role, pid) for pid, role in shown)

    def cuisine_of(self, dish_id: str) -> str:
        return self.merchants[self.dishes[dish_id].merchant_id].cuisine

    def menu(self, merchant_id: str, category: str) -> list[Dish]:
        if not hasattr(self, "_menus"):  # built once: one pass over the dishes, not one per question
            self._menus: dict[tuple[str, str], list[Dish]] = {}
            for d in self.dishes.values():
                self._menus.setdefault((d.merchant_id, d.menu_category), []).append(d)
        return list(self._menus.get((merchant_id, category), ()))

    def close(self) -> None:
        self.photos.db.close()


def _open_index(path: str | Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, check_same_thread=False)
    db.executescript("CREATE TABLE IF NOT EXISTS photos (photo_id TEXT PRIMARY KEY, dish_id TEXT NOT NULL, "
                     "role TEXT NOT NULL, path TEXT NOT NULL, rank INTEGER NOT NULL) WITHOUT ROWID;"
                     # rank 0: the reference; the order every stage reads a dish's photos in
                     "CREATE INDEX IF NOT EXISTS by_dish ON photos (dish_id, rank, photo_id);"
                     "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);")
    return db


def _lines(path: Path, digest: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    """The file's objects, each line's bytes added to `digest` as it is parsed (the export's fingerprint
    costs no second read of a file that runs to gigabytes)."""
    if not path.exists():
        raise BuildError(f"raw export: {path.name} is missing in {path.parent}")
    digest.update(path.name.encode())

    def hashed(line: bytes) -> Any:
        digest.update(line)
        return json.loads(line)

    yield from iter_jsonl_objects(path, loads=hashed)


def _stamp(root: Path) -> str:
    """Size and modification time of the export's files: an index built from them is reused while they hold."""
    parts = []
    for name in ("merchants.jsonl", "dishes.jsonl", "photos.jsonl"):
        st = (root / name).stat() if (root / name).exists() else None
        parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}" if st else f"{name}:-")
    return f"{root.resolve()}|" + "|".join(parts)


def _unique(table: dict[str, Any], key: str, where: str, id_field: str) -> None:
    if key in table:
        raise BuildError(f"{where}: {id_field} {key!r} appears twice")


def _need(row: dict[str, Any], where: str, *keys: str) -> None:
    if missing := [k for k in keys if not isinstance(row.get(k), str) or not row[k].strip()]:
        raise BuildError(f"{where}: missing or empty {', '.join(missing)}")


def load_raw(root: str | Path, index: str | Path | None = None) -> RawExport:
    """Merchants and dishes are held (the menu, not the photos); the photos go to an on-disk index at `index`
    (the work folder's export.sqlite; None: in memory, for a small export), written whole or not at all and
    reused while the export's files are unchanged; a bad photo line leaves none."""
    root = Path(root)
    if not root.is_dir():
        raise BuildError(f"raw export folder {root} does not exist")
    raw = RawExport(root.resolve())
    digest = hashlib.sha256()
    for lineno, row in _lines(root / "merchants.jsonl", digest):
        where = f"merchants.jsonl line {lineno}"
        _need(row, where, "merchant_id", "name", "cuisine")
        _unique(raw.merchants, row["merchant_id"], where, "merchant_id")
        if row["cuisine"] not in CUISINES:
            raise BuildError(f"{where}: cuisine {row['cuisine']!r} is not one of {', '.join(CUISINES)}")
        raw.merchants[row["merchant_id"]] = Merchant(row["merchant_id"], row["name"], row["cuisine"])
    for lineno, row in _lines(root / "dishes.jsonl", digest):
        dish = _dish(raw, lineno, row)
        raw.dishes[dish.dish_id] = dish
    stamp = _stamp(root)
    if index is not None and Path(index).exists():
        try:
            db = _open_index(index)
            found = dict(db.execute("SELECT key, value FROM meta"))
        except sqlite3.Error:  # not an index of ours (a torn or foreign file): built again below
            found = {}
        else:
            if found.get("stamp") == stamp and "fingerprint" in found:
                raw.photos, raw.fingerprint = PhotoIndex(db), found["fingerprint"]
                return raw
            db.close()
    target = Path(f"{index}.{os.getpid()}.partial") if index is not None else None  # one per writer
    try:
        db = _open_index(target if target is not None else ":memory:")
    except (OSError, sqlite3.Error):  # a folder this process may not write (a read-only work folder): in memory
        target = index = None
        db = _open_index(":memory:")
    try:
        with db:
            for lineno, row in _lines(root / "photos.jsonl", digest):
                _photo(raw, db, lineno, row)
            raw.fingerprint = digest.hexdigest()[:16]
            db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                           [("stamp", stamp), ("fingerprint", raw.fingerprint)])
    except BaseException:
        db.close()
        if target is not None:
            target.unlink(missing_ok=True)
        raise
    if target is not None and index is not None:
        db.close()
        os.replace(target, index)
        db = _open_index(index)
    raw.photos = PhotoIndex(db)
    return raw


def _dish(raw: RawExport, lineno: int, row: dict[str, Any]) -> Dish:
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
        if bad := [n for n in NUTRIENTS if isinstance(nutrition.get(n), bool)
                   or not isinstance(nutrition.get(n), int | float)]:
            raise BuildError(f"{where}: nutrition lacks numeric {', '.join(bad)}")
    return Dish(row["dish_id"], row["merchant_id"], row["name"], row["menu_category"],
                str(row.get("description") or ""), tuple(ingredients), str(row.get("portion") or ""), nutrition)


def _photo(raw: RawExport, db: sqlite3.Connection, lineno: int, row: dict[str, Any]) -> None:
    where = f"photos.jsonl line {lineno}"
    _need(row, where, "photo_id", "dish_id", "role", "path")
    if row["role"] not in ("reference", "user"):
        raise BuildError(f"{where}: role must be reference or user, got {row['role']!r}")
    if row["dish_id"] not in raw.dishes:
        raise BuildError(f"{where}: dish_id {row['dish_id']!r} is not in dishes.jsonl")
    try:
        path = (raw.root / row["path"]).resolve()
        if raw.root not in path.parents:
            raise BuildError(f"{where}: path {row['path']!r} leaves the export folder")
        if not path.is_file():
            raise BuildError(f"{where}: photo file {row['path']!r} does not exist in {raw.root}")
    except OSError as exc:  # a name too long for the file system, say
        raise BuildError(f"{where}: path {str(row['path'])[:80]!r} cannot be looked up "
                         f"({exc.strerror or type(exc).__name__})") from None
    try:
        db.execute("INSERT INTO photos VALUES (?, ?, ?, ?, ?)",
                   (row["photo_id"], row["dish_id"], row["role"], row["path"], int(row["role"] != "reference")))
    except sqlite3.IntegrityError:
        raise BuildError(f"{where}: photo_id {row['photo_id']!r} appears twice") from None
