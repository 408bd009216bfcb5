"""The best of every one-pass method: each constructive placer runs once, the simulator scores each placement, the best wins.

The fair baseline of a learned or searched placement (a portfolio in the
sense of Rice's algorithm selection problem, Advances in Computers 1976):
anything that spends simulator evaluations should at least beat what a
handful of evaluations of the cheap one-pass rules already gives. The
constructive methods are the registered ``heuristic`` (literature),
``rule`` (this workbench's, e.g. ``affinity``) and ``baseline`` kinds
(:data:`CONSTRUCTIVE_KINDS`); each placement is one counted evaluation.
``starts="literature"`` keeps the literature heuristics and the baselines
only (the paper comparison's start set). local_search and every search
built on it start from the same set (:func:`constructive_starts`).
"""

from __future__ import annotations

import time

import numpy as np

from ..cluster import Devices
from ..graph import DataflowGraph
from .anytime import BestSoFar
from .base import Decision, Placer
from .registry import PlacerError, get_placer, methods

__all__ = ["CONSTRUCTIVE_KINDS", "START_SETS", "BestConstructivePlacer", "constructive_methods", "constructive_starts"]

CONSTRUCTIVE_KINDS = ("heuristic", "rule", "baseline")
"""The kinds of one-pass method, in the order tried (on a tie the first wins)."""
START_SETS = {"all": CONSTRUCTIVE_KINDS, "literature": ("heuristic", "baseline")}
"""Named sets of starting methods: every constructive method (the fair default), or the literature heuristics and baselines only."""


def constructive_methods(starts: str = "all") -> list[str]:
    """The registered one-pass methods of the start set ``starts`` (a key of :data:`START_SETS`), in the order tried."""
    if starts not in START_SETS:
        raise PlacerError(f"starts must be one of {', '.join(START_SETS)}, got {starts!r}")
    return [name for kind in START_SETS[starts] for name in methods(kind)]


def constructive_starts(graph: DataflowGraph, devices: Devices, starts: str = "all") -> tuple[list[str], np.ndarray]:
    """The names and assignments (one row per method) of every method of the start set ``starts``; no simulation."""
    names = constructive_methods(starts)
    assignments = np.array([get_placer(name).place(graph, devices).assignment for name in names], dtype=np.int64)
    return names, assignments.reshape(len(names), graph.num_nodes)


class BestConstructivePlacer(Placer):
    """Runs every constructive method once and keeps the placement with the lowest simulated makespan.

    Args:
        starts: the methods tried: ``"all"`` (heuristics, rules and baselines) or ``"literature"`` (no rules).
    """

    def __init__(self, starts: str = "all") -> None:
        constructive_methods(starts)  # an unknown set is refused here
        self.starts = starts

    def place(self, graph: DataflowGraph, devices: Devices, seed: int = 0) -> Decision:
        from ..sim import Evaluator

        began = time.process_time()
        names, assignments = constructive_starts(graph, devices, self.starts)
        evaluator = Evaluator(graph, devices)
        makespans = np.atleast_1d(evaluator(assignments))
        anytime = BestSoFar(began)
        anytime.add(makespans)
        best = int(np.argmin(makespans))
        return Decision(
            assignments[best],
            details={
                "evaluations": evaluator.evaluations,
                "start_method": names[best],
                "makespans": {name: float(m) for name, m in zip(names, makespans, strict=True)},
                "anytime": anytime.points,
            },
        )
