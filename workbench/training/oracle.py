"""Adapters from what a user hands to training to the one cost-oracle contract.

Stage II asks the simulator (:class:`workbench.systems.SimulatorOracle`);
Stage III asks an oracle that measures the real system: any
:class:`~workbench.systems.oracle.CostOracle` (the backends in
``workbench/systems/``), or a plain function ``f(graph, assignment) ->
seconds``, which :class:`CallableOracle` wraps. The contract itself lives in
:mod:`workbench.systems.oracle` (``docs/contracts.md``, "Cost oracle").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..cluster import Devices
from ..graph import DataflowGraph
from ..imports import import_object
from ..systems.oracle import CostOracle, Measurement, SimulatorOracle, makespan_of

__all__ = ["CallableOracle", "as_oracle", "oracle_from_spec", "oracle_kind", "makespan_of", "seconds_oracle"]


class CallableOracle:
    """A plain function ``f(graph, assignment) -> seconds`` as a :class:`~workbench.systems.oracle.CostOracle` (one sample each)."""

    def __init__(self, function: Callable[[DataflowGraph, np.ndarray], float], devices: Devices) -> None:
        self.function = function
        self.devices = devices

    def measure(
        self, graph: DataflowGraph, assignment: Sequence[int] | np.ndarray, repeats: int = 1, timeout: float = 60.0, trace: bool = False
    ) -> Measurement:
        return Measurement.from_samples([float(self.function(graph, np.asarray(assignment)))], oracle="callable")


def as_oracle(value: CostOracle | Callable[[DataflowGraph, np.ndarray], float] | None, devices: Devices) -> CostOracle:
    """``None`` → the simulator; a :class:`~workbench.systems.oracle.CostOracle` → itself; a function → :class:`CallableOracle`."""
    if value is None:
        return SimulatorOracle(devices)
    if isinstance(value, CostOracle):
        return value
    if callable(value):
        return CallableOracle(value, devices)
    raise TypeError(
        f"an oracle is a CostOracle (devices and measure(graph, assignment, ...)) or a function f(graph, assignment) -> seconds; "
        f"got {type(value).__name__}"
    )


def oracle_from_spec(spec: str, devices: int) -> CostOracle:
    """``"sim"`` → the simulator; ``"module:factory"`` → ``factory(devices=devices)`` as an oracle."""
    if spec == "sim":
        return SimulatorOracle(devices)
    try:
        factory = import_object(spec)
    except ValueError as exc:
        raise ValueError(f"oracle {spec!r}: cannot import it ({exc})") from None
    return as_oracle(factory(devices=devices), devices)


def oracle_kind(oracle: CostOracle) -> str:
    """``"sim"`` for the simulator, else ``"real"`` (the metrics' ``oracle`` column)."""
    return "sim" if isinstance(oracle, SimulatorOracle) else "real"


def seconds_oracle(oracle: CostOracle, repeats: int = 1, timeout: float = 60.0) -> Callable[[DataflowGraph, np.ndarray], float]:
    """``oracle`` measured with ``repeats`` and ``timeout`` as a function ``f(graph, assignment) -> seconds``.

    A failed measurement raises with the backend's errors instead of handing NaN to REINFORCE.
    """

    def measure(graph: DataflowGraph, assignment: np.ndarray) -> float:
        measurement = oracle.measure(graph, assignment, repeats=repeats, timeout=timeout)
        if not measurement.ok:
            who = measurement.oracle or type(oracle).__name__
            raise RuntimeError(f"{who} could not measure the placement: {'; '.join(measurement.errors) or 'no time'}")
        return float(measurement.seconds)

    return measure
