"""Simulator speed: the fast engine against the SimPy reference, side by side in one run."""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import numpy as np


def _per_call(fn, items, min_seconds: float) -> float:
    """Mean seconds per call of ``fn`` over ``items``, cycling until ``min_seconds`` passed."""
    calls, began = 0, time.perf_counter()
    while True:
        for item in items:
            fn(item)
            calls += 1
        elapsed = time.perf_counter() - began
        if elapsed >= min_seconds:
            return elapsed / calls


def run(quick: bool = False, devices: int = 4) -> dict[str, Any]:
    from ..datasets import PAPER_GRAPHS, bundled_graph
    from ..progress import progress_bar
    from ..sim import Evaluator, simulate

    rng = np.random.default_rng(0)
    rows = []
    min_seconds = 0.2 if quick else 2.0
    batch_size = 2_000 if quick else 20_000
    for name in progress_bar(PAPER_GRAPHS, desc="bench sim", unit="graph"):  # about 10 s a graph, 1 s with quick
        graph = bundled_graph(name)
        assignments = rng.integers(0, devices, size=(batch_size, graph.num_nodes))
        evaluator = Evaluator(graph, devices)
        evaluator(assignments[:2])  # compile outside the timing
        simpy_s = _per_call(partial(simulate, graph, devices=devices, engine="simpy"), assignments[:20], min_seconds)
        api_s = _per_call(partial(simulate, graph, devices=devices, engine="fast"), assignments[:200], min_seconds)
        began = time.perf_counter()
        evaluator(assignments)
        batch_s = (time.perf_counter() - began) / batch_size
        rows.append(
            {
                "graph": name,
                "nodes": graph.num_nodes,
                "simpy_ms": simpy_s * 1e3,
                "fast_engine_ms": batch_s * 1e3,
                "fast_simulate_call_ms": api_s * 1e3,
                "speedup_engine": simpy_s / batch_s,
                "speedup_simulate_call": simpy_s / api_s,
                "batch_per_second": 1.0 / batch_s,
            }
        )
    header = (
        "| graph | nodes | SimPy ms/eval | fast engine ms/eval | `simulate()` ms/call (with trace) | engine speed-up | call speed-up "
        "| batch evals/s (1 core) |\n|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['graph']} | {r['nodes']} | {r['simpy_ms']:.3f} | {r['fast_engine_ms']:.4f} | {r['fast_simulate_call_ms']:.3f} | "
        f"{r['speedup_engine']:.0f}× | {r['speedup_simulate_call']:.0f}× | {r['batch_per_second']:,.0f} |"
        for r in rows
    ]
    return {"benchmark": "sim", "devices": devices, "rows": rows, "markdown": header + "\n".join(lines)}
