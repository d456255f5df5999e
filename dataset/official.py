"""The authors' layout of the benchmark (Hub `meituan/DiningBench`): six JSON-lines files and an images
tree or archive, read into the harness's rows with every published field kept, and written back."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import stat
import tarfile
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, NamedTuple

from dataset.archive import unpack_once
from dataset.cache import (
    Held,
    _read_fingerprints,
    _write_fingerprints,
    datasets_cache,
    hash_file,
    hold,
    hub_reachable,
    remove_unheld,
)
from dataset.jsonl import MAX_JSON_DEPTH, iter_jsonl_objects
from dataset.official_rows import NO_OPTIONS, derive_row, published_images, shape_of
from dataset.official_rows import published_row as published_row  # re-exported for construction's release
from dataset.schema import CONFIGS, DECLARED, MAX_PHOTO_BYTES, DatasetError, _check_config

HUB_ID = "meituan/DiningBench"
OFFICIAL_LICENSE = "cc-by-nc-nd-4.0"
OFFICIAL_PAPER = "arXiv:2604.10425"
# Rows of each config in the published release (the paper's counts): a file of another size is not it.
PUBLISHED_ROWS = {config.name: config.published_rows for config in DECLARED}
LANGS = ("zh", "en")
OFFICIAL_FILES: dict[tuple[str, str], str] = {
    (config.name, lang): config.official_file(lang) for config in DECLARED for lang in LANGS}
IMAGES_DIR, IMAGES_ARCHIVE = "images", "images.tar.gz"
LAYOUTS = ("parquet", "official")  # how a release is written: ours (Parquet, images embedded) or the authors'

# Bounds on what a release may make us read: a real row is a few KB, the real release ~5k rows.
MAX_LINE_BYTES = 4 << 20
MAX_ROWS = 100_000
MAX_IMAGES_PER_ROW = 64
UNPACKED_KEPT = 4  # unpacked archives kept in the datasets cache folder, the least recently used removed


# ------------------------------------------------------------------------------------------ sources

_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_UNSAFE = re.compile(r"[/\\%\s\x00-\x1f\x7f]|\.\.")


def _hub_ref(text: str) -> tuple[str, str | None] | None:
    """(repo id, revision or None) when `text` names the authors' Hub release; None when it names
    something else; a refusal when it names it with path characters (nothing fetched or made)."""
    repo, at, revision = text.partition("@")
    if not repo.lower().startswith(HUB_ID.lower()):
        return None
    rest = repo[len(HUB_ID):]
    if rest and not _UNSAFE.search(rest):
        return None  # another repository (meituan/DiningBench-v2)
    if rest or (at and (not _REVISION.fullmatch(revision) or ".." in revision)):
        raise DatasetError(f"refusing Hub source {text!r}: a revision is a branch, tag or commit of letters, "
                           "digits, '.', '_' and '-' (no '/', '..', '%', '\\', spaces or control characters)")
    return HUB_ID, revision if at else None


def in_authors_layout(source: str | os.PathLike | None) -> bool:
    """Whether `source` has the authors' layout's shape (what `dataset.load.layout_of` decides by): a
    folder holding any of OFFICIAL_FILES and no `data/*/*.parquet`, a path to one `.jsonl` file, or
    `meituan/DiningBench[@REVISION]` (a revision with path characters is refused here, before any fetch).

    >>> in_authors_layout("meituan/DiningBench@main"), in_authors_layout("someone/other")
    (True, False)
    """
    if source is None or str(source) == "":
        return False
    path = Path(source).expanduser()
    if path.is_dir():
        ours = any((path / "data").glob("*/*.parquet"))
        return not ours and any(os.path.lexists(path / name) for name in OFFICIAL_FILES.values())
    return path.suffix == ".jsonl" or _hub_ref(str(source)) is not None


def _file_config(name: str) -> tuple[str | None, str]:
    """(config, lang) a file's name says: `nutrition_en.jsonl` -> (nutrition, en); (None, zh) for `x.jsonl`."""
    stem = Path(name).stem
    return next((c for c in CONFIGS if stem.startswith(c)), None), "en" if stem.endswith("_en") else "zh"


