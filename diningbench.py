"""DiningBench dataset contract: the features of each config, load, fingerprint, validate, build and
publish a release, and the CLI (`python diningbench.py {validate,build,sample,push,summary}`).

It is one self-contained file on purpose: it can be copied next to any release (or into a Space) and
used without the rest of the repository. `datasets` >= 4 runs no loading scripts, so a release is
Parquet + a README with `configs:`; this module is its Python face.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import os
import re
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:  # `datasets` costs most of a second to import: only the functions that need it import it
    import datasets

CONFIGS = ("classification", "nutrition", "vqa")
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
ROOT = Path(__file__).resolve().parent
SAMPLE_DIR = ROOT / "diningbench"
CARD = ROOT / "dataset_card.md"


class DatasetError(ValueError):
    """A release, a records folder or a source that cannot be used as given (one line, naming the item,
    the file or the argument): the CLIs print it without a traceback."""


# What the system refuses about a file the user named (missing, not allowed, a folder, a full disk): one
# line too. Any other error is a bug and keeps its traceback.
ENVIRONMENT_ERRORS = (FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError, NotADirectoryError)


def _check_config(config: str) -> None:
    if config not in CONFIGS:
        raise DatasetError(f"unknown config {config!r}; choose one of {', '.join(CONFIGS)}")


# Each config's columns (SPEC 3.1), declared once without `datasets` so that a release can be read
# with pyarrow alone: a type name, or a one-item list for a list of that type; IMAGE is an image cell,
# `{"bytes", "path"}`. `features`, `arrow_schema` and `release_schema` (with the metadata `datasets`
# reads back) are its readings; `encode_row` stores a row by it and `card_text` states it.
IMAGE = "image"
COMMON_COLUMNS: dict[str, Any] = {
    "id": "string", "dish_id": "string", "merchant_id": "string", "category": "string", "cuisine": "string",
    "images": [IMAGE], "image_roles": ["string"],
}
COLUMNS: dict[str, dict[str, Any]] = {
    "classification": {"options": ["string"], "options_en": ["string"], "answer": "string"},
    "nutrition": {
        "dish_name": "string", "dish_name_en": "string", "ingredients": ["string"], "portion": "string",
        # float64: per-serving values like 682.4 read back as written (float32 made them 682.4000244)
        **dict.fromkeys(NUTRIENTS, "float64"),
        "nutrition_source": "string",
    },
    "vqa": {"question": "string", "question_en": "string", "answer": "string", "answer_en": "string",
            "rationale": "string", "rationale_en": "string", "vqa_category": "string"},
}
# Columns a release may add to a config. `option_dish_ids` (classification): the dish_id behind each
# option, in option order, written by `python -m construct`; every option must come from the target's
# merchant and menu category (validate checks the ones whose dish appears in the release).
OPTIONAL_COLUMNS: dict[str, dict[str, Any]] = {"classification": {"option_dish_ids": ["string"]}}


def columns(config: str, *, optional: bool = False) -> dict[str, Any]:
    """The declared columns of one config, in order (with `optional`, its OPTIONAL_COLUMNS too)."""
    _check_config(config)
    extra = OPTIONAL_COLUMNS.get(config, {}) if optional else {}
    return {**COMMON_COLUMNS, **COLUMNS[config], **extra}


def features(config: str, *, optional: bool = False) -> datasets.Features:
    """The `datasets.Features` of one config (SPEC 3.1); every release must match these exactly.
    With `optional`, the config's OPTIONAL_COLUMNS are added (a release that carries them)."""
    from datasets import Features, Image, List, Value

    def feature(kind: Any) -> Any:
        if isinstance(kind, list):
            return List(feature(kind[0]))
        return Image() if kind == IMAGE else Value(kind)

    return Features({name: feature(kind) for name, kind in columns(config, optional=optional).items()})


def arrow_schema(config: str, *, optional: bool = False) -> pa.Schema:
    """The Arrow schema a config's Parquet files carry: `features(config).arrow_schema` without its
    metadata, known without importing `datasets`."""

    def arrow_type(kind: Any) -> pa.DataType:
        if isinstance(kind, list):
            return pa.list_(arrow_type(kind[0]))
        if kind == IMAGE:
            return pa.struct([("bytes", pa.binary()), ("path", pa.string())])
        return {"string": pa.string(), "float64": pa.float64()}[kind]

    return pa.schema([(name, arrow_type(kind)) for name, kind in columns(config, optional=optional).items()])


def _feature_dict(kind: Any) -> dict[str, Any]:
    """One column's entry in `Features.to_dict()`: what `datasets` writes and reads back."""
    if isinstance(kind, list):
        return {"feature": _feature_dict(kind[0]), "_type": "List"}
    return {"_type": "Image"} if kind == IMAGE else {"dtype": kind, "_type": "Value"}


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
    diningbench.DatasetError: vqa item v1: images[0] is a file path, not an image: a release embeds its images ({"bytes": ..., "path": name})
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
    """Grams a `portion` text states (the first weight in it), or None when it states none.

    The one reading of a portion's weight: construction's Atwater gate and the error analysis both use it.

    >>> [portion_grams(t) for t in ("1碗，约520克（不含汤） / 1 bowl, about 520 g", "0.5 kg", "约1.2千克", "500g", "1斤")]
    [520.0, 500.0, 1200.0, 500.0, 500.0]
    >>> portion_grams("1 plate, 300 kcal"), portion_grams("250 mg"), portion_grams(None)
    (None, None, None)
    """
    match = _PORTION_GRAMS_RE.search(portion or "")
    if not match:
        return None
    return float(match.group(1)) * GRAMS_PER_UNIT[match.group(2).lower()]


# --------------------------------------------------------------------------------------------- load


def _source(source: str | os.PathLike | None) -> str:
    """Argument -> DININGBENCH_SOURCE -> the embedded sample."""
    if source is None or str(source) == "":
        source = os.environ.get("DININGBENCH_SOURCE") or SAMPLE_DIR
    return str(source)


def _local(source: str) -> Path | None:
    path = Path(source).expanduser()
    # Absolute: datasets resolves data_files relative to the dataset folder, not the working directory.
    return path.resolve() if path.is_dir() else None


def _data_files(folder: Path, config: str) -> list[Path]:
    return sorted((folder / "data" / config).glob("*.parquet"))


