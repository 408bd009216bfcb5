"""HEFT, Heterogeneous Earliest Finish Time (Topcuoglu, Hariri, Wu, IEEE TPDS 13(3), 2002).

Ops are taken in decreasing upward rank (an op's mean cost plus the longest
mean cost + mean transfer path to an exit); each goes to the device where it
would finish earliest, allowed to fill an idle gap between ops already
placed there (the insertion policy). The placer returns the devices; the
simulator then runs them under the runtime's own dispatch order.
"""

from __future__ import annotations

from ..cluster import Devices
from ..graph import DataflowGraph
from .base import Decision
from .list_scheduling import InsertionSchedule, mean_costs, rank_order, schedule_decision, upward_rank
from .ties import ListScheduler, TieBreak


class HeftPlacer(ListScheduler):
    """Decreasing upward rank; each op on its earliest-finish device, with insertion."""

    def schedule(self, graph: DataflowGraph, devices: Devices, ties: TieBreak) -> Decision:
        schedule = InsertionSchedule(graph, devices)
        rank = upward_rank(graph, *mean_costs(graph, devices))
        for op in rank_order(graph, rank, ties).tolist():
            starts = schedule.earliest_starts(op)
            schedule.place(op, ties.argmin(starts + graph.compute[op] / schedule.speeds), starts)
        return schedule_decision(schedule)
