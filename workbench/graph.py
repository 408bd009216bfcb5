"""The one immutable dataflow-graph model every layer shares.

A :class:`DataflowGraph` is a DAG of ``n`` ops numbered ``0 .. n-1``. Each op
has a compute cost (the time it runs on a device) and each edge a
communication cost (the time to move the producer's output to a consumer on
another device). Costs are kept in the graph's own time unit and never
rescaled. Arrays are read-only; derived structure (topological order, CSR
adjacency, levels) is computed once on first use.

Every graph respects the same limits, whether loaded, generated or imported:
at most :data:`MAX_NODES` ops and :data:`MAX_EDGES` edges, costs at most
:data:`MAX_COST` (so no sum of costs, hence no makespan, can overflow), and a
saved file of at most :data:`MAX_GRAPH_FILE_BYTES` (what ``load_graph`` reads).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from .fileio import atomic_write_text

if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "DataflowGraph",
    "GraphError",
    "check_graph_size",
    "printable",
    "MAX_NODES",
    "MAX_EDGES",
    "MAX_COST",
    "MAX_GRAPH_FILE_BYTES",
]

MAX_NODES = 1_000_000
MAX_EDGES = 4_000_000
MAX_COST = 1e18
MAX_GRAPH_FILE_BYTES = 256 * 1024 * 1024


class GraphError(ValueError):
    """A graph that violates the model (cycle, bad index, bad cost, ...).

    ``op`` and ``edge`` name the offending op or edge index when there is one,
    so a loader can point at the line of the file that holds it.
    """

    def __init__(self, message: str, op: int | None = None, edge: int | None = None) -> None:
        super().__init__(message)
        self.op = op
        self.edge = edge


def check_graph_size(nodes: int, edges: int = 0) -> None:
    """Refuse a graph of more than :data:`MAX_NODES` ops or :data:`MAX_EDGES` edges (before building it)."""
    if nodes > MAX_NODES:
        raise GraphError(f"{nodes:,} ops, more than the {MAX_NODES:,} a graph may hold (workbench.graph.MAX_NODES)")
    if edges > MAX_EDGES:
        raise GraphError(f"{edges:,} edges, more than the {MAX_EDGES:,} a graph may hold (workbench.graph.MAX_EDGES)")


def printable(text: str) -> str:
    """``text`` safe to print on a terminal: each non-printable character (newline, ANSI escape, bidi control) written as its escape."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _frozen(array: Any, dtype: Any) -> np.ndarray:
    out = np.array(array, dtype=dtype, copy=True).reshape(-1)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class DataflowGraph:
    """An immutable DAG of ops with compute and communication costs.

    Attributes:
        compute: compute cost per op, shape ``(n,)``.
        src: source op of each edge, shape ``(m,)``.
        dst: destination op of each edge, shape ``(m,)``.
        comm: communication cost of each edge (time to send the source's output
            to a device other than its own), shape ``(m,)``.
        names: optional name per op.
        op_types: optional op type per op (``einsummable``, ``matmul``, ...).
        metadata: where the graph came from (format, file, generator, ...).
    """

    compute: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    comm: np.ndarray
    names: tuple[str, ...] | None = None
    op_types: tuple[str, ...] | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        compute = _frozen(self.compute, np.float64)
        src = _frozen(self.src, np.int64)
        dst = _frozen(self.dst, np.int64)
        comm = _frozen(self.comm, np.float64)
        n = compute.size
        check_graph_size(n, src.size)
        if src.size != dst.size:
            raise GraphError(f"{src.size} edge sources but {dst.size} edge destinations")
        if comm.size != src.size:
            raise GraphError(f"{comm.size} communication costs for {src.size} edges")
        for label, costs in (("compute", compute), ("communication", comm)):
            bad = np.flatnonzero(~(costs >= 0) | ~(costs <= MAX_COST))
            if bad.size:
                where = {"op": int(bad[0])} if label == "compute" else {"edge": int(bad[0])}
                raise GraphError(
                    f"{label} cost {costs[bad[0]]:g} at index {bad[0]} is not a number in 0..{MAX_COST:g} (workbench.graph.MAX_COST)",
                    **where,
                )
        for label, ends in (("source", src), ("destination", dst)):
            bad = np.flatnonzero((ends < 0) | (ends >= n))
            if bad.size:
                raise GraphError(f"edge {bad[0]} has {label} {ends[bad[0]]}, but ops are numbered 0..{n - 1}", edge=int(bad[0]))
        loops = np.flatnonzero(src == dst)
        if loops.size:
            raise GraphError(f"edge {loops[0]} is a self-loop on op {src[loops[0]]}", edge=int(loops[0]))
        for label, values in (("names", self.names), ("op_types", self.op_types)):
            if values is not None and len(values) != n:
                raise GraphError(f"{len(values)} {label} for {n} ops")
        object.__setattr__(self, "compute", compute)
        object.__setattr__(self, "src", src)
        object.__setattr__(self, "dst", dst)
        object.__setattr__(self, "comm", comm)
        if self.names is not None:
            object.__setattr__(self, "names", tuple(str(x) for x in self.names))
        if self.op_types is not None:
            object.__setattr__(self, "op_types", tuple(str(x) for x in self.op_types))
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))
        _ = self.topological_order  # raises GraphError on a cycle

    # ----------------------------------------------------------------- sizes
    @property
    def num_nodes(self) -> int:
        return int(self.compute.size)

    @property
    def num_edges(self) -> int:
        return int(self.src.size)

    @property
    def name(self) -> str:
        """A short label: the metadata's ``name`` or ``"graph"``, with control characters escaped (:func:`printable`)."""
        return printable(str(self.metadata.get("name", "graph")))

    def __len__(self) -> int:
        return self.num_nodes

    def __repr__(self) -> str:
        return f"DataflowGraph(name={self.name!r}, nodes={self.num_nodes}, edges={self.num_edges})"

    def op_name(self, op: int) -> str:
        return self.names[op] if self.names is not None else f"op{op}"

    # ------------------------------------------------------------- structure
    @staticmethod
    def _csr(keys: np.ndarray, values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        order = np.argsort(keys, kind="stable")
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
        for a in (ptr, values[order], order):
            a.setflags(write=False)
        return ptr, values[order], order

    @cached_property
    def succ_csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ptr, succ, edge)``: out-edges of op ``u`` are ``edge[ptr[u]:ptr[u+1]]``, in file order."""
        return self._csr(self.src, self.dst, self.num_nodes)

    @cached_property
    def pred_csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ptr, pred, edge)``: in-edges of op ``v`` are ``edge[ptr[v]:ptr[v+1]]``, in file order."""
        return self._csr(self.dst, self.src, self.num_nodes)

    def successors(self, op: int) -> np.ndarray:
        ptr, succ, _ = self.succ_csr
        return succ[ptr[op] : ptr[op + 1]]

    def predecessors(self, op: int) -> np.ndarray:
        ptr, pred, _ = self.pred_csr
        return pred[ptr[op] : ptr[op + 1]]

    @cached_property
    def in_degree(self) -> np.ndarray:
        out = np.bincount(self.dst, minlength=self.num_nodes).astype(np.int64)
        out.setflags(write=False)
        return out

    @cached_property
    def out_degree(self) -> np.ndarray:
        out = np.bincount(self.src, minlength=self.num_nodes).astype(np.int64)
        out.setflags(write=False)
        return out

    @cached_property
    def topological_order(self) -> np.ndarray:
        """Kahn's order, smallest ready id first; raises :class:`GraphError` on a cycle."""
        import heapq

        n = self.num_nodes
        remaining = np.bincount(self.dst, minlength=n)
        ptr, succ, _ = self.succ_csr
        heap = [int(v) for v in np.flatnonzero(remaining == 0)]
        heapq.heapify(heap)
        order: list[int] = []
        while heap:
            u = heapq.heappop(heap)
            order.append(u)
            for v in succ[ptr[u] : ptr[u + 1]]:
                remaining[v] -= 1
                if remaining[v] == 0:
                    heapq.heappush(heap, int(v))
        if len(order) != n:
            stuck = int(np.flatnonzero(remaining > 0)[0])
            raise GraphError(f"the graph has a cycle through op {stuck}", op=stuck)
        out = np.array(order, dtype=np.int64)
        out.setflags(write=False)
        return out

    @cached_property
    def depth(self) -> np.ndarray:
        """Topological depth of each op (sources have depth 0)."""
        from .levels import depths

        depth = depths(self)
        depth.setflags(write=False)
        return depth

    # ---------------------------------------------------------------- levels
    def bottom_level(self, with_comm: bool = True) -> np.ndarray:
        """Longest path from each op to an exit, the op's own cost included."""
        from .levels import longest_to_exit  # compiled: numba is imported on first use, not with the graph

        return longest_to_exit(self, self.compute, self.comm if with_comm else np.zeros_like(self.comm))

    def top_level(self, with_comm: bool = True) -> np.ndarray:
        """Longest path from an entry to each op, the op's own cost excluded."""
        from .levels import longest_from_entry

        return longest_from_entry(self, self.compute, self.comm if with_comm else np.zeros_like(self.comm))

    @cached_property
    def _paths(self) -> dict[str, float]:
        return {
            "compute": float(self.bottom_level(False).max(initial=0.0)),
            "with_comm": float(self.bottom_level(True).max(initial=0.0)),
        }

    def longest_path(self, with_comm: bool = False) -> float:
        """Length of the longest path (compute only unless ``with_comm``)."""
        return self._paths["with_comm" if with_comm else "compute"]

    @property
    def total_compute(self) -> float:
        return float(self.compute.sum())

    @property
    def total_comm(self) -> float:
        return float(self.comm.sum())

    def critical_path(self, with_comm: bool = True) -> list[int]:
        """The ops of one longest path, entry to exit."""
        if self.num_nodes == 0:
            return []
        comm = self.comm if with_comm else np.zeros_like(self.comm)
        level = self.bottom_level(with_comm)
        ptr, succ, edge = self.succ_csr
        op = int(np.argmax(np.where(self.in_degree == 0, level, -np.inf)))
        path = [op]
        while ptr[op + 1] > ptr[op]:
            lo, hi = ptr[op], ptr[op + 1]
            candidates = comm[edge[lo:hi]] + level[succ[lo:hi]]
            op = int(succ[lo:hi][np.argmax(candidates)])
            path.append(op)
        return path

    # ----------------------------------------------------------- conversion
    def to_networkx(self) -> nx.DiGraph:
        """A ``networkx.DiGraph`` with ``compute`` on nodes and ``comm`` on edges."""
        import networkx as nx

        g = nx.DiGraph(**dict(self.metadata))
        for i in range(self.num_nodes):
            attrs: dict[str, Any] = {"compute": float(self.compute[i])}
            if self.names is not None:
                attrs["name"] = self.names[i]
            if self.op_types is not None:
                attrs["op_type"] = self.op_types[i]
            g.add_node(i, **attrs)
        for s, d, c in zip(self.src.tolist(), self.dst.tolist(), self.comm.tolist(), strict=True):
            g.add_edge(s, d, comm=c)
        return g

    @classmethod
    def from_networkx(cls, g: nx.DiGraph, compute: str = "compute", comm: str = "comm") -> DataflowGraph:
        """Build from a networkx DiGraph; nodes are renumbered in iteration order."""
        nodes = list(g.nodes)
        index = {node: i for i, node in enumerate(nodes)}
        missing = [node for node in nodes if compute not in g.nodes[node]]
        if missing:
            raise GraphError(f"node {missing[0]!r} has no {compute!r} attribute")
        edges = list(g.edges(data=True))
        names = tuple(str(g.nodes[node].get("name", node)) for node in nodes)
        types = [g.nodes[node].get("op_type") for node in nodes]
        return cls(
            compute=np.array([g.nodes[node][compute] for node in nodes], dtype=np.float64),
            src=np.array([index[s] for s, _, _ in edges], dtype=np.int64),
            dst=np.array([index[d] for _, d, _ in edges], dtype=np.int64),
            comm=np.array([data.get(comm, 0.0) for _, _, data in edges], dtype=np.float64),
            names=names,
            op_types=None if all(t is None for t in types) else tuple(str(t) for t in types),
            metadata=dict(g.graph),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict that :meth:`from_dict` turns back into an equal graph."""

        def plain(values: np.ndarray) -> list:
            as_int = values.astype(np.int64)
            return as_int.tolist() if np.array_equal(as_int, values) else values.tolist()

        return {
            "format": "workbench-graph",
            "version": 1,
            "num_nodes": self.num_nodes,
            "compute": plain(self.compute),
            "src": self.src.tolist(),
            "dst": self.dst.tolist(),
            "comm": plain(self.comm),
            "names": list(self.names) if self.names is not None else None,
            "op_types": list(self.op_types) if self.op_types is not None else None,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DataflowGraph:
        return cls(
            compute=data["compute"],
            src=data["src"],
            dst=data["dst"],
            comm=data["comm"],
            names=data.get("names"),
            op_types=data.get("op_types"),
            metadata=data.get("metadata") or {},
        )

    def save(self, path: str | os.PathLike) -> None:
        """Write the native JSON format atomically (temp file, then rename); refuses a file ``load_graph`` would refuse."""
        from .formats import graph_json_text

        atomic_write_text(path, graph_json_text(self))

    def with_metadata(self, **updates: Any) -> DataflowGraph:
        """A copy with ``metadata`` updated; it shares the read-only arrays and derived structure, already validated."""
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        object.__setattr__(copy, "metadata", MappingProxyType({**self.metadata, **updates}))
        return copy

    def same_as(self, other: DataflowGraph) -> bool:
        """True when both graphs hold the same ops, edges, costs, names and types."""
        return (
            np.array_equal(self.compute, other.compute)
            and np.array_equal(self.src, other.src)
            and np.array_equal(self.dst, other.dst)
            and np.array_equal(self.comm, other.comm)
            and self.names == other.names
            and self.op_types == other.op_types
        )

    @classmethod
    def from_edges(
        cls,
        compute: Sequence[float],
        edges: Sequence[tuple[int, int]] | Sequence[tuple[int, int, float]],
        comm: float | Sequence[float] = 0.0,
        **kwargs: Any,
    ) -> DataflowGraph:
        """Convenience constructor: ``edges`` as ``(src, dst)`` or ``(src, dst, comm)`` tuples."""
        rows = [tuple(e) for e in edges]
        src = np.array([row[0] for row in rows], dtype=np.int64)
        dst = np.array([row[1] for row in rows], dtype=np.int64)
        if rows and len(rows[0]) == 3:
            costs = np.array([row[2] for row in rows], dtype=np.float64)
        elif np.ndim(comm) == 0:
            costs = np.full(src.size, comm, dtype=np.float64)
        else:
            costs = np.array(comm, dtype=np.float64)
        return cls(compute=np.array(compute, dtype=np.float64), src=src, dst=dst, comm=costs, **kwargs)
