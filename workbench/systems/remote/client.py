"""The client oracle: a cost oracle that asks an engine speaking the protocol."""

from __future__ import annotations

import itertools
import json
import math
import os
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...graph import DataflowGraph
from ...sim import check_assignment
from ...sim.trace import Trace
from ..oracle import Measurement
from .protocol import MAX_LINE, PROTOCOL, TOKEN_VARIABLE, EngineError, encode, graph_fingerprint

_request_ids = itertools.count(1)


class RemoteEngine:
    """A cost oracle that asks an engine speaking the protocol above.

    Args:
        host: the engine's address.
        port: its TCP port.
        devices: devices assignments may use; ``None`` asks the engine (hello) the first time they are needed.
        connect_timeout: seconds to wait for a connection.
        reply_margin: seconds to wait for a reply beyond the measurement's timeout.
        retries: extra attempts after a refused or dropped connection.
        backoff: seconds before the first retry (doubled each time).
        token: the engine's shared token, sent with every request (``None``: none).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 7070,
        devices: int | None = None,
        connect_timeout: float = 5.0,
        reply_margin: float = 10.0,
        retries: int = 2,
        backoff: float = 0.2,
        token: str | None = None,
    ) -> None:
        self.host, self.port, self._devices = host, port, devices
        self.connect_timeout, self.reply_margin, self.retries, self.backoff = connect_timeout, reply_margin, retries, backoff
        self.token = token

    def __repr__(self) -> str:  # never the token
        return f"RemoteEngine({self.address}, devices={self._devices}, retries={self.retries})"

    @property
    def devices(self) -> int:
        """The devices assignments may use: as given, else as the engine says (raises :class:`EngineError` when unreachable)."""
        if self._devices is None:
            self._devices = int(self.hello()["devices"])
        return self._devices

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
        payload = encode({**request, "token": self.token} if self.token else request)
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
