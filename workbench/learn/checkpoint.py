"""Checkpoint files that are data, not programs: tensors in ``safetensors``, everything else JSON.

A checkpoint is one ``.safetensors`` file. Its tensors are the policy's
weights (``weights/<state_dict key>``) and the tensors inside ``extra``
(``extra/<path>``, for example Adam's moments under
``extra/optimizer/state/3/exp_avg``). Its header's ``__metadata__`` holds one
JSON document (key ``workbench``)::

    {"format": "workbench-policy", "format_version": 2,
     "method": ..., "config": {...}, "feature_layout": {...}, "versions": {...},
     "trained_for": {"graphs": [{"name", "nodes", "edges", "fingerprint"}], "devices": 4, "cross_graph": false} | null,
     "extra": <plain JSON; tensors as {"$tensor": name}, tuples, int-keyed dicts and non-finite floats tagged>,
     "sha256": <hex>}

``sha256`` covers every tensor (name, dtype, shape and bytes, in name order)
and the rest of the JSON document, so a flipped byte anywhere is refused.

Reading never unpickles: safetensors parses the tensors, ``json`` the rest.
Files of the old pickle format (``.pt``) are refused unless the caller passes
``allow_unsafe_pickle=True``; even then TorchScript archives (which
``torch.load`` hands to ``torch.jit.load``, running their code: CVE-2025-32434)
and zip archives holding anything but pickled tensors are refused. Every
floating-point tensor must be finite.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import stat
import struct
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.torch
import torch

from ..cluster import Devices, num_devices
from ..fileio import atomic_path
from ..graph import DataflowGraph
from ..runs import CHECKPOINT_SUFFIX

__all__ = [
    "CheckpointError",
    "Checkpoint",
    "GraphIdentity",
    "TrainedFor",
    "CHECKPOINT_SUFFIX",
    "FORMAT",
    "FORMAT_VERSION",
    "write_checkpoint",
    "read_checkpoint",
    "check_plain",
    "stale_temporaries",
]

FORMAT = "workbench-policy"
FORMAT_VERSION = 2
MAX_CHECKPOINT_BYTES = 1 << 30
"""Larger files are refused before they are read (the shipped policies are under 1 MB)."""
TEMPORARY_PREFIX = ".tmp-"
"""How :func:`workbench.fileio.atomic_path` names its temporary files (what a killed save leaves behind)."""
_METADATA_KEY = "workbench"
_TAGS = ("$tensor", "$tuple", "$items", "$float")
MIGRATE_HINT = "python -m workbench.learn.migrate {path} --trust-pickle-checkpoint"
# what torch.save's zip archives hold (torch 2.x); anything else (code/, constants.pkl, ...) is refused
_PICKLE_ZIP_MEMBER = re.compile(
    r"[^/]+/(data\.pkl|byteorder|version|\.format_version|\.storage_alignment|\.data/version|\.data/serialization_id|data/\d+)"
)


class CheckpointError(ValueError):
    """A policy checkpoint that cannot be loaded (missing, corrupt, unsafe, non-finite, or made for something else)."""


# ------------------------------------------------------------------ what a policy was trained for
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
        identities = tuple(GraphIdentity.of(g) for g in graphs)
        return cls(identities, num_devices(devices), len(identities) > 1 if cross_graph is None else bool(cross_graph))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainedFor:
        graphs = tuple(GraphIdentity(str(g["name"]), int(g["nodes"]), int(g["edges"]), str(g["fingerprint"])) for g in data["graphs"])
        return cls(graphs, int(data["devices"]), bool(data["cross_graph"]))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        names = ", ".join(map(str, self.graphs))
        return f"graph{'s' if len(self.graphs) > 1 else ''} {names} with {self.devices} devices"

    def check(self, graph: DataflowGraph, devices: Devices, path: str | os.PathLike) -> None:
        """Raise :class:`CheckpointError` naming both unless the policy at ``path`` was trained for ``graph`` on ``devices``."""
        if self.cross_graph:
            return
        wanted = GraphIdentity.of(graph)
        same_graph = any(g.fingerprint == wanted.fingerprint for g in self.graphs)
        if not same_graph or num_devices(devices) != self.devices:
            raise CheckpointError(
                f"{os.fspath(path)} was trained for {self.describe()}, not for graph {wanted} with {num_devices(devices)} devices; "
                "it is not a cross-graph policy (train on several graphs for one)"
            )


# ------------------------------------------------------------------------- the file itself
@dataclass(frozen=True)
class Checkpoint:
    """A checked checkpoint: its header fields, weights (on CPU), decoded ``extra`` and what it was trained for."""

    path: Path
    header: dict[str, Any]
    weights: dict[str, torch.Tensor]
    extra: dict[str, Any]
    trained_for: TrainedFor | None


def check_plain(value: Any, where: str = "extra") -> None:
    """Raise ``ValueError`` unless ``value`` is tensors and plain data only (dicts, lists, tuples, str, int, float, bool, None)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, (str, int)) or isinstance(key, bool):
                raise ValueError(f"{where} has a key of type {type(key).__name__}; checkpoints take str or int keys")
            if isinstance(key, str) and key.startswith("$"):
                raise ValueError(f"{where} has the key {key!r}; keys starting with '$' are reserved by the checkpoint format")
            check_plain(item, f"{where}[{key!r}]")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            check_plain(item, f"{where}[{i}]")
    elif not isinstance(value, (str, int, float, bool, type(None), torch.Tensor)):
        raise ValueError(
            f"{where} is a {type(value).__name__}; checkpoints hold only tensors and plain data (convert numpy arrays with "
            "torch.as_tensor or .tolist())"
        )


