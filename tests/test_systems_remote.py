"""The remote-engine protocol, its reference server, and the serve-engine / calibrate commands."""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import numpy as np
import pytest

import workbench as wb
from workbench.cli import main
from workbench.systems import LocalExecutor, Measurement, RemoteEngine, SimulatorOracle, serve_engine
from workbench.systems.executor import CalibratedKernels
from workbench.systems.remote import EngineError, graph_fingerprint


@contextmanager
def running(server):
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[:2]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@contextmanager
def raw_server(reply: bytes | None):
    """A TCP server that answers every request line with ``reply`` (or never answers)."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.makefile("rb").readline()
                if reply is not None:
                    conn.sendall(reply)
                else:
                    stop.wait(3)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[:2]
    finally:
        stop.set()
        thread.join(5)
        listener.close()


@pytest.fixture(scope="module")
def graph():
    return wb.bundled_graph("chain_mm")


def test_round_trip_matches_the_oracle_behind_the_server(graph):
    oracle = SimulatorOracle(4, time_scale=1e-13)
    assignment = np.arange(graph.num_nodes) % 4
    with running(serve_engine([graph], oracle, port=0)) as (host, port):
        engine = RemoteEngine(host, port)
        hello = engine.hello()
        assert hello["devices"] == 4 and hello["graphs"][graph.name]["fingerprint"] == graph_fingerprint(graph)
        result = engine.measure(graph, assignment, repeats=2, trace=True)
        assert engine.devices == 4
    expected = oracle.measure(graph, assignment)
    assert result.ok and result.seconds == pytest.approx(expected.seconds) and result.oracle.startswith("remote")
    assert result.trace.same_as(expected.trace)


def test_round_trip_with_the_local_executor(graph):
    executor = LocalExecutor(2, device="cpu", target_seconds=0.02, warmup=0, kernels=CalibratedKernels(memory_budget=4 << 20))
    with running(serve_engine({graph.name: graph}, executor, port=0)) as (host, port):
        result = RemoteEngine(host, port, devices=2).measure(graph, np.arange(graph.num_nodes) % 2, repeats=2)
    assert result.ok and len(result.samples) == 2 and result.seconds > 0
    assert result.details["kernel"] == "calibrated matmul"


def test_refused_connection_is_a_failed_measurement_after_retries(graph):
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]  # free now, closed below: nothing listens there
    engine = RemoteEngine("127.0.0.1", port, devices=4, retries=2, backoff=0.01)
    began = time.perf_counter()
    result = engine.measure(graph, [0] * graph.num_nodes)
    assert time.perf_counter() - began < 5
    assert not result.ok and math.isnan(result.seconds)
    assert "unreachable after 3 attempts" in result.error and f"127.0.0.1:{port}" in result.error
    with pytest.raises(EngineError, match="unreachable"):
        RemoteEngine("127.0.0.1", port, retries=0).hello()


@pytest.mark.parametrize(
    "reply, words",
    [
        (b"garbage\n", "not JSON"),
        (b'{"seconds": 1.0}\n', "without an 'ok' field"),
        (b'{"id": -5, "ok": true, "seconds": 1.0}\n', "answered request -5"),
        (b"", "unreachable"),  # closes without a reply, every attempt
    ],
    ids=["garbage", "no ok", "wrong id", "hangs up"],
)
def test_malformed_replies_are_failed_measurements_that_say_why(graph, reply, words):
    with raw_server(reply) as (host, port):
        result = RemoteEngine(host, port, devices=4, retries=1, backoff=0.01).measure(graph, [0] * graph.num_nodes, timeout=5)
    assert not result.ok and words in result.error, result.error


def test_an_engine_that_never_replies_times_out(graph):
    with raw_server(None) as (host, port):
        began = time.perf_counter()
        result = RemoteEngine(host, port, devices=4, reply_margin=0.2).measure(graph, [0] * graph.num_nodes, timeout=0.3)
        assert time.perf_counter() - began < 3
    assert not result.ok and "no reply within" in result.error


def _ask(address, *lines: bytes) -> list[dict]:
    with socket.create_connection(address, timeout=10) as sock:
        reader = sock.makefile("rb")
        replies = []
        for line in lines:
            sock.sendall(line)
            replies.append(json.loads(reader.readline()))
        return replies


def test_server_validates_every_request_and_keeps_serving(graph):
    n = graph.num_nodes

    def req(**fields):
        base = {"protocol": 1, "id": 7, "method": "measure", "graph": graph.name, "assignment": [0] * n}
        return (json.dumps({**base, **fields}) + "\n").encode()

    bad = [
        (b"not json\n", "not JSON"),
        (b"[1, 2]\n", "JSON object"),
        (req(protocol=2), "unsupported protocol"),
        (req(method="shutdown"), "unknown method"),
        (req(graph="nope"), "unknown graph"),
        (req(fingerprint="0" * 64), "fingerprint mismatch"),
        (req(assignment=[0] * (n - 1)), f"the graph has {n} ops"),
        (req(assignment=[True] * n), "integer device ids"),
        (req(assignment=[4] * n), "devices are 0..3"),
        (req(repeats=0), "'repeats' must be in"),
        (req(repeats="3"), "'repeats' must be int"),
        (req(timeout=-1), "'timeout' must be in"),
        (req(timeout=1e9), "'timeout' must be in"),
    ]
    with running(serve_engine([graph], SimulatorOracle(4, 1e-13), port=0, max_timeout=60)) as address:
        replies = _ask(address, *[line for line, _ in bad], req())
    for (line, words), reply in zip(bad, replies[:-1], strict=True):
        assert reply["ok"] is False and reply["kind"] == "request" and words in reply["error"], (line, reply)
    assert replies[-1]["ok"] is True and replies[-1]["id"] == 7  # the same connection still works


def test_request_errors_raise_and_measurement_errors_return(graph):
    class Broken:
        devices = 4

        def measure(self, graph, assignment, repeats=3, timeout=60.0):
            return Measurement.failed("op 3 (x) on device 0: RuntimeError: boom", samples=(0.5,))

    with running(serve_engine([graph], Broken(), port=0)) as (host, port):
        engine = RemoteEngine(host, port, devices=4)
        result = engine.measure(graph, [0] * graph.num_nodes)
        assert not result.ok and "boom" in result.error
        with pytest.raises(EngineError, match="unknown graph"):
            engine.measure(graph.with_metadata(name="other"), [0] * graph.num_nodes)


def _serve_engine_process() -> subprocess.Popen:
    """``workbench serve-engine`` on chain_mm, 2 simulated devices, an ephemeral port; its first line names the address."""
    command = [sys.executable, "-m", "workbench", "serve-engine", "chain_mm", "--devices", "2", "--port", "0"]
    return subprocess.Popen([*command, "--simulate", "--time-scale", "1e-13"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_serve_engine_command_binds_localhost_and_answers(tmp_path):
    proc = _serve_engine_process()
    try:
        line = proc.stdout.readline()
        address = line.split(" on ")[1].split(" ")[0]
        assert address.startswith("127.0.0.1:"), line
        engine = RemoteEngine.from_address(address)
        result = engine.measure(wb.bundled_graph("chain_mm"), [0] * 76)
        assert result.ok and result.seconds == pytest.approx(wb.simulate(wb.bundled_graph("chain_mm"), [0] * 76, 2).makespan * 1e-13)
    finally:
        proc.terminate()
        proc.wait(10)


def test_commands_report_bad_input_in_one_line(capsys):
    assert main(["serve-engine", "chain_mm", "--port", "70000"]) == 2
    assert "--port must be in" in capsys.readouterr().err
    assert main(["calibrate", "no_such_graph"]) == 2
    assert "no such file" in capsys.readouterr().err
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    assert main(["calibrate", "chain_mm", "--engine", f"127.0.0.1:{port}"]) == 2
    assert "unreachable" in capsys.readouterr().err
    with pytest.raises(ValueError, match="HOST:PORT"):
        RemoteEngine.from_address("localhost")


def test_calibrate_command_writes_report_plot_and_oracle(tmp_path, capsys):
    out = tmp_path / "cal"
    graph_file = tmp_path / "small.json"
    wb.bundled_graph("chain_mm").with_metadata(name="small").save(graph_file)
    code = main(
        [
            "calibrate",
            str(graph_file),
            "--devices",
            "2",
            "--placements",
            "4",
            "--repeats",
            "1",
            "--target-seconds",
            "0.02",
            "--device",
            "cpu",
            "--out",
            str(out),
            "--json",
        ]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["measured"] == 4 and -1 <= summary["spearman_after"] <= 1
    for name in ("calibration.json", "calibration.html", "calibration.figure.json", "oracle.json", "measurements.jsonl"):
        assert (out / name).is_file(), name


# ------------------------------------------------------ hostile clients
def _lines(sock: socket.socket, count: int) -> list[dict]:
    reader = sock.makefile("rb")
    return [json.loads(reader.readline()) for _ in range(count)]


def test_malformed_and_oversize_requests_get_an_error_reply(graph):
    n = graph.num_nodes
    good = json.dumps({"protocol": 1, "id": 9, "method": "measure", "graph": graph.name, "assignment": [0] * n}).encode() + b"\n"
    hostile = [
        (b"[" * 100_000 + b"\n", "nested too deeply"),
        (good.replace(b'"id": 9', b'"id": 9, "timeout": 1e400'), "out of range"),
        (good.replace(b'"id": 9', b'"id": 1e400'), "out of range"),
        (good.replace(b'"id": 9', b'"id": 9, "repeats": NaN'), "not a number JSON allows"),
        (good.replace(b'"id": 9', b'"id": [9]'), "field 'id' must be"),
        (good.replace(b'"id": 9', b'"id": 9, "repeats": 1' + b"0" * 5000), "not JSON"),
    ]
    with running(serve_engine([graph], SimulatorOracle(4, 1e-13), port=0, max_request=1 << 20)) as address:
        with socket.create_connection(address, timeout=10) as sock:
            for line, _ in hostile:
                sock.sendall(line)
            sock.sendall(good)
            replies = _lines(sock, len(hostile) + 1)
    for (line, words), reply in zip(hostile, replies[:-1], strict=True):
        assert reply["ok"] is False and reply["kind"] == "request" and words in reply["error"], (line[:60], reply)
    assert replies[-1]["ok"] is True and replies[-1]["id"] == 9  # the connection still works

    with running(serve_engine([graph], SimulatorOracle(4, 1e-13), port=0)) as address:
        with socket.create_connection(address, timeout=10) as sock:
            sock.sendall(b'{"protocol": 1, "id": 1, "method": "hello", "pad": "' + b"x" * 200_000 + b'"}\n')
            reader = sock.makefile("rb")
            reply = json.loads(reader.readline())
            assert reply["ok"] is False and "request longer than" in reply["error"]
            assert reader.readline() == b""  # then it closes: the rest of that line is not a request


def test_a_reply_beyond_the_limit_is_an_error_reply(graph):
    assignment = np.arange(graph.num_nodes) % 4
    with running(serve_engine([graph], SimulatorOracle(4, 1e-13), port=0, max_reply=4000)) as (host, port):
        engine = RemoteEngine(host, port, devices=4)
        assert engine.measure(graph, assignment).ok  # no trace: a short reply
        with pytest.raises(EngineError, match="exceeds the limit of 4,000 bytes; ask without the trace"):
            engine.measure(graph, assignment, trace=True)


def hello_connection(address, token: str | None = None) -> socket.socket:
    """A connection that has made one request (so it holds a slot) and stays open."""
    sock = socket.create_connection(address, timeout=10)
    sock.sendall(json.dumps({"protocol": 1, "id": 1, "method": "hello", **({"token": token} if token else {})}).encode() + b"\n")
    assert json.loads(sock.makefile("rb").readline())["ok"] is True
    return sock


def test_connections_beyond_the_cap_get_a_busy_reply(graph):
    server = serve_engine([graph], SimulatorOracle(4, 1e-13), port=0, max_connections=2)
    with running(server) as (host, port):
        held = [hello_connection((host, port)) for _ in range(2)]
        assert wait(lambda: server.connections == 2)
        result = RemoteEngine(host, port, devices=4, retries=0).measure(graph, [0] * graph.num_nodes)
        assert not result.ok and "2 connections are open" in result.error
        held.pop().close()
        assert wait(lambda: server.connections == 1)
        assert RemoteEngine(host, port, devices=4, retries=0).measure(graph, [0] * graph.num_nodes).ok
        for sock in held:
            sock.close()


class Gate:
    """An oracle whose first measurement waits for ``release``; records the order it measured in (assignment[0])."""

    devices = 4

    def __init__(self):
        self.release = threading.Event()
        self.order: list[int] = []

    def measure(self, graph, assignment, repeats=3, timeout=60.0):
        if not self.order:
            self.order.append(int(assignment[0]))
            self.release.wait(30)
        else:
            self.order.append(int(assignment[0]))
        return Measurement(1.0, (1.0,), (), None, "gate", {})


def test_requests_take_turns_in_arrival_order_and_wait_at_most_their_timeout(graph):
    gate = Gate()
    n = graph.num_nodes
    server = serve_engine([graph], gate, port=0)
    with running(server) as (host, port):
        results: dict[int, Measurement] = {}

        def ask(device: int, timeout: float) -> None:
            results[device] = RemoteEngine(host, port, devices=4, retries=0).measure(graph, [device] * n, timeout=timeout)

        threads = [threading.Thread(target=ask, args=(0, 30))]
        threads[0].start()
        assert wait(lambda: gate.order == [0])
        began = time.perf_counter()
        ask(1, 0.3)  # behind a measurement that does not end: refused after its own timeout, not after the holder
        assert time.perf_counter() - began < 3
        assert not results[1].ok and "busy with other requests for the whole timeout" in results[1].error
        for device in (3, 2):  # 3 gets in line before 2
            threads.append(threading.Thread(target=ask, args=(device, 30)))
            threads[-1].start()
            assert wait(lambda: server.turns.ahead == len(threads))
        gate.release.set()
        for thread in threads:
            thread.join(30)
    assert gate.order == [0, 3, 2] and all(results[d].ok for d in (0, 2, 3))


def wait(predicate, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not predicate():
        time.sleep(0.02)
    return predicate()


def _peak_rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_memory_stays_bounded_under_many_connections():
    """100 connections each sending 1 MiB without a newline grow the engine's peak RSS by less than 40 MB."""
    proc = _serve_engine_process()
    try:
        address = proc.stdout.readline().split(" on ")[1].split(" ")[0]
        engine = RemoteEngine.from_address(address, devices=2)
        graph = wb.bundled_graph("chain_mm")
        assert engine.measure(graph, [0] * graph.num_nodes).ok
        before = _peak_rss_mb(proc.pid)
        host, port = address.rsplit(":", 1)
        sockets = [socket.create_connection((host, int(port)), timeout=10) for _ in range(100)]
        chunk = b"x" * (64 << 10)
        for _ in range(16):  # 16 × 64 KiB = 1 MiB per connection, interleaved
            for sock in sockets:
                try:
                    sock.sendall(chunk)
                except OSError:  # refused (busy) or closed after the over-long line: as it should
                    pass
        replies = 0
        for sock in sockets:  # end each line, then wait for the answer: the server has read everything it will
            try:
                sock.shutdown(socket.SHUT_WR)
                replies += sock.makefile("rb").readline().startswith(b'{"id"')
            except OSError:
                pass
            sock.close()
        growth = _peak_rss_mb(proc.pid) - before
        assert engine.measure(graph, [1] * graph.num_nodes).ok  # still serving
        assert growth < 40, f"peak RSS grew by {growth:.1f} MB"
        assert replies >= 16  # at least the connections it served said why it stopped reading
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_token_is_required_off_loopback_and_checked(graph, monkeypatch, capsys):
    with pytest.raises(ValueError, match="needs a shared token"):
        serve_engine([graph], SimulatorOracle(4), host="0.0.0.0", port=0)
    assert main(["serve-engine", "chain_mm", "--host", "0.0.0.0", "--port", "0", "--simulate"]) == 2
    assert "needs a shared token" in capsys.readouterr().err
    with running(serve_engine([graph], SimulatorOracle(4, 1e-13), port=0, token="s3cret")) as (host, port):
        with pytest.raises(EngineError, match="requires its shared token"):
            RemoteEngine(host, port).hello()
        with pytest.raises(EngineError, match="wrong token"):
            RemoteEngine(host, port, token="guess").hello()
        monkeypatch.setenv("WORKBENCH_ENGINE_TOKEN", "s3cret")
        assert RemoteEngine.from_address(f"{host}:{port}").measure(graph, [0] * graph.num_nodes).ok
        assert "s3cret" not in repr(RemoteEngine(host, port, token="s3cret"))