def load(config: str, source: str | os.PathLike | None = None, *, decode_images: bool = True) -> datasets.Dataset:
    """The `test` split of `config` from a release folder or Hub id (default: the embedded sample).

    Images decode lazily, row by row. With `decode_images=False` each image is a `{"bytes", "path"}`
    dict, for callers that re-encode for transport and must not decode twice.
    """
    _check_config(config)
    src = _source(source)
    folder = _local(src)
    if folder is not None and not _data_files(folder, config):
        raise DatasetError(f"release folder {src} has no data/{config}/*.parquet")
    if folder is None and src.count("/") != 1:
        raise DatasetError(f"dataset source {src!r} is neither a release folder nor a Hub id (owner/name)")
    if folder is None and not hub_reachable() and not _in_hub_cache(src):
        # datasets would retry the Hub for a long while before saying the same
        raise DatasetError(f"cannot load {config!r} from {src}: not a local folder, not in the datasets cache, and the "
                         "Hub is unreachable (offline?); pass a release folder")
    import datasets

    _keep_progress_lock()
    try:
        # Naming the files makes the cache key cover them (path + mtime): with the folder alone, two
        # releases in same-named folders with the same card would share one stale Arrow cache.
        files = {"data_files": {SPLIT: [str(p) for p in _data_files(folder, config)]}} if folder else {}
        ds = datasets.load_dataset(str(folder or src), config, split=SPLIT, **files)
    except Exception as exc:  # datasets raises many types; the user needs one line naming the source
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatasetError(f"cannot load {config!r} from {src}: {first}") from None
    if (unembedded := _first_unembedded_image(ds.data.table)) is not None:
        item, k = unembedded
        raise DatasetError(f"cannot load {config!r} from {src}: item {item}: images[{k}] has no embedded bytes, "
                         "only a file path; a release must embed its images")
    if not decode_images:
        ds = _undecoded(ds)
    return ds


def _keep_progress_lock() -> None:
    """Give tqdm's base class its write lock for good, before datasets' `thread_map` runs.

    `tqdm.contrib.concurrent.ensure_lock` reads the class's lock and, when it finds none, creates
    one and deletes it on the way out. Two loads in two threads (the Space runs several evaluations
    at once) can both find none, and the second `del` then raises "type object 'tqdm' has no
    attribute '_lock'". With a lock on the base class every subclass finds it, and it is only ever
    restored, never deleted.
    """
    import tqdm.std

    tqdm.std.tqdm.get_lock()


def _undecoded(ds: datasets.Dataset) -> datasets.Dataset:
    """The same rows over the same memory-mapped Arrow table, with images read as `{"bytes", "path"}`.

    Whether an image decodes does not change how it is stored, so nothing is copied: casting the
    column instead (`cast_column` on a list of images) rewrites every row into a second Arrow cache
    file, and a run then maps both (the first to read it, the second to iterate it).
    """
    from datasets import Dataset, Features, Image, List

    info = ds.info.copy()
    info.features = Features({**ds.features, "images": List(Image(decode=False))})
    return Dataset(ds.data, info=info, split=ds.split, fingerprint=ds._fingerprint + "-undecoded")


def hub_reachable(timeout: float = 3.0) -> bool:
    """One TCP connect to the Hub's endpoint (HF_HUB_OFFLINE counts as unreachable)."""
    import socket
    from urllib.parse import urlsplit

    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return False
    endpoint = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    try:
        socket.create_connection((endpoint.hostname or "huggingface.co", endpoint.port or 443), timeout=timeout).close()
    except OSError:
        return False
    return True


def _in_hub_cache(repo_id: str) -> bool:
    """True when the datasets/hub cache already holds files of this dataset repo."""
    try:
        from huggingface_hub import scan_cache_dir

        return any(r.repo_id == repo_id and r.repo_type == "dataset" for r in scan_cache_dir().repos)
    except Exception:  # noqa: BLE001 - no cache folder yet
        return False


def _first_unembedded_image(table: pa.Table) -> tuple[str, int] | None:
    """(item id, view index) of the first image cell of `table` (columns `id` and `images`) without bytes,
    or None. Reads only the Arrow validity bitmaps and offsets, never the image bytes.
    """
    import pyarrow.compute as pc

    if "images" not in table.column_names:
        return None
    row_base = 0
    for chunk in table.column("images").chunks:
        flat = pc.list_flatten(chunk)
        if pa.types.is_struct(flat.type) and flat.type.get_field_index("bytes") >= 0:
            data = flat.field("bytes")
            missing = pc.or_kleene(pc.is_null(data), pc.equal(pc.binary_length(data), 0))
            if pc.any(missing).as_py():
                position = pc.index(missing, True).as_py()
                parent = pc.list_parent_indices(chunk)[position].as_py()
                first = chunk.offsets[parent].as_py() - chunk.offsets[0].as_py()
                return str(table.column("id")[row_base + parent]), position - first
        row_base += len(chunk)
    return None


# Rows whose image cells are read together (a few MiB at most).
IMAGE_BATCH = 16


def read_release(config: str, source: str | os.PathLike | None = None) -> LocalRelease | LoadedRelease:
    """One config's rows as the harness reads them: `rows`, every row's metadata (all columns but
    `images`), and `iter_rows(positions)`, those rows whole with their image cells as `{"bytes", "path"}`.

    A release folder (the embedded sample too) is read with pyarrow alone (`LocalRelease`): importing
    `datasets` costs most of a second of CPU, more than the rest of a run on a fast server. A Hub id
    goes through `datasets` (`load`), which downloads and caches it.
    """
    src = _source(source)
    if _local(src) is not None:
        return LocalRelease(config, src)
    return LoadedRelease(load(config, src, decode_images=False))


