"""Learned search: local_search's annealing with part of its proposals chosen by a learned move scorer.

A learned improvement operator in the manner of NeuRewriter (Chen & Tian,
NeurIPS 2019) and L2S (Zhang et al., ICLR 2024), used inside a search whose
evaluations it steers, as REGAL (Paliwal et al., ICLR 2020) steers a genetic
search. The state is a complete placement with its simulated trace; an
action moves one op, or a connected group of ops on one device, to a target
device. Every candidate action is described by per-(op, device) features
(:func:`move_features`: the op's slack, transfer wait, device wait and place
on the critical chain, its cost and communication with each device, each
device's load against a balanced share), so one small MLP scores all of them
in one forward pass at any device count, with no simulation.

:class:`LearnedSearchPlacer` is :class:`~workbench.placers.local_search.LocalSearchPlacer`
(same loop, same acceptance rule, same evaluation count and budget) whose
:class:`LearnedMoves` replace a share of each batch of proposals with the
scorer's: each time local_search simulates the current placement's trace
(to find its critical chain), the scorer ranks every move of that placement
and proposals are drawn from the ranking without replacement (Gumbel top-k).
The scorer is trained across the corpus's training split
(:mod:`workbench.training.learned_search`) to rank moves by their simulated
makespan decrease.

The search runs in local_search's compiled loop (issue 32): at each refresh
the loop returns to Python, which builds the features (one compiled pass),
scores them (torch, float32) and draws the Gumbel keys; the loop then draws
the steered proposals from that ranking (:class:`~workbench.placers.local_search.RankedMoves`),
simulates and accepts. ``loop="python"`` runs :meth:`LearnedMoves.propose`
in the Python loop, the reference: for a seed both give the same trajectory.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from numba import njit

from ..cluster import Devices, num_devices
from ..datasets import DATASETS_DIR
from ..graph import DataflowGraph
from ..placers.base import Decision
from ..placers.local_search import CRITICAL_REFRESH, LocalSearchPlacer, Moves, RankedMoves
from ..placers.registry import PlacerError
from ..runs import checkpoint_file
from ..sim import Trace
from .checkpoint import CheckpointError
from .move_scorer import FEATURES, METHOD, MoveScorer, ScorerConfig, load_scorer, save_scorer

__all__ = [
    "FEATURES",
    "GROUP_LIMIT",
    "AUTO_CRITICAL_MOVES",
    "DEFAULT_SHARE",
    "MoveScorer",
    "ScorerConfig",
    "Candidates",
    "move_features",
    "LearnedMoves",
    "LearnedSearchPlacer",
    "save_scorer",
    "load_scorer",
    "PRETRAINED_SCORER",
]

PRETRAINED_SCORER = checkpoint_file(DATASETS_DIR / "pretrained" / METHOD, METHOD)
# The fraction of proposals the scorer chooses by default.
DEFAULT_SHARE = 0.5
# Which moves the scorer ranks (LearnedSearchPlacer's ``focus``): "auto" is "critical" from AUTO_CRITICAL_MOVES single moves up.
FOCUS = ("auto", "all", "critical")
# The single-op move count (ops x (devices - 1)) from which focus="auto" ranks the critical chain's moves only: a 10,000-op
# graph at 8 devices has 70,000 (and about 106,000 candidates with its group moves), where scoring them all is most of a
# refresh's CPU; the paper graphs and the corpus's test split stay well below it.
AUTO_CRITICAL_MOVES = 20_000
# The first block of the scorer's ranking that is sorted (the rest only once a refresh's proposals use it up).
RANKED_BLOCK = 64
# The largest connected same-device group a group move takes along.
GROUP_LIMIT = 4
# How many times a screened-out proposal of local_search's is redrawn (the last draw stands).
SCREEN_TRIES = 4


@contextlib.contextmanager
def _torch_threads(count: int) -> Iterator[None]:
    """torch on ``count`` threads inside the block, as before it after (no change, and no cost, where it already is)."""
    before = torch.get_num_threads()
    if before != count:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        if before != count:
            torch.set_num_threads(before)


@dataclass(frozen=True)
class Candidates:
    """Every move of one placement: op ``ops[k]`` (its whole group when ``grouped[k]``) to ``targets[k]``, described by ``features[k]``."""

    ops: np.ndarray
    grouped: np.ndarray
    targets: np.ndarray
    features: np.ndarray
    groups: np.ndarray  # row i: op i's group, sorted, padded with the op count

    def members(self, k: int) -> np.ndarray:
        op = int(self.ops[k])
        if not self.grouped[k]:
            return np.array([op])
        row = self.groups[op]
        return row[row < self.groups.shape[0]]

    def apply(self, assignment: np.ndarray, k: int) -> np.ndarray:
        moved = assignment.copy()
        moved[self.members(k)] = self.targets[k]
        return moved


def _tail(graph: DataflowGraph, assignment: np.ndarray) -> np.ndarray:
    """Longest path after each op to a sink (successors' compute plus cross-device communication)."""
    ptr, succ, edge = graph.succ_csr
    return _tail_kernel(ptr, succ, graph.comm[edge], graph.compute, graph.topological_order, assignment)


@njit(cache=True)
def _tail_kernel(
    ptr: np.ndarray, succ: np.ndarray, comm: np.ndarray, compute: np.ndarray, order: np.ndarray, assignment: np.ndarray
) -> np.ndarray:  # pragma: no cover - compiled
    tail = np.zeros(compute.size)
    for i in range(order.size - 1, -1, -1):
        op = order[i]
        for k in range(ptr[op], ptr[op + 1]):
            s = succ[k]
            length = compute[s] + tail[s] + (comm[k] if assignment[s] != assignment[op] else 0.0)
            if length > tail[op]:
                tail[op] = length
    return tail


def _groups(moves: Moves, assignment: np.ndarray) -> np.ndarray:
    """Each op's connected same-device group of up to :data:`GROUP_LIMIT` ops (breadth first, as ``Moves.group``): row i
    holds op i's group sorted, padded with the op count."""
    return _groups_kernel(moves.nb_ptr, moves.nb, assignment, GROUP_LIMIT)


@njit(cache=True)
def _groups_kernel(nb_ptr: np.ndarray, nb: np.ndarray, assignment: np.ndarray, limit: int) -> np.ndarray:  # pragma: no cover - compiled
    n = assignment.size
    out = np.full((n, limit), n, dtype=np.int64)
    for op in range(n):
        out[op, 0] = op
        size, head = 1, 0
        while head < size and size < limit:
            u = out[op, head]
            head += 1
            for k in range(nb_ptr[u], nb_ptr[u + 1]):
                v = nb[k]
                if size < limit and assignment[v] == assignment[op]:
                    seen = False
                    for j in range(size):
                        if out[op, j] == v:
                            seen = True
                    if not seen:
                        out[op, size] = v
                        size += 1
        for i in range(1, size):  # sorted by insertion (the padding, the op count, stays last)
            j = i
            while j > 0 and out[op, j - 1] > out[op, j]:
                out[op, j - 1], out[op, j] = out[op, j], out[op, j - 1]
                j -= 1
    return out


def move_features(moves: Moves, assignment: np.ndarray, trace: Trace, critical: np.ndarray, only: np.ndarray | None = None) -> Candidates:
    """Every single-op and group move of ``assignment`` (to each other device) with its :data:`FEATURES` (float32, built in
    one compiled pass); with ``only`` (a boolean mask over ops), the moves of those ops alone (the features of each move are
    the same either way). Rows: the single-op moves, then the group moves; within each, shift-major (every op to the next
    device, then every op to the one after, ...), ops in increasing order."""
    graph, d = moves.graph, moves.num_devices
    n = graph.num_nodes
    a = np.asarray(assignment, dtype=np.int64)
    span = max(trace.makespan, float(np.finfo(float).tiny))
    share = max(float(graph.compute.sum()) / d, float(np.finfo(float).tiny))
    groups = _groups(moves, a)
    ptr, succ, edge = graph.succ_csr
    ops, grouped, targets, features = _features_kernel(
        graph.compute,
        graph.src,
        graph.dst,
        graph.comm,
        ptr,
        succ,
        np.ascontiguousarray(graph.comm[edge]),
        graph.topological_order,
        a,
        np.asarray(trace.ready, dtype=np.float64),
        np.asarray(trace.start, dtype=np.float64),
        np.asarray(trace.end, dtype=np.float64),
        np.asarray(critical, dtype=np.int64),
        groups,
        np.ones(n, dtype=np.bool_) if only is None else np.asarray(only, dtype=np.bool_),
        d,
        span,
        share,
    )
    return Candidates(ops, grouped, targets, features, groups)


@njit(cache=True)
def _features_kernel(
    compute: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    comm: np.ndarray,
    succ_ptr: np.ndarray,
    succ: np.ndarray,
    succ_comm: np.ndarray,
    order: np.ndarray,
    a: np.ndarray,
    ready: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    critical: np.ndarray,
    groups: np.ndarray,
    only: np.ndarray,
    d: int,
    span: float,
    share: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """:func:`move_features`'s candidates (ops, grouped, targets) and their feature rows."""
    n = a.size
    tail = _tail_kernel(succ_ptr, succ, succ_comm, compute, order, a)
    load, finish, chain_load = np.zeros(d), np.zeros(d), np.zeros(d)
    for v in range(n):
        load[a[v]] += compute[v]
        finish[a[v]] = max(finish[a[v]], end[v])
    comm_with = np.zeros((n, d))  # communication of each op with the ops on each device
    latest_input = np.zeros(n)
    for e in range(src.size):  # the senders' sides first, then the receivers', in edge order
        comm_with[src[e], a[dst[e]]] += comm[e]
        latest_input[dst[e]] = max(latest_input[dst[e]], end[src[e]])
    for e in range(src.size):
        comm_with[dst[e], a[src[e]]] += comm[e]
    on_chain = np.zeros(n)
    for v in critical:
        on_chain[v] = 1.0
        chain_load[a[v]] += compute[v]
    chain_total = max(chain_load.sum(), np.finfo(np.float64).tiny)
    for j in range(d):
        chain_load[j] /= chain_total
    sizes = np.zeros(n, dtype=np.int64)
    for v in range(n):
        for j in range(groups.shape[1]):
            sizes[v] += groups[v, j] < n
    movers = 0
    for v in range(n):
        movers += only[v] + (only[v] and sizes[v] > 1)
    m = movers * (d - 1)
    ops, grouped, targets = np.empty(m, dtype=np.int64), np.zeros(m, dtype=np.bool_), np.empty(m, dtype=np.int64)
    features = np.empty((m, 18), dtype=np.float32)
    moved_comm = np.zeros(d)
    row = 0
    for group_move in (False, True):
        for shift in range(1, d):
            for v in range(n):
                if not only[v] or (group_move and sizes[v] < 2):
                    continue
                moved_compute, moved_total = 0.0, 0.0
                moved_comm[:] = 0.0
                for j in range(sizes[v] if group_move else 1):
                    u = groups[v, j] if group_move else v
                    moved_compute += compute[u]
                    for k in range(d):
                        moved_comm[k] += comm_with[u, k]
                for k in range(d):
                    moved_total += moved_comm[k]
                own, target = a[v], (a[v] + shift) % d
                ops[row], grouped[row], targets[row] = v, group_move, target
                f = features[row]
                f[0] = moved_compute / span
                f[1] = start[v] / span
                f[2] = end[v] / span
                f[3] = (span - end[v] - tail[v]) / span
                f[4] = max(ready[v] - latest_input[v], 0.0) / span
                f[5] = (start[v] - ready[v]) / span
                f[6] = on_chain[v]
                f[7] = load[own] / share
                f[8] = load[target] / share
                f[9] = finish[target] / span
                f[10] = moved_comm[target] / span
                f[11] = moved_comm[own] / span
                f[12] = moved_total / span
                f[13] = chain_load[own]
                f[14] = chain_load[target]
                f[15] = 1.0 if group_move else 0.0
                f[16] = (sizes[v] if group_move else 1) / groups.shape[1]
                f[17] = 1.0 / d
                row += 1
    return ops, grouped, targets, features


class LearnedMoves(Moves):
    """local_search's moves, a share of each batch replaced by the scorer's best-ranked moves of the last observed placement;
    with ``screen`` > 0, local_search's own single-op moves that the scorer ranks in that lowest fraction are redrawn."""

    def __init__(
        self,
        graph: DataflowGraph,
        devices: Devices,
        rng: np.random.Generator,
        scorer: MoveScorer,
        share: float,
        temperature: float,
        screen: float = 0.0,
        focus: str = "auto",
    ) -> None:
        super().__init__(graph, devices, rng)
        self.scorer, self.share, self.temperature, self.screen = scorer, share, temperature, screen
        self.score = scorer.scoring()  # the weights copied once for the search's refreshes
        self.candidates: Candidates | None = None
        self.keys = np.zeros(0)  # each candidate's score / temperature + Gumbel noise: the ranking's key, higher first
        self.ranking = np.zeros(0, dtype=np.int64)  # the best candidates, best first, as far as sorted (RANKED_BLOCK, doubling)
        self.taken = 0  # how many of the ranking the proposals have used
        if focus == "auto":
            focus = "critical" if graph.num_nodes * (self.num_devices - 1) >= AUTO_CRITICAL_MOVES else "all"
        self.focus = focus
        self.nb_owner = np.repeat(np.arange(graph.num_nodes), np.diff(self.nb_ptr))  # the op whose neighbour nb[k] is
        self.single_scores = np.zeros((graph.num_nodes, self.num_devices))  # the scorer's score of moving op i to device j
        self.screen_below = -np.inf

    def observe(self, assignment: np.ndarray, trace: Trace) -> None:
        if self.share == 0 and self.screen == 0:  # local_search's own moves only: the ranking would go unused
            return
        only = None
        if self.focus == "critical":  # the critical chain's ops and their neighbours: the moves that can shorten the makespan
            on_chain = np.zeros(self.graph.num_nodes, dtype=bool)
            on_chain[self.critical] = True
            only = on_chain.copy()
            only[self.nb[on_chain[self.nb_owner]]] = True  # every neighbour of a chain op
        self.candidates = move_features(self, assignment, trace, self.critical, only)
        raw = self.score(self.candidates.features)
        self.keys = raw / self.temperature + self.rng.gumbel(size=raw.size)
        self.ranking, self.taken = self._ranked(RANKED_BLOCK), 0
        if self.screen > 0:
            single = ~self.candidates.grouped
            self.single_scores[self.candidates.ops[single], self.candidates.targets[single]] = raw[single]
            self.screen_below = float(np.quantile(raw[single], self.screen))

    compiled_steering = True  # propose is reproduced by local_search's compiled loop from ranked_moves

    def ranked_moves(self) -> RankedMoves | None:
        if self.candidates is None:
            return None
        c = self.candidates
        return RankedMoves(
            c.ops,
            c.grouped,
            c.targets,
            c.groups,
            self.keys,
            self.ranking,
            self.share,
            self.screen > 0,
            self.single_scores,
            self.screen_below,
        )

    def _ranked(self, size: int) -> np.ndarray:
        """The ``size`` best candidates by key, best first: the head of a full descending sort, found by partition (a
        refresh's proposals use a handful of the ranking; sorting all of a large graph's candidates cost more than scoring)."""
        keys = self.keys
        if size >= keys.size:
            return np.argsort(-keys)
        top = np.argpartition(-keys, size - 1)[:size]
        return top[np.argsort(-keys[top])]

    def _next_candidate(self) -> int | None:
        """The best candidate the proposals have not used since the last observation (None when all are used)."""
        if self.taken == self.ranking.size:
            if self.taken == self.keys.size:
                return None
            self.ranking = self._ranked(2 * self.ranking.size)
        self.taken += 1
        return int(self.ranking[self.taken - 1])

    def _screened_out(self, assignment: np.ndarray, proposal: np.ndarray) -> bool:
        """Whether ``proposal`` moves one op to a device the scorer ranks in its lowest ``screen`` fraction."""
        changed = np.flatnonzero(proposal != assignment)
        return changed.size == 1 and self.single_scores[changed[0], proposal[changed[0]]] < self.screen_below

    def propose(self, assignment: np.ndarray, count: int) -> np.ndarray:
        out = super().propose(assignment, count)
        if self.candidates is None:
            return out
        steered = self.rng.random(count) < self.share
        for row in np.flatnonzero(steered):
            while (k := self._next_candidate()) is not None:
                moved = self.candidates.apply(assignment, k)
                if not np.array_equal(moved, assignment):
                    out[row] = moved
                    break
        if self.screen > 0:
            for row in np.flatnonzero(~steered):
                for _ in range(SCREEN_TRIES):
                    if not self._screened_out(assignment, out[row]):
                        break
                    out[row] = super().propose(assignment, 1)[0]
        return out


class LearnedSearchPlacer(LocalSearchPlacer):
    """local_search steered by a learned move scorer (module docstring); same budget, loop and acceptance rule.

    Args:
        checkpoint: the scorer's checkpoint (default: the shipped one, ``datasets/pretrained/learned_search/``), or a loaded scorer.
        share: the fraction of proposals the scorer chooses (the rest are local_search's own moves).
        temperature: softness of the draw from the scorer's ranking (0.05: nearly its top moves).
        refresh: evaluations between trace refreshes (each one counted evaluation that re-ranks the moves).
        screen: the fraction of single-op moves, lowest-ranked by the scorer, that local_search's own proposals avoid
            (such a proposal is redrawn up to ``SCREEN_TRIES`` times; 0: none).
        learned_start: refresh the trace before the first proposal, so the scorer's top moves of the
            starting heuristic are tried first (one evaluation of the budget).
        start_policy: a constructive policy's checkpoint (:func:`workbench.learn.load_policy`, e.g. one trained across
            the corpus): its greedy placement joins the one-pass methods, or the given ``start``, as a starting candidate
            (one more evaluation of the budget).
        focus: which moves the scorer ranks: ``"all"`` (every op's), ``"critical"`` (the critical chain's ops and their
            neighbours only: fewer features to build and score, so less CPU per evaluation), or ``"auto"`` (the default:
            ``"critical"`` from :data:`AUTO_CRITICAL_MOVES` single-op moves up, else ``"all"``).
        search: local_search's options (budget, time_limit, ...), see :class:`~workbench.placers.local_search.LocalSearchPlacer`.
    """

    def __init__(
        self,
        checkpoint: str | os.PathLike | MoveScorer | None = None,
        share: float = DEFAULT_SHARE,
        temperature: float = 0.05,
        refresh: int = CRITICAL_REFRESH,
        learned_start: bool = False,
        screen: float = 0.0,
        start_policy: str | os.PathLike | None = None,
        focus: str = "auto",
        **search: Any,
    ) -> None:
        self.start_policy = start_policy  # before local_search's checks: its start counts in the budget's minimum
        super().__init__(**search)
        if not 1 <= refresh:
            raise PlacerError(f"refresh must be >= 1 evaluation, got {refresh}")
        if not 0 <= screen < 1:
            raise PlacerError(f"screen must be in [0, 1), got {screen}")
        if focus not in FOCUS:
            raise PlacerError(f"focus must be one of {', '.join(FOCUS)}, got {focus!r}")
        if not 0 <= share <= 1:
            raise PlacerError(f"share must be in [0, 1], got {share}")
        if not temperature > 0:
            raise PlacerError(f"temperature must be > 0, got {temperature}")
        if isinstance(checkpoint, MoveScorer):
            self.scorer = checkpoint
        else:
            try:
                self.scorer = load_scorer(PRETRAINED_SCORER if checkpoint is None else checkpoint)
            except CheckpointError as exc:
                raise PlacerError(str(exc)) from None
        self.share, self.temperature = float(share), float(temperature)
        self.refresh_every, self.refresh_at_start, self.screen = int(refresh), bool(learned_start), float(screen)
        self.focus = focus
        if start_policy is not None:
            self._load_start_policy()  # a missing or damaged file is refused before any placement

    def extra_start_count(self) -> int:
        return int(self.start_policy is not None)

    def _load_start_policy(self, graph: DataflowGraph | None = None, devices: Devices | None = None) -> Any:
        from .policy import load_policy

        assert self.start_policy is not None
        try:
            return load_policy(self.start_policy, graph=graph, devices=devices)
        except (CheckpointError, OSError) as exc:
            raise PlacerError(f"start_policy: {exc}") from None

    def extra_starts(self, graph: DataflowGraph, devices: Devices) -> dict[str, np.ndarray]:
        """The start policy's greedy placement (no simulation to make it), when there is one; a policy not made for the graph is refused."""
        if self.start_policy is None:
            return {}
        with torch.no_grad():
            return {"start_policy": self._load_start_policy(graph, devices).rollout(graph, devices, mode="greedy").assignment}

    def place(self, graph: DataflowGraph, devices: Devices, seed: int = 0) -> Decision:
        """local_search's :meth:`~workbench.placers.local_search.LocalSearchPlacer.place`. From
        :data:`AUTO_CRITICAL_MOVES` single-op moves up, where scoring the candidates is most of a refresh, torch runs on
        one thread for the search (restored after): a switch of torch's thread count costs 10-40 ms, once per search is
        nothing there, and one thread scored a refresh in 16 CPU ms against 64 on two on a loaded 2-core machine. Such a
        search then places the same whatever torch's thread count (the scores' sums run in one order)."""
        large = graph.num_nodes * (num_devices(devices) - 1) >= AUTO_CRITICAL_MOVES
        with _torch_threads(1 if large else torch.get_num_threads()):
            return super().place(graph, devices, seed=seed)

    def moves(self, graph: DataflowGraph, devices: Devices, rng: np.random.Generator) -> Moves:
        if num_devices(devices) < 2:
            return Moves(graph, devices, rng)
        return LearnedMoves(graph, devices, rng, self.scorer, self.share, self.temperature, self.screen, self.focus)
