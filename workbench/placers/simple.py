"""Trivial baselines: one device, round robin, uniform random."""

from __future__ import annotations

import numpy as np

from ..cluster import Devices, num_devices
from ..graph import DataflowGraph
from .base import Decision, Placer


class SinglePlacer(Placer):
    """Every op on device 0: the sequential baseline."""

    def place(self, graph: DataflowGraph, devices: Devices, seed: int = 0) -> Decision:
        return Decision(np.zeros(graph.num_nodes, dtype=np.int64))


class RoundRobinPlacer(Placer):
    """Op ``i`` on device ``i mod D`` (the paper's round-robin reference placement)."""

    def place(self, graph: DataflowGraph, devices: Devices, seed: int = 0) -> Decision:
        return Decision(np.arange(graph.num_nodes, dtype=np.int64) % num_devices(devices))


class RandomPlacer(Placer):
    """A uniformly random device per op, from ``numpy.random.default_rng(seed)``."""

    def place(self, graph: DataflowGraph, devices: Devices, seed: int = 0) -> Decision:
        rng = np.random.default_rng(seed)
        return Decision(rng.integers(0, num_devices(devices), size=graph.num_nodes, dtype=np.int64))
