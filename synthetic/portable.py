"""sin, cos and powers that give the same bits on every CPU, for a renderer whose pixels must.

NumPy's kernels for these are chosen per CPU (AVX-512, AVX2, NEON; float32 and float64 alike) and differ in
their last bits, which 8-bit pixels and polygon edges show; here each value is the C library's (`math`), one
element at a time, affordable as arrays here are small (a polygon's points) or computed once and cached.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np


def _each(fn: Callable[[float], float], values: Any) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    flat = array.ravel().tolist()
    return np.fromiter(map(fn, flat), dtype=np.float64, count=len(flat)).reshape(array.shape)


def sin(values: Any) -> np.ndarray:
    """`np.sin(values)` in float64, the same bits on every CPU."""
    return _each(math.sin, values)


def cos(values: Any) -> np.ndarray:
    """`np.cos(values)` in float64, the same bits on every CPU."""
    return _each(math.cos, values)


def power(values: Any, exponent: float) -> np.ndarray:
    """`values ** exponent` in float64, the same bits on every CPU: a whole exponent (at least 1) by repeated
    squaring (IEEE products, whatever the vector width), any other by the C library's `pow`, element by
    element (so `values` must be at least 0 then)."""
    array = np.asarray(values, dtype=np.float64)
    if float(exponent).is_integer() and exponent >= 1:
        n = int(exponent)
        out: np.ndarray | None = None
        square = array
        while n:
            if n & 1:
                out = square if out is None else out * square
            n >>= 1
            if n:
                square = square * square
        assert out is not None
        return out
    return _each(lambda v: math.pow(v, exponent), array)
