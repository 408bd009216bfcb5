"""Simulated annealing over assignments, scored by the simulator itself (Kirkpatrick, Gelatt, Vecchi, Science 1983).

The strong non-learned baseline. It starts from the best of every one-pass
method, the literature heuristics, this workbench's rules (``affinity``) and
the baselines, each one counted evaluation (the fair start,
:mod:`workbench.placers.best_constructive`; ``starts="literature"`` leaves
the rules out, for the paper comparison only), and anneals: propose a
small change of the current assignment, simulate it, keep it when it is
better or, with probability ``exp(-increase / temperature)``, when it is
worse. The temperature falls geometrically from ``initial_temperature`` to
``final_temperature`` (both relative to the starting makespan) over the
budget. Moves follow the graph's structure:

- move an op to the device of one of its neighbours (saves a transfer),
- move an op to another device (balances load),
- swap the devices of two ops on different devices,
- move an op of the current critical chain (the chain of inputs and device
  waits that ends at the makespan, read from a simulated trace) to a
  neighbour's device or another device: only these can shorten the makespan,
- move a connected group of ops that share a device to another device.

Proposals are evaluated in speculative batches: the evaluator is much
cheaper per assignment in a batch, so several proposals from the current
assignment are simulated at once and examined in order, the first accepted
one wins; the rest are discarded (but counted, and the best of them is kept
if it beats the best so far). The batch grows as the acceptance rate falls,
so few evaluations are wasted. ``budget`` counts every simulated
assignment; ``time_limit`` optionally caps wall time. ``details["anytime"]``
holds the best makespan so far against the evaluations spent
(:mod:`workbench.placers.anytime`).

The loop runs compiled (:mod:`workbench.placers.local_search_kernel`, numba):
the same moves from the same random stream, so a seed gives the Python
loop's trajectory exactly; ``loop="python"`` runs the Python loop, the
reference. A subclass that steers the proposals runs the Python loop, unless
its moves hand the compiled loop a ranking of moves at each refresh
(:class:`RankedMoves`, as learned_search's do): then Python ranks and the
compiled loop proposes, simulates and accepts.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from numba import njit

from ..cluster import Devices, as_cluster, num_devices
from ..graph import DataflowGraph
from .anytime import BestSoFar
from .base import Decision, Placer
from .best_constructive import constructive_methods, constructive_starts
from .registry import PlacerError

if TYPE_CHECKING:
    from tqdm import tqdm

    from ..sim import Evaluator, Trace

MOVE_KINDS = ("neighbour", "random", "swap", "critical", "group")
MOVE_WEIGHTS = (0.25, 0.1, 0.1, 0.25, 0.3)
_CUMULATIVE_WEIGHTS = np.cumsum(MOVE_WEIGHTS[:-1]) / np.sum(MOVE_WEIGHTS)
# Evaluations between refreshes of the critical chain (each refresh is one more simulation).
CRITICAL_REFRESH = 8
LOOPS = ("compiled", "python")
CHUNK_SECONDS = 0.02  # wall seconds of one stretch of the compiled loop between returns to Python (clock, any-time, progress)


class RankedMoves(NamedTuple):
    """The moves a steered :class:`Moves` ranked at the last refresh, which the compiled loop draws a share of its proposals
    from: move ``k`` sets op ``ops[k]`` (its whole group when ``grouped[k]``) to device ``targets[k]``; the steered rows take
    the best-keyed moves that change the placement, in turn; with ``screen``, the other rows that move one op to a device
    whose ``single_scores`` is below ``screen_below`` are redrawn (``LearnedMoves.propose`` is the reference)."""

    ops: np.ndarray  # int64, one per move
    grouped: np.ndarray  # bool, one per move
    targets: np.ndarray  # int64, one per move
    groups: np.ndarray  # int64 (ops, width): each op's group, padded with the op count
    keys: np.ndarray  # float64, one per move: higher first
    head: np.ndarray  # int64: the first moves by key, best first, none taken yet
    share: float  # the probability that a proposal is steered
    screen: bool  # whether local_search's own single-op proposals are screened
    single_scores: np.ndarray  # float64 (ops, devices): the score of moving op i to device j
    screen_below: float


class _Run(NamedTuple):
    """One search's objects, shared by its loop (Python or compiled)."""

    moves: Moves
    evaluator: Evaluator
    rng: np.random.Generator
    anytime: BestSoFar
    bar: tqdm
    began: float


