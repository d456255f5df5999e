"""Where a build's per-photo and per-call work runs: in this process (`--engine local`, the default), or
on Ray Data (`--engine ray`, construct/ray_engine.py): the same stages, work folder and release.
"""

from __future__ import annotations

import importlib
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import islice
from pathlib import Path
from typing import Any

from construct.errors import BuildError
from construct.prefilter import prefilter_chunk

# Engines by name, each loaded when asked for (as eval/specs.py's BACKENDS): Ray, an optional requirement,
# is imported only by a build that runs on it, never by the Space or the local engine.
ENGINES = {"local": "construct.engine", "ray": "construct.ray_engine"}
CHUNK = 64  # photos per prefilter job
IN_PROCESS_BELOW = 256  # a prefilter over fewer photos runs in this process (a pool costs ~1 s to start)


def chunks(rows: Iterable[Any], size: int) -> Iterator[list[Any]]:
    it = iter(rows)
    while chunk := list(islice(it, size)):
        yield chunk


def ordered_window(submit: Callable[[list[Any]], Future], jobs: Iterable[list[Any]], ahead: int) -> Iterator[Any]:
    """Each job's results in order, at most `ahead` jobs submitted and not yet consumed (memory bounded
    however long `jobs` is; `Executor.map` would submit them all at once)."""
    source = iter(jobs)
    window: deque[Future] = deque(submit(job) for job in islice(source, ahead))
    while window:
        done = window.popleft().result()
        window.extend(submit(job) for job in islice(source, 1))
        yield from done


class LocalEngine:
    """This process: the prefilter on a process per core (rows (seq, path) in, (seq, reason or None, dHash
    or None) out in any order, the caller writing them by seq); no `answer`: `Models` runs every call
    phase on the driver's event loop."""

    name = "local"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or os.cpu_count() or 1

    def prefilter(self, rows: Iterable[tuple[int, str]], min_side: int, *, total: int | None = None
                  ) -> Iterator[tuple[int, str | None, int | None]]:
        if self.workers < 2 or (total is not None and total < IN_PROCESS_BELOW):
            for chunk in chunks(rows, CHUNK):
                yield from prefilter_chunk(chunk, min_side)
            return
        with ProcessPoolExecutor(max_workers=self.workers) as pool:
            yield from ordered_window(lambda chunk: pool.submit(prefilter_chunk, chunk, min_side),
                                      chunks(rows, CHUNK), ahead=2 * self.workers)

    def close(self) -> None:
        pass


def check_available(settings: Any) -> None:
    """Before a build touches its work folder: the engine it asks for can run here (one line when not)."""
    if settings.engine == "ray":
        importlib.import_module(ENGINES["ray"]).require_ray()


def make_engine(settings: Any, work: Path) -> Any:
    """The engine of `--engine`; Ray is imported only when asked for, with a one-line hint when absent."""
    if settings.engine == "local":
        return LocalEngine()
    if settings.engine != "ray":
        raise BuildError(f"--engine wants one of {', '.join(ENGINES)}, got {settings.engine!r}")
    return importlib.import_module(ENGINES["ray"]).RayEngine(settings.ray_address, settings, work)
