"""ETF, Earliest Task First (Hwang, Chow, Anger, Lee, SIAM J. Computing 18(2), 1989).

At every step, among all ready ops and all devices, place the (op, device)
pair that can start earliest (no insertion: an op goes after the device's
last op); ties go to the op with the larger static level (longest
compute-only path to an exit), then the smaller op and device ids
(``ties`` changes the last two: :mod:`workbench.placers.ties`).
"""

from __future__ import annotations

import heapq

import numpy as np

from ..cluster import Devices
from ..graph import DataflowGraph
from ..schedule import PartialSchedule
from .base import Decision
from .list_scheduling import schedule_decision
from .ties import ListScheduler, TieBreak, TieRanks


class EtfPlacer(ListScheduler):
    """The ready (op, device) pair with the earliest start, larger static level on ties."""

    def schedule(self, graph: DataflowGraph, devices: Devices, ties: TieBreak) -> Decision:
        schedule = PartialSchedule(graph, devices)
        pairs = EarliestPairs(schedule, TieRanks(graph.bottom_level(with_comm=False), ties))
        while not schedule.done:
            op = pairs.pop()
            starts = schedule.earliest_starts(op)
            schedule.place(op, ties.argmin(starts), starts)
            pairs.add(schedule.newly_ready)
        return schedule_decision(schedule)


class EarliestPairs:
    """ETF's choice without rescanning the ready ops: per device, a heap of ready ops by input arrival there, and a heap
    of those that can start at the current earliest start by rank (larger priority, ETF's static level, then the tie
    order). The doppler policies' ETF op rule takes its ops from one too (``rule_queue`` in the learn layer).

    An op's arrival times never change once it is ready, device free times only grow, and so does the earliest start
    over all pairs (every newly ready op's inputs arrive after its last producer started); an op whose arrival on a
    device is at most that earliest start stays a candidate there for good. The choice is exactly the scan's.
    """

    def __init__(self, schedule: PartialSchedule, ranks: TieRanks) -> None:
        self.schedule = schedule
        self._ranks = ranks  # by (larger static level, then the tie order)
        self._rank: dict[int, int] = {}  # each queued op's rank, given once
        self._arrival: dict[int, list[float]] = {}
        self._waiting: list[list[tuple[float, int]]] = [[] for _ in range(schedule.num_devices)]  # (arrival there, op)
        self._startable: list[list[int]] = [[] for _ in range(schedule.num_devices)]  # ranks
        self._earliest = -np.inf  # the earliest start of the last choice
        self.add(schedule.ready_ops)

    def add(self, ops: list[int]) -> None:
        """Queue ``ops`` (those a placement just made ready)."""
        for op in ops:
            arrival = self.schedule.arrival_times(op).tolist()
            self._arrival[op] = arrival
            rank = self._rank[op] = self._ranks.ranked(op)
            for device, time in enumerate(arrival):
                if time <= self._earliest:
                    heapq.heappush(self._startable[device], rank)
                else:
                    heapq.heappush(self._waiting[device], (time, op))

    def pop(self) -> int:
        """The ready op of the pair with the earliest start (larger static level, then the tie order, on ties)."""
        free = self.schedule.device_free.tolist()
        earliest = np.inf
        for device, (startable, waiting) in enumerate(zip(self._startable, self._waiting, strict=True)):
            while startable and self._ranks.op(startable[0]) not in self._arrival:
                heapq.heappop(startable)
            while waiting and waiting[0][1] not in self._arrival:
                heapq.heappop(waiting)
            if startable:  # their inputs are there by the last earliest start, so they start at that or when the device frees up
                earliest = min(earliest, max(free[device], self._earliest))
            elif waiting:
                earliest = min(earliest, max(free[device], waiting[0][0]))
        self._earliest = earliest
        best: int | None = None
        for device, (startable, waiting) in enumerate(zip(self._startable, self._waiting, strict=True)):
            while waiting and waiting[0][0] <= earliest:
                op = heapq.heappop(waiting)[1]
                if op in self._arrival:
                    heapq.heappush(startable, self._rank[op])
            if free[device] <= earliest and startable and (best is None or startable[0] < best):
                best = startable[0]
        if best is None:
            raise RuntimeError("no ready op to place")  # unreachable while the schedule is not done
        op = self._ranks.op(best)
        del self._arrival[op], self._rank[op]
        return op