class LocalRelease:
    """One config of a release folder, read from its Parquet files with pyarrow.

    The metadata of every row is read once, when it is opened. The image column is read from an
    uncompressed Arrow file kept in the datasets cache folder (`diningbench-images/`, made from the
    Parquet files the first time a run asks for images, as `datasets` makes its own Arrow cache; the
    IMAGE_CACHES_KEPT most recently used are kept) and memory-mapped: a row's image cells cost one copy
    of its bytes, no Parquet decoding, and the heap does not grow with the rows asked. Where that file
    cannot be written (a read-only cache), `iter_rows` streams the image column from the Parquet files
    instead, IMAGE_BATCH rows at a time through each row group: memory then holds a row group's images
    at most (a Parquet page of them, as the writer cut them); a row asked before the batch held reads
    its group again from the start.

    It refuses what `load` refuses, in the same words: no Parquet files; an image cell without
    embedded bytes (a null found up front from each row group's statistics, or by reading the group's
    images when they cannot tell; an empty byte string, which statistics cannot tell from an image,
    when its row is read). And, naming the file, one whose columns are not the config's (`load` takes
    the columns it finds).
    """

    def __init__(self, config: str, source: str | os.PathLike) -> None:
        _check_config(config)
        self.config, self.source = config, str(source)
        folder = _local(self.source)
        if folder is None:
            raise DatasetError(f"{self.source} is not a release folder")
        paths = _data_files(folder, config)
        if not paths:
            raise DatasetError(f"release folder {self.source} has no data/{config}/*.parquet")
        self._files: list[tuple[Path, pq.ParquetFile]] = []
        self._mapped: pa.ChunkedArray | None = None  # the image column, memory-mapped once asked
        self.rows: list[dict[str, Any]] = []
        self._where: list[tuple[int, int, int]] = []  # (file, row group, row within it) of each row
        for path in paths:
            with self._reading(path):
                # Read a column chunk a page at a time, not whole: a row group may hold many images.
                parquet = pq.ParquetFile(path, buffer_size=1 << 20, pre_buffer=False)
            errors, _ = schema_problems(config, parquet.schema_arrow)
            if errors:
                raise self._refusal(f"{path.name}: {'; '.join(errors)}")
            names = [name for name in parquet.schema_arrow.names if name != "images"]
            with self._reading(path):
                self.rows += parquet.read(columns=names, use_threads=False).to_pylist()
            for group in range(parquet.num_row_groups):
                rows_in_group = parquet.metadata.row_group(group).num_rows
                self._where += [(len(self._files), group, k) for k in range(rows_in_group)]
            self._files.append((path, parquet))
            if (unembedded := self._first_unembedded(path, parquet)) is not None:
                raise self._unembedded(*unembedded)

    def __len__(self) -> int:
        return len(self.rows)

    def iter_rows(self, positions: Iterable[int]) -> Iterator[dict[str, Any]]:
        """The rows at `positions`, in that order, each its metadata joined to its image cells."""
        positions = list(positions)
        if positions and (column := self._image_column()) is not None:
            yield from self._iter_mapped(column, positions)
            return
        current: tuple[int, int] | None = None
        batches: Iterator[pa.RecordBatch] = iter(())
        first, cells = 0, cast(list[Any], [])  # the batch held: its rows' image cells, from row `first` of the group
        for position in positions:
            file, group, k = self._where[position]
            path, parquet = self._files[file]
            if (file, group) != current or k < first:
                with self._reading(path):
                    batches = parquet.iter_batches(batch_size=IMAGE_BATCH, row_groups=[group], columns=["images"],
                                                   use_threads=False)
                current, first, cells = (file, group), 0, []
            while k >= first + len(cells):
                first += len(cells)
                cells = []  # let the batch go before reading the next
                with self._reading(path):
                    batch = next(batches, None)
                if batch is None:
                    raise self._refusal(f"{path.name}: row group {group} ends before its row {k}")
                cells = batch.column(0).to_pylist()  # a batch at once: 4x faster than cell by cell
            row = self.rows[position]
            images = cells[k - first]
            for index, image in enumerate(images or []):
                if not (isinstance(image, dict) and image.get("bytes")):
                    raise self._unembedded(str(row.get("id")), index)
            yield {**row, "images": images}

    def _iter_mapped(self, column: pa.ChunkedArray, positions: list[int]) -> Iterator[dict[str, Any]]:
        first, cells = 0, cast(list[Any], [])  # the image cells of rows first, first + 1, ...
        for j, position in enumerate(positions):
            if not first <= position < first + len(cells):
                run = 1  # the rows asked next in file order come along (IMAGE_BATCH at most)
                while run < IMAGE_BATCH and j + run < len(positions) and positions[j + run] == position + run:
                    run += 1
                first, cells = position, self._mapped_cells(column, position, run)
            row = self.rows[position]
            images = cells[position - first]
            for index, image in enumerate(images or []):
                if not (isinstance(image, dict) and image.get("bytes")):  # checked when the file was made; it lives outside the release
                    raise self._unembedded(str(row.get("id")), index)
            yield {**row, "images": images}

    @staticmethod
    def _mapped_cells(column: pa.ChunkedArray, start: int, n: int) -> list[Any]:
        return column.slice(start, n).to_pylist()  # a batch at once: 4x faster than cell by cell

    def _image_column(self) -> pa.ChunkedArray | None:
        """Every row's image cells, memory-mapped from the kept Arrow file (made now if missing); None
        where it cannot be kept. A release with an image cell without bytes is refused here, whole."""
        if self._mapped is None:
            stats = [(str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
                     for path, _ in self._files for st in [path.stat()]]
            key = hashlib.sha256(json.dumps(["images", self.config, stats]).encode()).hexdigest()[:32]
            folder = datasets_cache() / "diningbench-images"
            path = folder / f"{key}.arrow"
            try:
                if not path.exists():
                    self._write_images(path)
                os.utime(path)  # used now: the least recently used go first
                _prune_image_caches(folder)
                self._mapped = pa.ipc.open_file(pa.memory_map(str(path))).read_all().column("images")
            except (OSError, pa.ArrowException):
                return None  # a read-only or damaged cache: iter_rows streams the Parquet files
        return self._mapped

    def _write_images(self, path: Path) -> None:
        """The image column of every file, batch by batch, into an uncompressed Arrow file (written
        aside, then renamed: a reader never maps half a file)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")  # one per writer thread too
        try:
            with pa.OSFile(str(partial), "wb") as sink:
                writer = None
                for file, parquet in self._files:
                    with self._reading(file):
                        for batch in parquet.iter_batches(batch_size=4 * IMAGE_BATCH, columns=["id", "images"],
                                                          use_threads=False):
                            if (found := _first_unembedded_image(pa.Table.from_batches([batch]))) is not None:
                                raise self._unembedded(*found)
                            images = pa.RecordBatch.from_arrays([batch.column("images")], names=["images"])
                            writer = writer or pa.ipc.new_file(sink, images.schema)
                            writer.write_batch(images)
                if writer is not None:
                    writer.close()
            os.replace(partial, path)
        finally:
            partial.unlink(missing_ok=True)

    def _first_unembedded(self, path: Path, parquet: pq.ParquetFile) -> tuple[str, int] | None:
        """The first image cell with null bytes, reading only the row groups whose statistics do not
        say there is none (a writer that keeps no statistics makes every group read)."""
        for group in range(parquet.num_row_groups):
            if self._no_null_bytes(parquet.metadata.row_group(group)):
                continue
            with self._reading(path):
                for batch in parquet.iter_batches(batch_size=IMAGE_BATCH, row_groups=[group], columns=["id", "images"],
                                                  use_threads=False):
                    if (found := _first_unembedded_image(pa.Table.from_batches([batch]))) is not None:
                        return found
        return None

    @staticmethod
    def _no_null_bytes(row_group: pq.RowGroupMetaData) -> bool:
        for i in range(row_group.num_columns):
            chunk = row_group.column(i)
            if chunk.path_in_schema.startswith("images.") and chunk.path_in_schema.endswith(".bytes"):
                stats = chunk.statistics
                # An empty image list counts as a null here too: then the group is read to be sure.
                return stats is not None and stats.has_null_count and stats.null_count == 0
        return False

    @contextmanager
    def _reading(self, path: Path) -> Iterator[None]:
        """Damage in a file (not Parquet, a torn page) is one line naming it, not a pyarrow traceback."""
        try:
            yield
        except (pa.ArrowException, OSError) as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            raise self._refusal(f"{path.name} is not readable Parquet ({type(exc).__name__}: {first})") from None

    def _refusal(self, why: str) -> DatasetError:
        return DatasetError(f"cannot load {self.config!r} from {self.source}: {why}")

    def _unembedded(self, item: str, index: int) -> DatasetError:
        return self._refusal(f"item {item}: images[{index}] has no embedded bytes, only a file path; "
                             "a release must embed its images")


IMAGE_CACHES_KEPT = 8  # Arrow files of release images kept in the datasets cache folder


def _prune_image_caches(folder: Path) -> None:
    """Keep the IMAGE_CACHES_KEPT most recently used image files (a process that has one mapped keeps
    reading it after it is removed)."""
    def used(path: Path) -> int:
        try:
            return path.stat().st_mtime_ns
        except OSError:  # removed meanwhile by another run
            return 0

    for stale in sorted(folder.glob("*.arrow"), key=used, reverse=True)[IMAGE_CACHES_KEPT:]:
        stale.unlink(missing_ok=True)


class LoadedRelease:
    """The same two faces over a `datasets.Dataset` loaded with decode_images=False (a Hub id)."""

    def __init__(self, dataset: datasets.Dataset) -> None:
        self.dataset = dataset  # memory-mapped: nothing read until asked
        self.rows = dataset.remove_columns([c for c in ("images",) if c in dataset.column_names]).to_list()

    def __len__(self) -> int:
        return len(self.rows)

    def iter_rows(self, positions: Iterable[int]) -> Iterator[dict[str, Any]]:
        """The rows at `positions`, in that order, each its metadata joined to its image cells (the
        image column read once, IMAGE_BATCH rows at a time)."""
        positions = list(positions)
        if not positions:
            return
        if "images" not in self.dataset.column_names:
            yield from (self.rows[i] for i in positions)
            return
        images = self.dataset.select_columns(["images"])
        contiguous = positions == list(range(positions[0], positions[0] + len(positions)))
        images = images.select(range(positions[0], positions[-1] + 1) if contiguous else positions)
        order = iter(positions)
        for batch in images.iter(batch_size=IMAGE_BATCH):
            for cell in batch["images"]:
                yield {**self.rows[next(order)], "images": cell}


def fingerprint(config: str, source: str | os.PathLike | None = None) -> str:
    """A stable hash of the config's data files (content, not mtime), for run.json."""
    _check_config(config)
    src = _source(source)
    folder = _local(src)
    if folder is None:
        from huggingface_hub import HfApi

        try:
            sha = HfApi().dataset_info(src).sha
        except Exception as exc:
            raise DatasetError(f"cannot fingerprint Hub dataset {src}: {type(exc).__name__}") from None
        return f"hub:{src}@{sha}"
    files = _data_files(folder, config)
    if not files:
        raise DatasetError(f"release folder {src} has no data/{config}/*.parquet")
    # Hashing a paper-size config reads hundreds of MiB: the result is kept per set of files
    # (path, size, modification time, inode), so it is read again only when a file changes.
    stats = [(str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino) for path in files for st in [path.stat()]]
    key = hashlib.sha256(json.dumps([config, stats]).encode()).hexdigest()
    known = _read_fingerprints()
    if isinstance(known.get(key), str):
        return known[key]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode())
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    found = digest.hexdigest()[:16]
    _write_fingerprints({**known, key: found})
    return found


