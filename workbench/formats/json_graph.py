"""The workbench's native JSON graph format: counted before it is parsed, number lists never Python objects."""

from __future__ import annotations

import itertools
import json
import math
import re
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..graph import MAX_COST, MAX_EDGES, MAX_GRAPH_FILE_BYTES, MAX_NODES, DataflowGraph, GraphError
from .files import GraphFormatError, build_graph, read_text_file

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
    return build_graph(
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
