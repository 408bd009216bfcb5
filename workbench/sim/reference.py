"""The reference engine, written with SimPy like the paper's own simulator.

One SimPy process per edge (wait for the producer to finish, then for the
transfer) and one per op (wait for all inputs, then hold the device for the
compute time). Devices are SimPy resources of capacity one; processes are
created edges first (in file order per producer), then ops in id order, which
gives the tie order of ``datasets/doppler-paper/README.md``. It covers every
mode: priorities, heterogeneous clusters and link contention. Extend the
execution model here first, then teach the fast engine.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np
import simpy

from ..cluster import Cluster
from ..graph import DataflowGraph


def simulate_reference(
    graph: DataflowGraph, assignment: np.ndarray, cluster: Cluster, priority: np.ndarray | None
) -> tuple[float, dict[str, np.ndarray]]:
    """Run the SimPy model; returns the makespan and the raw trace arrays."""
    env = simpy.Environment()
    n, m = graph.num_nodes, graph.num_edges
    ready, start, end = np.zeros(n), np.zeros(n), np.zeros(n)
    t_start, t_end = np.zeros(m), np.zeros(m)
    finished = [env.event() for _ in range(n)]
    fifo_devices = [simpy.Resource(env) for _ in range(cluster.num_devices)] if priority is None else []
    ranked_devices = [simpy.PriorityResource(env) for _ in range(cluster.num_devices)] if priority is not None else []
    # SimPy takes integer priorities; dense ranks keep the keys' order and ties.
    ranks = None if priority is None else np.unique(priority, return_inverse=True)[1]
    links = {}
    if cluster.contention:
        links = {(a, b): simpy.Resource(env) for a in range(cluster.num_devices) for b in range(cluster.num_devices) if a != b}

    def transfer(e: int, u: int, v: int) -> Generator[simpy.Event, Any, None]:
        yield finished[u]
        a, b = int(assignment[u]), int(assignment[v])
        duration = cluster.comm_time(float(graph.comm[e]), a, b)
        if a != b and cluster.contention:
            with links[a, b].request() as link:
                yield link
                t_start[e] = env.now
                yield env.timeout(duration)
        else:
            t_start[e] = env.now
            yield env.timeout(duration)
        t_end[e] = env.now

    def run(v: int, inputs: list[simpy.Event]) -> Generator[simpy.Event, Any, None]:
        yield simpy.AllOf(env, inputs)
        ready[v] = env.now
        d = int(assignment[v])
        request = fifo_devices[d].request() if ranks is None else ranked_devices[d].request(priority=int(ranks[v]))
        with request:
            yield request
            start[v] = env.now
            yield env.timeout(cluster.compute_time(float(graph.compute[v]), d))
            end[v] = env.now
        finished[v].succeed()

    ptr, _, out_edge = graph.succ_csr
    transfers: list[list] = [[] for _ in range(n)]
    for u in range(n):
        for e in out_edge[ptr[u] : ptr[u + 1]]:
            v = int(graph.dst[e])
            transfers[v].append(env.process(transfer(int(e), u, v)))
    for v in range(n):
        env.process(run(v, transfers[v]))
    env.run()
    arrays = {"ready": ready, "start": start, "end": end, "transfer_start": t_start, "transfer_end": t_end}
    return float(end.max(initial=0.0)), arrays
