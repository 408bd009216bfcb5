"""How cost grows with graph size: simulator, heuristics, local search per evaluation, policy inference.

Graphs of 100 to 10,000 ops with 4 and 8 devices; for each method the wall
time of one call and its peak Python memory (tracemalloc, measured in a
separate call so it does not slow the timing), a log-log plot, and the fitted
growth exponent over the larger sizes. Graphs come from
``workbench.generate("layered", ...)`` when it exists, else from the layered
random DAG generator below (said so in the result).
"""

from __future__ import annotations

import math
import time
import tracemalloc
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..graph import DataflowGraph

SIZES = (100, 300, 1_000, 3_000, 10_000)
QUICK_SIZES = (100, 1_000)
DEVICES = (4, 8)
SKIP_AFTER_SECONDS = 20.0  # a method whose call took longer than this at one size is not run at larger sizes
TARGETS = {  # (method, nodes): seconds, from the issue
    ("simulate", 10_000): 0.2,
    ("heft", 10_000): 5.0,
    ("doppler inference", 2_000): 5.0,
}


def layered_dag(nodes: int, seed: int = 0, width: int | None = None, ccr: float = 0.5) -> DataflowGraph:
    """A random layered DAG: ~sqrt(n) ops per layer, each op fed by 1–3 ops of the previous two layers.

    Compute costs are log-normal; each edge's transfer cost is ``ccr`` times a
    log-normal draw on the same scale (communication-to-computation ratio).
    """
    rng = np.random.default_rng(seed)
    width = width or max(2, int(math.sqrt(nodes)))
    layer = np.arange(nodes) // width
    src, dst = [], []
    for op in range(width, nodes):
        first = np.searchsorted(layer, max(0, layer[op] - 2))
        last = np.searchsorted(layer, layer[op])  # ops of earlier layers only
        parents = rng.choice(np.arange(first, last), size=min(last - first, int(rng.integers(1, 4))), replace=False)
        src.extend(int(p) for p in parents)
        dst.extend([op] * len(parents))
    compute = rng.lognormal(mean=0.0, sigma=0.5, size=nodes)
    comm = ccr * rng.lognormal(mean=0.0, sigma=0.5, size=len(src))
    return DataflowGraph(compute=compute, src=src, dst=dst, comm=comm, metadata={"name": f"layered_{nodes}", "generator": "bench.scale.layered_dag"})


def _graph(nodes: int) -> tuple[DataflowGraph, str]:
    """A layered graph of about ``nodes`` ops: sqrt(n) layers of sqrt(n) ops, ~3 inputs per op."""
    import workbench

    side = max(2, round(math.sqrt(nodes)))
    if hasattr(workbench, "generate"):
        try:
            graph = workbench.generate("layered", layers=side, width=side, width_jitter=0.0, edge_prob=1.0 / side, seed=0)
            return graph, f"workbench.generate('layered', layers=w, width=w, width_jitter=0, edge_prob=1/w) with w = round(sqrt(n))"
        except Exception:  # noqa: BLE001 - a generator without this family or parameter: use our own
            pass
    return layered_dag(nodes), "workbench.bench.scale.layered_dag (workbench.generate('layered') not available)"


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
    from ..placers.base import REGISTRY, get_placer
    from ..sim import simulate
    from ..sweeps.grid import accepted_options

    rng = np.random.default_rng(0)
    methods: dict[str, Callable[[DataflowGraph], Callable[[], Any]]] = {
        "simulate": lambda g: (lambda a=rng.integers(0, devices, g.num_nodes): simulate(g, a, devices)),
    }
    for name in REGISTRY:
        options = set(accepted_options(name))
        if options & {"checkpoint", "budget", "time_limit"} or name in ("single", "round_robin", "random"):
            continue  # learned and search methods are measured below; trivial ones need no figure
        methods[name] = lambda g, name=name: (lambda: get_placer(name).place(g, devices, seed=0))
    if "local_search" in REGISTRY:
        methods["local_search per evaluation"] = lambda g: _per_evaluation(g, devices)
    inference = _policy_inference(devices)
    if inference is not None:
        methods["doppler inference"] = inference
    return methods


