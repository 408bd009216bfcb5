"""Graph file formats: the DOPPLER paper's text files, STG, and native JSON.

``load_graph(path)`` picks the format from the extension, falling back to the
content, and refuses every malformed file with a :class:`GraphFormatError`
that names the file, the line and what is wrong.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Callable

import numpy as np

from .graph import DataflowGraph, GraphError

__all__ = ["GraphFormatError", "load_graph", "save_graph", "FORMATS", "detect_format"]

MAX_GRAPH_FILE_BYTES = 256 * 1024 * 1024


class GraphFormatError(ValueError):
    """A graph file that cannot be read; names the file, the line and the problem."""

    def __init__(self, path: str | os.PathLike, message: str, line: int | None = None) -> None:
        self.path = os.fspath(path)
        self.line = line
        self.reason = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


def _read_text(path: Path) -> str:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise GraphFormatError(path, "no such file") from None
    except OSError as exc:
        raise GraphFormatError(path, f"cannot read: {exc.strerror or exc}") from None
    if path.is_dir():
        raise GraphFormatError(path, "is a directory, not a graph file")
    if size > MAX_GRAPH_FILE_BYTES:
        raise GraphFormatError(path, f"file is {size} bytes, more than the {MAX_GRAPH_FILE_BYTES} allowed")
    data = path.read_bytes()
    if not data.strip():
        raise GraphFormatError(path, "file is empty")
    if b"\x00" in data:
        raise GraphFormatError(path, "binary data (NUL byte), not a graph file", _line_of(data, data.index(b"\x00")))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GraphFormatError(path, f"not UTF-8 text (bad byte at offset {exc.start})", _line_of(data, exc.start)) from None


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def _build(path: Path, line: int | None, **kwargs) -> DataflowGraph:
    try:
        return DataflowGraph(**kwargs)
    except GraphError as exc:
        raise GraphFormatError(path, str(exc), line) from None


# --------------------------------------------------------------------- paper
_ID_LINE = re.compile(r"[\d,\s]*")


def _parse_cost(path: Path, lineno: int, text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise GraphFormatError(path, f"{what} {text.strip()!r} is not a number", lineno) from None
    if not np.isfinite(value) or value < 0:
        raise GraphFormatError(path, f"{what} {text.strip()!r} must be a finite number >= 0", lineno)
    return value


def read_paper(path: Path) -> DataflowGraph:
    """The DOPPLER paper's text format (see ``datasets/doppler-paper/README.md``)."""
    lines = _read_text(path).splitlines()
    if len(lines) < 4:
        raise GraphFormatError(path, f"expected at least 4 header lines, found {len(lines)}", len(lines))
    try:
        total = int(lines[0].strip())
    except ValueError:
        raise GraphFormatError(path, f"line 1 must be the total node count, got {lines[0].strip()[:40]!r}", 1) from None
    ids: list[list[int]] = []
    for index in (1, 2, 3):
        if not _ID_LINE.fullmatch(lines[index]):
            bad = re.search(r"[^\d,\s]", lines[index])
            assert bad is not None
            raise GraphFormatError(path, f"unexpected character {bad.group()!r} in a list of node ids", index + 1)
        ids.append([int(x) for x in re.findall(r"\d+", lines[index])])
    inputs, src, dst = ids
    n = total - len(inputs)
    if n <= 0:
        raise GraphFormatError(path, f"{total} nodes minus {len(inputs)} inputs leaves no node to schedule", 1)
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
        3,
        compute=compute,
        src=src_array,
        dst=np.array(dst, dtype=np.int64),
        comm=out_comm[src_array] if src_array.size else np.zeros(0),
        op_types=types,
        metadata={"format": "doppler-paper", "name": path.stem, "input_nodes": len(inputs), "time_unit": "paper (÷1e10 when reported)"},
    )


