"""The dashboard trusts nothing from the browser: stores revalidated, every piece of work bounded, refusals as messages."""

from __future__ import annotations

import base64
import contextlib
import gc
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

import workbench as wb
from workbench.dashboard import anytime, components, create_app, work
from workbench.dashboard.context import DashboardContext
from workbench.dashboard.limits import LimitError, Limits
from workbench.dashboard.pages import graph as graph_page, whatif
from workbench.dashboard.sources import save_upload
from workbench.dashboard.work import RUNNER, Cancelled, run_bounded

from .test_dashboard_limits import alive, cpu_seconds, new_child, serving, spin, wait_for

CHAIN = "bundled:doppler-paper/chain_mm_112nodes.txt"
CHAIN_FILE = Path(wb.__file__).resolve().parents[1] / "datasets" / "doppler-paper" / "chain_mm_112nodes.txt"


def limited(context: DashboardContext, **caps) -> DashboardContext:
    return DashboardContext(context.runs_dir, context.datasets_dir, context.upload_dir, Limits(**caps))


def good_state(**changes) -> dict:
    """Compare's state store as the server wrote it for critical_path and local_search on chain_mm, 4 devices."""
    state = {
        "graph_key": CHAIN,
        "devices": 4,
        "methods": ["critical_path", "local_search"],
        "labels": ["critical_path", "local_search"],
        "seed": 0,
        "budget": 50,
        "time_limit": None,
        "options": {},
        "x_max": 1.0,
    }
    return {**state, **changes}


FORGED = [
    ({"devices": 1000}, "--max-devices"),
    ({"devices": "4"}, "devices must be a whole number"),
    ({"time_limit": 1e9}, "--max-time-limit"),
    ({"time_limit": float("nan")}, "finite"),
    ({"budget": 10**12}, "the search budget"),
    ({"seed": -1}, "the seed"),
    ({"graph_key": "upload:../../etc/passwd"}, "not an uploaded file"),
    ({"graph_key": ["bundled:x"]}, "not a graph key"),
    ({"methods": ["critical_path", "doppler@runs:../../../etc/passwd"]}, "outside"),
    ({"methods": ["critical_path", "critical_path"]}, "distinct"),
    ({"methods": ["critical_path", "no_such_method"]}, "unknown method"),
    ({"labels": ["only one"]}, "one label per method"),
    ({"x_max": float("inf")}, "finite"),
    ({"options": {"local_search": {"budget": 10**12}}}, "--max-budget"),
    ({"options": {"local_search": {"start": [0, 1]}}}, "cannot be given as text"),
    ({"options": ["local_search"]}, "the method options must be"),
]


@pytest.mark.parametrize("change, words", FORGED, ids=[next(iter(c)) + "-" + str(i) for i, (c, _) in enumerate(FORGED)])
def test_a_forged_compare_state_is_refused_with_a_message_before_any_work(context, monkeypatch, change, words):
    started: list = []
    monkeypatch.setattr(whatif, "run_placement", lambda *args: started.append(args))
    monkeypatch.setattr(whatif, "polish_placement", lambda *args: started.append(args))
    with pytest.raises(ValueError, match=re.escape(words)):
        whatif.checked_state(context, good_state(**change))
    figure, summary = whatif.diff_view(context, good_state(**change), 0, 1)
    assert words in str(summary)
    for trigger in ("whatif-base", "whatif-move", "whatif-polish"):
        with pytest.raises(ValueError, match=re.escape(words)):
            whatif.edit_view(context, good_state(**change), 0, trigger, "0-3", 1, None)
    assert started == []


def test_the_state_the_server_wrote_is_accepted_and_indexes_and_assignments_are_checked(context):
    state = whatif.checked_state(context, good_state())
    assert state == good_state()
    with pytest.raises(LimitError, match="A must be"):
        whatif.checked_index(2, state, "A")
    graph = wb.load_graph(CHAIN_FILE)
    assert whatif.checked_assignment({"assignment": [1] * graph.num_nodes}, graph, 4).sum() == graph.num_nodes
    for forged in ([9] * graph.num_nodes, [0] * 3, [True] * graph.num_nodes, "0,1"):
        with pytest.raises(LimitError, match="each of the"):
            whatif.checked_assignment({"assignment": forged}, graph, 4)
    small = limited(context, max_time_limit=5.0, max_devices=8)
    with pytest.raises(LimitError, match="--max-devices"):
        whatif.checked_state(small, good_state(devices=16))  # within the default cap, beyond this server's


