"""What a `python -m eval` process sets up while it imports the harness: numpy with one OpenBLAS thread and
a cyclic collector that leaves the import-time objects alone (measured in bench/README.md)."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager


def load_numpy_single_threaded() -> None:
    """Import numpy with one OpenBLAS thread (the harness's linear algebra is a few matrix-vector products),
    unless the user chose a number; the variable is put back, so torch (loaded later) reads theirs."""
    if "OPENBLAS_NUM_THREADS" in os.environ:
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]


@contextmanager
def cli_imports() -> Iterator[None]:
    """Around a CLI's imports: numpy loaded as above, the collector paused, then what was made frozen
    and the collector's thresholds raised for the process: a run allocates a few dicts per request, almost
    none in cycles (and the runner drops a failed attempt's traceback, so a refused body is freed at once)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        load_numpy_single_threaded()
        yield
    finally:
        gc.freeze()
        gc.set_threshold(20_000, 20, 20)
        if enabled:
            gc.enable()
