"""How cost grows with graph size: simulator, heuristics, local search per evaluation, policy inference.

Graphs of 100 to 10,000 ops with 4 and 8 devices; for each method the wall
time of one call and its peak Python memory (tracemalloc, measured in a
separate call so it does not slow the timing), a log-log plot, and the fitted
growth exponent over the larger sizes. Graphs come from
``workbench.generate("layered", ...)``. A second table (not in ``--quick``)
gives the CPU seconds (``time.process_time``, one run each) of the one-pass
heuristics and local search's critical chain at 10,000 and 100,000 ops of
:data:`GROWTH_SOURCE`, with the growth exponent between them (issue 32's
target: at most 1.2). Issue 19's inference target (a
greedy placement of a 2,000-op graph in under 1 s) is measured apart, on the
denser :data:`DENSE_GRAPH`: the median of five placements, wall and CPU time.
"""

from __future__ import annotations

import math
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..graph import DataflowGraph
from ..placers import methods
from ..runs import zero_shot_checkpoint

SIZES = (100, 300, 1_000, 2_000, 10_000)
QUICK_SIZES = (100, 1_000)
DEVICES = (4, 8)
# Largest size per method, where a larger one would take minutes on a 2-core machine and say nothing
# new: local search's two runs each start by running every heuristic and rule.
MAX_NODES = {"local_search per evaluation": 1_000}
SKIP_AFTER_SECONDS = 20.0  # a method whose call took longer than this at one size is not run at larger sizes
TARGETS = {  # (method, nodes): seconds, from the issue
    ("simulate", 10_000): 0.2,
    ("heft", 10_000): 5.0,
    ("doppler inference", 2_000): 5.0,
}
DENSE_GRAPH = {"layers": 40, "width": 50}
"""Issue 19's 2,000-op graph for its inference target: ``generate("layered", layers=40, width=50)``, 1,985 ops
and 39,577 edges (about 20 inputs per op, seven times the scaling graphs' density)."""
DENSE_TARGET_S = 1.0  # issue 19: "Placing a 2,000-op graph takes under 1 s of inference"
DENSE_REPEATS = 5


GRAPH_SOURCE = "workbench.generate('layered', layers=w, width=w, width_jitter=0, edge_prob=1/w) with w = round(sqrt(n))"


def _graph(nodes: int) -> DataflowGraph:
    """A layered graph of about ``nodes`` ops: sqrt(n) layers of sqrt(n) ops, ~3 inputs per op from the two layers before."""
    from ..generators import generate

    side = max(2, round(math.sqrt(nodes)))
    return generate("layered", layers=side, width=side, width_jitter=0.0, edge_prob=1.0 / side, seed=0)


GROWTH_SIZES = (10_000, 100_000)
GROWTH_DEVICES = 4
GROWTH_SEARCH = "local_search, budget 1,000"
GROWTH_METHODS = ("simulate", *methods("heuristic", "rule"), "critical chain", GROWTH_SEARCH)
"""The simulator, every list-scheduling heuristic and rule, local_search's critical chain, and local_search itself at
budget 1,000 from its fair start (issue 32: under 60 s at 100,000 ops)."""
GROWTH_SMALL_REPEATS = 3
"""Calls at the smaller size, the best kept (one at the larger: noise can then only raise an exponent)."""
GROWTH_SOURCE = "workbench.generate('series_parallel', nodes=n, ccr=2.0, seed=0)"
GROWTH_TARGET = 1.2  # issue 32: growth exponents from 10,000 to 100,000 ops at most this


