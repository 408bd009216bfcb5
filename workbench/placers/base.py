"""The one placer interface, the registry, and ``place()``.

A placer is a class with a single method, :meth:`Placer.place`, that maps a
graph and devices to an assignment (a :class:`Decision`). Options are
constructor arguments. ``place()`` builds the placer, times it, evaluates its
assignment in the simulator, and returns a :class:`Placement`.

To add a placer: write one module with a ``Placer`` subclass whose docstring
cites its source, then add one ``register_placer`` line to
:mod:`workbench.placers.registry`; learned placers register the same way from
the learn layer's own registry module (the core never names a higher layer).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cluster import Devices, num_devices
from ..graph import DataflowGraph
from .registry import REGISTRY, get_placer, placers, register_placer

__all__ = ["Placer", "Decision", "Placement", "REGISTRY", "place", "placers", "get_placer", "register_placer"]


@dataclass(frozen=True)
class Decision:
    """What a placer decided.

    Attributes:
        assignment: device per op.
        order: the order in which ops were placed, when the placer has one
            (usable as a simulator priority order).
        details: method-specific facts (evaluations, proven bounds, ...).
    """

    assignment: np.ndarray
    order: np.ndarray | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


class Placer(ABC):
    """Maps a graph and devices to a device per op."""

    @abstractmethod
    def place(self, graph: DataflowGraph, devices: Devices, seed: int = 0) -> Decision:
        """Decide a device for every op of ``graph``."""


@dataclass(frozen=True)
class Placement:
    """A placer's assignment with its simulated makespan.

    Attributes:
        method: the placer's registry name.
        assignment: device per op.
        makespan: simulated makespan (paper model unless a Cluster/priority was given).
        lower_bound: the best known lower bound on any schedule's makespan.
        seconds: wall time the placer took.
        devices: number of devices.
        cpu_seconds: process CPU time (every thread) the placer took.
        evaluations: simulator evaluations the placer counted (0 for a one-pass method; the final simulation is not counted).
        details: method-specific facts.
        order: the order in which ops were placed, when known.
    """

    method: str
    assignment: np.ndarray
    makespan: float
    lower_bound: float
    seconds: float
    devices: int
    details: Mapping[str, Any] = field(default_factory=dict)
    order: np.ndarray | None = None
    cpu_seconds: float = 0.0
    evaluations: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "assignment": self.assignment.tolist(),
            "makespan": self.makespan,
            "lower_bound": self.lower_bound,
            "seconds": self.seconds,
            "cpu_seconds": self.cpu_seconds,
            "evaluations": self.evaluations,
            "devices": self.devices,
            "details": _plain(dict(self.details)),
            "order": None if self.order is None else self.order.tolist(),
        }


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def place(
    graph: DataflowGraph,
    method: str = "heft",
    devices: Devices = 4,
    seed: int = 0,
    priority: Any = "fifo",
    **options: Any,
) -> Placement:
    """Place ``graph`` on ``devices`` with ``method`` and simulate the result.

    ``options`` go to the placer (for example ``budget=20000`` for local
    search, ``checkpoint=PATH`` for learned methods). ``priority`` is the
    simulator's device-queue order used to evaluate the assignment.
    """
    from ..sim import check_assignment, lower_bound, simulate

    placer = get_placer(method, **options)
    began, began_cpu = time.perf_counter(), time.process_time()
    decision = placer.place(graph, devices, seed=seed)
    seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - began_cpu
    assignment = check_assignment(graph, decision.assignment, devices)
    result = simulate(graph, assignment, devices, priority=priority)
    bound = lower_bound(graph, devices)
    proven = decision.details.get("proven_lower_bound")
    if proven is not None:
        bound = max(bound, float(proven))
    return Placement(
        method=method,
        assignment=assignment,
        makespan=result.makespan,
        lower_bound=bound,
        seconds=seconds,
        devices=num_devices(devices),
        details=dict(decision.details),
        order=None if decision.order is None else np.asarray(decision.order, dtype=np.int64),
        cpu_seconds=cpu_seconds,
        evaluations=int(decision.details.get("evaluations", 0)),
    )
