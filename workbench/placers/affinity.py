"""The affinity rule: list scheduling that keeps ops meeting at a consumer on one device (this workbench's own rule).

Ops in critical_path's order (largest bottom level first, smaller id on
ties); each goes to the device with the smallest *affinity cost*: its
earliest finish there plus, for every consumer that already has other
inputs placed, the cheaper of the two transfers the choice forces (those
co-parents' bytes to this device, or this op's bytes to theirs). Earliest
start alone (critical_path, HEFT) sees only the op's own inputs, so it
spreads ops that a later consumer joins; charging the forced transfer at
the moment of choice keeps them together. It is not from the literature:
it was built as the imitation teacher of issue 20 (``il_teacher="affinity"``)
and is registered so that it can be compared like any other rule. Within
``AFFINITY_TIE_RTOL`` costs are ties (the smaller device id wins).

Measured on the paper's graphs (4 devices, ÷1e10): 1700.1 / 56.7 / 173.7 /
173.9 against critical_path's 1700.1 / 84.2 / 240.2 / 231.1
(``docs/results.md``).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from ..cluster import Devices
from ..graph import DataflowGraph
from ..schedule import PartialSchedule
from .base import Decision, Placer
from .critical_path import critical_path_op
from .list_scheduling import schedule_decision

__all__ = ["AFFINITY_TIE_RTOL", "AffinityTables", "affinity_tables", "affinity_cost", "affinity_delay", "AffinityPlacer"]


@dataclass(frozen=True)
class AffinityTables:
    """Per-graph tables behind :func:`affinity_features` (computed once per graph object).

    Attributes:
        sibling_ptr, sibling_op, sibling_comm, sibling_consumer, sibling_own: CSR by op: for each consumer ``s``
            of op ``v`` and each other input ``p`` of ``s``, ``p``, the bytes ``p → s``, ``s`` and the bytes ``v → s``.
        component: ``(n,)`` the id of each op's weakly connected component.
        component_compute: ``(components,)`` the total compute of each component.
        byte_scale: divisor of the byte columns (the largest total input of any op).
    """

    sibling_ptr: np.ndarray
    sibling_op: np.ndarray
    sibling_comm: np.ndarray
    sibling_consumer: np.ndarray
    sibling_own: np.ndarray
    component: np.ndarray
    component_compute: np.ndarray
    byte_scale: float


_affinity_cache: weakref.WeakKeyDictionary[DataflowGraph, AffinityTables] = weakref.WeakKeyDictionary()


def _weak_components(graph: DataflowGraph) -> np.ndarray:
    """Each op's weakly connected component id (union-find over the edges; ids in order of first op)."""
    parent = np.arange(graph.num_nodes)

    def root(v: int) -> int:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = int(parent[v])
        return v

    for a, b in zip(graph.src.tolist(), graph.dst.tolist(), strict=True):
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    roots = np.array([root(v) for v in range(graph.num_nodes)], dtype=np.int64)
    return np.unique(roots, return_inverse=True)[1].astype(np.int64)


def affinity_tables(graph: DataflowGraph) -> AffinityTables:
    """The graph's :class:`AffinityTables` (cached per graph object)."""
    cached = _affinity_cache.get(graph)
    if cached is not None:
        return cached
    n = graph.num_nodes
    succ_ptr, succ, succ_edge = graph.succ_csr
    pred_ptr, pred, pred_edge = graph.pred_csr
    pairs: list[list[tuple[int, float, int, float]]] = [[] for _ in range(n)]
    for v in range(n):
        for s, own in zip(
            succ[succ_ptr[v] : succ_ptr[v + 1]].tolist(), graph.comm[succ_edge[succ_ptr[v] : succ_ptr[v + 1]]].tolist(), strict=True
        ):
            lo, hi = pred_ptr[s], pred_ptr[s + 1]
            pairs[v] += [
                (p, float(graph.comm[e]), s, own) for p, e in zip(pred[lo:hi].tolist(), pred_edge[lo:hi].tolist(), strict=True) if p != v
            ]
    flat = [pair for per_op in pairs for pair in per_op]
    component = _weak_components(graph)
    comm_in = np.bincount(graph.dst, weights=graph.comm, minlength=n)
    peak = float(comm_in.max(initial=0.0))
    tables = AffinityTables(
        sibling_ptr=np.concatenate([[0], np.cumsum([len(per_op) for per_op in pairs])]).astype(np.int64),
        sibling_op=np.array([pair[0] for pair in flat], dtype=np.int64),
        sibling_comm=np.array([pair[1] for pair in flat], dtype=np.float64),
        sibling_consumer=np.array([pair[2] for pair in flat], dtype=np.int64),
        sibling_own=np.array([pair[3] for pair in flat], dtype=np.float64),
        component=component,
        component_compute=np.bincount(component, weights=graph.compute),
        byte_scale=peak if peak > 0 else 1.0,
    )
    _affinity_cache[graph] = tables
    return tables


