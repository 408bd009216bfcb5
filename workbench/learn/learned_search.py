"""Learned search: local_search's annealing with part of its proposals chosen by a learned move scorer.

A learned improvement operator in the manner of NeuRewriter (Chen & Tian,
NeurIPS 2019) and L2S (Zhang et al., ICLR 2024), used inside a search whose
evaluations it steers, as REGAL (Paliwal et al., ICLR 2020) steers a genetic
search. The state is a complete placement with its simulated trace; an
action moves one op, or a connected group of ops on one device, to a target
device (with ``groups``, also a structured group: a chain, an op with its sole
producers, a sharded tensor's row of blocks, a segment of the critical chain;
:mod:`workbench.placers.groups`, described by the same features summed over
it). Every candidate action is described by per-(op, device) features
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
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numba import njit
from torch import nn

from ..cluster import Devices, num_devices
from ..datasets import DATASETS_DIR
from ..graph import DataflowGraph
from ..placers.local_search import CRITICAL_REFRESH, LocalSearchPlacer, Moves
from ..placers.registry import PlacerError
from ..runs import checkpoint_file
from ..sim import Trace
from .checkpoint import CheckpointError, read_checkpoint, weight_shapes, write_checkpoint
from .fields import Field, check_config

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

METHOD = "learned_search"
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
FEATURES = (
    "compute",  # the moved ops' compute / makespan
    "start",  # the op's start / makespan
    "end",  # its end / makespan
    "slack",  # makespan - end - longest path after it, / makespan
    "transfer_wait",  # time its last input spent in transfer (ready - latest input end), / makespan
    "device_wait",  # time it waited for its device (start - ready), / makespan
    "critical",  # 1 when the op is on the critical chain
    "source_load",  # compute on its device / balanced share
    "target_load",  # compute on the target device / balanced share
    "target_finish",  # last end on the target device / makespan
    "comm_to_target",  # communication with ops on the target (saved by the move), / makespan
    "comm_to_source",  # communication with other ops on its own device (added by the move), / makespan
    "comm_total",  # all its communication / makespan
    "source_critical",  # share of the critical chain's compute on its own device
    "target_critical",  # share of the critical chain's compute on the target
    "group",  # 1 for a group move
    "group_size",  # ops moved / GROUP_LIMIT
    "inverse_devices",  # 1 / device count
)


@dataclass(frozen=True)
class ScorerConfig:
    """The move scorer's shape.

    Attributes:
        hidden: width of each hidden layer.
        layers: number of hidden layers.
    """

    hidden: int = 64
    layers: int = 2


class MoveScorer(nn.Module):
    """An MLP from one candidate move's features to a score (higher: more likely to lower the makespan)."""

    def __init__(self, config: ScorerConfig = ScorerConfig()) -> None:
        super().__init__()
        self.config = config
        widths = [len(FEATURES)] + [config.hidden] * config.layers
        layers: list[nn.Module] = []
        for a, b in zip(widths[:-1], widths[1:], strict=True):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Linear(widths[-1], 1))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net(features).squeeze(-1)

    @torch.no_grad()
    def score(self, features: np.ndarray) -> np.ndarray:
        """Scores of a 2-D feature array, computed in numpy (a few thousand rows: torch's per-call and thread costs would dominate)."""
        x = np.asarray(features, dtype=np.float32)
        linears = [m for m in self.net if isinstance(m, nn.Linear)]
        for i, layer in enumerate(linears):
            x = x @ layer.weight.numpy().T + layer.bias.numpy()
            if i < len(linears) - 1:
                x = np.maximum(x, 0.0)
        return x[:, 0].astype(np.float64)


