"""Ties in the list schedulers as a documented, seeded choice, and trying several tie orders.

List schedulers break ties constantly on real graphs: sharded tensors give many ops the same rank, and idle
devices the same earliest start. How they are broken is a choice, not noise, so every list-scheduling placer
(:class:`ListScheduler`) takes ``ties``:

- ``"id"`` (the default, and each heuristic's behaviour before this option): the smaller op id among equally
  ranked ready ops (HEFT, whose order is static: Kahn's topological order taking the smallest id first), the
  smaller device id among equally good devices.
- ``"ready"``: the op that became ready first (first in, first out; for HEFT, Kahn's order first in, first out),
  the smaller device id.
- ``"random"``: a random order of the ops and of the devices, drawn from ``numpy.random.default_rng(seed)`` with
  the seed given to ``place``.
- an int ``K``: ``K`` tie orders (``"id"``, ``"ready"``, then random ones seeded ``seed``, ``seed + 1``, ...), each
  simulated once and counted as an evaluation; the best is kept (the first on equal makespans).
"""

from __future__ import annotations

import dataclasses
import heapq
from abc import abstractmethod
from dataclasses import dataclass

import numpy as np

from ..cluster import Devices, num_devices
from ..graph import DataflowGraph
from .base import Decision, Placer
from .registry import PlacerError

__all__ = ["TIE_RULES", "TieBreak", "TieRanks", "ListScheduler", "check_ties", "tie_rules"]

TIE_RULES = ("id", "ready", "random")
MAX_TIE_ORDERS = 1000
"""The most tie orders ``ties=K`` may try."""


def check_ties(ties: object) -> str | int:
    """``ties`` as given, or a :class:`PlacerError` naming what is wrong with it."""
    if isinstance(ties, str) and ties in TIE_RULES:
        return ties
    if isinstance(ties, (int, np.integer)) and not isinstance(ties, bool) and 1 <= ties <= MAX_TIE_ORDERS:
        return int(ties)
    raise PlacerError(f"ties must be one of {', '.join(TIE_RULES)} or a number of tie orders from 1 to {MAX_TIE_ORDERS}, got {ties!r}")


def tie_rules(ties: str | int) -> list[str]:
    """The rule of each tie order ``ties`` stands for, in the order they are tried."""
    if isinstance(ties, str):
        return [ties]
    return (["id", "ready"] + ["random"] * max(ties - 2, 0))[:ties]


@dataclass(frozen=True)
class TieBreak:
    """One tie order: how equally ranked ops and equally good devices are told apart.

    Attributes:
        rule: a member of :data:`TIE_RULES`.
        op_key: per op, a key where smaller goes first; None for ``"ready"`` (first in, first out).
        device_order: the devices in order of preference; None for the smaller id first.
    """

    rule: str
    op_key: np.ndarray | None
    device_order: np.ndarray | None

    @classmethod
    def of(cls, rule: str, num_ops: int, devices: int, seed: int = 0) -> TieBreak:
        """The tie order ``rule`` for ``num_ops`` ops on ``devices`` devices (``seed`` draws the random one)."""
        if rule == "id":
            return cls(rule, np.arange(num_ops), None)
        if rule == "ready":
            return cls(rule, None, None)
        if rule == "random":
            rng = np.random.default_rng(seed)
            return cls(rule, rng.permutation(num_ops), rng.permutation(devices))
        raise PlacerError(f"unknown tie rule {rule!r}; rules: {', '.join(TIE_RULES)}")

    def argmin(self, values: np.ndarray) -> int:
        """The device with the smallest of ``values``, ties by this order."""
        if self.device_order is None:
            return int(np.argmin(values))
        return int(self.device_order[np.argmin(values[self.device_order])])

    def first(self, mask: np.ndarray) -> int:
        """The first device, in this order, where ``mask`` holds (one must)."""
        if self.device_order is None:
            return int(np.flatnonzero(mask)[0])
        return int(self.device_order[np.flatnonzero(mask[self.device_order])[0]])

    def topological_order(self, graph: DataflowGraph) -> np.ndarray:
        """Kahn's order of ``graph`` taking ready ops by this order (``"id"``: :attr:`DataflowGraph.topological_order`)."""
        if self.rule == "id":
            return np.asarray(graph.topological_order)
        ranks = TieRanks(np.zeros(graph.num_nodes), self)  # equal priorities: the tie order alone decides
        remaining = np.bincount(graph.dst, minlength=graph.num_nodes)
        ptr, succ, _ = graph.succ_csr
        heap = [ranks.ranked(int(v)) for v in np.flatnonzero(remaining == 0)]
        heapq.heapify(heap)
        order: list[int] = []
        while heap:
            u = ranks.op(heapq.heappop(heap))
            order.append(u)
            for v in succ[ptr[u] : ptr[u + 1]].tolist():
                remaining[v] -= 1
                if remaining[v] == 0:
                    heapq.heappush(heap, ranks.ranked(v))
        return np.array(order, dtype=np.int64)


