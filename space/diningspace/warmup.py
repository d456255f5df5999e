"""One-time heavy imports, done once and before any dataset work.

`evaluate` pulls in transformers, which initialises lazily: a thread hashing a dataset meanwhile (`datasets`
looks transformers up in sys.modules) could hit a half-initialised module and fail.
"""

from __future__ import annotations

import contextlib
import importlib
import threading

_LOCK = threading.Lock()
_done = False


def warm_harness() -> None:
    """Import the harness and the metrics modules once, under a lock; every dataset load and evaluation
    calls it first. Later calls return at once."""
    global _done
    with _LOCK:
        if _done:
            return
        with contextlib.suppress(Exception):  # a broken install is reported by the evaluation itself, in one line
            importlib.import_module("eval.api")
            importlib.import_module("eval.scoring")
        _done = True
