"""The construction's user errors: an export, a work folder, a review file or a flag that cannot be
used as given. `python -m construct` prints one as one `error:` line (exit 2); anything else is a bug
and keeps its traceback (exit 1)."""

from __future__ import annotations

from eval.types import UserError


class BuildError(UserError):
    """One line naming the file and line, the item or the flag, and what to do."""


class StageFailed(RuntimeError):
    """Too many of a stage's model calls failed or gave no readable answer: the build stops with a summary
    (a rerun asks the failed calls again)."""
