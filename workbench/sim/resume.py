"""Checkpoints of a simulation, to re-simulate an assignment that differs from a recorded one only from where it must.

The fast engine (:func:`~workbench.sim.fast.simulate_from`) can record its whole state at the start of some instants (the
event FIFO is empty there): the timed-event heap, each device's request queue and running op, the counters that order
new events, the makespan so far, the work each device has begun, and how far its log of delivered transfers
reached. An assignment ``proposal`` that differs from the recorded ``current`` only in some ops ``M`` has exactly the same
events before the first one that reads where an op of ``M`` runs: the ``FINISH`` of its earliest-ending predecessor
(``ALL_INPUTS`` at time 0 for an op without inputs). So its simulation may resume from the last checkpoint at or before
that time and give the same makespan, bit for bit, as a simulation from the start; :func:`resume_point` finds it.

A checkpoint set is a tuple of arrays (numba reads it as one argument), made by :func:`checkpoint_set`: per checkpoint a
row of floats (:data:`TIME`, :data:`MAKESPAN`, then the work each device has begun) and a row of integers (:data:`SEQUENCE`...,
then each device's running op and queue length); flat buffers holding the heaps and queues; the log of delivered
transfers (each one's consumer, in order); the recorded assignment's op ready, start and end times and each device's
total work; and a header (:data:`COUNT` of
checkpoints, -1 while nothing is recorded, and :data:`STEP`, the events between two checkpoints, 0 for a set that never
records).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["checkpoint_set", "checkpoints_for", "resume_point", "commit"]

TIME, MAKESPAN, GRANTED = range(3)  # float columns; GRANTED (the work each device began) is the first of one per device
SEQUENCE, REQUESTS, LOG_SIZE, HEAP_SIZE, HEAP_AT, QUEUE_AT, BUSY = range(7)  # integer columns; BUSY, then queue lengths
FLOATS, INTS, HEAP_TIME, HEAP_KEY, QUEUE_PRIO, QUEUE_KEY, LOG, READY, START, END, TOTAL, HEADER = range(12)  # the set's arrays
COUNT, STEP = range(2)  # header slots
CHECKPOINTS = 64  # about how many a simulation records
RESUME_FROM_EVENTS = 2_500  # below this many events (5 per op, 2 per edge) recording costs about what resuming saves


def checkpoints_for(num_nodes: int, num_edges: int) -> int:
    """How many checkpoints a search's simulations of this graph record: :data:`CHECKPOINTS`, or 0 for a small graph."""
    return CHECKPOINTS if 5 * num_nodes + 2 * num_edges >= RESUME_FROM_EVENTS else 0


@njit(cache=True)
def device_work(compute: np.ndarray, speed: np.ndarray, assignment: np.ndarray) -> np.ndarray:
    """Each device's total work under ``assignment``."""
    work = np.zeros(speed.size)
    for v in range(compute.size):
        work[assignment[v]] += compute[v] / speed[assignment[v]]
    return work


@njit(cache=True)
def checkpoint_set(num_nodes: int, num_edges: int, num_devices: int, checkpoints: int = CHECKPOINTS) -> tuple:
    """An empty set for simulations of a graph of this size on this many devices, recording about ``checkpoints`` of them
    per simulation (0: a set that never records; with no ops, a placeholder)."""
    rows = checkpoints + 2 if checkpoints else 0
    size = 2 * (num_nodes + num_edges) + 1024 if checkpoints else 0
    header = np.empty(2, dtype=np.int64)
    header[COUNT], header[STEP] = -1, (5 * num_nodes + 2 * num_edges) // checkpoints + 1 if checkpoints else 0
    return (
        np.zeros((rows, GRANTED + num_devices)),
        np.zeros((rows, BUSY + 2 * num_devices), dtype=np.int64),
        np.zeros(size),
        np.zeros(size, dtype=np.int64),
        np.zeros(size),
        np.zeros(size, dtype=np.int64),
        np.zeros(num_edges + 1, dtype=np.int64),
        np.zeros(num_nodes),
        np.zeros(num_nodes),
        np.zeros(num_nodes),
        np.zeros(num_devices),
        header,
    )


