"""The scaling benchmark's own piece: the growth-exponent fit."""

from __future__ import annotations

import pytest

from workbench.bench.scale import _exponent


@pytest.mark.parametrize("power", [1.0, 2.0])
def test_growth_exponent_recovers_a_power_law(power):
    sizes = [100, 300, 1_000, 3_000, 10_000]
    assert _exponent(sizes, [1e-6 * n**power for n in sizes]) == pytest.approx(power)
    assert _exponent([100], [1.0]) is None
