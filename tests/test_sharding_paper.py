"""The sharded Llama block against the paper's transformer_block_215nodes (issue 21's check), and the Llama block itself."""

from __future__ import annotations

import collections

import pytest

torch = pytest.importorskip("torch")

from workbench.datasets import bundled_graph  # noqa: E402
from workbench.importers import from_torch  # noqa: E402
from workbench.importers.paper_check import (  # noqa: E402
    PAPER_GRAPH,
    PAPER_PARTS,
    heuristic_makespans,
    paper_block,
    ranking,
    ranking_text,
)
from workbench.models.llama import llama_block  # noqa: E402


@pytest.fixture(scope="module")
def paper():
    return bundled_graph(PAPER_GRAPH)


@pytest.fixture(scope="module")
def block():
    return paper_block(PAPER_PARTS[0])


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


def test_sharded_block_is_within_15_percent_of_the_paper_graph_in_nodes_and_compute(paper, block):
    assert abs(block.num_nodes / paper.num_nodes - 1) <= 0.15
    assert abs(block.total_compute / paper.total_compute - 1) <= 0.15
    assert abs(block.total_compute / paper.total_compute - 1) <= 0.001  # the same einsums at the same sizes
    assert block.metadata["unsharded"] == []


@pytest.mark.xfail(
    strict=True,
    reason="not met: on the paper's graph etf is worst (its Q projection is split along the contraction, K and V "
    "along their outputs); the uniform per-kind partitions of shard() give etf a tie with the best (docs/generators.md)",
)
def test_sharded_block_ranks_the_heuristics_as_the_paper_graph_does(paper, block):
    assert ranking(heuristic_makespans(block)) == ranking(heuristic_makespans(paper))