def test_a_huge_move_range_is_refused_before_any_op_list_is_built():
    graph = wb.load_graph(CHAIN_FILE)
    tracemalloc.start()
    try:
        for text, words in [
            ("0-30000000", "no op matches"),
            ("0-" + "9" * 5000, "no op matches"),
            ("9" * 5000, "no op matches"),
            (",".join(["op"] * 17), "at most 16 ops by name"),
            ("1," * 6000, "at most 10,000 characters"),
        ]:
            with pytest.raises(ValueError, match=words):
                whatif.parse_ops(graph, text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20, peak  # 30 million op ids would take over a gigabyte
    assert whatif.parse_ops(graph, "3, 7-9, 8") == [3, 7, 8, 9]


# ------------------------------------------------------------ bounded work
def test_polish_runs_in_a_killable_child_stopped_at_the_servers_deadline(context, monkeypatch):
    """A forged-free but long polish (the largest budget, no time limit): its child is killed when the deadline passes."""
    monkeypatch.setattr(work, "GRACE", 0.0)
    short = limited(context, max_time_limit=1.0)
    pids: list[int] = []
    watcher = threading.Thread(target=lambda: wait_for(lambda: pids.extend(RUNNER.children()) or pids, 30), daemon=True)
    watcher.start()
    with pytest.raises(Cancelled, match="deadline"):
        whatif.edit_view(short, good_state(budget=short.limits.max_budget), 0, "whatif-polish", None, None, None)
    watcher.join(30)
    assert pids and wait_for(lambda: not alive(pids[-1]), 5)


def allocate_in_a_subprocess(megabytes: int, pid_file: str) -> int:
    """Start a process in a session of its own (as Kaleido starts its browser) that allocates and sleeps; write its pid."""
    code = f"import time; x = bytearray({megabytes} << 20); x[::4096] = b'1' * len(x[::4096]); time.sleep(60)"
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, start_new_session=True)
    Path(pid_file).write_text(str(process.pid))
    process.wait()
    return 0


def test_every_child_is_held_to_the_memory_cap_its_process_tree_included(context, tmp_path):
    small = limited(context, max_work_memory_mb=400)
    with pytest.raises(LimitError, match="--max-work-memory-mb"):
        run_bounded(small, bytearray, 4000 << 20)  # a builtin: the child imports nothing under its cap
    assert len(run_bounded(small, bytearray, 50 << 20)) == 50 << 20
    pid_file = tmp_path / "pid"
    with pytest.raises(LimitError, match="--max-work-memory-mb"):
        run_bounded(small, allocate_in_a_subprocess, 900, str(pid_file), cap_data=False)
    grandchild = int(pid_file.read_text())
    assert wait_for(lambda: not alive(grandchild), 5), "the process the child started outlived it"


WORK = [
    ("placement", lambda ctx: work.run_placement(ctx, CHAIN, "local_search", 4, 0, 50, None)),
    ("polish", lambda ctx: work.polish_placement(ctx, CHAIN, 4, 0, 50, None, [0] * 76)),
    ("any-time series", lambda ctx: anytime.anytime_record(ctx, CHAIN, "local_search", 4, 0, 50, 5.0)),
    ("upload check", lambda ctx: work.check_upload(ctx, CHAIN_FILE, "chain.txt")),
    ("generation", lambda ctx: work.check_generated(ctx, json.dumps({"kind": "layered", "params": {"layers": 3, "width": 2}}))),
    ("graph drawing", lambda ctx: graph_page.graph_view(ctx, CHAIN, "compute", None, 4)),
    ("PNG export", lambda ctx: components.download_payload(ctx, "png-button", "x", {"data": []}, None)),
]


@pytest.mark.parametrize("name, start", WORK, ids=[name for name, _ in WORK])
def test_every_piece_of_work_takes_a_slot_the_memory_cap_and_a_deadline(context, monkeypatch, name, start):
    calls: list = []

    def record(function, *args, **caps):
        calls.append(caps)
        raise Cancelled("stopped: recorded")

    monkeypatch.setattr(RUNNER, "run", record)
    for cached in (work.run_placement, work.check_generated):
        cached.cache_clear()
    anytime._RECORDS.clear()  # the any-time records' own cache
    caps = limited(context, max_concurrent=3, max_work_memory_mb=123, max_time_limit=7.0)
    with contextlib.suppress(Cancelled):
        start(caps)
    assert len(calls) == 1, name
    assert calls[0]["max_concurrent"] == 3 and calls[0]["memory_mb"] == 123 and 0 < calls[0]["seconds"] <= 7.0 + work.GRACE


