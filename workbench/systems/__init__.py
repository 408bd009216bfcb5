"""Execution backends: cost oracles that say how long a placement really takes.

- :class:`SimulatorOracle`: the simulator, in seconds (``oracle.py``).
- :class:`LocalExecutor`: runs the graph on this machine's devices, one worker
  per device, real tensor work and real copies (``executor.py``; imports torch
  when it first measures). What each op runs is an :class:`OpKernels`
  (``kernels.py``: :class:`CalibratedKernels`, :class:`WaitKernels`);
  :class:`ModuleKernels` runs a PyTorch model's own ops for a graph imported
  from that model (``module_kernels.py``).
- :class:`RemoteEngine`: asks an engine over TCP (``remote.py``, which also
  documents the protocol and holds the reference server).
- :func:`calibrate`: fit the simulator to measurements and report how well
  each ranks placements (``calibration.py``).

All implement :class:`CostOracle` (``oracle.py``; ``docs/contracts.md``, "Cost
oracle"): ``measure(graph, assignment, repeats, timeout, trace) -> Measurement``;
see ``docs/systems.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..graph import DataflowGraph
from ..imports import lazy_exports
from .oracle import (
    CostOracle,
    FastCostOracle,
    Measurement,
    MeasurementError,
    SimulatorOracle,
    makespan_of,
    scaled_trace,
    spearman,
    trace_violations,
)

__all__ = [
    "measure",
    "make_oracle",
    "Measurement",
    "MeasurementError",
    "CostOracle",
    "FastCostOracle",
    "makespan_of",
    "SimulatorOracle",
    "LocalExecutor",
    "OpKernels",
    "CalibratedKernels",
    "WaitKernels",
    "ModuleKernels",
    "RemoteEngine",
    "EngineError",
    "serve_engine",
    "calibrate",
    "Calibration",
    "scaled_trace",
    "spearman",
    "trace_violations",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "LocalExecutor": ".executor",
        "OpKernels": ".kernels",
        "CalibratedKernels": ".kernels",
        "WaitKernels": ".kernels",
        "ModuleKernels": ".module_kernels",
        "RemoteEngine": ".remote",
        "EngineError": ".remote",
        "serve_engine": ".remote",
        "calibrate": ".calibration",
        "Calibration": ".calibration",
    },
)


def make_oracle(oracle: str | CostOracle = "sim", devices: int = 4, **options: Any) -> CostOracle:
    """An oracle by name: ``"sim"``, ``"local"``, or ``"HOST:PORT"`` of a remote engine; oracles pass through."""
    if not isinstance(oracle, str):
        return oracle
    if oracle == "sim":
        return SimulatorOracle(devices, **options)
    if oracle == "local":
        from .executor import LocalExecutor

        return LocalExecutor(devices, **options)
    if ":" in oracle:
        from .remote import RemoteEngine

        return RemoteEngine.from_address(oracle, devices=devices, **options)
    raise ValueError(f"unknown oracle {oracle!r}; use 'sim', 'local' or HOST:PORT of a remote engine")


def measure(
    graph: DataflowGraph,
    assignment: Sequence[int] | np.ndarray,
    oracle: str | CostOracle = "sim",
    devices: int = 4,
    repeats: int = 3,
    timeout: float = 60.0,
    **options: Any,
) -> Measurement:
    """Measure one placement with ``oracle`` (see :func:`make_oracle`); ``options`` build the oracle."""
    return make_oracle(oracle, devices, **options).measure(graph, assignment, repeats=repeats, timeout=timeout)
