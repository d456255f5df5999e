"""What a `python -m eval` process sets up while it imports the harness.

- numpy's OpenBLAS starts a thread per core when it loads, and each one busy-waits for a while
  (OpenBLAS's thread timeout) before it sleeps, again after every call it shares out: on this
  harness's workload that is CPU burnt for nothing, about 0.1 s per run on 2 cores and more on
  larger machines. The harness's own linear algebra is a few matrix-vector products for intervals,
  so the CLI loads numpy with one OpenBLAS thread. A user's `OPENBLAS_NUM_THREADS` is kept, and the
  variable is put back once numpy has loaded, so libraries loaded later (torch for an `hf:` model)
  read the user's environment, not ours.
- The imports make about 60,000 objects that Python's cyclic collector tracks, and they live as long
  as the process. The collector would walk them again and again while they are made, and at every
  full collection after; it is paused during the imports and what they made is then frozen
  (`gc.freeze`), out of its reach. A run then allocates a few dicts per request, almost none of
  them in cycles, so the collector runs every 20,000 allocations instead of Python's 700 (and its
  older generations as rarely, in proportion): about 5% of a run's CPU on this workload. What
  must not wait for the collector does not: the runner drops a failed attempt's traceback at once,
  so a refused body (up to the 4 MiB bound) is freed when it is refused, not at a collection.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager


def load_numpy_single_threaded() -> None:
    """Import numpy with one OpenBLAS thread, unless the user chose a number."""
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
    and the collector's thresholds raised for the process."""
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
