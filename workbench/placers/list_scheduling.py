"""Shared pieces of the classic list schedulers (HEFT, CPOP, PEFT).

- :class:`InsertionSchedule`: a :class:`~workbench.schedule.PartialSchedule`
  whose ops may start in an idle gap of a device's timeline (the insertion
  policy of Topcuoglu et al. 2002) instead of only after the device's last op.
- :class:`ReadyQueue`: the ready ops by decreasing priority, ties by a :class:`~workbench.placers.ties.TieBreak`.
- :func:`mean_costs`: each op's compute time and each edge's transfer time
  averaged over the devices (over distinct device pairs for transfers), the
  "average cost" every one of these ranks is built on.
- :func:`upward_rank` / :func:`downward_rank`: HEFT's rank_u and CPOP's rank_d.
- :func:`rank_order`: ops by decreasing rank, ties in topological order, so
  the order is always a valid one to schedule in.
- :func:`schedule_decision`: a finished schedule as a placer's decision.
"""

from __future__ import annotations

import heapq

import numpy as np
from numba import njit

from ..cluster import Devices, as_cluster
from ..graph import DataflowGraph
from ..levels import longest_from_entry, longest_to_exit
from ..schedule import PartialSchedule
from .base import Decision
from .ties import TieBreak, TieRanks

__all__ = ["InsertionSchedule", "ReadyQueue", "mean_costs", "upward_rank", "downward_rank", "rank_order", "schedule_decision"]


