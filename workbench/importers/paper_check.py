"""The sharded Llama block beside the DOPPLER paper's ``transformer_block_215nodes``.

The paper's graph is one Llama-7B block (4 sequences of 4096 tokens, hidden
4096, 32 heads, MLP 11008) partitioned by its system, which picks a split
per op. :func:`paper_block` shards the bundled
:class:`~workbench.models.llama.LlamaBlock` at the same sizes, in the paper's
way of writing ops (``kernels="einsum"``), at the paper's per-op partitions
(:data:`PAPER_OP_PARTS`) and with its cost convention (``cost_model="paper"``,
``op_share=4``); :func:`compare` sets them side by side: nodes, edges, total
compute, and the makespans and ranking of every registered heuristic on 4
devices. ``python -m workbench.importers.paper_check [DEVICES]``
prints the table of docs/generators.md (4 devices unless given).

The paper's file differs from the block in one edge (:data:`PAPER_FILE_EDGE`), a corruption of the file: the
paper repository's own copy of the same graph for its GDP baseline (:data:`PAPER_GDP_COPY`, bundled beside it)
has the block's edge, and so does the file as first published; :func:`paper_gdp_copy` loads that copy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..datasets import DATASETS_DIR, bundled_graph
from ..formats import load_graph
from ..graph import DataflowGraph
from ..placers.base import place
from ..placers.registry import methods

__all__ = [
    "PAPER_GRAPH",
    "PAPER_PARTS",
    "PAPER_OP_PARTS",
    "PAPER_OP_SHARE",
    "PAPER_FILE_EDGE",
    "PAPER_GDP_COPY",
    "paper_gdp_copy",
    "UNIFORM_PARTS",
    "TIE_TOLERANCE",
    "paper_block",
    "with_edge_moved",
    "heuristic_makespans",
    "ranking",
    "ranking_text",
    "compare",
]

PAPER_GRAPH = "transformer_block_215nodes"

PAPER_PARTS = "seq=2,hidden=2"
"""How the paper's graph splits the block's input: positions and the hidden dimension in two."""

PAPER_OP_PARTS = {
    "wq": "seq=1,hidden=2,reduced=2",
    "wk|wv": "seq=2,hidden=2,reduced=1",
    "wo": "hidden=2",
    "mul_5": "hidden=1",
    "w1|w3": "hidden=4,reduced=1",
    "w2": "hidden=1,reduced=4",
    "add_3": "hidden=1",
}
"""The ops that the paper's partitioner splits otherwise than their inputs (read off its graph; fx names of
:class:`~workbench.models.llama.LlamaBlock`): Q by its outputs and its contraction, K and V by positions and
outputs, the output projection by its outputs, the second RMSNorm's scaling, the MLP out of one block and
back into one (``mul_5`` and ``add_3``: the scaling and the residual after it). Every other op keeps its
inputs' splits."""

PAPER_OP_SHARE = 4
"""The paper's files charge every node of an op the op's points / 4, whatever its block's size."""

UNIFORM_PARTS = ("batch=2,heads=2", "seq=2,heads=2", "batch=2,hidden=2", "hidden=2,heads=4")
"""Uniform partitionings (one split per dimension kind for every op) for comparison."""

TIE_TOLERANCE = 0.005
"""Makespans within 0.5% of the best of a group rank as a tie (the paper's graph: critical_path, heft, cpop and
peft lie within 0.05% of each other)."""


def paper_block(parts: str | Mapping[str, int] | None = None, kernels: str = "einsum") -> DataflowGraph:
    """The Llama-7B block without a causal mask (the paper's graph has none), with the paper's costs: at the paper's
    per-op partitions (``parts=None``), or at one uniform partitioning ``parts``."""
    import torch

    from ..models.llama import llama_block
    from .sharding import shard

    with torch.device("meta"):
        block = llama_block(causal=False)
    options: dict[str, Any] = {"cost_model": "paper", "kernels": kernels, "device": "meta", "name": "llama_block"}
    if parts is None:
        return shard(block, block.example_inputs(), PAPER_PARTS, op_parts=PAPER_OP_PARTS, op_share=PAPER_OP_SHARE, **options)
    return shard(block, block.example_inputs(), parts, **options)


def with_edge_moved(graph: DataflowGraph, old: tuple[int, int], new: tuple[int, int]) -> DataflowGraph:
    """``graph`` with its edge ``old`` replaced by ``new`` (costs as the paper's: 4 × the producer's compute)."""
    edges = [(u, v) for u, v in zip(graph.src.tolist(), graph.dst.tolist(), strict=True) if (u, v) != old] + [new]
    src = np.asarray([u for u, _ in edges])
    return DataflowGraph(
        compute=graph.compute, src=src, dst=np.asarray([v for _, v in edges]), comm=4 * graph.compute[src], metadata=dict(graph.metadata)
    )


