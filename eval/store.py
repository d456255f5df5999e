"""Append-only JSON-lines files (`JsonlLog`) and predictions.jsonl on top of them: crash-safe storage of
per-sample results, and resume; and the one way a file is written into a run folder (`write_atomically`)."""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import socket
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from diningbench import MAX_JSON_DEPTH, file_problem, iter_jsonl_objects
from eval import tasks
from eval.settings import UsageError
from eval.types import Prediction


def json_text(row: Any) -> str:
    """`row` as one line of JSON text, what `json.dumps(row, ensure_ascii=False)` says, written by
    orjson (about 8x faster; no spaces after separators; a non-finite float becomes null, where
    `json.dumps` writes the non-JSON `NaN`), or by `json.dumps` for what orjson refuses (integers
    past 64 bits, lone surrogates, types it does not know)."""
    try:
        return orjson.dumps(row).decode()
    except TypeError:
        return json.dumps(row, ensure_ascii=False)


def json_line(text: str | bytes) -> Any:
    """One JSON line: orjson's parser (4-5x faster than `json.loads`), and `json.loads` for what
    orjson refuses (NaN/Infinity, lone surrogates), with its error when both refuse. One difference is
    left: orjson reads an integer past 64 bits as a float. No line this harness writes holds one
    (every number in them came through orjson or Arrow's int64); in a hand-made line such a number
    in a field that must be whole makes the line unusable, as a wrong type does."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


PREDICTIONS = "predictions.jsonl"
# Bounds on a run folder's JSON-lines files, which may come from anywhere (sent by someone, submitted to the
# Space): a line is read at most this far (a model's answer is at most 4 MiB as read, MAX_RESPONSE_BYTES,
# and JSON escaping at most doubles most text), a file is refused past this size (a 5,338-item run over 8
# epochs is about 0.1 GB).
RUN_LINE_BYTES = 16 << 20
RUN_FILE_BYTES = 1 << 30
FSYNC_EVERY_S = 1.0  # measured: an fsync per line cost 5 ms, i.e. 8 s of a 1,650-item run
# (task, id, epoch, rotation): ids are unique per task, not across tasks; lines written before
# `rotation` existed read back as rotation 0, the options as stored.
Key = tuple[str, str, int, int]


# ---------------------------------------------------------------- append-only JSON lines
TAIL_CHUNK = 1 << 16


def repair_torn_tail(path: Path) -> None:
    """A last line without its newline was cut by a kill mid-write, or lost only its newline: a
    complete JSON record gets its newline back, a fragment is cut off. Reads only the file's tail. The
    judge_accuracy metric's verdict cache keeps a copy of this rule (a metric works copied alone);
    tests/test_store_jsonl.py holds both to the same behaviour."""
    if not path.exists() and not path.is_symlink():
        return
    with os.fdopen(open_own(path, os.O_RDWR), "rb+") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return
        start, tail = size, b""
        while start > 0 and b"\n" not in tail:
            step = min(TAIL_CHUNK, start)
            start -= step
            fh.seek(start)
            tail = fh.read(step) + tail
        cut = start + tail.rfind(b"\n") + 1  # 0 when the file is one torn line
        fh.seek(cut)
        try:
            json.loads(fh.read())
        except ValueError:
            fh.truncate(cut)
        else:
            fh.seek(size)
            fh.write(b"\n")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file the project wrote, in order; a line that does not read as
    one (a torn tail, a hand edit) is skipped. A missing file holds none."""
    if not path.exists():
        return []
    return [row for _, row in iter_jsonl_objects(path, policy="skip", loads=json_line)]