def official_configs(source: str | os.PathLike, lang: str = "zh") -> tuple[list[str], str]:
    """(the configs a source in the authors' layout holds in `lang`, the language read): a folder's
    files of `lang`; one file's own config and language (by its name); the Hub's three."""
    path = Path(source).expanduser()
    if path.is_dir():
        return [c for c in CONFIGS if os.path.lexists(path / OFFICIAL_FILES[(c, lang)])], lang
    if path.suffix == ".jsonl":
        named, lang = _file_config(path.name)
        if named is None:
            raise DatasetError(f"cannot tell the config of {path.name} from its name (classification*.jsonl, "
                               "nutrition*.jsonl or vqa*.jsonl)")
        return [named], lang
    return list(CONFIGS), lang


def _regular_inside(path: Path, folder: Path) -> Path:
    """`path` resolved, refused unless it is a regular file that stays inside `folder` (a symbolic link
    pointing out of it, a FIFO, a folder, a device are refused unread)."""
    try:
        link = stat.S_ISLNK(path.lstat().st_mode)
    except FileNotFoundError:
        raise DatasetError(f"{path} does not exist") from None
    real = path.resolve()
    if link and not real.is_relative_to(folder.resolve()):
        raise DatasetError(f"{path.name} is a symbolic link out of its folder {folder}")
    if not real.is_file():
        raise DatasetError(f"{path.name} is not a regular file")
    return real


def _fetch_hub(revision: str | None, names: list[str]) -> tuple[list[Path | None], str | None]:
    """The files `names` of the Hub release (None for a file it lacks, but the first), fetched into the
    Hugging Face cache at the commit `revision` resolves to; and that commit. Offline, from the cache."""
    import huggingface_hub

    online = hub_reachable()
    sha: str | None = None
    where = f"{HUB_ID}@{revision or 'main'}"
    if online:
        try:
            sha = huggingface_hub.HfApi().dataset_info(HUB_ID, revision=revision).sha
        except Exception as exc:  # HTTP and Hub errors: one line naming the source
            raise DatasetError(f"cannot resolve {where} on the Hub ({type(exc).__name__}: "
                               f"{(str(exc).strip().splitlines() or [''])[0]})") from None
        if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{40}", sha):
            raise DatasetError(f"the Hub gave no commit for {where}")
    found: list[Path | None] = []
    for k, name in enumerate(names):
        try:
            found.append(Path(huggingface_hub.hf_hub_download(
                HUB_ID, name, repo_type="dataset", revision=sha or revision, local_files_only=not online)))
        except Exception as exc:  # noqa: BLE001 - missing file, network, cache: said below in one line
            if k and type(exc).__name__ == "EntryNotFoundError":
                found.append(None)
                continue
            if not online:
                raise DatasetError(f"cannot read {name} of {where}: the Hub is unreachable (offline?) and the file "
                                   "is not in the Hugging Face cache; pass a folder of the release") from None
            raise DatasetError(f"cannot download {name} of {where} ({type(exc).__name__})") from None
    if sha is None and found[0] is not None and re.fullmatch(r"[0-9a-f]{40}", found[0].parent.name):
        sha = found[0].parent.name  # the cache's snapshot folder is named by its commit
    return found, sha


# ------------------------------------------------------------------------------------------- images


def _resolve_image(rel: Any, base: Path) -> tuple[Path | None, str | None]:
    """(the file `rel` names under `base`, or why it is refused). A path that names nothing yet (an
    empty one) is (None, None): missing, refused when its row is read."""
    real, why, _ = _locate(rel, base)
    return real, why


def _locate(rel: Any, base: Path) -> tuple[Path | None, str | None, os.stat_result | None]:
    """`_resolve_image`, and the stat of the file found when the walk took it on the way (None when it
    did not: a link on the way, or nothing there)."""
    if not isinstance(rel, str):
        return None, f"is a {type(rel).__name__}, not a path", None
    if rel == "":
        return None, None, None
    if _CONTROL.search(rel):
        return None, "has control characters", None
    if rel.startswith(("/", "\\")) or (":" in rel and PureWindowsPath(rel).drive):  # a drive needs its colon
        return None, "is absolute", None
    if ".." in _SEPARATORS.split(rel):
        return None, "has a '..' component", None
    walked = _unlinked(base, rel)
    if walked is not None:
        return walked[0], None, walked[1]  # below `base` by construction: no link, no '..'
    try:  # a link on the way: where it leads decides
        real = (base / rel).resolve()
    except (OSError, RuntimeError):  # a loop of links
        return None, "cannot be resolved", None
    if not real.is_relative_to(base):
        return None, "resolves outside the release's images", None
    return real, None, None


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SEPARATORS = re.compile(r"[/\\]")


