"""Graph file formats: the DOPPLER paper's text files, STG, and native JSON.

``load_graph(path)`` picks the format from the extension, falling back to the
content, and refuses every malformed file with a :class:`GraphFormatError`
that names the file, the line (or JSON field) and what is wrong.

What a loader accepts, in every format: a regular file (not a FIFO or a
device) of at most :data:`~workbench.graph.MAX_GRAPH_FILE_BYTES` bytes, UTF-8
with or without a byte-order mark, numbers written as plain ASCII decimals
(no ``1_000``, no other scripts' digits, no NaN or infinity), costs in
``0 .. MAX_COST``, at most ``MAX_NODES`` ops and ``MAX_EDGES`` edges (see
:mod:`workbench.graph`), and JSON nested at most :data:`MAX_JSON_DEPTH` levels.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .graph import MAX_COST, MAX_GRAPH_FILE_BYTES, DataflowGraph, GraphError, check_graph_size

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
    "JSON_VERSION",
]

MAX_JSON_DEPTH = 64
JSON_VERSION = 1


class GraphFormatError(ValueError):
    """A graph file that cannot be read; names the file, the line and the problem."""

    def __init__(self, path: str | os.PathLike, message: str, line: int | None = None) -> None:
        self.path = os.fspath(path)
        self.line = line
        self.reason = message
        shown = self.path if self.path.isprintable() else ascii(self.path)
        where = f"{shown}:{line}" if line is not None else shown
        super().__init__(f"{where}: {message}")


_FILE_KINDS = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def read_text_file(path: str | os.PathLike, limit: int = MAX_GRAPH_FILE_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes, without its byte-order mark.

    Never blocks on a FIFO and never reads more than ``limit + 1`` bytes, even
    from a file whose reported size is wrong; raises :class:`GraphFormatError`.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise GraphFormatError(path, "no such file") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise GraphFormatError(path, f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise GraphFormatError(path, "is a directory, not a graph file")
        if not stat.S_ISREG(info.st_mode):
            kind = _FILE_KINDS.get(stat.S_IFMT(info.st_mode), "a special file")
            raise GraphFormatError(path, f"is {kind}, not a regular file")
        if info.st_size > limit:
            raise GraphFormatError(path, f"file is {info.st_size:,} bytes, more than the {limit:,} allowed")
        with open(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise GraphFormatError(path, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise GraphFormatError(path, f"file is more than the {limit:,} bytes allowed")
    if b"\x00" in data:
        raise GraphFormatError(path, "binary data (NUL byte), not a text file", _line_of(data, data.index(b"\x00")))
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise GraphFormatError(path, f"not UTF-8 text (bad byte at offset {exc.start})", _line_of(data, exc.start)) from None
    if not text.strip():
        raise GraphFormatError(path, "file is empty")
    return text


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def _lines(text: str) -> list[str]:
    """Lines split at ``\\n`` (or ``\\r\\n``, ``\\r``) only, so line numbers match an editor's."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _build(path: Path, line_of: Callable[[GraphError], int | None], **kwargs: Any) -> DataflowGraph:
    try:
        return DataflowGraph(**kwargs)
    except GraphError as exc:
        raise GraphFormatError(path, str(exc), line_of(exc)) from None


def _check_size(path: Path, line: int | None, nodes: int, edges: int = 0) -> None:
    try:
        check_graph_size(nodes, edges)
    except GraphError as exc:
        raise GraphFormatError(path, str(exc), line) from None


# --------------------------------------------------------------------- paper
_ID_LINE = re.compile(r"[0-9, \t]*")
_COUNT = re.compile(r"[0-9]{1,18}")
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


def _node_ids(path: Path, lineno: int, text: str) -> list[int]:
    if not _ID_LINE.fullmatch(text):
        bad = re.search(r"[^0-9, \t]", text)
        assert bad is not None
        raise GraphFormatError(path, f"unexpected character {bad.group()!r} in a list of node ids", lineno)
    ids = re.findall(r"[0-9]+", text)
    long = next((x for x in ids if len(x) > 18), None)
    if long is not None:
        raise GraphFormatError(path, f"node id {long[:20]}... has {len(long)} digits, too large for a node id", lineno)
    return [int(x) for x in ids]


