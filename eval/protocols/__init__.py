"""The protocols a run can be asked and scored under: one object each, registered where it is defined.

`of(settings)` is the run's protocol (run.json records its name); `chosen(settings, rows)` decides it for a
new run (the one asked, else the one that claims the release's rows, else ours). Each module below
registers its protocol when imported; a new one is a module here and its line below.
"""

from eval.protocols import official, ours  # noqa: F401 - each registers its protocol
from eval.protocols.base import (
    Protocol,
    Tally,
    TaskScoring,
    chosen,
    get,
    names,
    of,
    register,
    unregister,
)

__all__ = ["Protocol", "TaskScoring", "Tally", "chosen", "get", "names", "of", "register", "unregister"]
