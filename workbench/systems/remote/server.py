"""The reference server: wraps any cost oracle, bounds what a client can make it hold, answers every request."""

from __future__ import annotations

import hmac
import ipaddress
import socket
import socketserver
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ...cluster import num_devices
from ...graph import DataflowGraph
from ...sim import check_assignment
from ..oracle import CostOracle
from .protocol import (
    MAX_LINE,
    MAX_REPEATS,
    PROTOCOL,
    TOKEN_VARIABLE,
    RequestError,
    encode,
    graph_fingerprint,
    parse_request,
    request_error,
    request_field,
)


class _Busy(RuntimeError):
    """The engine had no room for the request; nothing ran."""


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
    def turn(self, wait: float) -> Iterator[None]:
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
                        _close_after_reply(self.request, request_error(error), linger=0.0)
                    return
                if not line:
                    return
                if len(line) > limit and not line.endswith(b"\n"):  # the rest of an over-long line is not a request
                    error = f"request longer than {limit} bytes (this engine's limit for its graphs)"
                    _close_after_reply(self.request, request_error(error), linger=2.0)
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
        return f"{host.decode() if isinstance(host, bytes) else host}:{port}"

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

    def process_request(self, request: Any, client_address: Any) -> None:
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
        reply = encode({"id": None, "ok": False, "kind": "busy", "error": error})
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

    def process_request_thread(self, request: Any, client_address: Any) -> None:
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
            encoded = encode(reply)
        except ValueError as exc:  # a result that JSON cannot carry (NaN, say)
            encoded = encode({"id": reply.get("id"), "ok": False, "kind": "measurement", "error": f"unencodable result: {exc}"})
        if len(encoded) > self.max_reply:
            error = f"the reply ({len(encoded):,} bytes) exceeds the limit of {self.max_reply:,} bytes; ask without the trace"
            encoded = encode({"id": reply.get("id"), "ok": False, "kind": "request", "error": error})
        return encoded

    def answer(self, line: bytes, connection: _Connection | None = None) -> dict[str, Any]:
        """The reply to one request line; a request that authenticates gives ``connection`` a slot (:meth:`take_slot`)."""
        request_id = None
        try:
            if connection is not None and self.token is None:
                self.take_slot(connection)  # without a token, a whole line is all a client can show
            if len(line) > self.max_request:
                raise RequestError(f"request longer than {self.max_request} bytes (this engine's limit for its graphs)")
            request = parse_request(line)
            if not isinstance(request, dict):
                raise RequestError("a request is a JSON object")
            request_id = request.get("id")
            if not (request_id is None or isinstance(request_id, (int, float, str)) and not isinstance(request_id, bool)):
                request_id = None
                raise RequestError("field 'id' must be a number, a string or null")
            self._authenticate(request)
            if connection is not None:
                self.take_slot(connection)
            if request.get("protocol") != PROTOCOL:
                raise RequestError(f"unsupported protocol {request.get('protocol')!r}; this engine speaks {PROTOCOL}"[:200])
            method = request.get("method")
            if method == "hello":
                return {"id": request_id, "ok": True, **self.describe()}
            if method == "measure":
                return {"id": request_id, **self._measure(request)}
            raise RequestError(f"unknown method {method!r}; use 'hello' or 'measure'"[:200])
        except RequestError as exc:
            return {"id": request_id, "ok": False, "kind": "request", "error": str(exc)}
        except _Busy as exc:
            return {"id": request_id, "ok": False, "kind": "busy", "error": str(exc)}

    def _authenticate(self, request: Mapping[str, Any]) -> None:
        if self.token is None:
            return
        given = request.get("token")
        if not isinstance(given, str) or not hmac.compare_digest(given.encode("utf-8"), self.token):
            raise RequestError("this engine requires its shared token in the request's 'token' field" if given is None else "wrong token")

    def describe(self) -> dict[str, Any]:
        from ... import __version__

        return {
            "protocol": PROTOCOL,
            "engine": f"workbench serve-engine {__version__} ({type(self.oracle).__name__})",
            "devices": num_devices(self.oracle.devices),
            "graphs": {name: {"nodes": g.num_nodes, "fingerprint": self.fingerprints[name]} for name, g in self.graphs.items()},
        }

    def _measure(self, request: Mapping[str, Any]) -> dict[str, Any]:
        name = request_field(request, "graph", str)
        if name not in self.graphs:
            raise RequestError(f"unknown graph {name!r}; this engine serves {', '.join(sorted(self.graphs))}"[:300])
        graph = self.graphs[name]
        fingerprint = request.get("fingerprint")
        if fingerprint is not None and fingerprint != self.fingerprints[name]:
            raise RequestError(f"graph {name!r} differs from the engine's copy (fingerprint mismatch)")
        assignment = request_field(request, "assignment", list)
        if any(isinstance(x, bool) or not isinstance(x, int) for x in assignment):
            raise RequestError("field 'assignment' must be a list of integer device ids")
        try:
            check_assignment(graph, assignment, num_devices(self.oracle.devices))
        except ValueError as exc:
            raise RequestError(str(exc)[:300]) from None
        repeats = request_field(request, "repeats", int, 3)
        if not 1 <= repeats <= MAX_REPEATS:
            raise RequestError(f"field 'repeats' must be in 1..{MAX_REPEATS}, got {repeats}"[:200])
        timeout = request_field(request, "timeout", (int, float), 60.0)
        if not 0 < timeout <= self.max_timeout:  # compared exactly: an integer such as 10**400 has no float
            raise RequestError(f"field 'timeout' must be in (0, {self.max_timeout:g}] seconds, got {timeout}"[:200])
        timeout = float(timeout)
        want_trace = request_field(request, "trace", bool, False)
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
