"""A partial schedule built op by op, as list-scheduling heuristics and the placement env do.

Each placed op is appended to its device's timeline: it starts at the
earliest time its device is free and all its inputs have arrived there
(the producer's end, plus the transfer when the producer sits on another
device). This is an estimate; the simulator gives the real makespan of the
final assignment.
"""

from __future__ import annotations

import numpy as np

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
        ptr, pred, edge = graph.pred_csr
        self._pred = [pred[ptr[v] : ptr[v + 1]] for v in range(n)]
        self._pred_comm = [graph.comm[edge[ptr[v] : ptr[v + 1]]] for v in range(n)]
        self._speeds = np.asarray(self.cluster.speeds)
        self._bandwidth = np.asarray(self.cluster.bandwidth)
        self._latency = np.asarray(self.cluster.latency)

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
        src_dev = self.device[preds]
        if np.any(src_dev < 0):
            raise ValueError(f"op {op} has unplaced predecessors")
        transfer = self._pred_comm[op][:, None] / self._bandwidth[src_dev] + self._latency[src_dev]
        transfer[src_dev[:, None] == np.arange(self.num_devices)[None, :]] = 0.0
        return np.max(self.end[preds][:, None] + transfer, axis=0)

    def earliest_starts(self, op: int) -> np.ndarray:
        """Per device: the earliest time ``op`` could start there."""
        return np.maximum(self.device_free, self.arrival_times(op))

    def earliest_finishes(self, op: int) -> np.ndarray:
        return self.earliest_starts(op) + self.graph.compute[op] / self._speeds

    def place(self, op: int, device: int) -> float:
        """Append ``op`` to ``device``; returns its estimated start time."""
        if op not in self._ready:
            raise ValueError(f"op {op} is not ready (placed already, or has unplaced predecessors)")
        if not 0 <= device < self.num_devices:
            raise ValueError(f"device {device} outside 0..{self.num_devices - 1}")
        begin = float(self.earliest_starts(op)[device])
        self.device[op] = device
        self.start[op] = begin
        self.end[op] = begin + self.graph.compute[op] / self._speeds[device]
        self.device_free[device] = self.end[op]
        self.device_compute[device] += self.graph.compute[op]
        self.order.append(op)
        self._ready.discard(op)
        for v in self.graph.successors(op):
            self._unplaced_preds[v] -= 1
            if self._unplaced_preds[v] == 0:
                self._ready.add(int(v))
        return begin
