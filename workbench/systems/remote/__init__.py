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

from .client import RemoteEngine
from .protocol import MAX_LINE, PROTOCOL, TOKEN_VARIABLE, EngineError, graph_fingerprint
from .server import EngineServer, is_loopback, serve_engine

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
