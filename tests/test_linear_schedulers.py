"""The near-linear list-scheduling structures (issue 32) against the scans they replaced, on random DAGs and schedules.

Each reference below is the first implementation, kept here as the brute force: a scan of every busy interval for a
gap, a scan of every ready (op, device) pair for ETF, a scan of every op for the device an op waited for.
"""

from __future__ import annotations

import bisect

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

import workbench as wb
from workbench.placers import get_placer
from workbench.placers.list_scheduling import (
    GAP_GROUP,
    InsertionSchedule,
    _first_gap,
    _insert_interval,
    mean_costs,
    rank_order,
    upward_rank,
)
from workbench.placers.local_search import critical_chain
from workbench.schedule import PartialSchedule

from .conftest import random_dags

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class ScanInsertionSchedule(PartialSchedule):
    """The insertion schedule as first written: sorted interval lists, every interval after ``ready`` scanned."""

    def __init__(self, graph: wb.DataflowGraph, devices: int) -> None:
        super().__init__(graph, devices)
        self._busy: list[list[tuple[float, float]]] = [[] for _ in range(self.num_devices)]
        self._ends: list[list[float]] = [[] for _ in range(self.num_devices)]

    def _first_gap(self, device: int, ready: float, duration: float) -> float:
        busy, begin = self._busy[device], ready
        for k in range(bisect.bisect_right(self._ends[device], ready), len(busy)):
            start, end = busy[k]
            if start >= begin + duration:
                break
            begin = max(begin, end)
        return begin

    def earliest_starts(self, op: int) -> np.ndarray:
        arrival = self.arrival_times(op)
        duration = self.graph.compute[op] / self.speeds
        return np.array([self._first_gap(d, arrival[d], duration[d]) for d in range(self.num_devices)])

    def place(self, op: int, device: int, earliest_starts: np.ndarray | None = None) -> float:
        begin = super().place(op, device, earliest_starts)
        interval = (begin, float(self.end[op]))
        index = bisect.bisect(self._busy[device], interval)
        self._busy[device].insert(index, interval)
        self._ends[device].insert(index, interval[1])
        return begin


def heft_with(schedule: PartialSchedule) -> np.ndarray:
    """HEFT's loop on ``schedule``: its devices."""
    graph = schedule.graph
    for op in rank_order(graph, upward_rank(graph, *mean_costs(graph, schedule.num_devices))):
        schedule.place(int(op), int(np.argmin(schedule.earliest_finishes(int(op)))))
    return schedule.device


def etf_scan(graph: wb.DataflowGraph, devices: int) -> tuple[np.ndarray, list[int]]:
    """ETF as first written: every ready (op, device) pair's start at every step."""
    schedule = PartialSchedule(graph, devices)
    static_level = graph.bottom_level(with_comm=False)
    while not schedule.done:
        ready = schedule.ready_ops
        starts = np.array([schedule.earliest_starts(op) for op in ready])
        best = starts.min(axis=1)
        candidates = np.flatnonzero(best == best.min())
        pick = candidates[np.argmax(static_level[np.asarray(ready)[candidates]])]
        schedule.place(ready[pick], int(np.argmin(starts[pick])))
    return schedule.device, schedule.order


def ready_scan(graph: wb.DataflowGraph, devices: int, key: np.ndarray) -> list[int]:
    """Ops in the order of argmax(key) over the ready ops (id order), each on its earliest-start device."""
    schedule = PartialSchedule(graph, devices)
    while not schedule.done:
        ready = schedule.ready_ops
        op = ready[int(np.argmax(key[ready]))]
        schedule.place(op, int(np.argmin(schedule.earliest_starts(op))))
    return schedule.order


def chain_scan(graph: wb.DataflowGraph, assignment: np.ndarray, ready: np.ndarray, start: np.ndarray, end: np.ndarray) -> list[int]:
    """The critical chain as first written: for a device wait, every op scanned for the one that ended as this one began."""
    n = graph.num_nodes
    ptr, pred, edge = graph.pred_csr
    op, chain = int(np.argmax(end)), []
    while True:
        chain.append(op)
        previous = -1
        if start[op] > ready[op]:
            previous = next((v for v in range(n) if assignment[v] == assignment[op] and end[v] == start[op] and start[v] < start[op]), -1)
        else:
            latest = -1.0
            for k in range(ptr[op], ptr[op + 1]):
                u = int(pred[k])
                arrival = end[u] + (graph.comm[edge[k]] if assignment[u] != assignment[op] else 0.0)
                if arrival > latest:
                    latest, previous = arrival, u
        if previous < 0 or len(chain) == n:
            return chain
        op = previous


@SETTINGS
@given(graph=random_dags(max_nodes=30, integer_costs=False), devices=st.integers(1, 4))
def test_gap_index_finds_the_gaps_of_a_full_scan_float_costs(graph, devices):
    assert np.array_equal(heft_with(InsertionSchedule(graph, devices)), heft_with(ScanInsertionSchedule(graph, devices)))