class TieRanks:
    """Integer ranks of ops, by larger ``priority`` first and then a :class:`TieBreak`: smaller ranks go first.

    Integers compare faster than tuples in a heap. With a static tie key an op's rank is fixed up front; with
    ``"ready"`` it is given when the op is :meth:`ranked` (as it becomes ready), so that among equal priorities
    the op ranked first goes first.
    """

    def __init__(self, priority: np.ndarray, ties: TieBreak) -> None:
        n = len(priority)
        self._n = max(n, 1)
        negated = -np.asarray(priority, dtype=float)
        if ties.op_key is None:
            self._level = np.unique(negated, return_inverse=True)[1].reshape(-1).tolist()  # dense rank of -priority
            self._arrivals: list[int] = []
            self._order: list[int] | None = None
            return
        self._order = np.lexsort((ties.op_key, negated)).tolist()
        rank = np.empty(n, dtype=np.int64)
        rank[self._order] = np.arange(n)
        self._rank = rank.tolist()

    def ranked(self, op: int) -> int:
        """``op``'s rank (call once per op, when it becomes ready)."""
        if self._order is not None:
            return self._rank[op]
        self._arrivals.append(op)
        return self._level[op] * self._n + len(self._arrivals) - 1

    def op(self, rank: int) -> int:
        """The op of ``rank``."""
        return self._order[rank] if self._order is not None else self._arrivals[rank % self._n]


class ListScheduler(Placer):
    """A list-scheduling heuristic with a documented, seeded tie-break (module docstring); subclasses write :meth:`schedule`.

    Args:
        ties: ``"id"`` (default), ``"ready"``, ``"random"``, or the number of tie orders to try (each one counted evaluation).
    """

    def __init__(self, ties: str | int = "id") -> None:
        self.ties = check_ties(ties)

    @abstractmethod
    def schedule(self, graph: DataflowGraph, devices: Devices, ties: TieBreak) -> Decision:
        """The heuristic's decision with ties broken by ``ties``."""

    def place(self, graph: DataflowGraph, devices: Devices, seed: int = 0) -> Decision:
        rules = tie_rules(self.ties)
        seeds = np.cumsum([rule == "random" for rule in rules]) - 1 + seed
        orders = [TieBreak.of(rule, graph.num_nodes, num_devices(devices), int(s)) for rule, s in zip(rules, seeds, strict=True)]
        decisions = [self.schedule(graph, devices, order) for order in orders]
        if isinstance(self.ties, str):
            return decisions[0]
        from ..sim import Evaluator

        makespans = np.atleast_1d(Evaluator(graph, devices)(np.stack([decision.assignment for decision in decisions])))
        best = int(np.argmin(makespans))
        details = {**decisions[best].details, "evaluations": len(decisions), "tie_order": rules[best], "tie_order_index": best}
        return dataclasses.replace(decisions[best], details=details)