def read_paper(path: Path) -> DataflowGraph:
    """The DOPPLER paper's text format (see ``datasets/doppler-paper/README.md``)."""
    lines = _lines(read_text_file(path))
    if len(lines) < 4:
        raise GraphFormatError(path, f"expected at least 4 header lines, found {len(lines)}", len(lines))
    if not _COUNT.fullmatch(lines[0].strip()):
        raise GraphFormatError(path, f"line 1 must be the total node count, got {lines[0].strip()[:40]!r}", 1)
    total = int(lines[0])
    inputs, src, dst = (_node_ids(path, index + 1, lines[index]) for index in (1, 2, 3))
    n = total - len(inputs)
    if n <= 0:
        raise GraphFormatError(path, f"{total} nodes minus {len(inputs)} inputs leaves no node to schedule", 1)
    _check_size(path, 1, n, len(src))
    if len(src) != len(dst):
        raise GraphFormatError(path, f"{len(src)} edge sources on line 3 but {len(dst)} destinations on line 4", 4)
    for lineno, ends in ((3, src), (4, dst)):
        bad = [x for x in ends if x >= n]
        if bad:
            raise GraphFormatError(path, f"edge names node {bad[0]}, but nodes are numbered 0..{n - 1}", lineno)
    body = lines[4:]
    while body and not body[-1].strip():
        body.pop()
    if len(body) < n:
        raise GraphFormatError(path, f"{len(body)} cost lines for {n} nodes", 5 + len(body))
    if len(body) > n:
        raise GraphFormatError(path, f"more cost lines than the {n} nodes", 5 + n)
    compute = np.empty(n)
    out_comm = np.empty(n)
    op_types: list[str | None] = []
    for i, text in enumerate(body):
        lineno = 5 + i
        parts = [p.strip() for p in text.split(",")]
        if len(parts) < 2:
            raise GraphFormatError(path, f"expected 'compute_cost,communication_cost', got {text.strip()[:40]!r}", lineno)
        compute[i] = _parse_cost(path, lineno, parts[0], "compute cost")
        out_comm[i] = _parse_cost(path, lineno, parts[1], "communication cost")
        op_types.append(",".join(parts[2:]) if len(parts) > 2 else None)
    types = None if all(t is None for t in op_types) else tuple(t or "" for t in op_types)
    src_array = np.array(src, dtype=np.int64)
    return _build(
        path,
        lambda error: 3,
        compute=compute,
        src=src_array,
        dst=np.array(dst, dtype=np.int64),
        comm=out_comm[src_array] if src_array.size else np.zeros(0),
        op_types=types,
        metadata={"format": "doppler-paper", "name": path.stem, "input_nodes": len(inputs), "time_unit": "paper (÷1e10 when reported)"},
    )


# ----------------------------------------------------------------------- STG
_INTEGER = re.compile(r"-?[0-9]+")


def _stg_numbers(path: Path, lineno: int, fields: list[str]) -> list[int]:
    bad = next((x for x in fields if not _INTEGER.fullmatch(x)), None)
    if bad is not None:
        raise GraphFormatError(path, f"{bad[:40]!r} is not an integer (plain ASCII digits)", lineno)
    long = next((x for x in fields if len(x) > 30), None)
    if long is not None:
        raise GraphFormatError(path, f"number {long[:20]}... has {len(long)} digits, too large", lineno)
    return [int(x) for x in fields]


