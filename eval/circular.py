"""Option-order robustness (`run --circular`, CircularEval): each classification item is asked under
every rotation of its options and counts correct only if every rotation is; a chi-square test says
whether the model favours a letter position whatever the options.

Rotation 0 is the item as stored and stays in scores.jsonl; rotations 1..n-1 are scored into
rotations.jsonl (the same fields plus `rotation` and `n_options`), so every reader of scores.jsonl sees one line per item.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eval.stats import can_resample, cluster_bootstrap_mean_ci
from eval.types import LETTERS

ROTATIONS = "rotations.jsonl"


# ---------------------------------------------------------------- the chi-square distribution
def regularized_gamma_q(a: float, x: float) -> float:
    """Q(a, x) = Γ(a, x) / Γ(a), the regularized upper incomplete gamma function.

    The power series of P = 1 - Q converges fast below x = a + 1, the continued fraction of Q
    (modified Lentz) above it; both to about 1e-15 (Numerical Recipes §6.2).

    >>> round(regularized_gamma_q(1.0, 2.0), 6)  # Q(1, x) = exp(-x)
    0.135335
    """
    if a <= 0 or x < 0:
        raise ValueError(f"regularized_gamma_q needs a > 0 and x >= 0, got a={a}, x={x}")
    if x == 0:
        return 1.0
    log_prefix = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        denominator = a
        for _ in range(10_000):
            denominator += 1
            term *= x / denominator
            total += term
            if abs(term) < abs(total) * 1e-16:
                break
        return max(0.0, 1.0 - total * math.exp(log_prefix))
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-16:
            break
    return min(1.0, h * math.exp(log_prefix))


def chi_square_sf(statistic: float, df: int) -> float:
    """P(X >= statistic) for X ~ chi-square with `df` degrees of freedom: the test's p-value.

    >>> round(chi_square_sf(7.815, 3), 4), round(chi_square_sf(14.067, 7), 4)
    (0.05, 0.05)
    """
    if df < 1:
        raise ValueError(f"df must be at least 1, got {df}")
    return regularized_gamma_q(df / 2, max(0.0, statistic) / 2)


# ---------------------------------------------------------------- position bias
def position_bias(picks: Sequence[str | None], n_options: Sequence[int]) -> dict[str, Any] | None:
    """Share of answers per letter position and a chi-square test against picking positions evenly.

    Under `--circular` every item's correct option visits every position once, so a model without a
    position preference spreads its answers evenly: each answer to an item with n options adds 1/n
    to the expected count of each of its n positions. Unparsed answers (None) are left out.

    >>> r = position_bias(["A", "A", "A", "B"], [2, 2, 2, 2])
    >>> r["pick_rate"], r["statistic"], r["df"]  # expected 2 and 2: (1 + 1) / 2
    ({'A': 0.75, 'B': 0.25}, 1.0, 1)
    """
    answered = [(p, n) for p, n in zip(picks, n_options, strict=True) if p is not None and n > 0]
    if not answered:
        return None
    width = max(n for _, n in answered)
    letters = LETTERS[:width] if width <= len(LETTERS) else [chr(ord("A") + i) for i in range(width)]
    observed = dict.fromkeys(letters, 0)
    expected = dict.fromkeys(letters, 0.0)
    for pick, n in answered:
        if pick in observed:
            observed[pick] += 1
        for letter in letters[:n]:
            expected[letter] += 1 / n
    statistic = sum((observed[k] - expected[k]) ** 2 / expected[k] for k in letters if expected[k] > 0)
    df = sum(expected[k] > 0 for k in letters) - 1
    return {"n_answers": len(answered), "pick_rate": {k: observed[k] / len(answered) for k in letters},
            "statistic": round(statistic, 6), "df": df,
            "p_value": chi_square_sf(statistic, df) if df >= 1 else None}


# ---------------------------------------------------------------- figures of a circular run
def circular_figures(plain: Sequence[dict[str, Any]], rotated: Sequence[dict[str, Any]], *,
                     n_boot: int = 1000, seed: int = 0) -> dict[str, Any] | None:
    """metrics.json's circular figures from rotation 0 (scores.jsonl lines) and the other rotations.

    An item (per epoch) counts when all its rotations were scored; it is correct when every one is.
    `accuracy` is rotation 0's on the same items, so the gap to `circular_accuracy` is the
    share of items the model got right only in the stored order. None without rotations.
    """
    if not rotated:
        return None
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in [*plain, *rotated]:
        groups.setdefault((str(row["id"]), int(row.get("epoch") or 0)), []).append(row)
    complete = []
    for rows in groups.values():
        n = max((int(r.get("n_options") or 0) for r in rows), default=0)
        if n and {int(r.get("rotation") or 0) for r in rows} == set(range(n)):
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


def read_rotations(run_dir: Path | str) -> list[dict[str, Any]]:
    """The rotated lines of a run folder (empty when the run was not circular)."""
    path = Path(run_dir) / ROTATIONS
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and "id" in row:
            rows.append(row)
    return rows
