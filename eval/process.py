"""What a `python -m eval` process sets up before anything imports numpy.

numpy's OpenBLAS starts a thread per core when it loads, and each one busy-waits for a while
(OpenBLAS's thread timeout) before it sleeps, again after every call it shares out: on this
harness's workload that is CPU burnt for nothing, about 60 ms per run on 2 cores and more on
larger machines. The harness's own linear algebra is a few matrix-vector products for intervals,
so the CLI loads numpy with one OpenBLAS thread. The setting is the process's own: a user's
`OPENBLAS_NUM_THREADS` is kept, and the variable is put back once numpy has loaded, so libraries
loaded later (torch for an `hf:` model) read the user's environment, not ours.
"""

from __future__ import annotations

import os


def load_numpy_single_threaded() -> None:
    """Import numpy with one OpenBLAS thread, unless the user chose a number."""
    if "OPENBLAS_NUM_THREADS" in os.environ:
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]