def _unlinked(base: Path, rel: str) -> tuple[Path, os.stat_result | None] | None:
    """`base / rel` when no part of `rel` is a symbolic link, which is then what `Path.resolve` gives (a
    part that does not exist ends the walk, as there), with the stat of what it names (None: nothing);
    None when a part is a link. `base` is resolved already, so only `rel`'s parts are looked at: a
    link-free path costs one lstat a part, not a walk from `/` and a stat."""
    path = str(base)
    parts = [part for part in rel.split("/") if part not in ("", ".")]
    st = None
    for k, part in enumerate(parts):
        path = f"{path}/{part}"
        try:
            st = os.lstat(path)
        except OSError:  # missing (or under a file): the rest is taken as written, as resolve does
            return Path(path, *parts[k + 1:]), None
        if stat.S_ISLNK(st.st_mode):
            return None
    return Path(path), st


def _stat_problem(st: os.stat_result) -> str | None:
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_size > MAX_PHOTO_BYTES:
        return f"is {st.st_size:,} bytes, over the {MAX_PHOTO_BYTES:,} a photo may have"
    return None


class _Checked(NamedTuple):
    """One image path of a release as it was checked: the file it resolves to inside the release (None:
    refused or naming nothing), why its path is refused, why the file there is refused by its stat, and
    the identity (device, inode) of the regular file found there (None: there was none)."""

    real: Path | None
    refused: str | None
    problem: str | None
    identity: tuple[int, int] | None

    @property
    def why(self) -> str | None:
        return self.refused or self.problem


