"""Shared pieces of the classic list schedulers (HEFT, CPOP, PEFT).

- :class:`InsertionSchedule`: a :class:`~workbench.schedule.PartialSchedule`
  whose ops may start in an idle gap of a device's timeline (the insertion
  policy of Topcuoglu et al. 2002) instead of only after the device's last op.
- :func:`mean_costs`: each op's compute time and each edge's transfer time
  averaged over the devices (over distinct device pairs for transfers), the
  "average cost" every one of these ranks is built on.
- :func:`upward_rank` / :func:`downward_rank`: HEFT's rank_u and CPOP's rank_d.
- :func:`rank_order`: ops by decreasing rank, ties in topological order, so
  the order is always a valid one to schedule in.
- :func:`schedule_decision`: a finished schedule as a placer's decision.
"""

from __future__ import annotations

import bisect

import numpy as np

from ..cluster import Devices, as_cluster
from ..graph import DataflowGraph
from ..schedule import PartialSchedule
from .base import Decision

__all__ = ["InsertionSchedule", "mean_costs", "upward_rank", "downward_rank", "rank_order", "schedule_decision"]


class InsertionSchedule(PartialSchedule):
    """A partial schedule where an op may fill an idle gap between already placed ops."""

    def __init__(self, graph: DataflowGraph, devices: Devices) -> None:
        super().__init__(graph, devices)
        self._busy: list[list[tuple[float, float]]] = [[] for _ in range(self.num_devices)]
        self._ends: list[list[float]] = [[] for _ in range(self.num_devices)]  # sorted too: intervals never overlap

    def _first_gap(self, device: int, ready: float, duration: float) -> float:
        busy = self._busy[device]
        begin = ready
        for k in range(bisect.bisect_right(self._ends[device], ready), len(busy)):  # skip what ends before ``ready``
            start, end = busy[k]
            if start >= begin + duration:
                break
            begin = max(begin, end)
        return begin

    def earliest_starts(self, op: int) -> np.ndarray:
        """Per device: the earliest start in a gap long enough for ``op``, once its inputs are there."""
        arrival = self.arrival_times(op)
        duration = self.graph.compute[op] / self.speeds
        return np.array([self._first_gap(d, arrival[d], duration[d]) for d in range(self.num_devices)])

    def place(self, op: int, device: int, earliest_starts: np.ndarray | None = None) -> float:
        begin = super().place(op, device, earliest_starts)
        interval = (begin, float(self.end[op]))
        index = bisect.bisect(self._busy[device], interval)
        self._busy[device].insert(index, interval)
        self._ends[device].insert(index, interval[1])
        return begin


def mean_costs(graph: DataflowGraph, devices: Devices) -> tuple[np.ndarray, np.ndarray]:
    """Per op the mean compute time over devices; per edge the mean transfer time over distinct device pairs."""
    cluster = as_cluster(devices)
    speeds = np.asarray(cluster.speeds)
    compute = graph.compute * np.mean(1.0 / speeds)
    d = cluster.num_devices
    if d == 1:
        return compute, np.zeros_like(graph.comm)
    off = ~np.eye(d, dtype=bool)
    inverse_bw = np.mean(1.0 / np.asarray(cluster.bandwidth)[off])
    latency = np.mean(np.asarray(cluster.latency)[off])
    return compute, graph.comm * inverse_bw + latency * (graph.comm.size > 0)


def upward_rank(graph: DataflowGraph, compute: np.ndarray, comm: np.ndarray) -> np.ndarray:
    """rank_u: the op's cost plus the longest (cost + transfer) path to an exit."""
    rank = compute.astype(float).copy()
    ptr, succ, edge = graph.succ_csr
    for u in graph.topological_order[::-1]:
        lo, hi = ptr[u], ptr[u + 1]
        if hi > lo:
            rank[u] = compute[u] + np.max(comm[edge[lo:hi]] + rank[succ[lo:hi]])
    return rank


def downward_rank(graph: DataflowGraph, compute: np.ndarray, comm: np.ndarray) -> np.ndarray:
    """rank_d: the longest (cost + transfer) path from an entry up to the op, its own cost excluded."""
    rank = np.zeros(graph.num_nodes)
    ptr, pred, edge = graph.pred_csr
    for v in graph.topological_order:
        lo, hi = ptr[v], ptr[v + 1]
        if hi > lo:
            rank[v] = np.max(rank[pred[lo:hi]] + compute[pred[lo:hi]] + comm[edge[lo:hi]])
    return rank


def rank_order(graph: DataflowGraph, rank: np.ndarray) -> np.ndarray:
    """Ops by decreasing ``rank``; ties (zero-cost ops) in topological order."""
    position = np.empty(graph.num_nodes, dtype=np.int64)
    position[graph.topological_order] = np.arange(graph.num_nodes)
    return np.lexsort((position, -rank))


def schedule_decision(schedule: PartialSchedule, **details: object) -> Decision:
    """The schedule's devices and placement order, with its own makespan estimate among the details."""
    estimate = float(np.max(schedule.end, initial=0.0))
    return Decision(
        schedule.device.copy(), order=np.array(schedule.order, dtype=np.int64), details={"estimated_makespan": estimate, **details}
    )
