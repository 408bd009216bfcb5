"""The simulator's front: :func:`simulate` (one assignment, a trace), :class:`Evaluator` (many, makespans only) and
:func:`simulate_many`, over the two engines (``fast``, compiled; ``simpy``, the reference)."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ..cluster import Cluster, Devices, as_cluster
from ..graph import DataflowGraph
from .assignment import AssignmentError, check_assignment, device_ids
from .trace import SimResult, Trace

__all__ = ["ENGINES", "PRIORITIES", "Priority", "simulate", "Evaluator", "simulate_many"]

ENGINES = ("fast", "simpy")
PRIORITIES = ("fifo", "blevel", "given")
Priority = str | Sequence[int] | np.ndarray


def _priority_keys(graph: DataflowGraph, priority: Priority) -> tuple[str, np.ndarray | None]:
    """The mode name and per-op keys (smaller runs first); ``None`` keys mean FIFO."""
    if isinstance(priority, str):
        if priority == "fifo":
            return "fifo", None
        if priority == "blevel":
            return "blevel", -graph.bottom_level(with_comm=True)
        if priority == "given":
            raise AssignmentError("priority 'given' needs the op order itself: pass priority=[op, op, ...]")
        raise AssignmentError(f"unknown priority {priority!r}; use one of {', '.join(PRIORITIES)} (given = a list of ops)")
    order = np.asarray(priority)
    n = graph.num_nodes
    if order.ndim != 1 or order.size != n or not np.issubdtype(order.dtype, np.integer):
        raise AssignmentError(f"a priority order must list each of the {n} ops once, as integers")
    if not np.array_equal(np.sort(order), np.arange(n)):
        missing = np.setdiff1d(np.arange(n), order)
        detail = f"op {missing[0]} is missing" if missing.size else "it repeats an op"
        raise AssignmentError(f"the priority order is not a permutation of 0..{n - 1}: {detail}")
    keys = np.empty(n)
    keys[order] = np.arange(n, dtype=float)
    return "given", keys


class _Compiled(NamedTuple):
    """A graph's arrays in the order the fast engine's kernels take them."""

    compute: np.ndarray
    out_ptr: np.ndarray
    out_edge: np.ndarray
    edge_dst: np.ndarray
    edge_comm: np.ndarray
    in_degree: np.ndarray


_compiled: weakref.WeakKeyDictionary[DataflowGraph, _Compiled] = weakref.WeakKeyDictionary()


def _compile(graph: DataflowGraph) -> _Compiled:
    if graph not in _compiled:
        ptr, _, out_edge = graph.succ_csr
        _compiled[graph] = _Compiled(
            compute=np.ascontiguousarray(graph.compute),
            out_ptr=np.ascontiguousarray(ptr),
            out_edge=np.ascontiguousarray(out_edge),
            edge_dst=np.ascontiguousarray(graph.dst),
            edge_comm=np.ascontiguousarray(graph.comm),
            in_degree=np.ascontiguousarray(graph.in_degree),
        )
    return _compiled[graph]


@lru_cache(maxsize=64)
def _cluster_arrays(cluster: Cluster) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.asarray(cluster.speeds), np.asarray(cluster.bandwidth), np.asarray(cluster.latency)


def _check_engine(engine: str, cluster: Cluster) -> None:
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; use one of {', '.join(ENGINES)}")
    if engine == "fast" and cluster.contention:
        raise ValueError("the fast engine does not model link contention; use engine='simpy'")


def _transfers(
    graph: DataflowGraph, assignment: np.ndarray, cluster: Cluster, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cross-device transfers: each starts when its producer ends (no contention)."""
    a, b = assignment[graph.src], assignment[graph.dst]
    cross = np.flatnonzero(a != b)
    starts = end[graph.src[cross]]
    _, bw, lat = _cluster_arrays(cluster)
    ends = starts + (graph.comm[cross] / bw[a[cross], b[cross]] + lat[a[cross], b[cross]])
    return cross, starts, ends