class LocalSearchPlacer(Placer):
    """Simulated annealing from the best one-pass method with structure-aware moves.

    Args:
        budget: simulator evaluations, the starting heuristics included.
        time_limit: optional wall-time cap in seconds.
        initial_temperature: starting temperature as a fraction of the starting makespan.
        final_temperature: final temperature as a fraction of the starting makespan.
        max_batch: the most proposals simulated together.
        progress: show a tqdm progress bar.
        start: an assignment to start from instead of the best one-pass method
            (one evaluation instead of one per method).
        starts: the one-pass methods tried as starts when no ``start`` is given:
            ``"all"`` (heuristics, rules and baselines: the fair start) or
            ``"literature"`` (heuristics and baselines; the paper comparison).
        loop: ``"compiled"`` (numba, the default) or ``"python"`` (the reference). Both give the same trajectory for a
            seed; a subclass whose moves steer the proposals runs the Python loop unless they rank moves for the compiled
            loop (:class:`RankedMoves`). Under a ``time_limit`` the
            compiled loop reads the clock between stretches of evaluations (about 20 ms each), not before every batch.
    """

    def __init__(
        self,
        budget: int = 20_000,
        time_limit: float | None = None,
        initial_temperature: float = 0.03,
        final_temperature: float = 3e-4,
        max_batch: int = 16,
        progress: bool = False,
        start: np.ndarray | None = None,
        starts: str = "all",
        loop: str = "compiled",
    ) -> None:
        starts_needed = (len(constructive_methods(starts)) if start is None else 1) + self.extra_start_count()
        if int(budget) < starts_needed:
            raise PlacerError(f"budget must be at least {starts_needed} evaluations (one per starting assignment), got {budget}")
        if time_limit is not None and not time_limit > 0:
            raise PlacerError(f"time_limit must be > 0 seconds, got {time_limit}")
        if not 0 < final_temperature <= initial_temperature:
            raise PlacerError(f"need 0 < final_temperature <= initial_temperature, got {final_temperature} and {initial_temperature}")
        if max_batch < 1:
            raise PlacerError(f"max_batch must be >= 1, got {max_batch}")
        if loop not in LOOPS:
            raise PlacerError(f"loop must be one of {', '.join(LOOPS)}, got {loop!r}")
        self.budget = int(budget)
        self.time_limit = time_limit
        self.initial_temperature = float(initial_temperature)
        self.final_temperature = float(final_temperature)
        self.max_batch = int(max_batch)
        self.progress = progress
        self.start = start
        self.starts = starts
        self.loop = loop

    # Evaluations between trace refreshes, and whether the first refresh precedes any proposal (a steered subclass may change both).
    refresh_every: int = CRITICAL_REFRESH
    refresh_at_start: bool = False

    def moves(self, graph: DataflowGraph, devices: Devices, rng: np.random.Generator) -> Moves:
        """The proposal generator of one run (a subclass may steer the proposals, under the same loop and acceptance rule)."""
        return Moves(graph, devices, rng)

    def extra_start_count(self) -> int:
        """How many starts :meth:`extra_starts` adds (counted in the budget's minimum; called before the options are set)."""
        return 0

    def extra_starts(self, graph: DataflowGraph, devices: Devices) -> dict[str, np.ndarray]:
        """Starting assignments, by name, that join the given start or the one-pass methods' (one counted evaluation each;
        a subclass may add some)."""
        return {}

    def place(self, graph: DataflowGraph, devices: Devices, seed: int = 0) -> Decision:
        from ..sim import AssignmentError, Evaluator, check_assignment

        began, began_cpu = time.perf_counter(), time.process_time()
        rng = np.random.default_rng(seed)
        evaluator = Evaluator(graph, devices)
        if self.start is not None:
            try:
                names, starts = ["given"], check_assignment(graph, self.start, devices)[None]
            except AssignmentError as exc:
                raise PlacerError(
                    f"start must give each of the {graph.num_nodes} ops a device in 0..{num_devices(devices) - 1}: {exc}"
                ) from None
        else:
            names, starts = constructive_starts(graph, devices, self.starts)
        extra = self.extra_starts(graph, devices)
        if extra:
            names, starts = names + list(extra), np.concatenate([starts, np.array(list(extra.values()), dtype=np.int64)])
        start_makespans = np.atleast_1d(evaluator(starts))
        anytime = BestSoFar(began_cpu)
        anytime.add(start_makespans)
        first = int(np.argmin(start_makespans))
        moves = self.moves(graph, devices, rng)
        current, current_makespan = starts[first].copy(), float(start_makespans[first])
        best, best_makespan = current.copy(), current_makespan
        bar = _progress_bar(self.budget, self.progress)
        if graph.num_nodes and moves.num_devices > 1:
            # a subclass's own declaration only: a subclass of it that changes the proposals runs the Python loop unless it declares too
            compiled = self.loop == "compiled" and (type(moves) is Moves or vars(type(moves)).get("compiled_steering", False))
            loop = self._compiled_loop if compiled else self._python_loop
            best, best_makespan = loop(_Run(moves, evaluator, rng, anytime, bar, began), current, current_makespan)
        bar.close()
        return Decision(
            best,
            details={
                "evaluations": evaluator.evaluations,
                "start_method": names[first],
                "start_makespan": float(start_makespans[first]),
                "anytime": anytime.points,
            },
        )

    def _python_loop(self, run: _Run, current: np.ndarray, current_makespan: float) -> tuple[np.ndarray, float]:
        """The search loop in Python (the reference, and the loop of moves a subclass steers); returns the best assignment
        and its makespan."""
        moves, evaluator, rng, anytime, bar, began = run
        best, best_makespan = current.copy(), current_makespan
        scale = max(current_makespan, float(np.finfo(float).tiny))
        acceptance, since_refresh, stale = 0.5, self.refresh_every if self.refresh_at_start else 0, True
        while evaluator.evaluations < self.budget:
            elapsed = time.perf_counter() - began
            if self.time_limit is not None and elapsed >= self.time_limit:
                break
            done = evaluator.evaluations / self.budget
            if self.time_limit is not None:
                done = max(done, elapsed / self.time_limit)
            temperature = scale * self.initial_temperature * (self.final_temperature / self.initial_temperature) ** done
            if stale and since_refresh >= self.refresh_every and evaluator.evaluations < self.budget - 1:
                moves.set_critical(current, evaluator)
                stale, since_refresh = False, 0
            size = int(min(self.max_batch, self.budget - evaluator.evaluations, max(1, round(1 / max(acceptance, 1e-3)))))
            proposals = moves.propose(current, size)
            makespans = np.atleast_1d(evaluator(proposals))
            anytime.add(makespans, evaluator.evaluations)
            since_refresh += size
            bar.update(size)
            increase = makespans - current_makespan
            accepted = np.flatnonzero((increase <= 0) | (rng.random(size) < np.exp(-np.maximum(increase, 0) / temperature)))
            lowest = int(np.argmin(makespans))
            if makespans[lowest] < best_makespan:
                best, best_makespan = proposals[lowest].copy(), float(makespans[lowest])
                bar.set_postfix(best=f"{best_makespan:.6g}")
            if accepted.size:
                pick = int(accepted[0])
                current, current_makespan = proposals[pick].copy(), float(makespans[pick])
                stale = True
                acceptance = 0.9 * acceptance + 0.1 / (pick + 1)
            else:
                acceptance = 0.9 * acceptance + 0.05 / size
        return best, best_makespan

    def _compiled_loop(self, run: _Run, current: np.ndarray, current_makespan: float) -> tuple[np.ndarray, float]:
        """:meth:`_python_loop` in :func:`~workbench.placers.local_search_kernel.search_steps`, called for stretches of about
        :data:`CHUNK_SECONDS`, and, for steered moves, back in Python at each refresh to rank the moves; ``rng`` and
        ``moves.critical`` end as the Python loop leaves them."""
        from ..sim.resume import checkpoint_set, checkpoints_for
        from . import local_search_kernel as kernel

        moves, evaluator, rng, anytime, bar, began = run
        graph = moves.graph
        n = graph.num_nodes
        ptr, pred, edge = graph.pred_csr
        words = kernel.pcg64_state(rng)
        current = np.array(current, dtype=np.int64)
        best = current.copy()
        critical = np.arange(n, dtype=np.int64)
        counts = np.zeros(11, dtype=np.int64)
        counts[kernel.EVALUATIONS], counts[kernel.STALE], counts[kernel.CRITICAL_SIZE] = evaluator.evaluations, 1, n
        counts[kernel.SINCE_REFRESH] = self.refresh_every if self.refresh_at_start else 0
        counts[kernel.RETURN_AT_REFRESH] = type(moves) is not Moves
        values = np.array([current_makespan, current_makespan, 0.5, 0.0])
        settings = np.array([self.budget, self.max_batch, self.refresh_every, moves.num_devices], dtype=np.int64)
        temperatures = np.array([max(current_makespan, float(np.finfo(float).tiny)), self.initial_temperature, self.final_temperature])
        static = (evaluator.kernel_arrays, ptr, pred, np.ascontiguousarray(graph.comm[edge]), moves.nb_ptr, moves.nb, _CUMULATIVE_WEIGHTS)
        times = (np.empty(n), np.empty(n), np.empty(n))
        steer = _kernel_ranking(None, n, moves.num_devices)
        recording = checkpoints_for(n, graph.num_edges)
        checkpoints = tuple(checkpoint_set(n, graph.num_edges, moves.num_devices, recording) for _ in range(2))
        chunk = 16
        while counts[kernel.EVALUATIONS] < self.budget:
            elapsed = time.perf_counter() - began
            if self.time_limit is not None and elapsed >= self.time_limit:
                break
            before, best_before = int(counts[kernel.EVALUATIONS]), float(values[kernel.BEST_MAKESPAN])
            point_evaluations, point_makespans = np.empty(chunk + self.max_batch + 1, dtype=np.int64), np.empty(chunk + self.max_batch + 1)
            counts[kernel.POINTS] = 0
            kernel.search_steps(
                *static,
                settings,
                temperatures,
                words,
                current,
                best,
                critical,
                counts,
                values,
                point_evaluations,
                point_makespans,
                before + chunk,
                0.0 if self.time_limit is None else elapsed / self.time_limit,
                times,
                steer,
                checkpoints,
            )
            points = int(counts[kernel.POINTS])
            evaluator.evaluations = int(counts[kernel.EVALUATIONS])
            anytime.extend(point_evaluations[:points], point_makespans[:points], evaluator.evaluations)
            bar.update(evaluator.evaluations - before)
            if values[kernel.BEST_MAKESPAN] < best_before:
                bar.set_postfix(best=f"{values[kernel.BEST_MAKESPAN]:.6g}")
            spent = time.perf_counter() - began - elapsed
            chunk = int(min(max((evaluator.evaluations - before) * CHUNK_SECONDS / max(spent, 1e-6), 16), 1 << 16))
            if counts[kernel.REFRESHED]:  # the moves rank the refreshed placement's moves, drawing from the same stream
                kernel.set_pcg64_state(rng, words)
                moves.critical = critical[: counts[kernel.CRITICAL_SIZE]].copy()
                moves.observe(current.copy(), _trace(current, times))
                words[:] = kernel.pcg64_state(rng)
                ranked = moves.ranked_moves()
                steer = _kernel_ranking(ranked, n, moves.num_devices)
                counts[kernel.STEERING] = ranked is not None
                counts[kernel.SCREENING] = ranked is not None and ranked.screen
                counts[kernel.TAKEN], counts[kernel.SORTED] = 0, 0 if ranked is None else ranked.head.size
        kernel.set_pcg64_state(rng, words)
        moves.critical = critical[: counts[kernel.CRITICAL_SIZE]].copy()
        return best, float(values[kernel.BEST_MAKESPAN])