FINGERPRINTS_KEPT = 256


def datasets_cache() -> Path:
    """The folder `datasets` caches in (`datasets.config.HF_DATASETS_CACHE`), found from the same
    variables in the same order, without importing `datasets`."""
    xdg_cache = os.getenv("XDG_CACHE_HOME", "~/.cache")
    hf_home = os.path.expanduser(os.getenv("HF_HOME", os.path.join(xdg_cache, "huggingface")))
    return Path(os.getenv("HF_DATASETS_CACHE", os.path.join(hf_home, "datasets")))


def _fingerprints_path() -> Path:
    return datasets_cache() / "diningbench-fingerprints.json"


def _read_fingerprints() -> dict[str, Any]:
    try:
        found = json.loads(_fingerprints_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _write_fingerprints(known: dict[str, Any]) -> None:
    """Best effort (a read-only cache folder only costs the next run a re-hash); atomic, bounded."""
    path = _fingerprints_path()
    kept = dict(list(known.items())[-FINGERPRINTS_KEPT:])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")  # one per writer thread too
        partial.write_text(json.dumps(kept), encoding="utf-8")
        os.replace(partial, path)
    except OSError:
        pass


# ---------------------------------------------------------------------------------- write / build


class ShardWriter:
    """Writes rows of one config into `data/<config>/test-XXXXX-of-YYYYY.parquet` incrementally, so a
    paper-size release never sits in memory. `total` rows must be known up front (shard names)."""

    def __init__(self, out_dir: Path, config: str, total: int, rows_per_shard: int = 500,
                 optional: bool = False) -> None:
        self.config, self.optional = config, optional
        self.schema = release_schema(config, optional=optional)
        self.dir = Path(out_dir) / "data" / config
        self.dir.mkdir(parents=True, exist_ok=True)
        for stale in self.dir.glob("*.parquet"):
            stale.unlink()
        self.total, self.per_shard = total, rows_per_shard
        self.n_shards = max(1, math.ceil(total / rows_per_shard))
        self.written = 0
        self.buffer: list[dict[str, Any]] = []
        self.writer: pq.ParquetWriter | None = None
        self.num_bytes = 0

    def add(self, row: dict[str, Any]) -> None:
        self.buffer.append(encode_row(self.config, row, optional=self.optional))
        if len(self.buffer) == ROW_GROUP_SIZE or (self.written + len(self.buffer)) % self.per_shard == 0:
            self._flush()

    def _flush(self) -> None:
        if not self.buffer:
            return
        if self.writer is None:
            shard = self.written // self.per_shard
            path = self.dir / f"{SPLIT}-{shard:05d}-of-{self.n_shards:05d}.parquet"
            self.writer = pq.ParquetWriter(path, self.schema)
        table = pa.Table.from_pylist(self.buffer, schema=self.schema)
        self.num_bytes += table.nbytes
        writer = self.writer
        writer.write_table(table, row_group_size=ROW_GROUP_SIZE)
        self.written += len(self.buffer)
        self.buffer = []
        if self.written % self.per_shard == 0:
            writer.close()
            self.writer = None

    def close(self) -> None:
        self._flush()
        if self.writer is not None:
            self.writer.close()
        if self.written != self.total:
            raise ValueError(f"{self.dir.name}: wrote {self.written} rows, expected {self.total}")


def _size_category(n: int) -> str:
    return "n<1K" if n < 1000 else "1K<n<10K" if n < 10000 else "10K<n<100K"


def card_info() -> dict[str, str]:
    """The DatasetInfo fields each config's `dataset_info` carries, so `ds.info` has them."""
    return {"description": DESCRIPTION, "citation": CITATION, "license": LICENSE}


def _yaml_feature(kind: Any) -> dict[str, str]:
    """A column's type as a card's `dataset_info: features:` states it (`dtype: string`, `list: image`)."""
    if isinstance(kind, list):
        return {"list": _yaml_feature(kind[0]).popitem()[1]}
    return {"dtype": "image"} if kind == IMAGE else {"dtype": kind}


def card_text(counts: dict[str, int], num_bytes: dict[str, int], note: str = "",
              optional: Iterable[str] = ()) -> str:
    """The release README.md: YAML header generated from the real counts, body from dataset_card.md.

    Each config's `dataset_info` is what `datasets.DatasetInfo(...)._to_yaml_dict()` writes (features,
    config_name, splits, dataset_size), plus `card_info()`."""
    import yaml

    infos = [{"features": [{"name": name, **_yaml_feature(kind)}
                           for name, kind in columns(config, optional=config in set(optional)).items()],
              "config_name": config,
              "splits": [{"name": SPLIT, "num_bytes": num_bytes.get(config, 0), "num_examples": counts.get(config, 0)}],
              "dataset_size": num_bytes.get(config, 0), **card_info()}
             for config in CONFIGS]
    header = {
        "pretty_name": "DiningBench",
        "license": LICENSE,
        "language": ["zh", "en"],
        "task_categories": ["visual-question-answering", "image-classification", "image-text-to-text"],
        "tags": ["food", "nutrition", "multi-view", "benchmark", "vision-language"],
        "size_categories": [_size_category(sum(counts.values()))],
        "configs": [{"config_name": c, "data_files": [{"split": SPLIT, "path": f"data/{c}/{SPLIT}-*.parquet"}]}
                    for c in CONFIGS],
        "dataset_info": infos,
    }
    body = CARD.read_text(encoding="utf-8") if CARD.exists() else "# DiningBench\n"
    if body.startswith("---\n"):  # drop the card's own header: the release's is generated above
        body = body[4:].split("\n---\n", 1)[-1].lstrip("\n")
    if note:
        body = body.replace("\n", f"\n\n> {note}\n", 1) if body.startswith("# ") else f"> {note}\n\n{body}"
    return "---\n" + yaml.safe_dump(header, sort_keys=False, allow_unicode=True, width=120) + "---\n\n" + body


def write_release(out_dir: str | os.PathLike, rows: Mapping[str, tuple[int, Iterable[dict[str, Any]]]],
                  note: str = "", optional: Iterable[str] = ()) -> Path:
    """Write a release folder from `{config: (row count, row iterator)}`; returns the folder.
    Configs named in `optional` carry their OPTIONAL_FEATURES columns."""
    optional = set(optional)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    counts, sizes = {}, {}
    for config in CONFIGS:
        total, it = rows[config]
        writer = ShardWriter(out, config, total, optional=config in optional)
        for row in it:
            writer.add(row)
        writer.close()
        counts[config], sizes[config] = writer.written, writer.num_bytes
    (out / "README.md").write_text(card_text(counts, sizes, note, optional), encoding="utf-8")
    return out


JsonlPolicy = Literal["strict", "skip"]
# How deep a JSON value read from a file someone else wrote may nest (the project's own lines nest 3 deep).
MAX_JSON_DEPTH = 32


def json_depth_within(value: Any, limit: int) -> bool:
    """Whether `value` nests dicts and lists at most `limit` levels deep (without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return False
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return True


def iter_jsonl_objects(source: Path | bytes, name: str | None = None, *, policy: JsonlPolicy = "strict",
                       problems: list[str] | None = None, error: Callable[[str], Exception] | None = None,
                       loads: Callable[[bytes], Any] = json.loads, max_line_bytes: int | None = None,
                       max_depth: int | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    r"""(line number, object) for each non-blank line of a JSON-lines file (a path, read line by line: a
    10k-row file is never one string in memory; or its bytes). The one JSON-lines reader of the project.

    A line that is not UTF-8, not JSON, not an object, longer than `max_line_bytes` or nested deeper
    than `max_depth` is, by `policy`:
    - "strict": an error naming the file (`name`, default its file name) and the line: `error(text)`
      (default DatasetError), raised at the first such line;
    - "skip": left out, and named in `problems` (`name:N: why`) when a list is given.
    `loads` parses one line's bytes (a caller may pass a faster parser with the same results).

    >>> list(iter_jsonl_objects(b'{"a": 1}\n\n[2]\n{"b": 2}\n', "x.jsonl", policy="skip", problems=(seen := [])))
    [(1, {'a': 1}), (4, {'b': 2})]
    >>> seen
    ['x.jsonl:3: not a JSON object']
    """
    name = name or (source.name if isinstance(source, Path) else "the file")
    make_error = error or DatasetError
    for lineno, raw_line in _numbered_lines(source):
        if not raw_line.strip():
            continue
        why = None
        row: Any = None
        if max_line_bytes is not None and len(raw_line) > max_line_bytes:
            why = f"longer than {max_line_bytes} bytes"
        else:
            try:
                raw_line.decode("utf-8")
                row = loads(raw_line)
            except UnicodeDecodeError as exc:
                why = f"not UTF-8 ({exc.reason} at byte {exc.start})"
            except RecursionError:
                why = "nested too deeply"
            except ValueError as exc:  # json.JSONDecodeError, orjson.JSONDecodeError
                column = getattr(exc, "colno", None)
                where = f", column {column}" if isinstance(column, int) else ""
                why = f"invalid JSON ({getattr(exc, 'msg', None) or str(exc).splitlines()[0][:80]}{where})"
            else:
                if not isinstance(row, dict):
                    why = "not a JSON object"
                elif max_depth is not None and not json_depth_within(row, max_depth):
                    why = f"nested deeper than {max_depth} levels"
        if why is None:
            yield lineno, row
        elif policy == "strict":
            raise make_error(f"{name} line {lineno}: {why}")
        elif problems is not None:
            problems.append(f"{name}:{lineno}: {why}")


def _numbered_lines(source: Path | bytes) -> Iterator[tuple[int, bytes]]:
    if isinstance(source, bytes | bytearray | memoryview):
        yield from enumerate(bytes(source).split(b"\n"), 1)
        return
    with Path(source).open("rb") as fh:
        yield from enumerate(fh, 1)


def _read_records(records_dir: Path, config: str) -> tuple[int, Iterator[dict[str, Any]]]:
    path = records_dir / f"{config}.jsonl"
    if not path.exists():
        raise DatasetError(f"records folder {records_dir} has no {config}.jsonl")
    with path.open(encoding="utf-8") as fh:
        total = sum(1 for line in fh if line.strip())

    declared = columns(config)

    def rows() -> Iterator[dict[str, Any]]:
        for lineno, record in iter_jsonl_objects(path):
            item = record.get("id", f"line {lineno}")
            missing = sorted(set(declared) - set(record))
            if missing:
                raise DatasetError(f"{config} item {item}: missing field(s) {', '.join(missing)}")
            images = []
            for rel in record["images"] if isinstance(record["images"], list) else []:
                image_path = (records_dir / str(rel)).resolve()
                if not image_path.is_file():
                    raise DatasetError(f"{config} item {item}: image file {rel} not found")
                images.append({"bytes": image_path.read_bytes(), "path": Path(rel).name})
            # A wrongly typed field is refused by the writer's encode_row, naming the item.
            yield {**record, "images": images}

    return total, rows()


def build(records_dir: str | os.PathLike, out_dir: str | os.PathLike) -> Path:
    """Records (`<config>.jsonl` + image files referenced by relative path) -> release folder."""
    src = Path(records_dir)
    if not src.is_dir():
        raise DatasetError(f"records folder {src} does not exist")
    return write_release(out_dir, {c: _read_records(src, c) for c in CONFIGS})


def generate(out_dir: str | os.PathLike, *, scale: str = "sample", seed: int = 0, workers: int | None = None) -> Path:
    """Regenerate the synthetic release (deterministic: same seed -> byte-identical Parquet)."""
    import tempfile

    from synthetic.sample import release_rows

    note = (f"Synthetic data (scale `{scale}`, seed {seed}) rendered by `python diningbench.py sample`: "
            "not real restaurant photos; nutrition is computed exactly from gram weights.")
    with tempfile.TemporaryDirectory(prefix="diningbench-render-") as cache:
        rows = release_rows(scale=scale, seed=seed, workers=workers, cache_dir=Path(cache))
        return write_release(out_dir, rows, note)


def push(release_dir: str | os.PathLike, repo_id: str, *, private: bool = False,
         endpoint: str | None = None, message: str = "Upload DiningBench release") -> str:
    """Upload a release folder as a Hub dataset repo (token from HF_TOKEN only); returns the commit URL."""
    from huggingface_hub import CommitOperationAdd, HfApi

    folder = Path(release_dir)
    problems = [p for p in validate(folder) if p.level == "error"]
    if problems:
        raise DatasetError(f"refusing to push {folder}: {len(problems)} validation error(s), first: {problems[0]}")
    token = os.environ.get("HF_TOKEN")
    if not token:
        raise DatasetError("set HF_TOKEN to a Hugging Face write token to push")
    api = HfApi(endpoint=endpoint or os.environ.get("HF_ENDPOINT"), token=token)
    operations = [CommitOperationAdd(path_in_repo=str(p.relative_to(folder)), path_or_fileobj=str(p))
                  for p in sorted(folder.rglob("*")) if p.is_file() and (p.name == "README.md" or p.suffix == ".parquet")]
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        info = api.create_commit(repo_id, operations, commit_message=message, repo_type="dataset")
    except Exception as exc:  # HTTP and Hub errors: one line; they never echo the token
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0].replace(token, "***")
        raise DatasetError(f"push to {repo_id} failed: {first}") from None
    return str(info.commit_url)


# ------------------------------------------------------------------------------------------ validate


@dataclass(frozen=True)
class Problem:
    """One finding of `validate`: an `error` makes the release unusable, a `warning` deserves a look."""

    level: str  # error | warning
    config: str
    item_id: str
    message: str

    def __str__(self) -> str:
        where = f"{self.config}/{self.item_id}" if self.item_id else self.config
        return f"{self.level}: {where}: {self.message}"


def regularized_gamma_q(a: float, x: float) -> float:
    """Q(a, x) = Γ(a, x) / Γ(a), the regularized upper incomplete gamma function.

    The power series of P = 1 - Q converges fast below x = a + 1, the continued fraction of Q
    (modified Lentz) above it; both to about 1e-15 (Numerical Recipes §6.2).

    >>> round(regularized_gamma_q(1.0, 2.0), 6)  # Q(1, x) = exp(-x)
    0.135335
    """
    if a <= 0 or x < 0:
        raise ValueError(f"regularized_gamma_q needs a > 0 and x >= 0, got a={a}, x={x}")
    if x == 0:
        return 1.0
    log_prefix = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        denominator = a
        for _ in range(10_000):
            denominator += 1
            term *= x / denominator
            total += term
            if abs(term) < abs(total) * 1e-16:
                break
        return max(0.0, 1.0 - total * math.exp(log_prefix))
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-16:
            break
    return min(1.0, h * math.exp(log_prefix))


def chi_square_sf(statistic: float, df: int) -> float:
    """P(X >= statistic) for X ~ chi-square with `df` degrees of freedom: the test's p-value.

    >>> round(chi_square_sf(7.815, 3), 4), round(chi_square_sf(14.067, 7), 4)
    (0.05, 0.05)
    """
    if df < 1:
        raise ValueError(f"df must be at least 1, got {df}")
    return regularized_gamma_q(df / 2, max(0.0, statistic) / 2)


def position_bias(picks: Sequence[str | None], n_options: Sequence[int]) -> dict[str, Any] | None:
    """Share of answers per letter position and a chi-square test against picking positions evenly.

    The one implementation: `validate` tests a release's answer letters with it (every item has 8
    options), `eval.circular` a model's picks under `--circular`.

    Under `--circular` every item's correct option visits every position once, so a model without a
    position preference spreads its answers evenly: each answer to an item with n options adds 1/n
    to the expected count of each of its n positions. Unparsed answers (None) are left out.

    >>> r = position_bias(["A", "A", "A", "B"], [2, 2, 2, 2])
    >>> r["pick_rate"], r["statistic"], r["df"]  # expected 2 and 2: (1 + 1) / 2
    ({'A': 0.75, 'B': 0.25}, 1.0, 1)
    """
    answered = [(p, n) for p, n in zip(picks, n_options, strict=True) if p is not None and n > 0]
    if not answered:
        return None
    width = max(n for _, n in answered)
    letters = LETTERS[:width] if width <= len(LETTERS) else [chr(ord("A") + i) for i in range(width)]
    observed = dict.fromkeys(letters, 0)
    expected = dict.fromkeys(letters, 0.0)
    for pick, n in answered:
        if pick in observed:
            observed[pick] += 1
        for letter in letters[:n]:
            expected[letter] += 1 / n
    statistic = sum((observed[k] - expected[k]) ** 2 / expected[k] for k in letters if expected[k] > 0)
    df = sum(expected[k] > 0 for k in letters) - 1
    return {"n_answers": len(answered), "pick_rate": {k: observed[k] / len(answered) for k in letters},
            "statistic": round(statistic, 6), "df": df,
            "p_value": chi_square_sf(statistic, df) if df >= 1 else None}


def image_problem(image: Any) -> str | None:
    """Why an image cell is unusable, or None. The pixel count is read from the header before any
    decoding; JPEGs decode at reduced size (draft: the whole file is still read, so a truncated one
    fails), PNGs are checked chunk by chunk (verify), so a check costs milliseconds, not gigabytes."""
    from PIL import Image as PILImage

    data = image.get("bytes") if isinstance(image, dict) else None
    if not data:
        if isinstance(image, dict) and image.get("path"):
            return "image has no embedded bytes, only a file path (a release must embed its images)"
        return "image has no bytes"
    try:
        with PILImage.open(io.BytesIO(data)) as img:
            width, height = img.size
            if width * height > MAX_PIXELS:
                return f"image is {width}x{height} pixels, over the {MAX_PIXELS:,} limit"
            if img.format == "PNG":
                img.verify()
            else:
                img.draft("RGB", (64, 64))
                img.load()
    except PILImage.DecompressionBombError:
        return f"image declares over {MAX_PIXELS:,} pixels"
    except Exception as exc:
        return f"image does not decode ({type(exc).__name__})"
    return None


def _finite_nonneg(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value >= 0


def _nutrition_problems(values: dict[str, Any]) -> list[str]:
    """Per-serving values no dish can have (see MAX_CALORIES, MAX_GRAMS, MIN_POSITIVE)."""
    problems = []
    for name, value in values.items():
        limit, unit = (MAX_CALORIES, "kcal") if name == "calories" else (MAX_GRAMS, "g")
        if value > limit:
            problems.append(f"{name}={value:g} is over {limit:,.0f} {unit} per serving")
        elif 0 < value < MIN_POSITIVE:
            problems.append(f"{name}={value:g} is a positive value under {MIN_POSITIVE:g} (write 0 for none)")
    return problems


def _check_row(config: str, row: dict[str, Any], report) -> None:
    item = str(row.get("id"))
    images, roles = row.get("images") or [], row.get("image_roles") or []
    if not images:
        report("error", item, "no images")
    for k, image in enumerate(images):
        why = image_problem(image)
        if why:
            report("error", item, f"images[{k}]: {why}")
    if len(roles) != len(images):
        report("error", item, f"image_roles has {len(roles)} entries for {len(images)} images")
    if any(r not in IMAGE_ROLES for r in roles):
        report("error", item, f"image_roles must be reference/user, got {sorted(set(roles) - set(IMAGE_ROLES))}")
    if row.get("cuisine") not in CUISINES:
        report("error", item, f"cuisine {row.get('cuisine')!r} is not one of {', '.join(CUISINES)}")
    for key in ("dish_id", "merchant_id", "category"):
        if not row.get(key):
            report("error", item, f"{key} is empty")
    columns = COLUMNS[config]
    if "options" in columns:  # classification: lettered options
        for key in ("options", "options_en"):
            opts = row.get(key) or []
            if len(opts) != 8 or len(set(opts)) != 8 or not all(opts):
                report("error", item, f"{key} must be 8 distinct non-empty names, got {len(set(opts))} distinct of {len(opts)}")
        answer, n = row.get("answer"), len(row.get("options") or [])
        if not (isinstance(answer, str) and len(answer) == 1 and answer in LETTERS[:n]):
            report("error", item, f"answer {answer!r} is not a letter of an existing option (A-{LETTERS[max(n, 1) - 1]})")
    elif NUTRIENTS[0] in columns:  # nutrition: per-serving values
        found = {n: row.get(n) for n in NUTRIENTS}
        bad = [f"{n}={v}" for n, v in found.items() if not _finite_nonneg(v)]
        values = {n: float(v) for n, v in found.items() if isinstance(v, int | float)}
        absurd = [] if bad else _nutrition_problems(values)
        if bad:
            report("error", item, f"nutrition must be finite and >= 0: {', '.join(bad)}")
        elif absurd:
            report("error", item, f"nutrition not physically possible: {'; '.join(absurd)}")
        elif values["calories"] > 0:
            atwater = 4 * values["protein"] + 4 * values["carbohydrates"] + 9 * values["fat"]
            gap = abs(values["calories"] - atwater) / values["calories"]
            if gap > 0.10:
                report("warning", item, f"Atwater gap {gap:.0%}: {values['calories']:.0f} kcal vs 4P+4C+9F = {atwater:.0f}")
        if row.get("nutrition_source") not in NUTRITION_SOURCES:
            report("error", item, f"nutrition_source {row.get('nutrition_source')!r} is not one of {', '.join(NUTRITION_SOURCES)}")
        for key in ("dish_name", "dish_name_en"):
            if not row.get(key):
                report("error", item, f"{key} is empty")
    else:
        if row.get("vqa_category") not in VQA_CATEGORIES:
            report("error", item, f"vqa_category {row.get('vqa_category')!r} is not one of {', '.join(VQA_CATEGORIES)}")
        for key in ("question", "question_en", "answer", "answer_en"):
            if not row.get(key):
                report("error", item, f"{key} is empty")


def _validate_config(folder: Path, config: str, report) -> None:
    files = _data_files(folder, config)
    if not files:
        report("error", "", f"no data/{config}/*.parquet files")
        return
    expected = columns(config)
    ids: Counter[str] = Counter()
    letters: list[str] = []
    for path in files:
        try:
            parquet = pq.ParquetFile(path)
        except Exception as exc:
            report("error", "", f"{path.name} is not readable Parquet ({type(exc).__name__})")
            continue
        errors, warnings = schema_problems(config, parquet.schema_arrow)
        for message in errors:
            report("error", "", f"{path.name}: {message}")
        for message in warnings:
            report("warning", "", f"{path.name}: {message}")
        for group in range(parquet.num_row_groups):
            for row in parquet.read_row_group(group).to_pylist():
                ids[str(row.get("id"))] += 1
                _check_row(config, {k: row.get(k) for k in expected}, report)
                if "options" in COLUMNS[config] and isinstance(row.get("answer"), str):
                    letters.append(row["answer"])
    for item, count in sorted(ids.items()):
        if count > 1:
            report("error", item, f"duplicate id ({count} rows)")
    if len(letters) >= 16:
        bias = position_bias(letters, [len(LETTERS)] * len(letters)) or {}
        stat, p = bias.get("statistic"), bias.get("p_value")
        if p is not None and p < 0.001:
            counts = ", ".join(f"{k}={v}" for k, v in sorted(Counter(letters).items()))
            report("warning", "", f"answer letters far from uniform over A-H (chi2={stat:.1f}, p={p:.1e}; {counts})")


def _declared_configs(readme: Path) -> set[str] | str:
    """Config names under `configs:` in the card's YAML header, or why they cannot be read."""
    import yaml

    if not readme.exists():
        return "README.md (dataset card with configs:) is missing"
    text = readme.read_text(encoding="utf-8", errors="replace")
    if not text.startswith("---"):
        return "README.md has no YAML header (configs:, dataset_info:)"
    try:
        header = yaml.safe_load(text.split("---", 2)[1]) or {}
    except (yaml.YAMLError, IndexError) as exc:
        return f"README.md YAML header does not parse ({type(exc).__name__})"
    if not isinstance(header, dict):
        return f"README.md YAML header is a {type(header).__name__}, not a mapping of fields"
    configs = header.get("configs") or []
    if not isinstance(configs, list) or not all(isinstance(c, dict) for c in configs):
        return (f"README.md configs: must be a list of entries with config_name and data_files, "
                f"got {configs!r:.60}")
    return {str(c.get("config_name")) for c in configs}


