"""Placement quality and speed: every method on the paper graphs and on the STG set with known optima.

Three tables. The paper graphs on 4 devices: each method's simulated makespan
(the paper's unit, ÷ 1e10) and wall seconds, local search at 20,000 and
60,000 evaluations, CP-SAT with its proven bound where it beats the simple
one. Local search over five seeds at 20,000 evaluations. The STG 50-task set on 2,
4, 8 and 16 processors: each method's mean and worst gap to the optimum,
and a count of impossible results (a makespan below the proven floor, or a
CP-SAT bound above the best known makespan), which must be zero.
"""

from __future__ import annotations

import csv
import time
from typing import Any

import numpy as np

from ..placers import methods

PAPER_METHODS = tuple(methods("baseline", "heuristic", "rule"))
"""Run with their defaults on the paper graphs (local search and CP-SAT get their own rows)."""
STG_METHODS = tuple(methods("baseline", "heuristic", "rule", "search", "exact"))
PROCESSORS = (2, 4, 8, 16)
UNIT = 1e10


def stg_optima() -> dict[tuple[str, int], tuple[float, float]]:
    """``(graph, processors) -> (proven floor, best known makespan)``.

    Most rows of ``optimal_makespans.csv`` hold the proven optimum (floor ==
    best known). 51 rows hold two numbers: a proven lower bound and the best
    known makespan, for instances whose optimum was not proven.
    """
    from ..datasets import STG_DIR

    optima = {}
    with open(STG_DIR / "optimal_makespans.csv", newline="", encoding="utf-8") as handle:
        rows = csv.reader(handle)
        next(rows)
        for row in rows:
            floor = float(row[2])
            optima[row[0], int(row[1])] = (floor, float(row[3]) if len(row) > 3 else floor)
    return optima


def _timed_place(graph, method: str, devices: int, **options: Any):
    """The placement and the CPU seconds it took (all threads)."""
    from ..placers import place

    began = time.process_time()
    placement = place(graph, method=method, devices=devices, **options)
    return placement, time.process_time() - began


def paper_table(quick: bool, devices: int = 4) -> list[dict[str, Any]]:
    """One row per method: makespan (÷1e10), wall and CPU seconds on each paper graph."""
    from ..datasets import PAPER_GRAPHS, bundled_graph
    from ..sim import lower_bound

    budgets = (2_000, 6_000) if quick else (20_000, 60_000)
    runs: list[tuple[str, str, dict[str, Any]]] = [(m, m, {}) for m in PAPER_METHODS]
    runs += [(f"local_search {b // 1000}k", "local_search", {"budget": b}) for b in budgets]
    runs.append(("cpsat", "cpsat", {"time_limit": 2.0 if quick else 10.0}))
    rows = [{"method": label, "graphs": {}} for label, _, _ in runs]
    bound_row: dict[str, Any] = {"method": "lower bound (simple)", "graphs": {}}
    for name in PAPER_GRAPHS:
        graph = bundled_graph(name)
        bound_row["graphs"][name] = {"makespan": lower_bound(graph, devices) / UNIT}
        for row, (_, method, options) in zip(rows, runs, strict=True):
            placement, cpu = _timed_place(graph, method, devices, **options)
            row["graphs"][name] = {"makespan": placement.makespan / UNIT, "seconds": placement.seconds, "cpu_seconds": cpu}
            if method == "cpsat" and placement.details["proven_lower_bound"] > lower_bound(graph, devices):
                row["graphs"][name]["proven_lower_bound"] = placement.details["proven_lower_bound"] / UNIT
    return rows + [bound_row]


def seed_table(quick: bool, devices: int = 4) -> list[dict[str, Any]]:
    """Local search on each paper graph over several seeds: how much the result depends on luck."""
    from ..datasets import PAPER_GRAPHS, bundled_graph

    budget, seeds = (2_000, 2) if quick else (20_000, 5)
    rows = []
    for name in PAPER_GRAPHS:
        graph = bundled_graph(name)
        results = [_timed_place(graph, "local_search", devices, seed=seed, budget=budget) for seed in range(seeds)]
        makespans = [p.makespan / UNIT for p, _ in results]
        rows.append({"graph": name, "budget": budget, "makespans": makespans, "cpu_seconds": [cpu for _, cpu in results]})
    return rows