AFFINITY_TIE_RTOL = 1e-9
"""Affinity costs within this relative distance of the cheapest are ties (sums of transfer times differ by rounding alone)."""


def affinity_cost(schedule: PartialSchedule, op: int, earliest_start: np.ndarray) -> np.ndarray:
    """Per device: ``op``'s earliest finish there plus, per consumer, the smaller of two transfer times.

    At a consumer that already has inputs placed, either those on other
    devices move to ``op``'s device or ``op``'s output moves to theirs: the
    cheaper of the two is counted (the co-parents' bytes summed over their
    links, against ``op``'s bytes over its fastest link to one of them).
    ``earliest_start`` is ``schedule.earliest_starts(op)``.
    """
    tables, d = affinity_tables(schedule.graph), schedule.num_devices
    lo, hi = tables.sibling_ptr[op], tables.sibling_ptr[op + 1]
    where = schedule.device[tables.sibling_op[lo:hi]]
    placed = where >= 0
    where, comm = where[placed], tables.sibling_comm[lo:hi][placed]
    consumer, own = tables.sibling_consumer[lo:hi][placed], tables.sibling_own[lo:hi][placed]
    bandwidth, latency = np.asarray(schedule.cluster.bandwidth), np.asarray(schedule.cluster.latency)
    elsewhere = where[:, None] != np.arange(d)[None, :]
    inbound = np.where(elsewhere, comm[:, None] / bandwidth[where] + latency[where], 0.0)  # co-parent's bytes to each device
    outbound = np.where(elsewhere, own[:, None] / bandwidth[:, where].T + latency[:, where].T, np.inf)  # op's bytes to it
    penalty = np.zeros(d)
    for s in np.unique(consumer).tolist():
        at = consumer == s
        others = inbound[at].sum(axis=0)
        penalty += np.where(others > 0, np.minimum(others, outbound[at].min(axis=0)), 0.0)
    return earliest_start + schedule.graph.compute[op] / np.asarray(schedule.cluster.speeds) + penalty


def affinity_delay(schedule: PartialSchedule, op: int, earliest_start: np.ndarray) -> np.ndarray:
    """Per device: :func:`affinity_cost` minus the cheapest, 0 on the cheapest and its ties (``AFFINITY_TIE_RTOL``)."""
    cost = affinity_cost(schedule, op, earliest_start)
    cheapest = cost.min()
    return np.where(np.isclose(cost, cheapest, rtol=AFFINITY_TIE_RTOL, atol=0.0), 0.0, cost - cheapest)


class AffinityPlacer(Placer):
    """Largest bottom level first, on the device with the smallest affinity cost (module docstring)."""

    def place(self, graph: DataflowGraph, devices: Devices, seed: int = 0) -> Decision:
        schedule = PartialSchedule(graph, devices)
        level = graph.bottom_level(with_comm=True)
        while not schedule.done:
            op = critical_path_op(schedule, level)
            delay = affinity_delay(schedule, op, schedule.earliest_starts(op))
            schedule.place(op, int(np.flatnonzero(delay == 0)[0]))
        return schedule_decision(schedule)
