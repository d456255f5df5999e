"""The protocols a run can be asked and scored under: one object each, registered where it is defined.

A new one is a module here and its line below; `of(settings)` is a run's, `chosen(...)` decides a new run's.
"""

from eval.protocols import official, ours  # noqa: F401 - each registers its protocol
from eval.protocols.base import Protocol, Tally, TaskScoring, chosen, get, names, of, register, unregister

__all__ = ["Protocol", "TaskScoring", "Tally", "chosen", "get", "names", "of", "register", "unregister"]
