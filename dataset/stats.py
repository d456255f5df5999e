"""The chi-square statistics of answer-letter positions (no scipy)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def regularized_gamma_q(a: float, x: float) -> float:
    """Q(a, x) = Γ(a, x) / Γ(a), the regularized upper incomplete gamma function. The power series of
    P = 1 - Q converges fast below x = a + 1, the continued fraction of Q (modified Lentz) above it; both to
    about 1e-15 (Numerical Recipes §6.2).

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


def position_bias(picks: Sequence[str | None], n_options: Sequence[int]) -> dict[str, Any] | None:
    """Share of answers per letter position and a chi-square test against picking positions evenly. The one
    implementation: `validate` tests a release's answer letters with it (every item has 8 options),
    `eval.circular` a model's picks under `--circular`.

    Under `--circular` every item's correct option visits every position once, so a model without a position
    preference spreads its answers evenly: each answer to an item with n options adds 1/n to the expected
    count of each of its n positions. Unparsed answers (None) are left out.

    >>> r = position_bias(["A", "A", "A", "B"], [2, 2, 2, 2])
    >>> r["pick_rate"], r["statistic"], r["df"]  # expected 2 and 2: (1 + 1) / 2
    ({'A': 0.75, 'B': 0.25}, 1.0, 1)
    """
    answered = [(p, n) for p, n in zip(picks, n_options, strict=True) if p is not None and n > 0]
    if not answered:
        return None
    width = max(n for _, n in answered)
    letters = [chr(ord("A") + i) for i in range(width)]  # LETTERS, and on past H for wider items
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