def validate(source: str | os.PathLike | None = None) -> list[Problem]:
    """Every problem of a release (SPEC 3.4), itemised by config and item id; never raises on bad data."""
    src = _source(source)
    folder = _local(src)
    if folder is None:
        try:
            from huggingface_hub import snapshot_download

            folder = Path(snapshot_download(src, repo_type="dataset", allow_patterns=["README.md", "data/**"]))
        except Exception as exc:
            return [Problem("error", "-", "", f"cannot read {src}: neither a folder nor a reachable Hub dataset ({type(exc).__name__})")]
    problems: list[Problem] = []
    declared = _declared_configs(folder / "README.md")
    if isinstance(declared, str):
        problems.append(Problem("error", "-", "", declared))
    for config in CONFIGS:
        if isinstance(declared, set) and config not in declared:
            problems.append(Problem("error", config, "", "config not declared under configs: in README.md"))

        def report(level: str, item: str, message: str, _config: str = config) -> None:
            problems.append(Problem(level, _config, item, message))

        try:
            _validate_config(folder, config, report)
        except Exception as exc:  # damage no check anticipated: still one itemised line, never a traceback
            first = (str(exc).strip().splitlines() or [""])[0]
            report("error", "", f"unreadable data ({type(exc).__name__}: {first})")
    try:
        problems += _option_dish_problems(folder)
    except Exception as exc:
        problems.append(Problem("error", "classification", "", f"option_dish_ids unreadable ({type(exc).__name__})"))
    return problems


