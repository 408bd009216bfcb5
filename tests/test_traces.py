"""`workbench simulate|place --trace`: Chrome trace-event JSON checked against the format, with flows and a time scale per unit."""

from __future__ import annotations

import json
import math
from collections import defaultdict

import numpy as np
import pytest

import workbench as wb
from workbench.cli import main
from workbench.sim.trace_events import DEVICE_PID, TRANSFER_PID, to_trace_events, trace_time_scale

REQUIRED = ("name", "ph", "ts", "pid", "tid")
PHASES = {"X", "M", "C", "s", "f"}


def trace_event_problems(data: dict) -> list[str]:
    """What breaks the trace-event format (JSON Object form) or this export's promises; empty when valid.

    Required keys on every event, ``dur`` on ``X``; ``ts`` and ``dur`` finite, non-negative microseconds; ``X`` slices of
    one thread never overlap; every flow start (``s``) has exactly one finish (``f``) with its ``id``, later or at once,
    and each lies inside a slice of its thread.
    """
    problems = []
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        return ["not a JSON object with a traceEvents list"]
    if data.get("displayTimeUnit") not in (None, "ms", "ns"):
        problems.append(f"displayTimeUnit {data['displayTimeUnit']!r}")
    slices = defaultdict(list)
    flows: dict[str, dict] = {"s": {}, "f": {}}
    for i, event in enumerate(data["traceEvents"]):
        missing = [k for k in REQUIRED if k not in event] + (["dur"] if event.get("ph") == "X" and "dur" not in event else [])
        if missing:
            problems.append(f"event {i} lacks {missing}")
            continue
        if event["ph"] not in PHASES:
            problems.append(f"event {i} has phase {event['ph']!r}")
        if not all(isinstance(event[k], int) for k in ("pid", "tid")):
            problems.append(f"event {i}: pid and tid must be integers")
        for key in ("ts", "dur"):
            if key in event and not (isinstance(event[key], int | float) and math.isfinite(event[key]) and event[key] >= 0):
                problems.append(f"event {i}: {key} {event[key]!r} is not a time in µs")
        if event["ph"] == "X":
            slices[event["pid"], event["tid"]].append((event["ts"], event["ts"] + event["dur"]))
        if event["ph"] in flows:
            if event["id"] in flows[event["ph"]]:
                problems.append(f"flow id {event['id']} has two '{event['ph']}' events")
            flows[event["ph"]][event["id"]] = event
    for thread, spans in slices.items():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            if start < end - 1e-9 * max(1.0, abs(end)):
                problems.append(f"slices overlap on thread {thread}: one ends at {end}, the next starts at {start}")
    if set(flows["s"]) != set(flows["f"]):
        problems.append(f"unpaired flow ids: {sorted(set(flows['s']) ^ set(flows['f']))[:5]}")
    for flow_id in set(flows["s"]) & set(flows["f"]):
        start, finish = flows["s"][flow_id], flows["f"][flow_id]
        if finish["ts"] < start["ts"] or start["cat"] != finish["cat"] or start["name"] != finish["name"]:
            problems.append(f"flow {flow_id}: its finish does not follow its start")
        for event in (start, finish):
            if not any(a <= event["ts"] <= b for a, b in slices[event["pid"], event["tid"]]):
                problems.append(f"flow {flow_id}: its '{event['ph']}' event lies in no slice of its thread")
    return problems


def events_of(data: dict, ph: str, cat: str | None = None) -> list[dict]:
    return [e for e in data["traceEvents"] if e["ph"] == ph and (cat is None or e.get("cat") == cat)]


