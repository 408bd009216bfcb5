"""ETF, Earliest Task First (Hwang, Chow, Anger, Lee, SIAM J. Computing 18(2), 1989).

At every step, among all ready ops and all devices, place the (op, device)
pair that can start earliest (no insertion: an op goes after the device's
last op); ties go to the op with the larger static level (longest
compute-only path to an exit), then the smaller op and device ids.
"""

from __future__ import annotations

import numpy as np

from ..cluster import Devices
from ..graph import DataflowGraph
from ..schedule import PartialSchedule
from .base import Decision, Placer
from .list_scheduling import schedule_decision


class EtfPlacer(Placer):
    """The ready (op, device) pair with the earliest start, larger static level on ties."""

    def place(self, graph: DataflowGraph, devices: Devices, seed: int = 0) -> Decision:
        schedule = PartialSchedule(graph, devices)
        static_level = graph.bottom_level(with_comm=False)
        while not schedule.done:
            ready = schedule.ready_ops
            starts = np.array([schedule.earliest_starts(op) for op in ready])
            best = starts.min(axis=1)
            candidates = np.flatnonzero(best == best.min())
            pick = candidates[np.argmax(static_level[np.asarray(ready)[candidates]])]
            schedule.place(ready[pick], int(np.argmin(starts[pick])))
        return schedule_decision(schedule)