@SETTINGS
@given(graph=random_dags(max_nodes=40), devices=st.integers(1, 5))
def test_gap_index_finds_the_gaps_of_a_full_scan_with_ties(graph, devices):
    assert np.array_equal(heft_with(InsertionSchedule(graph, devices)), heft_with(ScanInsertionSchedule(graph, devices)))


def test_gap_index_skips_blocks_and_groups_and_grows_like_a_scan():
    """Over a thousand ops per device: the group and block skips, the array growth and insertions far from the end."""
    graph = wb.generate("layered", layers=50, width=50, ccr=3.0, seed=4)
    new, old = InsertionSchedule(graph, 2), ScanInsertionSchedule(graph, 2)
    assert np.array_equal(heft_with(new), heft_with(old))
    assert np.array_equal(new.start, old.start)
    assert int(new._length.max()) > GAP_GROUP  # more than one group of blocks on a device


@SETTINGS
@given(graph=random_dags(max_nodes=30), devices=st.integers(1, 4), floats=st.booleans())
def test_etf_equals_the_scan_of_every_ready_pair(graph, devices, floats):
    if floats:  # the same structure, costs off the integers
        graph = wb.DataflowGraph.from_edges(graph.compute * 1.37 + 0.01, list(zip(graph.src, graph.dst, graph.comm * 0.73, strict=True)))
    decision = get_placer("etf").place(graph, devices)
    assignment, order = etf_scan(graph, devices)
    assert np.array_equal(decision.assignment, assignment)
    assert decision.order.tolist() == order


@SETTINGS
@given(graph=random_dags(max_nodes=30), devices=st.integers(1, 4))
def test_critical_path_order_equals_the_ready_scan(graph, devices):
    level = graph.bottom_level(with_comm=True)
    assert get_placer("critical_path").place(graph, devices).order.tolist() == ready_scan(graph, devices, level)


@SETTINGS
@given(graph=random_dags(max_nodes=30), devices=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_critical_chain_equals_the_scan_of_every_op(graph, devices, seed):
    assignment = np.random.default_rng(seed).integers(0, devices, size=graph.num_nodes)
    trace = wb.simulate(graph, assignment, devices).trace
    expected = chain_scan(graph, assignment, trace.ready, trace.start, trace.end)
    assert critical_chain(graph, assignment, trace.ready, trace.start, trace.end).tolist() == expected


def test_critical_chain_equals_the_scan_on_a_large_busy_schedule():
    graph = wb.generate("series_parallel", nodes=2000, ccr=2.0, seed=1)
    assignment = np.random.default_rng(0).integers(0, 3, size=graph.num_nodes)
    trace = wb.simulate(graph, assignment, 3).trace
    expected = chain_scan(graph, assignment, trace.ready, trace.start, trace.end)
    assert len(expected) > 10 and any(trace.start[op] > trace.ready[op] for op in expected)  # device waits are followed
    assert critical_chain(graph, assignment, trace.ready, trace.start, trace.end).tolist() == expected


def scan_gap(intervals: list[tuple[float, float]], ready: float, duration: float) -> float:
    """The first gap of ``intervals`` (sorted) from ``ready`` on that holds ``duration``: the first implementation's scan."""
    begin = ready
    for k in range(bisect.bisect_right([end for _, end in intervals], ready), len(intervals)):
        start, end = intervals[k]
        if start >= begin + duration:
            break
        begin = max(begin, end)
    return begin


def test_gap_search_equals_the_scan_on_random_timelines():
    """Timelines of thousands of intervals (touching, zero-length, short and long gaps), inserted in random order."""
    rng = np.random.default_rng(0)
    for _ in range(6):
        n = int(rng.integers(2 * GAP_GROUP, 4 * GAP_GROUP))
        gap = rng.choice([0.0, 1e-3, 1.0], size=n, p=[0.4, 0.55, 0.05]) * rng.random(n)
        busy = rng.exponential(1.0, n) * (rng.random(n) > 0.05)
        start = np.cumsum(gap + np.concatenate([[0.0], busy[:-1]]))
        intervals = sorted(zip(start.tolist(), (start + busy).tolist(), strict=True))
        starts, ends = np.zeros(n + 1), np.zeros(n + 1)
        gaps, groups = np.full(n // 32 + 2, -np.inf), np.full(n // GAP_GROUP + 2, -np.inf)
        for length, k in enumerate(rng.permutation(n)):
            _insert_interval(starts, ends, length, gaps, groups, *intervals[k])
        assert np.array_equal(starts[:n], [s for s, _ in intervals])
        ready = rng.random(300) * float(start[-1])
        duration = rng.choice([0.0, 1e-4, 1e-3, 0.5, 0.9, 2.0], size=300) * rng.random(300)
        for r, d in zip(ready.tolist(), duration.tolist(), strict=True):
            assert _first_gap(starts, ends, n, gaps, groups, r, d) == scan_gap(intervals, r, d)
