"""Checking a trace against the execution model (:func:`validate`): the property the simulator and measured traces keep."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np

from ..cluster import Devices, as_cluster
from ..graph import DataflowGraph
from .assignment import check_assignment
from .trace import Trace

__all__ = ["validate"]


def validate(
    graph: DataflowGraph,
    assignment: Sequence[int] | np.ndarray,
    trace: Trace,
    devices: Devices = 4,
    makespan: float | None = None,
    tolerance: float = 0.0,
) -> list[str]:
    """Check a trace against the execution model; returns the violations (empty when valid).

    Checks: each op runs on its assigned device for its compute time; it
    starts no earlier than its ready time, which is when its last input
    arrived; cross-device inputs take at least their transfer time; a device
    runs one op at a time; no device idles while a ready op assigned to it
    waits; ``makespan`` (when given) is the last end time. ``tolerance`` allows for
    measured (real) traces.
    """
    cluster = as_cluster(devices)
    values = check_assignment(graph, assignment, cluster.num_devices)
    problems: list[str] = []
    tol = tolerance
    if not np.array_equal(trace.device, values):
        op = int(np.flatnonzero(trace.device != values)[0])
        problems.append(f"op {op} ran on device {trace.device[op]} but is assigned to {values[op]}")
    arrival = {}
    for k in range(trace.transfer_src_op.size):
        arrival[int(trace.transfer_src_op[k]), int(trace.transfer_dst_op[k])] = float(trace.transfer_end[k])
    for e in range(graph.num_edges):
        u, v = int(graph.src[e]), int(graph.dst[e])
        if values[u] == values[v]:
            arrives = trace.end[u]
        else:
            need = cluster.comm_time(float(graph.comm[e]), int(values[u]), int(values[v]))
            arrives = arrival.get((u, v))
            if arrives is None:
                problems.append(f"no transfer recorded for edge {u}->{v} across devices")
                continue
            if arrives < trace.end[u] + need - tol * max(1.0, need):
                problems.append(f"edge {u}->{v} arrived at {arrives} before {trace.end[u]} + transfer {need}")
        if trace.start[v] < arrives - tol * max(1.0, abs(arrives)):
            problems.append(f"op {v} started at {trace.start[v]} before its input from op {u} arrived at {arrives}")
        if trace.ready[v] < arrives - tol * max(1.0, abs(arrives)):
            problems.append(f"op {v} is ready at {trace.ready[v]} before its input from op {u} arrived at {arrives}")
    for v in range(graph.num_nodes):
        if trace.start[v] < trace.ready[v] - tol * max(1.0, abs(trace.ready[v])):
            problems.append(f"op {v} started at {trace.start[v]} before it was ready at {trace.ready[v]}")
        if tol == 0.0:
            duration = cluster.compute_time(float(graph.compute[v]), int(values[v]))
            if trace.end[v] - trace.start[v] != duration and not np.isclose(trace.end[v] - trace.start[v], duration, rtol=1e-12, atol=0):
                problems.append(f"op {v} ran {trace.end[v] - trace.start[v]} instead of its compute time {duration}")
    for d in range(cluster.num_devices):
        ops = np.flatnonzero(values == d)
        ops = ops[np.lexsort((trace.end[ops], trace.start[ops]))]
        for a, b in pairwise(ops):
            if trace.start[b] < trace.end[a] - tol * max(1.0, abs(trace.end[a])):
                problems.append(f"device {d} runs ops {a} and {b} at once ({trace.start[b]} < {trace.end[a]})")
        if tol == 0.0:
            for v in ops:
                if trace.start[v] > trace.ready[v]:
                    busy = sorted(
                        (trace.start[o], trace.end[o])
                        for o in ops
                        if o != v and trace.end[o] > trace.ready[v] and trace.start[o] < trace.start[v]
                    )
                    covered = trace.ready[v]
                    for s, e in busy:
                        if s > covered:
                            break
                        covered = max(covered, e)
                    if covered < trace.start[v]:
                        problems.append(
                            f"device {d} idles at {covered} while op {v} (ready at {trace.ready[v]}) waits until {trace.start[v]}"
                        )
    if makespan is not None and makespan != trace.makespan:
        problems.append(f"the makespan {makespan} is not the last end time {trace.makespan}")
    return problems
