"""A checkpoint's JSON header, read and checked without torch: what a policy is, and what it was trained for.

A checkpoint (:mod:`workbench.learn.checkpoint`) is a safetensors file: eight
bytes giving the size of a JSON index, the index (each tensor's name, dtype,
shape and offsets, and ``__metadata__``), then the tensors. The workbench's
own JSON document sits in ``__metadata__`` under the key ``workbench``. This
module reads the index and that document alone (at most
:data:`MAX_HEADER_BYTES`), so a page can say where a checkpoint comes from
(:func:`read_header`) without importing torch; :func:`~workbench.learn.checkpoint.read_checkpoint`
reads the same header through :func:`parse_header` before any tensor.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import struct
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..cluster import MAX_DEVICES, Devices, num_devices
from ..graph import MAX_EDGES, MAX_NODES, DataflowGraph
from .fields import Field, check_keys, check_value, shown

__all__ = [
    "CheckpointError",
    "CheckpointHeader",
    "GraphIdentity",
    "TrainedFor",
    "FORMAT",
    "FORMAT_VERSION",
    "METADATA_KEY",
    "MAX_CHECKPOINT_BYTES",
    "MAX_HEADER_BYTES",
    "open_checkpoint",
    "parse_header",
    "read_header",
]

FORMAT = "workbench-policy"
FORMAT_VERSION = 2
MAX_CHECKPOINT_BYTES = 1 << 28
"""Larger files are refused before they are read (the shipped policies are under 1 MB; weights and Adam's moments at
``MAX_PARAMETERS`` take 192 MiB)."""
MAX_HEADER_BYTES = 1 << 23
"""Largest JSON header a checkpoint may have (a training run's is about 24 kB): checked before it is read, it bounds what
parsing it costs (8 MiB of empty JSON objects take about 200 MiB as Python objects)."""
MAX_TRAINED_GRAPHS = 20_000
"""Most graphs ``trained_for`` may list (their names, sizes and fingerprints fit in :data:`MAX_HEADER_BYTES`)."""
METADATA_KEY = "workbench"
"""The key of the workbench's JSON document in the safetensors ``__metadata__``."""
_FINGERPRINT = re.compile(r"[0-9a-f]{64}")


class CheckpointError(ValueError):
    """A policy checkpoint that cannot be loaded (missing, corrupt, unsafe, non-finite, or made for something else)."""


@dataclass(frozen=True)
class GraphIdentity:
    """A graph a policy was trained on: its name, size and :meth:`fingerprint` (ops and edges, not costs)."""

    name: str
    nodes: int
    edges: int
    fingerprint: str

    @classmethod
    def of(cls, graph: DataflowGraph) -> GraphIdentity:
        digest = hashlib.sha256(struct.pack("<q", graph.num_nodes))
        for array in (graph.src, graph.dst):
            digest.update(np.ascontiguousarray(array, dtype="<i8").tobytes())
        return cls(graph.name, graph.num_nodes, graph.num_edges, digest.hexdigest())

    def __str__(self) -> str:
        return f"{self.name!r} ({self.nodes} ops, {self.edges} edges)"


@dataclass(frozen=True)
class TrainedFor:
    """The graphs and device count a policy was trained for; a cross-graph policy (trained on several graphs) may place any.

    ``devices`` is the largest device count it was trained with (a corpus run trains at several).
    """

    graphs: tuple[GraphIdentity, ...]
    devices: int
    cross_graph: bool

    @classmethod
    def of(cls, graphs: Iterable[DataflowGraph], devices: Devices, cross_graph: bool | None = None) -> TrainedFor:
        """The record of a policy trained on ``graphs`` at up to ``devices``; cross-graph (by default) when they are two or
        more graphs of different structure, and never with fewer (``ValueError``: :meth:`from_dict` refuses such a header)."""
        identities = tuple(GraphIdentity.of(g) for g in graphs)
        structures = len({g.fingerprint for g in identities})
        record = cls(identities, num_devices(devices), structures > 1 if cross_graph is None else bool(cross_graph))
        record._check_cross_graph()
        return record

    def _check_cross_graph(self) -> None:
        """``cross_graph`` is true only for a policy trained on two or more graphs of different structure (a corpus): a
        graph renamed, or with other costs, is the same graph to :meth:`check`."""
        if self.cross_graph and len({g.fingerprint for g in self.graphs}) < 2:
            raise ValueError(
                f"trained_for.cross_graph is true, but trained_for.graphs names one graph ({self.graphs[0] if self.graphs else 'none'}, "
                "by structure); a cross-graph policy is trained on two or more"
            )

    @classmethod
    def from_dict(cls, data: Any) -> TrainedFor:
        """The record in a checkpoint's header, each field checked; ``ValueError`` names the first that is malformed."""
        check_keys(data, ("graphs", "devices", "cross_graph"), "trained_for")
        graphs = data["graphs"]
        if not isinstance(graphs, list) or not 1 <= len(graphs) <= MAX_TRAINED_GRAPHS:
            raise ValueError(f"trained_for.graphs must list 1 to {MAX_TRAINED_GRAPHS:,} graphs, got {shown(graphs)}")
        identities = []
        for i, g in enumerate(graphs):
            where = f"trained_for.graphs[{i}]"
            check_keys(g, ("name", "nodes", "edges", "fingerprint"), where)
            values = {
                name: check_value(g[name], field, f"{where}.{name}")
                for name, field in (("name", Field(str)), ("nodes", Field(int, 1, MAX_NODES)), ("edges", Field(int, 0, MAX_EDGES)))
            }
            if not isinstance(g["fingerprint"], str) or not _FINGERPRINT.fullmatch(g["fingerprint"]):
                raise ValueError(f"{where}.fingerprint must be 64 lowercase hex digits, got {shown(g['fingerprint'])}")
            identities.append(GraphIdentity(values["name"], values["nodes"], values["edges"], g["fingerprint"]))
        devices = check_value(data["devices"], Field(int, 1, MAX_DEVICES), "trained_for.devices")
        cross_graph = check_value(data["cross_graph"], Field(bool), "trained_for.cross_graph")
        record = cls(tuple(identities), devices, cross_graph)
        record._check_cross_graph()
        return record

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        names = ", ".join(map(str, self.graphs))
        return f"graph{'s' if len(self.graphs) > 1 else ''} {names} with {self.devices} devices"

    def check(self, graph: DataflowGraph, devices: Devices, path: str | os.PathLike) -> None:
        """Raise :class:`CheckpointError` naming both unless the policy at ``path`` was trained for ``graph`` on ``devices``.

        A cross-graph policy (one that names the graphs it was trained on, :meth:`from_dict` requires at least one) places any.
        """
        if self.cross_graph and self.graphs:
            return
        wanted = GraphIdentity.of(graph)
        same_graph = any(g.fingerprint == wanted.fingerprint for g in self.graphs)
        if not same_graph or num_devices(devices) != self.devices:
            raise CheckpointError(
                f"{os.fspath(path)} was trained for {self.describe()}, not for graph {wanted} with {num_devices(devices)} devices; "
                "it is not a cross-graph policy (train on several graphs for one)"
            )


@contextmanager
def open_checkpoint(path: Path) -> Iterator[BinaryIO]:
    """``path`` opened for reading when it is a regular file of at most :data:`MAX_CHECKPOINT_BYTES` bytes."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise CheckpointError(f"policy checkpoint {path} does not exist") from None
    except OSError as error:
        raise CheckpointError(f"policy checkpoint {path} cannot be read: {error.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise CheckpointError(f"policy checkpoint {path} is not a regular file")
    if info.st_size > MAX_CHECKPOINT_BYTES:
        raise CheckpointError(f"policy checkpoint {path} is {info.st_size:,} bytes, over the {MAX_CHECKPOINT_BYTES:,}-byte limit")
    try:
        with open(path, "rb") as handle:
            yield handle
    except OSError as error:
        raise CheckpointError(f"policy checkpoint {path} cannot be read: {error.strerror}") from None


def parse_header(path: Path, handle: BinaryIO) -> tuple[dict[str, Any], dict[str, Any], TrainedFor | None]:
    """``(index, document, trained_for)`` of the safetensors file open as ``handle``: its index of tensors, the workbench's
    JSON document and what that says the policy was trained for, each checked; :class:`CheckpointError` says what is wrong.
    Only the header is read (at most :data:`MAX_HEADER_BYTES`)."""
    corrupt = f"{path} is not a readable policy checkpoint (truncated or corrupt?)"
    handle.seek(0)
    head, file_size = handle.read(9), os.fstat(handle.fileno()).st_size
    if file_size < 10 or head[8:9] != b"{":
        raise CheckpointError(f"{corrupt}: no safetensors header")
    (size,) = struct.unpack("<Q", head[:8])
    if size > file_size - 8:
        raise CheckpointError(f"{corrupt}: its header claims {size:,} bytes, the file has {file_size - 8:,}")
    if size > MAX_HEADER_BYTES:
        raise CheckpointError(f"{path} has a header of {size:,} bytes, more than the {MAX_HEADER_BYTES:,} allowed (MAX_HEADER_BYTES)")
    try:
        index = json.loads((head[8:] + handle.read(max(size - 1, 0)))[:size])
        metadata = index.get("__metadata__") or {} if isinstance(index, dict) else {}
        if METADATA_KEY not in metadata:
            raise CheckpointError(f"{path} is not a workbench policy checkpoint (a safetensors file without the {METADATA_KEY!r} header)")
        document = json.loads(metadata[METADATA_KEY])
    except CheckpointError:
        raise
    except (ValueError, KeyError, TypeError, RecursionError, UnicodeDecodeError, AttributeError) as error:
        raise CheckpointError(f"{corrupt}: {type(error).__name__}: {' '.join(str(error).split())[:200]}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a workbench policy checkpoint (no format marker {FORMAT!r})")
    if document.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has checkpoint format version {shown(document.get('format_version'))}; this workbench reads version {FORMAT_VERSION}"
        )
    if "trained_for" not in document:
        raise CheckpointError(f"{path} has a malformed header: it lacks trained_for (null, or the graphs and devices it was trained for)")
    try:
        trained_for = None if document["trained_for"] is None else TrainedFor.from_dict(document["trained_for"])
    except ValueError as error:
        raise CheckpointError(f"{path} has a malformed header: {error}") from None
    return index, document, trained_for


@dataclass(frozen=True)
class CheckpointHeader:
    """What a checkpoint's header says: the policy's ``method``, what it was ``trained_for``, and its ``extra`` as stored
    (plain JSON; tensors there are ``{"$tensor": name}`` references, not read)."""

    method: str
    trained_for: TrainedFor | None
    extra: dict[str, Any]


def read_header(path: str | os.PathLike) -> CheckpointHeader:
    """The checked header of the checkpoint at ``path``, its tensors unread (no torch); :class:`CheckpointError` says what
    is wrong (the old pickle format has no such header)."""
    path = Path(path)
    with open_checkpoint(path) as handle:
        _index, document, trained_for = parse_header(path, handle)
    extra = document.get("extra")
    return CheckpointHeader(str(document.get("method", "")), trained_for, extra if isinstance(extra, dict) else {})
