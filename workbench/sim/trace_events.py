"""A :class:`~workbench.sim.trace.Trace` as Chrome/Perfetto trace-event JSON (opens in ui.perfetto.dev and chrome://tracing).

Format: the Trace Event Format (Google, "Trace Event Format" document, the
JSON Object form): ``{"traceEvents": [...], "displayTimeUnit": "ms"}``.
Process 0 holds one thread per device, each op a complete event
(``"ph": "X"``) on its device's thread. Process 1 holds the transfers, one
complete event each, on a thread per link ``a → b`` (with extra lanes where
transfers on one link overlap, since slices on one thread must nest).
A flow (``"ph": "s"`` on the transfer, ``"ph": "f"`` on its consumer op, one
``id`` per transfer; both bound to the enclosing slice at their slice's midpoint)
draws an arrow from each transfer to the op that waits for it.
Metadata events (``"ph": "M"``) name the processes and threads. Counter
events (``"ph": "C"``) draw each device's utilisation as a track of its own
(``device d busy``: how many ops run on it, 0 or 1 in the simulator, one
event wherever that changes). Every event has ``name``, ``ph``, ``ts``, ``pid``
and ``tid``. ``ts`` and ``dur`` are microseconds: a trace time ``t`` becomes
``t * microseconds_per_unit``; :func:`trace_time_scale` takes it from the
graph's ``time_unit`` (``s``: 1e6, ``ms``: 1e3; the paper's units: 1e-10, so
that a reading in µs is the ÷1e10 figure the paper and ``docs/results.md``
report; any other unit: 1).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..graph import DataflowGraph
from .trace import Trace

__all__ = ["to_trace_events", "trace_events_json", "busy_steps", "trace_time_scale", "TIME_UNITS", "TRANSFER_PID", "DEVICE_PID"]

DEVICE_PID = 0
TRANSFER_PID = 1

TIME_UNITS = {"s": 1e6, "ms": 1e3, "us": 1.0, "µs": 1.0, "ns": 1e-3}
"""Microseconds per graph time unit, by the ``time_unit`` a graph's metadata names."""
PAPER_MICROSECONDS_PER_UNIT = 1e-10
"""The DOPPLER paper's raw units: one µs per 1e10, so the trace reads as the ÷1e10 figures the paper reports."""


def trace_time_scale(graph: DataflowGraph) -> float:
    """The trace-event time scale of ``graph``'s unit: :data:`TIME_UNITS` by its ``time_unit``, the paper's files and
    paper-cost graphs 1e-10, any other unit (``arbitrary``, none) 1 unit per µs."""
    unit = str(graph.metadata.get("time_unit") or "")
    if graph.metadata.get("format") == "doppler-paper" or unit.startswith("paper"):
        return PAPER_MICROSECONDS_PER_UNIT
    return TIME_UNITS.get(unit, 1.0)


