"""Does sharding the bundled transformer block give a graph like the paper's transformer_block_215nodes?

The block of ``workbench.models.gpt`` at Llama-7B widths (hidden 4096, 32
heads, MLP 4 x 4096; 4 sequences of 4096 tokens) is built on the meta device,
traced and sharded with the paper files' cost convention at three
partitionings, each with both kernel styles (``torch``: one kernel per op;
``einsum``: each op as the steps the paper's system writes, with a formation
node after every contraction and reduction), then set beside the bundled
graph: nodes, edges, total compute and the makespans of three heuristics and
local search (2,000 evaluations) on 4 devices, all ÷ 1e10. Run:
``python examples/shard_vs_paper.py`` (about 40 s).
"""

from itertools import pairwise

import torch

import workbench as wb
from workbench.datasets import bundled_graph
from workbench.importers.sharding import KERNEL_STYLES, shard
from workbench.models.gpt import Block

PARTITIONINGS = ("seq=2,hidden=2", "seq=2,hidden=2,heads=2", "seq=2,hidden=2,heads=4")
METHODS = ("critical_path", "heft", "etf", "local_search")


def row(label: str, graph: wb.DataflowGraph) -> str:
    makespans = {m: wb.place(graph, method=m, devices=4, **({"budget": 2000} if m == "local_search" else {})).makespan for m in METHODS}
    shown = {m: round(makespans[m] / 1e10, 1) for m in METHODS}
    ordered = sorted(METHODS[:3], key=shown.get)
    ranking = ordered[0] + "".join(f" {'=' if shown[a] == shown[b] else '<'} {b}" for a, b in pairwise(ordered))
    cells = (
        [label, graph.num_nodes, graph.num_edges, f"{graph.total_compute / 1e10:.1f}"] + [f"{shown[m]:.1f}" for m in METHODS] + [ranking]
    )
    return "| " + " | ".join(str(c) for c in cells) + " |"


def main() -> None:
    with torch.device("meta"):
        block = Block(4096, 32)
    x = torch.zeros(4, 4096, 4096, device="meta")
    print("| graph | nodes | edges | total compute | " + " | ".join(METHODS) + " | heuristic ranking |")
    print("|---" * (5 + len(METHODS)) + "|")
    print(row("transformer_block_215nodes (paper)", bundled_graph("transformer_block_215nodes")))
    for parts in PARTITIONINGS:
        for kernels in KERNEL_STYLES:
            graph = shard(block, (x,), parts, cost_model="paper", kernels=kernels, device="meta")
            print(row(f"Block `{parts}`, {kernels}", graph))


if __name__ == "__main__":
    main()
