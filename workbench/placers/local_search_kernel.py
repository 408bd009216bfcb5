"""local_search's loop compiled with numba: proposal, simulation, acceptance and critical-chain refresh in one call.

:func:`search_steps` runs the loop of
:meth:`~workbench.placers.local_search.LocalSearchPlacer.place` with the moves
of :class:`~workbench.placers.local_search.Moves` for a stretch of
evaluations and returns to Python, which stamps the any-time points with CPU
seconds, updates the progress bar and checks the time limit. The Python loop
stays the reference (``loop="python"``); for a seed both give the same
trajectory, because the kernel draws from the same random stream in the same
order: it steps numpy's PCG64 bit generator itself (:func:`pcg64_next`, the
state read from and written back to the ``numpy.random.Generator``) and turns
its words into doubles and bounded integers exactly as numpy 1.17+ does
(:func:`random_double`, :func:`random_bounded`: Lemire's method on 32-bit
halves, one spare half kept between calls).

A proposal's simulation stops as soon as its makespan is sure to make it
rejected and no new best (:func:`~workbench.sim.fast.simulate_one` with a cutoff, proved
by each device's remaining work): the acceptance draws of a batch are taken
before its rows are simulated (the same draws in the same order, as nothing
draws in between), so each row's cutoff is known, with a margin far above
rounding. A stopped row counts as an evaluation, as the Python loop counts it,
and the trajectory is unchanged.

On a graph of :data:`~workbench.sim.resume.RESUME_FROM_EVENTS` events or more, a proposal is also simulated only from
the current placement's last checkpoint before its first changed op (:mod:`workbench.sim.resume`): each simulation that
may become the current placement records its checkpoints and op times into a scratch set, which the accepted one
replaces the current set's with from its resume point on. A critical-chain refresh, one counted evaluation as in the
Python loop, then reads the current placement's times from that set instead of simulating it again (the times are the
same, bit for bit).

A steered subclass's moves run here too when it hands the loop its ranking
(:class:`~workbench.placers.local_search.RankedMoves`, learned_search's scorer):
the kernel returns to Python at each critical-chain refresh, Python ranks the
moves of the refreshed placement, and the kernel draws the steered share of
each batch from that ranking (:func:`_steer`, the draws of
``LearnedMoves.propose`` in the same order).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..sim import resume
from ..sim.fast import simulate_from, simulate_recorded
from .local_search import _critical_chain

__all__ = ["pcg64_state", "set_pcg64_state", "pcg64_next", "random_double", "random_bounded", "search_steps"]

_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)
_MULT_HI = np.uint64(0x2360ED051FC65DA4)  # PCG64's 128-bit multiplier
_MULT_LO = np.uint64(0x4385DF649FCCF645)
_ONE = np.uint64(1)
_ZERO = np.uint64(0)
_ROTATE = np.uint64(58)
_BITS63 = np.uint64(63)
_BITS64 = np.uint64(64)
_DOUBLE_SHIFT = np.uint64(11)
_DOUBLE_SCALE = 1.0 / 9007199254740992.0
_WORD = (1 << 64) - 1
# State words: 128-bit state (high, low), 128-bit increment (high, low), whether a spare 32-bit half is kept, the half.
STATE_HI, STATE_LO, INC_HI, INC_LO, HAS_UINT32, UINTEGER = range(6)


def pcg64_state(rng: np.random.Generator) -> np.ndarray:
    """The PCG64 bit generator's state as six unsigned words (see :data:`STATE_HI`...); other bit generators are refused."""
    raw = rng.bit_generator.state
    if raw["bit_generator"] != "PCG64":
        raise ValueError(f"the compiled loop steps PCG64 only, not {raw['bit_generator']}")
    state, inc = int(raw["state"]["state"]), int(raw["state"]["inc"])
    return np.array([state >> 64, state & _WORD, inc >> 64, inc & _WORD, raw["has_uint32"], raw["uinteger"]], dtype=np.uint64)


