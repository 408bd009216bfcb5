"""Population search, uniform and learned (REGAL-style), against fair local_search, at equal evaluations and equal CPU time.

Per graph, device count, seed and budget, fair local_search (from the best
one-pass method) and each variant (a name and its options) of the uniform
population search (:mod:`workbench.placers.population`) and the learned one
(:mod:`workbench.learn.learned_population`) run one
after the other in one process, so every comparison is measured on the same
machine state. Equal evaluations: each method's makespan ÷ local_search's
at the same budget. Equal CPU time: each method's best so far at the CPU
seconds local_search spent on ``cpu_budget`` evaluations
(:func:`workbench.bench.learned.best_at`), ÷ local_search's makespan there.
Tunes on the corpus's validation (or training) split and reports on the test
split's paper graphs; never tunes on the test split.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from .learned import _single_thread, _summary, best_at

LOCAL_SEARCH = "local_search"
TABLES = ("uniform", "learned")
SPLITS = ("validation", "train", "paper")
"""The graph sets measured: the corpus's validation or training split (for tuning) or the test split's paper graphs."""


def _graphs(split: str) -> list[Any]:
    from .. import corpus

    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if split == "paper":
        return [e for e in corpus.entries("test") if e.family == "paper"]
    return [e for e in corpus.entries(split) if e.family != "zoo"]


def _run(graph: Any, devices: int, seed: int, make: Callable[[int], Any], budget: int) -> dict[str, Any]:
    """One placement by ``make(budget)``: its makespan, CPU seconds (building the placer, which loads a learned one's
    checkpoint, included) and any-time curve."""
    from ..sim import simulate

    began = time.process_time()
    decision = make(budget).place(graph, devices, seed)
    cpu_seconds = time.process_time() - began
    makespan = float(simulate(graph, decision.assignment, devices).makespan)
    return {"makespan": makespan, "cpu_seconds": cpu_seconds, "anytime": decision.details["anytime"]}


def compare(
    variants: Mapping[str, Mapping[str, Any]],
    split: str = "validation",
    devices: Iterable[int] = (4, 8),
    seeds: Iterable[int] = range(5),
    budgets: Iterable[int] = (200, 500),
    cpu_budget: int = 500,
) -> str:
    """Markdown table of each variant ÷ fair local_search (module docstring); a variant is a name and its options, ``table``
    (``"uniform"``: :class:`~workbench.placers.population.PopulationSearchPlacer`, ``"learned"``, the default:
    :class:`~workbench.learn.learned_population.LearnedPopulationPlacer`) and that placer's."""
    from .. import corpus
    from ..learn.learned_population import LearnedPopulationPlacer
    from ..placers.local_search import LocalSearchPlacer
    from ..placers.population import PopulationSearchPlacer

    _single_thread()
    budgets, seeds = sorted(budgets), list(seeds)
    runs: dict[str, Callable[[int], Any]] = {}
    for name, options in variants.items():
        table, rest = options.get("table", "learned"), {k: v for k, v in options.items() if k != "table"}
        if table not in TABLES:
            raise ValueError(f"variant {name!r}: table must be one of {', '.join(TABLES)}, got {table!r}")
        placer = PopulationSearchPlacer if table == "uniform" else LearnedPopulationPlacer
        runs[name] = lambda budget, placer=placer, rest=rest: placer(budget=budget, **rest)
    found: dict[tuple[str, int, int, int, str], dict[str, Any]] = {}
    cases = [(e, d) for e in _graphs(split) for d in devices if split == "paper" or d in e.devices]
    warm = corpus.build(cases[0][0])
    for make in (LocalSearchPlacer, *runs.values()):  # compiled code and checkpoints loaded before any measurement
        _run(warm, cases[0][1], 0, make, min(budgets))
    for entry, d in cases:
        graph = corpus.build(entry)
        for budget in sorted({*budgets, cpu_budget}):
            for seed in seeds:
                found[entry.name, d, seed, budget, LOCAL_SEARCH] = _run(graph, d, seed, LocalSearchPlacer, budget)
                for name, make in runs.items():
                    found[entry.name, d, seed, budget, name] = _run(graph, d, seed, make, budget)
    lines = [
        f"{split}: each method ÷ fair local_search; mean over seeds {seeds[0]}–{seeds[-1]}, then mean (min–max; wins/ties/losses) over "
        f"graphs. Equal CPU: best so far at the CPU seconds local_search spent on {cpu_budget} evaluations. CPU: ÷ local_search's at "
        f"{cpu_budget} evaluations.",
        "",
        "| devices | method | " + " | ".join(f"{b} evaluations" for b in budgets) + " | equal CPU | CPU |",
        "|---|---|" + "---|" * (len(budgets) + 2),
    ]
    for d in sorted({d for _, d in cases}):
        graphs = [e.name for e, dd in cases if dd == d]
        for name in runs:
            lines.append(f"| {d} | {name} | " + " | ".join(_row(found, graphs, d, name, seeds, budgets, cpu_budget)) + " |")
    return "\n".join(lines)


def _row(
    found: Mapping[tuple[str, int, int, int, str], Mapping[str, Any]],
    graphs: list[str],
    devices: int,
    name: str,
    seeds: list[int],
    budgets: list[int],
    cpu_budget: int,
) -> list[str]:
    """One method's cells: its ratio to local_search at each budget, at equal CPU, and its CPU cost ratio."""

    def per_graph(value: Callable[[Mapping[str, Any], Mapping[str, Any]], float], budget: int) -> np.ndarray:
        """``value(mine, local_search's)`` averaged over the seeds, one per graph."""
        return np.array(
            [
                np.mean([value(found[g, devices, s, budget, name], found[g, devices, s, budget, LOCAL_SEARCH]) for s in seeds])
                for g in graphs
            ]
        )

    cells = [_summary(per_graph(lambda mine, ls: mine["makespan"] / ls["makespan"], b)) for b in budgets]
    at_cpu = per_graph(lambda mine, ls: best_at(mine["anytime"], ls["cpu_seconds"]) / ls["makespan"], cpu_budget)
    cost = per_graph(lambda mine, ls: mine["cpu_seconds"] / ls["cpu_seconds"], cpu_budget)
    return [*cells, _summary(at_cpu), f"{cost.mean():.2f}×"]


if __name__ == "__main__":
    import argparse
    import json

    parser = argparse.ArgumentParser(description="Population search (uniform, learned) against fair local_search.")
    parser.add_argument(
        "variants", help='JSON object: variant name -> options, e.g. \'{"uniform": {"table": "uniform"}, "t0.2": {"temperature": 0.2}}\''
    )
    parser.add_argument("--split", default="validation", choices=SPLITS)
    parser.add_argument("--devices", default="4,8")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budgets", default="200,500")
    args = parser.parse_args()
    print(
        compare(
            json.loads(args.variants),
            args.split,
            [int(x) for x in args.devices.split(",")],
            range(args.seeds),
            [int(x) for x in args.budgets.split(",")],
        )
    )
