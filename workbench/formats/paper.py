"""The DOPPLER paper's text format (datasets/doppler-paper/README.md): read a line at a time, counted before allocated."""

from __future__ import annotations

import itertools
import re
from contextlib import closing
from pathlib import Path

import numpy as np

from ..graph import MAX_COST, MAX_EDGES, MAX_NODES, DataflowGraph
from .files import COUNT, GraphFormatError, build_graph, check_size, read_lines

_ID_LINE = re.compile(r"[0-9, \t]*")
_LONG_ID = re.compile(r"[0-9]{19,}")
_ID = re.compile(r"[0-9]+")
_DECIMAL = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]{1,4})?")


def _parse_cost(path: Path, lineno: int, text: str, what: str) -> float:
    """A cost written as a plain ASCII decimal in ``0 .. MAX_COST``."""
    text = text.strip()
    if not _DECIMAL.fullmatch(text):
        raise GraphFormatError(path, f"{what} {text[:40]!r} is not a number (a plain decimal such as 12 or 1.5e3)", lineno)
    value = float(text)
    if not 0 <= value <= MAX_COST:
        raise GraphFormatError(path, f"{what} {text[:40]} must be a finite number >= 0 and at most {MAX_COST:g}", lineno)
    return value


# The header's lines of node ids: (index, most ids, what they are).
_PAPER_ID_LINES = (
    (1, MAX_NODES, "input nodes a graph file may list (workbench.graph.MAX_NODES)"),
    (2, MAX_EDGES, "edges a graph may hold (workbench.graph.MAX_EDGES)"),
    (3, MAX_EDGES, "edges a graph may hold (workbench.graph.MAX_EDGES)"),
)


def _count_node_ids(path: Path, lineno: int, text: str, cap: int) -> int:
    """How many node ids a line lists, after checking its characters and digits; counting stops past ``cap``, and no list is built."""
    if not _ID_LINE.fullmatch(text):
        bad = re.search(r"[^0-9, \t]", text)
        assert bad is not None
        raise GraphFormatError(path, f"unexpected character {bad.group()!r} in a list of node ids", lineno)
    long = _LONG_ID.search(text)
    if long is not None:
        digits, shown = long.end() - long.start(), text[long.start() : long.start() + 20]
        raise GraphFormatError(path, f"node id {shown}... has {digits} digits, too large for a node id", lineno)
    return sum(1 for _ in itertools.islice(_ID.finditer(text), cap + 1))


def _node_ids(text: str, count: int) -> np.ndarray:
    """The ``count`` ids of a line that :func:`_count_node_ids` checked, parsed by numpy (no Python object per id)."""
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    return np.fromstring(text.replace(",", " "), dtype=np.int64, sep=" ")


def read_paper(path: Path) -> DataflowGraph:
    """The DOPPLER paper's text format (see ``datasets/doppler-paper/README.md``), read a line at a time."""
    with closing(read_lines(path)) as lines:
        header = [text for _, text in itertools.islice(lines, 4)]
        if not header[0].strip():
            any(text.strip() for _, text in lines)  # reads on: a file of blank lines is refused as empty
        if len(header) < 4:
            raise GraphFormatError(path, f"expected at least 4 header lines, found {len(header)}", len(header))
        if not COUNT.fullmatch(header[0].strip()):
            raise GraphFormatError(path, f"line 1 must be the total node count, got {header[0].strip()[:40]!r}", 1)
        total = int(header[0])
        counts = []
        for index, cap, what in _PAPER_ID_LINES:
            counts.append(_count_node_ids(path, index + 1, header[index], cap))
            if counts[-1] > cap:
                raise GraphFormatError(path, f"more than the {cap:,} {what}", index + 1)
        inputs, edges, destinations = counts
        n = total - inputs
        if n <= 0:
            raise GraphFormatError(path, f"{total} nodes minus {inputs} inputs leaves no node to schedule", 1)
        check_size(path, 1, n)
        if edges != destinations:
            raise GraphFormatError(path, f"{edges} edge sources on line 3 but {destinations} destinations on line 4", 4)
        src, dst = _node_ids(header[2], edges), _node_ids(header[3], edges)
        del header
        for lineno, ends in ((3, src), (4, dst)):
            bad = np.flatnonzero(ends >= n)
            if bad.size:
                raise GraphFormatError(path, f"edge names node {ends[bad[0]]}, but nodes are numbered 0..{n - 1}", lineno)
        compute = np.empty(n)
        out_comm = np.empty(n)
        op_types: list[str | None] = []
        first_blank = None  # a blank line is a (malformed) cost line unless only blank lines follow it
        for lineno, text in lines:
            if not text.strip():
                first_blank = first_blank or lineno
                continue
            for at, line in ((first_blank, ""), (lineno, text)):
                if at is None:
                    continue
                if len(op_types) == n:
                    raise GraphFormatError(path, f"more cost lines than the {n} nodes", 5 + n)
                parts = [p.strip() for p in line.split(",")]
                if len(parts) < 2:
                    raise GraphFormatError(path, f"expected 'compute_cost,communication_cost', got {line.strip()[:40]!r}", at)
                compute[len(op_types)] = _parse_cost(path, at, parts[0], "compute cost")
                out_comm[len(op_types)] = _parse_cost(path, at, parts[1], "communication cost")
                op_types.append(",".join(parts[2:]) if len(parts) > 2 else None)
            first_blank = None
    if len(op_types) < n:
        raise GraphFormatError(path, f"{len(op_types)} cost lines for {n} nodes", 5 + len(op_types))
    types = None if all(t is None for t in op_types) else tuple(t or "" for t in op_types)
    return build_graph(
        path,
        lambda error: 3,
        compute=compute,
        src=src,
        dst=dst,
        comm=out_comm[src],
        op_types=types,
        metadata={"format": "doppler-paper", "name": path.stem, "input_nodes": inputs, "time_unit": "paper (÷1e10 when reported)"},
    )


# ----------------------------------------------------------------------- STG