def _growth() -> list[dict[str, Any]]:
    """CPU seconds of one call of each of :data:`GROWTH_METHODS` at each of :data:`GROWTH_SIZES` (warmed up first)."""
    from ..generators import generate
    from ..placers import get_placer
    from ..placers.local_search import critical_chain
    from ..sim import simulate

    def call(name: str, graph: DataflowGraph) -> float:
        assignment = np.random.default_rng(0).integers(0, GROWTH_DEVICES, graph.num_nodes)
        if name == "critical chain":  # of a random assignment's trace, which waits for devices as well as inputs
            trace = simulate(graph, assignment, GROWTH_DEVICES).trace
            began = time.process_time()
            critical_chain(graph, assignment, trace.ready, trace.start, trace.end)
        elif name == "simulate":  # a random assignment
            began = time.process_time()
            simulate(graph, assignment, GROWTH_DEVICES)
        elif name == GROWTH_SEARCH:
            began = time.process_time()
            get_placer("local_search", budget=1_000).place(graph, GROWTH_DEVICES, seed=0)
        else:
            began = time.process_time()
            get_placer(name).place(graph, GROWTH_DEVICES, seed=0)
        return time.process_time() - began

    small = generate("series_parallel", nodes=200, ccr=2.0, seed=0)
    for name in GROWTH_METHODS:
        call(name, small)  # numba compilation and caches
    rows = []
    for n in GROWTH_SIZES:
        graph = generate("series_parallel", nodes=n, ccr=2.0, seed=0)
        repeats = GROWTH_SMALL_REPEATS if n == min(GROWTH_SIZES) else 1
        rows += [
            {"method": name, "nodes": graph.num_nodes, "cpu_seconds": min(call(name, graph) for _ in range(repeats))}
            for name in GROWTH_METHODS
        ]
    return rows


