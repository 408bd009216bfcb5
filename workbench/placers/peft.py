"""PEFT, Predict Earliest Finish Time (Arabnejad, Barbosa, IEEE TPDS 25(3), 2014).

The optimistic cost table ``OCT[t, p]`` is the longest remaining path from
op ``t`` to an exit when ``t`` runs on device ``p`` and every later op
picks its best device (mean transfer costs between different devices).
Ready ops are taken by decreasing mean of their OCT row; each goes to the
device minimising its earliest finish (with insertion) plus ``OCT[t, p]``,
which looks one step ahead of HEFT's greedy choice.
"""

from __future__ import annotations

import numpy as np

from ..cluster import Devices, as_cluster
from ..graph import DataflowGraph
from .base import Decision
from .list_scheduling import InsertionSchedule, ReadyQueue, mean_costs, schedule_decision
from .ties import ListScheduler, TieBreak


def optimistic_cost_table(graph: DataflowGraph, devices: Devices) -> np.ndarray:
    """``OCT[t, p]``, shape ``(ops, devices)``; zero for exit ops."""
    cluster = as_cluster(devices)
    time_on = graph.compute[:, None] / np.asarray(cluster.speeds)[None, :]
    _, comm = mean_costs(graph, devices)
    table = np.zeros((graph.num_nodes, cluster.num_devices))
    ptr, succ, edge = graph.succ_csr
    for t in graph.topological_order[::-1]:
        lo, hi = ptr[t], ptr[t + 1]
        if hi == lo:
            continue
        onward = table[succ[lo:hi]] + time_on[succ[lo:hi]]  # (successors, devices)
        elsewhere = onward.min(axis=1, keepdims=True) + comm[edge[lo:hi]][:, None]
        table[t] = np.minimum(onward, elsewhere).max(axis=0)
    return table


class PeftPlacer(ListScheduler):
    """Decreasing mean OCT; each op on the device minimising earliest finish + OCT."""

    def schedule(self, graph: DataflowGraph, devices: Devices, ties: TieBreak) -> Decision:
        table = optimistic_cost_table(graph, devices)
        rank = table.mean(axis=1)
        schedule = InsertionSchedule(graph, devices)
        queue = ReadyQueue(schedule, rank, ties)
        while not schedule.done:
            op = queue.pop()
            starts = schedule.earliest_starts(op)
            schedule.place(op, ties.argmin(starts + graph.compute[op] / schedule.speeds + table[op]), starts)
            queue.add(schedule.newly_ready)
        return schedule_decision(schedule)
