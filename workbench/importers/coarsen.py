"""Coarsening: shrink a graph of thousands of ops to a size placement policies handle well.

Two steps, both contracting groups of ops into one node (compute costs add;
the transfers between two groups add over the distinct producing ops):

1. *Fusion*: a cheap op (elementwise or view) with a single producer joins
   its producer's group, as kernel fusion in compilers does (e.g. XLA's
   producer-consumer fusion).
2. *Grouping* to ``target_nodes``: rounds of contractions, cheapest first,
   of edges ``u -> v`` where ``u`` has no other successor or ``v`` no other
   predecessor (linear clustering, Gerasoulis and Yang, "A comparison of
   clustering heuristics for scheduling directed acyclic graphs on
   multiprocessors", JPDC 1992), and, when too few such edges are left, of
   pairs of ops at the same depth. Neither can create a cycle: a contracted
   chain edge is entered or left through one op, and ops at one depth have no
   path between them.

The coarse graph's metadata keeps ``coarse_groups``: the original ops of each
coarse node (the per-op ``op_categories`` and ``op_flops`` of an imported
graph are dropped: they index the original ops).
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from ..graph import DataflowGraph

__all__ = ["coarsen", "CHEAP_CATEGORIES", "CoarsenError"]


class CoarsenError(ValueError):
    """A coarsening request that cannot be met (no op categories to fuse by, a bad mask or target)."""


CHEAP_CATEGORIES = frozenset({"elementwise", "view"})


def _fusible_mask(graph: DataflowGraph, fusible: np.ndarray | Collection[str] | None) -> np.ndarray:
    if fusible is None:
        categories = graph.metadata.get("op_categories")
        if categories is None:
            raise CoarsenError("this graph has no op_categories metadata; pass fusible= (op types or a boolean mask)")
        return np.array([c in CHEAP_CATEGORIES for c in categories], dtype=bool)
    if isinstance(fusible, np.ndarray) and fusible.dtype == bool:
        if fusible.size != graph.num_nodes:
            raise CoarsenError(f"fusible mask has {fusible.size} entries for {graph.num_nodes} ops")
        return fusible
    types = graph.op_types or ("",) * graph.num_nodes
    wanted = set(fusible)
    return np.array([t in wanted for t in types], dtype=bool)


def _contract(graph: DataflowGraph, labels: np.ndarray) -> tuple[DataflowGraph, np.ndarray]:
    """The graph of groups ``labels`` (renumbered by first op in topological order) and the new labels."""
    first = np.full(labels.max() + 1, graph.num_nodes, dtype=np.int64)
    np.minimum.at(first, labels[graph.topological_order], np.arange(graph.num_nodes))
    used = np.flatnonzero(first < graph.num_nodes)
    rank = np.empty(labels.max() + 1, dtype=np.int64)
    rank[used[np.argsort(first[used], kind="stable")]] = np.arange(used.size)
    labels = rank[labels]
    k = used.size
    compute = np.bincount(labels, weights=graph.compute, minlength=k)
    gs, gd = labels[graph.src], labels[graph.dst]
    cross = gs != gd
    # one transfer per (producing op, destination group): the same tensor is sent once
    per_producer: dict[tuple[int, int], float] = {}
    for u, g, c in zip(graph.src[cross].tolist(), gd[cross].tolist(), graph.comm[cross].tolist(), strict=True):
        per_producer[(u, g)] = max(per_producer.get((u, g), 0.0), c)
    comm: dict[tuple[int, int], float] = {}
    for (u, g), c in per_producer.items():
        key = (int(labels[u]), g)
        comm[key] = comm.get(key, 0.0) + c
    pairs = sorted(comm)
    coarse = DataflowGraph(
        compute=compute,
        src=np.array([p[0] for p in pairs], dtype=np.int64),
        dst=np.array([p[1] for p in pairs], dtype=np.int64),
        comm=np.array([comm[p] for p in pairs], dtype=np.float64),
    )
    return coarse, labels


def _chain_pairs(graph: DataflowGraph) -> list[tuple[int, int]]:
    """A matching of edges u -> v with out_degree(u) == 1 or in_degree(v) == 1, cheapest first."""
    chain = (graph.out_degree[graph.src] == 1) | (graph.in_degree[graph.dst] == 1)
    src, dst = graph.src[chain], graph.dst[chain]
    order = np.argsort(graph.compute[src] + graph.compute[dst], kind="stable")
    return _matching(src[order], dst[order])


def _level_pairs(graph: DataflowGraph) -> list[tuple[int, int]]:
    """A matching of ops at the same depth, the two cheapest of a level first."""
    a: list[int] = []
    b: list[int] = []
    for level in np.unique(graph.depth):
        ops = np.flatnonzero(graph.depth == level)
        ops = ops[np.argsort(graph.compute[ops], kind="stable")]
        a.extend(ops[0:-1:2].tolist())
        b.extend(ops[1::2].tolist())
    a_arr, b_arr = np.array(a, dtype=np.int64), np.array(b, dtype=np.int64)
    order = np.argsort(graph.compute[a_arr] + graph.compute[b_arr], kind="stable")
    return _matching(a_arr[order], b_arr[order])


def _matching(first: np.ndarray, second: np.ndarray) -> list[tuple[int, int]]:
    used: set[int] = set()
    pairs = []
    for u, v in zip(first.tolist(), second.tolist(), strict=True):
        if u not in used and v not in used:
            used.update((u, v))
            pairs.append((u, v))
    return pairs


def coarsen(
    graph: DataflowGraph,
    target_nodes: int | None = None,
    fuse_elementwise: bool = True,
    fusible: np.ndarray | Collection[str] | None = None,
) -> DataflowGraph:
    """Fuse cheap ops into their producers, then group ops until at most ``target_nodes`` remain.

    Args:
        graph: the graph to coarsen.
        target_nodes: the most nodes to keep (None: fusion only).
        fuse_elementwise: fuse cheap single-input ops into their producer.
        fusible: which ops are cheap: op-type names or a boolean mask; by
            default the ops whose ``op_categories`` metadata (written by
            :func:`~workbench.importers.from_torch`) is elementwise or view.

    Returns:
        The coarse graph; ``metadata["coarse_groups"][i]`` lists the original ops of node ``i``.
    """
    if target_nodes is not None and target_nodes < 1:
        raise CoarsenError(f"target_nodes must be >= 1, got {target_nodes}")
    labels = np.arange(graph.num_nodes, dtype=np.int64)
    if fuse_elementwise and graph.num_nodes:
        mask = _fusible_mask(graph, fusible)
        for v in graph.topological_order:
            preds = graph.predecessors(v)
            if mask[v] and preds.size == 1:
                labels[v] = labels[preds[0]]
    coarse, labels = _contract(graph, labels) if graph.num_nodes else (graph, labels)
    while target_nodes is not None and coarse.num_nodes > target_nodes:
        needed = coarse.num_nodes - target_nodes
        pairs = _chain_pairs(coarse)
        if len(pairs) < min(needed, max(1, coarse.num_nodes // 16)):
            pairs = _level_pairs(coarse) or pairs
        if not pairs:
            break
        merged = np.arange(coarse.num_nodes, dtype=np.int64)
        for u, v in pairs[:needed]:
            merged[v] = u
        coarse, step = _contract(coarse, merged)
        labels = step[labels]
    groups: list[list[int]] = [[] for _ in range(coarse.num_nodes)]
    for op, group in enumerate(labels.tolist()):
        groups[group].append(op)
    heaviest = [max(group, key=lambda op: graph.compute[op]) for group in groups]
    metadata = {k: v for k, v in graph.metadata.items() if k not in ("op_categories", "op_flops")}
    metadata.update(coarse_groups=groups, coarsened_from=graph.num_nodes, name=f"{graph.name}_coarse{coarse.num_nodes}")
    return DataflowGraph(
        compute=coarse.compute,
        src=coarse.src,
        dst=coarse.dst,
        comm=coarse.comm,
        names=tuple(graph.op_name(h) + (f" (+{len(g) - 1})" if len(g) > 1 else "") for h, g in zip(heaviest, groups, strict=True)),
        op_types=tuple(graph.op_types[h] for h in heaviest) if graph.op_types is not None else None,
        metadata=metadata,
    )