def _trace(assignment: np.ndarray, times: tuple[np.ndarray, np.ndarray, np.ndarray]) -> Trace:
    """The trace of a refresh as the compiled loop leaves it: the ops' ready, start and end times (no transfers)."""
    from ..sim import Trace

    ready, start, end = (t.copy() for t in times)
    empty = np.zeros(0, dtype=np.int64)
    return Trace(assignment.copy(), ready, start, end, empty, empty, empty, empty, np.zeros(0), np.zeros(0))


def _kernel_ranking(ranked: RankedMoves | None, n: int, num_devices: int) -> tuple:
    """``ranked`` as :func:`~workbench.placers.local_search_kernel.search_steps` reads it (placeholders when None)."""
    if ranked is None:
        empty = np.zeros(0, dtype=np.int64)
        return (
            empty,
            np.zeros(0),
            empty,
            np.zeros(0, dtype=np.bool_),
            empty,
            np.zeros((n, 1), dtype=np.int64),
            np.zeros((n, num_devices)),
            np.zeros(2),
        )
    order = np.empty(ranked.keys.size, dtype=np.int64)
    order[: ranked.head.size] = ranked.head
    return (
        order,
        np.ascontiguousarray(ranked.keys, dtype=np.float64),
        np.ascontiguousarray(ranked.ops, dtype=np.int64),
        np.ascontiguousarray(ranked.grouped, dtype=np.bool_),
        np.ascontiguousarray(ranked.targets, dtype=np.int64),
        np.ascontiguousarray(ranked.groups, dtype=np.int64),
        np.ascontiguousarray(ranked.single_scores, dtype=np.float64),
        np.array([ranked.share, ranked.screen_below]),
    )


