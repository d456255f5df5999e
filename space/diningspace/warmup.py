"""One-time heavy imports, done once and before any dataset work.

Importing `evaluate` (the metrics) pulls in transformers, which initialises lazily. While that
runs, another thread hashing a dataset (`datasets` looks transformers up in sys.modules) can hit a
half-initialised module and fail. So the harness is imported first, under a lock, and every
dataset load and evaluation passes through `warm_harness()` before it starts.
"""

from __future__ import annotations

import contextlib
import importlib
import threading

_LOCK = threading.Lock()
_done = False


def warm_harness() -> None:
    """Import the harness and the metrics modules once; later calls return at once."""
    global _done
    with _LOCK:
        if _done:
            return
        with contextlib.suppress(Exception):  # a broken install is reported by the evaluation itself, in one line
            importlib.import_module("eval.api")
            importlib.import_module("eval.scoring")
        _done = True
