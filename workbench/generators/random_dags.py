"""Random DAG families for training diversity and for tests, seeded.

Structures: layered DAGs (the layer-by-layer method of Tobita and Kasahara,
"A standard task graph set for fair evaluation of multiprocessor scheduling
algorithms", J. Scheduling 2002), out-/in-trees and fork-join trees,
two-terminal series-parallel DAGs (Valdes, Tarjan and Lawler, "The
recognition of series parallel digraphs", SIAM J. Computing 1982) and
Erdős–Rényi DAGs (edge ``i -> j``, ``i < j``, with probability ``p``).

Costs: each op's compute cost is drawn from ``compute_dist`` with mean
``compute_mean``; each op's communication cost (the time to send its output,
the same on all its out-edges, as in the paper's graphs) from ``comm_dist``,
then scaled so that the mean edge communication cost over the mean compute
cost equals ``ccr`` exactly (the CCR of Topcuoglu, Hariri and Wu, "Performance-
effective and low-complexity task scheduling for heterogeneous computing",
IEEE TPDS 2002). The unit is arbitrary. Ops are numbered in a topological order.

Each family checks the size its parameters ask for against the graph limits
(:func:`~workbench.graph.check_graph_size`) before building anything.
"""

from __future__ import annotations

import numpy as np

from ..graph import MAX_NODES, DataflowGraph, GraphError, check_graph_size

__all__ = ["layered", "tree", "series_parallel", "erdos_renyi", "DISTRIBUTIONS"]

DISTRIBUTIONS = ("uniform", "exponential", "lognormal", "constant")


def _draw(rng: np.random.Generator, dist: str, mean: float, size: int) -> np.ndarray:
    """``size`` draws with the given mean: uniform on [0, 2·mean], exponential, lognormal (σ = 1) or constant."""
    if dist == "uniform":
        return rng.uniform(0.0, 2.0 * mean, size)
    if dist == "exponential":
        return rng.exponential(mean, size)
    if dist == "lognormal":
        return rng.lognormal(np.log(mean) - 0.5, 1.0, size) if mean > 0 else np.zeros(size)
    if dist == "constant":
        return np.full(size, float(mean))
    raise ValueError(f"unknown cost distribution {dist!r}; known: {', '.join(DISTRIBUTIONS)}")


def _finish(
    family: str,
    n: int,
    src: np.ndarray,
    dst: np.ndarray,
    rng: np.random.Generator,
    compute_mean: float,
    compute_dist: str,
    comm_dist: str,
    ccr: float,
) -> DataflowGraph:
    if compute_mean <= 0 or ccr < 0:
        raise ValueError(f"compute_mean must be > 0 and ccr >= 0, got {compute_mean} and {ccr}")
    compute = _draw(rng, compute_dist, compute_mean, n)
    out_comm = _draw(rng, comm_dist, 1.0, n)
    edge_comm = out_comm[src]
    if edge_comm.size and edge_comm.sum() > 0:
        edge_comm = edge_comm * (ccr * compute.mean() / edge_comm.mean())
    order = DataflowGraph(compute, src, dst, edge_comm).topological_order
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    return DataflowGraph(
        compute=compute[order],
        src=rank[src],
        dst=rank[dst],
        comm=edge_comm,
        names=tuple(f"{family}{i}" for i in range(n)),
        op_types=("task",) * n,
        metadata={"family": family, "time_unit": "arbitrary"},
    )


def layered(
    layers: int = 8,
    width: int = 6,
    width_jitter: float = 0.5,
    edge_prob: float = 0.2,
    span: int = 2,
    compute_mean: float = 1.0,
    compute_dist: str = "uniform",
    comm_dist: str = "uniform",
    ccr: float = 1.0,
    seed: int = 0,
) -> DataflowGraph:
    """Layers of ``width`` ops (± ``width_jitter``·width); every op of layer ``l > 0`` has one
    predecessor in layer ``l - 1`` and, with probability ``edge_prob``, each op of the ``span``
    layers before it as another. Depth is exactly ``layers``."""
    if layers < 1 or width < 1 or not 0 <= width_jitter < 1 or not 0 <= edge_prob <= 1 or span < 1:
        raise ValueError("need layers >= 1, width >= 1, 0 <= width_jitter < 1, 0 <= edge_prob <= 1, span >= 1")
    low, high = max(1, round(width * (1 - width_jitter))), max(1, round(width * (1 + width_jitter)))
    check_graph_size(layers * high, round(layers * high * (1 + edge_prob * span * high)))
    rng = np.random.default_rng(seed)
    sizes = rng.integers(low, high + 1, layers)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    src: list[int] = []
    dst: list[int] = []
    for layer in range(1, layers):
        previous = np.arange(starts[layer - 1], starts[layer])
        earlier = np.arange(starts[max(0, layer - span)], starts[layer])
        for op in range(starts[layer], starts[layer + 1]):
            first = int(rng.choice(previous))
            extra = earlier[(rng.random(earlier.size) < edge_prob) & (earlier != first)]
            src.extend([first, *extra.tolist()])
            dst.extend([op] * (1 + extra.size))
    return _finish(
        "layered",
        int(starts[-1]),
        np.array(src, dtype=np.int64),
        np.array(dst, dtype=np.int64),
        rng,
        compute_mean,
        compute_dist,
        comm_dist,
        ccr,
    )


