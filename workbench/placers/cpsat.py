"""An exact, time-limited CP-SAT model of the placement problem (OR-Tools CP-SAT; Perron, Didier 2023).

The model schedules the graph on the devices with communication delays:
every op has a start and one optional interval per device (exactly one
present), an edge whose ends sit on different devices delays its consumer by
the transfer time, a device runs one op at a time (no overlap), and the
makespan is minimised. It is the classic model of scheduling a DAG on
identical processors with communication delays (P | prec, c_ij | C_max).

Its optimum is a lower bound on the makespan of any schedule, hence on the
simulated makespan of any assignment under any dispatch order; the solver's
proven bound is returned as ``details["proven_lower_bound"]``. The model
schedules ops in any order, the runtime dispatches first come first served,
so the solver's assignment can simulate worse than its model makespan
(``details["model_makespan"]``); the placer returns the solver's assignment
unless the heuristic it started from simulates better
(``details["kept_heuristic_hint"]``). The decision's ``order`` lists the ops
by their start in the returned schedule, usable as the simulator's priority.

Costs are scaled to integers: times are divided by ``scale`` and rounded
*down*, so the scaled problem is a relaxation of the real one and
``scale * bound`` stays a valid bound. Heterogeneous links use the cheapest
cross-device transfer time for every pair (again a relaxation). The search
starts from the best classic heuristic's schedule (a solution hint).
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

import numpy as np

from ..cluster import Cluster, Devices, as_cluster
from ..graph import DataflowGraph
from .base import Decision, Placer
from .registry import PlacerError, get_placer, methods

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

# Largest scaled time; keeps CP-SAT's propagation fast and precise to ~1e-5 of the horizon.
MAX_SCALED_HORIZON = 1_000_000


class CpSatPlacer(Placer):
    """Minimise the makespan with CP-SAT within ``time_limit`` seconds; report the proven bound.

    Args:
        time_limit: wall-time limit of the solver in seconds.
        workers: CP-SAT search workers (its portfolio); 0 lets OR-Tools decide. With 1 the
            search is deterministic for a seed, when it finishes within the time limit.
    """

    def __init__(self, time_limit: float = 10.0, workers: int = 8) -> None:
        if not time_limit > 0:
            raise PlacerError(f"time_limit must be > 0 seconds, got {time_limit}")
        if workers < 0:
            raise PlacerError(f"workers must be >= 0, got {workers}")
        self.time_limit = float(time_limit)
        self.workers = int(workers)

    def place(self, graph: DataflowGraph, devices: Devices, seed: int = 0) -> Decision:
        from ortools.sat.python import cp_model

        from ..sim import simulate

        cluster = as_cluster(devices)
        num_dev = cluster.num_devices
        n = graph.num_nodes
        hint = _best_heuristic(graph, devices)
        hint_trace = simulate(graph, hint, devices).trace
        horizon_time = max(hint_trace.makespan, 1.0)
        scale = max(1.0, horizon_time / MAX_SCALED_HORIZON)
        speeds = np.asarray(cluster.speeds)
        duration = np.floor(graph.compute[:, None] / speeds[None, :] / scale).astype(np.int64)
        transfer = np.floor(graph.comm * _cheapest_link(cluster) / scale).astype(np.int64)
        horizon = int(math.ceil(horizon_time / scale))

        hint_start = np.minimum(horizon, np.floor(hint_trace.start / scale).astype(np.int64))
        hint_end = hint_start + duration[np.arange(n), hint]
        model = cp_model.CpModel()
        start = [model.NewIntVar(0, horizon, f"start{v}") for v in range(n)]
        end = [model.NewIntVar(0, horizon, f"end{v}") for v in range(n)]
        on = [[model.NewBoolVar(f"on{v}_{d}") for d in range(num_dev)] for v in range(n)]
        per_device: list[list] = [[] for _ in range(num_dev)]
        for v in range(n):
            model.AddHint(start[v], int(hint_start[v]))
            model.AddHint(end[v], int(hint_end[v]))
            for d in range(num_dev):
                model.AddHint(on[v][d], int(hint[v] == d))
            model.AddExactlyOne(on[v])
            for d in range(num_dev):
                interval = model.NewOptionalIntervalVar(start[v], int(duration[v, d]), end[v], on[v][d], f"run{v}_{d}")
                per_device[d].append(interval)
        for intervals in per_device:
            model.AddNoOverlap(intervals)
        # Redundant (tightens the bound): every op lasts at least its shortest duration, and at most
        # num_dev ops run at once.
        shortest = duration.min(axis=1)
        for v in range(n):
            model.Add(end[v] >= start[v] + int(shortest[v]))
        running = [model.NewIntervalVar(start[v], int(shortest[v]), start[v] + int(shortest[v]), f"any{v}") for v in range(n)]
        model.AddCumulative(running, [1] * n, num_dev)
        if cluster.is_identical or len(set(cluster.speeds)) == 1:
            _break_device_symmetry(model, graph, on, num_dev)
        for e in range(graph.num_edges):
            u, v, delay = int(graph.src[e]), int(graph.dst[e]), int(transfer[e])
            if delay == 0 or num_dev == 1:
                model.Add(start[v] >= end[u])
                continue
            apart = model.NewBoolVar(f"apart{e}")
            model.AddHint(apart, int(hint[u] != hint[v]))
            for d in range(num_dev):
                model.AddImplication(on[u][d], on[v][d]).OnlyEnforceIf(apart.Not())
            model.Add(start[v] >= end[u] + delay * apart)
        makespan = model.NewIntVar(0, horizon, "makespan")
        if n:
            model.AddMaxEquality(makespan, end)
        model.AddHint(makespan, int(hint_end.max(initial=0)))
        model.Minimize(makespan)

        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = self.time_limit
        solver.parameters.random_seed = int(seed)
        solver.parameters.num_workers = self.workers or (os.cpu_count() or 1)
        status = solver.Solve(model)
        found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        assignment, order = hint, np.lexsort((np.arange(n), hint_trace.start))
        if found:
            solved = np.array([next(d for d in range(num_dev) if solver.Value(on[v][d])) for v in range(n)], dtype=np.int64)
            if simulate(graph, solved, devices).makespan <= hint_trace.makespan:
                assignment, order = solved, np.lexsort((np.arange(n), np.array([solver.Value(start[v]) for v in range(n)])))
        bound = max(0.0, float(solver.BestObjectiveBound())) * scale if status != cp_model.INFEASIBLE else 0.0
        return Decision(
            assignment,
            order=order,
            details={
                "proven_lower_bound": bound,
                "status": solver.StatusName(status),
                "kept_heuristic_hint": assignment is hint,
                "optimal_in_model": status == cp_model.OPTIMAL,
                "model_makespan": float(solver.ObjectiveValue()) * scale if found else None,
                "time_scale": scale,
                "time_limit": self.time_limit,
            },
        )


def _best_heuristic(graph: DataflowGraph, devices: Devices) -> np.ndarray:
    """The assignment of the classic heuristic with the smallest simulated makespan."""
    from ..sim import simulate_many

    candidates = np.array([get_placer(name).place(graph, devices).assignment for name in methods("heuristic")])
    return candidates[int(np.argmin(simulate_many(graph, candidates, devices)))]


def _cheapest_link(cluster: Cluster) -> float:
    """Transfer-time factor of the fastest link (1 for identical devices); latency ignored, a relaxation."""
    d = cluster.num_devices
    if d == 1:
        return 0.0
    off = ~np.eye(d, dtype=bool)
    return float(np.min(1.0 / np.asarray(cluster.bandwidth)[off]))


def _break_device_symmetry(model: cp_model.CpModel, graph: DataflowGraph, on: list[list[cp_model.IntVar]], num_dev: int) -> None:
    """Identical devices are interchangeable: the k-th op in topological order uses one of devices 0..k."""
    for position, v in enumerate(graph.topological_order[: num_dev - 1]):
        for d in range(position + 1, num_dev):
            model.Add(on[int(v)][d] == 0)