def _check_path(rel: Any, base: Path) -> _Checked:
    """`rel` resolved under `base` (`_resolve_image`) and the file there stat'ed, never read."""
    real, refused, st = _locate(rel, base)
    if refused or real is None:
        return _Checked(real, refused, None, None)
    try:
        st = st or real.stat()
    except OSError:
        return _Checked(real, None, None, None)
    identity = (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None
    return _Checked(real, None, _stat_problem(st), identity)


def _last_used(path: Path) -> int:
    """When a cache entry was last used (its mtime), 0 when another run removed it meanwhile."""
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _kept_fingerprint(key: str, feed: Callable[[Any], None]) -> str:
    """sha256[:16] of what `feed` gives a digest, kept in the datasets cache by `key` (made from the
    stats of the files hashed): computed again only when a file changes."""
    known = _read_fingerprints()
    if isinstance(known.get(key), str):
        return known[key]
    digest = hashlib.sha256()
    feed(digest)
    found = digest.hexdigest()[:16]
    _write_fingerprints({**known, key: found})
    return found


def _unpacked_folder(archive: Path) -> tuple[Path, Held]:
    """Where `archive` is unpacked (once, named by its path, size, mtime, inode and ctime: an archive
    rewritten in place with its old size and mtime put back still changes its ctime), and a shared
    hold on it for as long as the reader reads it. Then the sweep: the least recently used unpacked
    archives beyond UNPACKED_KEPT, partial folders of killed unpacks and half-removed folders are
    removed, each only when no process holds it (a folder another run reads is never taken)."""
    st = archive.stat()
    key = hashlib.sha256(json.dumps([str(archive), st.st_size, st.st_mtime_ns, st.st_ino,
                                     st.st_ctime_ns]).encode()).hexdigest()[:32]
    root = datasets_cache() / "diningbench-official"
    held = None
    while held is None:  # None: removed by another run's sweep between its unpacking and our hold
        dest = unpack_once(archive, root / key)
        held = hold(dest, shared=True)
    os.utime(dest)  # used now
    entries = list(root.iterdir())
    unpacked = sorted((p for p in entries if re.fullmatch(r"[0-9a-f]{32}", p.name)), key=_last_used, reverse=True)
    remove_unheld([*unpacked[UNPACKED_KEPT:], *(p for p in entries if p.name.startswith(".removing-")
                                                  or ".partial-" in p.name)])
    return dest, held


# ------------------------------------------------------------------------------------------ release


class OfficialRelease:
    """One config of the authors' layout in one language: `rows` (metadata, no image bytes), `len()`,
    `iter_rows(positions)` (rows whole, `images` as `{"bytes", "path"}` read from the images folder or
    unpacked archive), `path` (the JSONL), `lang`, `revision` (the Hub commit, or None), `fingerprint` and
    `notes` (one line each: what the rows cannot give).

    An unpacked archive is held while the release lives (`close()` lets go of it sooner): another run's sweep
    of the shared cache never removes it.

    With `refuse` (the default) an image path that escapes the release, a file over MAX_PHOTO_BYTES or not a
    regular file, or a row of more than MAX_IMAGES_PER_ROW images is a DatasetError naming the row; without it
    each is kept in `problems` as (level, item, message), for `validate`."""

    def __init__(self, config: str, source: str | os.PathLike, *, lang: str = "zh", refuse: bool = True) -> None:
        _check_config(config)
        if lang not in LANGS:
            raise DatasetError(f"unknown language {lang!r}; choose one of {', '.join(LANGS)}")
        self.config, self.source, self.lang = config, str(source), lang
        self.revision: str | None = None
        self.local = True  # a folder or file here, not the Hub's release
        self.notes: list[str] = []
        self.problems: list[tuple[str, str, str]] = []
        self._refuse = refuse
        self._held: Held | None = None
        self._closed = False
        self._folder: Path | None = None  # a local release's folder, whose images/ or archive it reads
        # Each image path checked once per release (resolving a path is most of a row's cost: 14,000
        # resolutions for a 1,000-request run before); a read still checks the file it opens (`_read_image`).
        self._checked: dict[str, _Checked] = {}
        local = Path(source).expanduser()
        archive: Path | None
        if local.is_dir() or local.suffix == ".jsonl" or os.path.lexists(local):
            self.path, archive, base = self._local(local)
        elif (hub := _hub_ref(self.source)) is not None:
            self.local = False
            (jsonl, archive), self.revision = _fetch_hub(hub[1], [OFFICIAL_FILES[(config, lang)], IMAGES_ARCHIVE])
            assert jsonl is not None
            self.path = jsonl
            self._jsonl = jsonl.resolve()  # a snapshot file links to its blob: the Hugging Face cache is ours
            archive = archive.resolve() if archive is not None else None
            base = self._hold_unpacked(archive) if archive is not None else self._jsonl.parent
        else:
            raise DatasetError(f"{self.source} is not in the authors' layout (a folder of their JSON-lines files, "
                               f"one such file, or {HUB_ID})")
        self._archive, self._base = archive, base.resolve()
        self.rows: list[dict[str, Any]] = []
        self._read()

    def _hold_unpacked(self, archive: Path) -> Path:
        """The archive's unpacked folder, held (no other run's sweep removes it) while this release lives."""
        folder, self._held = _unpacked_folder(archive)
        return folder

    def close(self) -> None:
        """Let go of the unpacked archive (it is let go of anyway when the release is collected)."""
        self._closed = True
        if self._held is not None:
            self._held.close()

    def _local(self, path: Path) -> tuple[Path, Path | None, Path]:
        if path.is_dir():
            folder, name = path, OFFICIAL_FILES[(self.config, self.lang)]
            if not os.path.lexists(folder / name):
                raise DatasetError(f"{folder} has no {name} (the {self.config} rows in {self.lang})")
            jsonl = folder / name
        else:
            folder, jsonl = path.parent, path
            named, self.lang = _file_config(path.name)
            if named not in (None, self.config):
                raise DatasetError(f"{path.name} holds {named} rows, not {self.config}")
        self._jsonl = _regular_inside(jsonl, folder)
        self._folder = folder
        if os.path.lexists(folder / IMAGES_DIR) or not os.path.lexists(folder / IMAGES_ARCHIVE):
            return jsonl, None, folder
        archive = _regular_inside(folder / IMAGES_ARCHIVE, folder)
        return jsonl, archive, self._hold_unpacked(archive)

    def _read(self) -> None:
        self._signature = self._files_now()
        published: list[dict[str, Any]] = []
        for _, row in iter_jsonl_objects(self._jsonl, self.path.name, max_line_bytes=MAX_LINE_BYTES,
                                         max_depth=MAX_JSON_DEPTH):
            if len(published) == MAX_ROWS:
                raise DatasetError(f"{self.path.name}: more than {MAX_ROWS:,} rows; a release file holds at most that many")
            published.append(row)
        ids = [row.get("id") for row in published]
        named = all(isinstance(i, str | int | float) and not isinstance(i, bool) and str(i) != "" for i in ids) \
            and len({str(i) for i in ids}) == len(ids)
        if not named and published:
            self.notes.append(f"{self.path.name}: ids are not unique: items are named by their line position (idx)")
        unreadable = 0
        for idx, pub in enumerate(published):
            row = derive_row(self.config, idx, str(ids[idx]) if named else str(idx), pub)
            self._check_images(row)
            if "options" in row and row["options"] is None:
                unreadable += 1
                if unreadable <= 20:
                    self.notes.append(f"{self.config} item {row['id']} (idx {idx}): {NO_OPTIONS}")
            self.rows.append(row)
        if unreadable > 20:
            self.notes.append(f"... and {unreadable - 20} more {self.config} items whose options cannot be read")
        lists_images = shape_of(self.config).lists_images
        if not lists_images and (n := sum(not r["has_standard_image"] for r in self.rows)):
            self.notes.append(f"{n} {self.config} item(s) have no standard_image: their images are user photos only")
        if lists_images and (n := sum(not r["published"].get("images") for r in self.rows)):
            self.notes.append(f"{n} vqa item(s) have no images: their photo is images/{{id:05d}}.jpg, as the "
                              "authors' script reads it")

    def _where(self, row: dict[str, Any]) -> str:
        return f"{self.path.name} item {row['id']} (idx {row['idx']})"

    def _check_images(self, row: dict[str, Any]) -> None:
        """Every path of the row resolved and stat'ed (never read): refused, or kept as a problem."""
        found: list[str] = []
        fields, _ = published_images(self.config, row["published"])
        if len(fields) > MAX_IMAGES_PER_ROW:
            found.append(f"{len(fields)} image paths; at most {MAX_IMAGES_PER_ROW} a row")
        found += [f"{field} {rel!r} {why}" for field, rel in fields[:MAX_IMAGES_PER_ROW + 1]
                  if (why := self._check(rel).why)]
        for message in found:
            if self._refuse:
                raise DatasetError(f"{self._where(row)}: {message}")
            self.problems.append(("error", row["id"], message))

    def missing_images(self, row: dict[str, Any]) -> list[str]:
        """The row's image paths that name no file (stat only)."""
        return [str(rel) for rel in row["image_paths"]
                if (checked := self._check(rel)).refused is None and checked.identity is None]

    def _check(self, rel: Any) -> _Checked:
        """`rel` as checked when the release was read (`_check_path`), once per path."""
        if not isinstance(rel, str):
            return _check_path(rel, self._base)
        if (found := self._checked.get(rel)) is None:
            found = self._checked[rel] = _check_path(rel, self._base)
        return found

    def unchanged(self) -> bool:
        """Whether its JSON-lines file (and archive) are the files it read, and an archive's unpacked
        folder is still held: what lets one process read a release once."""
        if self._closed:
            return False
        try:
            return self._files_now() == self._signature
        except OSError:
            return False

    def _files_now(self) -> list[Any]:
        """Each file's path, size, mtime, inode and ctime, and which of images/ and the archive its
        folder holds (the one it reads images from)."""
        marks = [os.path.lexists(self._folder / name) for name in (IMAGES_DIR, IMAGES_ARCHIVE)] if self._folder else []
        return [*((str(path), st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
                  for path in (self._jsonl, self._archive) if path is not None for st in [path.stat()]), marks]

    def __len__(self) -> int:
        return len(self.rows)

    def iter_rows(self, positions: Iterable[int]) -> Iterator[dict[str, Any]]:
        """The rows at `positions`, in that order, each with its image files read (a missing one is
        refused naming the row)."""
        for position in positions:
            row = self.rows[position]
            yield {**row, "images": [{"bytes": self._read_image(row, rel), "path": rel} for rel in row["image_paths"]]}

    def _read_image(self, row: dict[str, Any], rel: Any) -> bytes:
        checked = self._check(rel)
        if checked.refused:
            raise DatasetError(f"{self._where(row)}: image {rel!r} {checked.refused}")
        fd, st = _open_checked(checked) or self._open_again(row, rel)
        try:
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_PHOTO_BYTES:
                raise DatasetError(f"{self._where(row)}: image {rel!r} is not a regular file of at most "
                                   f"{MAX_PHOTO_BYTES:,} bytes")
            data = _read_bounded(fd, st.st_size)
        finally:
            os.close(fd)
        if len(data) > MAX_PHOTO_BYTES:
            raise DatasetError(f"{self._where(row)}: image {rel!r} grew past {MAX_PHOTO_BYTES:,} bytes")
        return data

    def _open_again(self, row: dict[str, Any], rel: Any) -> tuple[int, os.stat_result]:
        """The image opened after resolving and checking its path again: the folder changed since it was
        checked (a file replaced, a link put in its path, a file that was missing)."""
        real, why = _resolve_image(rel, self._base)
        if why:
            raise DatasetError(f"{self._where(row)}: image {rel!r} {why}")
        try:
            if real is None:
                raise FileNotFoundError
            fd = os.open(real, _READ_FLAGS)
        except OSError:
            raise DatasetError(f"{self._where(row)}: image {rel!r} not found") from None
        try:
            return fd, os.fstat(fd)
        except BaseException:
            os.close(fd)
            raise

    @property
    def fingerprint(self) -> str:
        """sha256[:16] of the JSONL's bytes and, in row order, each image path and its file's bytes: the
        same for a folder, an archive or the Hub. Kept per set of files (path, size, mtime, inode)."""
        found = {rel: self._existing(rel)
                 for rel in dict.fromkeys(str(p) for row in self.rows for p in row["image_paths"])}

        def stat_of(path: Path, st: os.stat_result | None = None) -> list[Any]:
            st = st or path.stat()
            return [str(path), st.st_size, st.st_mtime_ns, st.st_ino]

        stats = [stat_of(self._jsonl)] + ([stat_of(self._archive)] if self._archive else
                                          [stat_of(*f) if f else None for f in found.values()])
        key = hashlib.sha256(json.dumps(["official", self.config, str(self._base), stats]).encode()).hexdigest()

        def feed(digest: Any) -> None:
            hash_file(digest, self._jsonl)
            for rel, file in found.items():
                digest.update(b"\0" + rel.encode("utf-8", "surrogatepass") + b"\0")
                if file is None:
                    digest.update(b"missing")
                else:
                    hash_file(digest, file[0])

        return _kept_fingerprint(key, feed)

    def _existing(self, rel: str) -> tuple[Path, os.stat_result] | None:
        """The file `rel` names inside the release and its stat now, when it is a regular file within the
        bounds; None otherwise. The path is resolved again only when the file checked there is gone."""
        checked = self._check(rel)
        if checked.why is None and checked.identity is not None and checked.real is not None:
            try:
                st = checked.real.stat()
            except OSError:
                st = None
            if st is not None and (st.st_dev, st.st_ino) == checked.identity and not _stat_problem(st):
                return checked.real, st
        checked = self._checked[rel] = _check_path(rel, self._base)
        if checked.why is not None or checked.identity is None or checked.real is None:
            return None
        try:
            return checked.real, checked.real.stat()
        except OSError:
            return None


def _read_bounded(fd: int, size: int) -> bytes:
    """The file's bytes, at most MAX_PHOTO_BYTES + 1 (the caller refuses more): first the size its stat
    gave and one byte more, to see it grew. Asking for the bound at once allocated 64 MiB per photo
    read: 3x the CPU of reading 3,500 photos of 30 KB."""
    chunks: list[bytes] = []
    total, want = 0, size + 1
    while total <= MAX_PHOTO_BYTES:
        chunk = os.read(fd, min(want, MAX_PHOTO_BYTES + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total, want = total + len(chunk), 1 << 20
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def _open_checked(checked: _Checked) -> tuple[int, os.stat_result] | None:
    """A descriptor of the file `checked` found, opened without following a link, and its stat, when it
    is still that file (the same device and inode, so whatever link was put in its path since leads to
    the file that was checked inside the release); None when it cannot say so."""
    if checked.real is None or checked.identity is None or checked.problem:
        return None
    try:
        fd = os.open(checked.real, _READ_FLAGS)
    except OSError:
        return None
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) == checked.identity:
        return fd, st
    os.close(fd)
    return None


# The releases this process has open, by (config, source, language): reading the same one again while
# it is open (the harness reads its rows, then its fingerprint) gives the same object, unless its files
# changed. Weak: a release nobody holds is read afresh.
_OPEN: weakref.WeakValueDictionary[tuple[str, str, str], OfficialRelease] = weakref.WeakValueDictionary()
_OPEN_LOCK = threading.Lock()


def read_official(config: str, source: str | os.PathLike, lang: str = "zh") -> OfficialRelease:
    """One config of the authors' layout as the harness reads a release (see OfficialRelease). A folder
    gives the file of `lang`; one file says its config and language by its name (`nutrition_en.jsonl`).
    A local release this process already has open, its files unchanged, is given again, not read again."""
    key = (config, os.path.abspath(Path(source).expanduser()), lang)  # a relative path means its folder now
    with _OPEN_LOCK:
        found = _OPEN.get(key)
    if found is not None and found.unchanged():
        return found
    release = OfficialRelease(config, source, lang=lang)
    if release.local:  # the Hub's release is asked which commit it is each time
        with _OPEN_LOCK:
            _OPEN[key] = release
    return release


def license_terms(license_id: str | None) -> str | None:
    """One line stating the terms of the authors' license, or None for another license."""
    if (license_id or "").lower() != OFFICIAL_LICENSE:
        return None
    return (f"license {OFFICIAL_LICENSE}: DiningBench by its authors ({OFFICIAL_PAPER}, {HUB_ID} on the Hub) may be "
            "used non-commercially only, shared without derivatives, and with attribution to the authors")


def duplicate_ids(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Published ids held by more than one row, and how many."""
    counts = Counter(str(r["published"].get("id")) for r in rows)
    return {item: n for item, n in counts.items() if n > 1}


# ------------------------------------------------------------------------------------------- write

def _relative_parts(rel: str) -> tuple[str, ...]:
    parts = PurePosixPath(rel).parts
    if not parts or rel.startswith("/") or "\\" in rel or ".." in parts or PureWindowsPath(rel).drive:
        raise DatasetError(f"image path {rel!r} must be relative, below the release folder")
    return parts


def write_official(out_dir: str | os.PathLike,
                   rows_by_file: Mapping[str, Iterable[tuple[dict[str, Any], Mapping[str, bytes]]]],
                   tarball: bool = True) -> Path:
    """A folder in the authors' layout: each `{file name: rows}` as JSON lines, where a row is
    (the published object, {relative image path: bytes}); the image files at those paths (one path
    given twice must carry the same bytes) and, with `tarball`, `images.tar.gz` of them (sorted,
    dated 0: the same rows give the same bytes). Returns the folder."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    for name, rows in rows_by_file.items():
        if Path(name).name != name or not name.endswith(".jsonl"):
            raise DatasetError(f"{name!r} is not a JSON-lines file name")
        partial = out / f".{name}.partial"
        with partial.open("w", encoding="utf-8", newline="\n") as fh:
            for published, images in rows:
                for rel, data in images.items():
                    parts, digest = _relative_parts(rel), hashlib.sha256(data).hexdigest()
                    if written.setdefault(rel, digest) != digest:
                        raise DatasetError(f"image path {rel!r} is given twice with different bytes")
                    target = out.joinpath(*parts)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    if target.is_symlink():  # a link left in the folder is replaced, never written through
                        target.unlink()
                    target.write_bytes(data)
                fh.write(json.dumps(published, ensure_ascii=False) + "\n")
        os.replace(partial, out / name)
    if tarball:
        _write_tarball(out / IMAGES_ARCHIVE, out, sorted(written))
    return out


def _write_tarball(path: Path, folder: Path, members: list[str]) -> None:
    partial = path.with_name(f".{path.name}.partial")
    with partial.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as zipped, \
            tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in members:
            data = (folder / rel).read_bytes()
            info = tarfile.TarInfo(rel)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, fileobj=io.BytesIO(data))
    os.replace(partial, path)
