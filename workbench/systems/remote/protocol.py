"""The engine protocol's constants, errors and message encoding, shared by the client and the server."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...graph import DataflowGraph

PROTOCOL = 1
MAX_LINE = 4 << 20
MAX_REPEATS = 1000
TOKEN_VARIABLE = "WORKBENCH_ENGINE_TOKEN"
"""Environment variable with the shared token, read by ``serve-engine`` and :meth:`RemoteEngine.from_address`."""


class EngineError(RuntimeError):
    """The engine rejected a request, or could not be asked at all (hello)."""


def graph_fingerprint(graph: DataflowGraph) -> str:
    """sha256 of the graph's ops, edges and costs (not its names or metadata)."""
    digest = hashlib.sha256()
    for array in (graph.compute, graph.src, graph.dst, graph.comm):
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def encode(message: Mapping[str, Any]) -> bytes:
    return (json.dumps(message, allow_nan=False) + "\n").encode("utf-8")


class RequestError(ValueError):
    """A request that breaks the protocol; the reply says why."""


def request_field(request: Mapping[str, Any], name: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
    value = request.get(name, default)
    if value is None or isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        raise RequestError(f"field {name!r} must be {getattr(kind, '__name__', kind)}, got {value!r}"[:200])
    return value


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise RequestError(f"number {text[:40]} is out of range")
    return value


def _no_constant(text: str) -> None:
    raise RequestError(f"{text} is not a number JSON allows")


def parse_request(line: bytes) -> Any:
    """``json.loads`` that refuses NaN, infinities and numbers beyond a float, and nesting past the recursion limit."""
    try:
        return json.loads(line, parse_float=_finite, parse_constant=_no_constant)
    except RequestError:
        raise
    except RecursionError:
        raise RequestError("JSON nested too deeply") from None
    except ValueError as exc:
        raise RequestError(f"not JSON: {exc}"[:300]) from None


def request_error(error: str) -> bytes:
    """The reply to a line that is no request (``id`` null)."""
    return encode({"id": None, "ok": False, "kind": "request", "error": error})