def test_an_authenticated_client_is_served_while_16_slow_loris_connections_are_open(graph):
    """Sixteen connections that send a byte at a time hold no slot: slots go to requests that authenticate."""
    server = serve_engine([graph], SimulatorOracle(4, 1e-13), port=0, token="s3cret", max_connections=16, idle_timeout=30)
    with running(server) as address:
        slow = [socket.create_connection(address, timeout=10) for _ in range(16)]
        stop = threading.Event()

        def drip() -> None:
            for _ in range(100):  # bounded: at most 10 s of one byte per connection every 0.1 s
                for sock in slow:
                    sock.sendall(b" ")
                if stop.wait(0.1):
                    return

        dripping = threading.Thread(target=drip, daemon=True)
        dripping.start()
        try:
            assert wait(lambda: server._accepted == 16)
            engine = RemoteEngine(*address, devices=4, token="s3cret", retries=0)
            for device in range(3):
                assert engine.measure(graph, [device] * graph.num_nodes).ok
            assert engine.hello()["devices"] == 4
            assert wait(lambda: server.connections == 0)  # the authenticated client's connections came and went; the slow ones hold none
            with pytest.raises(EngineError, match="wrong token"):  # a request that does not authenticate gets its reply, no slot
                RemoteEngine(*address, token="guess", retries=0).hello()
        finally:
            stop.set()
            dripping.join(5)
            for sock in slow:
                sock.close()


