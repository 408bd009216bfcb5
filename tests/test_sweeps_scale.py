"""The scaling benchmark's own piece: the growth-exponent fit."""

from __future__ import annotations

import pytest

from workbench.bench.scale import _exponent, _growth_markdown


@pytest.mark.parametrize("power", [1.0, 2.0])
def test_growth_exponent_recovers_a_power_law(power):
    sizes = [100, 300, 1_000, 3_000, 10_000]
    assert _exponent(sizes, [1e-6 * n**power for n in sizes]) == pytest.approx(power)
    assert _exponent([100], [1.0]) is None


def test_cpu_growth_table_gives_each_methods_exponent_between_its_sizes():
    laws = (("heft", 1e-5, 1.0), ("etf", 1e-7, 2.0))
    rows = [{"method": m, "nodes": n, "cpu_seconds": c * n**p} for m, c, p in laws for n in (10_000, 100_000)]
    table = _growth_markdown(rows)
    assert "| heft | 0.1 s | 1 s | 1.00 |" in table
    assert "| etf | 10 s | 1e+03 s | 2.00 |" in table
    assert _growth_markdown([]) == ""
