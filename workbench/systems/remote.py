"""Talk to an execution engine over TCP: the protocol, the client oracle, and the reference server.

The protocol (version 1) is JSON lines: each message is one JSON object on
one line (UTF-8, ending in ``\\n``, at most 4 MiB). A client sends a request
and reads one reply with the same ``id``; a connection may carry any number
of requests in turn. An engine implementing it (such as the paper's
einsummable runtime) needs only a JSON parser and a socket.

Requests::

    {"protocol": 1, "id": 1, "method": "hello"}
    {"protocol": 1, "id": 2, "method": "measure", "graph": "ffnn_192nodes",
     "fingerprint": "9f2c...",          # optional: sha256 of the graph's structure and costs
     "assignment": [0, 1, 3, ...],      # device per op, ops numbered as in the graph file
     "repeats": 3, "timeout": 60.0,     # timed runs; seconds for the whole measurement
     "trace": false}                    # optional: also send the measured trace

Replies::

    {"id": 1, "ok": true, "protocol": 1, "engine": "...", "devices": 4,
     "graphs": {"ffnn_192nodes": {"nodes": 180, "fingerprint": "9f2c..."}}}
    {"id": 2, "ok": true, "seconds": 0.231, "samples": [0.229, 0.231, 0.240],
     "details": {...}, "trace": null}
    {"id": 2, "ok": false, "kind": "request", "error": "unknown graph 'x'; ..."}
    {"id": 2, "ok": false, "kind": "measurement", "error": "op 17 ...: RuntimeError: ...",
     "samples": [...]}

``kind: "request"`` means the request was wrong (nothing ran; the client
raises :class:`EngineError`); ``kind: "measurement"`` means it ran and failed
(the client returns a failed :class:`~workbench.systems.Measurement`). Traces
use :meth:`workbench.Trace.to_dict`'s layout, in seconds. The graph's ``id``
is its name (``graph.name``, the file's stem for the bundled files);
``fingerprint`` is :func:`graph_fingerprint`.

The client (:class:`RemoteEngine`) retries a refused or dropped connection
``retries`` times with a growing pause, waits at most ``timeout +
reply_margin`` seconds for a reply, and turns every failure (unreachable
engine, no reply, a reply that is not protocol JSON) into a failed
Measurement that says what happened. The reference server
(:func:`serve_engine`, ``workbench serve-engine``) wraps any oracle (the
local executor by default), binds 127.0.0.1 unless told otherwise, checks
every field of every request, and runs one measurement at a time.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import socket
import socketserver
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ..graph import DataflowGraph
from ..sim import check_assignment
from ..sim.trace import Trace
from .oracle import CostOracle, Measurement

__all__ = ["PROTOCOL", "MAX_LINE", "EngineError", "RemoteEngine", "EngineServer", "serve_engine", "graph_fingerprint"]

PROTOCOL = 1
MAX_LINE = 4 << 20
MAX_REPEATS = 1000
_request_ids = itertools.count(1)


class EngineError(RuntimeError):
    """The engine rejected a request, or could not be asked at all (hello)."""


def graph_fingerprint(graph: DataflowGraph) -> str:
    """sha256 of the graph's ops, edges and costs (not its names or metadata)."""
    digest = hashlib.sha256()
    for array in (graph.compute, graph.src, graph.dst, graph.comm):
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def _encode(message: Mapping[str, Any]) -> bytes:
    return (json.dumps(message, allow_nan=False) + "\n").encode("utf-8")


