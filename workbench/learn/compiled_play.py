"""DOPPLER's step loop in one compiled function: SEL a rule (placement only), or both heads learned (training).

Zero-shot inference (issue 32, part 4) places with ``doppler_plc_only``: SEL is a rule kept in a queue
(:func:`~.doppler.rule_queue`), PLC the learned head. Played without gradients and without a teacher, greedy or
sampled, :meth:`~.doppler.DopplerPolicy.play`'s loop spent about 100 µs a step at 100,000 ops in Python and numpy
calls; :func:`compiled_episode` runs the same steps in one numba function:

- the rule's queue: critical_path's ready ops by rank (larger bottom level, then the smaller id), or ETF's earliest
  (op, device) pair (:class:`~workbench.placers.etf.EarliestPairs`: per device a heap of waiting ops by input
  arrival and a heap of startable ops by rank), as binary heaps on arrays with the same keys (unique, so the same
  pops);
- the partial schedule (:class:`~workbench.schedule.PartialSchedule`'s arrival times, starts, ends, free times and
  ready counts), the device features and the affinity penalty, through the same compiled helpers;
- PLC's logits (first layer: device part by fused multiply-adds in order, as BLAS's small products do, plus the
  bias, the op's part and the device sums, in numpy's order; leaky ReLU; the output layer), the rule term, the
  softmax (:func:`~.choice.compiled_softmax`, the very function the Python loop calls) and the greedy or sampled choice
  (``Chooser``'s draws).

Every float operation is the Python loop's, in its order, except the output layer's 64-term dot product, which
BLAS may sum in another order: a last-bit difference there changes a choice only between devices within an ulp of
each other. Tests compare the placements with the Python loop's on random graphs, the paper graphs and larger
generated ones.

Training (issue 32, part 5) plays with both heads learned, sampled, and scores every episode: the Python loop spent
most of a ChainMM episode's time in its per-step calls. :func:`compiled_scored_episode` runs those steps with SEL's
softmax over the ready ops (kept ascending, as ``PlacementState.ready_ops`` lists them) and greedy, sampled or
epsilon choices, and returns what the batched re-scoring reads (each step's ready ops and choices, device features
and rule terms); the re-scoring with gradients is the Python loop's own (``DopplerPolicy._rescored``), so the
log-probabilities are the same bit for bit (tests/test_compiled_scored_play.py).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from torch import nn

from ..placers.affinity import AFFINITY_TIE_RTOL, _affinity_penalty, affinity_tables
from ..schedule import PartialSchedule, _arrival_times
from .choice import compiled_softmax
from .features import DEVICE_FEATURES, _device_features
from .nets import ScoringHead

__all__ = ["compiled_episode", "compiled_head", "compiled_scored_episode"]


def compiled_head(head: ScoringHead) -> tuple[float, np.ndarray, float] | None:
    """``(negative slope, output weights, output bias)`` of PLC's head after its first layer, when it is one leaky ReLU and
    one linear output (the compiled loop's case), else None."""
    layers = list(head.layers)
    if len(layers) != 3 or not isinstance(layers[1], nn.LeakyReLU) or not isinstance(layers[2], nn.Linear):
        return None
    out = layers[2]
    weight = out.weight.detach().cpu().double().numpy()[0]
    return float(layers[1].negative_slope), np.ascontiguousarray(weight), float(out.bias.detach().cpu().double().numpy()[0])


def _ranks(priority: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(rank per op, op per rank)``: larger ``priority`` first, then the smaller id (``TieRanks`` with ties by id)."""
    n = priority.size
    order = np.lexsort((np.arange(n), -np.asarray(priority, dtype=float)))  # TieBreak "id"'s key: the op id
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    return rank, order.astype(np.int64)


def compiled_episode(
    schedule: PartialSchedule,
    select_by: str,
    priority: np.ndarray,
    place_by: str,
    plc: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float, np.ndarray, float],
    place_weight: float,
    rule_time: np.ndarray,
    time_scale: float,
    which: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(device per op, order)`` of one episode from the empty ``schedule``.

    Args:
        select_by: ``"bottom_level"`` (the ready op of highest ``priority``, smaller id on ties) or ``"earliest_start"``
            (ETF's pair; ``priority`` its static levels).
        place_by: PLC's rule term, ``"earliest_start"`` or ``"affinity"``.
        plc: ``(own part per op, device-sum part per op, device weight, device bias, negative slope, output weights,
            output bias)``, float64.
        which: per op, the draw that samples its device (``Chooser.draws[2 t + 1, 1]``); None: greedy.
    """
    graph_arrays, plc_arrays, rule, affinity = _episode_inputs(schedule, place_by, plc, (place_weight, rule_time, time_scale))
    draws = np.zeros(0) if which is None else np.ascontiguousarray(which, dtype=np.float64)
    rank, op_of_rank = _ranks(priority)
    return _episode(graph_arrays, select_by == "earliest_start", rank, op_of_rank, plc_arrays, rule, affinity, draws)


def _episode_inputs(schedule: PartialSchedule, place_by: str, plc: tuple, rule: tuple) -> tuple[tuple, tuple, tuple, tuple]:
    """The compiled loops' ``(graph arrays, PLC's arrays, PLC's rule term, affinity tables)`` for an episode from ``schedule``;
    ``rule`` is ``(PLC's rule weight, rule time per op, time scale)``."""
    graph = schedule.graph
    pred_ptr, pred, pred_edge = graph.pred_csr
    succ_ptr, succ, _ = graph.succ_csr
    graph_arrays = (
        np.asarray(pred_ptr, dtype=np.int64),
        np.asarray(pred, dtype=np.int64),
        np.ascontiguousarray(graph.comm[pred_edge], dtype=np.float64),
        np.asarray(succ_ptr, dtype=np.int64),
        np.asarray(succ, dtype=np.int64),
        np.asarray(graph.compute, dtype=np.float64),
        np.asarray(schedule.speeds, dtype=np.float64),
        np.ascontiguousarray(schedule.bandwidth, dtype=np.float64),
        np.ascontiguousarray(schedule.latency, dtype=np.float64),
    )
    own, device_part, device_weight, device_bias, slope, out_weight, out_bias = plc
    plc_arrays = (
        np.ascontiguousarray(own),
        np.ascontiguousarray(device_part),
        np.ascontiguousarray(device_weight),
        np.ascontiguousarray(device_bias),
        float(slope),
        np.ascontiguousarray(out_weight),
        float(out_bias),
    )
    tables = affinity_tables(graph) if place_by == "affinity" else None
    empty_int, empty_float = np.zeros(0, dtype=np.int64), np.zeros(0)
    affinity = (
        (True, tables.sibling_ptr, tables.sibling_op, tables.sibling_comm, tables.sibling_consumer, tables.sibling_own)
        if tables is not None
        else (False, empty_int, empty_int, empty_float, empty_int, empty_float)
    )
    place_weight, rule_time, time_scale = rule
    rule_arrays = (float(place_weight), np.asarray(rule_time, dtype=np.float64), float(time_scale))
    return graph_arrays, plc_arrays, rule_arrays, affinity


@njit(cache=True)
def _push_rank(heap: np.ndarray, size: int, key: int) -> int:  # pragma: no cover - compiled
    """Push ``key`` on the min-heap ``heap[:size]``; returns the new size."""
    i = size
    while i > 0:
        parent = (i - 1) // 2
        if heap[parent] <= key:
            break
        heap[i] = heap[parent]
        i = parent
    heap[i] = key
    return size + 1


@njit(cache=True)
def _pop_rank(heap: np.ndarray, size: int) -> int:  # pragma: no cover - compiled
    """Remove the top of the min-heap ``heap[:size]`` (the caller read it); returns the new size."""
    size -= 1
    key = heap[size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and heap[child + 1] < heap[child]:
            child += 1
        if key <= heap[child]:
            break
        heap[i] = heap[child]
        i = child
    if size > 0:
        heap[i] = key
    return size


@njit(cache=True)
def _before(time_a: float, op_a: int, time_b: float, op_b: int) -> bool:  # pragma: no cover - compiled
    return time_a < time_b or (time_a == time_b and op_a < op_b)


@njit(cache=True)
def _push_pair(times: np.ndarray, ops: np.ndarray, size: int, time: float, op: int) -> int:  # pragma: no cover - compiled
    """Push ``(time, op)`` on the min-heap ``(times, ops)[:size]`` (Python's tuple order); returns the new size."""
    i = size
    while i > 0:
        parent = (i - 1) // 2
        if not _before(time, op, times[parent], ops[parent]):
            break
        times[i], ops[i] = times[parent], ops[parent]
        i = parent
    times[i], ops[i] = time, op
    return size + 1


@njit(cache=True)
def _pop_pair(times: np.ndarray, ops: np.ndarray, size: int) -> int:  # pragma: no cover - compiled
    """Remove the top of the min-heap ``(times, ops)[:size]``; returns the new size."""
    size -= 1
    time, op = times[size], ops[size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and _before(times[child + 1], ops[child + 1], times[child], ops[child]):
            child += 1
        if not _before(times[child], ops[child], time, op):
            break
        times[i], ops[i] = times[child], ops[child]
        i = child
    if size > 0:
        times[i], ops[i] = time, op
    return size


@njit(cache=True, fastmath={"contract"})
def _place_logits(
    feats: np.ndarray,
    device_weight: np.ndarray,
    device_bias: np.ndarray,
    own: np.ndarray,
    device_sum: np.ndarray,
    slope: float,
    out_weight: np.ndarray,
    out_bias: float,
) -> np.ndarray:  # pragma: no cover - compiled
    """PLC's logits: ``leaky(feats @ device_weight + device_bias + own + device_sum) @ out_weight + out_bias``.

    The products accumulate in order by fused multiply-adds (``contract``; nothing else here multiplies and adds)."""
    d, inputs, hidden = feats.shape[0], feats.shape[1], device_weight.shape[1]
    logits = np.empty(d)
    for i in range(d):
        total = 0.0
        for j in range(hidden):
            first = 0.0
            for k in range(inputs):
                first += np.float64(feats[i, k]) * device_weight[k, j]
            x = ((first + device_bias[j]) + own[j]) + device_sum[i, j]
            if not x > 0:
                x = slope * x
            total += x * out_weight[j]
        logits[i] = total + out_bias
    return logits


@njit(cache=True)
def _choose(logits: np.ndarray, sample: bool, which: float) -> int:  # pragma: no cover - compiled
    """``Chooser``'s greedy or sampled choice from ``softmax(logits)``."""
    probs = compiled_softmax(logits)
    if not sample:
        return int(np.argmax(probs))
    cumulative = np.cumsum(probs)
    threshold = which * cumulative[-1]
    chosen = 0
    while chosen < cumulative.size and cumulative[chosen] <= threshold:
        chosen += 1
    return min(chosen, probs.size - 1)


@njit(cache=True)
def _arrivals(op: int, graph: tuple, device: np.ndarray, end: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """``PartialSchedule.arrival_times(op)``: per device, when all of ``op``'s inputs could be there."""
    pred_ptr, pred, pred_comm, _, _, _, speeds, bandwidth, latency = graph
    lo, hi = pred_ptr[op], pred_ptr[op + 1]
    if hi == lo:
        return np.zeros(speeds.size)
    return _arrival_times(pred[lo:hi], pred_comm[lo:hi], device, end, bandwidth, latency)


@njit(cache=True)
def _pairs_add(op: int, arrival: np.ndarray, last_earliest: float, rank: np.ndarray, heaps: tuple) -> None:  # pragma: no cover - compiled
    """``EarliestPairs.add`` of one op: startable on the devices its inputs reach by the last earliest start, else waiting."""
    wait_time, wait_op, wait_size, startable, start_size = heaps
    for k in range(arrival.size):
        if arrival[k] <= last_earliest:
            start_size[k] = _push_rank(startable[k], start_size[k], rank[op])
        else:
            wait_size[k] = _push_pair(wait_time[k], wait_op[k], wait_size[k], arrival[k], op)


@njit(cache=True)
def _pairs_pop(
    last_earliest: float, device_free: np.ndarray, queued: np.ndarray, rank: np.ndarray, op_of_rank: np.ndarray, heaps: tuple
) -> tuple[int, float]:  # pragma: no cover - compiled
    """``EarliestPairs.pop``: ``(the op of the earliest pair, larger static level then smaller id on ties, that earliest start)``."""
    wait_time, wait_op, wait_size, startable, start_size = heaps
    earliest = np.inf
    for k in range(device_free.size):
        while start_size[k] and not queued[op_of_rank[startable[k, 0]]]:
            start_size[k] = _pop_rank(startable[k], start_size[k])
        while wait_size[k] and not queued[wait_op[k, 0]]:
            wait_size[k] = _pop_pair(wait_time[k], wait_op[k], wait_size[k])
        if start_size[k]:  # their inputs are there by the last earliest start
            earliest = min(earliest, max(device_free[k], last_earliest))
        elif wait_size[k]:
            earliest = min(earliest, max(device_free[k], wait_time[k, 0]))
    best = -1
    for k in range(device_free.size):
        while wait_size[k] and wait_time[k, 0] <= earliest:
            moved = wait_op[k, 0]
            wait_size[k] = _pop_pair(wait_time[k], wait_op[k], wait_size[k])
            if queued[moved]:
                start_size[k] = _push_rank(startable[k], start_size[k], rank[moved])
        if device_free[k] <= earliest and start_size[k] and (best < 0 or startable[k, 0] < best):
            best = startable[k, 0]
    if best < 0:
        raise RuntimeError("no ready op to place")
    return op_of_rank[best], earliest


@njit(cache=True)
def _delay(op: int, earliest: np.ndarray, graph: tuple, device: np.ndarray, affinity: tuple) -> np.ndarray:  # pragma: no cover - compiled
    """PLC's rule term before its weight: the earliest start's delay over the earliest, or ``affinity_delay``'s."""
    if not affinity[0]:
        return earliest - earliest.min()
    _, sibling_ptr, sibling_op, sibling_comm, sibling_consumer, sibling_own = affinity
    compute, speeds, bandwidth, latency = graph[5], graph[6], graph[7], graph[8]
    lo, hi = sibling_ptr[op], sibling_ptr[op + 1]
    penalty = _affinity_penalty(
        sibling_op[lo:hi], sibling_comm[lo:hi], sibling_consumer[lo:hi], sibling_own[lo:hi], device, bandwidth, latency
    )
    cost = earliest + compute[op] / speeds + penalty
    cheapest = cost.min()
    delay = cost - cheapest
    for k in range(delay.size):
        if delay[k] <= AFFINITY_TIE_RTOL * abs(cheapest):
            delay[k] = 0.0
    return delay


@njit(cache=True)
def _empty_schedule(n: int, d: int) -> tuple:  # pragma: no cover - compiled
    """The compiled loops' partial schedule: ``(device, order, start, end, device free time, device compute)``."""
    device, order = np.full(n, -1, dtype=np.int64), np.empty(n, dtype=np.int64)
    return device, order, np.full(n, np.nan), np.full(n, np.nan), np.zeros(d), np.zeros(d)


@njit(cache=True)
def _place(
    op: int, target: int, t: int, earliest: np.ndarray, compute: np.ndarray, speeds: np.ndarray, schedule: tuple
) -> None:  # pragma: no cover - compiled
    """``PartialSchedule.place`` of ``op`` on ``target`` at step ``t``, from its earliest starts."""
    device, order, start, end, device_free, device_compute = schedule
    device[op], start[op], end[op] = target, earliest[target], earliest[target] + compute[op] / speeds[target]
    device_free[target] = end[op]
    device_compute[target] += compute[op]
    order[t] = op


@njit(cache=True)
def _episode(
    graph: tuple, by_pairs: bool, rank: np.ndarray, op_of_rank: np.ndarray, plc: tuple, rule: tuple, affinity: tuple, which: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """:func:`compiled_episode`'s loop."""
    pred_ptr, pred, _, succ_ptr, succ, compute, speeds, _, _ = graph
    own, device_part, device_weight, device_bias, slope, out_weight, out_bias = plc
    place_weight, rule_time, time_scale = rule
    n, d = compute.size, speeds.size
    schedule = _empty_schedule(n, d)
    device, order, start, end, device_free, device_compute = schedule
    device_sum = np.zeros((d, device_part.shape[1]))
    unplaced = np.diff(pred_ptr)
    queued, fresh = np.zeros(n, dtype=np.bool_), np.zeros(n, dtype=np.bool_)
    ready_heap, ready_size = np.empty(n, dtype=np.int64), 0  # critical_path's queue: ranks
    width = n if by_pairs else 0  # ETF's: per device, waiting (arrival, op) and startable ranks
    sizes = np.zeros((2, d), dtype=np.int64)
    heaps = (np.empty((d, width)), np.empty((d, width), dtype=np.int64), sizes[0], np.empty((d, width), dtype=np.int64), sizes[1])
    last_earliest = -np.inf
    buffer = np.empty(n, dtype=np.int64)  # the ops the last placement made ready
    count = 0
    for op in range(n):
        if unplaced[op] == 0:
            buffer[count] = op
            count += 1
    for t in range(n):
        for op in buffer[:count]:  # queue them (ReadyQueue.add, EarliestPairs.add)
            queued[op] = True
            if by_pairs:
                _pairs_add(op, _arrivals(op, graph, device, end), last_earliest, rank, heaps)
            else:
                ready_size = _push_rank(ready_heap, ready_size, rank[op])
        if by_pairs:
            op, last_earliest = _pairs_pop(last_earliest, device_free, queued, rank, op_of_rank, heaps)
        else:
            op = op_of_rank[ready_heap[0]]
            ready_size = _pop_rank(ready_heap, ready_size)
        queued[op] = False
        # its earliest starts, device features, PLC's logits and rule term, the choice
        earliest = np.maximum(device_free, _arrivals(op, graph, device, end))
        lo, hi = pred_ptr[op], pred_ptr[op + 1]
        feats = _device_features(pred[lo:hi], device, compute, start, end, device_compute, earliest, time_scale)
        logits = _place_logits(feats, device_weight, device_bias, own[op], device_sum, slope, out_weight, out_bias)
        logits = logits - place_weight * _delay(op, earliest, graph, device, affinity) / rule_time[op]
        target = _choose(logits, which.size > 0, which[t] if which.size > 0 else 0.0)
        device_sum[target] += device_part[op]
        # PartialSchedule.place
        _place(op, target, t, earliest, compute, speeds, schedule)
        for e in range(succ_ptr[op], succ_ptr[op + 1]):
            unplaced[succ[e]] -= 1
        count = 0
        for e in range(succ_ptr[op], succ_ptr[op + 1]):
            child = succ[e]
            if unplaced[child] == 0 and not fresh[child]:
                fresh[child] = True
                buffer[count] = child
                count += 1
    return device, order


GREEDY, SAMPLE, EPSILON = 0, 1, 2
"""The ``Chooser`` modes the scored loop plays (its ``mode`` argument)."""


def compiled_scored_episode(
    schedule: PartialSchedule,
    select_logits: np.ndarray,
    place_by: str,
    plc: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float, np.ndarray, float],
    rule: tuple[float, np.ndarray, float],
    choice: tuple[str, float, np.ndarray],
    offset: np.ndarray | None,
) -> tuple[np.ndarray, ...]:
    """One episode with SEL and PLC both learned, from the empty ``schedule``, with what its re-scoring needs.

    Args:
        select_logits: per op, SEL's logit plus its rule term (fixed for the episode).
        place_by, plc: as :func:`compiled_episode`'s.
        rule: ``(PLC's rule weight, rule time per op, time scale)``.
        choice: ``(Chooser mode: greedy, sample or epsilon; its epsilon; its draws, two per decision)``.
        offset: ``(ops, devices)`` added to PLC's logits, or None.

    Returns:
        ``(device per op, order, ready pointer (steps + 1), ready ops (ascending per step), SEL's chosen position per step,
        PLC's device per step, device features (steps, devices, features) float32, PLC's rule term (steps, devices))``.
    """
    mode, epsilon, draws = choice
    graph_arrays, plc_arrays, rule_arrays, affinity = _episode_inputs(schedule, place_by, plc, rule)
    n = schedule.graph.num_nodes
    table = np.zeros((0, schedule.num_devices)) if offset is None else np.ascontiguousarray(offset, dtype=np.float64)
    return _scored_episode(
        graph_arrays,
        np.ascontiguousarray(select_logits, dtype=np.float64),
        plc_arrays,
        rule_arrays,
        affinity,
        ({"greedy": GREEDY, "sample": SAMPLE, "epsilon": EPSILON}[mode], float(epsilon), np.ascontiguousarray(draws[: 2 * n])),
        table,
    )


@njit(cache=True)
def _pick(logits: np.ndarray, mode: int, epsilon: float, draw: np.ndarray) -> int:  # pragma: no cover - compiled
    """``Chooser.__call__`` on ``softmax(logits)`` with the decision's two draws ``(explore, which)``."""
    if mode == EPSILON:
        if draw[0] < epsilon:
            return min(int(draw[1] * logits.size), logits.size - 1)
        return _choose(logits, False, 0.0)
    return _choose(logits, mode == SAMPLE, draw[1])


@njit(cache=True)
def _scored_episode(
    graph: tuple, select_logits: np.ndarray, plc: tuple, rule: tuple, affinity: tuple, choice: tuple, offset: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """:func:`compiled_scored_episode`'s loop: :meth:`~.doppler.DopplerPolicy.play`'s steps with both heads learned."""
    pred_ptr, pred, _, succ_ptr, succ, compute, speeds, _, _ = graph
    own, device_part, device_weight, device_bias, slope, out_weight, out_bias = plc
    place_weight, rule_time, time_scale = rule
    mode, epsilon, draws = choice
    n, d = compute.size, speeds.size
    schedule = _empty_schedule(n, d)
    device, order, start, end, device_free, device_compute = schedule
    device_sum = np.zeros((d, device_part.shape[1]))
    unplaced = np.diff(pred_ptr)
    feats = np.empty((n, d, len(DEVICE_FEATURES)), dtype=np.float32)
    place_rule = np.empty((n, d))
    chosen_pos, targets = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    ready_ptr = np.zeros(n + 1, dtype=np.int64)
    ready_log = np.empty(n, dtype=np.int64)  # every step's ready ops, one after another (grown by doubling)
    ready, size = np.empty(n, dtype=np.int64), 0  # the ready ops, ascending
    for op in range(n):
        if unplaced[op] == 0:
            ready[size] = op
            size += 1
    for t in range(n):
        # SEL: softmax over the ready ops' logits
        while ready_ptr[t] + size > ready_log.size:
            grown = np.empty(2 * ready_log.size, dtype=np.int64)
            grown[: ready_log.size] = ready_log
            ready_log = grown
        ready_log[ready_ptr[t] : ready_ptr[t] + size] = ready[:size]
        ready_ptr[t + 1] = ready_ptr[t] + size
        pos = _pick(select_logits[ready[:size]], mode, epsilon, draws[2 * t])
        op = ready[pos]
        ready[pos : size - 1] = ready[pos + 1 : size].copy()
        size -= 1
        chosen_pos[t] = pos
        # PLC: its earliest starts, device features, logits and rule term, the choice
        earliest = np.maximum(device_free, _arrivals(op, graph, device, end))
        lo, hi = pred_ptr[op], pred_ptr[op + 1]
        feats[t] = _device_features(pred[lo:hi], device, compute, start, end, device_compute, earliest, time_scale)
        logits = _place_logits(feats[t], device_weight, device_bias, own[op], device_sum, slope, out_weight, out_bias)
        place_rule[t] = place_weight * _delay(op, earliest, graph, device, affinity) / rule_time[op]
        logits = logits - place_rule[t]
        if offset.shape[0]:
            logits = logits + offset[op]
        target = _pick(logits, mode, epsilon, draws[2 * t + 1])
        targets[t] = target
        device_sum[target] += device_part[op]
        # PartialSchedule.place, and the ops it makes ready into their places
        _place(op, target, t, earliest, compute, speeds, schedule)
        for e in range(succ_ptr[op], succ_ptr[op + 1]):
            child = succ[e]
            unplaced[child] -= 1
            if unplaced[child] == 0:  # its last input edge (parallel edges count once each)
                i = size
                while i > 0 and ready[i - 1] > child:
                    ready[i] = ready[i - 1]
                    i -= 1
                ready[i] = child
                size += 1
    return device, order, ready_ptr, ready_log[: ready_ptr[n]], chosen_pos, targets, feats, place_rule