def set_pcg64_state(rng: np.random.Generator, words: np.ndarray) -> None:
    """Write ``words`` (as :func:`pcg64_state` gives them) back to ``rng``'s bit generator."""
    state = (int(words[STATE_HI]) << 64) | int(words[STATE_LO])
    inc = (int(words[INC_HI]) << 64) | int(words[INC_LO])
    rng.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": state, "inc": inc},
        "has_uint32": int(words[HAS_UINT32]),
        "uinteger": int(words[UINTEGER]),
    }


@njit(cache=True, inline="always")
def _mulhi(a: np.uint64, b: np.uint64) -> np.uint64:  # pragma: no cover - compiled
    """The high 64 bits of the 128-bit product ``a * b``."""
    a_lo, a_hi = a & _MASK32, a >> _SHIFT32
    b_lo, b_hi = b & _MASK32, b >> _SHIFT32
    p0, p1, p2 = a_lo * b_lo, a_lo * b_hi, a_hi * b_lo
    mid = (p0 >> _SHIFT32) + (p1 & _MASK32) + (p2 & _MASK32)
    return a_hi * b_hi + (p1 >> _SHIFT32) + (p2 >> _SHIFT32) + (mid >> _SHIFT32)


@njit(cache=True)
def pcg64_next(words: np.ndarray) -> np.uint64:  # pragma: no cover - compiled
    """numpy's ``PCG64`` next 64-bit word: step the 128-bit LCG, then the XSL-RR output of the new state."""
    hi, lo = words[STATE_HI], words[STATE_LO]
    new_lo = lo * _MULT_LO
    new_hi = _mulhi(lo, _MULT_LO) + hi * _MULT_LO + lo * _MULT_HI
    added = new_lo + words[INC_LO]
    carry = _ONE if added < new_lo else _ZERO
    new_hi = new_hi + words[INC_HI] + carry
    words[STATE_HI], words[STATE_LO] = new_hi, added
    value = new_hi ^ added
    rotate = new_hi >> _ROTATE
    return (value >> rotate) | (value << ((_BITS64 - rotate) & _BITS63))


@njit(cache=True)
def _next_uint32(words: np.ndarray) -> np.uint64:  # pragma: no cover - compiled
    """numpy's PCG64 32-bit draw: the low half of a new word, its high half kept for the next call."""
    if words[HAS_UINT32] != _ZERO:
        words[HAS_UINT32] = _ZERO
        return words[UINTEGER]
    word = pcg64_next(words)
    words[HAS_UINT32] = _ONE
    words[UINTEGER] = word >> _SHIFT32
    return word & _MASK32


@njit(cache=True)
def random_double(words: np.ndarray) -> float:  # pragma: no cover - compiled
    """``Generator.random()``: the top 53 bits of a word over 2**53."""
    return float(pcg64_next(words) >> _DOUBLE_SHIFT) * _DOUBLE_SCALE


@njit(cache=True)
def random_bounded(words: np.ndarray, low: int, high: int) -> int:  # pragma: no cover - compiled
    """``Generator.integers(low, high)`` for ``high - low <= 2**32 - 1``: no draw for a single value, else Lemire's
    multiply-and-reject on 32-bit draws (numpy's ``buffered_bounded_lemire_uint32``)."""
    span = np.uint64(high - low - 1)
    if span == _ZERO:
        return low
    excl = span + _ONE
    m = _next_uint32(words) * excl
    leftover = m & _MASK32
    if leftover < excl:
        threshold = (_MASK32 - span) % excl
        while leftover < threshold:
            m = _next_uint32(words) * excl
            leftover = m & _MASK32
    return low + int(m >> _SHIFT32)


@njit(cache=True)
def _other_device(words: np.ndarray, device: int, num_devices: int) -> int:  # pragma: no cover - compiled
    return (device + random_bounded(words, 1, num_devices)) % num_devices


