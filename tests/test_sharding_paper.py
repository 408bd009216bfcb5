"""The sharded Llama block against the paper's transformer_block_215nodes (issue 21's check), and the Llama block itself."""

from __future__ import annotations

import collections

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from workbench.datasets import bundled_graph  # noqa: E402
from workbench.importers import from_torch  # noqa: E402
from workbench.importers.paper_check import (  # noqa: E402
    PAPER_FILE_EDGE,
    PAPER_GRAPH,
    heuristic_makespans,
    paper_block,
    ranking,
    ranking_text,
    with_edge_moved,
)
from workbench.models.llama import llama_block  # noqa: E402


@pytest.fixture(scope="module")
def paper():
    return bundled_graph(PAPER_GRAPH)


@pytest.fixture(scope="module")
def block():
    return paper_block()


def test_ranking_groups_ties_within_the_tolerance():
    groups = ranking({"a": 100.0, "b": 100.4, "c": 101.0, "d": 99.0})
    assert groups == [{"d"}, {"a", "b"}, {"c"}]  # b is within 0.5% of a; c is not
    assert ranking_text(groups) == "d < a = b < c"


def test_llama_block_shards_every_op_and_conserves_flops():
    with torch.device("meta"):
        block = llama_block(width=64, heads=4, ffn=96, batch=2, seq=8)
    traced_flops = from_torch(block, block.example_inputs(), device="meta").metadata["total_flops"]
    from workbench.importers.sharding import shard

    graph = shard(block, block.example_inputs(), "batch=2,heads=2,hidden=2", kernels="einsum", device="meta")
    assert graph.metadata["unsharded"] == []  # casts, the complex rotary step and the float32 softmax all split
    assert graph.metadata["total_flops"] - graph.metadata["combine_flops"] == traced_flops
    kinds = collections.Counter(graph.op_types)
    assert kinds["view_as_complex"] == kinds["view_as_real"] == 2 * 2 * 2  # Q and K, per batch x heads block (hidden -> heads)
    assert kinds["linear"] == 7 * 2 * 2 * 2  # seven projections, batch x out x contracted blocks


def _edges(graph):
    return set(zip(graph.src.tolist(), graph.dst.tolist(), strict=True))


def test_sharded_block_is_the_paper_graph_node_for_node_but_one_edge(paper, block):
    assert block.num_nodes == paper.num_nodes and block.num_edges == paper.num_edges  # 182 and 234: within 15%, exactly
    assert block.metadata["unsharded"] == []
    np.testing.assert_allclose(block.compute, paper.compute)  # every node's cost, in the paper's node order
    assert abs(block.total_compute / paper.total_compute - 1) < 1e-3
    file_edge, block_edge = PAPER_FILE_EDGE
    assert _edges(paper) - _edges(block) == {file_edge} and _edges(block) - _edges(paper) == {block_edge}


def test_same_heuristic_makespans_and_ranking_once_the_files_edge_is_moved(paper, block):
    expected = heuristic_makespans(paper)
    moved = heuristic_makespans(with_edge_moved(block, PAPER_FILE_EDGE[1], PAPER_FILE_EDGE[0]))
    assert moved == pytest.approx(expected, rel=1e-9)
    assert ranking(moved) == ranking(expected)


@pytest.mark.xfail(
    strict=True,
    reason="not met on the block as the model computes it: the paper's file has one misplaced edge (PAPER_FILE_EDGE), "
    "which alone makes etf worst there; with the block's own edge etf is best (docs/generators.md)",
)
def test_sharded_block_ranks_the_heuristics_as_the_paper_graph_does(paper, block):
    assert ranking(heuristic_makespans(block)) == ranking(heuristic_makespans(paper))


def test_per_op_partitions_follow_inputs_and_touch_overlapping_blocks():
    with torch.device("meta"):
        model = llama_block(width=64, heads=4, ffn=96, batch=2, seq=8, causal=False)
    from workbench.importers.sharding import shard

    graph = shard(model, model.example_inputs(), "seq=2,hidden=2", op_parts={"wq": "seq=1,hidden=2,reduced=2"}, device="meta")
    assert "repartition" not in graph.op_types  # re-split inputs are read where they lie
    names = graph.names
    first_norm = {i for i, n in enumerate(names) if n.startswith("type_as[")}
    assert len(first_norm) == 4  # the input's seq x hidden split, kept by the norm's ops
    wq = [i for i, n in enumerate(names) if n.startswith("wq[")]
    assert len(wq) == 4  # outputs 2 x contraction 2; every position in each kernel
    for node in wq:
        readers = {names[u] for u in graph.src[graph.dst == node].tolist()}
        assert len(readers) == 2 and all(r.startswith("mul_1[") for r in readers)  # both position halves of its slice