def heuristic_makespans(graph: DataflowGraph, devices: int = 4) -> dict[str, float]:
    """Makespan of every registered heuristic (``methods("heuristic")``) on ``devices``."""
    return {method: place(graph, method=method, devices=devices).makespan for method in methods("heuristic")}


def ranking(makespans: Mapping[str, float], tolerance: float = TIE_TOLERANCE) -> list[frozenset[str]]:
    """Methods best first, grouped into ties: a method within ``tolerance`` of its group's best joins that group."""
    groups: list[tuple[float, set[str]]] = []
    for method in sorted(makespans, key=lambda m: (makespans[m], m)):
        if groups and makespans[method] <= groups[-1][0] * (1 + tolerance):
            groups[-1][1].add(method)
        else:
            groups.append((makespans[method], {method}))
    return [frozenset(members) for _, members in groups]


def ranking_text(groups: Sequence[frozenset[str]]) -> str:
    """``"critical_path = heft < etf"``."""
    return " < ".join(" = ".join(sorted(group)) for group in groups)


PAPER_FILE_EDGE = ((0, 7), (0, 18))
"""The one edge where the paper's file and the sharded block differ: the file has ``0 -> 7`` (the first block's
float32 cast feeding the fourth block's square, positions and features it does not hold), where the block has
``0 -> 18`` (that cast feeding its own ``x * rsqrt``, as the other three blocks' casts do). A corruption of the
file, not a different program: its fourth line starts ``4,7,`` where the paper repository's GDP copy
(:data:`PAPER_GDP_COPY`) and the file's first published version (github.com/xinyuyao/Doppler, commit f7ac864)
read ``4, 18,`` (docs/generators.md)."""

PAPER_GDP_COPY = "gdp_transformer_block_215nodes"
"""The paper repository's copy of the same graph for its GDP baseline (``compute_graph/`` of
github.com/xinyuyao/Doppler, commit 04c66de, bundled in ``datasets/doppler-paper/``): the same 234 edges in the
same order and the same costs, with each node's op type, and ``0 -> 18`` where the DOPPLER file has ``0 -> 7``."""


def paper_gdp_copy() -> DataflowGraph:
    """The GDP copy of the paper's graph (:data:`PAPER_GDP_COPY`)."""
    return load_graph(DATASETS_DIR / "doppler-paper" / f"{PAPER_GDP_COPY}.txt")


def compare(kernels: Sequence[str] = ("einsum",), devices: int = 4, budget: int = 2000) -> list[dict[str, Any]]:
    """Rows: the paper's graph and its GDP copy, the block at the paper's partitions (also with the file's edge),
    then uniform ones."""
    per_op = paper_block(None)
    graphs = [
        ("transformer_block_215nodes (paper)", bundled_graph(PAPER_GRAPH)),
        (f"{PAPER_GDP_COPY} (the paper repository's copy for GDP)", paper_gdp_copy()),
        ("LlamaBlock, the paper's per-op partitions, einsum", per_op),
        ("the same with the file's edge 0 -> 7 for 0 -> 18", with_edge_moved(per_op, PAPER_FILE_EDGE[1], PAPER_FILE_EDGE[0])),
    ]
    graphs += [(f"LlamaBlock `{parts}`, {style}", paper_block(parts, style)) for parts in UNIFORM_PARTS for style in kernels]
    rows = []
    for label, graph in graphs:
        makespans = heuristic_makespans(graph, devices)
        search = place(graph, method="local_search", devices=devices, budget=budget).makespan
        rows.append(
            {
                "graph": label,
                "nodes": graph.num_nodes,
                "edges": graph.num_edges,
                "total_compute": graph.total_compute / 1e10,
                **{method: value / 1e10 for method, value in makespans.items()},
                "local_search": search / 1e10,
                "ranking": ranking(makespans),
            }
        )
    paper = rows[0]
    for row in rows:
        row["same_ranking"] = row["ranking"] == paper["ranking"]
    return rows


def _table(rows: Sequence[Mapping[str, Any]]) -> str:
    heuristics = methods("heuristic")
    header = ["graph", "nodes", "edges", "total compute", *heuristics, "local_search", "heuristic ranking (ties within 0.5%)", "same"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [row["graph"], row["nodes"], row["edges"], f"{row['total_compute']:.1f}"]
        cells += [f"{row[m]:.1f}" for m in (*heuristics, "local_search")]
        cells += [ranking_text(row["ranking"]), "yes" if row["same_ranking"] else "no"]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    print(_table(compare(kernels=("einsum", "torch"), devices=int(sys.argv[1]) if len(sys.argv) > 1 else 4)))
