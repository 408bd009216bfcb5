"""Checking an assignment (one device id per op) against a graph and a device count."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..cluster import Devices, num_devices
from ..graph import DataflowGraph

__all__ = ["AssignmentError", "check_assignment", "device_ids"]


class AssignmentError(ValueError):
    """An assignment or priority order that does not fit the graph or the devices."""


def check_assignment(graph: DataflowGraph, assignment: Sequence[int] | np.ndarray, devices: Devices) -> np.ndarray:
    """``assignment`` as an int64 array, after checking its length, type and range."""
    d = num_devices(devices)
    if not isinstance(assignment, np.ndarray):
        bad = next(
            (x for x in assignment if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating))), None
        )
        if bad is not None:
            raise AssignmentError(f"assignment entries must be integers, got {bad!r}")
    raw = np.asarray(assignment)
    if raw.ndim != 1:
        raise AssignmentError(f"an assignment is a flat list of device ids, got shape {raw.shape}")
    if raw.size != graph.num_nodes:
        raise AssignmentError(f"assignment has {raw.size} entries but the graph has {graph.num_nodes} ops")
    values = device_ids(raw)
    outside = np.flatnonzero((values < 0) | (values >= d))
    if outside.size:
        raise AssignmentError(f"op {outside[0]} is assigned to device {values[outside[0]]}, but devices are 0..{d - 1}")
    return values


def device_ids(raw: np.ndarray) -> np.ndarray:
    """``raw`` (one assignment, or one per row) as int64: integers as they are, floats only when every
    entry is a whole number (a JSON file may hold ``1.0``); :func:`simulate` and :class:`Evaluator` share this rule."""
    if np.issubdtype(raw.dtype, np.integer):
        return raw.astype(np.int64, copy=False)
    if not np.issubdtype(raw.dtype, np.floating):
        raise AssignmentError(f"assignment entries must be integers, got dtype {raw.dtype}")
    bad = np.argwhere(~np.isfinite(raw) | (raw != np.round(raw)))
    if bad.size:
        where = tuple(int(i) for i in bad[0])
        entry = where[0] if len(where) == 1 else f"{where[1]} of assignment {where[0]}"
        raise AssignmentError(f"assignment entry {entry} is {raw[where]!r}, not an integer")
    return raw.astype(np.int64)
