"""CPOP, Critical Path On a Processor (Topcuoglu, Hariri, Wu, IEEE TPDS 13(3), 2002).

An op's priority is its upward plus downward rank (mean costs), the length
of the longest path through it. The ops of one critical path (entry to exit,
every op's priority equal to the longest) all go to the device that runs
them fastest; every other op goes to its earliest-finish device with
insertion. Ready ops are taken highest priority first.
"""

from __future__ import annotations

import numpy as np

from ..cluster import Devices, as_cluster
from ..graph import DataflowGraph
from .base import Decision
from .list_scheduling import InsertionSchedule, ReadyQueue, downward_rank, mean_costs, schedule_decision, upward_rank
from .ties import ListScheduler, TieBreak


def critical_ops(graph: DataflowGraph, priority: np.ndarray) -> np.ndarray:
    """One entry-to-exit path of highest-priority ops (the successor with the largest priority at each step)."""
    entries = np.flatnonzero(graph.in_degree == 0)
    op = int(entries[np.argmax(priority[entries])])
    path = [op]
    while graph.out_degree[op] > 0:
        succ = graph.successors(op)
        op = int(succ[np.argmax(priority[succ])])
        path.append(op)
    return np.array(path, dtype=np.int64)


class CpopPlacer(ListScheduler):
    """The critical path on its fastest device; other ops on their earliest-finish device."""

    def schedule(self, graph: DataflowGraph, devices: Devices, ties: TieBreak) -> Decision:
        compute, comm = mean_costs(graph, devices)
        priority = upward_rank(graph, compute, comm) + downward_rank(graph, compute, comm)
        on_path = np.zeros(graph.num_nodes, dtype=bool)
        if graph.num_nodes:
            on_path[critical_ops(graph, priority)] = True
        path_device = int(np.argmax(as_cluster(devices).speeds))
        schedule = InsertionSchedule(graph, devices)
        queue = ReadyQueue(schedule, priority, ties)
        while not schedule.done:
            op = queue.pop()
            device = path_device if on_path[op] else ties.argmin(schedule.earliest_finishes(op))
            schedule.place(op, device)
            queue.add(schedule.newly_ready)
        return schedule_decision(schedule, critical_path_ops=int(on_path.sum()))