@njit(cache=True)
def _neighbour_device(
    words: np.ndarray, nb_ptr: np.ndarray, nb: np.ndarray, assignment: np.ndarray, op: int, num_devices: int
) -> int:  # pragma: no cover - compiled
    """A random neighbour's device other than ``op``'s (neighbours counted with repeats), else another device."""
    own = assignment[op]
    count = 0
    for k in range(nb_ptr[op], nb_ptr[op + 1]):
        if assignment[nb[k]] != own:
            count += 1
    if count == 0:
        return _other_device(words, own, num_devices)
    pick = random_bounded(words, 0, count)
    for k in range(nb_ptr[op], nb_ptr[op + 1]):
        if assignment[nb[k]] != own:
            if pick == 0:
                return assignment[nb[k]]
            pick -= 1
    return own  # not reached


@njit(cache=True)
def _group(nb_ptr: np.ndarray, nb: np.ndarray, assignment: np.ndarray, op: int, limit: int, group: np.ndarray) -> int:  # pragma: no cover
    """``Moves.group``: ``op`` and up to ``limit - 1`` ops reached through neighbours on its device, breadth first, written to
    ``group``; returns how many."""
    device = assignment[op]
    group[0] = op
    size, head = 1, 0
    while head < size and size < limit:
        u = group[head]
        head += 1
        for k in range(nb_ptr[u], nb_ptr[u + 1]):
            v = nb[k]
            if assignment[v] != device or size >= limit:
                continue
            seen = False
            for j in range(size):
                if group[j] == v:
                    seen = True
                    break
            if not seen:
                group[size] = v
                size += 1
    return size


