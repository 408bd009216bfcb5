"""The placement file: one JSON form of a placement that every writer uses and every reader checks (docs/contracts.md, "Placement file").

Written by :meth:`~workbench.placers.base.Placement.to_dict` (``workbench place
--json`` / ``--out``), ``workbench compare --json`` (one per row) and a
training run's ``best/placement.json``::

    {"format": "workbench-placement", "version": 1,
     "graph": "ffnn_192nodes", "graph_hash": "<sha256 hex>", "nodes": 192, "devices": 4,
     "assignment": [0, 3, 1, ...],
     "method": "heft", "makespan": 1.2e13, ...}

Read by ``workbench simulate --assignment``, ``workbench place --start``,
:meth:`~workbench.placers.base.Placement.from_dict` and
:func:`~workbench.placers.base.load_placement`, which also take the forms
written before this one (a run's or the dashboard's placement without
``format``, ``version``, ``graph_hash`` or ``nodes``) and a plain JSON list of
device ids. A reader refuses, in one line, a placement of another graph (by
:func:`content_hash`, or by name when the file has no hash) or for another
device count.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from ..formats import GraphFormatError, JSONInputError, parse_json, read_text_file
from ..graph import DataflowGraph
from ..sim import AssignmentError, check_assignment

__all__ = [
    "FORMAT",
    "VERSION",
    "PlacementError",
    "CheckedPlacement",
    "content_hash",
    "placement_record",
    "read_placement_file",
    "check_placement",
]

FORMAT = "workbench-placement"
VERSION = 1
IDENTITY_KEYS = ("format", "version", "graph", "graph_hash", "nodes", "devices", "assignment")
"""The keys :func:`placement_record` writes first; every other key is a fact about the placement (method, makespan, ...)."""


class PlacementError(ValueError):
    """A placement file that holds no placement, or a placement that does not fit the graph or the device count."""


class CheckedPlacement(NamedTuple):
    """A placement read and checked against its graph: the assignment, the device count, and the file's other fields."""

    assignment: np.ndarray
    devices: int
    fields: dict[str, Any]


def content_hash(graph: DataflowGraph) -> str:
    """SHA-256 over op count, compute costs, edges and communication costs (little-endian float64 / int64).

    Names and metadata are left out: two graphs with the same hash simulate alike.
    """
    digest = hashlib.sha256(np.int64(graph.num_nodes).tobytes())
    for array, dtype in ((graph.compute, "<f8"), (graph.src, "<i8"), (graph.dst, "<i8"), (graph.comm, "<f8")):
        digest.update(np.ascontiguousarray(array, dtype=dtype).tobytes())
    return digest.hexdigest()


def placement_record(graph: DataflowGraph, assignment: np.ndarray | list[int], devices: int, /, **fields: Any) -> dict[str, Any]:
    """The placement form of ``assignment`` on ``graph``: the identity keys, then ``fields`` (``method``, ``makespan``, ...;
    ``None`` values left out). A ``graph`` field overrides the graph's own name."""
    record: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "graph": graph.name,
        "graph_hash": content_hash(graph),
        "nodes": graph.num_nodes,
        "devices": int(devices),
        "assignment": np.asarray(assignment, dtype=np.int64).tolist(),
    }
    record.update({key: value for key, value in fields.items() if value is not None})
    return record


def read_placement_file(path: str | os.PathLike) -> Any:
    """The JSON value of a placement file (strict JSON: :func:`workbench.formats.parse_json`); one line naming the file otherwise."""
    try:
        return parse_json(read_text_file(path))
    except JSONInputError as exc:
        where = f" (line {exc.line})" if exc.line is not None else ""
        raise PlacementError(f"{path}: not valid JSON: {exc}{where}") from None
    except GraphFormatError as exc:
        raise PlacementError(str(exc)) from None


def check_placement(data: Any, graph: DataflowGraph, devices: int | None = None, source: str = "the placement") -> CheckedPlacement:
    """``data`` (the placement form, an older form, or a plain list of device ids) checked against ``graph`` and ``devices``.

    ``devices=None`` takes the placement's own device count (a plain list has none: then it is an error).
    ``source`` names the placement in errors (a file path).
    """
    if isinstance(data, list):
        if devices is None:
            raise PlacementError(f"{source} is a plain list of device ids; give the device count")
        return CheckedPlacement(_assignment(graph, data, devices, source), devices, {})
    if not isinstance(data, Mapping):
        raise PlacementError(f"{source} holds {type(data).__name__}, not a placement (a JSON object with an 'assignment', or a list)")
    if data.get("format", FORMAT) != FORMAT:
        raise PlacementError(f"{source}: format {data['format']!r} is not a placement file ({FORMAT!r})")
    version = data.get("version", VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or version > VERSION:
        raise PlacementError(f"{source}: version {version!r} is not one this workbench reads (up to {VERSION})")
    if not isinstance(data.get("assignment"), list):
        raise PlacementError(f"{source} has no 'assignment' list (a device per op)")
    _check_graph(data, graph, source)
    own = data.get("devices")
    if own is not None and (isinstance(own, bool) or not isinstance(own, int) or own < 1):
        raise PlacementError(f"{source}: 'devices' is {own!r}, not a device count")
    if own is not None and devices is not None and own != devices:
        raise PlacementError(f"{source} is a placement on {own} devices, not {devices}")
    count = devices if devices is not None else own
    if count is None:
        raise PlacementError(f"{source} names no device count ('devices'); give it")
    fields = {key: value for key, value in data.items() if key not in IDENTITY_KEYS}
    return CheckedPlacement(_assignment(graph, data["assignment"], count, source), count, fields)


def _check_graph(data: Mapping[str, Any], graph: DataflowGraph, source: str) -> None:
    """Refuse a placement of another graph: by hash when the placement has one, else by name; and by op count."""
    name, digest = data.get("graph"), data.get("graph_hash")
    if digest is not None:
        mine = content_hash(graph)
        if digest != mine:
            other = "another version of it (its costs or edges differ)" if name == graph.name else f"graph {name!r}"
            raise PlacementError(
                f"{source} is a placement of {other}, not of {graph.name!r} (graph_hash {str(digest)[:12]}… against {mine[:12]}…)"
            )
    elif name is not None and name != graph.name:
        raise PlacementError(f"{source} is a placement of graph {name!r}, not of {graph.name!r}")
    nodes = data.get("nodes")
    if nodes is not None and nodes != graph.num_nodes:
        raise PlacementError(f"{source} places {nodes!r} ops, but {graph.name!r} has {graph.num_nodes}")


def _assignment(graph: DataflowGraph, values: list[Any], devices: int, source: str) -> np.ndarray:
    try:
        return check_assignment(graph, values, devices)
    except AssignmentError as exc:
        raise PlacementError(f"{source}: {exc}") from None
