"""The policies' inputs: static per-graph features and per-step device features.

Static features (computed once per graph, numpy): per op its compute cost,
bottom level (longest compute + communication path to an exit, own cost
included), top level (longest path from an entry, own cost excluded), total
communication into it and out of it; per edge of the bidirected
message-passing graph the producer's communication cost and a flag for the
reverse direction. Each column is divided by its maximum over the graph.

Dynamic features (per step, for the op being placed, per device ``d``): the
compute already assigned to ``d``; the compute of the op's inputs that sit on
``d``; the earliest start and the latest end among those inputs; the earliest
time the op could start on ``d``. Times come from the running
:class:`~workbench.schedule.PartialSchedule`, which uses real earliest start
times (an op waits for its device *and* its inputs; the paper's public code
records start times that ignore waiting for inputs). They are divided by the
graph's longest compute + communication path.

Optional inputs (policy config switches, DOPPLER only): ``random_features``
columns of uniform noise appended to every op's static features, drawn anew
for every rollout (random node initialisation, Abboud et al., IJCAI 2021:
it lets the encoder tell identical components apart); and the ``AFFINITY_FEATURES`` appended to the device features (placement
affinity, so locality is visible even for an op without inputs): the bytes
the op receives from its inputs already on ``d``, the bytes its co-parents
on ``d`` (the other inputs of its consumers) send to those consumers, and
the share of the compute of its weakly connected component already on
``d``. Byte columns are divided by the largest total input of any op.

Rule and gate inputs (DOPPLER only): :func:`earliest_start_scores`, SEL's ETF rule over the ready ops, and
:func:`graph_statistics`, the cheap per-(graph, devices) numbers ``GRAPH_STATISTICS`` the rule gate reads
beside the pooled node embeddings.

``FEATURE_LAYOUT`` names every column of the base layout; checkpoints store it and refuse to load
into a different layout.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import torch
from numba import njit

from ..cluster import Devices, num_devices
from ..graph import DataflowGraph
from ..placers.affinity import affinity_cost, affinity_delay, affinity_tables
from ..placers.list_scheduling import mean_costs, upward_rank
from ..schedule import PartialSchedule

__all__ = [
    "NODE_FEATURES",
    "EDGE_FEATURES",
    "DEVICE_FEATURES",
    "FEATURE_LAYOUT",
    "StaticFeatures",
    "static_features",
    "device_features",
    "random_node_features",
    "AFFINITY_FEATURES",
    "affinity_features",
    "affinity_tables",
    "affinity_cost",
    "affinity_delay",
    "longest_path_members",
    "traversal_order",
    "earliest_start_scores",
    "GRAPH_STATISTICS",
    "graph_statistics",
]

NODE_FEATURES = ("compute", "bottom_level", "top_level", "comm_in", "comm_out")
EDGE_FEATURES = ("comm", "reverse")
DEVICE_FEATURES = ("device_compute", "input_compute", "input_earliest_start", "input_latest_end", "earliest_start")
AFFINITY_FEATURES = ("input_bytes", "sibling_bytes", "component_share")
FEATURE_LAYOUT = {
    "version": 1,
    "node": list(NODE_FEATURES),
    "edge": list(EDGE_FEATURES),
    "device": list(DEVICE_FEATURES),
    "node_scaling": "column / column max over the graph",
    "device_scaling": "time / longest compute+communication path",
}


@dataclass(frozen=True)
class StaticFeatures:
    """Everything about a graph the policies need that does not change while placing.

    Attributes:
        node: ``(n, len(NODE_FEATURES))`` float32, each column scaled to max 1.
        src, dst: endpoints of the bidirected message-passing edges (forward
            edges first, then their reverses).
        edge: ``(2m, len(EDGE_FEATURES))`` float32 per bidirected edge.
        time_scale: the divisor of the dynamic time features.
        bottom_level: unscaled bottom levels (the critical-path teacher's key).
    """

    node: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    edge: np.ndarray
    time_scale: float
    bottom_level: np.ndarray


def _scaled_columns(columns: list[np.ndarray]) -> np.ndarray:
    table = np.stack(columns, axis=1) if columns[0].size else np.zeros((0, len(columns)))
    peak = table.max(axis=0, initial=0.0)
    return (table / np.where(peak > 0, peak, 1.0)).astype(np.float32)


def longest_path_members(graph: DataflowGraph, downward: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, cols)`` pairs: ``cols`` lies on ``rows``' longest path to an exit (``downward``) or from an entry.

    Each op follows the neighbour that continues its longest compute +
    communication path (the smallest id on ties) and includes itself.
    """
    n = graph.num_nodes
    if downward:
        level = graph.bottom_level(with_comm=True)
        ptr, nbr, edge = graph.succ_csr
        order = graph.topological_order[::-1]
    else:
        level = graph.top_level(with_comm=True) + graph.compute
        ptr, nbr, edge = graph.pred_csr
        order = graph.topological_order
    members: list[list[int]] = [[] for _ in range(n)]
    for op in order.tolist():
        lo, hi = ptr[op], ptr[op + 1]
        if hi > lo:
            best = int(nbr[lo:hi][np.argmax(graph.comm[edge[lo:hi]] + level[nbr[lo:hi]])])
            members[op] = [op] + members[best]
        else:
            members[op] = [op]
    rows = np.repeat(np.arange(n), [len(m) for m in members])
    cols = np.fromiter((c for m in members for c in m), dtype=np.int64, count=rows.size)
    return rows, cols


_cache: weakref.WeakKeyDictionary[DataflowGraph, StaticFeatures] = weakref.WeakKeyDictionary()


def static_features(graph: DataflowGraph) -> StaticFeatures:
    """The graph's static features (computed once per graph object, then cached)."""
    cached = _cache.get(graph)
    if cached is not None:
        return cached
    n = graph.num_nodes
    bottom = graph.bottom_level(with_comm=True)
    node = _scaled_columns(
        [
            graph.compute,
            bottom,
            graph.top_level(with_comm=True),
            np.bincount(graph.dst, weights=graph.comm, minlength=n),
            np.bincount(graph.src, weights=graph.comm, minlength=n),
        ]
    )
    m = graph.num_edges
    comm = _scaled_columns([np.concatenate([graph.comm, graph.comm])])[:, 0]
    reverse = np.concatenate([np.zeros(m), np.ones(m)]).astype(np.float32)
    longest = graph.longest_path(with_comm=True)
    features = StaticFeatures(
        node=node,
        src=np.concatenate([graph.src, graph.dst]),
        dst=np.concatenate([graph.dst, graph.src]),
        edge=np.stack([comm, reverse], axis=1).astype(np.float32),
        time_scale=longest if longest > 0 else 1.0,
        bottom_level=bottom,
    )
    _cache[graph] = features
    return features


def device_features(schedule: PartialSchedule, op: int, time_scale: float, earliest_start: np.ndarray | None = None) -> np.ndarray:
    """``(devices, len(DEVICE_FEATURES))`` float32 for placing ``op`` next, scaled by ``time_scale``.

    ``earliest_start`` is ``schedule.earliest_starts(op)`` when the caller has it already.
    """
    earliest = schedule.earliest_starts(op) if earliest_start is None else earliest_start
    graph = schedule.graph
    return _device_features(
        graph.predecessors(op), schedule.device, graph.compute, schedule.start, schedule.end, schedule.device_compute, earliest, time_scale
    )


@njit(cache=True)
def _device_features(
    preds: np.ndarray,
    device: np.ndarray,
    compute: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    device_compute: np.ndarray,
    earliest: np.ndarray,
    time_scale: float,
) -> np.ndarray:  # pragma: no cover - compiled
    """:func:`device_features` in one compiled loop over the inputs (called once per placement step)."""
    out = np.zeros((device_compute.size, len(DEVICE_FEATURES)))
    out[:, 0] = device_compute
    holds = np.zeros(device_compute.size, dtype=np.bool_)
    for p in preds:
        where = device[p]
        out[where, 1] += compute[p]
        if not holds[where] or start[p] < out[where, 2]:
            out[where, 2] = start[p]
        if not holds[where] or end[p] > out[where, 3]:
            out[where, 3] = end[p]
        holds[where] = True
    out[:, 4] = earliest
    return (out / time_scale).astype(np.float32)


# paper preset switches
def traversal_order(graph: DataflowGraph, downward: bool) -> np.ndarray:
    """Ops in the order the paper's ``cp_utils.compute_critical_paths`` first reaches them (its path dict's key order).

    Depth first from each entry op (each exit op when not ``downward``) in id
    order, successors (predecessors) in edge order. The paper's code stacks
    its per-op path sums in this order and then indexes the stack by op id,
    so op ``i`` is given the path sum of op ``traversal_order[i]``.
    """
    src, dst = (graph.src, graph.dst) if downward else (graph.dst, graph.src)
    children: list[list[int]] = [[] for _ in range(graph.num_nodes)]
    for a, b in zip(src.tolist(), dst.tolist(), strict=True):
        children[a].append(b)
    has_parent = np.zeros(graph.num_nodes, dtype=bool)
    has_parent[dst] = True
    seen = np.zeros(graph.num_nodes, dtype=bool)
    order: list[int] = []
    for root in np.flatnonzero(~has_parent).tolist():
        stack = [root]
        while stack:
            op = stack.pop()
            if seen[op]:
                continue
            seen[op] = True
            order.append(op)
            stack.extend(reversed(children[op]))
    return np.asarray(order, dtype=np.int64)


def random_node_features(num_nodes: int, columns: int, generator: torch.Generator | None) -> torch.Tensor:
    """``(num_nodes, columns)`` float32 uniform noise in [0, 1) from ``generator`` (random node initialisation)."""
    return torch.rand((num_nodes, columns), generator=generator, dtype=torch.float32, device=generator.device if generator else "cpu")


def affinity_features(schedule: PartialSchedule, op: int) -> np.ndarray:
    """``(devices, len(AFFINITY_FEATURES))`` float32 for placing ``op`` next: where its inputs, co-parents and component already are."""
    graph, d = schedule.graph, schedule.num_devices
    tables = affinity_tables(graph)
    out = np.zeros((d, len(AFFINITY_FEATURES)))
    ptr, pred, edge = graph.pred_csr
    lo, hi = tables.sibling_ptr[op], tables.sibling_ptr[op + 1]
    for column, (ops, comm) in enumerate(
        ((pred[ptr[op] : ptr[op + 1]], graph.comm[edge[ptr[op] : ptr[op + 1]]]), (tables.sibling_op[lo:hi], tables.sibling_comm[lo:hi]))
    ):
        where = schedule.device[ops]
        placed = where >= 0
        out[:, column] = np.bincount(where[placed], weights=comm[placed], minlength=d)
    out[:, :2] /= tables.byte_scale
    component = tables.component[op]
    members = (tables.component == component) & (schedule.device >= 0)
    total = tables.component_compute[component]
    out[:, 2] = np.bincount(schedule.device[members], weights=graph.compute[members], minlength=d) / (total if total > 0 else 1.0)
    return out.astype(np.float32)


def earliest_start_scores(earliest: np.ndarray, static_level: np.ndarray, time_scale: float) -> np.ndarray:
    """ETF's op rule as scores over the ready ops (Hwang et al., SIAM J. Computing 1989), given each one's earliest start over the devices.

    The ops that can start earliest score ½ · static level ÷ the largest (in [0, ½]); every other op
    −1 − (its earliest start − the earliest) ÷ ``time_scale`` (below −1), so the best score is ETF's op: the
    earliest start, ties to the larger static level, then (``argmax``) the smaller id.
    """
    delay = earliest - earliest.min()
    tied = delay == 0
    top = float(static_level.max())
    return np.where(tied, 0.5 * static_level / (top if top > 0 else 1.0), -1.0 - delay / time_scale)


GRAPH_STATISTICS = (
    "log2_devices",
    "log_ops",
    "edges_per_op",
    "log_communication_to_computation",
    "log_path_communication_share",
    "log_parallelism_per_device",
    "entry_share",
    "depth_per_op",
    "compute_variation",
)
"""What :func:`graph_statistics` returns, in order (the rule gate's graph-level inputs beside the pooled embeddings)."""


def graph_statistics(graph: DataflowGraph, devices: Devices) -> np.ndarray:
    """``GRAPH_STATISTICS`` of ``graph`` on ``devices``: cheap, unit-free numbers of order 1, from the devices' mean costs.

    Communication to computation: all transfer time ÷ all compute time; path communication share: the longest
    compute + transfer path ÷ the longest compute path; parallelism per device: all compute ÷ the longest compute
    path ÷ devices (below 1: the devices cannot all be busy); depth: topological levels.
    """
    compute, comm = mean_costs(graph, devices)
    n, tiny = max(graph.num_nodes, 1), 1e-300
    total = max(float(compute.sum()), tiny)
    path = max(float(upward_rank(graph, compute, np.zeros_like(comm)).max(initial=0.0)), tiny)
    path_with_comm = max(float(upward_rank(graph, compute, comm).max(initial=0.0)), tiny)
    mean = float(compute.mean()) if graph.num_nodes else 0.0
    return np.array(
        [
            np.log2(num_devices(devices)),
            np.log(n),
            graph.num_edges / n,
            np.log1p(float(comm.sum()) / total),
            np.log(path_with_comm / path),
            np.log(total / path / num_devices(devices)),
            float((graph.in_degree == 0).sum()) / n,
            (int(graph.depth.max(initial=0)) + 1) / n,
            float(compute.std()) / mean if mean > 0 else 0.0,
        ]
    )
