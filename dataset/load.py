"""Loading a release (a folder with pyarrow alone, a Hub id through `datasets`), its layout (`layout_of`:
ours or the authors', the one object callers ask to read, fingerprint, validate or summarise it)."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:  # `datasets` costs most of a second to import: only the functions that need it import it
    import datasets
from dataset.cache import _in_hub_cache, datasets_cache, hash_file, hub_reachable, remove_unheld, temp_file
from dataset.official import (
    HUB_ID,
    OfficialRelease,
    _kept_fingerprint,
    _last_used,
    in_authors_layout,
    official_configs,
    read_official,
)
from dataset.schema import COLUMNS, CONFIGS, SPLIT, DatasetError, _check_config, schema_problems
from dataset.sources import _data_files, _local, _source
from dataset.validate import Problem, _image_counts, _official_summary, _validate_official, _validate_parquet

# --------------------------------------------------------------------------------------------- load


def load(config: str, source: str | os.PathLike | None = None, *, decode_images: bool = True) -> datasets.Dataset:
    """The `test` split of `config` from a release folder or Hub id (default: the embedded sample). Images
    decode lazily, row by row. With `decode_images=False` each image is a `{"bytes", "path"}` dict, for
    callers that re-encode for transport and must not decode twice."""
    _check_config(config)
    src = _source(source)
    folder = _local(src)
    paths = _config_files(folder, src, config) if folder is not None else []
    if folder is None and src.count("/") != 1:
        raise DatasetError(f"dataset source {src!r} is neither a release folder nor a Hub id (owner/name)")
    if folder is None and not hub_reachable() and not _in_hub_cache(src):
        # datasets would retry the Hub for a long while before saying the same
        raise DatasetError(f"cannot load {config!r} from {src}: not a local folder, not in the datasets cache, and the "
                         "Hub is unreachable (offline?); pass a release folder")
    import datasets
    import tqdm.std

    # Give tqdm's base class its write lock for good, before datasets' `thread_map` runs:
    # `tqdm.contrib.concurrent.ensure_lock` reads the class's lock and, when it finds none, creates one and
    # deletes it on the way out. Two loads in two threads (the Space runs several evaluations at once) can
    # both find none, and the second `del` then raises "type object 'tqdm' has no attribute '_lock'". With a
    # lock on the base class every subclass finds it, and it is only ever restored, never deleted.
    tqdm.std.tqdm.get_lock()
    try:
        # Naming the files makes the cache key cover them (path + mtime): with the folder alone, two
        # releases in same-named folders with the same card would share one stale Arrow cache.
        files = {"data_files": {SPLIT: [str(p) for p in paths]}} if folder else {}
        ds = datasets.load_dataset(str(folder or src), config, split=SPLIT, **files)
    except Exception as exc:  # datasets raises many types; the user needs one line naming the source
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatasetError(f"cannot load {config!r} from {src}: {first}") from None
    if (unembedded := _first_unembedded_image(ds.data.table)) is not None:
        item, k = unembedded
        raise DatasetError(f"cannot load {config!r} from {src}: item {item}: images[{k}] has no embedded bytes, "
                         "only a file path; a release must embed its images")
    return ds if decode_images else _undecoded(ds)


def _config_files(folder: Path, source: str, config: str) -> list[Path]:
    """The config's Parquet files in a release folder, refused when there are none."""
    if not (files := _data_files(folder, config)):
        raise DatasetError(f"release folder {source} has no data/{config}/*.parquet")
    return files


def _undecoded(ds: datasets.Dataset) -> datasets.Dataset:
    """The same rows over the same memory-mapped Arrow table, with images read as `{"bytes", "path"}`. Whether
    an image decodes does not change how it is stored, so nothing is copied: casting the column instead
    (`cast_column` on a list of images) rewrites every row into a second Arrow cache file, and a run then maps
    both (the first to read it, the second to iterate it)."""
    from datasets import Dataset, Features, Image, List

    info = ds.info.copy()
    info.features = Features({**ds.features, "images": List(Image(decode=False))})
    return Dataset(ds.data, info=info, split=ds.split, fingerprint=ds._fingerprint + "-undecoded")


def _first_unembedded_image(table: pa.Table) -> tuple[str, int] | None:
    """(item id, view index) of the first image cell of `table` (columns `id` and `images`) without bytes, or
    None. Reads only the Arrow validity bitmaps and offsets, never the image bytes."""
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


def read_release(config: str, source: str | os.PathLike | None = None, *,
                 lang: str = "zh") -> LocalRelease | LoadedRelease | OfficialRelease:
    """One config's rows as the harness reads them: `rows`, every row's metadata (all columns but `images`),
    and `iter_rows(positions)`, those rows whole with their image cells as `{"bytes", "path"}`.

    A release folder (the embedded sample too) is read with pyarrow alone (`LocalRelease`): importing
    `datasets` costs most of a second of CPU, more than the rest of a run on a fast server. A Hub id goes
    through `datasets` (`load`), which downloads and caches it. The authors' layout (JSON lines and an images
    tree or archive: a folder, one file, or `meituan/DiningBench`) is read by `read_official` in `lang` (zh or
    en; a Parquet release ignores it), with the same two faces."""
    return layout_of(source).read(config, lang=lang)


