"""Structured groups of ops that a group move takes along together (issue 28, "moves of groups").

local_search's group move takes an op and up to seven ops reached from it through neighbours on its device
(``"connected"``, breadth first). The structured kinds follow the graph's structure instead:

- ``"chain"``: a maximal run of ops along a path, each (but the first) with one input, each (but the last) with
  one consumer (elementwise chains), cut into pieces of at most :data:`MAX_GROUP` ops;
- ``"producers"``: an op with every producer whose only consumer it is (the partial results a reduction sums);
- ``"tensor"``: the blocks of one sharded tensor that share all but their last block index (names
  ``"prefix[i, j, k]"``, as the paper families and the tensor-program importers write them: the ``k`` blocks of
  row ``(i, j)``, which one consumer usually sums);
- ``"segment"``: a run of consecutive ops of the current critical chain on one device (recomputed with the chain).

The first three depend on the graph alone (:func:`structural_groups`, once per search); a segment depends on the
placement. Moving a group puts every op of it on one device, so a group that spans devices is gathered.
"""

from __future__ import annotations

import re

import numpy as np

from ..graph import DataflowGraph

__all__ = ["GROUP_KINDS", "STATIC_KINDS", "MAX_GROUP", "parse_group_kinds", "structural_groups", "critical_segments"]

GROUP_KINDS = ("connected", "chain", "producers", "tensor", "segment")
"""The kinds of group a group move may take (``"connected"``: local_search's own, breadth first on one device)."""
STATIC_KINDS = ("chain", "producers", "tensor")
"""The kinds that depend on the graph alone."""
MAX_GROUP = 16
"""The most ops a structured group holds (a longer chain is cut into pieces, a larger tensor row left out)."""
_BLOCK_NAME = re.compile(r"^(.*)\[([^\]]*)\]$")


def parse_group_kinds(groups: str) -> tuple[str, ...]:
    """The kinds named by ``groups``: ``"+"``-joined :data:`GROUP_KINDS` (``"structured"``: every kind but ``"connected"``)."""
    names = [name.strip() for name in str(groups).split("+")]
    kinds = tuple(dict.fromkeys(kind for name in names for kind in (GROUP_KINDS[1:] if name == "structured" else (name,))))
    unknown = [kind for kind in kinds if kind not in GROUP_KINDS]
    if unknown or not kinds:
        raise ValueError(f"groups must be '+'-joined kinds of {', '.join(GROUP_KINDS)} or 'structured', got {groups!r}")
    return kinds


def structural_groups(graph: DataflowGraph, kinds: tuple[str, ...]) -> list[np.ndarray]:
    """The groups of the static ``kinds`` (:data:`STATIC_KINDS`) of ``graph``, each of 2 to :data:`MAX_GROUP` ops, sorted; no duplicates."""
    found: list[np.ndarray] = []
    if "chain" in kinds:
        found += _chains(graph)
    if "producers" in kinds:
        found += _producer_groups(graph)
    if "tensor" in kinds:
        found += _tensor_rows(graph)
    unique = {tuple(int(v) for v in np.sort(g)): None for g in found if 2 <= g.size <= MAX_GROUP}
    return [np.array(g, dtype=np.int64) for g in unique]


def _chains(graph: DataflowGraph) -> list[np.ndarray]:
    """Maximal runs ``u -> v`` with ``u`` of one consumer and ``v`` of one input, in pieces of at most MAX_GROUP ops."""
    n = graph.num_nodes
    links = (graph.out_degree[graph.src] == 1) & (graph.in_degree[graph.dst] == 1)
    following = np.full(n, -1, dtype=np.int64)
    following[graph.src[links]] = graph.dst[links]
    has_previous = np.zeros(n, dtype=bool)
    has_previous[graph.dst[links]] = True
    chains = []
    for head in np.flatnonzero(~has_previous & (following >= 0)):
        run = [int(head)]
        while following[run[-1]] >= 0:
            run.append(int(following[run[-1]]))
        chains += [np.array(run[i : i + MAX_GROUP]) for i in range(0, len(run), MAX_GROUP) if len(run[i : i + MAX_GROUP]) > 1]
    return chains


def _producer_groups(graph: DataflowGraph) -> list[np.ndarray]:
    """Each op with the producers that feed it alone (those of one consumer), when it has any."""
    sole = graph.out_degree[graph.src] == 1
    groups = []
    ptr, pred, edge = graph.pred_csr
    for op in np.unique(graph.dst[sole]):
        own = pred[ptr[op] : ptr[op + 1]][sole[edge[ptr[op] : ptr[op + 1]]]]
        groups.append(np.concatenate([[op], own[: MAX_GROUP - 1]]))
    return groups


def _tensor_rows(graph: DataflowGraph) -> list[np.ndarray]:
    """Ops named ``prefix[i, ..., k]`` grouped by ``prefix`` and every block index but the last."""
    if graph.names is None:
        return []
    rows: dict[tuple[str, str], list[int]] = {}
    for op, name in enumerate(graph.names):
        match = _BLOCK_NAME.match(name)
        if match:
            indices = [part.strip() for part in match.group(2).split(",")]
            rows.setdefault((match.group(1), ",".join(indices[:-1])), []).append(op)
    return [np.array(ops) for ops in rows.values()]


def critical_segments(critical: np.ndarray, assignment: np.ndarray) -> list[np.ndarray]:
    """Runs of consecutive ops of the critical chain (as :func:`~workbench.placers.local_search.critical_chain` orders it)
    on one device, of 2 to :data:`MAX_GROUP` ops."""
    if critical.size < 2:
        return []
    devices = assignment[critical]
    cuts = np.flatnonzero(devices[1:] != devices[:-1]) + 1
    pieces = [piece[i : i + MAX_GROUP] for piece in np.split(critical, cuts) for i in range(0, piece.size, MAX_GROUP)]
    return [np.sort(piece) for piece in pieces if piece.size > 1]