@njit(cache=True)
def _propose(
    words: np.ndarray,
    cumulative: np.ndarray,
    nb_ptr: np.ndarray,
    nb: np.ndarray,
    critical: np.ndarray,
    critical_size: int,
    num_devices: int,
    assignment: np.ndarray,
    out: np.ndarray,
    count: int,
    kinds: np.ndarray,
    ops: np.ndarray,
    chosen: np.ndarray,
    group: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """``Moves.propose``: ``count`` rows of ``out``, each ``assignment`` with one move, the draws in the same order."""
    n = assignment.size
    for row in range(count):
        x = random_double(words)
        kind = 0
        while kind < cumulative.size and cumulative[kind] <= x:
            kind += 1
        kinds[row] = kind
    for row in range(count):
        ops[row] = random_bounded(words, 0, n)
    for row in range(count):
        chosen[row] = critical[random_bounded(words, 0, critical_size)]
    for row in range(count):
        out[row, :] = assignment
        kind = kinds[row]  # 0 neighbour, 1 random, 2 swap, 3 critical, 4 group (MOVE_KINDS)
        op = chosen[row] if kind == 3 else ops[row]
        if kind == 1:
            out[row, op] = _other_device(words, assignment[op], num_devices)
        elif kind == 0 or kind == 3:
            if kind == 3 and random_double(words) < 0.3:
                out[row, op] = _other_device(words, assignment[op], num_devices)
            else:
                out[row, op] = _neighbour_device(words, nb_ptr, nb, assignment, op, num_devices)
        elif kind == 2:
            other = random_bounded(words, 0, n)
            if assignment[other] == assignment[op]:
                out[row, op] = _other_device(words, assignment[op], num_devices)
            else:
                out[row, op], out[row, other] = assignment[other], assignment[op]
        else:  # the device is drawn before the group's size: Python evaluates an assignment's value before its target
            device = _other_device(words, assignment[op], num_devices)
            size = _group(nb_ptr, nb, assignment, op, random_bounded(words, 2, 9), group)
            for j in range(size):
                out[row, group[j]] = device


@njit(cache=True)
def _round_half_even(x: float) -> int:  # pragma: no cover - compiled
    """Python's ``round(x)``."""
    low = math.floor(x)
    rest = x - low
    if rest > 0.5 or (rest == 0.5 and low % 2 == 1):
        return int(low) + 1
    return int(low)


@njit(cache=True)
def _refresh(
    sim: tuple,
    pred_ptr: np.ndarray,
    pred: np.ndarray,
    pred_comm: np.ndarray,
    current: np.ndarray,
    trace: tuple,
    critical: np.ndarray,
    counts: np.ndarray,
    checkpoints: tuple,
) -> None:  # pragma: no cover - compiled
    """``Moves.set_critical``: one counted evaluation of the current placement, its times left in ``trace``, and its
    critical chain. The times are those its checkpoints keep (they are exact); it is simulated only before any is
    recorded."""
    ready, start, end = trace
    counts[EVALUATIONS] += 1
    if checkpoints[resume.HEADER][resume.COUNT] < 0:
        simulate_recorded(sim, current, checkpoints)
    ready[:], start[:], end[:] = checkpoints[resume.READY], checkpoints[resume.START], checkpoints[resume.END]
    chain = _critical_chain(pred_ptr, pred, pred_comm, current, ready, start, end)
    critical[: chain.size] = chain
    counts[CRITICAL_SIZE] = chain.size
    counts[STALE], counts[SINCE_REFRESH] = 0, 0


_MARGIN = 1e-9  # relative: far above the rounding of the engine's sums and of exp/log, far below any makespan step


@njit(cache=True)
def _cutoff(values: np.ndarray, running: float, draw: float, temperature: float, pick: int) -> float:  # pragma: no cover
    """The makespan from which a proposal is sure to be rejected and to be no new best, so its simulation may stop there:
    above the acceptance test's bound while no earlier row of the batch is accepted, then above the best so far."""
    if pick >= 0:
        return running + _MARGIN * abs(running)
    if draw <= 0.0:
        return np.inf
    tolerated = temperature * (-math.log(draw) * (1 + _MARGIN) + _MARGIN)
    limit = values[CURRENT_MAKESPAN] + tolerated
    return limit + _MARGIN * abs(limit)


# Integer and float slots of the loop's state, kept between calls of :func:`search_steps`: evaluations, since the last
# refresh, whether the current placement changed since, the critical chain's length, new any-time points; for steered
# moves, whether to return to Python at each refresh, whether it just did (the next call resumes at the proposals), whether
# a ranking is steering, how many of its moves are taken and how many are sorted, whether screening is on.
EVALUATIONS, SINCE_REFRESH, STALE, CRITICAL_SIZE, POINTS, RETURN_AT_REFRESH, REFRESHED, STEERING, TAKEN, SORTED, SCREENING = range(11)
# Current and best makespan, acceptance rate, the temperature of a step interrupted by a refresh.
CURRENT_MAKESPAN, BEST_MAKESPAN, ACCEPTANCE, TEMPERATURE = range(4)
# A steered ranking's settings (``steer[-1]``): the share of proposals it chooses, the screen's score threshold.
SHARE, SCREEN_BELOW = range(2)
SCREEN_TRIES = 4  # how many times a screened-out proposal is redrawn (the last draw stands)


@njit(cache=True)
def _next_ranked(counts: np.ndarray, order: np.ndarray, keys: np.ndarray) -> int:  # pragma: no cover - compiled
    """The best-keyed move not taken since the ranking came (-1 when all are): Python hands over the sorted head; once it is
    used up, every move is sorted by key (stable: equal keys by index; the head's order is a prefix of it for distinct keys)."""
    if counts[TAKEN] == counts[SORTED]:
        if counts[SORTED] == keys.size:
            return -1
        order[:] = np.argsort(-keys, kind="mergesort")
        counts[SORTED] = keys.size
    counts[TAKEN] += 1
    return order[counts[TAKEN] - 1]


@njit(cache=True)
def _steer(
    words: np.ndarray,
    steer: tuple,  # order, keys, ops, grouped, targets, groups, single_scores, settings (RankedMoves, SHARE...)
    counts: np.ndarray,
    assignment: np.ndarray,
    out: np.ndarray,
    count: int,
    steered: np.ndarray,
    redraw: tuple,  # _propose's arguments after the assignment, for one proposal into a one-row array
) -> None:  # pragma: no cover - compiled
    """``LearnedMoves.propose`` after local_search's proposals: each row drawn to be steered takes the best-ranked move that
    changes ``assignment``; with screening, each other row that moves one op to a device scored below the threshold is
    redrawn, up to :data:`SCREEN_TRIES` times."""
    order, keys, ops, grouped, targets, groups, single_scores, settings = steer
    n = assignment.size
    for row in range(count):
        steered[row] = random_double(words) < settings[SHARE]
    for row in range(count):
        if not steered[row]:
            continue
        while True:
            k = _next_ranked(counts, order, keys)
            if k < 0:
                break
            op, target = ops[k], targets[k]
            changed = False
            width = groups.shape[1] if grouped[k] else 1
            for j in range(width):
                member = groups[op, j] if grouped[k] else op
                if member < n and assignment[member] != target:
                    changed = True
            if changed:
                out[row, :] = assignment
                for j in range(width):
                    member = groups[op, j] if grouped[k] else op
                    if member < n:
                        out[row, member] = target
                break
    if counts[SCREENING] == 0:
        return
    cumulative, nb_ptr, nb, critical, critical_size, num_devices, one, kinds, chosen_ops, chosen, group = redraw
    for row in range(count):
        if steered[row]:
            continue
        for _ in range(SCREEN_TRIES):
            moved, changes = -1, 0
            for v in range(n):
                if out[row, v] != assignment[v]:
                    moved, changes = v, changes + 1
            if changes != 1 or not single_scores[moved, out[row, moved]] < settings[SCREEN_BELOW]:
                break
            _propose(
                words, cumulative, nb_ptr, nb, critical, critical_size, num_devices, assignment, one, 1, kinds, chosen_ops, chosen, group
            )
            out[row, :] = one[0]


@njit(cache=True)
def _conclude(
    proposals: np.ndarray,
    makespans: np.ndarray,
    size: int,
    pick: int,
    current: np.ndarray,
    best: np.ndarray,
    values: np.ndarray,
    counts: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """After a batch of ``size`` proposals: the best so far, and the accepted row ``pick`` (-1: none) as the current
    placement, with the acceptance rate's update."""
    lowest = 0
    for row in range(size):  # np.argmin: the first of the lowest
        if makespans[row] < makespans[lowest]:
            lowest = row
    if makespans[lowest] < values[BEST_MAKESPAN]:
        best[:] = proposals[lowest]
        values[BEST_MAKESPAN] = makespans[lowest]
    if pick >= 0:
        current[:] = proposals[pick]
        values[CURRENT_MAKESPAN] = makespans[pick]
        counts[STALE] = 1
        values[ACCEPTANCE] = 0.9 * values[ACCEPTANCE] + 0.1 / (pick + 1)
    else:
        values[ACCEPTANCE] = 0.9 * values[ACCEPTANCE] + 0.05 / size


@njit(cache=True)
def search_steps(
    sim: tuple,  # simulate_one's graph and cluster arrays, in its order
    pred_ptr: np.ndarray,
    pred: np.ndarray,
    pred_comm: np.ndarray,
    nb_ptr: np.ndarray,
    nb: np.ndarray,
    cumulative: np.ndarray,
    settings: np.ndarray,  # budget, max_batch, refresh_every, num_devices
    temperatures: np.ndarray,  # scale, initial, final (fractions of the scale)
    words: np.ndarray,
    current: np.ndarray,
    best: np.ndarray,
    critical: np.ndarray,
    counts: np.ndarray,
    values: np.ndarray,
    point_evaluations: np.ndarray,
    point_makespans: np.ndarray,
    stop_at: int,
    time_done: float,
    trace: tuple,  # ready, start, end: scratch, holding the current placement's trace after a refresh
    steer: tuple,  # a steered subclass's ranking (see _steer); unread while counts[STEERING] is 0
    checkpoints: tuple,  # the current placement's checkpoints and a scratch set (workbench.sim.resume.checkpoint_set)
) -> None:  # pragma: no cover - compiled
    """Run the search loop until ``stop_at`` evaluations (or the budget) are spent.

    ``current``, ``best``, ``critical``, ``counts`` (:data:`EVALUATIONS`...), ``values`` (:data:`CURRENT_MAKESPAN`...)
    and ``words`` (the random state) carry the loop between calls. Each new best makespan is appended to
    ``point_evaluations``/``point_makespans`` (``counts[POINTS]`` of them). ``time_done`` is the share of the time limit
    spent when the call began (0 without one); the temperature falls with the larger of it and the budget's share.
    With ``counts[RETURN_AT_REFRESH]`` the call returns right after a critical-chain refresh (``counts[REFRESHED]`` set,
    ``trace`` holding the current placement's times) so that Python can rank its moves into ``steer``; the next call
    proposes at the interrupted step's temperature.
    """
    n = current.size
    budget, max_batch, refresh_every, num_devices = settings[0], settings[1], settings[2], settings[3]
    scale, initial, final = temperatures[0], temperatures[1], temperatures[2]
    proposals = np.empty((max_batch, n), dtype=np.int64)
    makespans = np.empty(max_batch)
    kinds = np.empty(max_batch, dtype=np.int64)
    ops = np.empty(max_batch, dtype=np.int64)
    chosen = np.empty(max_batch, dtype=np.int64)
    group = np.empty(8, dtype=np.int64)
    steered = np.empty(max_batch, dtype=np.bool_)
    one = np.empty((1, n), dtype=np.int64)
    draws = np.empty(max_batch)
    recorded, scratch = checkpoints
    recording = recorded[resume.HEADER][resume.STEP] > 0
    none, work = resume.checkpoint_set(0, 0, num_devices, 0), np.empty(num_devices)
    while counts[EVALUATIONS] < budget and counts[EVALUATIONS] < stop_at:
        if counts[REFRESHED] != 0:  # resumed after Python ranked the refreshed placement's moves
            counts[REFRESHED] = 0
            temperature = values[TEMPERATURE]
        else:
            done = counts[EVALUATIONS] / budget
            if time_done > done:
                done = time_done
            temperature = scale * initial * (final / initial) ** done
            if counts[STALE] != 0 and counts[SINCE_REFRESH] >= refresh_every and counts[EVALUATIONS] < budget - 1:
                _refresh(sim, pred_ptr, pred, pred_comm, current, trace, critical, counts, recorded)
                if counts[RETURN_AT_REFRESH] != 0:
                    counts[REFRESHED] = 1
                    values[TEMPERATURE] = temperature
                    return
        size = min(max_batch, budget - counts[EVALUATIONS], max(1, _round_half_even(1 / max(values[ACCEPTANCE], 1e-3))))
        critical_size = counts[CRITICAL_SIZE]
        _propose(words, cumulative, nb_ptr, nb, critical, critical_size, num_devices, current, proposals, size, kinds, ops, chosen, group)
        if counts[STEERING] != 0:
            redraw = (cumulative, nb_ptr, nb, critical, critical_size, num_devices, one, kinds, ops, chosen, group)
            _steer(words, steer, counts, current, proposals, size, steered, redraw)
        for row in range(size):  # every row draws, as rng.random(size) does; nothing draws while the rows are simulated
            draws[row] = random_double(words)
        pick = picked_from = -1
        running = values[BEST_MAKESPAN]
        for row in range(size):  # each from the current placement's last checkpoint before its first change
            cutoff = _cutoff(values, running, draws[row], temperature, pick)
            at = resume.resume_point(recorded, pred_ptr, pred, current, proposals[row], sim[0], sim[7], work)
            if pick < 0 and recording:  # it may become the current placement: its checkpoints are recorded
                times = (scratch[resume.READY], scratch[resume.START], scratch[resume.END])
                makespans[row] = simulate_from(sim, proposals[row], times, cutoff, work, (recorded, at), scratch)
            else:
                makespans[row] = simulate_from(sim, proposals[row], trace, cutoff, work, (recorded, at), none)
            increase = makespans[row] - values[CURRENT_MAKESPAN]
            if pick < 0 and (increase <= 0 or draws[row] < math.exp(-max(increase, 0.0) / temperature)):
                pick, picked_from = row, at
            if makespans[row] < running:
                running = makespans[row]
                point_evaluations[counts[POINTS]] = counts[EVALUATIONS] + row + 1
                point_makespans[counts[POINTS]] = running
                counts[POINTS] += 1
        counts[EVALUATIONS] += size
        counts[SINCE_REFRESH] += size
        _conclude(proposals, makespans, size, pick, current, best, values, counts)
        if pick >= 0:
            resume.commit(recorded, scratch, picked_from)