# ------------------------------------------------------------------------------------------ layouts


class Layout:
    """How a release is laid out, decided once from its source (`layout_of`): what differs between our layout
    and the authors' is asked of this object, and no caller asks which one it is.

    `name`: one of LAYOUTS; `source`: the source as given (or its default); `by_language`: whether its rows
    are read one language at a time (the authors' files come one per language; our rows hold both).
    `read(config, lang=)`: the rows (`read_release`); `fingerprint(config, lang=)`: the hash a run records;
    `configs(lang)`: (the configs it holds, the language they are read in); `validate(lang=)`: every problem,
    never raising on bad data; `summary(lang=)`: counts in lines; `published(lang)`: (the configs in the
    authors' files of `lang`, the language read), what `convert` reads (ours refuses)."""

    name = ""
    by_language = False

    def __init__(self, source: str) -> None:
        self.source = source

    def read(self, config: str, *, lang: str = "zh") -> LocalRelease | LoadedRelease | OfficialRelease:
        raise NotImplementedError

    def fingerprint(self, config: str, *, lang: str = "zh") -> str:
        raise NotImplementedError

    def configs(self, lang: str = "zh") -> tuple[list[str], str]:
        raise NotImplementedError

    def validate(self, *, lang: str = "zh") -> list[Problem]:
        raise NotImplementedError

    def summary(self, *, lang: str = "zh") -> str:
        raise NotImplementedError

    def published(self, lang: str = "zh") -> tuple[list[str], str]:
        raise NotImplementedError


class ParquetLayout(Layout):
    """Ours: a release folder of `data/<config>/*.parquet` and a card, or a Hub id of one."""

    name = "parquet"

    def read(self, config: str, *, lang: str = "zh") -> LocalRelease | LoadedRelease:
        if _local(self.source) is not None:
            return LocalRelease(config, self.source)
        return LoadedRelease(load(config, self.source, decode_images=False))

    def fingerprint(self, config: str, *, lang: str = "zh") -> str:
        """A stable hash of the config's data files (content, not mtime); a Hub id's commit."""
        folder = _local(self.source)
        if folder is None:
            from huggingface_hub import HfApi

            try:
                sha = HfApi().dataset_info(self.source).sha
            except Exception as exc:
                raise DatasetError(f"cannot fingerprint Hub dataset {self.source}: {type(exc).__name__}") from None
            return f"hub:{self.source}@{sha}"
        files = _config_files(folder, self.source, config)
        # Hashing a paper-size config reads hundreds of MiB: the result is kept per set of files
        # (path, size, modification time, inode), so it is read again only when a file changes.
        stats = [(str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino) for path in files for st in [path.stat()]]
        key = hashlib.sha256(json.dumps([config, stats]).encode()).hexdigest()

        def feed(digest: Any) -> None:
            for path in files:
                digest.update(path.name.encode())
                hash_file(digest, path)

        return _kept_fingerprint(key, feed)

    def configs(self, lang: str = "zh") -> tuple[list[str], str]:
        folder = _local(self.source)
        return [c for c in CONFIGS if folder is None or _data_files(folder, c)], lang

    def validate(self, *, lang: str = "zh") -> list[Problem]:
        return _validate_parquet(self.source, _local(self.source))

    def summary(self, *, lang: str = "zh") -> str:
        lines = []
        for config in CONFIGS:
            ds = load(config, self.source, decode_images=False)
            lines.append(f"{config}: {_image_counts([len(r) for r in ds['image_roles']])}")
            for key in ("cuisine", "category") + (("vqa_category",) if "vqa_category" in COLUMNS[config] else ()):
                lines.append(f"  {key}: " + ", ".join(f"{k} {v}" for k, v in Counter(ds[key]).most_common()))
        return "\n".join(lines)

    def published(self, lang: str = "zh") -> tuple[list[str], str]:
        raise DatasetError(f"{self.source} is not in the authors' layout (their JSON-lines files, or {HUB_ID})")


class OfficialLayout(Layout):
    """The authors': their JSON-lines files (one per config and language) and an images tree or
    archive, as a folder, one file, or `meituan/DiningBench[@REVISION]` (`dataset/official.py`)."""

    name = "official"
    by_language = True

    def read(self, config: str, *, lang: str = "zh") -> OfficialRelease:
        return read_official(config, self.source, lang=lang)

    def fingerprint(self, config: str, *, lang: str = "zh") -> str:
        return read_official(config, self.source, lang=lang).fingerprint

    def configs(self, lang: str = "zh") -> tuple[list[str], str]:
        return official_configs(self.source, lang)

    def validate(self, *, lang: str = "zh") -> list[Problem]:
        return _validate_official(self.source, lang)

    def summary(self, *, lang: str = "zh") -> str:
        return _official_summary(self.source, lang)

    def published(self, lang: str = "zh") -> tuple[list[str], str]:
        """`lang` both: the Chinese files, each with its English file beside it (a folder or the Hub)."""
        if lang == "both" and Path(self.source).expanduser().suffix == ".jsonl":
            raise DatasetError("--lang both reads a folder (or the Hub) holding both files of each config")
        return official_configs(self.source, "en" if lang == "en" else "zh")