def test_an_upload_is_parsed_in_a_child_and_refused_beyond_the_graph_caps(context, monkeypatch):
    contents = "data:text/plain;base64," + base64.b64encode(CHAIN_FILE.read_bytes()).decode()
    small = limited(context, max_nodes=50)
    with pytest.raises(LimitError, match="--max-nodes"):
        save_upload(small, "chain.txt", contents)
    assert list(context.upload_dir.iterdir()) == []  # the refused file is not kept

    def not_here(*_args, **_kwargs):
        raise AssertionError("the upload was parsed in the server process")

    monkeypatch.setattr(work, "load_graph", not_here)  # the server's copy; the child has its own
    key = save_upload(context, "chain.txt", contents)
    assert key.startswith("upload:")


def test_the_graph_page_refuses_a_graph_beyond_the_caps_and_draws_in_a_child(context, monkeypatch):
    small = limited(context, max_nodes=50)
    figure, csv, stats, note = graph_page.graph_view(small, CHAIN, "compute", None, 4)
    assert csv is None and "--max-nodes" in str(note)
    figure, csv, stats, note = graph_page.graph_view(context, CHAIN, "device", "critical_path", 1000)
    assert csv is None and "devices must be a whole number from 1 to 64" in str(note)

    def not_here(*_args, **_kwargs):
        raise AssertionError("the graph was drawn in the server process")

    monkeypatch.setattr(graph_page, "graph_figure", not_here)
    figure, csv, stats, note = graph_page.graph_view(context, CHAIN, "compute", None, 4)
    assert note is None and csv.count("\n") == 77 and "critical path" in {t.name for t in figure.data}


def hold_every_slot(context: DashboardContext):
    """Fill every slot with a spinning child; returns (stop event, threads)."""
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=lambda: pytest.raises(
                Cancelled,
                RUNNER.run,
                spin,
                120.0,
                max_concurrent=context.limits.max_concurrent,
                seconds=300,
                should_stop=lambda: "done" if stop.is_set() else None,
            ),
            daemon=True,
        )
        for _ in range(context.limits.max_concurrent)
    ]
    for thread in threads:
        thread.start()
    assert wait_for(lambda: len(RUNNER.children()) == context.limits.max_concurrent, 30)
    return stop, threads


def test_a_png_export_takes_a_slot(context, monkeypatch):
    from workbench.dashboard.components import download_payload

    monkeypatch.setattr(work, "SLOT_WAIT", 0.3)
    one = limited(context, max_concurrent=1)
    stop, threads = hold_every_slot(one)
    try:
        data, text = download_payload(one, "png-button", "compare/x", {"data": [], "layout": {"height": 10**7}}, None)
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    assert data is None and "PNG export failed: the server is busy" in text


# ----------------------------------------------------------- over HTTP
def callback_body(output: str, outputs: list, inputs: list, state: list, changed: str) -> dict:
    """One callback request's JSON as the browser sends it (ids and properties as Dash names them)."""

    def spec(pairs, values=None):
        return [{"id": i, "property": p, **({"value": values[n]} if values is not None else {})} for n, (i, p) in enumerate(pairs)]

    return {
        "output": output,
        "outputs": spec(outputs) if len(outputs) > 1 else spec(outputs)[0],
        "inputs": spec([(i, p) for i, p, _ in inputs], [v for _, _, v in inputs]),
        "state": spec([(i, p) for i, p, _ in state], [v for _, _, v in state]),
        "changedPropIds": [changed],
    }


def dash_post(client, *request):
    return client.post("/_dash-update-component", json=callback_body(*request), headers={"Host": "localhost"})


def diff_request(client, state):
    figure = {"index": "diff", "page": "compare", "type": "figure"}
    output = '..{"index":"diff","page":"compare","type":"figure"}.figure...diff-summary.children..'
    inputs = [("diff-a", "value", 0), ("diff-b", "value", 1)]
    return dash_post(
        client, output, [(figure, "figure"), ("diff-summary", "children")], inputs, [("compare-state", "data", state)], "diff-a.value"
    )


