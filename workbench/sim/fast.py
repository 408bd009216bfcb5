"""The fast engine: the paper's event order, compiled with numba.

It replays exactly the events the reference SimPy engine processes, in the
same order, without the generators: delayed events sit in a binary heap keyed
by ``(time, scheduling order)``, and the zero-delay cascade at one instant is
a FIFO queue, because SimPy gives every newly scheduled event a larger id than
every event already scheduled (see ``datasets/doppler-paper/README.md``).

Event chain per op ``v`` on device ``d`` (each step schedules the next):
``ALL_INPUTS(v)`` → request ``d`` → ``GRANT(v)`` → ``COMPUTE_END(v)`` →
``RELEASE(d)`` and ``FINISH(v)`` → per out-edge ``TRANSFER_END(e)`` →
``TRANSFER_DONE(e)`` → ``ALL_INPUTS`` of the consumer once all its inputs are done.
Each device keeps a queue of waiting ops ordered by ``(priority, request
order)``; with every priority equal this is first come, first served.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import resume

ALL_INPUTS, GRANT, COMPUTE_END, RELEASE, FINISH, TRANSFER_END, TRANSFER_DONE = range(7)
_SHIFT = 8


_LOW32 = (1 << 32) - 1
# A heap entry's second key is (sequence << 32) | payload: one word moved per sift, the same order, as long as sequences
# and payloads stay below 2**31 and 2**32 (graph.MAX_NODES and MAX_EDGES keep them below 2**26).


@njit(cache=True, inline="always")
def _less(k1a: float, k2a: int, k1b: float, k2b: int) -> bool:
    return k1a < k1b or (k1a == k1b and k2a < k2b)


@njit(cache=True)
def _push(key1: np.ndarray, key2: np.ndarray, base: int, size: int, k1: float, k2: int) -> int:
    """Push onto the binary heap stored in ``[base, base + size)``; returns the new size."""
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if _less(k1, k2, key1[base + parent], key2[base + parent]):
            key1[base + i] = key1[base + parent]
            key2[base + i] = key2[base + parent]
            i = parent
        else:
            break
    key1[base + i] = k1
    key2[base + i] = k2
    return size + 1


@njit(cache=True)
def _pop(key1: np.ndarray, key2: np.ndarray, base: int, size: int) -> int:
    """Remove the heap's minimum (at ``base``); returns the new size."""
    size -= 1
    k1 = key1[base + size]
    k2 = key2[base + size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and _less(key1[base + child + 1], key2[base + child + 1], key1[base + child], key2[base + child]):
            child += 1
        if _less(key1[base + child], key2[base + child], k1, k2):
            key1[base + i] = key1[base + child]
            key2[base + i] = key2[base + child]
            i = child
        else:
            break
    if size > 0:
        key1[base + i] = k1
        key2[base + i] = k2
    return size


@njit(cache=True)
def _scratch(n: int, m: int, num_dev: int) -> tuple:
    """simulate_one's work arrays: the event FIFO, the timed-event heap (time; sequence and code), each device's request
    queue (priority; request order and op) with its size, and each device's running op (-1: idle)."""
    return (
        np.empty(6 * n + 2 * m + num_dev + 8, dtype=np.int64),
        np.empty(n + m + 1),
        np.empty(n + m + 1, dtype=np.int64),
        np.empty(num_dev * n + 1),
        np.empty(num_dev * n + 1, dtype=np.int64),
        np.zeros(num_dev, dtype=np.int64),
        np.full(num_dev, -1, dtype=np.int64),
    )


@njit(cache=True)
def _enqueue_sources(remaining: np.ndarray, fifo: np.ndarray) -> int:
    """Put each op without inputs on the FIFO as ``ALL_INPUTS``, by id; returns the FIFO's tail."""
    tail = 0
    for v in range(remaining.size):
        if remaining[v] == 0:
            fifo[tail] = v * _SHIFT + ALL_INPUTS
            tail += 1
    return tail


@njit(cache=True)
def _begin(in_degree: np.ndarray, scratch: tuple, work: np.ndarray, resume_from: tuple, checkpoints: tuple) -> tuple:
    """The engine's state at the start (``resume_from``'s index -1: the sources on the FIFO) or at a checkpoint: each op's
    inputs still to come, the FIFO's tail, the heap's size, the makespan so far, the counters (sequence, requests, log
    size) and each device's work under the assignment (begun or not). Readies ``checkpoints`` to record after it."""
    fifo, h_time, h_key, q_prio, q_key, q_size, busy = scratch
    reference, index = resume_from
    remaining = in_degree.copy()
    if index < 0:
        tail, h_size, makespan, counters = _enqueue_sources(remaining, fifo), 0, 0.0, (0, 0, 0)
    else:
        queues = (q_prio, q_key, q_size, in_degree.size)
        tail, (h_size, makespan, counters) = 0, resume.restore(reference, index, remaining, busy, (h_time, h_key), queues)
    if checkpoints[resume.HEADER][resume.STEP] == 0:
        return remaining, tail, h_size, makespan, counters, work  # the total is read only to record
    total = work + reference[resume.FLOATS][index, resume.GRANTED :] if index >= 0 else work.copy()
    if index >= 0:
        resume.share(reference, checkpoints, index)
    checkpoints[resume.TOTAL][:] = total
    checkpoints[resume.HEADER][resume.COUNT] = index + 1
    return remaining, tail, h_size, makespan, counters, total


@njit(cache=True)
def simulate_from(graph: tuple, assignment: np.ndarray, times: tuple, cutoff: float, work: np.ndarray, base: tuple, record: tuple) -> float:
    """Simulate ``assignment`` on ``graph`` (:func:`simulate_one`'s first ten arrays), filling ``times`` (ready, start,
    end) for the ops it runs, from the start or from checkpoint ``index`` of ``base = (reference, index)`` (see
    :func:`~workbench.sim.resume.resume_point`; -1: the start), recording checkpoints into the set ``record`` unless it
    never records. Returns the makespan, or ``inf`` once it is sure to reach ``cutoff``: when an op starts on its device
    at ``now``, ``now`` plus that device's work not yet started (``work`` on entry, its own op too) does."""
    compute, out_ptr, out_edge, edge_dst, edge_comm, in_degree, priority, speed, bandwidth, latency = graph
    (ready, start, end), n = times, compute.size
    scratch = _scratch(n, edge_dst.size, speed.size)
    fifo, h_time, h_key, q_prio, q_key, q_size, busy = scratch
    if work.max() >= cutoff:
        return np.inf
    remaining, tail, h_size, makespan, (seq, requests, logged), total = _begin(in_degree, scratch, work, base, record)
    step, log, queues = record[resume.HEADER][resume.STEP], record[resume.LOG], (q_prio, q_key, q_size, n)
    head, marked, now = 0, 0, 0.0
    while True:
        while head < tail:
            code = fifo[head]
            head += 1
            kind, item = code % _SHIFT, code // _SHIFT
            if kind == ALL_INPUTS:
                ready[item] = now
                d = assignment[item]
                q_size[d] = _push(q_prio, q_key, d * n, q_size[d], priority[item], (requests << 32) | item)
                requests += 1
                if busy[d] < 0:
                    busy[d] = q_key[d * n] & _LOW32
                    q_size[d] = _pop(q_prio, q_key, d * n, q_size[d])
                    fifo[tail] = busy[d] * _SHIFT + GRANT
                    tail += 1
            elif kind == GRANT:
                start[item] = now
                duration = compute[item] / speed[assignment[item]]
                at = now + duration
                if now + work[assignment[item]] >= cutoff:
                    return np.inf
                work[assignment[item]] -= duration
                if at == now:
                    fifo[tail] = item * _SHIFT + COMPUTE_END
                    tail += 1
                else:
                    h_size = _push(h_time, h_key, 0, h_size, at, (seq << 32) | (item * _SHIFT + COMPUTE_END))
                    seq += 1
            elif kind == COMPUTE_END:
                end[item] = now
                makespan = max(makespan, now)
                d = assignment[item]
                busy[d] = -1
                fifo[tail] = d * _SHIFT + RELEASE
                fifo[tail + 1] = item * _SHIFT + FINISH
                tail += 2
            elif kind == RELEASE:
                if busy[item] < 0 and q_size[item] > 0:
                    busy[item] = q_key[item * n] & _LOW32
                    q_size[item] = _pop(q_prio, q_key, item * n, q_size[item])
                    fifo[tail] = busy[item] * _SHIFT + GRANT
                    tail += 1
            elif kind == FINISH:
                a = assignment[item]
                for k in range(out_ptr[item], out_ptr[item + 1]):
                    e = out_edge[k]
                    b = assignment[edge_dst[e]]
                    at = now
                    if a != b:
                        at = now + (edge_comm[e] / bandwidth[a, b] + latency[a, b])
                    if at == now:
                        fifo[tail] = e * _SHIFT + TRANSFER_END
                        tail += 1
                    else:
                        h_size = _push(h_time, h_key, 0, h_size, at, (seq << 32) | (e * _SHIFT + TRANSFER_END))
                        seq += 1
            elif kind == TRANSFER_END:
                fifo[tail] = item * _SHIFT + TRANSFER_DONE
                tail += 1
            else:  # TRANSFER_DONE
                v = edge_dst[item]
                remaining[v] -= 1
                if step > 0:
                    log[logged] = v
                    logged += 1
                if remaining[v] == 0:
                    fifo[tail] = v * _SHIFT + ALL_INPUTS
                    tail += 1
        if h_size == 0:
            break
        if step > 0 and head - marked >= step:
            marked = head
            resume.record(record, h_time[0], makespan, (seq, requests, logged), total - work, busy, (h_time, h_key, h_size), queues)
        now = h_time[0]
        while h_size > 0 and h_time[0] == now:
            fifo[tail] = h_key[0] & _LOW32
            tail += 1
            h_size = _pop(h_time, h_key, 0, h_size)
    return makespan


@njit(cache=True)
def simulate_one(
    compute: np.ndarray,
    out_ptr: np.ndarray,
    out_edge: np.ndarray,
    edge_dst: np.ndarray,
    edge_comm: np.ndarray,
    in_degree: np.ndarray,
    priority: np.ndarray,
    speed: np.ndarray,
    bandwidth: np.ndarray,
    latency: np.ndarray,
    assignment: np.ndarray,
    ready: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    cutoff: float = np.inf,
) -> float:
    """:func:`simulate_from` from the start, recording nothing."""
    work = resume.device_work(compute, speed, assignment) if cutoff < np.inf else np.zeros(speed.size)  # inf: never read
    none = resume.checkpoint_set(0, 0, speed.size, 0)
    graph = (compute, out_ptr, out_edge, edge_dst, edge_comm, in_degree, priority, speed, bandwidth, latency)
    return simulate_from(graph, assignment, (ready, start, end), cutoff, work, (none, -1), none)


@njit(cache=True)
def simulate_recorded(graph: tuple, assignment: np.ndarray, checkpoints: tuple) -> float:
    """:func:`simulate_from` from the start, recording into ``checkpoints`` (with the op times); returns the makespan."""
    work = resume.device_work(graph[0], graph[7], assignment)
    times = (checkpoints[resume.READY], checkpoints[resume.START], checkpoints[resume.END])
    return simulate_from(graph, assignment, times, np.inf, work, (checkpoints, -1), checkpoints)


@njit(cache=True)
def simulate_batch(graph: tuple, assignments: np.ndarray) -> np.ndarray:
    """Makespans of many assignments (rows of ``assignments``) of ``graph`` (:func:`simulate_one`'s first ten arrays)."""
    n, num_dev = graph[0].size, graph[7].size
    times = (np.empty(n), np.empty(n), np.empty(n))
    out = np.empty(assignments.shape[0])
    none = resume.checkpoint_set(0, 0, num_dev, 0)
    for r in range(assignments.shape[0]):
        out[r] = simulate_from(graph, assignments[r], times, np.inf, np.zeros(num_dev), (none, -1), none)
    return out
