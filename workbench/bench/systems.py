"""Real-system backend: executor overhead, runtime fidelity, kernel sizing and remote round trips.

- dispatch: per-op cost of the executor itself (zero-cost ops, emulated devices);
- fidelity: measured / simulated makespan of the paper graphs on 4 emulated
  devices (:class:`~workbench.systems.executor.WaitKernels`: every op waits its
  modeled time), so only the runtime's own behaviour differs from the model;
- kernels: how close a calibrated matmul op comes to its intended duration on a CPU worker;
- parallel: four independent calibrated matmul ops on two CPU workers, all on one worker against spread
  over both (the speedup a second free core gives; the tests assert only that the ops overlap);
- remote: milliseconds per ``measure`` round trip to a local engine (simulator behind it).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

GOOD_PLACEMENT = "critical_path"
"""The simulator-vs-executor comparison measures a good placement (the teacher's) ..."""
POOR_PLACEMENT = "random"
"""... and a poor one."""


def _dispatch(repeats: int) -> list[dict[str, Any]]:
    from ..graph import DataflowGraph
    from ..systems.executor import LocalExecutor, WaitKernels

    n = 200
    rows = []
    for shape, edges, devices in (("chain", [(i, i + 1) for i in range(n - 1)], 1), ("independent", [], 4)):
        graph = DataflowGraph.from_edges([0.0] * n, edges)
        executor = LocalExecutor(devices, device="cpu", time_scale=1.0, warmup=1, kernels=WaitKernels())
        result = executor.measure(graph, np.arange(n) % devices, repeats=repeats)
        rows.append({"case": f"{n} zero-cost ops, {shape}, {devices} worker(s)", "us_per_op": min(result.samples) / n * 1e6 * devices})
    return rows


def _fidelity(quick: bool) -> list[dict[str, Any]]:
    from ..datasets import PAPER_GRAPHS, bundled_graph
    from ..placers import place
    from ..systems import SimulatorOracle
    from ..systems.executor import LocalExecutor, WaitKernels

    rows = []
    for name in PAPER_GRAPHS[:2] if quick else PAPER_GRAPHS:
        graph = bundled_graph(name)
        executor = LocalExecutor(4, device="cpu", target_seconds=0.1 if quick else 0.3, warmup=0, kernels=WaitKernels())
        for method in (GOOD_PLACEMENT, POOR_PLACEMENT):
            assignment = place(graph, method, 4).assignment
            real = executor.measure(graph, assignment, repeats=2)
            simulated = SimulatorOracle(4, executor.scale_for(graph)).measure(graph, assignment)
            rows.append(
                {
                    "graph": name,
                    "placement": method,
                    "simulated_s": simulated.seconds,
                    "measured_s": min(real.samples),
                    "ratio": min(real.samples) / simulated.seconds,
                }
            )
    return rows


def _kernels(repeats: int) -> list[dict[str, Any]]:
    from ..graph import DataflowGraph
    from ..systems.executor import LocalExecutor

    rows = []
    for millis in (1.0, 10.0, 50.0):
        graph = DataflowGraph.from_edges([millis], [])
        result = LocalExecutor(1, device="cpu", time_scale=1e-3, threads_per_worker=1, warmup=1).measure(graph, [0], repeats=repeats)
        rows.append({"intended_ms": millis, "measured_ms": float(np.median(result.samples)) * 1e3, "min_ms": min(result.samples) * 1e3})
    return rows


def _parallel(repeats: int) -> dict[str, Any]:
    from ..graph import DataflowGraph
    from ..systems.executor import LocalExecutor

    graph = DataflowGraph.from_edges([1.0] * 4, [])  # four independent 50 ms ops
    executor = LocalExecutor(2, device="cpu", time_scale=0.05, threads_per_worker=1, warmup=1)
    single = min(executor.measure(graph, [0, 0, 0, 0], repeats=repeats).samples)
    spread = min(executor.measure(graph, [0, 1, 0, 1], repeats=repeats).samples)
    return {"single_s": single, "spread_s": spread, "speedup": single / spread}


def _remote(requests: int) -> dict[str, Any]:
    from ..datasets import bundled_graph
    from ..systems import RemoteEngine, SimulatorOracle, serve_engine

    graph = bundled_graph("ffnn")
    server = serve_engine([graph], SimulatorOracle(4, 1e-12), port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        engine = RemoteEngine(*server.server_address[:2], devices=4)
        assignment = np.arange(graph.num_nodes) % 4
        engine.measure(graph, assignment)
        began = time.perf_counter()
        for _ in range(requests):
            engine.measure(graph, assignment)
        per_request = (time.perf_counter() - began) / requests
    finally:
        server.shutdown()
        server.server_close()
    return {"graph": graph.name, "requests": requests, "ms_per_request": per_request * 1e3}


def run(quick: bool = False) -> dict[str, Any]:
    dispatch = _dispatch(2 if quick else 5)
    fidelity = _fidelity(quick)
    kernels = _kernels(3 if quick else 7)
    parallel = _parallel(2 if quick else 5)
    remote = _remote(10 if quick else 100)
    lines = ["| executor overhead | us per op |", "|---|---:|"]
    lines += [f"| {r['case']} | {r['us_per_op']:.0f} |" for r in dispatch]
    lines += [
        "",
        "| graph (4 emulated devices) | placement | simulated s | measured s | measured / simulated |",
        "|---|---|---:|---:|---:|",
    ]
    lines += [f"| {r['graph']} | {r['placement']} | {r['simulated_s']:.3f} | {r['measured_s']:.3f} | {r['ratio']:.3f} |" for r in fidelity]
    lines += ["", "| calibrated matmul op: intended ms | median ms | min ms |", "|---:|---:|---:|"]
    lines += [f"| {r['intended_ms']:.0f} | {r['measured_ms']:.2f} | {r['min_ms']:.2f} |" for r in kernels]
    lines += [
        "",
        f"4 independent 50 ms matmul ops on 2 CPU workers: {parallel['single_s']:.3f} s on one, {parallel['spread_s']:.3f} s spread"
        f" over both ({parallel['speedup']:.2f}x; ideal 2x on two free cores)",
    ]
    lines += ["", f"remote engine round trip ({remote['graph']}, simulator behind it): {remote['ms_per_request']:.2f} ms per request"]
    return {
        "dispatch": dispatch,
        "fidelity": fidelity,
        "kernels": kernels,
        "parallel": parallel,
        "remote": remote,
        "markdown": "\n".join(lines),
    }