def edit_request(state, ops="0-3", button="whatif-move") -> tuple:
    figure = {"index": "whatif", "page": "compare", "type": "figure"}
    output = '..whatif-assignment.data...{"index":"whatif","page":"compare","type":"figure"}.figure...whatif-summary.children..'
    outputs = [("whatif-assignment", "data"), (figure, "figure"), ("whatif-summary", "children")]
    inputs = [("whatif-base", "value", 0), ("whatif-move", "n_clicks", 1), ("whatif-polish", "n_clicks", 1)]
    states = [
        ("whatif-ops", "value", ops),
        ("whatif-device", "value", 1),
        ("whatif-assignment", "data", None),
        ("compare-state", "data", state),
    ]
    return output, outputs, inputs, states, f"{button}.n_clicks"


def move_request(client, state, ops="0-3"):
    return dash_post(client, *edit_request(state, ops))


@pytest.mark.slow
def test_polish_stops_when_the_browser_leaves(context):
    """The probe's case: Polish kept burning CPU after the client left. Now its child dies with the connection."""
    app = create_app(runs_dir=context.runs_dir)
    state = good_state(budget=app.workbench_context.limits.max_budget)  # the longest polish the server allows
    work.run_placement(app.workbench_context, CHAIN, "critical_path", 4, 0, state["budget"], None, ())  # the start, as Compare left it
    body = json.dumps(callback_body(*edit_request(state, button="whatif-polish"))).encode()
    with serving(app) as port:
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        head = f"POST /_dash-update-component HTTP/1.1\r\nHost: localhost:{port}\r\nContent-Type: application/json\r\n"
        sock.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        child = new_child(set())
        assert wait_for(lambda: cpu_seconds(child) > 0.2, 20)  # it is searching
        sock.close()
        assert wait_for(lambda: not alive(child), 5), "the polish kept running after the client left"


def test_forged_stores_over_http_are_answered_with_a_message_and_start_nothing(context, monkeypatch):
    started: list = []
    monkeypatch.setattr(whatif, "run_placement", lambda *args: started.append(args))
    client = create_app(runs_dir=context.runs_dir).server.test_client()
    for change, words in [({"devices": 1000}, "--max-devices"), ({"time_limit": 1e9}, "--max-time-limit")]:
        for reply in (diff_request(client, good_state(**change)), move_request(client, good_state(**change))):
            assert reply.status_code == 200 and words in reply.get_data(as_text=True)
    assert started == []


def test_a_light_request_is_answered_while_every_slot_is_held(context, monkeypatch):
    """A what-if move on a comparison already placed needs no slot: it is answered while every slot is busy."""
    app = create_app(runs_dir=context.runs_dir, limits=Limits(max_concurrent=1))
    client = app.server.test_client()
    state = good_state()
    ctx = app.workbench_context
    for method in state["methods"]:  # the comparison as Compare left it (its options form empty): its placements cached
        work.run_placement(ctx, CHAIN, method, 4, 0, 50, None, ())
    taken: list = []
    real_take = RUNNER._take_slot
    stop, threads = hold_every_slot(ctx)
    holders = RUNNER.children()
    monkeypatch.setattr(RUNNER, "_take_slot", lambda *args: taken.append(args) or real_take(*args))
    try:
        reply = move_request(client, state)
        held = RUNNER.children()
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    assert reply.status_code == 200 and "moved 4 op(s) to device 1" in reply.get_data(as_text=True)
    assert held == holders and taken == []  # answered while the slots were held, without waiting for one


def niceness(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[16])