@njit(cache=True)
def _buffers_end(checkpoints: tuple, index: int) -> tuple:  # pragma: no cover - compiled
    """Where the heap and queue buffers of the checkpoints after ``index`` begin, and the log's length at ``index``."""
    if index < 0:
        return 0, 0, 0
    ints = checkpoints[INTS]
    num_dev = (ints.shape[1] - BUSY) // 2
    queued = ints[index, BUSY + num_dev :].sum()
    return ints[index, HEAP_AT] + ints[index, HEAP_SIZE], ints[index, QUEUE_AT] + queued, ints[index, LOG_SIZE]


@njit(cache=True)
def share(reference: tuple, checkpoints: tuple, index: int) -> None:  # pragma: no cover - compiled
    """Copy checkpoint ``index``'s rows from ``reference`` into ``checkpoints`` before a simulation resumed there records
    the ones after it (they continue its buffers)."""
    checkpoints[FLOATS][index] = reference[FLOATS][index]
    checkpoints[INTS][index] = reference[INTS][index]


@njit(cache=True)
def record(
    checkpoints: tuple,
    at: float,
    makespan: float,
    counters: tuple,
    granted: np.ndarray,
    busy: np.ndarray,
    heap: tuple,
    queues: tuple,
) -> None:  # pragma: no cover - compiled
    """Write the engine's state as the next checkpoint (the instant ``at`` not yet begun, ``granted`` the work each device
    has begun), unless the buffers are full. ``counters``: sequence, requests, log size;
    ``heap``: times, keys, size; ``queues``: priorities, keys, sizes, and each device's stride in them."""
    floats, ints, index = checkpoints[FLOATS], checkpoints[INTS], checkpoints[HEADER][COUNT]
    if index >= floats.shape[0]:
        return
    h_time, h_key, h_size = heap
    q_prio, q_key, q_size, stride = queues
    heap_at, queue_at, _ = _buffers_end(checkpoints, index - 1)
    if heap_at + h_size > checkpoints[HEAP_TIME].size or queue_at + q_size.sum() > checkpoints[QUEUE_PRIO].size:
        return
    num_dev = busy.size
    floats[index, TIME], floats[index, MAKESPAN] = at, makespan
    floats[index, GRANTED:] = granted
    ints[index, SEQUENCE], ints[index, REQUESTS], ints[index, LOG_SIZE] = counters
    ints[index, HEAP_SIZE], ints[index, HEAP_AT], ints[index, QUEUE_AT] = h_size, heap_at, queue_at
    ints[index, BUSY : BUSY + num_dev] = busy
    ints[index, BUSY + num_dev :] = q_size
    checkpoints[HEAP_TIME][heap_at : heap_at + h_size] = h_time[:h_size]
    checkpoints[HEAP_KEY][heap_at : heap_at + h_size] = h_key[:h_size]
    for d in range(num_dev):
        checkpoints[QUEUE_PRIO][queue_at : queue_at + q_size[d]] = q_prio[d * stride : d * stride + q_size[d]]
        checkpoints[QUEUE_KEY][queue_at : queue_at + q_size[d]] = q_key[d * stride : d * stride + q_size[d]]
        queue_at += q_size[d]
    checkpoints[HEADER][COUNT] = index + 1


@njit(cache=True)
def restore(
    checkpoints: tuple,
    index: int,
    remaining: np.ndarray,
    busy: np.ndarray,
    heap: tuple,
    queues: tuple,
) -> tuple:  # pragma: no cover - compiled
    """Put checkpoint ``index``'s state back into the engine's arrays (``remaining`` holds each op's input count on entry);
    returns the heap's size, the makespan so far and the counters (sequence, requests, log size)."""
    floats, ints, log = checkpoints[FLOATS], checkpoints[INTS], checkpoints[LOG]
    h_time, h_key = heap
    q_prio, q_key, q_size, stride = queues
    num_dev = busy.size
    for k in range(ints[index, LOG_SIZE]):
        remaining[log[k]] -= 1
    h_size, heap_at, queue_at = ints[index, HEAP_SIZE], ints[index, HEAP_AT], ints[index, QUEUE_AT]
    h_time[:h_size] = checkpoints[HEAP_TIME][heap_at : heap_at + h_size]
    h_key[:h_size] = checkpoints[HEAP_KEY][heap_at : heap_at + h_size]
    busy[:] = ints[index, BUSY : BUSY + num_dev]
    q_size[:] = ints[index, BUSY + num_dev :]
    for d in range(num_dev):
        q_prio[d * stride : d * stride + q_size[d]] = checkpoints[QUEUE_PRIO][queue_at : queue_at + q_size[d]]
        q_key[d * stride : d * stride + q_size[d]] = checkpoints[QUEUE_KEY][queue_at : queue_at + q_size[d]]
        queue_at += q_size[d]
    counters = (ints[index, SEQUENCE], ints[index, REQUESTS], ints[index, LOG_SIZE])
    return h_size, floats[index, MAKESPAN], counters


