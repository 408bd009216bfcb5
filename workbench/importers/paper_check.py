"""The sharded Llama block beside the DOPPLER paper's ``transformer_block_215nodes``.

The paper's graph is one Llama-7B block (4 sequences of 4096 tokens, hidden
4096, 32 heads, MLP 11008) partitioned by its system. :func:`paper_block`
shards the bundled :class:`~workbench.models.llama.LlamaBlock` at the same
sizes, in the paper's way of writing ops (``kernels="einsum"``) and with its
cost convention (``cost_model="paper"``); :func:`compare` sets the two side
by side: nodes, edges, total compute, and the makespans and ranking of every
registered heuristic on 4 devices. ``python -m workbench.importers.paper_check``
prints the table of docs/generators.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..datasets import bundled_graph
from ..graph import DataflowGraph
from ..placers.base import place
from ..placers.registry import methods

__all__ = ["PAPER_GRAPH", "PAPER_PARTS", "TIE_TOLERANCE", "paper_block", "heuristic_makespans", "ranking", "ranking_text", "compare"]

PAPER_GRAPH = "transformer_block_215nodes"

PAPER_PARTS = ("batch=2,heads=2", "seq=2,heads=2")
"""Uniform partitionings nearest the paper's, which its system picks per op: the first has the paper's node count;
the second splits what the paper's attention splits (the heads, and the positions that its K, V and scores split),
at 24% more nodes. The check uses the first."""

TIE_TOLERANCE = 0.005
"""Makespans within 0.5% of the best of a group rank as a tie (the paper's graph: critical_path, heft, cpop and
peft lie within 0.05% of each other)."""


def paper_block(parts: str | Mapping[str, int] = PAPER_PARTS[0], kernels: str = "einsum") -> DataflowGraph:
    """The Llama-7B block without a causal mask (the paper's graph has none), sharded at ``parts`` with the paper's costs."""
    import torch

    from ..models.llama import llama_block
    from .sharding import shard

    with torch.device("meta"):
        block = llama_block(causal=False)
    return shard(block, block.example_inputs(), parts, cost_model="paper", kernels=kernels, device="meta", name="llama_block")


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


def compare(
    partitionings: Sequence[str] = PAPER_PARTS, kernels: Sequence[str] = ("einsum",), devices: int = 4, budget: int = 2000
) -> list[dict[str, Any]]:
    """One row for the paper's graph, then one per partitioning and kernel style: sizes, makespans (÷1e10), ranking."""
    graphs = [("transformer_block_215nodes (paper)", bundled_graph(PAPER_GRAPH))]
    graphs += [(f"LlamaBlock `{parts}`, {style}", paper_block(parts, style)) for parts in partitionings for style in kernels]
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
    # and the first RMSNorm's split, and one within 15% of the paper's node count that keeps the graph connected
    print(_table(compare((*PAPER_PARTS, "batch=2,hidden=2", "hidden=2,heads=4"), kernels=("einsum", "torch"))))
