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
from numba import njit

from ..cluster import Devices
from ..graph import DataflowGraph
from ..schedule import PartialSchedule
from .base import Decision
from .list_scheduling import ReadyQueue, schedule_decision
from .ties import ListScheduler, TieBreak

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
    _, _, succ_edge = graph.succ_csr
    pred_ptr, pred, pred_edge = graph.pred_csr
    # every pair of in-edges (own: v -> s, other: p -> s) of a consumer s, with p != v
    degree = np.diff(pred_ptr)
    consumer_of = np.repeat(np.arange(n), degree)  # the consumer of each pred-CSR position
    own = np.repeat(np.arange(pred.size), degree[consumer_of])
    group_start = np.repeat(np.cumsum(degree[consumer_of]) - degree[consumer_of], degree[consumer_of])
    other = pred_ptr[consumer_of[own]] + np.arange(own.size) - group_start
    keep = pred[own] != pred[other]
    own, other = own[keep], other[keep]
    succ_position = np.empty(succ_edge.size, dtype=np.int64)
    succ_position[succ_edge] = np.arange(succ_edge.size)
    # by op, then consumer, then the op's edge to it (its order among the op's out-edges), then the other input's order
    order = np.lexsort((other, succ_position[pred_edge[own]], consumer_of[own], pred[own]))
    own, other = own[order], other[order]
    component = _weak_components(graph)
    comm_in = np.bincount(graph.dst, weights=graph.comm, minlength=n)
    peak = float(comm_in.max(initial=0.0))
    tables = AffinityTables(
        sibling_ptr=np.concatenate([[0], np.cumsum(np.bincount(pred[own], minlength=n))]).astype(np.int64),
        sibling_op=pred[other].astype(np.int64),
        sibling_comm=graph.comm[pred_edge[other]].astype(np.float64),
        sibling_consumer=consumer_of[own].astype(np.int64),
        sibling_own=graph.comm[pred_edge[own]].astype(np.float64),
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
    tables = affinity_tables(schedule.graph)
    lo, hi = int(tables.sibling_ptr[op]), int(tables.sibling_ptr[op + 1])
    penalty = _affinity_penalty(
        tables.sibling_op[lo:hi],
        tables.sibling_comm[lo:hi],
        tables.sibling_consumer[lo:hi],
        tables.sibling_own[lo:hi],
        schedule.device,
        schedule.bandwidth,
        schedule.latency,
    )
    return earliest_start + schedule.graph.compute[op] / schedule.speeds + penalty


@njit(cache=True)
def _affinity_penalty(
    sibling: np.ndarray,
    comm: np.ndarray,
    consumer: np.ndarray,
    own: np.ndarray,
    device: np.ndarray,
    bandwidth: np.ndarray,
    latency: np.ndarray,
) -> np.ndarray:  # pragma: no cover - compiled
    """Per device, the summed forced-transfer terms of :func:`affinity_cost` over one op's consumers (entries grouped by
    consumer): one compiled loop, as the per-consumer numpy version spent most of a large graph's placement time."""
    d = bandwidth.shape[0]
    penalty = np.zeros(d)
    inbound = np.zeros(d)
    outbound = np.zeros(d)
    i = 0
    while i < consumer.size:
        inbound[:] = 0.0
        outbound[:] = np.inf
        j = i
        while j < consumer.size and consumer[j] == consumer[i]:
            where = device[sibling[j]]
            if where >= 0:
                for k in range(d):
                    if k != where:
                        inbound[k] += comm[j] / bandwidth[where, k] + latency[where, k]  # the co-parent's bytes to k
                        outbound[k] = min(outbound[k], own[j] / bandwidth[k, where] + latency[k, where])  # op's bytes to it
            j += 1
        for k in range(d):
            if inbound[k] > 0:
                penalty[k] += min(inbound[k], outbound[k])
        i = j
    return penalty


def affinity_delay(schedule: PartialSchedule, op: int, earliest_start: np.ndarray) -> np.ndarray:
    """Per device: :func:`affinity_cost` minus the cheapest, 0 on the cheapest and its ties (``AFFINITY_TIE_RTOL``)."""
    cost = affinity_cost(schedule, op, earliest_start)
    cheapest = cost.min()
    delay = cost - cheapest
    return np.where(delay <= AFFINITY_TIE_RTOL * abs(cheapest), 0.0, delay)  # np.isclose's test at atol 0, for finite costs


class AffinityPlacer(ListScheduler):
    """Largest bottom level first, on the device with the smallest affinity cost (module docstring)."""

    def schedule(self, graph: DataflowGraph, devices: Devices, ties: TieBreak) -> Decision:
        schedule = PartialSchedule(graph, devices)
        queue = ReadyQueue(schedule, graph.bottom_level(with_comm=True), ties)  # critical_path's order
        while not schedule.done:
            op = queue.pop()
            starts = schedule.earliest_starts(op)
            delay = affinity_delay(schedule, op, starts)
            schedule.place(op, ties.first(delay == 0), starts)
            queue.add(schedule.newly_ready)
        return schedule_decision(schedule)