def runqueue_wait() -> float:
    """Seconds this thread has waited, ready to run, for a core (Linux schedstat; 0 where the kernel does not count it)."""
    try:
        return int(Path("/proc/thread-self/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def timed_move(client, state) -> tuple[float, float]:
    """``(wall s, wall s less the time spent waiting for a core)`` of one what-if Move, which must succeed."""
    began, waited = time.perf_counter(), runqueue_wait()
    reply = move_request(client, state)
    wall, waited = time.perf_counter() - began, runqueue_wait() - waited
    assert reply.status_code == 200 and "moved 4 op(s) to device 1" in reply.get_data(as_text=True)
    return wall, wall - waited


@pytest.mark.slow
def test_a_light_request_stays_under_half_a_second_while_every_slot_spins(context):
    """The issue's acceptance: with a child spinning in every slot (the default 2, this machine's cores), each of 20
    what-if Moves is answered within 0.5 s, less the time it waited for a core: that waiting is what other sessions'
    load adds (on the shared development machine a Move with no slot busy took up to 0.4 s at load 7), and what the
    children could add is kept small by running them ``CHILD_NICENESS`` steps nicer than the server, asserted here. The
    wall times are printed: with the children at the server's priority a Move took a median 365 ms and up to 1.7 s."""
    app = create_app(runs_dir=context.runs_dir)
    client, ctx, state = app.server.test_client(), app.workbench_context, good_state()
    for method in state["methods"]:  # the comparison as Compare left it (its options form empty): its placements cached
        work.run_placement(ctx, CHAIN, method, 4, 0, 50, None, ())
    free = [timed_move(client, state) for _ in range(5)]  # the first also imports what a figure needs
    # a server's heap is small; this process holds every earlier test's objects, whose full garbage collection (up to
    # 0.8 s in a whole-suite run) would be timed as the Move's own: leave them out of the collector's scans
    gc.collect()
    gc.freeze()
    stop, threads = hold_every_slot(ctx)
    try:
        children = RUNNER.children()
        assert wait_for(lambda: all(cpu_seconds(pid) > 0.2 for pid in children), 30)  # they spin
        busy = [timed_move(client, state) for _ in range(20)]
        nice = [niceness(pid) for pid in children]
    finally:
        gc.unfreeze()
        stop.set()
        for thread in threads:
            thread.join(10)
    walls, own = sorted(wall for wall, _ in busy), sorted(mine for _, mine in busy)
    print(
        f"\nwhat-if Move, {len(children)} slots spinning, load {os.getloadavg()[0]:.1f}: wall median {walls[10] * 1e3:.0f} ms, "
        f"max {walls[-1] * 1e3:.0f} ms; less the wait for a core: median {own[10] * 1e3:.0f} ms, max {own[-1] * 1e3:.0f} ms; "
        f"no slot busy: wall max {max(wall for wall, _ in free[1:]) * 1e3:.0f} ms"
    )
    assert nice == [min(19, os.getpriority(os.PRIO_PROCESS, 0) + work.CHILD_NICENESS)] * ctx.limits.max_concurrent
    assert own[-1] < 0.5, own


def concrete(identifier):
    """``(id, is ALL)``: a callback's input id with every wildcard replaced by a value (a Gantt chart's index)."""
    if isinstance(identifier, str) and identifier.startswith("{"):
        parsed = json.loads(identifier)
        return {k: "gantt/0" if v in (["ALL"], ["MATCH"]) else v for k, v in parsed.items()}, "ALL" in identifier
    return identifier, False


def forged_specs(items: list, value) -> list:
    """A request's inputs or states, each holding ``value`` (a one-item list for an ALL wildcard)."""
    out = []
    for item in items:
        identifier, many = concrete(item["id"])
        one = {"id": identifier, "property": item["property"], "value": value}
        out.append([one] if many else one)
    return out


def test_no_callback_answers_forged_values_with_a_server_error(context):
    """Every callback of every page, each input and state set to one forged value after another: never an HTTP 500."""
    app = create_app(runs_dir=context.runs_dir, limits=Limits(max_time_limit=2.0))
    client = app.server.test_client()
    forged = [None, -1, 10**30, 1e308, "../../etc/passwd", "doppler@runs:../../x", ["x", 1], {"a": {"b": [None]}}, True]

    failures, answered_by_the_last_resort = [], 0
    for key, entry in list(app.callback_map.items()):
        if "callback" not in entry:  # a clientside callback runs in the browser; the server has nothing to answer
            continue
        parts = key.strip(".").split("...") if key.startswith("..") else [key]
        outputs = []
        for part in parts:
            identifier, _, prop = part.partition("@")[0].rpartition(".")  # "@hash": an output another callback also writes
            concrete_id, many = concrete(identifier)
            spec = {"id": concrete_id, "property": prop}
            outputs.append([spec] if many else spec)
        for value in forged:
            inputs = forged_specs(entry["inputs"], value)
            first = inputs[0][0] if isinstance(inputs[0], list) else inputs[0]
            changed = json.dumps(first["id"], sort_keys=True, separators=(",", ":")) if isinstance(first["id"], dict) else first["id"]
            body = {
                "output": key,
                "outputs": outputs if len(outputs) > 1 else outputs[0],
                "inputs": inputs,
                "state": forged_specs(entry["state"], value),
                "changedPropIds": [f"{changed}.{first['property']}"],
            }
            reply = client.post("/_dash-update-component", json=body, headers={"Host": "localhost"})
            if reply.status_code >= 500:
                failures.append((key[:80], value, reply.status_code))
            answered_by_the_last_resort += "request refused" in reply.get_data(as_text=True)
    assert failures == []
    assert answered_by_the_last_resort > 0  # what no page foresaw (a list where a run name belongs) is a message on the page
