"""Execution backends: cost oracles that say how long a placement really takes.

- :class:`SimulatorOracle`: the simulator, in seconds (``oracle.py``).
- :class:`LocalExecutor`: runs the graph on this machine's devices, one worker
  per device, real tensor work and real copies (``executor.py``; imports torch
  when it first measures). What each op runs is an :class:`OpKernels`
  (``kernels.py``: :class:`CalibratedKernels`, :class:`WaitKernels`);
  :class:`ModuleKernels` runs a PyTorch model's own ops for a graph imported
  from that model (``module_kernels.py``).
- :class:`RemoteEngine`: asks an engine over TCP (``remote/``, which also
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
    CallableOracle,
    CostOracle,
    FastCostOracle,
    Measurement,
    MeasurementError,
    SimulatorOracle,
    as_oracle,
    makespan_of,
    scaled_trace,
    spearman,
    trace_violations,
)

__all__ = [
    "measure",
    "make_oracle",
    "oracle_spec_kind",
    "ORACLE_SPECS",
    "Measurement",
    "MeasurementError",
    "CostOracle",
    "CallableOracle",
    "as_oracle",
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


ORACLE_SPECS = "'sim', 'local', HOST:PORT of a remote engine, or module:factory"
"""What :func:`make_oracle` accepts, for messages and help texts."""


def oracle_spec_kind(spec: str) -> str:
    """Which kind of oracle ``spec`` names: ``"sim"``, ``"local"``, ``"remote"`` (``HOST:PORT``, the port all digits) or
    ``"factory"`` (``module:factory``); a :class:`ValueError` naming the accepted forms otherwise."""
    if spec in ("sim", "local"):
        return spec
    head, colon, tail = str(spec).rpartition(":")
    if colon and head and tail.isdigit():
        return "remote"
    if colon and head and tail.isidentifier():
        return "factory"
    raise ValueError(f"unknown oracle {spec!r}; use {ORACLE_SPECS}")


def make_oracle(oracle: str | CostOracle = "sim", devices: int = 4, **options: Any) -> CostOracle:
    """The one oracle resolver: ``workbench train --oracle`` (Stage III) and ``workbench calibrate`` name oracles through it.

    ``oracle`` is ``"sim"``, ``"local"``, ``"HOST:PORT"`` of a remote engine, or ``"module:factory"`` (a callable taking
    ``devices=N`` and returning a :class:`CostOracle` or a function ``f(graph, assignment) -> seconds``); an oracle passes
    through. ``options`` go to the oracle's constructor.
    """
    if not isinstance(oracle, str):
        return oracle
    kind = oracle_spec_kind(oracle)
    if kind == "sim":
        return SimulatorOracle(devices, **options)
    if kind == "local":
        from .executor import LocalExecutor

        return LocalExecutor(devices, **options)
    if kind == "remote":
        from .remote import RemoteEngine

        return RemoteEngine.from_address(oracle, devices=devices, **options)
    from ..imports import import_object

    try:
        factory = import_object(oracle)
    except ValueError as exc:
        raise ValueError(f"oracle {oracle!r}: cannot import it ({exc})") from None
    try:
        return as_oracle(factory(devices=devices, **options), devices)
    except TypeError as exc:
        raise ValueError(f"oracle {oracle!r}: {exc}") from None


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
