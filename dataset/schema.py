"""Each config of the release, declared once (`Config`): its columns, how a row is encoded, and the
limits a release must keep. Light to import (no pyarrow until a schema is asked for): the harness's
task list is read from here."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `datasets` costs most of a second to import, pyarrow a third: the functions that need them import them
    import datasets
    import pyarrow as pa

CUISINES = ("chinese", "western", "worldwide", "asian", "japanese", "latin_american", "indian")
VQA_CATEGORIES = ("cuisine_technique", "dietary_suggestion", "multi_image_analysis", "counterfactual_reasoning")
NUTRIENTS = ("calories", "protein", "carbohydrates", "fat")
NUTRITION_SOURCES = ("merchant", "estimated", "computed")
IMAGE_ROLES = ("reference", "user")
LETTERS = "ABCDEFGH"
SPLIT = "test"
ROW_GROUP_SIZE = 100  # small row groups keep the Hub's dataset viewer responsive with image columns
# Limits on what a release may hold (SECURITY.md). A release comes from anyone, so an image cell
# must carry its own bytes (a file path in it would be read from the loading machine), an image may
# not declare more pixels than a decode can afford (eval/images.py keeps the same MAX_PIXELS), and
# per-serving nutrition must be physically possible: the heaviest restaurant platters stay under
# 10,000 kcal and 2,000 g of any macronutrient; a positive value under 1e-6 is float garbage (a
# denormal), not a measurement, and would make a MAPE of 10^45 %.
MAX_PIXELS = 40_000_000
# One photo file read from disk (an images folder or archive of the authors' layout, a work folder's
# photo in the Space's Review tab): a larger one is refused by its size, never read.
MAX_PHOTO_BYTES = 64 << 20
MAX_CALORIES = 10_000.0  # kcal per serving
MAX_GRAMS = 2_000.0  # g of protein, carbohydrates or fat per serving
MIN_POSITIVE = 1e-6
# What `datasets` puts in `ds.info` (each config's dataset_info in the card header carries them).
LICENSE = "apache-2.0"
DESCRIPTION = ("DiningBench: a multi-view benchmark of vision-language models on food, at three levels: "
               "fine-grained dish classification (8 look-alike options from one menu), per-serving nutrition "
               "estimation (kcal, protein, carbohydrates, fat) and dietary visual question answering.")
CITATION = """@misc{diningbench,
  title = {DiningBench: A Hierarchical Multi-view Benchmark for Perception and Reasoning in the Dietary Domain},
  note  = {Benchmark paper; see the authors' publication for the full reference}
}"""
ROOT = Path(__file__).resolve().parents[1]  # the repository (or the folder this package was copied into)
SAMPLE_DIR = ROOT / "diningbench"
CARD = ROOT / "dataset_card.md"


class DatasetError(ValueError):
    """A release, a records folder or a source that cannot be used as given (one line, naming the item,
    the file or the argument): the CLIs print it without a traceback."""


# What the system refuses about a file the user named (missing, not allowed, a folder, a full disk): one
# line too. Any other error is a bug and keeps its traceback.
ENVIRONMENT_ERRORS = (FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError, NotADirectoryError)


# Each config's columns (SPEC 3.1), declared without `datasets` so that a release can be read
# with pyarrow alone: a type name, or a one-item list for a list of that type; IMAGE is an image cell,
# `{"bytes", "path"}`. `features`, `arrow_schema` and `release_schema` (with the metadata `datasets`
# reads back) are its readings; `encode_row` stores a row by it and `card_text` states it.
IMAGE = "image"
COMMON_COLUMNS: dict[str, Any] = {
    "id": "string", "dish_id": "string", "merchant_id": "string", "category": "string", "cuisine": "string",
    "images": [IMAGE], "image_roles": ["string"],
}
# The published fields a release converted from the authors' layout keeps (`python diningbench.py
# convert`): the exact `prompt` sent, `ground_truth` as published (an object as its JSON text), the
# published relative `image_paths` in image order, and the whole published row as JSON (`published`).
# Every config may carry them.
PUBLISHED_COLUMNS: dict[str, Any] = {"prompt": "string", "ground_truth": "string", "image_paths": ["string"],
                                     "published": "string"}


@dataclass(frozen=True, eq=False)
class Config:
    """One config of the release, declared once: every module of the data contract reads it, and the harness's
    three tasks (`eval/tasks/`) read these configs, registered in this order. A config whose rows the authors'
    layout publishes in a shape it already has is one more entry in DECLARED.

    `columns`: its own columns after COMMON_COLUMNS, in order; a column `X_en` is the English copy of `X`
    (`english`). `optional`: the columns a release may add to it besides PUBLISHED_COLUMNS. `shape`: how its
    rows are published in the authors' layout, which that shape's rule reads and writes
    (`dataset.official_rows.SHAPES`): `choice` (lettered options inside the prompt, the letter as ground
    truth), `nutrients` (an object of the four nutrients), `question` (a question ending in a fixed sentence,
    a free answer, the photos as `images`). `published_rows`: its rows in the authors' publication (the
    paper's count): a file of another size is not it."""

    name: str
    columns: Mapping[str, Any]
    shape: str
    published_rows: int
    optional: Mapping[str, Any] = field(default_factory=dict)

    @property
    def english(self) -> dict[str, str]:
        """Each column that has an English copy -> that copy (`options` -> `options_en`)."""
        return {name: f"{name}_en" for name in self.columns if f"{name}_en" in self.columns}

    def official_file(self, lang: str) -> str:
        """Its JSON-lines file in the authors' layout: `nutrition.jsonl`, `nutrition_en.jsonl`."""
        return f"{self.name}{'' if lang == 'zh' else '_en'}.jsonl"


DECLARED = (
    # `option_dish_ids`: the dish_id behind each option, in option order, written by `python -m
    # construct`; every option must come from the target's merchant and menu category (validate checks
    # the ones whose dish appears in the release).
    Config("classification", {"options": ["string"], "options_en": ["string"], "answer": "string"},
           shape="choice", published_rows=2884, optional={"option_dish_ids": ["string"]}),
    Config("nutrition", {
        "dish_name": "string", "dish_name_en": "string", "ingredients": ["string"], "portion": "string",
        # float64: per-serving values like 682.4 read back as written (float32 made them 682.4000244)
        **dict.fromkeys(NUTRIENTS, "float64"),
        "nutrition_source": "string",
    }, shape="nutrients", published_rows=1650),
    Config("vqa", {"question": "string", "question_en": "string", "answer": "string", "answer_en": "string",
                   "rationale": "string", "rationale_en": "string", "vqa_category": "string"},
           shape="question", published_rows=804),
)
CONFIGS = tuple(c.name for c in DECLARED)
COLUMNS: dict[str, dict[str, Any]] = {c.name: dict(c.columns) for c in DECLARED}
OPTIONAL_COLUMNS: dict[str, dict[str, Any]] = {c.name: {**c.optional, **PUBLISHED_COLUMNS} for c in DECLARED}


def config_of(config: str) -> Config:
    """The declaration of the config named `config`, or a DatasetError naming the choices."""
    for declared in DECLARED:
        if declared.name == config:
            return declared
    raise DatasetError(f"unknown config {config!r}; choose one of {', '.join(CONFIGS)}")


_check_config = config_of  # where only the refusal of an unknown config is wanted


def columns(config: str, *, optional: bool = False) -> dict[str, Any]:
    """The declared columns of one config, in order (with `optional`, its OPTIONAL_COLUMNS too)."""
    config_of(config)
    return {**COMMON_COLUMNS, **COLUMNS[config], **(OPTIONAL_COLUMNS[config] if optional else {})}


def _column_type(kind: Any, name: Callable[[str], Any], image: Callable[[], Any], listed: Callable[[Any], Any]) -> Any:
    """A declared column type in one reading of it: `name(type name)`, `image()`, or `listed(item type)`."""
    if isinstance(kind, list):
        return listed(_column_type(kind[0], name, image, listed))
    return image() if kind == IMAGE else name(kind)


def features(config: str, *, optional: bool = False) -> datasets.Features:
    """The `datasets.Features` of one config (SPEC 3.1); every release must match these exactly.
    With `optional`, the config's OPTIONAL_COLUMNS are added (a release that carries them)."""
    from datasets import Features, Image, List, Value

    return Features({name: _column_type(kind, Value, Image, List)
                     for name, kind in columns(config, optional=optional).items()})


def arrow_schema(config: str, *, optional: bool = False) -> pa.Schema:
    """The Arrow schema a config's Parquet files carry: `features(config).arrow_schema` without its
    metadata, known without importing `datasets`."""
    import pyarrow as pa

    types = {"string": pa.string(), "float64": pa.float64()}
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    return pa.schema([(name, _column_type(kind, types.__getitem__, lambda: image, pa.list_))
                      for name, kind in columns(config, optional=optional).items()])


def _feature_dict(kind: Any) -> dict[str, Any]:
    """One column's entry in `Features.to_dict()`: what `datasets` writes and reads back."""
    return _column_type(kind, lambda name: {"dtype": name, "_type": "Value"}, lambda: {"_type": "Image"},
                        lambda item: {"feature": item, "_type": "List"})


def release_schema(config: str, *, optional: bool = False) -> pa.Schema:
    """The schema a release's Parquet files are written with: `arrow_schema` plus the `huggingface`
    metadata `datasets` reads the features back from (the List of Image column decodes as images).
    The same bytes as `features(config, optional=optional).arrow_schema`, known without `datasets`."""
    info = {"info": {"features": {name: _feature_dict(kind) for name, kind in columns(config, optional=optional).items()}}}
    return arrow_schema(config, optional=optional).with_metadata({"huggingface": json.dumps(info)})


def encode_row(config: str, row: dict[str, Any], *, optional: bool = False) -> dict[str, Any]:
    """One row as a release stores it: the declared columns in order (a missing one null, others left
    out), as `features(config).encode_example(row)` gives it for what writers pass, without `datasets`.

    A text column takes text, or a number written as its text; a float64 column a number (or text that
    reads as one); a list column a list of those. An image is a `{"bytes", "path"}` dict (kept as given,
    bytes always: `datasets` drops them when `path` names a file in the working directory, and the
    release would then hold a path instead of the image) or raw bytes. Anything else (a PIL image, a
    file path alone) is refused, naming the item and column:

    >>> row = encode_row("nutrition", {"id": "n1", "images": [b"JPEG"], "calories": 682, "portion": 1})
    >>> row["images"], row["calories"], row["portion"], row["fat"]
    ([{'bytes': b'JPEG', 'path': None}], 682.0, '1', None)
    >>> encode_row("vqa", {"id": "v1", "images": ["photo.jpg"]})
    Traceback (most recent call last):
    dataset.schema.DatasetError: vqa item v1: images[0] is a file path, not an image: a release embeds its images ({"bytes": ..., "path": name})
    """
    item = row.get("id")
    return {name: _encode_cell(kind, row.get(name), lambda n=name: f"{config} item {item}: {n}")
            for name, kind in columns(config, optional=optional).items()}


def _encode_cell(kind: Any, value: Any, where: Any) -> Any:
    """`where()` names the cell in an error (built only then: a row has dozens of cells)."""
    if value is None:
        return None
    if isinstance(kind, list):
        if not isinstance(value, list | tuple):
            raise DatasetError(f"{where()} must be a list, got {type(value).__name__}")
        return [_encode_cell(kind[0], v, lambda k=k: f"{where()}[{k}]") for k, v in enumerate(value)]
    if kind == IMAGE:
        return _encode_image(value, where)
    if not isinstance(value, str | int | float):
        raise DatasetError(f"{where()} must be {'text' if kind == 'string' else 'a number'}, got {type(value).__name__}")
    if kind == "string":
        return str(value)  # as datasets' Value does: 5 -> "5"
    try:
        return float(value)  # 682 -> 682.0, "682.4" -> 682.4
    except (ValueError, OverflowError) as exc:
        raise DatasetError(f"{where()} must be a number: {exc}") from None


def _encode_image(value: Any, where: Any) -> dict[str, Any]:
    if isinstance(value, bytes | bytearray):
        return {"bytes": value, "path": None}
    if isinstance(value, dict):
        data, path = value.get("bytes"), value.get("path")
        if data is None and path is None:
            raise DatasetError(f"{where()} has neither bytes nor path")
        if not isinstance(data, bytes | bytearray | None) or not isinstance(path, str | None):
            raise DatasetError(f"{where()} must be {{\"bytes\": bytes, \"path\": str}}, got bytes of type "
                             f"{type(data).__name__} and path of type {type(path).__name__}")
        return {"bytes": data, "path": path}
    if isinstance(value, str | os.PathLike):
        raise DatasetError(f"{where()} is a file path, not an image: a release embeds its images "
                         '({"bytes": ..., "path": name})')
    raise DatasetError(f"{where()} is a {type(value).__module__}.{type(value).__name__}, not an image cell: "
                     'pass its encoded file as {"bytes": ..., "path": name}')


def column_type_ok(name: str, got: pa.DataType, want: pa.DataType) -> bool:
    """Whether a stored column type reads as the declared one: the same, a large_string for a string,
    or a float32 nutrient (releases built before float64 stay valid)."""
    import pyarrow as pa

    return got == want or (pa.types.is_large_string(got) and pa.types.is_string(want)) or (
        name in NUTRIENTS and pa.types.is_float32(got))


def schema_problems(config: str, schema: pa.Schema) -> tuple[list[str], list[str]]:
    """(errors, warnings) of a Parquet file's schema against the config's declared columns: a declared
    column missing or of another type is an error, an undeclared one a warning."""
    declared, everything = arrow_schema(config), arrow_schema(config, optional=True)
    names = set(schema.names)
    errors, warnings = [], []
    if missing := [n for n in declared.names if n not in names]:
        errors.append(f"schema mismatch, missing column(s) {', '.join(sorted(missing))}")
    if extra := sorted(names - set(everything.names)):
        warnings.append(f"unexpected column(s) {', '.join(extra)}")
    for name in everything.names:
        if name in names and not column_type_ok(name, got := schema.field(name).type, want := everything.field(name).type):
            errors.append(f"column {name} has type {got}, expected {want}")
    return errors, warnings


# Grams per unit a portion text may state its weight in: metric, and the market 斤/两 (500 g / 50 g).
GRAMS_PER_UNIT = {"kg": 1000.0, "公斤": 1000.0, "千克": 1000.0, "斤": 500.0, "两": 50.0, "g": 1.0, "gram": 1.0,
                  "grams": 1.0, "克": 1.0}
_PORTION_GRAMS_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(kg|grams|gram|g|公斤|千克|斤|两|克)(?![A-Za-z])", re.IGNORECASE)


def portion_grams(portion: str | None) -> float | None:
    """Grams a `portion` text states (the first weight in it), or None when it states none. The one reading of
    a portion's weight: construction's Atwater gate and the error analysis both use it.

    >>> [portion_grams(t) for t in ("1碗，约520克（不含汤） / 1 bowl, about 520 g", "0.5 kg", "约1.2千克", "500g", "1斤")]
    [520.0, 500.0, 1200.0, 500.0, 500.0]
    >>> portion_grams("1 plate, 300 kcal"), portion_grams("250 mg"), portion_grams(None)
    (None, None, None)
    """
    match = _PORTION_GRAMS_RE.search(portion or "")
    return float(match.group(1)) * GRAMS_PER_UNIT[match.group(2).lower()] if match else None
