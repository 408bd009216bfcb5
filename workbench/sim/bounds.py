"""Lower bounds on any schedule's makespan, and the gap of a makespan above one."""

from __future__ import annotations

from ..cluster import Devices, as_cluster
from ..graph import DataflowGraph

__all__ = ["lower_bound", "optimality_gap"]


def lower_bound(graph: DataflowGraph, devices: Devices = 4) -> float:
    """``max(longest compute-only path, total compute / devices)``; no schedule can beat it.

    For a :class:`Cluster` the fastest device bounds the path and the summed
    speeds bound the work.
    """
    cluster = as_cluster(devices)
    fastest = max(cluster.speeds)
    return max(graph.longest_path(with_comm=False) / fastest, graph.total_compute / sum(cluster.speeds))


def optimality_gap(makespan: float, bound: float) -> float | None:
    """``makespan / bound - 1``: how far above a lower bound a makespan is.

    A graph of zero-cost ops has a bound of 0: the gap is then 0 for a zero
    makespan and undefined (``None``) for a positive one.
    """
    if bound > 0:
        return makespan / bound - 1
    return 0.0 if makespan <= 0 else None
