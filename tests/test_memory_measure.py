"""The bounded-memory checks' measure (tests/helpers_memory.py) sees what the in-process one could not."""

from __future__ import annotations

from tests.helpers_memory import peak_growth_mb


def test_the_measure_sees_an_allocation_after_a_larger_one_elsewhere():
    """What the in-process measure missed: 300 MB allocated reads as 300 MB here, whatever ran before."""
    grown = peak_growth_mb("import numpy as np", "block = np.ones(300 * 2**20 // 8)")
    assert 250 < grown < 400, grown
    assert peak_growth_mb("import numpy as np", "block = np.ones(1000)") < 20