def stg_table(quick: bool) -> dict[str, Any]:
    """Per method: mean and worst gap to the best known makespan over every STG graph and processor count."""
    from ..datasets import stg_graphs
    from ..formats import load_graph
    from ..progress import progress_bar

    optima = stg_optima()
    graphs = stg_graphs()[::18] if quick else stg_graphs()
    options = {"local_search": {"budget": 500 if quick else 2_000}, "cpsat": {"time_limit": 1.0}}
    gaps: dict[str, list[float]] = {m: [] for m in STG_METHODS}
    seconds: dict[str, float] = {m: 0.0 for m in STG_METHODS}
    impossible: list[str] = []
    with progress_bar(total=len(graphs) * len(PROCESSORS), desc="STG", unit="instance") as bar:
        for path in graphs:
            graph = load_graph(path)
            key = f"{path.parent.name}/{path.name}"
            for processors in PROCESSORS:
                floor, best_known = optima[key, processors]
                for method in STG_METHODS:
                    placement, _ = _timed_place(graph, method, processors, **options.get(method, {}))
                    seconds[method] += placement.seconds
                    gaps[method].append(placement.makespan / best_known - 1)
                    if placement.makespan < floor or placement.details.get("proven_lower_bound", 0.0) > best_known:
                        impossible.append(f"{method} on {key} x{processors}")
                bar.update()
    instances = len(graphs) * len(PROCESSORS)
    rows = [
        {
            "method": m,
            "mean_gap": float(np.mean(g)),
            "worst_gap": float(np.max(g)),
            "optimal_share": float(np.mean(np.asarray(g) <= 1e-12)),
            "mean_seconds": seconds[m] / instances,
        }
        for m, g in gaps.items()
    ]
    return {"instances": instances, "rows": rows, "impossible": impossible, "options": options}


def _markdown(paper: list[dict[str, Any]], seeds: list[dict[str, Any]], stg: dict[str, Any]) -> str:
    names = list(paper[0]["graphs"])
    short = [n.split("_")[0] if not n.startswith("full") else "layer" for n in names]
    short = ["block" if n == "transformer" else n for n in short]
    lines = ["| method | " + " | ".join(f"{s} ÷1e10 | s" for s in short) + " |", "|---" * (1 + 2 * len(names)) + "|"]
    for row in paper:
        cells = []
        for n in names:
            cell = row["graphs"][n]
            value = f"{cell['makespan']:.1f}"
            if "proven_lower_bound" in cell:
                value += f" (proven bound {cell['proven_lower_bound']:.1f})"
            cells += [value, f"{cell['seconds']:.2f}" if "seconds" in cell else ""]
        lines.append(f"| {row['method']} | " + " | ".join(cells) + " |")
    lines += ["", f"local_search, {seeds[0]['budget']:,} evaluations, seeds 0..{len(seeds[0]['makespans']) - 1}:", ""]
    lines += ["| graph | makespans ÷1e10 | mean | worst | mean CPU s |", "|---|---|---|---|---|"]
    for r in seeds:
        values = r["makespans"]
        lines.append(
            f"| {r['graph']} | {' / '.join(f'{v:.1f}' for v in values)} | {np.mean(values):.1f} | "
            f"{max(values):.1f} | {np.mean(r['cpu_seconds']):.2f} |"
        )
    lines += ["", f"STG 50-task set, {stg['instances']} instances (graphs x 2/4/8/16 processors); gap to the best known makespan:", ""]
    lines += ["| method | mean gap | worst gap | optimal | mean s |", "|---|---|---|---|---|"]
    for r in stg["rows"]:
        lines.append(f"| {r['method']} | {r['mean_gap']:.2%} | {r['worst_gap']:.2%} | {r['optimal_share']:.0%} | {r['mean_seconds']:.3f} |")
    lines.append(f"\nimpossible results (below the proven floor, or a bound above the best known): {len(stg['impossible'])}")
    return "\n".join(lines)


def run(quick: bool = False) -> dict[str, Any]:
    paper = paper_table(quick)
    seeds = seed_table(quick)
    stg = stg_table(quick)
    return {"benchmark": "placers", "quick": quick, "paper": paper, "seeds": seeds, "stg": stg, "markdown": _markdown(paper, seeds, stg)}
