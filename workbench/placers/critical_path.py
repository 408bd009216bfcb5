"""The critical-path list scheduler, DOPPLER's teacher (Yao et al., ICLR 2026, Sec. 4).

Among the ready ops (all predecessors placed) pick the one with the largest
bottom level (longest compute + communication path to an exit, its own cost
included); place it on the device where it could start earliest, given where
its inputs are and when each device frees up. Ties: the smaller op id, the
smaller device id (``ties`` changes both: :mod:`workbench.placers.ties`).

The paper's public code picks the *first* ready op instead of the one with
the largest bottom level (an indexing bug); this module implements the
heuristic as the paper describes it.
"""

from __future__ import annotations

from ..cluster import Devices
from ..graph import DataflowGraph
from ..schedule import PartialSchedule
from .base import Decision
from .list_scheduling import ReadyQueue, schedule_decision
from .ties import ListScheduler, TieBreak


class CriticalPathPlacer(ListScheduler):
    """Largest bottom level first, on the device where it starts earliest."""

    def schedule(self, graph: DataflowGraph, devices: Devices, ties: TieBreak) -> Decision:
        schedule = PartialSchedule(graph, devices)
        queue = ReadyQueue(schedule, graph.bottom_level(with_comm=True), ties)
        while not schedule.done:
            op = queue.pop()
            starts = schedule.earliest_starts(op)
            schedule.place(op, ties.argmin(starts), starts)
            queue.add(schedule.newly_ready)
        return schedule_decision(schedule)
