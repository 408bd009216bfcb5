"""Bounded dashboard work: caps, cancellation, the Host-header check, Launch refusals and job clean-up."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

import workbench as wb
from workbench.dashboard import create_app, work
from workbench.dashboard.context import DashboardContext
from workbench.dashboard.jobs import RANDOM_FEATURES_MAX, JobManager, LaunchError, validate_arguments
from workbench.dashboard.limits import LimitError, Limits
from workbench.dashboard.pages import compare, compare_choice, compare_stream, launch
from workbench.dashboard.picker import resolve_graph_key
from workbench.dashboard.sources import load_graph_key
from workbench.dashboard.work import RUNNER, Cancelled

CHAIN = "bundled:doppler-paper/chain_mm_112nodes.txt"
FFNN = "bundled:doppler-paper/ffnn_192nodes.txt"


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


# ---------------------------------------------------------------- the caps
def test_limits_come_from_the_environment_and_the_command_line():
    import argparse

    parser = argparse.ArgumentParser()
    Limits.add_arguments(parser)
    args = parser.parse_args(["--max-budget", "5000", "--allow-hosts", "lab.example.org"])
    limits = Limits.from_arguments(args, {"WORKBENCH_MAX_BUDGET": "7", "WORKBENCH_MAX_NODES": "300"})
    assert (limits.max_budget, limits.max_nodes) == (5000, 300)  # the command line wins over the environment
    assert "lab.example.org" in limits.trusted_hosts() and "localhost" in limits.trusted_hosts()
    with pytest.raises(LimitError, match="WORKBENCH_MAX_DEVICES"):
        Limits.from_env({"WORKBENCH_MAX_DEVICES": "many"})
    with pytest.raises(LimitError, match="--max-time-limit must be > 0"):
        Limits(max_time_limit=0)


def test_compare_requests_beyond_the_caps_are_refused_before_any_placement(context, monkeypatch):
    started = []
    monkeypatch.setattr(compare_stream, "run_placement", lambda *args: started.append(args))
    for budget, time_limit, words in [(10**12, 10, "--max-budget"), (100, 1e9, "--max-time-limit")]:
        children, state = compare.compare_view(context, CHAIN, 4, ["local_search"], 0, budget, time_limit)
        assert words in str(children) and state is None
    small = DashboardContext(context.runs_dir, context.datasets_dir, context.upload_dir, Limits(max_nodes=50))
    children, state = compare.compare_view(small, CHAIN, 4, ["critical_path"], 0, None, None)
    assert "--max-nodes" in str(children) and state is None
    assert started == []


def test_an_empty_time_limit_stays_empty_as_on_the_command_line():
    limits = Limits(max_time_limit=7.0)
    graph = type("G", (), {"num_nodes": 10, "num_edges": 10})()
    assert limits.bound_compare(graph, 4, None, None) == (None, None)
    assert limits.bound_compare(graph, 4, 50, 2.5) == (50, 2.5)


def test_generator_parameters_beyond_the_caps_are_refused(context):
    small = DashboardContext(context.runs_dir, context.datasets_dir, context.upload_dir, Limits(max_edges=500, max_work_memory_mb=200))
    key, error = resolve_graph_key(small, "generated", None, None, "erdos_renyi", json.dumps({"nodes": 200, "edge_prob": 0.5}))
    assert key is None and "edges" in error and "--max-edges" in error
    began = time.monotonic()
    key, error = resolve_graph_key(small, "generated", None, None, "erdos_renyi", json.dumps({"nodes": 20000, "edge_prob": 1.0}))
    assert key is None and "MAX_EDGES" in error, error  # the generator refuses it before building anything
    # 2,800 nodes at p=1 (3.9 million edges) is within the graph caps, so the server's memory cap stops it.
    key, error = resolve_graph_key(small, "generated", None, None, "erdos_renyi", json.dumps({"nodes": 2800, "edge_prob": 1.0}))
    assert key is None and "--max-work-memory-mb" in error, error
    assert time.monotonic() - began < 30
    assert resolve_graph_key(small, "generated", None, None, "layered", json.dumps({"layers": 3, "width": 2}))[1] is None


# ------------------------------------------------------------- cancelling
def spin(seconds: float) -> float:
    """Burn CPU for ``seconds`` (a child's stand-in for a long placement)."""
    end = time.monotonic() + seconds
    count = 0
    while time.monotonic() < end:
        count += 1
    return count


def test_a_stopped_request_kills_its_child_within_a_second():
    stop = threading.Event()
    pids: list[int] = []
    outcome: list[BaseException] = []

    def request():
        try:
            RUNNER.run(spin, 120.0, max_concurrent=4, seconds=300, should_stop=lambda: "the client went away" if stop.is_set() else None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=request)
    thread.start()
    assert wait_for(lambda: pids.extend(RUNNER.children()) or pids, 30), "no child started"
    pid = pids[0]
    assert wait_for(lambda: cpu_seconds(pid) > 0.2, 20)  # it is working
    stop.set()
    began = time.monotonic()
    assert wait_for(lambda: not alive(pid), 5)
    assert time.monotonic() - began < 2
    thread.join(5)
    assert isinstance(outcome[0], Cancelled) and "went away" in str(outcome[0])


def test_child_errors_and_deadlines_come_back_to_the_request():
    with pytest.raises(ValueError, match="invalid literal"):
        RUNNER.run(int, "x", max_concurrent=4, seconds=60)
    assert RUNNER.run(int, "12", max_concurrent=4, seconds=60) == 12
    with pytest.raises(RuntimeError, match="no such file"):  # GraphFormatError cannot be unpickled: its message comes back
        RUNNER.run(wb.load_graph, "/nonexistent/graph.txt", max_concurrent=4, seconds=60)
    with pytest.raises(Cancelled, match="deadline"):
        RUNNER.run(spin, 60.0, max_concurrent=4, seconds=0.5)


@contextmanager
def serving(app):
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app.server, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        thread.join(5)


def compare_body(graph_key: str, methods: list[str], seed: int, budget: int, time_limit: float, held: dict | None = None) -> dict:
    """The Compare callback's request as the browser sends it: a click on Compare with these values in the form (``held``:
    the page's last comparison)."""
    return {
        "output": "..compare-methods.options...compare-methods.value...compare-notes.children...compare-job.data...compare-pending.data..",
        "outputs": [
            {"id": "compare-methods", "property": "options"},
            {"id": "compare-methods", "property": "value"},
            {"id": "compare-notes", "property": "children"},
            {"id": "compare-job", "property": "data"},
            {"id": "compare-pending", "property": "data"},
        ],
        "inputs": [
            {"id": "compare-run", "property": "n_clicks", "value": 1},
            {"id": "compare-graph-key", "property": "data", "value": graph_key},
            {"id": "compare-devices", "property": "value", "value": 4},
        ],
        "state": [
            *(
                {"id": f"compare-{name}", "property": "value", "value": value}
                for name, value in (("methods", methods), ("seed", seed), ("budget", budget), ("time-limit", time_limit))
            ),
            {"id": "compare-options", "property": "data", "value": {}},
            {"id": "compare-state", "property": "data", "value": None},
            {"id": "compare-pending", "property": "data", "value": []},
            {"id": "compare-job", "property": "data", "value": held},
        ],
        "changedPropIds": ["compare-run.n_clicks"],
    }


def stream_body(held: dict) -> dict:
    """The page's poll of its comparison ``held`` (its job store), as the browser sends it."""
    names = ["compare-results.children", "compare-state.data", "compare-drawn.data", "compare-progress.children"]
    names += ["compare-poll.disabled", "compare-cancel.style", "compare-poll.max_intervals"]
    return {
        "output": "".join(f"..{name}.." for name in names).replace("....", "..."),
        "outputs": [dict(zip(("id", "property"), name.split("."), strict=True)) for name in names],
        "inputs": [
            {"id": "compare-job", "property": "data", "value": held},
            {"id": "compare-poll", "property": "n_intervals", "value": 1},
            {"id": "compare-cancel", "property": "n_clicks", "value": None},
        ],
        "state": [{"id": "compare-drawn", "property": "data", "value": None}],
        "changedPropIds": ["compare-poll.n_intervals"],
    }


def start_comparison(client, body: dict) -> dict:
    """Post a Compare click; the page's job store from the reply."""
    reply = client.post("/_dash-update-component", json=body, headers={"Host": "localhost"})
    assert reply.status_code == 200, reply.get_data(as_text=True)
    held = reply.get_json()["response"]["compare-job"]["data"]
    assert isinstance(held, dict) and held["id"], reply.get_json()
    return held


def poll_comparison(client, held: dict) -> dict:
    """Poll the comparison ``held`` until it ends (as the page's timer does); the last reply's outputs."""
    while True:
        reply = client.post("/_dash-update-component", json=stream_body(held), headers={"Host": "localhost"})
        assert reply.status_code == 200, reply.get_data(as_text=True)
        response = reply.get_json()["response"]
        assert response["compare-poll"]["max_intervals"] == 2, "the timer ticks once more, after this answer"
        if response["compare-poll"]["disabled"]:
            return response
        time.sleep(0.2)


def find_component(tree, component_id: str) -> dict | None:
    """The component with this id in a Dash reply's JSON tree."""
    if isinstance(tree, dict):
        if tree.get("props", {}).get("id") == component_id:
            return tree
        tree = list(tree.values())
    if isinstance(tree, list):
        return next((found for item in tree if (found := find_component(item, component_id)) is not None), None)
    return None


def test_a_request_deadline_stops_a_running_child_and_starts_nothing_after_it(context):
    began = time.monotonic()
    with work.request_deadline(1.0) as deadline, work.request_deadline(600) as inner:
        assert inner == deadline  # the earlier one wins
        with pytest.raises(Cancelled, match="stopped: the request's deadline passed"):
            work.run_bounded(context, spin, 30.0)  # its own deadline is the server's 75 s
        stopped = time.monotonic() - began
        with pytest.raises(Cancelled, match="^not run: request deadline$"):
            work.run_bounded(context, spin, 30.0)
    assert stopped < 3.0 and RUNNER.children() == []
    assert work.run_bounded(context, spin, 0.01) > 0  # outside the block, no deadline but its own


@pytest.mark.slow
def test_a_compare_request_ends_by_its_one_deadline_and_names_what_it_cut(context):
    """Forged store values: every method on offer, the largest budget and time limit. The methods run one after another,
    each on the 2 s clock, within the request's 5 s: the comparison ends by then, no child outlives it, and every method
    is in the summary, placed or named as cut."""
    caps = Limits(max_time_limit=2.0, max_request_time=5.0)
    app = create_app(runs_dir=context.runs_dir, limits=caps)
    offered = [o["value"] for o in compare_choice.method_options(app.workbench_context, load_graph_key(app.workbench_context, CHAIN), 4)]
    chosen = ["local_search", "cpsat", "learned_search", *(m for m in offered if m not in ("local_search", "cpsat", "learned_search"))]
    assert len(chosen) > 10
    seen: list[float] = []
    done = threading.Event()

    def watch() -> None:  # when a child was last seen running
        while not done.is_set():
            if RUNNER.children():
                seen.append(time.monotonic())
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    client = app.server.test_client()
    began = time.monotonic()
    try:
        held = start_comparison(client, compare_body(CHAIN, chosen, 5, caps.max_budget, caps.max_time_limit))
        job = compare_stream.find_compare_job(held["id"])
        assert wait_for(lambda: job.touch() or job.state != "running", 60)
        took = time.monotonic() - began
        response = poll_comparison(client, held)
    finally:
        done.set()
        watcher.join(5)
    last_child = max(seen) - began
    rows = find_component(response["compare-results"]["children"], "compare-summary")["props"]["data"]
    cut = {row["method"]: row["stop"] for row in rows if row["_makespan"] is None}
    print(f"\n{len(chosen)} methods on 2 s clocks, 5 s for the request: ended in {took:.2f} s, last child at {last_child:.2f} s")
    print(f"cut: {cut}")
    # the placements end by their share of the deadline (a killed child's last poll may follow it)
    assert last_child < compare_stream.placing_time(caps.max_request_time) + 1.0 and took < caps.max_request_time + 2.0
    assert RUNNER.children() == []
    assert "local_search" in [row["method"] for row in rows if row["_makespan"] is not None]  # placed within the deadline
    assert len(rows) == len(chosen) and set(cut.values()) <= {"not run: request deadline", "stopped: request deadline"}
    assert list(cut.values()).count("not run: request deadline") >= len(chosen) - 3, cut
    assert "cut by the request's deadline, 5 s for the whole comparison (the server's --max-request-time)" in json.dumps(response)
    assert "cut by the request's deadline: " in json.dumps(response["compare-progress"]["children"])


def new_child(known: set[int], seconds: float = 30) -> int:
    found: list[int] = []
    assert wait_for(lambda: found.extend(set(RUNNER.children()) - known) or found, seconds), "no placement child started"
    return found[0]


@pytest.mark.slow
def test_compare_work_stops_when_the_page_stops_polling_or_compares_again(context, monkeypatch):
    monkeypatch.setattr(compare_stream, "ABANDONED", 1.0)
    client = create_app(runs_dir=context.runs_dir).server.test_client()
    first = start_comparison(client, compare_body(FFNN, ["local_search"], 1, 200_000, 60))  # a one-minute local search
    first_child = new_child(set())
    assert wait_for(lambda: cpu_seconds(first_child) > 0.2, 20)
    second = start_comparison(client, compare_body(FFNN, ["local_search"], 2, 200_000, 60, held=first))  # the page asks again
    second_child = new_child({first_child})
    assert wait_for(lambda: not alive(first_child), 5), "the replaced comparison kept running"
    assert wait_for(lambda: compare_stream.find_compare_job(first["id"]).state == "cancelled", 5)
    assert alive(second_child)
    began = time.monotonic()  # nobody polls the second: the tab was closed
    assert wait_for(lambda: not alive(second_child), 10), "the search kept running after its page stopped polling"
    assert time.monotonic() - began < 5
    assert wait_for(lambda: compare_stream.find_compare_job(second["id"]).state == "cancelled", 5)
    assert wait_for(lambda: not RUNNER.children(), 5)
    quick = start_comparison(client, compare_body(FFNN, ["critical_path"], 3, 200_000, 60))  # a page that polls gets its charts
    results = json.dumps(poll_comparison(client, quick)["compare-results"]["children"])
    assert "gantt/0" in results and "critical_path: makespan" in results


# ------------------------------------------------------------- the server
def test_host_header_must_name_this_server():
    app = create_app(bound_host="10.1.2.3")
    client = app.server.test_client()
    for host in ("localhost:8050", "127.0.0.1", "[::1]:8050", "10.1.2.3:8050"):
        assert client.get("/_dash-layout", headers={"Host": host}).status_code == 200, host
    refused = [
        *("evil.example.com", "evil.example.com:8050", "localhost.evil.example.com", "127.0.0.1.nip.io", "10.1.2.4"),
        *("127.0.0.1:8097@evil.example.com", "localhost:evil.example.com", "localhost:8050:80", "localhost, evil.example.com"),
        *("[::1]evil.example.com", "[evil.example.com]:8050", "localhost/x", "user@localhost", "localhost:", ""),
    ]
    for host in refused:
        response = client.get("/_dash-layout", headers={"Host": host})
        assert response.status_code == 400 and b"Host header" in response.data, host


def test_a_doubled_host_header_is_refused():
    """Two Host headers (the first naming this server) reach the real server, which joins them: refused."""
    app = create_app()
    with serving(app) as port:
        for hosts, status in [(["localhost"], b"200"), (["localhost", "evil.example.com"], b"400"), (["localhost", "localhost"], b"400")]:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                head = "".join(f"Host: {host}\r\n" for host in hosts)
                sock.sendall(f"GET /_dash-layout HTTP/1.1\r\n{head}Connection: close\r\n\r\n".encode())
                assert sock.makefile("rb").readline().split()[1] == status, hosts


def test_launch_refuses_files_oracles_hosts_and_sizes_beyond_the_caps(context):
    refused = [
        ("place", {"graph": "Makefile"}, "under datasets/ or runs/"),
        ("place", {"graph": "README.md"}, "under datasets/ or runs/"),
        ("place", {"graph": "chain_mm", "option": "checkpoint=README.md"}, "under datasets/ or runs/"),
        ("train", {"graphs": "ffnn", "out": "r", "init_checkpoint": "README.md"}, "under datasets/ or runs/"),
        ("train", {"graphs": "ffnn", "out": "r", "set": "init_checkpoint=README.md"}, "under datasets/ or runs/"),
        ("train", {"graphs": "ffnn", "out": "r", "set": "graphs=ffnn,Makefile"}, "under datasets/ or runs/"),
        ("train", {"graphs": "ffnn", "out": "r", "eval": "README.md"}, "under datasets/ or runs/"),
        ("train", {"graphs": "ffnn", "out": "r", "oracle": "os:system"}, "not allowed"),
        ("train", {"graphs": "ffnn", "out": "r", "set": "oracle=os:system"}, "not allowed"),
        ("sweep", {"config": "datasets/x.yaml", "address": "203.0.113.9:6379"}, "not allowed"),
        ("sweep", {"config": "datasets/x.yaml", "address": "ray://evil.example.com:10001"}, "not allowed"),
        ("calibrate", {"graph": "ffnn", "engine": "203.0.113.9:7070"}, "not allowed"),
        ("place", {"graph": "ffnn", "devices": "100000"}, "--max-devices"),
        ("train", {"graphs": "ffnn", "out": "r", "devices": "65"}, "--max-devices"),
        ("train", {"graphs": "ffnn", "out": "r", "set": "devices=1000"}, "--max-devices"),
        ("place", {"graph": "ffnn", "budget": str(10**12)}, "--max-budget"),
        ("place", {"graph": "ffnn", "time_limit": "1e400"}, "--max-time-limit"),
        ("train", {"graphs": "ffnn", "out": "r", "episodes": "100000,1"}, "--max-episodes"),
        ("train", {"graphs": "ffnn", "out": "r", "set": "episodes=1000000"}, "--max-episodes"),
        ("calibrate", {"graph": "ffnn", "placements": "100000"}, "--max-count"),
        ("calibrate", {"graph": "ffnn", "repeats": "5000"}, "--max-count"),
        ("sweep", {"config": "datasets/x.yaml", "workers": str((os.cpu_count() or 1) + 1)}, "its cores"),
        ("train", {"graphs": "ffnn", "out": "r", "set": "search_samples=1000000"}, "--max-count"),
        ("train", {"graphs": "ffnn", "out": "r", "set": "threads=5000"}, "--max-count"),
        ("train", {"graphs": "ffnn", "out": "r", "set": "policy.random_features=1e8"}, "random_features must be a whole number from 0"),
        ("train", {"graphs": "ffnn", "out": "r", "set": "policy.random_features=257"}, "from 0 to 256"),
        ("train", {"graphs": "ffnn", "out": "r", "set": "rollouts_per_update=100000"}, "--max-count"),
        ("train", {"graphs": "ffnn", "out": "r", "set": "selection_samples=100000"}, "--max-count"),
        ("train", {"graphs": "ffnn", "out": "r", "set": "no_such_field=1"}, "not a TrainConfig field"),
        ("train", {"graphs": " ".join(["ffnn"] * 5000), "out": "r"}, "--max-graphs"),
        ("train", {"graphs": "ffnn", "out": "r", "eval": " ".join(["chain_mm"] * 5000)}, "--max-graphs"),
        ("train", {"graphs": "ffnn", "out": "r", "set": "eval_graphs=" + ",".join(["ffnn"] * 300)}, "--max-graphs"),
        ("calibrate", {"graph": "ffnn", "target_seconds": "1e9"}, "--max-time-limit"),
        ("place", {"graph": "ffnn", "method": "doppler@runs:../../etc/passwd"}, "not a method of this workbench"),
        ("sweep", {"config": "datasets/x.yaml", "address": "127.0.0.1:6379@evil.example.com"}, "not an address"),
        ("calibrate", {"graph": "ffnn", "engine": "localhost:evil.example.com"}, "not an address"),
        ("place", {"graph": "ffnn", "trace": "../datasets/t.json"}, "a run name is"),
        ("place", {"graph": "ffnn", "start": "README.md"}, "under datasets/ or runs/"),
    ]
    for command, values, words in refused:
        with pytest.raises(LaunchError, match=words.replace("(", r"\(")):
            validate_arguments(context, command, values)
    argv = validate_arguments(
        context,
        "train",
        {"graphs": "ffnn chain", "out": "r", "oracle": "workbench.systems:LocalExecutor", "set": "init_checkpoint=runs/a/last.pt"},
    )
    assert argv[:2] == ["ffnn", "chain"] and f"init_checkpoint={(context.runs_dir / 'a' / 'last.pt').resolve()}" in argv
    assert validate_arguments(context, "calibrate", {"graph": "ffnn", "engine": "localhost:7070"})[-1] == "localhost:7070"
    trace = validate_arguments(context, "place", {"graph": "ffnn", "trace": "t.json"})
    assert trace[trace.index("--trace") + 1] == str((context.runs_dir / "t.json").resolve())  # a trace is written under runs/ too
    sweep = validate_arguments(context, "sweep", {"config": "runs/grid.yaml"})
    assert sweep[-2:] == ["--out", str((context.runs_dir / "grid.csv").resolve())]  # results stay under runs/
    (context.runs_dir / "elsewhere").symlink_to(context.runs_dir.parent)  # a link in runs/ out of it
    for command in ("train", "place"):
        with pytest.raises(LaunchError, match="is outside"):
            validate_arguments(context, command, {"graphs" if command == "train" else "graph": "ffnn", "out": "elsewhere"})
    from workbench.learn.policy import POLICY_FIELDS

    assert POLICY_FIELDS["random_features"].high == RANDOM_FEATURES_MAX  # the launch check is the policy's own range
    wider = DashboardContext(
        context.runs_dir, context.datasets_dir, context.upload_dir, Limits(allow_oracles=("mylab.oracles:cluster",), max_devices=8)
    )
    assert "mylab.oracles:cluster" in validate_arguments(wider, "train", {"graphs": "ffnn", "out": "r", "oracle": "mylab.oracles:cluster"})
    assert "at most 8 devices" in str(launch.layout(wider, None)) and "mylab.oracles:cluster" in str(launch.layout(wider, None))


def test_job_logs_are_private_and_jobs_end_with_the_dashboard(context):
    jobs = JobManager(context)
    job = jobs.start("train", {"graphs": "chain_mm", "out": "long", "episodes": "50000", "stages": "sim"})
    assert stat.S_IMODE(jobs.log_dir.stat().st_mode) == 0o700 and stat.S_IMODE(job.log_path.stat().st_mode) == 0o600
    log_dir, pid = jobs.log_dir, job.process.pid
    assert os.getpgid(pid) == pid  # its own process group
    jobs.shutdown(grace=2)
    assert job.returncode is not None and not alive(pid)
    assert not log_dir.exists()


@pytest.mark.slow
def test_stopping_the_dashboard_ends_its_jobs_and_removes_its_folders(tmp_path):
    """``python app.py`` stopped with SIGTERM: no orphan job, no workbench-uploads-* or workbench-jobs-* folder left."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "WORKBENCH_RUNS": str(tmp_path / "runs")}
    code = (  # app.py itself, with a long job launched as soon as the app exists
        "import runpy, sys\n"
        "import workbench.dashboard as dashboard\n"
        "real = dashboard.create_app\n"
        "def create_app(**kw):\n"
        "    app = real(**kw)\n"
        "    job = app.workbench_jobs.start('train', {'graphs': 'chain_mm', 'out': 'long', 'episodes': '50000', 'stages': 'sim'})\n"
        "    print('JOB', job.process.pid, flush=True)\n"
        "    return app\n"
        "dashboard.create_app = create_app\n"
        "sys.argv = ['app.py', '--port', '0']\n"
        "runpy.run_path('app.py', run_name='__main__')\n"
    )
    server = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[1],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = server.stdout.readline()
        assert line.startswith("JOB"), line + server.stderr.read()
        job = int(line.split()[1])
        assert alive(job)
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    finally:
        if server.poll() is None:
            server.kill()
    assert wait_for(lambda: not alive(job), 10), "the launched job outlived the dashboard"
    assert not list(tmp_path.glob("workbench-*")), list(tmp_path.glob("workbench-*"))


@pytest.mark.slow
def test_the_warm_up_child_places_with_every_compiled_method_it_names(monkeypatch):
    placed = []

    def recording(graph, method, devices, **options):
        placed.append(wb.place(graph, method, devices=devices, **options))

    monkeypatch.setattr(work, "place", recording)
    monkeypatch.setattr(work.os, "nice", lambda step: 0)  # this process's niceness and torch threads stay
    monkeypatch.setattr(work, "_one_thread", lambda: None)
    work._compile_kernels()
    assert [p.method for p in placed] == [method for method, _ in work.WARM_PLACEMENTS], "no warm-up placement failed quietly"
    assert all(p.graph == "chain_mm_112nodes" and p.makespan >= p.lower_bound for p in placed)
