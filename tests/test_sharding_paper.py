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
    paper_gdp_copy,
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


def test_the_files_odd_edge_is_a_corruption_its_gdp_copy_has_the_blocks_edge(paper, block):
    gdp = paper_gdp_copy()
    np.testing.assert_array_equal(gdp.compute, paper.compute)
    np.testing.assert_array_equal(gdp.comm, paper.comm)  # per edge, in the file's edge order
    file_edges, gdp_edges = (list(zip(g.src.tolist(), g.dst.tolist(), strict=True)) for g in (paper, gdp))
    assert [i for i, (a, b) in enumerate(zip(file_edges, gdp_edges, strict=True)) if a != b] == [1]
    assert (file_edges[1], gdp_edges[1]) == PAPER_FILE_EDGE
    assert _edges(gdp) == _edges(block)  # the block is the GDP copy, edge for edge
    np.testing.assert_allclose(gdp.compute, block.compute)
    types = gdp.op_types
    assert types[0] == types[7] == types[18] == "einsummable" and types[12] == "formation"  # cast, square, x * rsqrt; sum


@pytest.mark.parametrize("devices", [4, 8])
def test_the_block_ranks_the_heuristics_as_the_gdp_copy_does(block, devices):
    assert ranking(heuristic_makespans(block, devices)) == ranking(heuristic_makespans(paper_gdp_copy(), devices))


def test_at_eight_devices_every_heuristic_ties_on_the_paper_file_and_on_the_block(paper, block):
    for graph in (paper, block):
        assert len(ranking(heuristic_makespans(graph, 8))) == 1  # all five within 0.02% of each other


@pytest.mark.xfail(
    strict=True,
    reason="not met on the block as the model computes it: the paper's file has one corrupted edge (PAPER_FILE_EDGE; "
    "its GDP copy has the block's), which alone makes etf worst there; with the block's own edge etf is best "
    "(docs/generators.md)",
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


_TINY_LLAMA = ["--kwarg", "width=64", "--kwarg", "heads=4", "--kwarg", "ffn=96", "--kwarg", "batch=2", "--kwarg", "seq=8"]


def test_the_cli_shards_per_op_as_the_api_does(tmp_path):
    """`import-model --op-parts/--op-share/--kernels` gives the graph of shard(op_parts=..., op_share=..., kernels=...)."""
    import workbench as wb
    from workbench.cli import main
    from workbench.importers.paper_check import PAPER_OP_PARTS, PAPER_OP_SHARE, PAPER_PARTS
    from workbench.importers.sharding import shard

    out = tmp_path / "block.json"
    op_parts = [f"{pattern}:{parts}" for pattern, parts in PAPER_OP_PARTS.items()]
    args = ["import-model", "workbench.models:llama_block", *_TINY_LLAMA, "--kwarg", "causal=false", "--parts", PAPER_PARTS]
    args += [a for item in op_parts for a in ("--op-parts", item)]
    assert main([*args, "--kernels", "einsum", "--cost-model", "paper", "--op-share", str(PAPER_OP_SHARE), "--out", str(out)]) == 0
    torch.manual_seed(0)
    model = llama_block(width=64, heads=4, ffn=96, batch=2, seq=8, causal=False)
    options = {"op_parts": PAPER_OP_PARTS, "op_share": PAPER_OP_SHARE, "kernels": "einsum", "cost_model": "paper"}
    expected = shard(model, model.example_inputs(), PAPER_PARTS, **options)
    graph = wb.load_graph(out)
    assert graph.metadata["op_parts"] == expected.metadata["op_parts"] and graph.metadata["kernels"] == "einsum"
    np.testing.assert_array_equal(graph.compute, expected.compute)
    assert _edges(graph) == _edges(expected)
    unsplit = shard(model, model.example_inputs(), PAPER_PARTS, kernels="einsum", cost_model="paper")
    assert graph.num_nodes != unsplit.num_nodes  # the per-op partitions changed the graph


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--op-parts", "wq"], "--op-parts 'wq': expected PATTERN:KIND=N,... such as 'wq:hidden=2,reduced=2'"),
        (["--op-parts", "wqq:hidden=2"], "op_parts pattern(s) 'wqq' match no op's whole fx name; the ops: "),
        (["--op-parts", "wq:vocab=2"], "unknown dimension kind(s) vocab in parts"),
        (["--op-parts", "wq(:hidden=2"], "op_parts pattern 'wq(': "),
        (["--op-parts", "wq:hidden=2", "--op-parts", "wq:hidden=4"], "pattern 'wq' given twice"),
        (["--parts", "seq=2", "--op-share", "4"], "--op-share needs --cost-model paper"),
        (["--kernels", "einsum"], "apply to sharded graphs"),
    ],
)
def test_the_cli_refuses_bad_per_op_partitions_in_one_line(capsys, extra, message):
    from workbench.cli import main

    assert main(["import-model", "workbench.models:llama_block", *_TINY_LLAMA, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
