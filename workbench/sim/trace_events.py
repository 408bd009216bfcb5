"""A :class:`~workbench.sim.trace.Trace` as Chrome/Perfetto trace-event JSON (opens in ui.perfetto.dev and chrome://tracing).

Format: the Trace Event Format (Google, "Trace Event Format" document, the
JSON Object form): ``{"traceEvents": [...], "displayTimeUnit": "ms"}``.
Process 0 holds one thread per device, each op a complete event
(``"ph": "X"``) on its device's thread. Process 1 holds the transfers, one
complete event each, on a thread per link ``a → b`` (with extra lanes where
transfers on one link overlap, since slices on one thread must nest).
Metadata events (``"ph": "M"``) name the processes and threads. Counter
events (``"ph": "C"``) draw each device's utilisation as a track of its own
(``device d busy``: how many ops run on it, 0 or 1 in the simulator, one
event wherever that changes). ``ts`` and ``dur`` are microseconds: a trace
time ``t`` becomes ``t * microseconds_per_unit``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from .trace import Trace

__all__ = ["to_trace_events", "trace_events_json", "busy_steps", "TRANSFER_PID", "DEVICE_PID"]

DEVICE_PID = 0
TRANSFER_PID = 1


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
        {"ph": "M", "name": "process_name", "pid": DEVICE_PID, "tid": 0, "args": {"name": title}},
        {"ph": "M", "name": "process_name", "pid": TRANSFER_PID, "tid": 0, "args": {"name": "transfers"}},
    ]
    events += [{"ph": "M", "name": "thread_name", "pid": DEVICE_PID, "tid": d, "args": {"name": f"device {d}"}} for d in range(devices)]
    for op in range(trace.num_ops):
        start, end = float(trace.start[op]), float(trace.end[op])
        events.append(
            {
                "ph": "X",
                "cat": "op",
                "name": names[op],
                "pid": DEVICE_PID,
                "tid": int(trace.device[op]),
                "ts": start * scale,
                "dur": (end - start) * scale,
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
                        "args": {"name": f"device {a} → device {b}{lane_name}"},
                    }
                )
            u, v = int(trace.transfer_src_op[k]), int(trace.transfer_dst_op[k])
            start, end = float(trace.transfer_start[k]), float(trace.transfer_end[k])
            events.append(
                {
                    "ph": "X",
                    "cat": "transfer",
                    "name": f"{names[u]} → {names[v]}",
                    "pid": TRANSFER_PID,
                    "tid": threads[key],
                    "ts": start * scale,
                    "dur": (end - start) * scale,
                    "args": {"src_op": u, "dst_op": v, "src_device": a, "dst_device": b},
                }
            )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"title": title, "makespan": trace.makespan, "microseconds_per_unit": scale},
    }


def trace_events_json(
    trace: Trace, names: Sequence[str] | None = None, title: str = "workbench trace", microseconds_per_unit: float = 1.0
) -> str:
    """:func:`to_trace_events` as JSON text."""
    return json.dumps(to_trace_events(trace, names, title, microseconds_per_unit))
