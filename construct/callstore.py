"""The answered model calls of one stage, on disk and looked up by key, never loaded whole.

Each writer appends to its own log (calls.jsonl for the local engine, calls.d/<writer>.jsonl per Ray
actor): no two processes ever append to one file. The logs stay the record (`rows` reads them all, for the
usage table and the benches); the index can be deleted at any time and is rebuilt from them. A lookup
needs a few bytes of memory, not ~1.9 KB per row (a build of 32M calls)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eval.store import read_jsonl, repair_torn_tail

LOG = "calls.jsonl"
ACTOR_LOGS = "calls.d"
INDEX = "calls.index.sqlite"
BATCH = 5000  # rows indexed per transaction


def logs(stage_dir: Path) -> list[Path]:
    """Every call log of a stage: calls.jsonl first, then the actors' files by name."""
    found = [stage_dir / LOG] if (stage_dir / LOG).exists() else []
    if (stage_dir / ACTOR_LOGS).is_dir():
        found += sorted((stage_dir / ACTOR_LOGS).glob("*.jsonl"))
    return found


def rows(stage_dir: Path) -> Iterator[dict[str, Any]]:
    """Every logged call row of a stage, log by log (one log in memory at a time)."""
    for path in logs(stage_dir):
        yield from read_jsonl(path)


class CallStore:
    """The key index over one stage's call logs (calls.index.sqlite): key -> (log, byte offset) of the best
    row, and per log how far it is indexed. The writer of the index is the driver, between a stage's call
    phases (`catch_up`); readers (the driver, Ray actors on the same file system) open it `readonly=True`."""

    def __init__(self, stage_dir: Path, *, readonly: bool = False) -> None:
        self.dir = Path(stage_dir)
        path = self.dir / INDEX
        if readonly:
            self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False) if path.exists() \
                else None
        else:
            self.dir.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(path, check_same_thread=False)
            self.db.executescript(
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, log TEXT NOT NULL, offset INTEGER NOT NULL,"
                " answered INTEGER NOT NULL, max_tokens INTEGER NOT NULL) WITHOUT ROWID;"
                "CREATE TABLE IF NOT EXISTS logs (name TEXT PRIMARY KEY, indexed INTEGER NOT NULL);")
            self.catch_up()

    def catch_up(self) -> None:
        """Index the rows every log gained since the last catch-up, reading only the new bytes (a torn last
        line, after a kill, is repaired first)."""
        assert self.db is not None
        done = dict(self.db.execute("SELECT name, indexed FROM logs"))
        for path in logs(self.dir):
            name = path.relative_to(self.dir).as_posix()
            repair_torn_tail(path)
            start = done.get(name, 0)
            if path.stat().st_size < start:  # rewritten by hand: index it again from the top
                start = 0
            with path.open("rb") as fh:
                fh.seek(start)
                offset, batch = start, []
                for line in fh:
                    here, offset = offset, offset + len(line)
                    try:
                        row = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(row, dict) and isinstance(row.get("key"), str) and (
                            row.get("text") is not None or row.get("truncated")):
                        batch.append((row["key"], name, here, int(row.get("text") is not None),
                                      int(row.get("max_tokens") or 0)))
                    if len(batch) >= BATCH:
                        self._index(batch, name, offset)
                        batch = []
                self._index(batch, name, offset)

    def _index(self, batch: list[tuple[str, str, int, int, int]], name: str, offset: int) -> None:
        """One transaction: the rows (an answer replaces a cut one; a cut one a lower limit's), and how far
        the log is indexed, so that a kill between two transactions re-reads at most one batch."""
        assert self.db is not None
        with self.db:
            self.db.executemany(
                "INSERT INTO calls VALUES (?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET log=excluded.log, "
                "offset=excluded.offset, answered=excluded.answered, max_tokens=excluded.max_tokens "
                "WHERE calls.answered = 0 AND (excluded.answered = 1 OR excluded.max_tokens > calls.max_tokens)",
                batch)
            self.db.execute("INSERT INTO logs VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET indexed=excluded.indexed",
                            (name, offset))

    def lookup(self, key: str, max_tokens: int) -> dict[str, Any] | None:
        """The cached row of a call key that is worth reusing: an answer, or an answer cut at a limit at
        least `max_tokens` (asked again only under a higher one); None when the call must be made."""
        if self.db is None:
            return None
        found = self.db.execute("SELECT log, offset, answered, max_tokens FROM calls WHERE key = ?", (key,)).fetchone()
        if found is None or (not found[2] and found[3] < max_tokens):
            return None
        with (self.dir / found[0]).open("rb") as fh:
            fh.seek(found[1])
            row = json.loads(fh.readline())
        return row if isinstance(row, dict) else None

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None
