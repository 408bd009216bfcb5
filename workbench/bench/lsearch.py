"""learned_search's CPU seconds: at 10,000 ops and budget 1,000, and per evaluation on the paper graphs (issues 32 and 28).

On the scale bench's 10,000-op graph (8 devices, budget 1,000, seed 0)
learned_search runs with ``focus="all"`` (every op's moves ranked at each
refresh: the default before ``focus="auto"``, the moves of main's code) and
with the default ``focus="auto"`` (the critical chain's moves and its
neighbours' from :data:`~workbench.learn.learned_search.AUTO_CRITICAL_MOVES`
single-op moves up), alternately, ``rounds`` times each. On the paper graphs
(4 devices, budget 500), where ``"auto"`` ranks every move, learned_search
and local_search (the compiled loop, same fair start and seed) alternate.
Figures are CPU seconds (``time.process_time``) of the whole ``place`` call,
the fair start's one-pass methods included: the minimum and the median over
the rounds, and evaluations per CPU second from the minimum.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from ..graph import DataflowGraph

LARGE_NODES = 10_000
LARGE_DEVICES = 8
LARGE_BUDGET = 1_000
PAPER_DEVICES = 4
PAPER_BUDGET = 500
TARGET_S = 10.0  # issue 32: learned_search at 10,000 ops and budget 1,000 in under 10 s


def _timed(graph: DataflowGraph, method: str, devices: int, budget: int, seed: int, **options: Any) -> tuple[Any, float]:
    from ..placers import place

    began = time.process_time()
    placement = place(graph, method=method, devices=devices, budget=budget, seed=seed, **options)
    return placement, time.process_time() - began


def _alternated(
    graph: DataflowGraph, variants: dict[str, dict[str, Any]], devices: int, budget: int, seed: int, rounds: int
) -> dict[str, Any]:
    """Each variant (a name: method and options) placed ``rounds`` times, the variants alternating; its CPU seconds
    (min, median), evaluations and makespan."""
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    last: dict[str, Any] = {}
    for _ in range(rounds):
        for name, options in variants.items():
            last[name], seconds = _timed(graph, devices=devices, budget=budget, seed=seed, **options)
            cpu[name].append(seconds)
    return {
        name: {
            "cpu_min_s": min(cpu[name]),
            "cpu_median_s": float(np.median(cpu[name])),
            "evaluations": last[name].details["evaluations"],
            "evals_per_cpu_s": last[name].details["evaluations"] / min(cpu[name]),
            "makespan": last[name].makespan,
        }
        for name in variants
    }


def run(quick: bool = False, seed: int = 0) -> dict[str, Any]:
    from ..datasets import PAPER_GRAPHS, bundled_graph
    from ..provenance import machine
    from .scale import GRAPH_SOURCE, _graph

    rounds = 1 if quick else 3
    load_before = os.getloadavg()
    _timed(_graph(100), "learned_search", LARGE_DEVICES, 50, seed)  # imports and compilation outside the timing
    large = _alternated(
        _graph(LARGE_NODES),
        {"all": {"method": "learned_search", "focus": "all"}, "auto": {"method": "learned_search"}},
        LARGE_DEVICES,
        LARGE_BUDGET,
        seed,
        rounds,
    )
    paper = {
        name: _alternated(
            bundled_graph(name),
            {"learned_search": {"method": "learned_search"}, "local_search": {"method": "local_search"}},
            PAPER_DEVICES,
            PAPER_BUDGET,
            seed,
            rounds,
        )
        for name in PAPER_GRAPHS
    }
    load_after = os.getloadavg()
    info = machine()
    lines = [
        f"CPU seconds (`time.process_time`) of the whole `place` call, min / median of {rounds} alternated rounds, seed {seed}; "
        f"{info['cpu']}, {info['cores']} cores, load average {load_before[0]:.1f} before and {load_after[0]:.1f} after.\n",
        f"learned_search on a {LARGE_NODES:,}-op graph ({GRAPH_SOURCE}), {LARGE_DEVICES} devices, budget {LARGE_BUDGET:,}:\n",
        "| focus | CPU s (min / median) | evals per CPU s | makespan |",
        "|---|---|---|---|",
    ]
    labels = {"all": '`"all"` (every move: the moves before `"auto"`)', "auto": '`"auto"` (the default: the critical chain\'s)'}
    for name, label in labels.items():
        r = large[name]
        lines.append(f"| {label} | {r['cpu_min_s']:.2f} / {r['cpu_median_s']:.2f} | {r['evals_per_cpu_s']:,.0f} | {r['makespan']:.6g} |")
    met = large["auto"]["cpu_min_s"] < TARGET_S
    lines.append(f"\nTarget under {TARGET_S:g} CPU s: {'met' if met else 'not met'} ({large['auto']['cpu_min_s']:.2f} s).\n")
    lines += [
        f"The paper graphs, {PAPER_DEVICES} devices, budget {PAPER_BUDGET}, both from the fair start:\n",
        "| graph | learned_search CPU s (min / median) | evals per CPU s | local_search CPU s (min / median) | evals per CPU s | ratio |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in paper.items():
        learned, local = r["learned_search"], r["local_search"]
        lines.append(
            f"| {name} | {learned['cpu_min_s']:.3f} / {learned['cpu_median_s']:.3f} | {learned['evals_per_cpu_s']:,.0f} | "
            f"{local['cpu_min_s']:.3f} / {local['cpu_median_s']:.3f} | {local['evals_per_cpu_s']:,.0f} | "
            f"{learned['cpu_min_s'] / local['cpu_min_s']:.2f}× |"
        )
    return {
        "benchmark": "lsearch",
        "quick": quick,
        "rounds": rounds,
        "load_average": [load_before[0], load_after[0]],
        "large": large,
        "paper": paper,
        "markdown": "\n".join(lines),
    }
