"""The synthetic renderer's pixels are the same on every CPU: no NumPy transcendental kernel reaches them."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest

from synthetic import portable

ROOT = Path(__file__).resolve().parents[1]
# NumPy ufuncs that run on a kernel chosen for the CPU (SIMD, SVML), whose last bits differ between machines.
DISPATCHED = {"sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh", "exp", "exp2",
              "expm1", "log", "log2", "log10", "log1p", "power", "float_power", "hypot", "cbrt"}


def test_sines_and_cosines_are_the_c_librarys_element_by_element_whatever_the_arrays_shape() -> None:
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.uniform(-200, 200, 997), [0.0, -0.0, math.pi, 1e-300, 123456.789]])
    for fn, reference in ((portable.sin, math.sin), (portable.cos, math.cos)):
        whole = fn(values)
        assert whole.dtype == np.float64 and whole.shape == values.shape
        assert whole.tolist() == [reference(v) for v in values.tolist()]  # bit for bit
        # Any length, any position of an element (a SIMD kernel's tail loop is where bits drift), any shape.
        for n in (1, 3, 7, 8, 9, 16, 17, 63):
            assert fn(values[:n]).tolist() == whole[:n].tolist()
            assert fn(values[5:5 + n]).tolist() == whole[5:5 + n].tolist()
        assert fn(values[:1000].reshape(10, 100)).ravel().tolist() == whole[:1000].tolist()
        assert fn(values.astype(np.float32)).tolist() == [reference(float(v)) for v in values.astype(np.float32)]
        assert fn(1.25).shape == () and float(fn(1.25)) == reference(1.25)


def test_powers_are_chains_of_products_or_the_c_librarys_pow() -> None:
    rng = np.random.default_rng(11)
    values = rng.uniform(0, 1.5, 513)
    cube = portable.power(values, 3)
    assert cube.tolist() == [(v * v) * v for v in values.tolist()]
    by_24 = portable.power(values, 24)  # squaring: v^8 * v^16
    expected = []
    for v in values.tolist():
        v2 = v * v
        v4 = v2 * v2
        v8 = v4 * v4
        expected.append(v8 * (v8 * v8))
    assert by_24.tolist() == expected
    assert portable.power(values, 0.8).tolist() == [math.pow(v, 0.8) for v in values.tolist()]
    assert np.allclose(portable.power(values, 0.8), values ** 0.8, rtol=1e-15, atol=0)
    assert portable.power(values, 1).tolist() == values.tolist()
    with pytest.raises(ValueError):
        portable.power(np.array([-0.5]), 0.8)  # a fractional power of a negative number has no real value


def test_the_renderer_calls_no_numpy_transcendental() -> None:
    """Every sine, cosine and power of the drawing code goes through `synthetic.portable`; an `**` is on a
    plain float (the C library's pow, the same on every machine of one platform) or a square (a product)."""
    found = []
    for path in sorted((ROOT / "synthetic").glob("*.py")):
        if path.name == "portable.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr in DISPATCHED and isinstance(node.value, ast.Name)
                    and node.value.id in ("np", "numpy")):
                found.append(f"{path.name}:{node.lineno} np.{node.attr}")
    assert found == []