@dataclass
class RemoteEngine:
    """A cost oracle that asks an engine speaking the protocol above.

    Attributes:
        host: the engine's address.
        port: its TCP port.
        devices: devices assignments may use; ``None`` asks the engine (hello).
        connect_timeout: seconds to wait for a connection.
        reply_margin: seconds to wait for a reply beyond the measurement's timeout.
        retries: extra attempts after a refused or dropped connection.
        backoff: seconds before the first retry (doubled each time).
    """

    host: str = "127.0.0.1"
    port: int = 7070
    devices: int | None = None
    connect_timeout: float = 5.0
    reply_margin: float = 10.0
    retries: int = 2
    backoff: float = 0.2

    @classmethod
    def from_address(cls, address: str, **options: Any) -> "RemoteEngine":
        """``RemoteEngine`` for ``"HOST:PORT"``."""
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"an engine address is HOST:PORT with a port in 1..65535, got {address!r}")
        return cls(host, int(port), **options)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def _exchange(self, request: Mapping[str, Any], reply_timeout: float) -> dict[str, Any]:
        """Send one request and read its reply; raises EngineError with the reason."""
        payload = _encode(request)
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
            except OSError as exc:
                last = exc
                continue
            with sock:
                try:
                    sock.settimeout(reply_timeout)
                    sock.sendall(payload)
                    line = sock.makefile("rb").readline(MAX_LINE + 1)
                except socket.timeout:
                    raise EngineError(f"engine at {self.address} sent no reply within {reply_timeout:.3g} s") from None
                except OSError as exc:
                    last = exc
                    continue
            if not line:
                last = ConnectionError("the engine closed the connection without replying")
                continue
            return self._parse(line, request.get("id"))
        raise EngineError(f"engine at {self.address} is unreachable after {self.retries + 1} attempts: {last}")

    def _parse(self, line: bytes, request_id: Any) -> dict[str, Any]:
        shown = line[:80].decode("utf-8", errors="replace").strip()
        if len(line) > MAX_LINE:
            raise EngineError(f"engine at {self.address} sent a reply longer than {MAX_LINE} bytes")
        try:
            reply = json.loads(line)
        except ValueError:
            raise EngineError(f"engine at {self.address} answered with something that is not JSON: {shown!r}") from None
        if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
            raise EngineError(f"engine at {self.address} answered without an 'ok' field: {shown!r}")
        if reply.get("id") != request_id:
            raise EngineError(f"engine at {self.address} answered request {reply.get('id')!r} instead of {request_id!r}")
        return reply

    def hello(self) -> dict[str, Any]:
        """The engine's description (devices, graphs); raises :class:`EngineError` when it cannot be reached."""
        reply = self._exchange({"protocol": PROTOCOL, "id": 0, "method": "hello"}, self.connect_timeout + self.reply_margin)
        if not reply["ok"]:
            raise EngineError(f"engine at {self.address} refused hello: {reply.get('error')}")
        if not isinstance(reply.get("devices"), int) or reply["devices"] < 1:
            raise EngineError(f"engine at {self.address} did not say how many devices it has")
        return reply

    def measure(
        self,
        graph: DataflowGraph,
        assignment: Sequence[int] | np.ndarray,
        repeats: int = 3,
        timeout: float = 60.0,
        trace: bool = False,
    ) -> Measurement:
        """Ask the engine to measure ``assignment`` of ``graph`` (sent by name and fingerprint)."""
        if not (math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout!r}")
        oracle = f"remote {self.address}"
        try:
            if self.devices is None:
                self.devices = int(self.hello()["devices"])
            values = check_assignment(graph, assignment, self.devices)
            request = {
                "protocol": PROTOCOL,
                "id": next(_request_ids),
                "method": "measure",
                "graph": graph.name,
                "fingerprint": graph_fingerprint(graph),
                "assignment": values.tolist(),
                "repeats": int(repeats),
                "timeout": float(timeout),
                "trace": bool(trace),
            }
            reply = self._exchange(request, timeout + self.reply_margin)
        except EngineError as exc:
            return Measurement.failed(str(exc), oracle=oracle)
        if not reply["ok"]:
            error = str(reply.get("error", "no reason given"))
            if reply.get("kind") == "request":
                raise EngineError(f"engine at {self.address} rejected the request: {error}")
            return Measurement.failed(error, samples=tuple(float(s) for s in reply.get("samples") or ()), oracle=oracle)
        try:
            seconds = float(reply["seconds"])
            samples = tuple(float(s) for s in reply.get("samples") or (seconds,))
            measured = Trace.from_dict(reply["trace"]) if reply.get("trace") else None
        except (KeyError, TypeError, ValueError) as exc:
            return Measurement.failed(f"engine at {self.address} sent a malformed measurement: {type(exc).__name__}: {exc}", oracle=oracle)
        if not (math.isfinite(seconds) and seconds > 0):
            return Measurement.failed(f"engine at {self.address} reported {seconds!r} seconds", oracle=oracle)
        return Measurement(seconds, samples, (), measured, oracle, dict(reply.get("details") or {}))


class _RequestError(ValueError):
    """A request that breaks the protocol; the reply says why."""