def _growth_markdown(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    sizes = sorted({r["nodes"] for r in rows})
    lines = [
        f"\nCPU seconds (`time.process_time`) on {GROWTH_SOURCE}, {GROWTH_DEVICES} devices, the best of "
        f"{GROWTH_SMALL_REPEATS} calls at {sizes[0]:,} ops and one at {sizes[-1]:,}; growth exponent between them "
        f"(target ≤ {GROWTH_TARGET}; {GROWTH_SEARCH}: under 60 s at 100,000 ops).\n",
        "| method | " + " | ".join(f"{n:,} ops" for n in sizes) + " | growth exponent |",
        "|---|" + "---|" * (len(sizes) + 1),
    ]
    for name in dict.fromkeys(r["method"] for r in rows):
        seconds = [next(r["cpu_seconds"] for r in rows if r["method"] == name and r["nodes"] == n) for n in sizes]
        exponent = _exponent(sizes, seconds)
        lines.append(f"| {name} | " + " | ".join(f"{s:.3g} s" for s in seconds) + f" | {'–' if exponent is None else f'{exponent:.2f}'} |")
    return "\n".join(lines)


def _measure(fn: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """Best-of-``repeats`` seconds of ``fn()`` (or the seconds it returns itself, when it returns
    a float), and its peak traced memory in MiB (one more call)."""
    best = math.inf
    for _ in range(repeats):
        began = time.perf_counter()
        own = fn()
        best = min(best, own if isinstance(own, float) else time.perf_counter() - began)
    tracemalloc.start()
    try:
        fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return best, peak / 2**20


def _methods(devices: int) -> dict[str, Callable[[DataflowGraph], Callable[[], Any]]]:
    """Method name → (graph → a zero-argument call to time)."""
    from ..placers import get_placer
    from ..sim import simulate

    rng = np.random.default_rng(0)

    def simulate_random(g: DataflowGraph) -> Callable[[], Any]:
        assignment = rng.integers(0, devices, g.num_nodes)  # drawn once per graph, outside the timing
        return lambda: simulate(g, assignment, devices)

    timed: dict[str, Callable[[DataflowGraph], Callable[[], Any]]] = {"simulate": simulate_random}
    for name in methods("heuristic"):  # search and learned methods are measured below; baselines need no figure
        timed[name] = lambda g, name=name: lambda: get_placer(name).place(g, devices, seed=0)
    timed["local_search per evaluation"] = lambda g: _per_evaluation(g, devices)
    inference = _policy_inference(devices)
    if inference is not None:
        timed["doppler inference"] = inference
    return timed


def _per_evaluation(graph: DataflowGraph, devices: int, short: int = 200, extra: int = 1_000) -> Callable[[], Any]:
    """One local-search evaluation: (a run of short + extra evaluations − a run of short) / extra, so the
    starting heuristics, which both runs pay, cancel out (extra is large enough to stand above their noise)."""
    from ..placers.base import get_placer

    brief, longer = get_placer("local_search", budget=short), get_placer("local_search", budget=short + extra)

    def call() -> float:
        began = time.perf_counter()
        brief.place(graph, devices, seed=0)
        middle = time.perf_counter()
        longer.place(graph, devices, seed=0)
        return max(0.0, (time.perf_counter() - middle) - (middle - began)) / extra

    return call


def _policy_inference(devices: int, checkpoint: Path | None = None) -> Callable[[DataflowGraph], Callable[[], Any]] | None:
    """A greedy rollout of an untrained Doppler policy (same cost as a trained one), or of a checkpoint's policy, on CPU."""
    try:
        import torch

        from ..learn import load_policy, make_policy
    except ImportError:  # torch and DGL are an optional extra
        return None
    policy = make_policy("doppler") if checkpoint is None else load_policy(checkpoint)

    def build(g: DataflowGraph) -> Callable[[], Any]:
        def call():
            with torch.no_grad():
                return policy.rollout(g, devices, mode="greedy")

        return call

    return build


def _dense_inference(checkpoint: Path | None = None) -> dict[str, Any] | None:
    """Median wall and CPU seconds of :data:`DENSE_REPEATS` greedy Doppler placements of :data:`DENSE_GRAPH` on 4 devices,
    on one torch thread (on a shared 2-core machine a second thread waits on the first and costs several times more);
    an untrained policy, or ``checkpoint``'s (the shipped zero-shot policy, whose rules add per-step work)."""
    build = _policy_inference(4, checkpoint)
    if build is None:
        return None
    import torch

    from ..generators import generate
    from .episode import _median_times

    graph = generate("layered", **DENSE_GRAPH)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        wall, cpu = _median_times(build(graph), DENSE_REPEATS)
    finally:
        torch.set_num_threads(threads)
    met = wall < DENSE_TARGET_S
    return {"ops": graph.num_nodes, "edges": graph.num_edges, "wall_s": wall, "cpu_s": cpu, "target_s": DENSE_TARGET_S, "met": met}


def _fitted_sizes(sizes: list[int]) -> list[int]:
    """The sizes a growth exponent is fitted over: those >= 1,000, or all when fewer than two are."""
    large = [n for n in sizes if n >= 1_000]
    return large if len(large) >= 2 else list(sizes)


def _exponent(sizes: list[int], seconds: list[float]) -> float | None:
    """Slope of log(time) against log(n) over :func:`_fitted_sizes`."""
    fitted = set(_fitted_sizes(sizes))
    points = [(n, s) for n, s in zip(sizes, seconds, strict=True) if n in fitted]
    if len(points) < 2:
        return None
    x, y = np.log([p[0] for p in points]), np.log([max(p[1], 1e-9) for p in points])
    return float(np.polyfit(x, y, 1)[0])


def run(quick: bool = False, figure: str | Path | None = None) -> dict[str, Any]:
    sizes = QUICK_SIZES if quick else SIZES
    graphs = {n: _graph(n) for n in sizes}
    from ..progress import progress_bar

    rows: list[dict[str, Any]] = []
    bar = progress_bar(desc="bench scale", unit="measurement")
    for devices in DEVICES:
        timed = _methods(devices)
        bar.total = len(DEVICES) * len(timed) * len(sizes)
        for name, build in timed.items():
            too_slow_at = None
            for n in sizes:
                bar.set_postfix_str(f"{name}, {devices} devices, {n:,} ops")
                bar.update()
                if too_slow_at is not None or n > MAX_NODES.get(name, n):
                    note = (
                        f"skipped: > {SKIP_AFTER_SECONDS:.0f} s at {too_slow_at:,} ops"
                        if too_slow_at
                        else f"not run above {MAX_NODES[name]:,} ops"
                    )
                    rows.append({"method": name, "devices": devices, "nodes": n, "seconds": None, "peak_mib": None, "note": note})
                    continue
                graph = graphs[n]
                call = build(graph)
                if n == sizes[0]:
                    call()  # warm-up: numba compilation, caches
                repeats = 1 if n >= 2_000 or quick else 3
                began = time.perf_counter()
                seconds, peak = _measure(call, repeats)
                rows.append(
                    {
                        "method": name,
                        "devices": devices,
                        "nodes": n,
                        "ops": graph.num_nodes,
                        "seconds": seconds,
                        "peak_mib": peak,
                        "note": "",
                    }
                )
                if (time.perf_counter() - began) / (repeats + 1) > SKIP_AFTER_SECONDS:  # wall per call, traced one included
                    too_slow_at = n
    bar.close()
    dense = [found for found in (_dense_inference(), _dense_inference(zero_shot_checkpoint())) if found is not None]
    growth_rows = [] if quick else _growth()
    growth = {}
    for name in dict.fromkeys(r["method"] for r in rows):
        for devices in DEVICES:
            measured = [r for r in rows if r["method"] == name and r["devices"] == devices and r["seconds"] is not None]
            growth[(name, devices)] = _exponent([r["nodes"] for r in measured], [r["seconds"] for r in measured])
    figure_path = _plot(rows, Path(figure) if figure else (None if quick else _default_figure()))
    return {
        "benchmark": "scale",
        "graphs": GRAPH_SOURCE,
        "rows": rows,
        "growth": {f"{m} ({d} devices)": e for (m, d), e in growth.items()},
        "targets": _targets(rows),
        "dense_inference": dense,
        "cpu_growth": growth_rows,
        "figure": None if figure_path is None else str(figure_path),
        "markdown": _markdown(rows, growth, sizes, GRAPH_SOURCE, figure_path, dense) + _growth_markdown(growth_rows),
    }


def _default_figure() -> Path | None:
    docs = Path("docs")
    return docs / "figures" / "bench_scale.png" if docs.is_dir() else None


def _targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for (method, nodes), limit in TARGETS.items():
        measured = [r["seconds"] for r in rows if r["method"] == method and r["nodes"] == nodes and r["seconds"] is not None]
        worst = max(measured) if measured else None
        found.append(
            {"method": method, "nodes": nodes, "target_s": limit, "measured_s": worst, "met": None if worst is None else worst < limit}
        )
    return found


def _markdown(rows, growth, sizes, source, figure_path, dense) -> str:
    actual = sorted({r["ops"] for r in rows if "ops" in r})
    lines = [
        f"Graphs: {source}; actual sizes {', '.join(f'{n:,}' for n in actual)} ops. "
        "Seconds per call (best of 3; 1 at ≥ 2,000 ops) / peak traced memory MiB.\n"
    ]
    for devices in DEVICES:
        lines.append(f"\n**{devices} devices**\n")
        lines.append("| method | " + " | ".join(f"{n:,} ops" for n in sizes) + " | growth exponent (n ≥ 1,000) |")
        lines.append("|---|" + "---|" * (len(sizes) + 1))
        for name in dict.fromkeys(r["method"] for r in rows):
            cells, measured = [], []
            for n in sizes:
                r = next(r for r in rows if r["method"] == name and r["devices"] == devices and r["nodes"] == n)
                cells.append(r["note"] or f"{r['seconds']:.3g} s / {r['peak_mib']:.3g} MiB")
                measured += [] if r["seconds"] is None else [r["nodes"]]
            exponent, fitted = growth.get((name, devices)), _fitted_sizes(measured)
            cell = "–" if exponent is None else f"{exponent:.2f}"
            if exponent is not None and min(fitted) < 1_000:  # fewer than two sizes from 1,000 ops: say what it is fitted over
                cell += f" (fitted over {min(fitted):,}–{max(fitted):,} ops)"
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {cell} |")
    lines.append("\n| target | measured (worst of 4 and 8 devices) | met |\n|---|---|---|")
    for t in _targets(rows):
        measured = "not measured" if t["measured_s"] is None else f"{t['measured_s']:.3g} s"
        met = "–" if t["met"] is None else ("yes" if t["met"] else "no")
        lines.append(f"| {t['method']} on {t['nodes']:,} ops < {t['target_s']} s | {measured} | {met} |")
    for found, policy in zip(dense, ("doppler", "the zero-shot policy's"), strict=False):
        lines.append(
            f"| {policy} inference on issue 19's {found['ops']:,}-op graph ({found['edges']:,} edges, 4 devices, 1 torch thread, "
            f"median of {DENSE_REPEATS}) < {found['target_s']} s | {found['wall_s']:.3g} s (CPU {found['cpu_s']:.3g} s) | "
            f"{'yes' if found['met'] else 'no'} |"
        )
    if not any(r["method"] == "doppler inference" for r in rows):
        lines.append("\nNot measured: doppler inference (torch and DGL, the `learn` extra, are not installed).")
    lines.append("\nMemory is what tracemalloc sees: Python and NumPy allocations, not numba's or torch's own allocators.")
    if figure_path is not None:
        lines.append(f"\nFigure: {figure_path}")
    return "\n".join(lines)


def _plot(rows: list[dict[str, Any]], path: Path | None) -> Path | None:
    if path is None:
        return None
    try:
        from ..viz import write_figure
        from ..viz.reports import scaling_figure
    except ImportError:  # plotly is the dashboard extra's
        return None
    return write_figure(scaling_figure(rows, DEVICES), path)
