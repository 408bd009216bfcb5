"""Graph sources: the generated paper families next to the bundled graphs, and the import speed of a large model."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

PAIRS = (
    ("chain_mm", "chain_mm_112nodes"),
    ("ffnn", "ffnn_192nodes"),
    ("transformer_block", "transformer_block_215nodes"),
    ("transformer_layer", "full_transformer_layer_261nodes"),
)


def shape_stats(graph, devices: int = 4) -> dict[str, Any]:
    """Nodes, edges, depth (levels), width (most ops on one level), communication/compute ratio
    (mean edge cost over mean op cost), total compute, longest path (compute only) and the
    critical-path placement's speed-up over one device."""
    from ..placers import place

    single = graph.total_compute
    return {
        "nodes": graph.num_nodes,
        "edges": graph.num_edges,
        "depth": int(graph.depth.max()) + 1,
        "width": int(np.bincount(graph.depth).max()),
        "ccr": float(graph.comm.mean() / graph.compute.mean()) if graph.num_edges else 0.0,
        "total_compute": graph.total_compute,
        "longest_path": graph.longest_path(),
        "cp_speedup": single / place(graph, "critical_path", devices).makespan,
    }


def run(quick: bool = False) -> dict[str, Any]:
    from ..datasets import bundled_graph
    from ..generators import generate

    rows = []
    for kind, bundled in PAIRS:
        rows.append({"graph": bundled, "source": "bundled", **shape_stats(bundled_graph(bundled))})
        for cost_model in ("paper", "roofline"):
            graph = generate(kind, cost_model=cost_model)
            label = f"generate('{kind}'" + (", cost_model='paper')" if cost_model == "paper" else ")  [V100, s]")
            rows.append({"graph": label, "source": cost_model, **shape_stats(graph)})
    header = (
        "| graph | nodes | edges | depth | width | comm/compute | total compute | longest path | critical-path speed-up (4 dev) |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    table = "\n".join(
        f"| {r['graph']} | {r['nodes']} | {r['edges']} | {r['depth']} | {r['width']} | {r['ccr']:.3g} | {r['total_compute']:.4g} "
        f"| {r['longest_path']:.4g} | {r['cp_speedup']:.2f}× |"
        for r in rows
    )
    result: dict[str, Any] = {"benchmark": "generators", "rows": rows, "markdown": header + table}
    try:
        from ..importers import coarsen, from_torch
        from ..models import gpt_decoder
    except ImportError:  # torch not installed: the generator table alone
        return result
    layers = 50 if quick else 200
    began = time.perf_counter()
    imported = from_torch(gpt_decoder(layers=layers, width=64, seq=16))
    import_s = time.perf_counter() - began
    began = time.perf_counter()
    coarse = coarsen(imported, target_nodes=200)
    coarsen_s = time.perf_counter() - began
    result["import"] = {
        "layers": layers,
        "ops": imported.num_nodes,
        "import_s": import_s,
        "coarse_nodes": coarse.num_nodes,
        "coarsen_s": coarsen_s,
    }
    result["markdown"] += (
        f"\n\nImport of `gpt_decoder(layers={layers}, width=64, seq=16)`: {imported.num_nodes} ops in {import_s:.2f} s "
        f"(trace, run once on CPU, costs); fuse + group to {coarse.num_nodes} nodes in {coarsen_s:.2f} s."
    )
    return result
