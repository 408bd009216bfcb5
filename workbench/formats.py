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
import json
import math
import os
import re
import stat
from array import array
from collections.abc import Callable, Generator, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from .graph import MAX_COST, MAX_EDGES, MAX_GRAPH_FILE_BYTES, MAX_NODES, DataflowGraph, GraphError, check_graph_size

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

MAX_JSON_DEPTH = 64
# What a JSON input may hold, counted outside strings before it is parsed: enough for the largest
# graph file (a cost per op and per edge, two ends per edge, names and op types, and an importer's
# per-op metadata: categories, flops, coarsening groups), and a bound on what the parser builds.
MAX_JSON_COUNTS = {
    "strings": 4 * MAX_NODES + 65_536,
    "arrays and objects": 2 * MAX_NODES + 65_536,
    "items": 5 * MAX_NODES + 3 * MAX_EDGES + 65_536,
}
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
_BOM = b"\xef\xbb\xbf"
_CHUNK = 1 << 18


@contextmanager
def _open_graph_file(path: Path, limit: int) -> Iterator[BinaryIO]:
    """``path`` opened for reading when it is a regular file that reports at most ``limit`` bytes (never blocks on a FIFO)."""
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
            yield handle
    except OSError as exc:
        raise GraphFormatError(path, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _without_bom(path: Path, data: bytes) -> bytes:
    """``data`` without its byte-order mark; a second one is refused (it is no part of any format)."""
    data = data.removeprefix(_BOM)
    if data.startswith(_BOM):
        raise GraphFormatError(path, "more than one byte-order mark at the start of the file", 1)
    return data


def read_text_file(path: str | os.PathLike, limit: int = MAX_GRAPH_FILE_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes, without its byte-order mark.

    Never blocks on a FIFO and never reads more than ``limit + 1`` bytes, even
    from a file whose reported size is wrong; raises :class:`GraphFormatError`.
    """
    path = Path(path)
    with _open_graph_file(path, limit) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise GraphFormatError(path, f"file is more than the {limit:,} bytes allowed")
    if b"\x00" in data:
        raise GraphFormatError(path, "binary data (NUL byte), not a text file", _line_of(data, data.index(b"\x00")))
    try:
        text = _without_bom(path, data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GraphFormatError(path, f"not UTF-8 text (bad byte at offset {exc.start})", _line_of(data, exc.start)) from None
    del data
    if not text.strip():
        raise GraphFormatError(path, "file is empty")
    return text


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def read_lines(path: str | os.PathLike, limit: int = MAX_GRAPH_FILE_BYTES) -> Generator[tuple[int, str], None, None]:
    """``(line number, text)`` for each line of a UTF-8 text file, read a chunk at a time.

    The same checks as :func:`read_text_file` (a regular file of at most ``limit``
    bytes, one optional byte-order mark, no NUL byte, UTF-8), made as the lines
    are read, so memory holds one line, never the file. Lines end at ``\\n``,
    ``\\r\\n`` or ``\\r`` (numbers match an editor's); the text excludes the
    line end. Once the last line is read, a file without any non-blank text is
    refused as empty.
    """
    path = Path(path)
    with _open_graph_file(path, limit) as handle:
        lineno, total, blank = 0, 0, True
        partial: list[bytes] = []  # the pieces of a line that spans chunks
        carry = b""  # a trailing \r, which may start a \r\n
        while True:
            first = total == 0
            chunk = handle.read(max(_CHUNK, 2 * len(_BOM)) if first else _CHUNK)  # the first holds any byte-order marks whole
            total += len(chunk)
            if total > limit:
                raise GraphFormatError(path, f"file is more than the {limit:,} bytes allowed")
            if first:
                chunk = _without_bom(path, chunk)
            if not chunk:
                break
            chunk = (carry + chunk).replace(b"\r\n", b"\n")
            carry = b"\r" if chunk.endswith(b"\r") else b""
            chunk = chunk[: len(chunk) - len(carry)].replace(b"\r", b"\n")
            if b"\x00" in chunk:
                raise GraphFormatError(path, "binary data (NUL byte), not a text file", lineno + _line_of(chunk, chunk.index(b"\x00")))
            *complete, rest = chunk.split(b"\n")
            for piece in complete:
                if partial:
                    partial.append(piece)
                    piece = b"".join(partial)
                    partial.clear()
                lineno += 1
                text = _decoded(path, piece, lineno)
                blank = blank and not text.strip()
                yield lineno, text
            if rest:
                partial.append(rest)
        if partial or carry:
            lineno += 1
            text = _decoded(path, b"".join(partial), lineno)
            blank = blank and not text.strip()
            yield lineno, text
    if blank:
        raise GraphFormatError(path, "file is empty")


def _decoded(path: Path, line: bytes, lineno: int) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GraphFormatError(path, f"not UTF-8 text (bad byte at offset {exc.start} of the line)", lineno) from None


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
_LONG_ID = re.compile(r"[0-9]{19,}")
_ID = re.compile(r"[0-9]+")
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
        if not _COUNT.fullmatch(header[0].strip()):
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
        _check_size(path, 1, n)
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
    return _build(
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
_INTEGER = re.compile(r"-?[0-9]+")
_WORD = re.compile(r"\S+")


def _stg_numbers(path: Path, lineno: int, fields: list[str]) -> list[int]:
    bad = next((x for x in fields if not _INTEGER.fullmatch(x)), None)
    if bad is not None:
        raise GraphFormatError(path, f"{bad[:40]!r} is not an integer (plain ASCII digits)", lineno)
    long = next((x for x in fields if len(x) > 30), None)
    if long is not None:
        raise GraphFormatError(path, f"number {long[:20]}... has {len(long)} digits, too large", lineno)
    return [int(x) for x in fields]


def _stg_count(path: Path, lineno: int, stripped: str) -> int:
    """The task count of an STG file's first line; at least one task, at most :data:`MAX_NODES`."""
    if len(stripped.split(None, 1)) != 1 or not _COUNT.fullmatch(stripped):
        raise GraphFormatError(path, f"the first line must be the task count, got {stripped[:40]!r}", lineno)
    n = int(stripped)
    if n == 0:
        raise GraphFormatError(path, "0 tasks: no task to schedule", lineno)
    _check_size(path, lineno, n)
    return n


def _stg_task(path: Path, lineno: int, stripped: str, n: int) -> tuple[int, int, list[int]]:
    """``(task, cost, predecessors)`` of one task line of an STG file of ``n`` tasks, each checked."""
    fields = stripped.split(None, 3)
    numbers = _stg_numbers(path, lineno, fields[:3])
    if len(numbers) < 3:
        raise GraphFormatError(path, "a task line needs 'id cost num_predecessors [predecessors...]'", lineno)
    task, task_cost, count = numbers
    if not 0 <= task <= n + 1:
        raise GraphFormatError(path, f"task id {task} outside 0..{n + 1}", lineno)
    if task_cost < 0:
        raise GraphFormatError(path, f"negative cost {task_cost} for task {task}", lineno)
    if task_cost > MAX_COST:
        raise GraphFormatError(path, f"cost {task_cost} of task {task} is more than the {MAX_COST:g} allowed", lineno)
    if count > n + 1:
        raise GraphFormatError(path, f"task {task} declares {count} predecessors, more than the {n + 1} other tasks", lineno)
    limit = max(count, 0)
    listed = fields[3].split(None, limit) if len(fields) == 4 else []  # at most count + 1 pieces, whatever the line holds
    if len(listed) != count:
        shown = len(listed) if len(listed) <= limit else limit + _WORD.subn("", listed[-1])[1]
        raise GraphFormatError(path, f"task {task} declares {count} predecessors but lists {shown}", lineno)
    pred = _stg_numbers(path, lineno, listed)
    bad = [p for p in pred if not 0 <= p <= n + 1]
    if bad:
        raise GraphFormatError(path, f"predecessor {bad[0]} of task {task} outside 0..{n + 1}", lineno)
    if task == 0 and pred:
        raise GraphFormatError(path, f"the dummy entry task 0 lists predecessor {pred[0]}; it must have none", lineno)
    if n + 1 in pred:
        raise GraphFormatError(path, f"task {task} lists the dummy exit task {n + 1} as a predecessor; no task may follow it", lineno)
    return task, task_cost, pred


def read_stg(path: Path) -> DataflowGraph:
    """The Standard Task Graph Set format, read a line at a time; the dummy entry and exit tasks are checked, then dropped.

    Task 0 (the entry) may have no predecessor and task ``n + 1`` (the exit) may
    precede no task, so no cycle or self-loop can pass through them.
    """
    n = 0
    first_line = last_line = tasks = 0
    cost = seen = np.zeros(0)
    src, dst = array("q"), array("q")
    with closing(read_lines(path)) as lines:
        for lineno, text in lines:
            stripped = text.strip()
            if not stripped:
                continue
            if stripped.startswith("#"):
                break
            if not first_line:
                n, first_line = _stg_count(path, lineno, stripped), lineno
                cost, seen = np.zeros(n + 2), np.zeros(n + 2, dtype=np.int64)
                continue
            tasks, last_line = tasks + 1, lineno
            if tasks > n + 2:
                raise GraphFormatError(path, f"more task lines than the {n + 2} expected ({n} tasks plus dummy entry and exit)", lineno)
            task, task_cost, pred = _stg_task(path, lineno, stripped, n)
            if seen[task]:
                raise GraphFormatError(path, f"duplicate task id {task} (first on line {seen[task]})", lineno)
            seen[task], cost[task] = lineno, task_cost
            if 1 <= task <= n:
                real = [p - 1 for p in pred if p >= 1]
                src.extend(real)
                dst.extend([task - 1] * len(real))
                _check_size(path, lineno, n, len(src))
    if not first_line:
        raise GraphFormatError(path, "no task count line", 1)
    if tasks != n + 2:
        raise GraphFormatError(path, f"{tasks} task lines, expected {n + 2} ({n} tasks plus dummy entry and exit)", last_line or first_line)
    for t in (0, n + 1):
        if cost[t] != 0:
            raise GraphFormatError(path, f"dummy task {t} must have cost 0, has {cost[t]:g}", int(seen[t]))
    order = np.argsort(np.frombuffer(dst, dtype=np.int64), kind="stable")  # by task, each task's predecessors in file order
    edges = np.frombuffer(src, dtype=np.int64)[order], np.frombuffer(dst, dtype=np.int64)[order]
    del order, src, dst  # the reader's buffers go before the graph makes its own copies
    return _build(
        path,
        lambda error: int(seen[error.op + 1]) if error.op is not None else None,
        compute=cost[1 : n + 1],
        src=edges[0],
        dst=edges[1],
        comm=np.zeros(edges[0].size),
        names=tuple(f"t{t}" for t in range(1, n + 1)),
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


def _check_json_size(text: str, max_depth: int) -> None:
    """Refuse JSON nested more than ``max_depth`` deep, or holding more strings, arrays and objects, or
    items than the largest graph file needs, before it is parsed: what the parser builds is then bounded."""
    if _nests_deeper_than(text, max_depth):
        raise JSONInputError(f"nested more than {max_depth} levels deep")
    strings = text.count('"') // 2
    counts = {"strings": strings, "arrays and objects": text.count("[") + text.count("{"), "items": text.count(",")}
    if all(counts[kind] <= cap for kind, cap in MAX_JSON_COUNTS.items()):
        return  # counted with the strings' content: upper bounds, enough for every ordinary file
    counts["strings"] = 0
    for match in _JSON_STRING.finditer(text):  # take out what the strings hold, with no copy of the text
        counts["strings"] += 1
        if counts["strings"] > MAX_JSON_COUNTS["strings"]:
            break
        start, end = match.span()
        counts["arrays and objects"] -= text.count("[", start, end) + text.count("{", start, end)
        counts["items"] -= text.count(",", start, end)
    for kind, cap in MAX_JSON_COUNTS.items():
        if counts[kind] > cap:
            raise JSONInputError(f"more than the {cap:,} {kind} a JSON input may hold (formats.MAX_JSON_COUNTS)")


def _loads(text: str, parse_float: Callable[[str], Any] | None = None, parse_int: Callable[[str], Any] | None = None) -> Any:
    try:
        return json.loads(
            text, parse_float=parse_float, parse_int=parse_int, parse_constant=_reject_constant, object_pairs_hook=_unique_keys
        )
    except json.JSONDecodeError as exc:
        raise JSONInputError(exc.msg, exc.lineno) from None
    except ValueError as exc:  # an integer of more digits than int() converts
        raise JSONInputError(str(exc).split(";")[0]) from None


def parse_json(text: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Strict JSON: at most ``max_depth`` levels deep and within :data:`MAX_JSON_COUNTS` (checked
    before parsing), no NaN or Infinity, no duplicate keys; raises :class:`JSONInputError`."""
    text = text.removeprefix("\ufeff")
    _check_json_size(text, max_depth)
    return _loads(text)


_JSON_KEYS = ("format", "version", "num_nodes", "compute", "src", "dst", "comm", "names", "op_types", "metadata")
_NUMERIC_FIELDS = {"compute": MAX_NODES, "src": MAX_EDGES, "dst": MAX_EDGES, "comm": MAX_EDGES}
_MAX_ID = 2**62
_NUMBER: Any = type("number", (), {"__repr__": lambda self: "<number>"})()  # stands for a number while a graph file is parsed


def _as_float(value: int) -> float:
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _count_numbers(value: Any) -> int:
    if value is _NUMBER:
        return 1
    if isinstance(value, dict):
        value = list(value.values())
    if not isinstance(value, list):
        return 0
    plain = value.count(_NUMBER)
    return plain if plain == len(value) else plain + sum(_count_numbers(item) for item in value)


def _collect_numbers(text: str) -> tuple[Any, array]:
    """``text`` parsed with a placeholder for each number, and the numbers as float64, in file order."""
    numbers = array("d")

    def collect(token: str) -> Any:
        numbers.append(float(token))
        return _NUMBER

    def collect_int(token: str) -> Any:
        numbers.append(_as_float(int(token)))
        return _NUMBER

    return _loads(text, parse_float=collect, parse_int=collect_int), numbers


def _graph_document(path: Path, text: str) -> Any:
    """A JSON graph file parsed, its plain lists of numbers ``compute``, ``src``, ``dst`` and ``comm`` as float64 arrays.

    Parsed twice so that no number of those lists becomes a Python object: the
    first pass collects every number into one float64 buffer, in file order,
    while the parser keeps a placeholder; that buffer gives the lists, whose
    lengths are checked against the caps before they are copied. The second
    pass gives every other value exactly, with placeholders in those lists.
    """
    _check_json_size(text, MAX_JSON_DEPTH)
    document, numbers = _collect_numbers(text)
    if not isinstance(document, dict):
        return document
    fields: dict[str, np.ndarray] = {}
    taken = bytearray(len(numbers))
    buffer = np.frombuffer(numbers, dtype=np.float64)
    offset = 0
    for key, value in document.items():
        count = _count_numbers(value)
        if key in _NUMERIC_FIELDS and isinstance(value, list) and value.count(_NUMBER) == len(value):
            if count > _NUMERIC_FIELDS[key]:
                cap = f"{_NUMERIC_FIELDS[key]:,} {'ops' if key == 'compute' else 'edges'}"
                raise GraphFormatError(path, f"field {key!r} holds {count:,} items, more than the {cap} a graph may hold")
            fields[key] = buffer[offset : offset + count].copy()
            taken[offset : offset + count] = b"\x01" * count
        offset += count
    del document, numbers, buffer
    position = itertools.count()

    def exact(token: str) -> Any:
        return _NUMBER if taken[next(position)] else float(token)

    def exact_int(token: str) -> Any:
        return _NUMBER if taken[next(position)] else int(token)

    document = _loads(text, parse_float=exact, parse_int=exact_int)
    document.update(fields)
    return document


def _json_numbers(path: Path, data: dict, key: str) -> np.ndarray:
    values = data.get(key)
    if isinstance(values, np.ndarray):
        return values
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
        data = _graph_document(path, read_text_file(path))
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
    if not compute.size:
        raise GraphFormatError(path, "field 'compute' is empty: the graph has no op to schedule")
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
    if _COUNT.fullmatch(head[0]):
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