def test_a_request_line_has_one_deadline_however_slowly_it_arrives(graph):
    with running(serve_engine([graph], SimulatorOracle(4, 1e-13), port=0, idle_timeout=1.0)) as address:
        with socket.create_connection(address, timeout=0.1) as sock:
            began, received = time.monotonic(), b""
            for _ in range(50):  # a byte every 0.1 s: each read is quick, the line never ends
                try:
                    sock.sendall(b"{")
                    received = sock.recv(65536)
                    break
                except TimeoutError:
                    continue
                except OSError:  # closed by the engine
                    break
            sock.settimeout(5)
            while chunk := sock.recv(65536):
                received += chunk
            assert time.monotonic() - began < 4
        assert json.loads(received) == {"id": None, "ok": False, "kind": "request", "error": "no complete request line within 1 s"}
        with socket.create_connection(address, timeout=10) as idle:  # an idle connection is closed at the same deadline
            began = time.monotonic()
            assert idle.recv(65536) == b"" and time.monotonic() - began < 4


def test_every_bad_request_gets_a_reply_even_an_integer_no_float_can_hold(graph):
    n = graph.num_nodes
    base = {"protocol": 1, "id": 3, "method": "measure", "graph": graph.name, "assignment": [0] * n}
    cases = [
        ({**base, "timeout": 10**400}, "field 'timeout' must be in (0, 600] seconds"),
        ({**base, "repeats": 10**400}, "field 'repeats' must be in"),
        ({**base, "assignment": [10**400] + [0] * (n - 1)}, "assignment entries must be integers"),
    ]
    with running(serve_engine([graph], SimulatorOracle(4, 1e-13), port=0)) as address:
        with socket.create_connection(address, timeout=10) as sock:
            for request, _ in cases:
                sock.sendall(json.dumps(request).encode() + b"\n")
            replies = _lines(sock, len(cases))
            sock.sendall(json.dumps(base).encode() + b"\n")
            assert _lines(sock, 1)[0]["ok"] is True  # the handler lived on
    for (_, words), reply in zip(cases, replies, strict=True):
        assert reply["ok"] is False and reply["kind"] == "request" and reply["id"] == 3 and words in reply["error"], reply