def read_stg(path: Path) -> DataflowGraph:
    """The Standard Task Graph Set format; the dummy entry and exit tasks are dropped."""
    rows: list[tuple[int, list[str]]] = []
    for lineno, text in enumerate(_lines(read_text_file(path)), start=1):
        stripped = text.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            break
        rows.append((lineno, stripped.split()))
    if not rows:
        raise GraphFormatError(path, "no task count line", 1)
    first_line, first = rows[0]
    if len(first) != 1 or not _COUNT.fullmatch(first[0]):
        raise GraphFormatError(path, f"the first line must be the task count, got {' '.join(first)[:40]!r}", first_line)
    n = int(first[0])
    _check_size(path, first_line, n)
    tasks = rows[1:]
    if len(tasks) != n + 2:
        last = tasks[-1][0] if tasks else first_line
        raise GraphFormatError(path, f"{len(tasks)} task lines, expected {n + 2} ({n} tasks plus dummy entry and exit)", last)
    cost = np.zeros(n + 2)
    preds: list[list[int]] = [[] for _ in range(n + 2)]
    seen: dict[int, int] = {}
    for lineno, fields in tasks:
        numbers = _stg_numbers(path, lineno, fields)
        if len(numbers) < 3:
            raise GraphFormatError(path, "a task line needs 'id cost num_predecessors [predecessors...]'", lineno)
        task, task_cost, count, *pred = numbers
        if not 0 <= task <= n + 1:
            raise GraphFormatError(path, f"task id {task} outside 0..{n + 1}", lineno)
        if task in seen:
            raise GraphFormatError(path, f"duplicate task id {task} (first on line {seen[task]})", lineno)
        seen[task] = lineno
        if task_cost < 0:
            raise GraphFormatError(path, f"negative cost {task_cost} for task {task}", lineno)
        if task_cost > MAX_COST:
            raise GraphFormatError(path, f"cost {task_cost} of task {task} is more than the {MAX_COST:g} allowed", lineno)
        if count != len(pred):
            raise GraphFormatError(path, f"task {task} declares {count} predecessors but lists {len(pred)}", lineno)
        bad = [p for p in pred if not 0 <= p <= n + 1]
        if bad:
            raise GraphFormatError(path, f"predecessor {bad[0]} of task {task} outside 0..{n + 1}", lineno)
        cost[task] = task_cost
        preds[task] = pred
    real = np.arange(1, n + 1)
    src = [p - 1 for t in real for p in preds[t] if 1 <= p <= n]
    dst = [t - 1 for t in real for p in preds[t] if 1 <= p <= n]
    _check_size(path, first_line, n, len(src))
    for t in (0, n + 1):
        if cost[t] != 0:
            raise GraphFormatError(path, f"dummy task {t} must have cost 0, has {cost[t]:g}", seen[t])
    return _build(
        path,
        lambda error: seen[error.op + 1] if error.op is not None else None,
        compute=cost[1 : n + 1],
        src=np.array(src, dtype=np.int64),
        dst=np.array(dst, dtype=np.int64),
        comm=np.zeros(len(src)),
        names=tuple(f"t{t}" for t in real),
        metadata={"format": "stg", "name": path.stem},
    )


# ---------------------------------------------------------------------- JSON
class JSONInputError(ValueError):
    """JSON text that :func:`parse_json` refuses; ``line`` is where, when known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)  # "? keeps an unterminated string linear
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_CHUNK = 1 << 22


def _nests_deeper_than(text: str, limit: int) -> bool:
    """True when arrays and objects in ``text`` nest more than ``limit`` deep (brackets in strings aside); linear time."""
    if text.count("[") + text.count("{") <= limit:
        return False
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)).encode("ascii")
    codes = np.frombuffer(brackets, dtype=np.uint8)
    depth = 0
    for start in range(0, codes.size, _DEPTH_CHUNK):
        chunk = codes[start : start + _DEPTH_CHUNK]
        running = depth + np.cumsum(np.where((chunk == ord("[")) | (chunk == ord("{")), 1, -1))
        if running.max() > limit:
            return True
        depth = int(running[-1])
    return False


def _reject_constant(name: str) -> Any:
    raise JSONInputError(f"{name} is not a JSON number")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise JSONInputError(f"duplicate key {key[:40]!r} in an object")
        out[key] = value
    return out


def parse_json(text: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Strict JSON: at most ``max_depth`` levels deep (checked before parsing), no NaN or
    Infinity, no duplicate keys; raises :class:`JSONInputError`."""
    text = text.removeprefix("\ufeff")
    if _nests_deeper_than(text, max_depth):
        raise JSONInputError(f"nested more than {max_depth} levels deep")
    try:
        return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise JSONInputError(exc.msg, exc.lineno) from None
    except ValueError as exc:  # an integer of more digits than int() converts
        raise JSONInputError(str(exc).split(";")[0]) from None


_JSON_KEYS = ("format", "version", "num_nodes", "compute", "src", "dst", "comm", "names", "op_types", "metadata")
_MAX_ID = 2**62


def _json_numbers(path: Path, data: dict, key: str) -> np.ndarray:
    values = data.get(key)
    if not isinstance(values, list):
        raise GraphFormatError(path, f"field {key!r} must be a list")
    if not set(map(type, values)) <= {int, float}:
        i, x = next((i, x) for i, x in enumerate(values) if type(x) not in (int, float))
        raise GraphFormatError(path, f"field {key!r} holds a non-number {x!r} (item {i})")
    try:
        return np.array(values, dtype=np.float64)
    except OverflowError:
        raise GraphFormatError(path, f"field {key!r} holds an integer too large for a float") from None


def _json_costs(path: Path, data: dict, key: str) -> np.ndarray:
    values = _json_numbers(path, data, key)
    bad = np.flatnonzero(~((values >= 0) & (values <= MAX_COST)))
    if bad.size:
        raise GraphFormatError(path, f"field {key!r} item {bad[0]} is {values[bad[0]]:g}, not a cost in 0..{MAX_COST:g}")
    return values


