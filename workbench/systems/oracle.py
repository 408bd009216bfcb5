"""The cost-oracle interface and the simulator behind it.

A cost oracle answers one question: how long does this placement of this
graph take? :class:`CostOracle` is the one definition of that contract:
``oracle.measure(graph, assignment, repeats, timeout, trace)`` returns a
:class:`Measurement` whose headline is ``seconds`` (the median of the repeated
runs); an oracle may also offer a trace-free ``makespan``
(:class:`FastCostOracle`). The simulator (:class:`SimulatorOracle`), the
local executor (:class:`~workbench.systems.executor.LocalExecutor`) and the
remote-engine adapter (:class:`~workbench.systems.remote.RemoteEngine`) all
implement it, so training and calibration never special-case one of them.

Errors come in two kinds. A bad request (an assignment that does not fit the
graph or the devices) raises :class:`~workbench.sim.AssignmentError` at once.
A run that fails (an op raised, a worker died, the timeout passed, the engine
is unreachable) returns a Measurement with ``ok == False``, ``seconds`` NaN and
the reasons in ``errors``: never a hang and never a silent zero (``float()``
of a failed Measurement raises :class:`MeasurementError`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..cluster import Cluster, Devices, as_cluster
from ..graph import DataflowGraph
from ..sim import Evaluator, Priority, check_assignment, simulate
from ..sim.trace import Trace

__all__ = [
    "Measurement", "MeasurementError", "CostOracle", "FastCostOracle", "makespan_of", "SimulatorOracle", "scaled_trace",
    "trace_violations", "spearman", "CallableOracle", "as_oracle",
]  # fmt: skip


class MeasurementError(RuntimeError):
    """A failed measurement used as a number; ``.measurement`` holds it, the message its errors."""

    def __init__(self, measurement: Measurement) -> None:
        super().__init__(f"{measurement.oracle or 'oracle'} measurement failed: {'; '.join(measurement.errors)}")
        self.measurement = measurement


@dataclass(frozen=True)
class Measurement:
    """What an oracle measured for one placement.

    Attributes:
        seconds: median makespan over the successful repeats, in seconds; NaN
            when the measurement failed.
        samples: the makespan of every successful repeat, in seconds.
        errors: why runs failed (empty when the measurement succeeded).
        trace: the trace of the median run (times in seconds from its start),
            when the oracle records one.
        oracle: which oracle measured (``"sim"``, ``"local"``, ``"remote HOST:PORT"``).
        details: oracle-specific facts (time scale, devices, warm-up runs, ...).
    """

    seconds: float
    samples: tuple[float, ...] = ()
    errors: tuple[str, ...] = ()
    trace: Trace | None = None
    oracle: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when every run succeeded and ``seconds`` is a real number."""
        return not self.errors and math.isfinite(self.seconds)

    @property
    def error(self) -> str | None:
        """The first error, or ``None``."""
        return self.errors[0] if self.errors else None

    def __float__(self) -> float:
        """``seconds``, so ``float(oracle.measure(...))`` is a reward; raises :class:`MeasurementError` when it failed."""
        if not self.ok:
            raise MeasurementError(self)
        return self.seconds

    @classmethod
    def from_samples(cls, samples: Sequence[float], traces: Sequence[Trace | None] = (), **fields: Any) -> Measurement:
        """The median of ``samples`` with the trace of the median run (NaN when there are errors or no samples)."""
        values = tuple(float(s) for s in samples)
        errors = tuple(fields.pop("errors", ()))
        if errors or not values:
            return cls(seconds=math.nan, samples=values, errors=errors or ("no successful run",), **fields)
        median = float(np.median(values))
        trace = None
        if traces:
            closest = int(np.argmin(np.abs(np.asarray(values) - median)))
            trace = traces[closest]
        return cls(seconds=median, samples=values, trace=trace, **fields)

    @classmethod
    def failed(cls, error: str, **fields: Any) -> Measurement:
        return cls(seconds=math.nan, errors=(error,), **fields)

    def to_dict(self, with_trace: bool = True) -> dict[str, Any]:
        return {
            "seconds": None if math.isnan(self.seconds) else self.seconds,
            "samples": list(self.samples),
            "errors": list(self.errors),
            "oracle": self.oracle,
            "details": dict(self.details),
            "trace": self.trace.to_dict() if (with_trace and self.trace is not None) else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Measurement:
        seconds = data.get("seconds")
        return cls(
            seconds=math.nan if seconds is None else float(seconds),
            samples=tuple(float(s) for s in data.get("samples") or ()),
            errors=tuple(str(e) for e in data.get("errors") or ()),
            trace=Trace.from_dict(data["trace"]) if data.get("trace") else None,
            oracle=str(data.get("oracle", "")),
            details=dict(data.get("details") or {}),
        )


@runtime_checkable
class CostOracle(Protocol):
    """The one cost-oracle contract (``docs/contracts.md``, "Cost oracle"): how long does this placement take?

    Implemented by :class:`SimulatorOracle`, the local executor and the remote
    engine; training, calibration, the engine server and the dashboard accept
    any object that has these members.
    """

    @property
    def devices(self) -> Devices:
        """The devices an assignment may use (a count, or a :class:`~workbench.Cluster` for the simulator)."""
        ...

    def measure(
        self, graph: DataflowGraph, assignment: Sequence[int] | np.ndarray, repeats: int = 3, timeout: float = 60.0, trace: bool = False
    ) -> Measurement:
        """Run ``assignment`` of ``graph`` ``repeats`` times within ``timeout`` seconds.

        Raises :class:`~workbench.sim.AssignmentError` for an assignment that
        does not fit; returns a failed Measurement (``ok`` False) for a run
        that fails. ``trace=True`` asks for the trace of the median run in
        ``Measurement.trace``; an oracle that always records one may return
        it without being asked.
        """
        ...


@runtime_checkable
class FastCostOracle(CostOracle, Protocol):
    """A cost oracle that also answers ``makespan(graph, assignment) -> seconds`` without building a trace.

    Optional: training's many episodes use it when an oracle has it
    (:func:`makespan_of`); the simulator does.
    """

    def makespan(self, graph: DataflowGraph, assignment: Sequence[int] | np.ndarray) -> float:
        """``measure(graph, assignment).seconds``, faster."""
        ...


def makespan_of(oracle: CostOracle, graph: DataflowGraph, assignment: Sequence[int] | np.ndarray) -> float:
    """The makespan of one placement in seconds: ``oracle.makespan`` for a :class:`FastCostOracle`, else ``float(oracle.measure(...))``.

    A failed measurement raises :class:`MeasurementError` (never a NaN reward).
    """
    if isinstance(oracle, FastCostOracle):
        return float(oracle.makespan(graph, assignment))
    return float(oracle.measure(graph, assignment))


def scaled_trace(trace: Trace, factor: float) -> Trace:
    """``trace`` with every time multiplied by ``factor`` (graph units to seconds, say)."""
    return replace(
        trace,
        ready=trace.ready * factor,
        start=trace.start * factor,
        end=trace.end * factor,
        transfer_start=trace.transfer_start * factor,
        transfer_end=trace.transfer_end * factor,
    )


@dataclass(frozen=True)
class SimulatorOracle:
    """The simulator as a cost oracle: graph units become seconds.

    The simulator runs the graph with ``op_overhead / time_scale`` added to
    every compute cost, on ``devices`` (identical devices or a
    :class:`~workbench.Cluster`), and multiplies the makespan and the trace
    by ``time_scale``. Deterministic: one sample, whatever ``repeats`` says.

    Attributes:
        devices: number of identical devices, or a Cluster (speeds, links).
        time_scale: seconds per graph unit.
        op_overhead: seconds added to every op (the fixed cost of running one
            op on a real system; fitted by calibration).
        priority: the simulator's device-queue order.
    """

    devices: Devices = 4
    time_scale: float = 1.0
    op_overhead: float = 0.0
    priority: Priority = "fifo"
    _evaluators: dict[int, tuple[DataflowGraph, Evaluator]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.time_scale) and self.time_scale > 0):
            raise ValueError(f"time_scale must be a finite number > 0, got {self.time_scale!r}")
        if not (math.isfinite(self.op_overhead) and self.op_overhead >= 0):
            raise ValueError(f"op_overhead must be a finite number >= 0, got {self.op_overhead!r}")

    @property
    def cluster(self) -> Cluster:
        return as_cluster(self.devices)

    def effective_graph(self, graph: DataflowGraph) -> DataflowGraph:
        """``graph`` with the per-op overhead added to its compute costs (in graph units)."""
        if self.op_overhead == 0:
            return graph
        return DataflowGraph(
            graph.compute + self.op_overhead / self.time_scale,
            graph.src,
            graph.dst,
            graph.comm,
            graph.names,
            graph.op_types,
            graph.metadata,
        )

    def measure(
        self, graph: DataflowGraph, assignment: Sequence[int] | np.ndarray, repeats: int = 1, timeout: float = 60.0, trace: bool = True
    ) -> Measurement:
        """One simulation (deterministic, so ``repeats`` is moot); the trace always comes back."""
        cluster = self.cluster
        check_assignment(graph, assignment, cluster.num_devices)
        result = simulate(self.effective_graph(graph), assignment, cluster, priority=self.priority)
        return Measurement.from_samples(
            [result.makespan * self.time_scale],
            [scaled_trace(result.trace, self.time_scale)],
            oracle="sim",
            details={"time_scale": self.time_scale, "op_overhead": self.op_overhead, "cluster": cluster.to_dict()},
        )

    def makespan(self, graph: DataflowGraph, assignment: Sequence[int] | np.ndarray) -> float:
        """``measure(...).seconds`` without the trace: the fast engine with one cached evaluator per graph (training's many episodes)."""
        cluster = self.cluster
        if cluster.contention:
            return float(self.measure(graph, assignment))
        entry = self._evaluators.get(id(graph))
        if entry is None or entry[0] is not graph:
            entry = (graph, Evaluator(self.effective_graph(graph), cluster, self.priority))
            self._evaluators[id(graph)] = entry
        return float(entry[1](np.asarray(assignment, dtype=np.int64))) * self.time_scale

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster.to_dict(), "time_scale": self.time_scale, "op_overhead": self.op_overhead}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SimulatorOracle:
        return cls(Cluster.from_dict(data["cluster"]), float(data["time_scale"]), float(data.get("op_overhead", 0.0)))