@dataclass(frozen=True)
class Candidates:
    """Every move of one placement: op ``ops[k]`` (the group in row ``rows[k]`` of ``groups`` when ``grouped[k]``) to
    ``targets[k]``, described by ``features[k]``."""

    ops: np.ndarray
    grouped: np.ndarray
    targets: np.ndarray
    features: np.ndarray
    groups: np.ndarray  # row i < num_ops: op i's connected group; further rows: the structured groups; sorted, padded with num_ops
    rows: np.ndarray  # each candidate's row of groups (its op's for a single-op move)
    num_ops: int

    def members(self, k: int) -> np.ndarray:
        if not self.grouped[k]:
            return np.array([int(self.ops[k])])
        row = self.groups[self.rows[k]]
        return row[row < self.num_ops]

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
    padded = _groups_kernel(moves.nb_ptr, moves.nb, assignment, GROUP_LIMIT)
    return np.sort(np.where(padded < 0, assignment.size, padded), axis=1)


@njit(cache=True)
def _groups_kernel(nb_ptr: np.ndarray, nb: np.ndarray, assignment: np.ndarray, limit: int) -> np.ndarray:  # pragma: no cover - compiled
    n = assignment.size
    out = np.full((n, limit), -1, dtype=np.int64)
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
    return out


def move_features(
    moves: Moves,
    assignment: np.ndarray,
    trace: Trace,
    critical: np.ndarray,
    only: np.ndarray | None = None,
    structured: Sequence[np.ndarray] = (),
) -> Candidates:
    """Every single-op and group move of ``assignment`` (to each other device) with its :data:`FEATURES`; with ``only`` (a
    boolean mask over ops), the moves of those ops alone (the features of each move are the same either way).

    ``structured``: more groups (sorted op arrays, :mod:`workbench.placers.groups`), each moved whole to every device
    that changes it. A group is described by its op that ends last (its start, slack, waits, source device) and by
    its ops' compute and communication summed, as a connected group is; ``group_size`` is capped at 1."""
    graph, d = moves.graph, moves.num_devices
    n = graph.num_nodes
    a = np.asarray(assignment, dtype=np.int64)
    span = max(float(trace.makespan), float(np.finfo(float).tiny))
    compute = graph.compute
    load = np.bincount(a, weights=compute, minlength=d)
    share = max(compute.sum() / d, np.finfo(float).tiny)
    finish = np.zeros(d)
    np.maximum.at(finish, a, trace.end)
    # communication of each op with the ops on each device (summed in edge order, sender sides first, as np.add.at would)
    cells = np.concatenate([graph.src * d + a[graph.dst], graph.dst * d + a[graph.src]])
    comm_with = np.bincount(cells, weights=np.concatenate([graph.comm, graph.comm]), minlength=n * d).reshape(n, d)
    latest_input = np.zeros(n)
    np.maximum.at(latest_input, graph.dst, trace.end[graph.src])
    on_chain = np.zeros(n)
    on_chain[critical] = 1.0
    chain_load = np.bincount(a[critical], weights=compute[critical], minlength=d)
    chain_load = chain_load / max(chain_load.sum(), np.finfo(float).tiny)
    per_op = np.stack(
        [
            trace.start / span,
            trace.end / span,
            (span - trace.end - _tail(graph, a)) / span,
            np.maximum(trace.ready - latest_input, 0.0) / span,
            (trace.start - trace.ready) / span,
            on_chain,
            load[a] / share,
            chain_load[a],
        ],
        axis=1,
    )
    groups = _groups(moves, a)
    sizes = np.count_nonzero(groups < n, axis=1)
    blocks: list[np.ndarray] = []
    chosen: list[np.ndarray] = []
    for grouped in (False, True):
        movable = (sizes > 1) if grouped else np.ones(n, dtype=bool)
        ops = np.flatnonzero(movable if only is None else movable & only)
        if not ops.size:
            continue
        if grouped:  # sums in the group's sorted order, the padding adding exact zeros
            op_compute = np.append(compute, 0.0)[groups[ops]].sum(axis=1)
            op_comm = np.vstack([comm_with, np.zeros((1, d))])[groups[ops]].sum(axis=1)
        else:
            op_compute, op_comm = compute[ops], comm_with[ops]
        shifts = np.arange(1, d)[:, None]  # every other device, shift-major: all ops for shift 1, then for shift 2, ...
        target = ((a[ops][None, :] + shifts) % d).ravel()
        rows = np.tile(np.arange(ops.size), d - 1)
        tiled = ops[rows]
        blocks.append(
            np.column_stack(
                [
                    op_compute[rows] / span,
                    per_op[tiled, :7],
                    load[target] / share,
                    finish[target] / span,
                    op_comm[rows, target] / span,
                    op_comm[rows, a[tiled]] / span,
                    op_comm.sum(axis=1)[rows] / span,
                    per_op[tiled, 7],
                    chain_load[target],
                    np.full(rows.size, float(grouped)),
                    (sizes[tiled] if grouped else np.ones(rows.size)) / GROUP_LIMIT,
                    np.full(rows.size, 1.0 / d),
                ]
            )
        )
        chosen.append(np.stack([tiled, np.full(rows.size, int(grouped)), target]))
    group_rows = [block[0] for block in chosen]  # a connected group's row is its op's
    kept = [g for g in structured if only is None or only[g].any()]
    if kept:
        by_device = np.column_stack([load / share, finish / span, chain_load])
        features, moved, extra = _structured_moves(kept, a, trace.end, compute, comm_with, per_op, by_device, span)
        blocks.append(features)
        chosen.append(moved[:3])
        group_rows.append(n + moved[3])
        groups = np.hstack([groups, np.full((n, extra.shape[1] - GROUP_LIMIT), n, dtype=np.int64)])
        groups = np.vstack([groups, extra])
    if not blocks:
        empty = np.zeros(0, np.int64)
        return Candidates(empty, empty.astype(bool), empty, np.zeros((0, len(FEATURES))), groups, empty, n)
    moved_ops, grouped_flags, targets = np.concatenate(chosen, axis=1)
    return Candidates(moved_ops, grouped_flags.astype(bool), targets, np.concatenate(blocks), groups, np.concatenate(group_rows), n)