class Moves:
    """Proposal generator: each proposal is the current assignment with one structured change."""

    def __init__(self, graph: DataflowGraph, devices: Devices, rng: np.random.Generator) -> None:
        self.graph = graph
        self.num_devices = num_devices(devices)
        self.cluster = as_cluster(devices)
        self.rng = rng
        n = graph.num_nodes
        pairs = np.concatenate([np.stack([graph.src, graph.dst]), np.stack([graph.dst, graph.src])], axis=1)
        order = np.lexsort((pairs[1], pairs[0]))
        self.nb_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(pairs[0], minlength=n), out=self.nb_ptr[1:])
        self.nb = pairs[1][order]
        self.critical = np.arange(n)

    # Whether the compiled loop reproduces this class's proposals from :meth:`ranked_moves` (else it runs the Python loop);
    # read from the class's own attributes, not inherited.
    compiled_steering: bool = False

    def ranked_moves(self) -> RankedMoves | None:
        """The moves ranked at the last :meth:`observe`, for the compiled loop to steer with (None: local_search's moves only)."""
        return None

    def neighbours(self, op: int) -> np.ndarray:
        return self.nb[self.nb_ptr[op] : self.nb_ptr[op + 1]]

    def set_critical(self, assignment: np.ndarray, evaluator: Evaluator) -> None:
        """Recompute the critical chain of ``assignment`` from its simulated trace (one evaluation)."""
        from ..sim import simulate

        evaluator.evaluations += 1
        trace = simulate(self.graph, assignment, self.cluster).trace
        self.critical = critical_chain(self.graph, assignment, trace.ready, trace.start, trace.end)
        self.observe(assignment, trace)

    def observe(self, assignment: np.ndarray, trace: Trace) -> None:
        """Called with each simulated trace of the current assignment (nothing here; a steered subclass reads it)."""

    def _other_device(self, device: int) -> int:
        return int((device + self.rng.integers(1, self.num_devices)) % self.num_devices)

    def _neighbour_device(self, assignment: np.ndarray, op: int) -> int:
        devices = assignment[self.neighbours(op)]
        devices = devices[devices != assignment[op]]
        return int(devices[self.rng.integers(devices.size)]) if devices.size else self._other_device(int(assignment[op]))

    def group(self, assignment: np.ndarray, op: int, limit: int) -> list[int]:
        """``op`` and up to ``limit - 1`` ops reached from it through neighbours on the same device (breadth first)."""
        group, frontier, device = {op}, [op], assignment[op]
        while frontier and len(group) < limit:
            for v in self.neighbours(frontier.pop(0)):
                if assignment[v] == device and int(v) not in group and len(group) < limit:
                    group.add(int(v))
                    frontier.append(int(v))
        return list(group)

    def propose(self, assignment: np.ndarray, count: int) -> np.ndarray:
        rng = self.rng
        n = assignment.size
        out = np.repeat(assignment[None, :], count, axis=0)
        kinds = np.searchsorted(_CUMULATIVE_WEIGHTS, rng.random(count), side="right")
        ops = rng.integers(0, n, size=count)
        critical = self.critical[rng.integers(0, self.critical.size, size=count)]
        for row, kind in enumerate(kinds):
            name = MOVE_KINDS[kind]
            op = int(critical[row] if name == "critical" else ops[row])
            if name == "random":
                out[row, op] = self._other_device(int(assignment[op]))
            elif name in ("neighbour", "critical"):
                if name == "critical" and rng.random() < 0.3:
                    out[row, op] = self._other_device(int(assignment[op]))
                else:
                    out[row, op] = self._neighbour_device(assignment, op)
            elif name == "swap":
                other = int(rng.integers(n))
                if assignment[other] == assignment[op]:
                    out[row, op] = self._other_device(int(assignment[op]))
                else:
                    out[row, op], out[row, other] = assignment[other], assignment[op]
            else:
                out[row, self.group(assignment, op, int(rng.integers(2, 9)))] = self._other_device(int(assignment[op]))
        return out


