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
It protects integrity, not authenticity: anyone who can write the file can
recompute it (docs/contracts.md). What makes a file safe to load is what is
checked: the header first, read alone (at most :data:`MAX_HEADER_BYTES`)
before the rest of the file (every config field's type and range,
``trained_for``; a loader's ``weights`` callback derives the exact weight
shapes from the config without allocating them), then the weights (float32
or float16, finite, of exactly those shapes).

Reading never unpickles: safetensors parses the tensors, ``json`` the rest.
Files of the old pickle format (``.pt``) are refused unless the caller passes
``allow_unsafe_pickle=True``; even then TorchScript archives (which
``torch.load`` hands to ``torch.jit.load``, running their code: CVE-2025-32434)
and zip archives holding anything but pickled tensors are refused. Every
floating-point tensor must be finite.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math
import os
import re
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import safetensors.torch
import torch

from ..fileio import atomic_path
from ..runs import CHECKPOINT_SUFFIX
from .fields import shown
from .header import (
    FORMAT,
    FORMAT_VERSION,
    MAX_CHECKPOINT_BYTES,
    MAX_HEADER_BYTES,
    METADATA_KEY,
    CheckpointError,
    GraphIdentity,
    TrainedFor,
    open_checkpoint,
    parse_header,
)

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
    "weight_shapes",
    "MAX_CHECKPOINT_BYTES",
    "MAX_HEADER_BYTES",
    "MAX_PARAMETERS",
]

MAX_PARAMETERS = 1 << 24
"""Most weights (numbers) a policy's config may imply, checked before its module is built: 64 MiB of float32, 16 times
the paper preset's doppler policy."""
WEIGHT_DTYPES = {"F32": torch.float32, "F16": torch.float16}
"""What a weight tensor may be stored as (safetensors' names); it is used as float32."""
TEMPORARY_PREFIX = ".tmp-"
"""How :func:`workbench.fileio.atomic_path` names its temporary files (what a killed save leaves behind)."""
_TAGS = ("$tensor", "$tuple", "$items", "$float")
MIGRATE_HINT = "python -m workbench.learn.migrate {path} --trust-pickle-checkpoint"
# what torch.save's zip archives hold (torch 2.x); anything else (code/, constants.pkl, ...) is refused
_PICKLE_ZIP_MEMBER = re.compile(
    r"[^/]+/(data\.pkl|byteorder|version|\.format_version|\.storage_alignment|\.data/version|\.data/serialization_id|data/\d+)"
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


def weight_shapes(build: Callable[[], torch.nn.Module]) -> dict[str, tuple[int, ...]]:
    """The shape of every entry of the state dict of the module ``build`` makes, built on the meta device (no memory);
    ``ValueError`` when they hold more than :data:`MAX_PARAMETERS` numbers."""
    with torch.device("meta"):
        module = build()
    shapes = {name: tuple(tensor.shape) for name, tensor in module.state_dict().items()}
    total = sum(math.prod(shape) for shape in shapes.values())
    if total > MAX_PARAMETERS:
        raise ValueError(f"its config implies {total:,} weights, more than the {MAX_PARAMETERS:,} a checkpoint may hold (MAX_PARAMETERS)")
    return shapes


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
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy() if tensor.numel() else b"")  # hashed in place, not copied
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
    data = safetensors.torch.save(tensors, metadata={METADATA_KEY: json.dumps(document, allow_nan=False)})
    if int.from_bytes(data[:8], "little") > MAX_HEADER_BYTES:
        raise ValueError(f"refusing to write {path}: its header would hold more than the {MAX_HEADER_BYTES:,} bytes a checkpoint may hold")
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


Expected = Callable[[dict[str, Any]], Mapping[str, tuple[int, ...]]]
"""A loader's check of a checkpoint's header (method, config, ...): the shape of every weight the header implies."""


def read_checkpoint(path: str | os.PathLike, allow_unsafe_pickle: bool = False, weights: Expected | None = None) -> Checkpoint:
    """The checked contents of the checkpoint at ``path``; :class:`CheckpointError` says what is wrong.

    ``weights`` checks the header before any tensor is read (raising
    :class:`CheckpointError` or ``ValueError``) and gives the weights' shapes
    (:func:`weight_shapes`); each weight must then be stored as float32 or
    float16, of exactly that shape, and comes back as finite float32.
    ``allow_unsafe_pickle=True`` also reads the old pickle format (``.pt``):
    only for files you made yourself, since unpickling can run code.
    TorchScript archives are refused regardless.
    """
    path = Path(path)
    with open_checkpoint(path) as handle:
        head = handle.read(9)
        if head[8:9] == b"{" or not (head[:4] == b"PK\x03\x04" or head[:1] == b"\x80"):  # not torch.save's zip or legacy pickle
            return _read_safetensors(path, handle, weights)
        if not allow_unsafe_pickle:
            raise CheckpointError(
                f"refusing to load {path}: it is a pickle checkpoint (the .pt format of older workbench versions), and unpickling "
                f"can run arbitrary code. If you made it yourself, convert it once: {MIGRATE_HINT.format(path=path)}"
            )
        checkpoint = _read_pickle(path, _read_all(path, handle))
    if weights is not None:
        stored = {f"weights/{k}": _index_entry(v) for k, v in checkpoint.weights.items()}
        _check_weight_index(path, stored, _expected(path, weights, checkpoint.header))
    return _as_float32(checkpoint) if weights is not None else checkpoint


