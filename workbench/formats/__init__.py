"""Graph file formats: the DOPPLER paper's text files, STG, and native JSON.

``load_graph(path)`` picks the format from the extension, falling back to the
content, and refuses every malformed file with a :class:`GraphFormatError`
that names the file, the line (or JSON field) and what is wrong.

What a loader accepts, in every format: a regular file (not a FIFO or a
device) of at most :data:`~workbench.graph.MAX_GRAPH_FILE_BYTES` bytes, UTF-8
with or without one byte-order mark, numbers written as plain ASCII decimals
(no ``1_000``, no other scripts' digits, no NaN or infinity), costs in
``0 .. MAX_COST``, at least one op, at most ``MAX_NODES`` ops and
``MAX_EDGES`` edges (see :mod:`workbench.graph`), and JSON nested at most
:data:`MAX_JSON_DEPTH` levels and within :data:`MAX_JSON_COUNTS`.

Memory stays within a small multiple of the file's size: the paper and STG
readers take a line at a time, count ops and edges as they read and stop at
the first count over a cap; arrays are allocated only for counts already
checked; JSON is counted before it is parsed, and its number lists never
become Python objects (see :func:`_graph_document`).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

from ..graph import MAX_GRAPH_FILE_BYTES, DataflowGraph
from .files import COUNT, GraphFormatError, read_lines, read_text_file
from .json_graph import JSON_VERSION, MAX_JSON_COUNTS, MAX_JSON_DEPTH, JSONInputError, graph_json_text, parse_json, read_json
from .paper import read_paper
from .stg import read_stg

__all__ = [
    "GraphFormatError",
    "JSONInputError",
    "load_graph",
    "save_graph",
    "FORMATS",
    "detect_format",
    "read_text_file",
    "parse_json",
    "graph_json_text",
    "MAX_GRAPH_FILE_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_JSON_COUNTS",
    "read_lines",
    "JSON_VERSION",
]


FORMATS: dict[str, Callable[[Path], DataflowGraph]] = {
    "doppler-paper": read_paper,
    "stg": read_stg,
    "json": read_json,
}
_EXTENSIONS = {".txt": "doppler-paper", ".stg": "stg", ".json": "json"}


def detect_format(path: str | os.PathLike) -> str:
    """The format name for ``path``: by extension, else by sniffing its first two non-blank lines."""
    path = Path(path)
    if path.suffix.lower() in _EXTENSIONS:
        return _EXTENSIONS[path.suffix.lower()]
    with closing(read_lines(path)) as lines:
        head = list(itertools.islice((text.strip() for _, text in lines if text.strip()), 2))
    if head[0].startswith("{"):
        return "json"
    if len(head) > 1 and "," in head[1]:
        return "doppler-paper"
    if COUNT.fullmatch(head[0]):
        return "stg"
    raise GraphFormatError(path, "unknown graph format (expected a DOPPLER .txt, an .stg or a workbench .json file)", 1)


def load_graph(path: str | os.PathLike, format: str | None = None) -> DataflowGraph:
    """Load a graph file; ``format`` is one of :data:`FORMATS` or auto-detected."""
    path = Path(path)
    name = format or detect_format(path)
    if name not in FORMATS:
        raise GraphFormatError(path, f"unknown format {name!r}; known: {', '.join(FORMATS)}")
    graph = FORMATS[name](path)
    return graph.with_metadata(path=str(path))


def save_graph(graph: DataflowGraph, path: str | os.PathLike) -> None:
    """Write ``graph`` in the native JSON format, atomically."""
    graph.save(path)