def _encode(value: Any, name: str, tensors: dict[str, torch.Tensor]) -> Any:
    """``value`` as strict JSON; its tensors move to ``tensors`` under path-like names."""
    if isinstance(value, torch.Tensor):
        if name in tensors:
            raise ValueError(f"two tensors of extra would be stored as {name!r}; keys must not contain '/'")
        tensors[name] = value.detach().cpu().clone().contiguous()
        return {"$tensor": name}
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: _encode(v, f"{name}/{k}", tensors) for k, v in value.items()}
        return {"$items": [[k, _encode(v, f"{name}/{k}", tensors)] for k, v in value.items()]}
    if isinstance(value, tuple):
        return {"$tuple": [_encode(v, f"{name}/{i}", tensors) for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [_encode(v, f"{name}/{i}", tensors) for i, v in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        return {"$float": repr(value)}
    return value


def _decode(value: Any, tensors: Mapping[str, torch.Tensor]) -> Any:
    if isinstance(value, list):
        return [_decode(v, tensors) for v in value]
    if not isinstance(value, dict):
        return value
    tag = next((t for t in _TAGS if t in value), None)
    if tag is None:
        return {k: _decode(v, tensors) for k, v in value.items()}
    if len(value) != 1:
        raise ValueError(f"a {tag} entry has other keys too")
    body = value[tag]
    if tag == "$tensor":
        if body not in tensors:
            raise ValueError(f"extra names tensor {body!r}, which the file lacks")
        return tensors[body]
    if tag == "$tuple":
        return tuple(_decode(v, tensors) for v in body)
    if tag == "$items":
        return {k: _decode(v, tensors) for k, v in body}
    if body not in ("nan", "inf", "-inf"):
        raise ValueError(f"$float holds {body!r}")
    return float(body)


def _digest(document: Mapping[str, Any], tensors: Mapping[str, torch.Tensor]) -> str:
    """SHA-256 of the JSON document (without ``sha256``) and every tensor's name, dtype, shape and bytes."""
    digest = hashlib.sha256(
        json.dumps({k: v for k, v in document.items() if k != "sha256"}, sort_keys=True, separators=(",", ":")).encode()
    )
    for name in sorted(tensors):
        tensor = tensors[name].contiguous()
        digest.update(json.dumps([name, str(tensor.dtype), list(tensor.shape)]).encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def write_checkpoint(
    path: str | os.PathLike,
    weights: Mapping[str, torch.Tensor],
    header: Mapping[str, Any],
    extra: Mapping[str, Any] | None = None,
    trained_for: TrainedFor | None = None,
) -> Path:
    """Write a checkpoint to ``path`` (which must end in ``.safetensors``) atomically (:func:`workbench.fileio.atomic_path`).

    ``header`` holds the policy's own JSON fields (method, config, ...);
    ``extra`` is tensors and plain data (optimizer state, episode, ...).
    """
    path = Path(path)
    if path.suffix != CHECKPOINT_SUFFIX:
        raise ValueError(f"a checkpoint's name ends in {CHECKPOINT_SUFFIX}, got {path.name}")
    extra = dict(extra or {})
    check_plain(extra)
    tensors = {f"weights/{k}": v.detach().cpu().clone().contiguous() for k, v in weights.items()}
    document = {"format": FORMAT, "format_version": FORMAT_VERSION, **header, "trained_for": trained_for.to_dict() if trained_for else None}
    document["extra"] = _encode(extra, "extra", tensors)
    document["sha256"] = _digest(document, tensors)
    data = safetensors.torch.save(tensors, metadata={_METADATA_KEY: json.dumps(document, allow_nan=False)})
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())  # the bytes are on disk before the rename makes them the checkpoint
        os.chmod(tmp, 0o644)
    return path


def stale_temporaries(folder: str | os.PathLike) -> list[Path]:
    """Temporary files that saves killed mid-write left in ``folder``."""
    folder = Path(folder)
    return sorted(p for p in folder.glob(f"{TEMPORARY_PREFIX}*") if p.is_file()) if folder.is_dir() else []


def read_checkpoint(path: str | os.PathLike, allow_unsafe_pickle: bool = False) -> Checkpoint:
    """The checked contents of the checkpoint at ``path``; :class:`CheckpointError` says what is wrong.

    ``allow_unsafe_pickle=True`` also reads the old pickle format (``.pt``):
    only for files you made yourself, since unpickling can run code.
    TorchScript archives are refused regardless.
    """
    path = Path(path)
    raw = _read_bytes(path)
    looks_safetensors = raw[8:9] == b"{"  # an 8-byte header length, then the JSON header
    if not looks_safetensors and (raw[:4] == b"PK\x03\x04" or raw[:1] == b"\x80"):  # torch.save's zip, or its legacy pickle
        if not allow_unsafe_pickle:
            raise CheckpointError(
                f"refusing to load {path}: it is a pickle checkpoint (the .pt format of older workbench versions), and unpickling "
                f"can run arbitrary code. If you made it yourself, convert it once: {MIGRATE_HINT.format(path=path)}"
            )
        return _read_pickle(path, raw)
    return _read_safetensors(path, raw)


def _read_bytes(path: Path) -> bytes:
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
    return path.read_bytes()


def _read_safetensors(path: Path, raw: bytes) -> Checkpoint:
    corrupt = f"{path} is not a readable policy checkpoint (truncated or corrupt?)"
    if len(raw) < 10 or raw[8:9] != b"{":
        raise CheckpointError(f"{corrupt}: no safetensors header")
    (size,) = struct.unpack("<Q", raw[:8])
    if size > len(raw) - 8:
        raise CheckpointError(f"{corrupt}: its header claims {size:,} bytes, the file has {len(raw) - 8:,}")
    try:
        index = json.loads(raw[8 : 8 + size])
        metadata = index.get("__metadata__") or {} if isinstance(index, dict) else {}
        if _METADATA_KEY not in metadata:
            raise CheckpointError(f"{path} is not a workbench policy checkpoint (a safetensors file without the {_METADATA_KEY!r} header)")
        document = json.loads(metadata[_METADATA_KEY])
        tensors = safetensors.torch.load(raw)
    except CheckpointError:
        raise
    except (ValueError, KeyError, TypeError, RecursionError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{corrupt}: {type(error).__name__}: {' '.join(str(error).split())[:200]}") from None
    except Exception as error:  # safetensors raises its own SafetensorError on damaged files
        raise CheckpointError(f"{corrupt}: {' '.join(str(error).split())[:200]}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a workbench policy checkpoint (no format marker {FORMAT!r})")
    if document.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has checkpoint format version {document.get('format_version')!r}; this workbench reads version {FORMAT_VERSION}"
        )
    if document.get("sha256") != _digest(document, tensors):
        raise CheckpointError(f"{path} fails its SHA-256 check: the file was altered or damaged after it was written")
    try:
        extra = _decode(document.get("extra") or {}, tensors)
        trained_for = TrainedFor.from_dict(document["trained_for"]) if document.get("trained_for") else None
    except (ValueError, KeyError, TypeError) as error:
        raise CheckpointError(f"{path} has a malformed header: {error}") from None
    weights = {name.removeprefix("weights/"): t for name, t in tensors.items() if name.startswith("weights/")}
    header = {k: v for k, v in document.items() if k not in ("extra", "trained_for", "sha256")}
    return _finite(Checkpoint(path, header, weights, extra, trained_for), tensors)


def _finite(checkpoint: Checkpoint, tensors: Mapping[str, torch.Tensor]) -> Checkpoint:
    for name, tensor in tensors.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise CheckpointError(
                f"{checkpoint.path} holds NaN or infinite values in {name}: the training that wrote it diverged; refusing to load it"
            )
    return checkpoint


def _read_pickle(path: Path, raw: bytes) -> Checkpoint:
    """The old format (a ``torch.save`` dict), read with ``weights_only=True`` after refusing TorchScript archives."""
    if raw[:4] == b"PK\x03\x04":
        try:
            names = zipfile.ZipFile(io.BytesIO(raw)).namelist()
        except zipfile.BadZipFile as error:
            raise CheckpointError(f"{path} is not a readable policy checkpoint (truncated or corrupt?): {error}") from None
        foreign = [n for n in names if not _PICKLE_ZIP_MEMBER.fullmatch(n)]
        if foreign or len({n.split("/", 1)[0] for n in names}) != 1:
            kind = (
                "a TorchScript archive"
                if any(n.endswith("constants.pkl") or "/code/" in n for n in names)
                else "a zip archive with unexpected members"
            )
            raise CheckpointError(
                f"refusing to load {path}: it is {kind} ({', '.join(foreign[:3])}), and loading it would run code; this is refused even "
                "with the pickle opt-in"
            )
    try:
        payload = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as error:  # torch.load raises many types on damaged or unsafe files
        message = " ".join(str(error).split())
        raise CheckpointError(
            f"refusing to load {path}: it holds more than tensors and plain data or is damaged ({message[:200]})"
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT or payload.get("format_version") != 1:
        raise CheckpointError(f"{path} is not a workbench policy checkpoint of the old format (no format marker {FORMAT!r}, version 1)")
    if not isinstance(payload.get("state_dict"), dict):
        raise CheckpointError(f"{path} lacks state_dict")
    header = {k: payload[k] for k in ("method", "config", "feature_layout", "versions") if k in payload}
    extra = dict(payload.get("extra") or {})
    weights = dict(payload["state_dict"])
    checked = {f"weights/{k}": v for k, v in weights.items() if isinstance(v, torch.Tensor)}
    return _finite(Checkpoint(path, header, weights, extra, None), checked)