def _per_evaluation(graph: DataflowGraph, devices: int, budget: int = 200) -> Callable[[], Any]:
    """One local-search evaluation: (a run of 2·budget − a run of budget) / budget, so the
    starting heuristics, which both runs pay, cancel out."""
    from ..placers.base import get_placer

    short, long = get_placer("local_search", budget=budget), get_placer("local_search", budget=2 * budget)

    def call() -> float:
        began = time.perf_counter()
        short.place(graph, devices, seed=0)
        middle = time.perf_counter()
        long.place(graph, devices, seed=0)
        return max(0.0, (time.perf_counter() - middle) - (middle - began)) / budget

    return call


def _policy_inference(devices: int) -> Callable[[DataflowGraph], Callable[[], Any]] | None:
    """A greedy rollout of an untrained Doppler policy (same cost as a trained one), on CPU."""
    try:
        import torch

        from ..learn import make_policy
    except Exception:  # noqa: BLE001 - the learn layer is optional (extra) and may be absent on this branch
        return None
    policy = make_policy("doppler")

    def build(g: DataflowGraph) -> Callable[[], Any]:
        def call():
            with torch.no_grad():
                return policy.rollout(g, devices, mode="greedy")

        return call

    return build


def _exponent(sizes: list[int], seconds: list[float]) -> float | None:
    """Slope of log(time) against log(n) over the sizes >= 1,000 (or all, when fewer)."""
    points = [(n, s) for n, s in zip(sizes, seconds) if n >= 1_000]
    if len(points) < 2:
        points = list(zip(sizes, seconds))
    if len(points) < 2:
        return None
    x, y = np.log([p[0] for p in points]), np.log([max(p[1], 1e-9) for p in points])
    return float(np.polyfit(x, y, 1)[0])


def run(quick: bool = False, figure: str | Path | None = None) -> dict[str, Any]:
    sizes = QUICK_SIZES if quick else SIZES
    graphs = {n: _graph(n) for n in sizes}
    source = graphs[sizes[0]][1]
    rows: list[dict[str, Any]] = []
    for devices in DEVICES:
        methods = _methods(devices)
        for name, build in methods.items():
            too_slow_at = None
            for n in sizes:
                if too_slow_at is not None:
                    rows.append({"method": name, "devices": devices, "nodes": n, "seconds": None, "peak_mib": None, "note": f"skipped: > {SKIP_AFTER_SECONDS:.0f} s at {too_slow_at} ops"})
                    continue
                graph = graphs[n][0]
                call = build(graph)
                if n == sizes[0]:
                    call()  # warm-up: numba compilation, caches
                repeats = 1 if n >= 3_000 or quick else 3
                began = time.perf_counter()
                seconds, peak = _measure(call, repeats)
                rows.append({"method": name, "devices": devices, "nodes": n, "ops": graph.num_nodes, "seconds": seconds, "peak_mib": peak, "note": ""})
                if (time.perf_counter() - began) / (repeats + 1) > SKIP_AFTER_SECONDS:  # wall per call, traced one included
                    too_slow_at = n
    growth = {}
    for name in dict.fromkeys(r["method"] for r in rows):
        for devices in DEVICES:
            measured = [r for r in rows if r["method"] == name and r["devices"] == devices and r["seconds"] is not None]
            growth[(name, devices)] = _exponent([r["nodes"] for r in measured], [r["seconds"] for r in measured])
    figure_path = _plot(rows, Path(figure) if figure else (None if quick else _default_figure()))
    return {
        "benchmark": "scale",
        "graphs": source,
        "rows": rows,
        "growth": {f"{m} ({d} devices)": e for (m, d), e in growth.items()},
        "targets": _targets(rows),
        "figure": None if figure_path is None else str(figure_path),
        "markdown": _markdown(rows, growth, sizes, source, figure_path),
    }


