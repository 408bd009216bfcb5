"""Cost oracles: what a placement costs, as the reward of REINFORCE.

Stage II asks the simulator (:class:`workbench.systems.SimulatorOracle`);
Stage III asks an oracle that measures the real system (the backends in
``workbench/systems/``). Any object with ``measure(graph, assignment)``
returning seconds (or a :class:`~workbench.systems.Measurement`), or any
callable with that signature, is an oracle; :func:`as_oracle` wraps it.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, runtime_checkable

import numpy as np

from ..graph import DataflowGraph
from ..imports import import_object
from ..systems.oracle import SimulatorOracle

__all__ = ["CostOracle", "SimulatorOracle", "CallableOracle", "as_oracle", "oracle_from_spec", "oracle_kind", "makespan_of"]


@runtime_checkable
class CostOracle(Protocol):
    """Anything that measures a placement's makespan."""

    def measure(self, graph: DataflowGraph, assignment: np.ndarray) -> Any:
        """The makespan of running ``graph`` with op ``i`` on device ``assignment[i]`` (anything ``float()`` takes)."""


class CallableOracle:
    """A plain function ``f(graph, assignment) -> seconds`` as an oracle."""

    kind = "real"

    def __init__(self, function: Callable[[DataflowGraph, np.ndarray], float]) -> None:
        self.function = function

    def measure(self, graph: DataflowGraph, assignment: np.ndarray) -> float:
        return float(self.function(graph, assignment))


def as_oracle(value: Any, devices: int) -> Any:
    """``None`` → the simulator; an object with ``measure`` → itself; a callable → :class:`CallableOracle`."""
    if value is None:
        return SimulatorOracle(devices)
    if callable(getattr(value, "measure", None)):
        return value
    if callable(value):
        return CallableOracle(value)
    raise TypeError(f"an oracle needs a measure(graph, assignment) method or must be callable; got {type(value).__name__}")


def oracle_from_spec(spec: str, devices: int) -> Any:
    """``"sim"`` → the simulator; ``"module:factory"`` → ``factory(devices=devices)`` as an oracle."""
    if spec == "sim":
        return SimulatorOracle(devices)
    try:
        factory = import_object(spec)
    except ValueError as exc:
        raise ValueError(f"oracle {spec!r}: cannot import it ({exc})") from None
    return as_oracle(factory(devices=devices), devices)


def oracle_kind(oracle: Any) -> str:
    """``"sim"`` for simulator-backed oracles, else ``"real"`` (the metrics' ``oracle`` column)."""
    return getattr(oracle, "kind", "real")


def makespan_of(oracle: Any, graph: DataflowGraph, assignment: np.ndarray) -> float:
    """The oracle's makespan as a float: its trace-free ``makespan`` method when it has one, else ``float(measure(...))``."""
    fast = getattr(oracle, "makespan", None)
    if callable(fast):
        return float(fast(graph, assignment))
    return float(oracle.measure(graph, assignment))
