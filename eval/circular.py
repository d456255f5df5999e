"""Option-order robustness (`run --circular`, CircularEval): a classification item asked under every rotation
of its options counts only if every rotation is right; a chi-square test says whether the model favours a
letter position. Rotations 1..n-1 go to rotations.jsonl (scores.jsonl's fields plus `rotation` and
`n_options`), so every reader of scores.jsonl sees one line per item."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from diningbench import MAX_JSON_DEPTH, file_problem, iter_jsonl_objects, position_bias
from eval.settings import N_BOOT
from eval.stats import can_resample, cluster_bootstrap_mean_ci
from eval.store import RUN_FILE_BYTES, RUN_LINE_BYTES
from eval.types import ScoreRecord, within_alphabet

ROTATIONS = "rotations.jsonl"


# ---------------------------------------------------------------- figures of a circular run
def circular_figures(plain: Sequence[ScoreRecord], rotated: Sequence[ScoreRecord], *,
                     n_boot: int = N_BOOT, seed: int = 0) -> dict[str, Any] | None:
    """metrics.json's circular figures from rotation 0 (scores.jsonl lines) and the other rotations. An item
    (per epoch) counts when all its rotations were scored; it is correct when every one is. `accuracy` is
    rotation 0's on the same items, so the gap to `circular_accuracy` is the share of items the model got
    right only in the stored order. None without rotations."""
    if not rotated:
        return None
    groups: dict[tuple[str, int], list[ScoreRecord]] = {}
    for row in [*plain, *rotated]:
        groups.setdefault((str(row["id"]), int(row.get("epoch") or 0)), []).append(row)
    complete = []
    for rows in groups.values():
        counts = {_letters(r, "n_options") for r in rows}  # a count past the alphabet: not a complete item
        n = 0 if -1 in counts else max(counts, default=0)
        if n and {_letters(r, "rotation") for r in rows} == set(range(n)):
            complete.append(sorted(rows, key=lambda r: int(r.get("rotation") or 0)))
    figures: dict[str, Any] = {"items": len(complete), "incomplete": len(groups) - len(complete),
                               "rotations": max((len(rows) for rows in complete), default=0)}
    if not complete:
        return {**figures, "circular_accuracy": None, "circular_accuracy_ci95": None}
    consistent = [float(all(r.get("correct") is True for r in rows)) for rows in complete]
    merchants = [str(rows[0].get("merchant_id")) for rows in complete]
    interval = (cluster_bootstrap_mean_ci(consistent, merchants, n_boot=n_boot, seed=seed)
                if can_resample(len(complete), merchants) else None)
    every = [r for rows in complete for r in rows]
    bias = position_bias([r.get("parsed") if isinstance(r.get("parsed"), str) else None for r in every],
                         [len(rows) for rows in complete for _ in rows])
    figures.update(circular_accuracy=sum(consistent) / len(consistent),
                   circular_accuracy_ci95=None if interval is None else [float(interval[0]), float(interval[1])],
                   accuracy=sum(rows[0].get("correct") is True for rows in complete) / len(complete),
                   position_bias=bias)
    return figures


def read_rotations(run_dir: Path | str) -> list[ScoreRecord]:
    """The rotated lines of a run folder (empty when the run was not circular): scores.jsonl records plus
    `rotation`, read as scoring wrote them. The folder may come from anywhere: the file is read bounded and
    not through a link out of it, and a line is left out unless what the figures read has its type and range
    (`_rotation_problem`)."""
    path = Path(run_dir) / ROTATIONS
    try:
        if not path.exists() or file_problem(path, path.parent, max_bytes=RUN_FILE_BYTES) is not None:
            return []
    except OSError:
        return []
    return [cast(ScoreRecord, row) for _, row in iter_jsonl_objects(path, policy="skip", max_depth=MAX_JSON_DEPTH,
                                                 max_line_bytes=RUN_LINE_BYTES) if not _rotation_problem(row)]


def _letters(row: ScoreRecord, key: str) -> int:
    """A line's option count or rotation (0 when it has none), or -1 when it is no whole number within the
    alphabet (a line from elsewhere: scores.jsonl's readers do not check these two)."""
    value = row.get(key) or 0
    return value if within_alphabet(value) else -1


def _rotation_problem(row: dict[str, Any]) -> bool:
    """Whether a rotations.jsonl line cannot be counted: an id that is not text or a number, an epoch or a
    rotation that is not a whole number >= 0, options beyond the alphabet, `correct` not true/false/null."""
    return (not isinstance(row.get("id"), str | int) or isinstance(row.get("id"), bool)
            or not (row.get("epoch") is None or isinstance(row["epoch"], int) and not isinstance(row["epoch"], bool)
                    and 0 <= row["epoch"] <= 1 << 31)
            or not (row.get("rotation") is None or within_alphabet(row["rotation"]))
            or not (row.get("n_options") is None or within_alphabet(row["n_options"]))
            or not (row.get("correct") is None or isinstance(row["correct"], bool)))