def critical_chain(graph: DataflowGraph, assignment: np.ndarray, ready: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The ops of the chain that ends at the makespan: each waited either for its last input or for its device."""
    ptr, pred, edge = graph.pred_csr
    return _critical_chain(ptr, pred, graph.comm[edge], np.asarray(assignment, dtype=np.int64), ready, start, end)


@njit(cache=True)
def _critical_chain(
    ptr: np.ndarray, pred: np.ndarray, pred_comm: np.ndarray, assignment: np.ndarray, ready: np.ndarray, start: np.ndarray, end: np.ndarray
) -> np.ndarray:  # pragma: no cover - compiled
    n = assignment.size
    chain = np.empty(n, dtype=np.int64)
    if n == 0:
        return chain
    by_end = np.empty(0, dtype=np.int64)  # ops by (device, end, start, id), sorted at the first device wait
    device_ptr = np.empty(0, dtype=np.int64)
    op = int(np.argmax(end))
    length = 0
    while True:
        chain[length] = op
        length += 1
        previous = -1
        if start[op] > ready[op]:  # waited for its device: the op that ran there just before (the smallest id if several)
            if by_end.size == 0:
                by_end, device_ptr = _by_device_and_end(assignment, start, end)
            lo, hi = device_ptr[assignment[op]], device_ptr[assignment[op] + 1]
            while lo < hi:  # the first of the device's ops that ends at or after ``op`` starts
                mid = (lo + hi) // 2
                if end[by_end[mid]] < start[op]:
                    lo = mid + 1
                else:
                    hi = mid
            for k in range(lo, device_ptr[assignment[op] + 1]):
                v = by_end[k]
                if end[v] != start[op] or start[v] >= start[op]:  # past those ending then, or at ops that start then
                    break
                if previous < 0 or v < previous:
                    previous = v
        else:  # waited for its last input
            latest = -1.0
            for k in range(ptr[op], ptr[op + 1]):
                u = pred[k]
                arrival = end[u] + (pred_comm[k] if assignment[u] != assignment[op] else 0.0)
                if arrival > latest:
                    latest, previous = arrival, u
        if previous < 0 or length == n:  # inputs are earlier in the DAG, device waits earlier in time
            break
        op = previous
    return chain[:length]


@njit(cache=True)
def _by_device_and_end(assignment: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """Ops sorted by (device, end, start, id), and each device's first position in that order."""
    order = np.argsort(start, kind="mergesort")
    order = order[np.argsort(end[order], kind="mergesort")]
    device_ptr = np.zeros(int(assignment.max()) + 2, dtype=np.int64)
    for v in range(assignment.size):
        device_ptr[assignment[v] + 1] += 1
    device_ptr = np.cumsum(device_ptr)
    filled = device_ptr[:-1].copy()
    by_end = np.empty(assignment.size, dtype=np.int64)
    for v in order:
        by_end[filled[assignment[v]]] = v
        filled[assignment[v]] += 1
    return by_end, device_ptr


def _progress_bar(total: int, enabled: bool) -> tqdm:
    from ..progress import progress_bar

    return progress_bar(total=total, disable=not enabled, unit="eval", desc="local search")