class InsertionSchedule(PartialSchedule):
    """A partial schedule where an op may fill an idle gap between already placed ops.

    Each device's busy intervals are kept sorted by (start, end) in arrays, with the largest gap of each block of
    :data:`GAP_BLOCK` consecutive intervals and of each group of :data:`GAP_BLOCK` blocks, so that the search for the
    first gap long enough skips whole groups and blocks of short gaps: near-linear instead of a scan of every interval
    after the op's inputs arrive.
    """

    def __init__(self, graph: DataflowGraph, devices: Devices) -> None:
        super().__init__(graph, devices)
        capacity = GAP_BLOCK
        self._starts = np.zeros((self.num_devices, capacity))
        self._ends = np.zeros((self.num_devices, capacity))
        self._gaps = np.full((self.num_devices, capacity // GAP_BLOCK + 1), -np.inf)  # per block, its largest gap
        self._group_gaps = np.full((self.num_devices, capacity // GAP_GROUP + 1), -np.inf)  # per group of blocks
        self._length = np.zeros(self.num_devices, dtype=np.int64)

    def earliest_starts(self, op: int) -> np.ndarray:
        """Per device: the earliest start in a gap long enough for ``op``, once its inputs are there."""
        duration = self.graph.compute[op] / self.speeds
        return _gap_starts(self._starts, self._ends, self._length, self._gaps, self._group_gaps, self.arrival_times(op), duration)

    def place(self, op: int, device: int, earliest_starts: np.ndarray | None = None) -> float:
        begin = super().place(op, device, earliest_starts)
        if self._length[device] == self._starts.shape[1]:
            self._grow()
        _insert_interval(
            self._starts[device],
            self._ends[device],
            int(self._length[device]),
            self._gaps[device],
            self._group_gaps[device],
            begin,
            float(self.end[op]),
        )
        self._length[device] += 1
        return begin

    def _grow(self) -> None:
        capacity = 2 * self._starts.shape[1]
        used = self._starts.shape[1]
        for name in ("_starts", "_ends"):
            grown = np.zeros((self.num_devices, capacity))
            grown[:, :used] = getattr(self, name)
            setattr(self, name, grown)
        for name, size in (("_gaps", GAP_BLOCK), ("_group_gaps", GAP_GROUP)):
            gaps = np.full((self.num_devices, capacity // size + 1), -np.inf)
            gaps[:, : getattr(self, name).shape[1]] = getattr(self, name)
            setattr(self, name, gaps)


GAP_BLOCK = 32
"""Busy intervals per block of :class:`InsertionSchedule`'s gap index (and blocks per group)."""
GAP_GROUP = GAP_BLOCK * GAP_BLOCK


@njit(cache=True)
def _gap_starts(
    starts: np.ndarray,
    ends: np.ndarray,
    length: np.ndarray,
    gaps: np.ndarray,
    group_gaps: np.ndarray,
    ready: np.ndarray,
    duration: np.ndarray,
) -> np.ndarray:  # pragma: no cover - compiled
    """Per device, the first start at or after ``ready`` with ``duration`` free before the next busy interval.

    The float comparisons are exactly those of a scan of every interval (``start >= begin + duration``); a block is
    skipped only when its largest gap, less a rounding margin, is shorter than ``duration``."""
    out = np.empty(ready.size)
    for d in range(ready.size):
        out[d] = _first_gap(starts[d], ends[d], length[d], gaps[d], group_gaps[d], ready[d], duration[d])
    return out


@njit(cache=True)
def _first_gap(
    starts: np.ndarray, ends: np.ndarray, length: int, gaps: np.ndarray, group_gaps: np.ndarray, ready: float, duration: float
) -> float:  # pragma: no cover - compiled
    k = np.searchsorted(ends[:length], ready, side="right")  # skip what ends before ``ready``
    if k == length or starts[k] >= ready + duration:
        return ready
    # ends are sorted, so from here the candidate start is the end of the interval before each gap
    shortest = duration - 1e-15 * (abs(ends[length - 1]) + duration)  # a gap that fits is at least this long, rounded
    j = k
    while j < length - 1:
        if j % GAP_GROUP == 0 and group_gaps[j // GAP_GROUP] < shortest:
            j += GAP_GROUP
            continue
        if j % GAP_BLOCK == 0 and gaps[j // GAP_BLOCK] < shortest:
            j += GAP_BLOCK
            continue
        if starts[j + 1] >= ends[j] + duration:
            return ends[j]
        j += 1
    return ends[length - 1]


@njit(cache=True)
def _insert_interval(
    starts: np.ndarray, ends: np.ndarray, length: int, gaps: np.ndarray, group_gaps: np.ndarray, begin: float, end: float
) -> None:  # pragma: no cover - compiled
    """Insert ``(begin, end)`` after every interval that sorts before or equal to it; refresh the block gaps it moves."""
    i = int(np.searchsorted(starts[:length], begin, side="left"))
    while i < length and starts[i] == begin and ends[i] <= end:
        i += 1
    for j in range(length, i, -1):
        starts[j] = starts[j - 1]
        ends[j] = ends[j - 1]
    starts[i] = begin
    ends[i] = end
    for block in range(max(i - 1, 0) // GAP_BLOCK, length // GAP_BLOCK + 1):  # gaps j (j and j + 1 both intervals) from i - 1 on
        largest = -np.inf
        for j in range(block * GAP_BLOCK, min((block + 1) * GAP_BLOCK, length)):
            largest = max(largest, starts[j + 1] - ends[j])
        gaps[block] = largest
    for group in range(max(i - 1, 0) // GAP_GROUP, length // GAP_GROUP + 1):
        largest = -np.inf
        for block in range(group * GAP_BLOCK, min((group + 1) * GAP_BLOCK, length // GAP_BLOCK + 1)):
            largest = max(largest, gaps[block])
        group_gaps[group] = largest


class ReadyQueue:
    """A schedule's ready ops, the one with the largest ``key`` first, ties by a :class:`~workbench.placers.ties.TieBreak`
    (the smaller id without one), without rescanning the ready ops at every step."""

    def __init__(self, schedule: PartialSchedule, key: np.ndarray, ties: TieBreak | None = None) -> None:
        self._ranks = TieRanks(key, ties or TieBreak.of("id", len(key), schedule.num_devices))
        self._heap = [self._ranks.ranked(op) for op in schedule.ready_ops]
        heapq.heapify(self._heap)

    def pop(self) -> int:
        """The next op (removed)."""
        return self._ranks.op(heapq.heappop(self._heap))

    def add(self, ops: list[int]) -> None:
        """Queue ``ops`` (those a placement just made ready)."""
        for op in ops:
            heapq.heappush(self._heap, self._ranks.ranked(int(op)))


def mean_costs(graph: DataflowGraph, devices: Devices) -> tuple[np.ndarray, np.ndarray]:
    """Per op the mean compute time over devices; per edge the mean transfer time over distinct device pairs."""
    cluster = as_cluster(devices)
    speeds = np.asarray(cluster.speeds)
    compute = graph.compute * np.mean(1.0 / speeds)
    d = cluster.num_devices
    if d == 1:
        return compute, np.zeros_like(graph.comm)
    off = ~np.eye(d, dtype=bool)
    inverse_bw = np.mean(1.0 / np.asarray(cluster.bandwidth)[off])
    latency = np.mean(np.asarray(cluster.latency)[off])
    return compute, graph.comm * inverse_bw + latency * (graph.comm.size > 0)


def upward_rank(graph: DataflowGraph, compute: np.ndarray, comm: np.ndarray) -> np.ndarray:
    """rank_u: the op's cost plus the longest (cost + transfer) path to an exit."""
    return longest_to_exit(graph, compute, comm)


def downward_rank(graph: DataflowGraph, compute: np.ndarray, comm: np.ndarray) -> np.ndarray:
    """rank_d: the longest (cost + transfer) path from an entry up to the op, its own cost excluded."""
    return longest_from_entry(graph, compute, comm)


def rank_order(graph: DataflowGraph, rank: np.ndarray, ties: TieBreak | None = None) -> np.ndarray:
    """Ops by decreasing ``rank``; ties in the topological order of ``ties`` (:meth:`TieBreak.topological_order`), so
    that equally ranked ops (zero-cost ones) keep their dependencies."""
    position = np.empty(graph.num_nodes, dtype=np.int64)
    order = graph.topological_order if ties is None else ties.topological_order(graph)
    position[order] = np.arange(graph.num_nodes)
    return np.lexsort((position, -rank))


def schedule_decision(schedule: PartialSchedule, **details: object) -> Decision:
    """The schedule's devices and placement order, with its own makespan estimate among the details."""
    estimate = float(np.max(schedule.end, initial=0.0))
    return Decision(
        schedule.device.copy(), order=np.array(schedule.order, dtype=np.int64), details={"estimated_makespan": estimate, **details}
    )