def _option_dish_problems(folder: Path) -> list[Problem]:
    """When classification carries option_dish_ids: 8 distinct ids, the answer's is the item's dish, and
    every option whose dish appears anywhere in the release is from the same merchant and menu category
    (distractors only on the menu, with no item of their own, cannot be checked from the release)."""
    files = _data_files(folder, "classification")
    if not files or not all("option_dish_ids" in pq.ParquetFile(p).schema_arrow.names for p in files):
        return []
    where: dict[str, tuple[str, str]] = {}
    for config in CONFIGS:
        for path in _data_files(folder, config):
            table = pq.read_table(path, columns=["dish_id", "merchant_id", "category"])
            for dish, merchant, category in zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True):
                where.setdefault(str(dish), (str(merchant), str(category)))
    problems = []
    for path in files:
        table = pq.read_table(path, columns=["id", "dish_id", "merchant_id", "category", "answer", "option_dish_ids"])
        for row in table.to_pylist():
            item, ids = str(row["id"]), row["option_dish_ids"] or []
            if len(ids) != 8 or len(set(ids)) != 8:
                problems.append(Problem("error", "classification", item, f"option_dish_ids must be 8 distinct dish ids, got {len(set(ids))} of {len(ids)}"))
                continue
            k = LETTERS.find(str(row["answer"])) if isinstance(row["answer"], str) and len(row["answer"]) == 1 else -1
            if k >= 0 and ids[k] != row["dish_id"]:
                problems.append(Problem("error", "classification", item, f"option_dish_ids[{row['answer']}] is {ids[k]}, not the item's dish {row['dish_id']}"))
            own = (str(row["merchant_id"]), str(row["category"]))
            strays = [i for i in ids if i in where and where[i] != own]
            if strays:
                problems.append(Problem("error", "classification", item, f"option(s) {', '.join(strays)} are not from merchant "
                                        f"{own[0]} / menu category {own[1]}"))
    return problems


