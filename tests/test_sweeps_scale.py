"""The scaling benchmark's own pieces: its fallback graph generator and the growth-exponent fit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.bench.scale import _exponent, layered_dag


@settings(max_examples=20, deadline=None)
@given(nodes=st.integers(3, 400), seed=st.integers(0, 10))
def test_layered_dag_is_a_connected_dag_of_the_requested_size(nodes, seed):
    graph = layered_dag(nodes, seed=seed)
    assert graph.num_nodes == nodes
    assert len(graph.topological_order) == nodes
    width = max(2, int(np.sqrt(nodes)))
    has_parent = np.zeros(nodes, dtype=bool)
    has_parent[graph.dst] = True
    assert has_parent[width:].all() and not has_parent[:width].any()
    assert (graph.src < graph.dst).all()
    assert (graph.compute > 0).all() and (graph.comm > 0).all()


def test_layered_dag_is_seeded():
    a, b = layered_dag(300, seed=4), layered_dag(300, seed=4)
    assert np.array_equal(a.src, b.src) and np.array_equal(a.compute, b.compute)


@pytest.mark.parametrize("power", [1.0, 2.0])
def test_growth_exponent_recovers_a_power_law(power):
    sizes = [100, 300, 1_000, 3_000, 10_000]
    assert _exponent(sizes, [1e-6 * n**power for n in sizes]) == pytest.approx(power)
    assert _exponent([100], [1.0]) is None
