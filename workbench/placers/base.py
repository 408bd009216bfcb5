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

import os
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cluster import Devices, num_devices
from ..graph import DataflowGraph
from .placement_file import FORMAT, VERSION, PlacementError, check_placement, content_hash, read_placement_file
from .registry import REGISTRY, get_placer, placers, register_placer

__all__ = ["Placer", "Decision", "Placement", "REGISTRY", "place", "load_placement", "placers", "get_placer", "register_placer"]


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
        method: the placer's registry name (``"given"`` for a placement read from a plain list).
        assignment: device per op.
        makespan: simulated makespan (paper model unless a Cluster/priority was given).
        lower_bound: the best known lower bound on any schedule's makespan.
        seconds: wall time the placer took.
        devices: number of devices.
        cpu_seconds: process CPU time (every thread) the placer took.
        evaluations: simulator evaluations the placer counted (0 for a one-pass method; the final simulation is not counted).
        details: method-specific facts.
        order: the order in which ops were placed, when known.
        graph: the graph's name, when known.
        graph_hash: the graph's :func:`~workbench.placers.placement_file.content_hash`, when known.
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
    graph: str | None = None
    graph_hash: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The placement file's form (docs/contracts.md, "Placement file"); :meth:`from_dict` and :func:`load_placement` read it."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "graph": self.graph,
            "graph_hash": self.graph_hash,
            "nodes": int(self.assignment.size),
            "devices": self.devices,
            "assignment": self.assignment.tolist(),
            "method": self.method,
            "makespan": self.makespan,
            "lower_bound": self.lower_bound,
            "seconds": self.seconds,
            "cpu_seconds": self.cpu_seconds,
            "evaluations": self.evaluations,
            "details": _plain(dict(self.details)),
            "order": None if self.order is None else self.order.tolist(),
        }

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any] | list[int],
        graph: DataflowGraph | None = None,
        devices: int | None = None,
        source: str = "the placement",
    ) -> Placement:
        """A placement from its file form (or an older form, or a plain list of device ids with ``graph`` and ``devices``).

        With ``graph``, the placement is checked against it (its hash or name, op count and device count;
        ``devices=None`` takes the placement's own) and simulated on it: ``makespan`` and ``lower_bound`` are this
        graph's on identical devices. Without, it is :meth:`to_dict`'s output read back as it is. ``source`` names it in errors.
        """
        if graph is not None:
            return _simulated(graph, *check_placement(data, graph, devices, source))
        if not isinstance(data, Mapping):
            raise PlacementError(f"{source} is a plain list of device ids; give the graph to read it")
        missing = [key for key in ("method", "assignment", "makespan", "lower_bound", "devices") if key not in data]
        if missing:
            raise PlacementError(f"{source} lacks {', '.join(missing)}; give the graph to simulate it")
        order = data.get("order")
        return cls(
            method=str(data["method"]),
            assignment=np.asarray(data["assignment"], dtype=np.int64),
            makespan=float(data["makespan"]),
            lower_bound=float(data["lower_bound"]),
            seconds=float(data.get("seconds", 0.0)),
            cpu_seconds=float(data.get("cpu_seconds", 0.0)),
            evaluations=int(data.get("evaluations", 0)),
            devices=int(data["devices"]),
            details=dict(data.get("details") or {}),
            order=None if order is None else np.asarray(order, dtype=np.int64),
            graph=data.get("graph"),
            graph_hash=data.get("graph_hash"),
        )


def load_placement(path: str | os.PathLike, graph: DataflowGraph, devices: int | None = None) -> Placement:
    """The placement in ``path`` (the placement file's form, an older one, or a plain JSON list of device ids),
    checked against ``graph`` and ``devices`` (``None``: the file's own) and simulated on ``graph``; one-line
    :class:`~workbench.placers.placement_file.PlacementError` naming the file when it does not fit."""
    return Placement.from_dict(read_placement_file(path), graph, devices, source=str(path))


def _simulated(graph: DataflowGraph, assignment: np.ndarray, devices: int, fields: Mapping[str, Any]) -> Placement:
    """A checked placement of ``graph`` with its makespan and lower bound simulated here; the file's facts kept."""
    from ..sim import lower_bound, simulate

    details = fields.get("details")
    order = fields.get("order")
    seconds = fields.get("seconds")
    return Placement(
        method=str(fields.get("method") or "given"),
        assignment=assignment,
        makespan=simulate(graph, assignment, devices).makespan,
        lower_bound=lower_bound(graph, devices),
        seconds=float(seconds) if isinstance(seconds, (int, float)) else 0.0,
        devices=devices,
        details=dict(details) if isinstance(details, Mapping) else {},
        order=np.asarray(order, dtype=np.int64) if isinstance(order, list) and len(order) == graph.num_nodes else None,
        graph=graph.name,
        graph_hash=content_hash(graph),
    )


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
        graph=graph.name,
        graph_hash=content_hash(graph),
    )