def simulate(
    graph: DataflowGraph,
    assignment: Sequence[int] | np.ndarray,
    devices: Devices = 4,
    engine: str = "fast",
    priority: Priority = "fifo",
) -> SimResult:
    """Simulate ``assignment`` (device per op) of ``graph`` on ``devices``.

    Args:
        graph: the dataflow graph.
        assignment: device id of each op.
        devices: the number of identical devices, or a :class:`~workbench.Cluster`.
        engine: ``"fast"`` (compiled) or ``"simpy"`` (the reference).
        priority: ``"fifo"`` (the paper), ``"blevel"`` (longest remaining path
            first) or a list of all ops, highest priority first (for example
            the order in which a policy selected them).
    """
    cluster = as_cluster(devices)
    _check_engine(engine, cluster)
    values = check_assignment(graph, assignment, cluster.num_devices)
    mode, keys = _priority_keys(graph, priority)
    n = graph.num_nodes
    if engine == "fast":
        from .fast import simulate_one

        c = _compile(graph)
        ready, start, end = np.zeros(n), np.zeros(n), np.zeros(n)
        speeds, bw, lat = _cluster_arrays(cluster)
        simulate_one(*c, np.zeros(n) if keys is None else keys, speeds, bw, lat, values, ready, start, end)
        cross, t_start, t_end = _transfers(graph, values, cluster, end)
    else:
        from .reference import simulate_reference

        _, arrays = simulate_reference(graph, values, cluster, keys)
        ready, start, end = arrays["ready"], arrays["start"], arrays["end"]
        cross = np.flatnonzero(values[graph.src] != values[graph.dst])
        t_start, t_end = arrays["transfer_start"][cross], arrays["transfer_end"][cross]
    trace = Trace(
        device=values,
        ready=ready,
        start=start,
        end=end,
        transfer_src_op=graph.src[cross],
        transfer_dst_op=graph.dst[cross],
        transfer_src_device=values[graph.src[cross]],
        transfer_dst_device=values[graph.dst[cross]],
        transfer_start=np.asarray(t_start, dtype=float),
        transfer_end=np.asarray(t_end, dtype=float),
        op_names=graph.names,
    )
    return SimResult(makespan=trace.makespan, trace=trace, engine=engine, devices=cluster.num_devices, priority=mode)


class Evaluator:
    """Makespans of many assignments of one graph, with the per-graph setup done once.

    ``Evaluator(graph, devices)(assignments)`` takes one assignment or a 2-D
    array (one per row) and returns their makespans (fast engine).
    """

    def __init__(self, graph: DataflowGraph, devices: Devices = 4, priority: Priority = "fifo") -> None:
        self.graph = graph
        self.cluster = as_cluster(devices)
        _check_engine("fast", self.cluster)
        self.devices = self.cluster.num_devices
        self.priority, keys = _priority_keys(graph, priority)
        self._keys = np.zeros(graph.num_nodes) if keys is None else keys
        self._compiled = _compile(graph)
        self._cluster = _cluster_arrays(self.cluster)
        self.evaluations = 0

    def __call__(self, assignments: Sequence[Sequence[int]] | Sequence[int] | np.ndarray) -> np.ndarray | float:
        from .fast import simulate_batch

        given = np.asarray(assignments)
        single = given.ndim == 1
        batch = self._checked(given)
        out = simulate_batch((*self._compiled, self._keys, *self._cluster), batch)
        self.evaluations += batch.shape[0]
        return float(out[0]) if single else out

    @property
    def kernel_arrays(self) -> tuple[np.ndarray, ...]:
        """The graph's and cluster's arrays in the order :func:`~workbench.sim.fast.simulate_one` takes them (before the
        assignment), for a compiled caller that simulates without the checks of ``__call__``."""
        return (*self._compiled, self._keys, *self._cluster)

    def _checked(self, assignments: Sequence[Sequence[int]] | Sequence[int] | np.ndarray) -> np.ndarray:
        """``assignments`` as a contiguous 2-D array of device ids, or an error naming what is wrong."""
        batch = np.atleast_2d(np.asarray(assignments))
        if batch.shape[1] != self.graph.num_nodes:
            raise AssignmentError(f"assignments have {batch.shape[1]} entries but the graph has {self.graph.num_nodes} ops")
        batch = device_ids(batch)
        if batch.size and (batch.min() < 0 or batch.max() >= self.devices):
            raise AssignmentError(f"device ids must be in 0..{self.devices - 1}")
        return np.ascontiguousarray(batch, dtype=np.int64)

    def times(self, assignments: Sequence[Sequence[int]] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each op's ready and end times (rows as ``assignments``, columns as ops) of a 2-D array of assignments;
        counted as evaluations like ``__call__``."""
        from .fast import simulate_one

        batch = self._checked(assignments)
        self.evaluations += batch.shape[0]
        ready, end = np.zeros(batch.shape, dtype=float), np.zeros(batch.shape, dtype=float)
        start = np.zeros(self.graph.num_nodes)
        for row, assignment in enumerate(batch):
            simulate_one(*self._compiled, self._keys, *self._cluster, assignment, ready[row], start, end[row])
        return ready, end


def simulate_many(
    graph: DataflowGraph, assignments: Sequence[Sequence[int]] | np.ndarray, devices: Devices = 4, priority: Priority = "fifo"
) -> np.ndarray:
    """Makespans of a list or 2-D array of assignments (fast engine)."""
    return np.atleast_1d(Evaluator(graph, devices, priority)(np.atleast_2d(np.asarray(assignments))))