# ----------------------------------------------------------------------- STG
def read_stg(path: Path) -> DataflowGraph:
    """The Standard Task Graph Set format; the dummy entry and exit tasks are dropped."""
    lines = _read_text(path).splitlines()
    rows: list[tuple[int, list[str]]] = []
    for lineno, text in enumerate(lines, start=1):
        stripped = text.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            break
        rows.append((lineno, stripped.split()))
    if not rows:
        raise GraphFormatError(path, "no task count line", 1)
    first_line, first = rows[0]
    if len(first) != 1 or not first[0].isdigit():
        raise GraphFormatError(path, f"line 1 must be the task count, got {' '.join(first)[:40]!r}", first_line)
    n = int(first[0])
    tasks = rows[1:]
    if len(tasks) != n + 2:
        raise GraphFormatError(path, f"{len(tasks)} task lines, expected {n + 2} ({n} tasks plus dummy entry and exit)", tasks[-1][0] if tasks else first_line)
    cost = np.zeros(n + 2)
    preds: list[list[int]] = [[] for _ in range(n + 2)]
    seen: dict[int, int] = {}
    for lineno, fields in tasks:
        try:
            numbers = [int(x) for x in fields]
        except ValueError:
            bad = next(x for x in fields if not x.lstrip("-").isdigit())
            raise GraphFormatError(path, f"{bad!r} is not an integer", lineno) from None
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
    for t in (0, n + 1):
        if cost[t] != 0:
            raise GraphFormatError(path, f"dummy task {t} must have cost 0, has {cost[t]:g}", seen[t])
    return _build(
        path,
        None,
        compute=cost[1 : n + 1],
        src=np.array(src, dtype=np.int64),
        dst=np.array(dst, dtype=np.int64),
        comm=np.zeros(len(src)),
        names=tuple(f"t{t}" for t in real),
        metadata={"format": "stg", "name": path.stem},
    )


# ---------------------------------------------------------------------- JSON
_JSON_FIELDS = {"compute": list, "src": list, "dst": list, "comm": list}


def read_json(path: Path) -> DataflowGraph:
    """The workbench's native JSON format (written by :meth:`DataflowGraph.save`)."""
    text = _read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GraphFormatError(path, f"invalid JSON: {exc.msg}", exc.lineno) from None
    if not isinstance(data, dict):
        raise GraphFormatError(path, f"expected a JSON object, got {type(data).__name__}", 1)
    if data.get("format") != "workbench-graph":
        raise GraphFormatError(path, "not a workbench graph: missing \"format\": \"workbench-graph\"", 1)
    for key, kind in _JSON_FIELDS.items():
        if not isinstance(data.get(key), kind):
            raise GraphFormatError(path, f"field {key!r} must be a list")
        bad = [x for x in data[key] if isinstance(x, bool) or not isinstance(x, (int, float))]
        if bad:
            raise GraphFormatError(path, f"field {key!r} holds a non-number {bad[0]!r}")
    for key in ("names", "op_types"):
        value = data.get(key)
        if value is not None and not (isinstance(value, list) and all(isinstance(x, str) for x in value)):
            raise GraphFormatError(path, f"field {key!r} must be a list of strings or null")
    if "num_nodes" in data and data["num_nodes"] != len(data["compute"]):
        raise GraphFormatError(path, f"num_nodes is {data['num_nodes']} but {len(data['compute'])} compute costs are given")
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise GraphFormatError(path, "field 'metadata' must be an object")
    try:
        graph = DataflowGraph.from_dict({**data, "metadata": metadata})
    except (GraphError, OverflowError, ValueError) as exc:
        raise GraphFormatError(path, str(exc)) from None
    if "name" not in graph.metadata:
        graph = graph.with_metadata(name=path.stem)
    return graph


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
    text = _read_text(path).lstrip()
    if text.startswith("{"):
        return "json"
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > 1 and "," in lines[1]:
        return "doppler-paper"
    if lines and lines[0].strip().isdigit():
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
