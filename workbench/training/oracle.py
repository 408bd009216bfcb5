"""Cost oracles: what a placement costs, as the reward of REINFORCE.

Stage II asks the simulator; Stage III asks an oracle that measures the
real system (the backends in ``workbench/systems/``). Any object with
``measure(graph, assignment) -> seconds``, or any callable with that
signature, is an oracle; :func:`as_oracle` wraps it.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, runtime_checkable

import numpy as np

from ..graph import DataflowGraph
from ..imports import import_object
from ..sim import Evaluator

__all__ = ["CostOracle", "SimulatorOracle", "CallableOracle", "as_oracle", "oracle_from_spec"]


@runtime_checkable
class CostOracle(Protocol):
    """Anything that measures a placement's makespan."""

    def measure(self, graph: DataflowGraph, assignment: np.ndarray) -> float:
        """The makespan of running ``graph`` with op ``i`` on device ``assignment[i]``."""


class SimulatorOracle:
    """The simulator (paper execution model) as an oracle; one cached :class:`Evaluator` per graph."""

    kind = "sim"

    def __init__(self, devices: int = 4) -> None:
        self.devices = devices
        self._evaluators: dict[int, tuple[DataflowGraph, Evaluator]] = {}

    def measure(self, graph: DataflowGraph, assignment: np.ndarray) -> float:
        entry = self._evaluators.get(id(graph))
        if entry is None or entry[0] is not graph:
            entry = (graph, Evaluator(graph, self.devices))
            self._evaluators[id(graph)] = entry
        return float(entry[1](np.asarray(assignment, dtype=np.int64)))


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
