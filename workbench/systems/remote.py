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
    {"id": null, "ok": false, "kind": "busy", "error": "16 connections are open ..."}

``kind: "request"`` means the request was wrong (nothing ran; the client
raises :class:`EngineError`); ``kind: "measurement"`` means it ran and failed
(the client returns a failed :class:`~workbench.systems.Measurement`);
``kind: "busy"`` means nothing ran because the engine had no room (too many
connections, or the request waited its whole timeout in line; a failed
Measurement too). An engine started with a token requires ``"token"`` in
every request. Traces
use :meth:`workbench.Trace.to_dict`'s layout, in seconds. The graph's ``id``
is its name (``graph.name``, the file's stem for the bundled files);
``fingerprint`` is :func:`graph_fingerprint`.

The client (:class:`RemoteEngine`) retries a refused or dropped connection
``retries`` times with a growing pause, waits at most ``timeout +
reply_margin`` seconds for a reply, and turns every failure (unreachable
engine, no reply, a reply that is not protocol JSON) into a failed
Measurement that says what happened. The reference server
(:func:`serve_engine`, ``workbench serve-engine``) wraps any oracle (the
local executor by default), binds 127.0.0.1 unless told otherwise (another
address needs a token), checks every field of every request, and runs one
measurement at a time, first come first served. It bounds what a client can
make it hold: open connections (a connection takes one of the served slots
only once a request authenticates, so connections that never send one, or
send it a byte at a time, hold none), the request line (sized to its largest
graph, and due whole within ``idle_timeout``), JSON nesting, numbers (finite
only), the reply (4 MiB, else an error reply) and the waiting line. Every
refusal is an error reply; the connection is closed after a line too long to
read on, a line not sent in time, and a request that does not authenticate
or finds no slot.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import itertools
import json
import math
import os
import socket
import socketserver
import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..graph import DataflowGraph
from ..sim import check_assignment
from ..sim.trace import Trace
from .oracle import CostOracle, Measurement

__all__ = [
    "PROTOCOL",
    "MAX_LINE",
    "TOKEN_VARIABLE",
    "EngineError",
    "RemoteEngine",
    "EngineServer",
    "serve_engine",
    "graph_fingerprint",
    "is_loopback",
]

PROTOCOL = 1
MAX_LINE = 4 << 20
MAX_REPEATS = 1000
TOKEN_VARIABLE = "WORKBENCH_ENGINE_TOKEN"
"""Environment variable with the shared token, read by ``serve-engine`` and :meth:`RemoteEngine.from_address`."""
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
        token: the engine's shared token, sent with every request (``None``: none).
    """

    host: str = "127.0.0.1"
    port: int = 7070
    devices: int | None = None
    connect_timeout: float = 5.0
    reply_margin: float = 10.0
    retries: int = 2
    backoff: float = 0.2
    token: str | None = field(default=None, repr=False)

    @classmethod
    def from_address(cls, address: str, **options: Any) -> RemoteEngine:
        """``RemoteEngine`` for ``"HOST:PORT"``; the token defaults to ``$WORKBENCH_ENGINE_TOKEN``."""
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"an engine address is HOST:PORT with a port in 1..65535, got {address!r}")
        options.setdefault("token", os.environ.get(TOKEN_VARIABLE) or None)
        return cls(host, int(port), **options)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def _exchange(self, request: Mapping[str, Any], reply_timeout: float) -> dict[str, Any]:
        """Send one request and read its reply; raises EngineError with the reason."""
        payload = _encode({**request, "token": self.token} if self.token else request)
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
                except TimeoutError:
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
        if reply.get("id") != request_id and not (reply.get("id") is None and reply["ok"] is False):  # id null: refused before reading
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


class _Busy(RuntimeError):
    """The engine had no room for the request; nothing ran."""


def _field(request: Mapping[str, Any], name: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
    value = request.get(name, default)
    if value is None or isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        raise _RequestError(f"field {name!r} must be {getattr(kind, '__name__', kind)}, got {value!r}"[:200])
    return value


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _RequestError(f"number {text[:40]} is out of range")
    return value


def _no_constant(text: str) -> None:
    raise _RequestError(f"{text} is not a number JSON allows")


def _parse_request(line: bytes) -> Any:
    """``json.loads`` that refuses NaN, infinities and numbers beyond a float, and nesting past the recursion limit."""
    try:
        return json.loads(line, parse_float=_finite, parse_constant=_no_constant)
    except _RequestError:
        raise
    except RecursionError:
        raise _RequestError("JSON nested too deeply") from None
    except ValueError as exc:
        raise _RequestError(f"not JSON: {exc}"[:300]) from None


def _close_after_reply(sock: socket.socket, reply: bytes, linger: float) -> None:
    """Send a last reply and stop sending; then read and drop what the client still sends for up to ``linger`` s,
    so that closing does not reset the connection before the client has read the reply."""
    try:
        sock.settimeout(1.0)
        sock.sendall(reply)
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(linger if linger > 0 else 0.0)
        drained, deadline = 0, time.monotonic() + linger
        while drained < MAX_LINE:
            chunk = sock.recv(65536)
            if not chunk or time.monotonic() > deadline:
                break
            drained += len(chunk)
    except OSError:  # includes the timeout and "would block"
        pass


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _TurnQueue:
    """First come, first served turns at the oracle, with a bounded line; a request waits at most its own timeout."""

    def __init__(self, max_waiting: int) -> None:
        self.max_waiting = max_waiting
        self._changed = threading.Condition()
        self._issued = 0
        self._serving = 0
        self._abandoned: set[int] = set()

    @property
    def ahead(self) -> int:
        """Requests being measured or waiting for their turn."""
        with self._changed:
            return self._issued - self._serving - len(self._abandoned)

    @contextmanager
    def turn(self, wait: float):
        with self._changed:
            ahead = self.ahead
            if ahead > self.max_waiting:
                raise _Busy(f"{ahead} requests are ahead in line for the engine (at most {self.max_waiting}); try again later")
            ticket, self._issued = self._issued, self._issued + 1
            give_up = time.monotonic() + wait
            while self._serving != ticket:
                left = give_up - time.monotonic()
                if left <= 0:
                    self._abandoned.add(ticket)
                    raise _Busy(f"the engine was busy with other requests for the whole timeout ({wait:g} s)")
                self._changed.wait(left)
        try:
            yield
        finally:
            with self._changed:
                self._serving += 1
                while self._serving in self._abandoned:
                    self._abandoned.discard(self._serving)
                    self._serving += 1
                self._changed.notify_all()


def _request_error(error: str) -> bytes:
    """The reply to a line that is no request (``id`` null)."""
    return _encode({"id": None, "ok": False, "kind": "request", "error": error})


class _LineReader:
    """Request lines from a socket, each with its own deadline: a client has ``seconds`` to send a whole line, however
    it spaces the bytes (one byte every few seconds holds nothing longer than one that sends nothing)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.scanned = 0  # bytes of the buffer known to hold no newline

    def readline(self, limit: int, seconds: float) -> bytes | None:
        """The next line with its ``\\n``; more than ``limit`` bytes without one (an over-long line); at end of input what
        is left (``b""`` when nothing); ``None`` when ``seconds`` pass first."""
        deadline = time.monotonic() + seconds
        while True:
            end = self.buffer.find(b"\n", self.scanned, limit + 1)
            if end >= 0 or len(self.buffer) > limit:
                size = end + 1 if end >= 0 else limit + 1
                line = bytes(self.buffer[:size])
                del self.buffer[:size]
                self.scanned = 0
                return line
            self.scanned = len(self.buffer)
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                return None
            if not chunk:
                line, self.buffer = bytes(self.buffer), bytearray()
                return line
            self.buffer += chunk


@dataclass
class _Connection:
    """What the server knows of one connection: whether it holds one of the ``max_connections`` slots."""

    slot: bool = False


class _Handler(socketserver.BaseRequestHandler):
    server: EngineServer

    def handle(self) -> None:
        limit, connection = self.server.max_request, _Connection()
        reader = _LineReader(self.request)
        try:
            while True:
                try:
                    line = reader.readline(limit, self.server.idle_timeout)
                except OSError:
                    return
                if line is None:  # no whole line in time: idle, or sending a byte at a time
                    if reader.buffer:
                        error = f"no complete request line within {self.server.idle_timeout:g} s"
                        _close_after_reply(self.request, _request_error(error), linger=0.0)
                    return
                if not line:
                    return
                if len(line) > limit and not line.endswith(b"\n"):  # the rest of an over-long line is not a request
                    error = f"request longer than {limit} bytes (this engine's limit for its graphs)"
                    _close_after_reply(self.request, _request_error(error), linger=2.0)
                    return
                reply = self.server.reply_bytes(line, connection)
                if not connection.slot:  # not authenticated, or no slot left: the reply says which, then the connection closes
                    _close_after_reply(self.request, reply, linger=1.0)
                    return
                try:
                    self.request.settimeout(self.server.idle_timeout)
                    self.request.sendall(reply)
                except OSError:
                    return
        finally:
            if connection.slot:
                self.server.release_slot()


class EngineServer(socketserver.ThreadingTCPServer):
    """The reference engine: answers protocol requests with an oracle's measurements.

    Args:
        graphs: the graphs it serves, by id.
        oracle: what measures (``devices`` and ``measure``).
        address: ``(host, port)`` to bind.
        max_timeout: the longest ``timeout`` a request may ask for (seconds).
        token: the shared token every request must carry (``None``: none; required off loopback).
        max_connections: connections served at once (slots); a connection takes one with its first request that
            authenticates (any whole line without a token), so connections that never send one hold none; a request
            finding none left gets a ``busy`` reply.
        max_pending: connections open without a slot yet; more get a ``busy`` reply.
        max_waiting: requests waiting for the oracle; more get a ``busy`` reply.
        idle_timeout: seconds a client has to send each whole request line; an idle connection, or one sending a byte
            at a time, is closed after it (with a ``request`` error when it sent part of a line).
        max_request: longest request line in bytes (default: room for the largest graph's assignment).
        max_reply: longest reply line in bytes; a longer one is replaced by an error reply.
    """

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # the listen backlog: connections beyond the cap are answered, not left to time out

    def __init__(
        self,
        graphs: Mapping[str, DataflowGraph],
        oracle: CostOracle,
        address: tuple[str, int],
        max_timeout: float = 600.0,
        token: str | None = None,
        max_connections: int = 16,
        max_pending: int = 32,
        max_waiting: int = 64,
        idle_timeout: float = 60.0,
        max_request: int | None = None,
        max_reply: int = MAX_LINE,
    ) -> None:
        if not graphs:
            raise ValueError("an engine needs at least one graph to serve")
        if not is_loopback(address[0]) and not token:
            raise ValueError(
                f"serving on {address[0]} (not loopback) needs a shared token (--token or ${TOKEN_VARIABLE}): "
                "the protocol has no other authentication"
            )
        self.graphs = dict(graphs)
        self.fingerprints = {name: graph_fingerprint(g) for name, g in self.graphs.items()}
        self.oracle = oracle
        self.max_timeout = float(max_timeout)
        self.token = token.encode("utf-8") if token else None
        self.max_connections = max_connections
        self.max_pending = max_pending
        self.idle_timeout = idle_timeout
        self.max_request = min(MAX_LINE, max_request or 4096 + 12 * max(g.num_nodes for g in self.graphs.values()))
        self.max_reply = max_reply
        self.turns = _TurnQueue(max_waiting)
        self._open = 0  # connections holding a slot
        self._accepted = 0  # connections open, with a slot or not
        self._open_lock = threading.Lock()
        self._refusing = threading.BoundedSemaphore(max_connections)
        super().__init__(address, _Handler)

    @property
    def address(self) -> str:
        host, port = self.server_address[:2]
        return f"{host}:{port}"

    @property
    def connections(self) -> int:
        """Connections being served now (holding a slot)."""
        with self._open_lock:
            return self._open

    def take_slot(self, connection: _Connection) -> None:
        """Give ``connection`` a slot if it has none; :class:`_Busy` when all ``max_connections`` are taken."""
        with self._open_lock:
            if not connection.slot and self._open >= self.max_connections:
                raise _Busy(self._busy_message(self.max_connections))
            self._open += not connection.slot
        connection.slot = True

    def release_slot(self) -> None:
        with self._open_lock:
            self._open -= 1

    def _busy_message(self, count: int) -> str:
        return f"{count} connections are open, the engine's limit; try again later"

    def process_request(self, request, client_address) -> None:
        with self._open_lock:
            room = self._accepted < self.max_connections + self.max_pending
            self._accepted += room
        if not room:
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self._closed_one()
            raise

    def _refuse(self, request: socket.socket) -> None:
        """A ``busy`` reply to a connection beyond the cap, lingering in a thread (at most ``max_connections`` of them) so it arrives."""
        error = self._busy_message(self.max_connections + self.max_pending)
        reply = _encode({"id": None, "ok": False, "kind": "busy", "error": error})
        if not self._refusing.acquire(blocking=False):  # a flood: answer without waiting, never hold up accepting
            _close_after_reply(request, reply, linger=0.0)
            self.shutdown_request(request)
            return

        def linger() -> None:
            try:
                _close_after_reply(request, reply, linger=1.0)
                self.shutdown_request(request)
            finally:
                self._refusing.release()

        threading.Thread(target=linger, daemon=True).start()

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._closed_one()

    def _closed_one(self) -> None:
        with self._open_lock:
            self._accepted -= 1

    def reply_bytes(self, line: bytes, connection: _Connection | None = None) -> bytes:
        """The encoded reply to one request line: always one JSON line of at most ``max_reply`` bytes."""
        reply = self.answer(line, connection)
        try:
            encoded = _encode(reply)
        except ValueError as exc:  # a result that JSON cannot carry (NaN, say)
            encoded = _encode({"id": reply.get("id"), "ok": False, "kind": "measurement", "error": f"unencodable result: {exc}"})
        if len(encoded) > self.max_reply:
            error = f"the reply ({len(encoded):,} bytes) exceeds the limit of {self.max_reply:,} bytes; ask without the trace"
            encoded = _encode({"id": reply.get("id"), "ok": False, "kind": "request", "error": error})
        return encoded

    def answer(self, line: bytes, connection: _Connection | None = None) -> dict[str, Any]:
        """The reply to one request line; a request that authenticates gives ``connection`` a slot (:meth:`take_slot`)."""
        request_id = None
        try:
            if connection is not None and self.token is None:
                self.take_slot(connection)  # without a token, a whole line is all a client can show
            if len(line) > self.max_request:
                raise _RequestError(f"request longer than {self.max_request} bytes (this engine's limit for its graphs)")
            request = _parse_request(line)
            if not isinstance(request, dict):
                raise _RequestError("a request is a JSON object")
            request_id = request.get("id")
            if not (request_id is None or isinstance(request_id, (int, float, str)) and not isinstance(request_id, bool)):
                request_id = None
                raise _RequestError("field 'id' must be a number, a string or null")
            self._authenticate(request)
            if connection is not None:
                self.take_slot(connection)
            if request.get("protocol") != PROTOCOL:
                raise _RequestError(f"unsupported protocol {request.get('protocol')!r}; this engine speaks {PROTOCOL}"[:200])
            method = request.get("method")
            if method == "hello":
                return {"id": request_id, "ok": True, **self.describe()}
            if method == "measure":
                return {"id": request_id, **self._measure(request)}
            raise _RequestError(f"unknown method {method!r}; use 'hello' or 'measure'"[:200])
        except _RequestError as exc:
            return {"id": request_id, "ok": False, "kind": "request", "error": str(exc)}
        except _Busy as exc:
            return {"id": request_id, "ok": False, "kind": "busy", "error": str(exc)}

    def _authenticate(self, request: Mapping[str, Any]) -> None:
        if self.token is None:
            return
        given = request.get("token")
        if not isinstance(given, str) or not hmac.compare_digest(given.encode("utf-8"), self.token):
            raise _RequestError("this engine requires its shared token in the request's 'token' field" if given is None else "wrong token")

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
            raise _RequestError(f"unknown graph {name!r}; this engine serves {', '.join(sorted(self.graphs))}"[:300])
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
            raise _RequestError(str(exc)[:300]) from None
        repeats = _field(request, "repeats", int, 3)
        if not 1 <= repeats <= MAX_REPEATS:
            raise _RequestError(f"field 'repeats' must be in 1..{MAX_REPEATS}, got {repeats}"[:200])
        timeout = _field(request, "timeout", (int, float), 60.0)
        if not 0 < timeout <= self.max_timeout:  # compared exactly: an integer such as 10**400 has no float
            raise _RequestError(f"field 'timeout' must be in (0, {self.max_timeout:g}] seconds, got {timeout}"[:200])
        timeout = float(timeout)
        want_trace = _field(request, "trace", bool, False)
        with self.turns.turn(wait=timeout):
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
    **options: Any,
) -> EngineServer:
    """A bound (not yet serving) :class:`EngineServer`; call ``serve_forever()`` (``port=0`` picks a free port).

    ``options`` are :class:`EngineServer`'s (``token``, ``max_connections``, ...).
    """
    if not isinstance(graphs, Mapping):
        graphs = {g.name: g for g in graphs}
    return EngineServer(graphs, oracle, (host, port), max_timeout, **options)