def _json_ids(path: Path, data: dict, key: str) -> np.ndarray:
    values = _json_numbers(path, data, key)
    fractional = np.flatnonzero(values != np.floor(values))
    if fractional.size:
        raise GraphFormatError(path, f"field {key!r} item {fractional[0]} is {float(values[fractional[0]])!r}, not an integer op id")
    far = np.flatnonzero(np.abs(values) >= _MAX_ID)
    if far.size:
        raise GraphFormatError(path, f"field {key!r} item {far[0]} is {values[far[0]]:g}, far outside the op ids")
    return values.astype(np.int64)


def read_json(path: Path) -> DataflowGraph:
    """The workbench's native JSON format (written by :meth:`DataflowGraph.save`), version :data:`JSON_VERSION`."""
    try:
        data = parse_json(read_text_file(path))
    except JSONInputError as exc:
        raise GraphFormatError(path, f"invalid JSON: {exc}", exc.line) from None
    if not isinstance(data, dict):
        raise GraphFormatError(path, f"expected a JSON object, got {type(data).__name__}", 1)
    if data.get("format") != "workbench-graph":
        raise GraphFormatError(path, 'not a workbench graph: missing "format": "workbench-graph"', 1)
    unknown = [key for key in data if key not in _JSON_KEYS]
    if unknown:
        raise GraphFormatError(path, f"unknown field {unknown[0][:40]!r}; a workbench graph has {', '.join(_JSON_KEYS)}")
    version = data.get("version", JSON_VERSION)
    if isinstance(version, bool) or version != JSON_VERSION:
        raise GraphFormatError(path, f"unknown version {version!r}; this workbench reads version {JSON_VERSION}")
    compute = _json_costs(path, data, "compute")
    src, dst = _json_ids(path, data, "src"), _json_ids(path, data, "dst")
    comm = _json_costs(path, data, "comm")
    for key in ("names", "op_types"):
        value = data.get(key)
        if value is not None and not (isinstance(value, list) and set(map(type, value)) <= {str}):
            raise GraphFormatError(path, f"field {key!r} must be a list of strings or null")
    num_nodes = data.get("num_nodes", len(compute))
    if isinstance(num_nodes, bool) or num_nodes != len(compute):
        raise GraphFormatError(path, f"num_nodes is {num_nodes!r} but {len(compute)} compute costs are given")
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise GraphFormatError(path, "field 'metadata' must be an object")
    return _build(
        path,
        lambda error: None,
        compute=compute,
        src=src,
        dst=dst,
        comm=comm,
        names=data.get("names"),
        op_types=data.get("op_types"),
        metadata=metadata if "name" in metadata else {**metadata, "name": path.stem},
    )


FORMATS: dict[str, Callable[[Path], DataflowGraph]] = {
    "doppler-paper": read_paper,
    "stg": read_stg,
    "json": read_json,
}
_EXTENSIONS = {".txt": "doppler-paper", ".stg": "stg", ".json": "json"}


def detect_format(path: str | os.PathLike) -> str:
    """The format name for ``path``: by extension, else by sniffing the content."""
    path = Path(path)
    if path.suffix.lower() in _EXTENSIONS:
        return _EXTENSIONS[path.suffix.lower()]
    text = read_text_file(path).lstrip()
    if text.startswith("{"):
        return "json"
    lines = [line for line in _lines(text) if line.strip()]
    if len(lines) > 1 and "," in lines[1]:
        return "doppler-paper"
    if lines and _COUNT.fullmatch(lines[0].strip()):
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


def graph_json_text(graph: DataflowGraph) -> str:
    """``graph`` as native JSON text; raises :class:`GraphError` for a text that :func:`load_graph` would refuse."""
    try:
        text = json.dumps(graph.to_dict(), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise GraphError(f"the graph's metadata cannot be saved as JSON: {exc}") from None
    if _nests_deeper_than(text, MAX_JSON_DEPTH):
        raise GraphError(f"the graph's metadata nests more than {MAX_JSON_DEPTH} levels deep")
    size = len(text.encode("utf-8"))
    if size > MAX_GRAPH_FILE_BYTES:
        raise GraphError(f"the graph's file would be {size:,} bytes, more than the {MAX_GRAPH_FILE_BYTES:,} a graph file may hold")
    return text


def save_graph(graph: DataflowGraph, path: str | os.PathLike) -> None:
    """Write ``graph`` in the native JSON format, atomically."""
    graph.save(path)
