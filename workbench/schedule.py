"""A partial schedule built op by op, as list-scheduling heuristics and the placement env do.

Each placed op is appended to its device's timeline: it starts at the
earliest time its device is free and all its inputs have arrived there
(the producer's end, plus the transfer when the producer sits on another
device). This is an estimate; the simulator gives the real makespan of the
final assignment.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .cluster import Devices, as_cluster
from .graph import DataflowGraph

__all__ = ["PartialSchedule"]


class PartialSchedule:
    """Ops appended one at a time to per-device timelines."""

    def __init__(self, graph: DataflowGraph, devices: Devices) -> None:
        self.graph = graph
        self.cluster = as_cluster(devices)
        self.num_devices = self.cluster.num_devices
        n = graph.num_nodes
        self.device = np.full(n, -1, dtype=np.int64)
        self.start = np.full(n, np.nan)
        self.end = np.full(n, np.nan)
        self.device_free = np.zeros(self.num_devices)
        self.device_compute = np.zeros(self.num_devices)
        self.order: list[int] = []
        self._unplaced_preds = graph.in_degree.copy()
        self._ready = set(np.flatnonzero(self._unplaced_preds == 0).tolist())
        self.newly_ready: list[int] = []
        """The ops the last :meth:`place` made ready, each once (a heuristic's ready queue adds them instead of rescanning)."""
        ptr, pred, edge = graph.pred_csr
        self._pred = [pred[ptr[v] : ptr[v + 1]] for v in range(n)]
        self._pred_comm = [graph.comm[edge[ptr[v] : ptr[v + 1]]] for v in range(n)]
        self.speeds = np.asarray(self.cluster.speeds)
        """Per device, its compute speed (the cluster's, as an array made once)."""
        self.bandwidth = np.asarray(self.cluster.bandwidth)
        """Per ordered device pair, its link bandwidth."""
        self.latency = np.asarray(self.cluster.latency)
        """Per ordered device pair, its link latency."""

    @property
    def ready_ops(self) -> list[int]:
        """Unplaced ops whose predecessors are all placed, in id order."""
        return sorted(self._ready)

    @property
    def done(self) -> bool:
        return len(self.order) == self.graph.num_nodes

    def arrival_times(self, op: int) -> np.ndarray:
        """Per device: when all of ``op``'s inputs could be there."""
        preds = self._pred[op]
        if preds.size == 0:
            return np.zeros(self.num_devices)
        arrival = _arrival_times(preds, self._pred_comm[op], self.device, self.end, self.bandwidth, self.latency)
        if arrival.size == 0:
            raise ValueError(f"op {op} has unplaced predecessors")
        return arrival

    def earliest_starts(self, op: int) -> np.ndarray:
        """Per device: the earliest time ``op`` could start there."""
        return np.maximum(self.device_free, self.arrival_times(op))

    def earliest_finishes(self, op: int) -> np.ndarray:
        return self.earliest_starts(op) + self.graph.compute[op] / self.speeds

    def place(self, op: int, device: int, earliest_starts: np.ndarray | None = None) -> float:
        """Append ``op`` to ``device``; returns its estimated start time.

        ``earliest_starts`` is ``self.earliest_starts(op)`` when the caller has it already.
        """
        if op not in self._ready:
            raise ValueError(f"op {op} is not ready (placed already, or has unplaced predecessors)")
        if not 0 <= device < self.num_devices:
            raise ValueError(f"device {device} outside 0..{self.num_devices - 1}")
        begin = float((self.earliest_starts(op) if earliest_starts is None else earliest_starts)[device])
        self.device[op] = device
        self.start[op] = begin
        self.end[op] = begin + self.graph.compute[op] / self.speeds[device]
        self.device_free[device] = self.end[op]
        self.device_compute[device] += self.graph.compute[op]
        self.order.append(op)
        self._ready.discard(op)
        successors = self.graph.successors(op)
        np.subtract.at(self._unplaced_preds, successors, 1)  # a parallel edge counts once per edge, as in_degree does
        self.newly_ready = list(dict.fromkeys(successors[self._unplaced_preds[successors] == 0].tolist()))
        self._ready.update(self.newly_ready)
        return begin


@njit(cache=True)
def _arrival_times(
    preds: np.ndarray, comm: np.ndarray, device: np.ndarray, end: np.ndarray, bandwidth: np.ndarray, latency: np.ndarray
) -> np.ndarray:  # pragma: no cover - compiled
    """Per device, the latest ``end + transfer`` over ``preds`` (a transfer on the producer's own device is free);
    empty when one of them is unplaced. One compiled loop: the numpy version spent most of its time on per-call overhead."""
    arrival = np.full(bandwidth.shape[0], -np.inf)
    for i in range(preds.size):
        source = device[preds[i]]
        if source < 0:
            return arrival[:0]
        for target in range(arrival.size):
            ready = end[preds[i]] + (0.0 if source == target else comm[i] / bandwidth[source, target] + latency[source, target])
            if ready > arrival[target]:
                arrival[target] = ready
    return arrival