def test_simulate_trace_is_trace_event_json_with_a_flow_per_transfer(tmp_path, capsys):
    graph = wb.bundled_graph("ffnn")
    assignment = wb.place(graph, "heft", 4).assignment
    path = tmp_path / "t.json"
    assert main(["simulate", "ffnn", "--assignment", json.dumps(assignment.tolist()), "--trace", str(path)]) == 0
    data = json.loads(path.read_text())
    assert trace_event_problems(data) == []
    trace = wb.simulate(graph, assignment, 4).trace
    transfers = events_of(data, "X", "transfer")
    assert len(events_of(data, "X", "op")) == graph.num_nodes and len(transfers) == trace.transfer_src_op.size > 0
    assert len(events_of(data, "s")) == len(events_of(data, "f")) == len(transfers), "one flow per transfer"
    op_slices = {e["args"]["op"]: e for e in events_of(data, "X", "op")}
    for finish in events_of(data, "f"):  # each flow ends in the slice of the op that consumes the transfer
        start = next(s for s in events_of(data, "s") if s["id"] == finish["id"])
        transfer = next(t for t in transfers if t["tid"] == start["tid"] and t["ts"] <= start["ts"] <= t["ts"] + t["dur"])
        consumer = op_slices[transfer["args"]["dst_op"]]
        assert (finish["pid"], finish["tid"]) == (DEVICE_PID, consumer["tid"]) and start["pid"] == TRANSFER_PID
        assert consumer["ts"] <= finish["ts"] <= consumer["ts"] + consumer["dur"]
    assert data["otherData"]["microseconds_per_unit"] == 1e-10  # a paper graph: µs read as the paper's ÷1e10
    assert max(e["ts"] + e["dur"] for e in events_of(data, "X")) == pytest.approx(trace.makespan / 1e10)
    capsys.readouterr()


def test_place_trace_and_the_workbench_format(tmp_path, capsys):
    events, own = tmp_path / "events.json", tmp_path / "own.json"
    assert main(["place", "chain_mm", "--method", "critical_path", "--trace", str(events), "--json"]) == 0
    placed = json.loads(capsys.readouterr().out)
    assert trace_event_problems(json.loads(events.read_text())) == []
    assignment = json.dumps(placed["assignment"])
    assert main(["simulate", "chain_mm", "--assignment", assignment, "--trace", str(own), "--trace-format", "workbench"]) == 0
    assert wb.Trace.from_json(own).makespan == placed["makespan"]


@pytest.mark.parametrize(
    "unit, scale",
    [("s", 1e6), ("ms", 1e3), ("us", 1.0), ("ns", 1e-3), ("arbitrary", 1.0), (None, 1.0), ("paper (÷1e10 when reported)", 1e-10)],
)
def test_the_time_scale_follows_the_graphs_unit(unit, scale):
    metadata = {"time_unit": unit} if unit else {}
    graph = wb.DataflowGraph.from_edges([1.3e-3, 2.0e-3], [(0, 1, 0.5e-3)], metadata=metadata)
    assert trace_time_scale(graph) == scale
    data = to_trace_events(wb.simulate(graph, [0, 1], 2).trace, microseconds_per_unit=trace_time_scale(graph))
    assert trace_event_problems(data) == []
    first = next(e for e in events_of(data, "X", "op") if e["args"]["op"] == 0)
    assert first["dur"] == pytest.approx(1.3e-3 * scale)  # 1.3 ms of a graph in seconds is 1300 µs
    assert trace_time_scale(wb.bundled_graph("chain_mm")) == 1e-10


def test_a_graph_in_seconds_gets_real_microseconds(tmp_path, capsys):
    graph = wb.generate("chain_mm", shapes="2000x2000x2000", parts="2x2x2")
    assert graph.metadata["time_unit"] == "s"
    source, path = tmp_path / "g.json", tmp_path / "t.json"
    wb.save_graph(graph, source)
    assignment = (np.arange(graph.num_nodes) % 2).tolist()
    assert main(["simulate", str(source), "--devices", "2", "--assignment", json.dumps(assignment), "--trace", str(path)]) == 0
    data = json.loads(path.read_text())
    assert trace_event_problems(data) == []
    ops = {e["args"]["op"]: e for e in events_of(data, "X", "op")}
    assert all(ops[i]["dur"] == pytest.approx(graph.compute[i] * 1e6) for i in range(graph.num_nodes))
    capsys.readouterr()


def test_the_validator_catches_what_it_checks():
    slice_ = {"ph": "X", "name": "a", "ts": 0.0, "dur": 2.0, "pid": 0, "tid": 0}
    assert trace_event_problems({"traceEvents": [slice_, {**slice_, "ts": 1.0}]})[0].startswith("slices overlap")
    assert "lacks ['dur']" in trace_event_problems({"traceEvents": [{k: v for k, v in slice_.items() if k != "dur"}]})[0]
    flow = {"ph": "s", "name": "transfer", "cat": "transfer", "id": 7, "ts": 1.0, "pid": 0, "tid": 0}
    assert "unpaired flow ids: [7]" in trace_event_problems({"traceEvents": [slice_, flow]})[0]
    assert trace_event_problems({"traceEvents": [slice_, {**slice_, "ts": -1.0, "dur": 1.0, "tid": 1}]})
