"""Adapters from what a user hands to training to the one cost-oracle contract.

Stage II asks the simulator (:class:`workbench.systems.SimulatorOracle`);
Stage III asks an oracle that measures the real system: any
:class:`~workbench.systems.oracle.CostOracle` (the backends in
``workbench/systems/``), or a plain function ``f(graph, assignment) ->
seconds``, which :class:`~workbench.systems.oracle.CallableOracle` wraps. The contract itself lives in
:mod:`workbench.systems.oracle` (``docs/contracts.md``, "Cost oracle").
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..graph import DataflowGraph
from ..systems import make_oracle
from ..systems.oracle import CallableOracle, CostOracle, SimulatorOracle, as_oracle, makespan_of

__all__ = ["CallableOracle", "as_oracle", "oracle_from_spec", "oracle_kind", "makespan_of", "seconds_oracle"]


def oracle_from_spec(spec: str, devices: int) -> CostOracle:
    """The oracle ``spec`` names (:func:`workbench.systems.make_oracle`: ``sim``, ``local``, ``HOST:PORT`` or ``module:factory``)."""
    return make_oracle(spec, devices)


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