_DTYPE_NAMES = {dtype: name for name, dtype in WEIGHT_DTYPES.items()}


def _index_entry(value: Any) -> dict[str, Any]:
    """What a safetensors index says of a tensor, for a weight of the old pickle format (which may hold anything)."""
    if not isinstance(value, torch.Tensor):
        return {"dtype": type(value).__name__}
    return {"dtype": _DTYPE_NAMES.get(value.dtype, str(value.dtype)), "shape": list(value.shape)}


def _expected(path: Path, weights: Expected, header: dict[str, Any]) -> Mapping[str, tuple[int, ...]]:
    try:
        return weights(header)
    except CheckpointError:
        raise
    except ValueError as error:
        raise CheckpointError(f"{path} has a bad header: {error}") from None


def _check_device_outputs(
    path: Path, weights: Expected, header: dict[str, Any], expected: Mapping[str, tuple[int, ...]], trained_for: TrainedFor
) -> None:
    """What the weights tell of ``trained_for``: a policy whose weight shapes follow its config's ``max_devices`` (one output
    per device index: GDP) cannot have been trained with more devices than that, cross-graph or not."""
    config = header.get("config")
    outputs = config.get("max_devices") if isinstance(config, dict) else None
    if not isinstance(config, dict) or type(outputs) is not int or trained_for.devices <= outputs:
        return
    if _expected(path, weights, {**header, "config": {**config, "max_devices": outputs + 1}}) != expected:
        raise CheckpointError(
            f"{path} has a malformed header: trained_for.devices is {trained_for.devices}, but its weights score at most {outputs} "
            "devices (one output per device index, config max_devices)"
        )


def _check_weight_index(path: Path, index: Mapping[str, Any], expected: Mapping[str, tuple[int, ...]]) -> None:
    """Every weight ``expected`` names, and no other, stored as float32 or float16 in its shape (from the file's index, unread)."""
    stored = {name.removeprefix("weights/"): entry for name, entry in index.items() if name.startswith("weights/")}
    missing, unknown = sorted(set(expected) - set(stored)), sorted(set(stored) - set(expected))
    if missing:
        raise CheckpointError(f"{path} lacks the weight {missing[0]!r}, which its config implies ({len(expected)} weights)")
    if unknown:
        raise CheckpointError(f"{path} holds the weight {unknown[0][:80]!r}, which its config does not have")
    for name, shape in expected.items():
        entry = stored[name] if isinstance(stored[name], dict) else {}
        if entry.get("dtype") not in WEIGHT_DTYPES:
            raise CheckpointError(f"{path}: weight {name!r} is stored as {shown(entry.get('dtype'))}; weights are float32 or float16")
        if entry.get("shape") != list(shape):
            raise CheckpointError(f"{path}: weight {name!r} has shape {shown(entry.get('shape'))}; its config implies {list(shape)}")


def _as_float32(checkpoint: Checkpoint) -> Checkpoint:
    weights = {name: tensor.float() for name, tensor in checkpoint.weights.items()}
    return _finite(dataclasses.replace(checkpoint, weights=weights), {f"weights/{k}": v for k, v in weights.items()})


def _read_all(path: Path, handle: BinaryIO) -> bytes:
    """The whole file, from its first byte (a file that grew past the size limit since it was opened is refused)."""
    handle.seek(0)
    raw = handle.read(MAX_CHECKPOINT_BYTES + 1)
    if len(raw) > MAX_CHECKPOINT_BYTES:
        raise CheckpointError(f"policy checkpoint {path} is over the {MAX_CHECKPOINT_BYTES:,}-byte limit")
    return raw


def _read_safetensors(path: Path, handle: BinaryIO, weights: Expected | None) -> Checkpoint:
    """The checkpoint in the open file ``handle``: its header is read and checked first, the tensors only after."""
    corrupt = f"{path} is not a readable policy checkpoint (truncated or corrupt?)"
    index, document, trained_for = parse_header(path, handle)
    header = {k: v for k, v in document.items() if k not in ("extra", "trained_for", "sha256")}
    if weights is not None:
        expected = _expected(path, weights, header)
        if trained_for is not None:
            _check_device_outputs(path, weights, header, expected, trained_for)
        _check_weight_index(path, index, expected)
    try:
        tensors = safetensors.torch.load(_read_all(path, handle))  # the file's bytes are freed once the tensors are made
    except Exception as error:  # safetensors raises its own SafetensorError on damaged files
        raise CheckpointError(f"{corrupt}: {' '.join(str(error).split())[:200]}") from None
    if document.get("sha256") != _digest(document, tensors):
        raise CheckpointError(f"{path} fails its SHA-256 check: the file was altered or damaged after it was written")
    try:
        extra = _decode(document.get("extra") or {}, tensors)
    except (ValueError, KeyError, TypeError) as error:
        raise CheckpointError(f"{path} has a malformed header: {error}") from None
    found = {name.removeprefix("weights/"): t for name, t in tensors.items() if name.startswith("weights/")}
    checkpoint = _finite(Checkpoint(path, header, found, extra, trained_for), tensors)
    return _as_float32(checkpoint) if weights is not None else checkpoint


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
