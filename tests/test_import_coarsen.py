"""Coarsening (core, no torch): any DAG stays acyclic, costs are kept, every edge is mapped."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from workbench.generators import generate
from workbench.importers import coarsen


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 1000),
    nodes=st.integers(2, 60),
    target=st.integers(1, 30),
    kind=st.sampled_from(["erdos_renyi", "series_parallel", "layered"]),
)
def test_coarsening_any_dag_stays_acyclic_and_maps_every_edge(seed, nodes, target, kind):
    params = {"nodes": nodes} if kind != "layered" else {"layers": max(1, nodes // 6)}
    graph = generate(kind, seed=seed, **params)
    cheap = np.random.default_rng(seed).random(graph.num_nodes) < 0.5
    coarse = coarsen(graph, target_nodes=target, fusible=cheap)  # the constructor rejects cycles
    assert coarse.num_nodes <= max(target, 1)
    label = np.empty(graph.num_nodes, dtype=np.int64)
    for g, members in enumerate(coarse.metadata["coarse_groups"]):
        label[members] = g
    assert coarse.total_compute == pytest.approx(graph.total_compute)
    coarse_edges = set(zip(coarse.src.tolist(), coarse.dst.tolist(), strict=True))
    for u, v in zip(graph.src.tolist(), graph.dst.tolist(), strict=True):
        assert label[u] == label[v] or (label[u], label[v]) in coarse_edges


def test_coarsen_needs_to_know_which_ops_are_cheap():
    graph = generate("layered")
    with pytest.raises(ValueError, match="fusible"):
        coarsen(graph)
    assert coarsen(graph, fuse_elementwise=False, target_nodes=5).num_nodes == 5
    with pytest.raises(ValueError, match="target_nodes"):
        coarsen(graph, target_nodes=0, fuse_elementwise=False)