def _structured_moves(
    kept: list[np.ndarray],
    a: np.ndarray,
    end: np.ndarray,
    compute: np.ndarray,
    comm_with: np.ndarray,
    per_op: np.ndarray,
    by_device: np.ndarray,
    span: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`move_features`' moves of the structured groups ``kept``, each to every device that changes it: their features,
    their (op, grouped, target, group index) rows, and the groups as a matrix padded with the op count. ``by_device``:
    each device's load ÷ balanced share, last end ÷ makespan and share of the critical chain."""
    n, d = a.size, by_device.shape[0]
    width = max(GROUP_LIMIT, max(g.size for g in kept))
    extra = np.full((len(kept), width), n, dtype=np.int64)
    for i, g in enumerate(kept):
        extra[i, : g.size] = g
    last = extra[np.arange(len(kept)), np.argmax(np.append(end, -np.inf)[extra], axis=1)]  # the op that ends last
    size = np.count_nonzero(extra < n, axis=1)
    group_compute = np.append(compute, 0.0)[extra].sum(axis=1)
    group_comm = np.vstack([comm_with, np.zeros((1, d))])[extra].sum(axis=1)
    index = np.repeat(np.arange(len(kept)), d)
    target = np.tile(np.arange(d), len(kept))
    changes = ((np.append(a, -1)[extra[index]] != target[:, None]) & (extra[index] < n)).any(axis=1)  # a member not on target
    index, target = index[changes], target[changes]
    tiled = last[index]
    features = np.column_stack(
        [
            group_compute[index] / span,
            per_op[tiled, :7],
            by_device[target, :2],
            group_comm[index, target] / span,
            group_comm[index, a[tiled]] / span,
            group_comm.sum(axis=1)[index] / span,
            per_op[tiled, 7],
            by_device[target, 2],
            np.ones(index.size),
            np.minimum(size[index], GROUP_LIMIT) / GROUP_LIMIT,
            np.full(index.size, 1.0 / d),
        ]
    )
    return features, np.stack([tiled, np.ones(index.size, dtype=np.int64), target, index]), extra


class LearnedMoves(Moves):
    """local_search's moves, a share of each batch replaced by the scorer's best-ranked moves of the last observed placement;
    with ``screen`` > 0, local_search's own single-op moves that the scorer ranks in that lowest fraction are redrawn; with
    structured ``group_kinds``, the scorer also ranks moves of those groups (and local_search's group moves take them)."""

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
        group_kinds: tuple[str, ...] = ("connected",),
    ) -> None:
        super().__init__(graph, devices, rng, group_kinds)
        self.scorer, self.share, self.temperature, self.screen = scorer, share, temperature, screen
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
        self.candidates = move_features(self, assignment, trace, self.critical, only, self.static_groups + self.segments)
        raw = self.scorer.score(self.candidates.features)
        self.keys = raw / self.temperature + self.rng.gumbel(size=raw.size)
        self.ranking, self.taken = self._ranked(RANKED_BLOCK), 0
        if self.screen > 0:
            single = ~self.candidates.grouped
            self.single_scores[self.candidates.ops[single], self.candidates.targets[single]] = raw[single]
            self.screen_below = float(np.quantile(raw[single], self.screen))

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
        search: local_search's options (budget, time_limit, ...), see :class:`~workbench.placers.local_search.LocalSearchPlacer`;
            with structured ``groups`` the scorer ranks those groups' moves too.
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

    def moves(self, graph: DataflowGraph, devices: Devices, rng: np.random.Generator) -> Moves:
        if num_devices(devices) < 2:
            return Moves(graph, devices, rng)
        return LearnedMoves(graph, devices, rng, self.scorer, self.share, self.temperature, self.screen, self.focus, self.group_kinds)