# ------------------------------------------------------------------------------------------- summary


def summary(source: str | os.PathLike | None = None) -> str:
    """Counts per config, cuisine, category and images per item (reads metadata, never decodes)."""
    lines = []
    for config in CONFIGS:
        ds = load(config, source, decode_images=False)
        n_images = [len(r) for r in ds["image_roles"]]
        lines.append(f"{config}: {len(ds)} items, {sum(n_images)} images "
                     f"({sum(n_images) / max(len(ds), 1):.2f} per item, min {min(n_images, default=0)}, max {max(n_images, default=0)})")
        for key in ("cuisine", "category") + (("vqa_category",) if "vqa_category" in COLUMNS[config] else ()):
            counts = Counter(ds[key])
            lines.append(f"  {key}: " + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python diningbench.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="examples:\n  python diningbench.py validate path/to/release\n"
                                            "  python diningbench.py sample --out /tmp/diningbench-sample\n"
                                            "  python diningbench.py summary OWNER/NAME")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    source_help = "release folder or Hub dataset id OWNER/NAME (default: $DININGBENCH_SOURCE, else the embedded sample)"
    p = sub.add_parser("validate", help="check a release folder or Hub id; exit 1 on errors")
    p.add_argument("source", nargs="?", default=None, help=source_help)
    p = sub.add_parser("build", help="records (JSONL + images) -> release folder")
    p.add_argument("records_dir", help="folder with classification.jsonl, nutrition.jsonl, vqa.jsonl and the "
                   "image files they name by relative path")
    p.add_argument("--out", required=True, help="release folder to write (Parquet shards + README.md card)")
    p = sub.add_parser("sample", help="regenerate the synthetic release (--raw: a raw merchant export instead)")
    p.add_argument("--raw", action="store_true", help="write a raw merchant export with planted defects, "
                   "the input of `python -m construct run`")
    p.add_argument("--scale", choices=("sample", "paper"), default=None,
                   help="sample: the small embedded release (default); paper: the paper's item counts "
                        "(not with --raw: a raw export's size is --merchants)")
    p.add_argument("--merchants", type=int, default=None,
                   help="with --raw: merchants in the export (default 4), the planted defects repeated per 4")
    p.add_argument("--seed", type=int, default=0, help="same seed, byte-identical Parquet (default 0)")
    p.add_argument("--workers", type=int, default=None, help="rendering processes (default: one per CPU)")
    p.add_argument("--out", required=True, help="folder to write")
    p = sub.add_parser("push", help="upload a release folder to the Hub (token from HF_TOKEN)")
    p.add_argument("release_dir", help="a release folder that validates without errors")
    p.add_argument("repo_id", help="Hub dataset repository OWNER/NAME (created if missing)")
    p.add_argument("--private", action="store_true", help="create the repository private")
    p = sub.add_parser("summary", help="counts per config, cuisine, category, images per item")
    p.add_argument("source", nargs="?", default=None, help=source_help)
    args = parser.parse_args(argv)
    if args.command == "summary":  # the one command that loads through datasets (build and sample never import it)
        import datasets

        datasets.disable_progress_bars()  # the CLI prints results; per-split progress bars are noise here
    try:
        if args.command == "validate":
            problems = validate(args.source)
            for problem in problems:
                print(problem)
            errors = sum(p.level == "error" for p in problems)
            print(f"{_source(args.source)}: {errors} error(s), {len(problems) - errors} warning(s)")
            return 1 if errors else 0
        if args.command == "build":
            print(f"wrote {build(args.records_dir, args.out)}")
        elif args.command == "sample" and args.raw:
            from synthetic.raw_export import MERCHANTS, write_raw_export

            if args.scale is not None:
                raise DatasetError("--scale sizes the release, not a raw export: use --raw --merchants N")
            n = len(MERCHANTS) if args.merchants is None else args.merchants
            if n < 1:
                raise DatasetError(f"--merchants wants a positive number, got {n}")
            write_raw_export(args.out, seed=args.seed, merchants=n)
            print(f"wrote raw export {args.out} ({n} merchants)")
        elif args.command == "sample":
            if args.merchants is not None:
                raise DatasetError("--merchants sizes a raw export: add --raw (the release's size is --scale)")
            print(f"wrote {generate(args.out, scale=args.scale or 'sample', seed=args.seed, workers=args.workers)}")
        elif args.command == "push":
            print(f"pushed: {push(args.release_dir, args.repo_id, private=args.private)}")
        else:
            print(summary(args.source))
    except (DatasetError, *ENVIRONMENT_ERRORS) as exc:  # a mistake or a refused file: one line
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0  # anything else is a bug: its traceback, exit 1


if __name__ == "__main__":
    sys.exit(main())