def trace_violations(graph: DataflowGraph, assignment: Sequence[int] | np.ndarray, trace: Trace, slack: float = 1e-6) -> list[str]:
    """Check a measured trace: ops on their devices, inputs before starts, one op per device at a time.

    Unlike :func:`workbench.validate`, durations are whatever really happened;
    ``slack`` (seconds) absorbs clock granularity.
    """
    values = check_assignment(graph, assignment, int(trace.device.max(initial=0)) + 1)
    problems: list[str] = []
    if not np.array_equal(trace.device, values):
        op = int(np.flatnonzero(trace.device != values)[0])
        problems.append(f"op {op} ran on device {trace.device[op]} but is assigned to {values[op]}")
    bad = np.flatnonzero((trace.start < trace.ready - slack) | (trace.end < trace.start))
    for op in bad[:5]:
        problems.append(f"op {op}: ready {trace.ready[op]:.6g}, start {trace.start[op]:.6g}, end {trace.end[op]:.6g} out of order")
    arrival = {(int(u), int(v)): float(t) for u, v, t in zip(trace.transfer_src_op, trace.transfer_dst_op, trace.transfer_end, strict=True)}
    for k in range(trace.transfer_src_op.size):
        u = int(trace.transfer_src_op[k])
        if trace.transfer_start[k] < trace.end[u] - slack:
            problems.append(f"transfer {u}->{trace.transfer_dst_op[k]} started before op {u} ended")
    for u, v in zip(graph.src.tolist(), graph.dst.tolist(), strict=True):
        if values[u] == values[v]:
            arrives = trace.end[u]
        elif (u, v) in arrival:
            arrives = arrival[u, v]
        else:
            problems.append(f"no transfer recorded for edge {u}->{v} across devices")
            continue
        if trace.start[v] < arrives - slack:
            problems.append(f"op {v} started at {trace.start[v]:.6g} before its input from op {u} arrived at {arrives:.6g}")
    for d in np.unique(values):
        ops = np.flatnonzero(values == d)
        ops = ops[np.argsort(trace.start[ops], kind="stable")]
        overlap = np.flatnonzero(trace.start[ops[1:]] < trace.end[ops[:-1]] - slack)
        for k in overlap[:5]:
            problems.append(f"device {d} ran ops {ops[k]} and {ops[k + 1]} at once")
    return problems


def _ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    ranks = np.empty(values.size)
    ranks[order] = np.arange(values.size, dtype=float)
    for value in np.unique(values[np.r_[False, np.diff(values[order]) == 0] if values.size else []]):
        tied = values == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Spearman's rank correlation (ties get their average rank); NaN when undefined."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.size != b.size:
        raise ValueError(f"spearman needs equally long inputs, got {a.size} and {b.size}")
    if a.size < 2:
        return math.nan
    ra, rb = _ranks(a), _ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return math.nan
    return float(np.corrcoef(ra, rb)[0, 1])


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