def _field(request: Mapping[str, Any], name: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
    value = request.get(name, default)
    if value is None or isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        raise _RequestError(f"field {name!r} must be {getattr(kind, '__name__', kind)}, got {value!r}"[:200])
    return value


class _Handler(socketserver.StreamRequestHandler):
    server: "EngineServer"
    timeout = 300.0  # an idle connection is closed after this many seconds

    def handle(self) -> None:
        while True:
            try:
                line = self.rfile.readline(MAX_LINE + 1)
            except OSError:
                return
            if not line:
                return
            reply = self.server.answer(line)
            try:
                encoded = _encode(reply)
            except ValueError as exc:  # a result that JSON cannot carry (NaN, say)
                encoded = _encode({"id": reply.get("id"), "ok": False, "kind": "measurement", "error": f"unencodable result: {exc}"})
            try:
                self.wfile.write(encoded)
                self.wfile.flush()
            except OSError:
                return
            if len(line) > MAX_LINE:  # the rest of an over-long line is not a request
                return


class EngineServer(socketserver.ThreadingTCPServer):
    """The reference engine: answers protocol requests with an oracle's measurements."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, graphs: Mapping[str, DataflowGraph], oracle: CostOracle, address: tuple[str, int], max_timeout: float = 600.0) -> None:
        if not graphs:
            raise ValueError("an engine needs at least one graph to serve")
        self.graphs = dict(graphs)
        self.fingerprints = {name: graph_fingerprint(g) for name, g in self.graphs.items()}
        self.oracle = oracle
        self.max_timeout = float(max_timeout)
        self.measuring = threading.Lock()
        super().__init__(address, _Handler)

    @property
    def address(self) -> str:
        host, port = self.server_address[:2]
        return f"{host}:{port}"

    def answer(self, line: bytes) -> dict[str, Any]:
        """The reply to one request line."""
        request_id = None
        try:
            if len(line) > MAX_LINE:
                raise _RequestError(f"request longer than {MAX_LINE} bytes")
            try:
                request = json.loads(line)
            except ValueError as exc:
                raise _RequestError(f"not JSON: {exc}") from None
            if not isinstance(request, dict):
                raise _RequestError("a request is a JSON object")
            request_id = request.get("id")
            if isinstance(request_id, (dict, list)):
                request_id = None
                raise _RequestError("field 'id' must be a number, a string or null")
            if request.get("protocol") != PROTOCOL:
                raise _RequestError(f"unsupported protocol {request.get('protocol')!r}; this engine speaks {PROTOCOL}")
            method = request.get("method")
            if method == "hello":
                return {"id": request_id, "ok": True, **self.describe()}
            if method == "measure":
                return {"id": request_id, **self._measure(request)}
            raise _RequestError(f"unknown method {method!r}; use 'hello' or 'measure'")
        except _RequestError as exc:
            return {"id": request_id, "ok": False, "kind": "request", "error": str(exc)}

    def describe(self) -> dict[str, Any]:
        from .. import __version__

        return {
            "protocol": PROTOCOL,
            "engine": f"workbench serve-engine {__version__} ({type(self.oracle).__name__})",
            "devices": int(self.oracle.devices),
            "graphs": {name: {"nodes": g.num_nodes, "fingerprint": self.fingerprints[name]} for name, g in self.graphs.items()},
        }

    def _measure(self, request: Mapping[str, Any]) -> dict[str, Any]:
        name = _field(request, "graph", str)
        if name not in self.graphs:
            raise _RequestError(f"unknown graph {name!r}; this engine serves {', '.join(sorted(self.graphs))}")
        graph = self.graphs[name]
        fingerprint = request.get("fingerprint")
        if fingerprint is not None and fingerprint != self.fingerprints[name]:
            raise _RequestError(f"graph {name!r} differs from the engine's copy (fingerprint mismatch)")
        assignment = _field(request, "assignment", list)
        if any(isinstance(x, bool) or not isinstance(x, int) for x in assignment):
            raise _RequestError("field 'assignment' must be a list of integer device ids")
        try:
            check_assignment(graph, assignment, int(self.oracle.devices))
        except ValueError as exc:
            raise _RequestError(str(exc)) from None
        repeats = _field(request, "repeats", int, 3)
        if not 1 <= repeats <= MAX_REPEATS:
            raise _RequestError(f"field 'repeats' must be in 1..{MAX_REPEATS}, got {repeats}")
        timeout = float(_field(request, "timeout", (int, float), 60.0))
        if not (math.isfinite(timeout) and 0 < timeout <= self.max_timeout):
            raise _RequestError(f"field 'timeout' must be in (0, {self.max_timeout:g}] seconds, got {timeout}")
        want_trace = _field(request, "trace", bool, False)
        with self.measuring:
            result = self.oracle.measure(graph, assignment, repeats=repeats, timeout=timeout)
        if not result.ok:
            return {"ok": False, "kind": "measurement", "error": "; ".join(result.errors), "samples": list(result.samples)}
        return {
            "ok": True,
            "seconds": result.seconds,
            "samples": list(result.samples),
            "details": result.to_dict(with_trace=False)["details"],
            "trace": result.trace.to_dict() if (want_trace and result.trace is not None) else None,
        }


def serve_engine(
    graphs: Mapping[str, DataflowGraph] | Sequence[DataflowGraph],
    oracle: CostOracle,
    host: str = "127.0.0.1",
    port: int = 7070,
    max_timeout: float = 600.0,
) -> EngineServer:
    """A bound (not yet serving) :class:`EngineServer`; call ``serve_forever()`` (``port=0`` picks a free port)."""
    if not isinstance(graphs, Mapping):
        graphs = {g.name: g for g in graphs}
    return EngineServer(graphs, oracle, (host, port), max_timeout)
