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


def test_a_row_measured_below_1000_ops_only_says_what_its_exponent_is_fitted_over():
    from workbench.bench.scale import _markdown

    rows = [
        {"method": m, "devices": d, "nodes": n, "ops": n, "seconds": 1e-6 * n, "peak_mib": 1.0, "note": None}
        for m in ("simulate", "local_search per evaluation")
        for d in (4, 8)
        for n in (100, 1_000, 10_000)
        if not (m.startswith("local") and n > 1_000)
    ]
    rows += [{"method": "local_search per evaluation", "devices": d, "nodes": 10_000, "seconds": None, "note": "not run"} for d in (4, 8)]
    growth = {(r["method"], r["devices"]): 1.0 for r in rows}
    table = _markdown(rows, growth, [100, 1_000, 10_000], "test graphs", None, [])
    assert "| simulate | 0.0001 s / 1 MiB | 0.001 s / 1 MiB | 0.01 s / 1 MiB | 1.00 |" in table
    assert "| local_search per evaluation | 0.0001 s / 1 MiB | 0.001 s / 1 MiB | not run | 1.00 (fitted over 100–1,000 ops) |" in table