def layout_of(source: str | os.PathLike | None = None) -> Layout:
    """The layout of `source` (default: DININGBENCH_SOURCE, else the embedded sample): the authors'
    when it is a folder of their files with no `data/*/*.parquet`, one `.jsonl` file, or their Hub id
    (`dataset.official.in_authors_layout`); ours otherwise. The one place a source's layout is decided."""
    src = _source(source)
    return OfficialLayout(src) if in_authors_layout(src) else ParquetLayout(src)


def is_official(source: str | os.PathLike | None) -> bool:
    """Whether `source` (not its default: None is no source) is in the authors' layout. Kept for
    callers written before `layout_of`; ask the Layout what differs instead."""
    return source is not None and str(source) != "" and isinstance(layout_of(source), OfficialLayout)


def validate(source: str | os.PathLike | None = None, *, lang: str = "zh") -> list[Problem]:
    """Every problem of a release (SPEC 3.4), itemised by config and item id; never raises on bad data.
    The authors' layout is checked in its `lang` files."""
    return layout_of(source).validate(lang=lang)


def summary(source: str | os.PathLike | None = None, *, lang: str = "zh") -> str:
    """Counts per config, cuisine, category and images per item (reads metadata, never decodes).
    The authors' layout: counts and images per item of its `lang` files, and what it lacks."""
    return layout_of(source).summary(lang=lang)


class LocalRelease:
    """One config of a release folder, read from its Parquet files with pyarrow. The metadata of every row is
    read once, when it is opened. The image column is read from an uncompressed Arrow file kept in the
    datasets cache folder (`diningbench-images/`, made from the Parquet files the first time a run asks for
    images, as `datasets` makes its own Arrow cache; the IMAGE_CACHES_KEPT most recently used are kept) and
    memory-mapped: a row's image cells cost one copy of its bytes, no Parquet decoding, and the heap does not
    grow with the rows asked. Where that file cannot be written (a read-only cache), `iter_rows` streams the
    image column from the Parquet files instead, IMAGE_BATCH rows at a time through each row group: memory
    then holds a row group's images at most (a Parquet page of them, as the writer cut them); a row asked
    before the batch held reads its group again from the start.

    It refuses what `load` refuses, in the same words: no Parquet files; an image cell without embedded bytes
    (a null found up front from each row group's statistics, or by reading the group's images when they cannot
    tell; an empty byte string, which statistics cannot tell from an image, when its row is read). And, naming
    the file, one whose columns are not the config's (`load` takes the columns it finds)."""

    def __init__(self, config: str, source: str | os.PathLike) -> None:
        _check_config(config)
        self.config, self.source = config, str(source)
        folder = _local(self.source)
        if folder is None:
            raise DatasetError(f"{self.source} is not a release folder")
        paths = _config_files(folder, self.source, config)
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
            self._where += [(len(self._files), group, k) for group in range(parquet.num_row_groups)
                            for k in range(parquet.metadata.row_group(group).num_rows)]
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
            yield self._joined(position, cells[k - first])

    def _iter_mapped(self, column: pa.ChunkedArray, positions: list[int]) -> Iterator[dict[str, Any]]:
        first, cells = 0, cast(list[Any], [])  # the image cells of rows first, first + 1, ...
        for j, position in enumerate(positions):
            if not first <= position < first + len(cells):
                run = 1  # the rows asked next in file order come along (IMAGE_BATCH at most)
                while run < IMAGE_BATCH and j + run < len(positions) and positions[j + run] == position + run:
                    run += 1
                first, cells = position, self._mapped_cells(column, position, run)
            # checked again, though checked when the file was made: it lives outside the release
            yield self._joined(position, cells[position - first])

    def _joined(self, position: int, images: Any) -> dict[str, Any]:
        """The row at `position` with its image cells, refused when one has no embedded bytes."""
        row = self.rows[position]
        for index, image in enumerate(images or []):
            if not (isinstance(image, dict) and image.get("bytes")):
                raise self._unembedded(str(row.get("id")), index)
        return {**row, "images": images}

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
        remove_unheld(path.parent.glob("*.arrow.*.tmp"))  # killed writers' (a live writer holds its own)
        partial = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")  # one per writer thread too
        held = temp_file(partial)
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
            held.close()

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
    for stale in sorted(folder.glob("*.arrow"), key=_last_used, reverse=True)[IMAGE_CACHES_KEPT:]:
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


def fingerprint(config: str, source: str | os.PathLike | None = None, *, lang: str = "zh") -> str:
    """A stable hash of the config's data files (content, not mtime), for run.json. In the authors'
    layout: of the `lang` file's bytes and its rows' image files (`OfficialRelease.fingerprint`)."""
    _check_config(config)
    return layout_of(source).fingerprint(config, lang=lang)