def _default_figure() -> Path | None:
    docs = Path("docs")
    return docs / "figures" / "bench_scale.png" if docs.is_dir() else None


def _targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for (method, nodes), limit in TARGETS.items():
        measured = [r["seconds"] for r in rows if r["method"] == method and r["nodes"] == nodes and r["seconds"] is not None]
        worst = max(measured) if measured else None
        found.append({"method": method, "nodes": nodes, "target_s": limit, "measured_s": worst, "met": None if worst is None else worst < limit})
    return found


def _markdown(rows, growth, sizes, source, figure_path) -> str:
    actual = sorted({r["ops"] for r in rows if "ops" in r})
    lines = [
        f"Graphs: {source}; actual sizes {', '.join(f'{n:,}' for n in actual)} ops. "
        "Seconds per call (best of 3; 1 at ≥ 3,000 ops) / peak traced memory MiB.\n"
    ]
    for devices in DEVICES:
        lines.append(f"\n**{devices} devices**\n")
        lines.append("| method | " + " | ".join(f"{n:,} ops" for n in sizes) + " | growth exponent (n ≥ 1,000) |")
        lines.append("|---|" + "---|" * (len(sizes) + 1))
        for name in dict.fromkeys(r["method"] for r in rows):
            cells = []
            for n in sizes:
                r = next(r for r in rows if r["method"] == name and r["devices"] == devices and r["nodes"] == n)
                cells.append(r["note"] or f"{r['seconds']:.3g} s / {r['peak_mib']:.3g} MiB")
            exponent = growth.get((name, devices))
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {'–' if exponent is None else f'{exponent:.2f}'} |")
    lines.append("\n| target | measured (worst of 4 and 8 devices) | met |\n|---|---|---|")
    for t in _targets(rows):
        measured = "not measured" if t["measured_s"] is None else f"{t['measured_s']:.3g} s"
        lines.append(f"| {t['method']} on {t['nodes']:,} ops < {t['target_s']} s | {measured} | {'–' if t['met'] is None else ('yes' if t['met'] else 'no')} |")
    missing = [m for m in ("local_search", "doppler inference") if not any(r["method"].startswith(m) for r in rows)]
    if missing:
        lines.append(f"\nNot measured: {', '.join(missing)} (not registered / workbench.learn not importable in this installation).")
    lines.append("\nMemory is what tracemalloc sees: Python and NumPy allocations, not numba's or torch's own allocators.")
    if figure_path is not None:
        lines.append(f"\nFigure: {figure_path}")
    return "\n".join(lines)


def _plot(rows: list[dict[str, Any]], path: Path | None) -> Path | None:
    if path is None:
        return None
    try:
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots
    except ImportError:
        return None
    figure = make_subplots(rows=1, cols=2, subplot_titles=("seconds per call", "peak traced memory (MiB)"))
    for name in dict.fromkeys(r["method"] for r in rows):
        for devices, dash in zip(DEVICES, ("solid", "dot")):
            measured = [r for r in rows if r["method"] == name and r["devices"] == devices and r["seconds"] is not None]
            x = [r["nodes"] for r in measured]
            for col, key in ((1, "seconds"), (2, "peak_mib")):
                figure.add_trace(
                    go.Scatter(x=x, y=[r[key] for r in measured], name=f"{name}, {devices} devices", legendgroup=f"{name}{devices}", showlegend=col == 1, line={"dash": dash}),
                    row=1,
                    col=col,
                )
    figure.update_xaxes(type="log", title_text="ops")
    figure.update_yaxes(type="log")
    figure.update_layout(width=1300, height=550, template="plotly_white")
    from ..sweeps.figures import write_figure

    return write_figure(figure, path)
