"""The one placer interface, the registry, and ``place()``.

A placer is a class with a single method, :meth:`Placer.place`, that maps a
graph and devices to an assignment (a :class:`Decision`). Options are
constructor arguments. ``place()`` builds the placer, times it, evaluates its
assignment in the simulator, and returns a :class:`Placement`.

To add a placer: write one module with a ``Placer`` subclass whose docstring
cites its source, then add one line to ``REGISTRY`` (``name: (module, class,
description)``); learned placers register the same way and are imported only
when used.
"""

from __future__ import annotations

import importlib
import inspect
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..cluster import Devices, num_devices
from ..graph import DataflowGraph

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "assignment": self.assignment.tolist(),
            "makespan": self.makespan,
            "lower_bound": self.lower_bound,
            "seconds": self.seconds,
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


# name -> (module, class, one-line description)
REGISTRY: dict[str, tuple[str, str, str]] = {
    "single": ("workbench.placers.simple", "SinglePlacer", "every op on device 0"),
    "round_robin": ("workbench.placers.simple", "RoundRobinPlacer", "op i on device i mod D"),
    "random": ("workbench.placers.simple", "RandomPlacer", "uniformly random device per op (seeded)"),
    "critical_path": ("workbench.placers.critical_path", "CriticalPathPlacer", "the paper's teacher: largest bottom level first, earliest-start device"),
    "heft": ("workbench.placers.heft", "HeftPlacer", "HEFT (Topcuoglu et al. 2002): upward rank, earliest finish with insertion"),
    "cpop": ("workbench.placers.cpop", "CpopPlacer", "CPOP (Topcuoglu et al. 2002): critical path on one device, others earliest finish"),
    "peft": ("workbench.placers.peft", "PeftPlacer", "PEFT (Arabnejad, Barbosa 2014): earliest finish plus optimistic cost table"),
    "etf": ("workbench.placers.etf", "EtfPlacer", "ETF (Hwang et al. 1989): ready op and device with the earliest start"),
    "local_search": ("workbench.placers.local_search", "LocalSearchPlacer", "simulated annealing from the best heuristic, structure-aware moves (budget in evaluations)"),
    "cpsat": ("workbench.placers.cpsat", "CpSatPlacer", "exact CP-SAT schedule model, time-limited; reports its proven lower bound"),
    "doppler": ("workbench.learn.placers", "DopplerPlacer", "DOPPLER: learned SEL (next op) + PLC (device) policies; needs a checkpoint"),
    "doppler_sel_only": ("workbench.learn.placers", "DopplerSelOnlyPlacer", "ablation: learned SEL, critical-path device choice; needs a checkpoint"),
    "doppler_plc_only": ("workbench.learn.placers", "DopplerPlcOnlyPlacer", "ablation: critical-path op order, learned PLC; needs a checkpoint"),
    "placeto": ("workbench.learn.placers", "PlacetoPlacer", "Placeto: topological order, placement-aware embeddings; needs a checkpoint"),
    "gdp": ("workbench.learn.placers", "GDPPlacer", "GDP: graph encoder + attention, all ops in one pass; needs a checkpoint"),
    "joint": ("workbench.learn.placers", "JointPlacer", "one policy over (ready op, device) pairs; needs a checkpoint"),
}


def register_placer(name: str, module: str, cls: str, description: str) -> None:
    """Add a placer to the registry (imported only when used)."""
    REGISTRY[name] = (module, cls, description)


def placers() -> dict[str, str]:
    """Registered method names with a one-line description each."""
    return {name: entry[2] for name, entry in REGISTRY.items()}


def get_placer(method: str, **options: Any) -> Placer:
    """Build the placer ``method`` with ``options``; clear errors for unknown names and options."""
    if method not in REGISTRY:
        raise ValueError(f"unknown method {method!r}; registered: {', '.join(REGISTRY)}")
    module, cls_name, _ = REGISTRY[method]
    cls = getattr(importlib.import_module(module), cls_name)
    accepted = [p for p in inspect.signature(cls).parameters if p not in ("self", "args", "kwargs")]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        allowed = ", ".join(accepted) or "none"
        raise ValueError(f"method {method!r} does not take option(s) {', '.join(unknown)}; it takes: {allowed}")
    return cls(**options)


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
    began = time.perf_counter()
    decision = placer.place(graph, devices, seed=seed)
    seconds = time.perf_counter() - began
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
    )
