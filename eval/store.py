"""predictions.jsonl: append-only, crash-safe storage of per-sample results, and resume.

Each finished sample is appended as one JSON line and flushed, so a run killed at any moment
loses at most the requests in flight (flushed lines are the OS's, whatever happens to the process).
fsync, which guards against the machine itself going down, costs milliseconds on the event loop,
so it runs at most once a second and at close: a power cut loses at most that last second, which
a rerun asks again. On reopening, a torn last line (killed mid-write) is
cut off, and the latest line per (task, id, epoch, rotation) wins.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from eval.types import TASKS, Prediction

PREDICTIONS = "predictions.jsonl"
FSYNC_EVERY_S = 1.0  # measured: an fsync per line cost 5 ms, i.e. 8 s of a 1,650-item run
# (task, id, epoch, rotation): ids are unique per task, not across tasks; lines written before
# `rotation` existed read back as rotation 0, the options as stored.
Key = tuple[str, str, int, int]
TASK_NAMES = frozenset(TASKS)


def key_of(prediction: Prediction) -> Key:
    return (prediction.task, prediction.id, prediction.epoch, prediction.rotation)


def _valid(row: Any) -> bool:
    """A line someone else's tool (or a torn write) left is skipped, never a traceback: the fields
    the harness relies on must have their types."""
    return (isinstance(row, dict) and row.get("task") in TASK_NAMES and isinstance(row.get("id"), str)
            and isinstance(row.get("request_hash"), str) and isinstance(row.get("error"), str | None)
            and isinstance(row.get("raw"), str | None) and isinstance(row.get("epoch", 0), int) and isinstance(row.get("rotation", 0), int))


def read_predictions(path: Path, problems: list[str] | None = None) -> dict[Key, Prediction]:
    """The latest prediction per (task, id, epoch, rotation); unreadable or malformed lines are skipped (a
    torn tail, a hand-edited line), so that asking those items again repairs the file. `problems`,
    when given, gets `predictions.jsonl:N` for each line skipped (viewers name them)."""
    latest: dict[Key, Prediction] = {}
    if not path.exists():
        return latest
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                row = json.loads(raw)
                if not _valid(row):
                    raise ValueError
                prediction = Prediction.from_json(row)
            except (ValueError, TypeError, RecursionError):
                if problems is not None and raw.strip():
                    problems.append(f"{path.name}:{number}: not a prediction line (bad JSON or field types); skipped")
                continue
            latest[key_of(prediction)] = prediction
    return latest


class PredictionStore:
    """The predictions file of one run folder, open for appending."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / PREDICTIONS
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair_torn_tail()
        self.done = read_predictions(self.path)
        self._fh = self.path.open("a", encoding="utf-8")
        self._synced = time.monotonic()

    def _repair_torn_tail(self) -> None:
        """Cut a last line that was not completely written (no trailing newline)."""
        if not self.path.exists():
            return
        with self.path.open("rb+") as fh:
            data = fh.read()
            if data and not data.endswith(b"\n"):
                fh.truncate(data.rfind(b"\n") + 1)

    def is_answered(self, task: str, item_id: str, request_hash: str, epoch: int = 0, rotation: int = 0) -> bool:
        """True when this exact request already has a successful answer (failed ones are retried)."""
        previous = self.done.get((task, item_id, epoch, rotation))
        return previous is not None and previous.error is None and previous.request_hash == request_hash

    def append(self, prediction: Prediction) -> None:
        self._fh.write(json.dumps(prediction.to_json(), ensure_ascii=False) + "\n")
        self._fh.flush()
        if time.monotonic() - self._synced >= FSYNC_EVERY_S:
            self._sync()
        self.done[key_of(prediction)] = prediction

    def _sync(self) -> None:
        os.fsync(self._fh.fileno())
        self._synced = time.monotonic()

    def compact(self, keep: Callable[[Prediction], bool] = lambda p: True) -> None:
        """Rewrite the file with one line per (task, id, epoch, rotation), atomically (old lines of retried items go)."""
        self._fh.close()
        kept = [p for p in self.done.values() if keep(p)]
        write_atomically(self.path, (json.dumps(p.to_json(), ensure_ascii=False) + "\n" for p in kept))
        self.done = {key_of(p): p for p in kept}
        self._fh = self.path.open("a", encoding="utf-8")

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.flush()
            self._sync()
        self._fh.close()

    def __enter__(self) -> PredictionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_atomically(path: Path, lines: Iterable[str]) -> None:
    """Write to a sibling temp file, fsync, then rename over `path` (never a half-written file)."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