class JsonlLog:
    """The one append-only store (predictions; construction's model-call cache and review log): opened with
    its torn tail repaired, each row one flushed line (a killed process loses at most the rows in flight);
    with `fsync_every_s`, synced to disk (against the machine going down; it costs milliseconds on the event
    loop) at most that often and at close: a power cut loses at most that stretch, which a rerun asks anew."""

    def __init__(self, path: Path, *, fsync_every_s: float | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_torn_tail(self.path)
        self._fsync_every_s = fsync_every_s
        self._fh = os.fdopen(open_own(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "a", encoding="utf-8")
        self._synced = time.monotonic()

    def append(self, row: dict[str, Any]) -> None:
        self._fh.write(json_text(row) + "\n")
        self._fh.flush()
        if self._fsync_every_s is not None and time.monotonic() - self._synced >= self._fsync_every_s:
            self._sync()

    def _sync(self) -> None:
        os.fsync(self._fh.fileno())
        self._synced = time.monotonic()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.flush()
            if self._fsync_every_s is not None:
                self._sync()
        self._fh.close()

    def __enter__(self) -> JsonlLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------- predictions.jsonl
def key_of(prediction: Prediction) -> Key:
    return (prediction.task, prediction.id, prediction.epoch, prediction.rotation)


def _valid(row: Any) -> bool:
    """A line someone else's tool (or a torn write) left is skipped, never a traceback: the fields
    the harness relies on must have their types."""
    return (isinstance(row, dict) and tasks.is_task(row.get("task")) and isinstance(row.get("id"), str)
            and isinstance(row.get("request_hash"), str) and isinstance(row.get("error"), str | None)
            and isinstance(row.get("raw"), str | None) and isinstance(row.get("epoch", 0), int) and isinstance(row.get("rotation", 0), int))


def read_predictions(path: Path, problems: list[str] | None = None) -> dict[Key, Prediction]:
    """The latest prediction per (task, id, epoch, rotation); unreadable or malformed lines are skipped (a
    torn tail, a hand-edited line), so that asking those items again repairs the file. `problems`,
    when given, gets `predictions.jsonl:N` for each line skipped (viewers name them)."""
    latest: dict[Key, Prediction] = {}
    if not path.exists():
        return latest
    try:
        why = file_problem(path, path.parent, max_bytes=RUN_FILE_BYTES)
    except OSError as exc:
        why = f"unreadable ({exc.strerror or type(exc).__name__})"
    if why is not None:
        if problems is not None:
            problems.append(f"{path.name}: {why}")
        return latest
    for number, row in iter_jsonl_objects(path, policy="skip", problems=problems, loads=json_line,
                                          max_depth=MAX_JSON_DEPTH, max_line_bytes=RUN_LINE_BYTES):
        try:
            if not _valid(row):
                raise ValueError
            prediction = Prediction.from_json(row)
        except (ValueError, TypeError):
            if problems is not None:
                problems.append(f"{path.name}:{number}: not a prediction line (its fields' types); skipped")
            continue
        latest[key_of(prediction)] = prediction
    return latest


class PredictionStore:
    """The predictions file of one run folder, open for appending."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / PREDICTIONS
        self._log = JsonlLog(self.path, fsync_every_s=FSYNC_EVERY_S)  # repairs a torn tail first
        self.done = read_predictions(self.path)

    def is_answered(self, task: str, item_id: str, request_hash: str, epoch: int = 0, rotation: int = 0) -> bool:
        """True when this exact request already has a successful answer (failed ones are retried)."""
        previous = self.done.get((task, item_id, epoch, rotation))
        return previous is not None and previous.error is None and previous.request_hash == request_hash

    def append(self, prediction: Prediction) -> None:
        self._log.append(prediction.to_json())
        self.done[key_of(prediction)] = prediction

    def compact(self, keep: Callable[[Prediction], bool] = lambda p: True) -> None:
        """Rewrite the file with one line per (task, id, epoch, rotation), atomically (old lines of retried items go)."""
        self._log.close()
        kept = [p for p in self.done.values() if keep(p)]
        write_atomically(self.path, (json_text(p.to_json()) + "\n" for p in kept))
        self.done = {key_of(p): p for p in kept}
        self._log = JsonlLog(self.path, fsync_every_s=FSYNC_EVERY_S)

    def close(self) -> None:
        self._log.close()

    def __enter__(self) -> PredictionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------- writing into a folder
# Every file the harness writes into a run folder (or a work folder, an export, a sweep) is written by the two
# functions below: appended to through `open_own`, or replaced whole by `write_atomically`. Neither follows a
# symbolic link nor writes into a file that another name also holds (a hard link): a folder from elsewhere may
# carry `report.md -> ~/.bashrc`, and writing through it would change a file outside the folder.
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# A temp file is `<name>.<pid>-<12 hex>.tmp`: made with exclusive create, so a planted file or link of
# that name is never written into, and recognisable, so that what a killed writer left is removed at
# the next start (`remove_orphaned_temps`).
TEMP_NAME = re.compile(r"^(?P<name>.+)\.(?P<pid>[0-9]+)-[0-9a-f]{12}\.tmp$")


def refuse_link(path: Path) -> None:
    """A symbolic link where a file is to be written is refused in one line naming it."""
    if path.is_symlink():
        raise UsageError(f"{path} is a symbolic link; files here are written only as files of their own, "
                         "never through a link: remove it")


def open_own(path: Path, flags: int) -> int:
    """`os.open` of a file to write into that refuses, in one line, a symbolic link and anything but a
    regular file (a FIFO would block the writer, a device is not ours)."""
    try:
        fd = os.open(path, flags | NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except OSError:
        refuse_link(path)  # O_NOFOLLOW's ELOOP, said in words
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UsageError(f"{path} is not a regular file; files here are written only as files of their own: remove it")
    os.set_blocking(fd, True)
    return fd


def write_atomically(path: Path, content: str | bytes | Iterable[str] | Iterable[bytes]) -> None:
    """Write `content` (text, bytes, or an iterable of either: lines) to a sibling temp file of a name
    no other writer uses (this process's id and 48 random bits, made with exclusive create), fsync, then
    rename it over `path`: never a half-written file, never a write through a link at `path` (refused
    in one line) or into a file another name holds (the rename replaces the name, not the file)."""
    path = Path(path)
    refuse_link(path)
    chunks: Iterable[str | bytes] = [content] if isinstance(content, str | bytes) else content
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | os.O_CLOEXEC, 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk.encode("utf-8") if isinstance(chunk, str) else chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def remove_orphaned_temps(folder: Path) -> list[str]:
    """Remove the temp files that killed writers left in `folder` (called holding its lock, so no writer
    of the folder is running): only regular files named as `write_atomically` names them, and only when
    the process named in the name is not alive on this machine. Returns the names removed."""
    removed = []
    for entry in os.scandir(folder):
        found = TEMP_NAME.match(entry.name)
        if found is None or not entry.is_file(follow_symlinks=False):
            continue
        pid = int(found["pid"])
        if pid == os.getpid() or _alive(pid):
            continue
        try:
            os.unlink(entry.path)
        except FileNotFoundError:
            continue
        removed.append(entry.name)
    return removed


def refuse_planted_links(folder: Path, what: str = "--out") -> None:
    """A folder to be written into may hold no symbolic link (to a file, a folder or nothing), neither
    among its files nor in its folders (a run's `judge_cache/verdicts.jsonl`, which the judge metric
    appends to): each would be a way out of the folder for a writer. Refused in one line naming the first."""
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        inner = sorted(os.scandir(entry.path), key=lambda e: e.name) if entry.is_dir(follow_symlinks=False) else []
        for found in [entry] if entry.is_symlink() else [e for e in inner if e.is_symlink()]:
            name = os.path.relpath(found.path, folder)
            raise UsageError(f"{what} {folder} holds a symbolic link, {name}; a folder written here holds "
                             "only files of its own: remove the link")


LOCK = ".lock"


@contextmanager
def locked(out: Path, what: str = "--out") -> Iterator[None]:
    """One writer per folder (a run folder, a construction work folder): a second writer is refused
    in one line naming the holder (its process id and host, written into the lock file), not interleaved.
    A lock file or any file in the folder that is a symbolic link is refused in one line; holding the
    lock, the temp files of killed writers are removed."""
    out.mkdir(parents=True, exist_ok=True)
    refuse_planted_links(out, what)  # the lock file among them
    handle = os.fdopen(open_own(out / LOCK, os.O_RDWR | os.O_CREAT), "r+", encoding="utf-8")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = " ".join(handle.read(200).split()) or "another process"
            raise UsageError(f"{what} {out} is in use by {holder}; wait for it or choose another folder") from None
        remove_orphaned_temps(out)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        handle.flush()
        yield
    finally:
        handle.close()  # closing releases the lock; the file stays (removing it would race)
