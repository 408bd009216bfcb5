"""The graph model: construction checks, derived structure, conversions."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings

import workbench as wb
from workbench.graph import GraphError

from .conftest import random_dags, small_dag


def test_arrays_are_read_only():
    g = small_dag("diamond")
    with pytest.raises(ValueError):
        g.compute[0] = 9.0
    with pytest.raises(AttributeError):
        g.compute = np.zeros(4)  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(compute=[1, 1], src=[0, 1], dst=[1, 0], comm=[0, 0]), "cycle"),
        (dict(compute=[1, 1], src=[0], dst=[2], comm=[0]), "destination 2"),
        (dict(compute=[1, 1], src=[0, 1], dst=[1], comm=[0]), "edge sources"),
        (dict(compute=[1, 1], src=[0], dst=[1], comm=[0, 1]), "communication costs"),
        (dict(compute=[1, -1], src=[], dst=[], comm=[]), "compute cost"),
        (dict(compute=[1, float("nan")], src=[], dst=[], comm=[]), "compute cost"),
        (dict(compute=[1, 1], src=[0], dst=[1], comm=[-3]), "communication cost"),
        (dict(compute=[1], src=[0], dst=[0], comm=[1]), "self-loop"),
        (dict(compute=[1, 1], src=[], dst=[], comm=[], names=["a"]), "names"),
    ],
)
def test_invalid_graphs_are_refused(kwargs, message):
    with pytest.raises(GraphError, match=message):
        wb.DataflowGraph(**kwargs)


def test_levels_on_a_diamond():
    g = small_dag("diamond")  # compute 1,4,4,1; every edge costs 2
    assert g.bottom_level(with_comm=True).tolist() == [1 + 2 + 4 + 2 + 1, 4 + 2 + 1, 4 + 2 + 1, 1]
    assert g.bottom_level(with_comm=False).tolist() == [6, 5, 5, 1]
    assert g.top_level(with_comm=True).tolist() == [0, 3, 3, 9]
    assert g.longest_path() == 6 and g.longest_path(with_comm=True) == 10
    assert g.critical_path() == [0, 1, 3]
    assert g.depth.tolist() == [0, 1, 1, 2]


def test_csr_keeps_file_order_per_op():
    g = wb.DataflowGraph.from_edges([1] * 4, [(0, 3), (0, 1), (2, 3), (0, 2)])
    ptr, succ, edge = g.succ_csr
    assert succ[ptr[0] : ptr[1]].tolist() == [3, 1, 2]
    assert edge[ptr[0] : ptr[1]].tolist() == [0, 1, 3]
    assert g.predecessors(3).tolist() == [0, 2]


@settings(max_examples=60, deadline=None)
@given(random_dags())
def test_topological_order_respects_every_edge(g):
    position = np.empty(g.num_nodes, dtype=int)
    position[g.topological_order] = np.arange(g.num_nodes)
    assert sorted(g.topological_order.tolist()) == list(range(g.num_nodes))
    assert np.all(position[g.src] < position[g.dst])


@settings(max_examples=40, deadline=None)
@given(g=random_dags(integer_costs=False))
def test_networkx_and_json_round_trips(g, tmp_path_factory):
    back = wb.DataflowGraph.from_networkx(g.to_networkx())
    assert np.array_equal(back.compute, g.compute)
    assert sorted(zip(back.src.tolist(), back.dst.tolist(), back.comm.tolist(), strict=True)) == sorted(
        zip(g.src.tolist(), g.dst.tolist(), g.comm.tolist(), strict=True)
    )
    path = tmp_path_factory.mktemp("rt") / "g.json"
    named = wb.DataflowGraph(g.compute, g.src, g.dst, g.comm, names=[f"n{i}" for i in range(g.num_nodes)], metadata={"name": "x"})
    named.save(path)
    assert wb.load_graph(path).same_as(named)


def test_longest_path_matches_networkx(paper_graphs):
    for g in paper_graphs.values():
        nxg = nx.DiGraph()
        for v in range(g.num_nodes):
            nxg.add_edge("entry", v, w=g.compute[v])
        for u, v in zip(g.src.tolist(), g.dst.tolist(), strict=True):
            nxg.add_edge(u, v, w=g.compute[v])
        assert g.longest_path() == nx.dag_longest_path_length(nxg, weight="w")


def test_with_metadata_copies_share_the_validated_structure():
    graph = small_dag("diamond")
    order = graph.topological_order
    copy = graph.with_metadata(name="renamed", extra=1)
    assert copy.same_as(graph) and copy.topological_order is order
    assert copy.name == "renamed" and copy.metadata["extra"] == 1
    assert graph.name == "diamond" and "extra" not in graph.metadata