def save_scorer(path: str | os.PathLike, scorer: MoveScorer, training: Mapping[str, Any]) -> Path:
    """Write ``scorer`` as a checkpoint (safetensors + JSON header) with how it was trained."""
    header = {"method": METHOD, "config": asdict(scorer.config), "feature_layout": {"features": list(FEATURES)}}
    return write_checkpoint(path, scorer.state_dict(), header, extra={"training": dict(training)})


SCORER_FIELDS = {"hidden": Field(int, 1, 1024), "layers": Field(int, 1, 16)}
"""Each :class:`ScorerConfig` field's type and range, checked before a scorer's module is built (the shipped one: 64, 2)."""


def _scorer_config(header: dict[str, Any], where: str) -> ScorerConfig:
    """The scorer config a checkpoint's header holds, checked: method, feature layout, each field's type and range."""
    if header.get("method") != METHOD:
        raise CheckpointError(f"{where} holds a {header.get('method')!r} policy, not a {METHOD} scorer")
    if header.get("feature_layout") != {"features": list(FEATURES)}:
        raise CheckpointError(f"{where} was trained on another feature layout than this version's {METHOD}")
    if "config" not in header:
        raise CheckpointError(f"{where} lacks its scorer config")
    try:
        return ScorerConfig(**check_config(header["config"], SCORER_FIELDS, "scorer config"))
    except ValueError as error:
        raise CheckpointError(f"{where} has a bad scorer config: {error}") from None


def load_scorer(path: str | os.PathLike) -> MoveScorer:
    """A scorer from a checkpoint written by :func:`save_scorer`; another method or feature layout, a bad config, or
    weights of another dtype or shape than the config implies are refused with a :class:`CheckpointError`."""
    where = os.fspath(path)
    checkpoint = read_checkpoint(path, weights=lambda header: weight_shapes(lambda: MoveScorer(_scorer_config(header, where))))
    scorer = MoveScorer(_scorer_config(checkpoint.header, where))
    scorer.load_state_dict(checkpoint.weights)
    return scorer.eval()
