"""How much ties matter: every list-scheduling heuristic under each tie rule, per graph (issue 32, part 3).

On the corpus's test split (4 and 8 devices) and the paper's four graphs: each heuristic's simulated makespan
with ``ties="ready"`` and with ``random`` tie orders (seeds 0..R-1), as ratios to its default (``ties="id"``), and
``ties=K`` (the best of ``id``, ``ready`` and K - 2 random orders, K evaluations) with K = R + 2. A ratio below 1
means a tie order beat the default. Quality only: the heuristics are deterministic, so no timing is reported.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..placers.registry import methods, placer_class
from ..placers.ties import ListScheduler

DEVICES = (4, 8)
RANDOM_ORDERS = 14


def schedulers() -> list[str]:
    """The registered list-scheduling heuristics (those that take ``ties``)."""
    return [m for m in methods("heuristic", "rule") if issubclass(placer_class(m), ListScheduler)]


def graphs(quick: bool) -> dict[str, Any]:
    """Name -> graph: the paper's four graphs and the corpus's test split (two graphs when ``quick``)."""
    from .. import corpus
    from ..datasets import PAPER_GRAPHS, bundled_graph

    found = {name: bundled_graph(name) for name in PAPER_GRAPHS}
    found.update({e.name: corpus.build(e) for e in corpus.entries() if e.split == "test"})
    return dict(list(found.items())[:2]) if quick else found


def measure(graph: Any, method: str, devices: int, random_orders: int) -> dict[str, Any]:
    """One heuristic on one graph: makespans under ``id``, ``ready`` and each random seed, and ``ties=K``'s."""
    from ..placers import place

    by_rule = {rule: place(graph, method, devices, ties=rule).makespan for rule in ("id", "ready")}
    random = [place(graph, method, devices, seed=seed, ties="random").makespan for seed in range(random_orders)]
    best = place(graph, method, devices, ties=random_orders + 2)
    return {**by_rule, "random": random, "best": best.makespan, "evaluations": best.evaluations}


def run(quick: bool = False) -> dict[str, Any]:
    from ..progress import progress_bar

    random_orders = 2 if quick else RANDOM_ORDERS
    chosen, names = graphs(quick), schedulers()
    cells = [(g, d, m) for g in chosen for d in DEVICES for m in names]
    rows = []
    for name, devices, method in progress_bar(cells, desc="bench ties", unit="cell"):
        found = measure(chosen[name], method, devices, random_orders)
        base = found["id"]
        random = np.asarray(found["random"]) / base
        rows.append(
            {
                "graph": name,
                "devices": devices,
                "method": method,
                "ready": found["ready"] / base,
                "random_min": float(random.min()),
                "random_median": float(np.median(random)),
                "random_max": float(random.max()),
                "best": found["best"] / base,
                "evaluations": found["evaluations"],
            }
        )
    return {"rows": rows, "random_orders": random_orders, "markdown": markdown(rows, names, random_orders)}


def markdown(rows: list[dict[str, Any]], names: list[str], random_orders: int) -> str:
    """Per heuristic: mean and worst ratios over the graphs; then, per graph, the largest effect of ties on any heuristic."""
    k = random_orders + 2
    lines = [
        f'Ratios to each heuristic\'s default tie order (`ties="id"`), over {len({(r["graph"], r["devices"]) for r in rows})} '
        f"graph x device cells; random: {random_orders} seeded random tie orders; `ties={k}`: the best of id, ready and those "
        f"{random_orders}, {k} counted evaluations.",
        "",
        f"| heuristic | ready (mean) | random median (mean) | random best / worst cell | `ties={k}` (mean) | `ties={k}` best cell |",
        "|---|---|---|---|---|---|",
    ]
    for method in names:
        mine = [r for r in rows if r["method"] == method]
        lines.append(
            f"| {method} | {np.mean([r['ready'] for r in mine]):.3f} | {np.mean([r['random_median'] for r in mine]):.3f} "
            f"| {min(r['random_min'] for r in mine):.3f} / {max(r['random_max'] for r in mine):.3f} "
            f"| {np.mean([r['best'] for r in mine]):.3f} | {min(r['best'] for r in mine):.3f} |"
        )
    lines += ["", "| graph | devices | largest gain from ties (`ties=" + str(k) + "` ÷ id) | on | widest random spread (max ÷ min) | on |"]
    lines.append("|---|---|---|---|---|---|")
    for graph, devices in dict.fromkeys((r["graph"], r["devices"]) for r in rows):
        cell = [r for r in rows if (r["graph"], r["devices"]) == (graph, devices)]
        gain = min(cell, key=lambda r: r["best"])
        spread = max(cell, key=lambda r: r["random_max"] / r["random_min"])
        lines.append(
            f"| {graph} | {devices} | {gain['best']:.3f} | {gain['method']} "
            f"| {spread['random_max'] / spread['random_min']:.3f} | {spread['method']} |"
        )
    return "\n".join(lines)