@njit(cache=True)
def resume_point(
    checkpoints: tuple,
    pred_ptr: np.ndarray,
    pred: np.ndarray,
    current: np.ndarray,
    proposal: np.ndarray,
    compute: np.ndarray,
    speed: np.ndarray,
    work: np.ndarray,
) -> int:  # pragma: no cover - compiled
    """The last checkpoint of ``checkpoints`` (recorded for ``current``) from which ``proposal`` may be simulated, -1 for
    the start; fills ``work`` with each device's work under ``proposal`` not yet started there."""
    n = current.size
    if checkpoints[HEADER][COUNT] < 0:
        work[:] = device_work(compute, speed, proposal)
        return -1
    end = checkpoints[END]
    work[:] = checkpoints[TOTAL]
    first_read = np.inf
    for v in range(n):
        if proposal[v] != current[v]:
            work[current[v]] -= compute[v] / speed[current[v]]
            work[proposal[v]] += compute[v] / speed[proposal[v]]
            if pred_ptr[v] == pred_ptr[v + 1]:
                first_read = -np.inf
            for k in range(pred_ptr[v], pred_ptr[v + 1]):
                first_read = min(first_read, end[pred[k]])
    index = int(np.searchsorted(checkpoints[FLOATS][: checkpoints[HEADER][COUNT], TIME], first_read, side="right")) - 1
    if index >= 0:
        work -= checkpoints[FLOATS][index, GRANTED:]
    return index


@njit(cache=True)
def commit(checkpoints: tuple, scratch: tuple, index: int) -> None:  # pragma: no cover - compiled
    """Make ``checkpoints`` those of the assignment last simulated into ``scratch`` from its checkpoint ``index`` (-1: from
    the start): the checkpoints and op times up to there are shared, the rest are copied. Nothing for a set that never
    records."""
    if checkpoints[HEADER][STEP] == 0:
        return
    count = scratch[HEADER][COUNT]
    heap_from, queue_from, log_from = _buffers_end(checkpoints, index)
    heap_to, queue_to, log_to = _buffers_end(scratch, count - 1)
    checkpoints[FLOATS][index + 1 : count] = scratch[FLOATS][index + 1 : count]
    checkpoints[INTS][index + 1 : count] = scratch[INTS][index + 1 : count]
    checkpoints[HEAP_TIME][heap_from:heap_to] = scratch[HEAP_TIME][heap_from:heap_to]
    checkpoints[HEAP_KEY][heap_from:heap_to] = scratch[HEAP_KEY][heap_from:heap_to]
    checkpoints[QUEUE_PRIO][queue_from:queue_to] = scratch[QUEUE_PRIO][queue_from:queue_to]
    checkpoints[QUEUE_KEY][queue_from:queue_to] = scratch[QUEUE_KEY][queue_from:queue_to]
    checkpoints[LOG][log_from:log_to] = scratch[LOG][log_from:log_to]
    checkpoints[TOTAL][:] = scratch[TOTAL]
    since = checkpoints[FLOATS][index, TIME] if index >= 0 and checkpoints[HEADER][COUNT] >= 0 else -np.inf
    _merge(checkpoints[READY], scratch[READY], since)  # an op time at or after the checkpoint was simulated again
    _merge(checkpoints[START], scratch[START], since)
    _merge(checkpoints[END], scratch[END], since)
    checkpoints[HEADER][COUNT] = count


@njit(cache=True)
def _merge(times: np.ndarray, new_times: np.ndarray, since: float) -> None:  # pragma: no cover - compiled
    for v in range(times.size):
        if times[v] >= since:
            times[v] = new_times[v]
