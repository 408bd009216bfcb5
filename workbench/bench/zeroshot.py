"""Zero-shot inference at scale (issue 32, part 4): CPU seconds and peak memory of one placement by the shipped policy.

Each graph is placed in a fresh child process (spawned, so nothing is shared with this one): it builds the graph,
places the 84-op ChainMM once (a warm-up: numba's compiled functions load from their cache, or compile), then times
``workbench.place(graph, method="doppler_plc_only", devices=8, checkpoint=zero_shot_checkpoint())`` once, on one
torch thread, in CPU seconds (``time.process_time``) and wall seconds. Peak memory is the child's peak resident set
(``ru_maxrss``), imports (torch and DGL, about 0.4 GB) included; the figure before the call is given beside it.
Targets: issue 28's 20,000-op placement in under 5 s, issue 32's 100,000-op one in under 10 s and 1.5 GB.
"""

from __future__ import annotations

import multiprocessing
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

GRAPHS = {
    "series_parallel-large-07": "the corpus graph issue 28 measured (workbench.corpus)",
    "layered-100k": "bench scale's layered graph at 100,000 ops (316 layers of 316 ops, about 3 inputs each)",
}
QUICK_GRAPHS = {"layered-2k": "bench scale's layered graph at 2,000 ops"}
DEVICES = 8
TARGETS = {"series_parallel-large-07": (5.0, None), "layered-100k": (10.0, 1.5)}
"""Graph -> (CPU seconds, peak GB) the issues ask for; None: no target."""


def _graph(name: str):
    from ..corpus import build, entries

    if name.startswith("layered-"):
        from .scale import _graph as layered

        return layered(int(name.removeprefix("layered-").removesuffix("k")) * 1_000)
    return build(next(entry for entry in entries() if entry.name == name))


def _place(name: str) -> dict[str, Any]:
    """In the child: place graph ``name`` once with the shipped zero-shot policy and measure it."""
    import torch

    from ..datasets import bundled_graph
    from ..placers import place
    from ..runs import zero_shot_checkpoint

    torch.set_num_threads(1)
    checkpoint = zero_shot_checkpoint()
    place(bundled_graph("chain_mm"), method="doppler_plc_only", devices=DEVICES, checkpoint=checkpoint)  # warm-up: JIT caches
    graph = _graph(name)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cpu, wall = time.process_time(), time.perf_counter()
    placement = place(graph, method="doppler_plc_only", devices=DEVICES, checkpoint=checkpoint)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {
        "graph": name,
        "ops": graph.num_nodes,
        "edges": graph.num_edges,
        "devices": DEVICES,
        "cpu_s": cpu,
        "wall_s": wall,
        "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9,
        "before_call_gb": before * 1024 / 1e9,
        "makespan": placement.makespan,
    }


def run(quick: bool = False) -> dict[str, Any]:
    graphs = QUICK_GRAPHS if quick else GRAPHS
    rows = []
    for name in graphs:
        with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
            rows.append(pool.submit(_place, name).result())
    for row in rows:
        cpu, memory = TARGETS.get(row["graph"], (None, None))
        row["target"] = " and ".join(([f"< {cpu:g} CPU s"] if cpu else []) + ([f"< {memory:g} GB"] if memory else []))
        row["met"] = None if cpu is None else row["cpu_s"] < cpu and (memory is None or row["peak_gb"] < memory)
    return {"benchmark": "zeroshot", "rows": rows, "markdown": _markdown(rows, graphs)}


def _markdown(rows: list[dict[str, Any]], graphs: dict[str, str]) -> str:
    lines = [
        f'`workbench.place(graph, method="doppler_plc_only", devices={DEVICES}, checkpoint=zero_shot_checkpoint())`, '
        "one call in a fresh process after a warm-up on ChainMM, one torch thread; peak RSS includes the imports.\n",
        "| graph | ops | edges | devices | CPU s | wall s | peak RSS GB (before the call) | makespan | target | met |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        met = "–" if r["met"] is None else ("yes" if r["met"] else "no")
        lines.append(
            f"| {r['graph']} | {r['ops']:,} | {r['edges']:,} | {r['devices']} | {r['cpu_s']:.3g} | {r['wall_s']:.3g} | "
            f"{r['peak_gb']:.2f} ({r['before_call_gb']:.2f}) | {r['makespan']:,.6g} | {r['target'] or '–'} | {met} |"
        )
    lines.append("")
    lines += [f"- {name}: {about}" for name, about in graphs.items()]
    return "\n".join(lines)