def tree(
    shape: str = "fork_join",
    branching: int = 2,
    depth: int = 4,
    compute_mean: float = 1.0,
    compute_dist: str = "uniform",
    comm_dist: str = "uniform",
    ccr: float = 1.0,
    seed: int = 0,
) -> DataflowGraph:
    """Complete trees of ``depth`` edge levels: ``fan_out`` (root to ``branching**depth`` leaves,
    ``(b**(d+1) - 1)/(b - 1)`` ops), ``fan_in`` (the same reversed), or ``fork_join`` (a fan-out
    whose leaves feed a mirrored fan-in, ``2·(b**(d+1) - 1)/(b - 1) - b**d`` ops)."""
    if shape not in ("fan_out", "fan_in", "fork_join") or branching < 1 or depth < 0:
        raise ValueError(f"need shape in fan_out/fan_in/fork_join, branching >= 1, depth >= 0; got {shape!r}, {branching}, {depth}")
    n_out, leaves = 1, 1  # ops of the fan-out, ops of its last level
    for _ in range(depth):
        leaves *= branching
        n_out += leaves
        if n_out > MAX_NODES:
            raise GraphError(
                f"a tree of branching {branching} and depth {depth} has more than {MAX_NODES:,} ops (workbench.graph.MAX_NODES)"
            )
    inner = n_out - leaves  # the leaves (numbered last) are shared; op i < inner is mirrored by n_out + i
    fork_join = shape == "fork_join"
    n = n_out + inner if fork_join else n_out
    check_graph_size(n, (2 if fork_join else 1) * (n_out - 1))
    rng = np.random.default_rng(seed)
    children = np.arange(1, n_out)
    parent = (children - 1) // branching  # breadth-first numbering
    src, dst = parent, children
    if shape == "fan_in":
        src, dst = children, parent
    elif fork_join:
        mirror = np.concatenate([n_out + np.arange(inner), np.arange(inner, n_out)])
        src = np.concatenate([parent, mirror[children]])
        dst = np.concatenate([children, mirror[parent]])
    return _finish(shape, n, src.astype(np.int64), dst.astype(np.int64), rng, compute_mean, compute_dist, comm_dist, ccr)


def series_parallel(
    nodes: int = 64,
    parallel_prob: float = 0.5,
    compute_mean: float = 1.0,
    compute_dist: str = "uniform",
    comm_dist: str = "uniform",
    ccr: float = 1.0,
    seed: int = 0,
) -> DataflowGraph:
    """A two-terminal series-parallel DAG of ``nodes`` ops grown from one edge: each step picks a
    random edge ``u -> v`` and either subdivides it (series) or, with probability
    ``parallel_prob``, adds a parallel path ``u -> w -> v``."""
    if nodes < 2 or not 0 <= parallel_prob <= 1:
        raise ValueError(f"need nodes >= 2 and 0 <= parallel_prob <= 1, got {nodes}, {parallel_prob}")
    check_graph_size(nodes, 2 * nodes)
    rng = np.random.default_rng(seed)
    edges: list[tuple[int, int]] = [(0, 1)]
    for new in range(2, nodes):
        pick = int(rng.integers(len(edges)))
        u, v = edges[pick]
        if rng.random() >= parallel_prob:
            edges[pick] = edges[-1]
            edges.pop()
        edges.extend([(u, new), (new, v)])
    pairs = np.array(edges, dtype=np.int64)
    return _finish("series_parallel", nodes, pairs[:, 0], pairs[:, 1], rng, compute_mean, compute_dist, comm_dist, ccr)


def erdos_renyi(
    nodes: int = 64,
    edge_prob: float = 0.1,
    compute_mean: float = 1.0,
    compute_dist: str = "uniform",
    comm_dist: str = "uniform",
    ccr: float = 1.0,
    seed: int = 0,
) -> DataflowGraph:
    """``nodes`` ops; each pair ``i < j`` is an edge ``i -> j`` with probability ``edge_prob``."""
    if nodes < 1 or not 0 <= edge_prob <= 1:
        raise ValueError(f"need nodes >= 1 and 0 <= edge_prob <= 1, got {nodes}, {edge_prob}")
    check_graph_size(nodes, round(edge_prob * nodes * (nodes - 1) / 2))
    rng = np.random.default_rng(seed)
    src: list[np.ndarray] = []
    dst: list[np.ndarray] = []
    for i in range(nodes - 1):
        targets = i + 1 + np.flatnonzero(rng.random(nodes - i - 1) < edge_prob)
        src.append(np.full(targets.size, i, dtype=np.int64))
        dst.append(targets)
    empty = np.zeros(0, dtype=np.int64)
    return _finish(
        "erdos_renyi",
        nodes,
        np.concatenate(src) if src else empty,
        np.concatenate(dst) if dst else empty,
        rng,
        compute_mean,
        compute_dist,
        comm_dist,
        ccr,
    )