def _lanes(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """A lane per interval such that intervals in one lane never overlap (greedy by start time)."""
    lanes = np.zeros(starts.size, dtype=np.int64)
    free_at: list[float] = []
    for k in np.argsort(starts, kind="stable"):
        for lane, end in enumerate(free_at):
            if end <= starts[k]:
                free_at[lane] = float(ends[k])
                lanes[k] = lane
                break
        else:
            lanes[k] = len(free_at)
            free_at.append(float(ends[k]))
    return lanes


def busy_steps(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(times, running)``: how many of the intervals run from each time on, at 0 and wherever that count changes."""
    times = np.concatenate([[0.0], starts, ends]).astype(float)
    steps = np.concatenate([[0], np.ones(starts.size, np.int64), -np.ones(ends.size, np.int64)])
    order = np.lexsort((steps, times))  # at one instant, ends before starts: back-to-back ops keep the count at 1
    times, running = times[order], np.cumsum(steps[order])
    last = np.r_[times[1:] != times[:-1], True]  # the count after every change at one instant
    times, running = times[last], running[last]
    keep = np.r_[True, running[1:] != running[:-1]]
    return times[keep], running[keep]


def to_trace_events(
    trace: Trace, names: Sequence[str] | None = None, title: str = "workbench trace", microseconds_per_unit: float = 1.0
) -> dict[str, Any]:
    """The trace as a trace-event JSON object: one ``X`` slice per op and per transfer, a ``C`` counter track per device, ``M`` names."""
    if not microseconds_per_unit > 0:
        raise ValueError(f"microseconds_per_unit must be positive, got {microseconds_per_unit}")
    names = list(names) if names is not None else list(trace.op_names) if trace.op_names else [f"op{i}" for i in range(trace.num_ops)]
    if len(names) != trace.num_ops:
        raise ValueError(f"{len(names)} names for {trace.num_ops} ops")
    scale = float(microseconds_per_unit)
    devices = int(trace.device.max()) + 1 if trace.num_ops else 0
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": DEVICE_PID, "tid": 0, "ts": 0, "args": {"name": title}},
        {"ph": "M", "name": "process_name", "pid": TRANSFER_PID, "tid": 0, "ts": 0, "args": {"name": "transfers"}},
    ]
    events += [
        {"ph": "M", "name": "thread_name", "pid": DEVICE_PID, "tid": d, "ts": 0, "args": {"name": f"device {d}"}} for d in range(devices)
    ]
    for op in range(trace.num_ops):
        ts, end = float(trace.start[op]) * scale, float(trace.end[op]) * scale
        events.append(
            {
                "ph": "X",
                "cat": "op",
                "name": names[op],
                "pid": DEVICE_PID,
                "tid": int(trace.device[op]),
                "ts": ts,
                "dur": end - ts,
                "args": {"op": op, "ready": float(trace.ready[op]) * scale},
            }
        )
    for d in range(devices):
        mine = np.asarray(trace.device) == d
        times, running = busy_steps(np.asarray(trace.start, float)[mine], np.asarray(trace.end, float)[mine])
        events += [
            {"ph": "C", "name": f"device {d} busy", "pid": DEVICE_PID, "tid": d, "ts": t * scale, "args": {"ops running": int(n)}}
            for t, n in zip(times.tolist(), running.tolist(), strict=True)
        ]
    src, dst = trace.transfer_src_device.astype(np.int64), trace.transfer_dst_device.astype(np.int64)
    threads: dict[tuple[int, int, int], int] = {}
    for a, b in sorted(set(zip(src.tolist(), dst.tolist(), strict=False))):
        on_link = np.flatnonzero((src == a) & (dst == b))
        for k, lane in zip(on_link, _lanes(trace.transfer_start[on_link], trace.transfer_end[on_link]), strict=False):
            key = (a, b, int(lane))
            if key not in threads:
                threads[key] = len(threads)
                lane_name = f" (lane {lane + 1})" if lane else ""
                events.append(
                    {
                        "ph": "M",
                        "name": "thread_name",
                        "pid": TRANSFER_PID,
                        "tid": threads[key],
                        "ts": 0,
                        "args": {"name": f"device {a} → device {b}{lane_name}"},
                    }
                )
            u, v = int(trace.transfer_src_op[k]), int(trace.transfer_dst_op[k])
            ts, end = float(trace.transfer_start[k]) * scale, float(trace.transfer_end[k]) * scale
            events.append(
                {
                    "ph": "X",
                    "cat": "transfer",
                    "name": f"{names[u]} → {names[v]}",
                    "pid": TRANSFER_PID,
                    "tid": threads[key],
                    "ts": ts,
                    "dur": end - ts,
                    "args": {"src_op": u, "dst_op": v, "src_device": a, "dst_device": b},
                }
            )
            events += _flow(
                int(k), (TRANSFER_PID, threads[key], ts, end), (DEVICE_PID, b, float(trace.start[v]) * scale, float(trace.end[v]) * scale)
            )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"title": title, "makespan": trace.makespan, "microseconds_per_unit": scale},
    }


def _flow(flow_id: int, source: tuple[int, int, float, float], target: tuple[int, int, float, float]) -> list[dict[str, Any]]:
    """A flow arrow from the slice ``source`` to the slice ``target`` (each ``(pid, tid, start, end)`` in µs): its
    start (``s``) and finish (``f``) events, each at its slice's midpoint and bound to that enclosing slice."""
    (src_pid, src_tid, src_start, src_end), (dst_pid, dst_tid, dst_start, dst_end) = source, target
    common = {"cat": "transfer", "name": "transfer", "id": flow_id}
    return [
        {"ph": "s", **common, "pid": src_pid, "tid": src_tid, "ts": (src_start + src_end) / 2},
        {"ph": "f", "bp": "e", **common, "pid": dst_pid, "tid": dst_tid, "ts": (dst_start + dst_end) / 2},
    ]


def trace_events_json(
    trace: Trace, names: Sequence[str] | None = None, title: str = "workbench trace", microseconds_per_unit: float = 1.0
) -> str:
    """:func:`to_trace_events` as JSON text."""
    return json.dumps(to_trace_events(trace, names, title, microseconds_per_unit))
