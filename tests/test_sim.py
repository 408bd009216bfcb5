"""The simulator: exact against the paper's reference, engines agree, schedules obey the model."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import workbench as wb
from workbench.datasets import PAPER_DIR

from .conftest import assignments_for, random_dags, small_dag

REFERENCE = json.loads((PAPER_DIR / "reference_makespans.json").read_text())["graphs"]
CASES = [(g, case["name"]) for g, v in REFERENCE.items() for case in v["cases"]]


def _case(graph_name: str, case_name: str) -> dict:
    return next(c for c in REFERENCE[graph_name]["cases"] if c["name"] == case_name)


def test_all_168_reference_cases_are_present():
    assert len(CASES) == 168


@pytest.mark.parametrize("engine", ["fast", "simpy"])
@pytest.mark.parametrize("graph_name", sorted(REFERENCE))
def test_reproduces_the_paper_simulator_exactly(paper_graphs, graph_name, engine):
    graph = paper_graphs[graph_name]
    devices = REFERENCE[graph_name]["num_devices"]
    for case in REFERENCE[graph_name]["cases"]:
        result = wb.simulate(graph, case["assignment"], devices, engine=engine)
        assert result.makespan == case["makespan"], case["name"]


def test_batch_evaluation_matches_reference(paper_graphs):
    for graph_name, v in REFERENCE.items():
        batch = np.array([c["assignment"] for c in v["cases"]])
        expected = [c["makespan"] for c in v["cases"]]
        assert wb.simulate_many(paper_graphs[graph_name], batch, v["num_devices"]).tolist() == expected


@pytest.mark.parametrize("priority", ["fifo", "blevel", "given"])
def test_engines_agree_on_paper_graphs(paper_graphs, priority):
    for graph in paper_graphs.values():
        for assignment in assignments_for(graph, 4, 3, seed=1):
            order = np.random.default_rng(2).permutation(graph.num_nodes) if priority == "given" else priority
            fast = wb.simulate(graph, assignment, 4, engine="fast", priority=order)
            ref = wb.simulate(graph, assignment, 4, engine="simpy", priority=order)
            assert fast.makespan == ref.makespan
            assert fast.trace.same_as(ref.trace)


def _clusters(devices: int):
    speeds = st.lists(st.sampled_from([0.5, 1.0, 2.0, 3.0]), min_size=devices, max_size=devices)
    matrix = st.lists(st.lists(st.sampled_from([0.5, 1.0, 4.0]), min_size=devices, max_size=devices), min_size=devices, max_size=devices)
    latency = st.lists(st.lists(st.sampled_from([0.0, 1.0, 2.5]), min_size=devices, max_size=devices), min_size=devices, max_size=devices)
    return st.builds(wb.Cluster, speeds=speeds, bandwidth=matrix, latency=latency)


@st.composite
def simulation_cases(draw):
    graph = draw(random_dags())
    devices = draw(st.integers(1, 4))
    assignment = draw(st.lists(st.integers(0, devices - 1), min_size=graph.num_nodes, max_size=graph.num_nodes))
    priority = draw(st.sampled_from(["fifo", "blevel", "given"]))
    if priority == "given":
        priority = list(draw(st.permutations(range(graph.num_nodes))))
    cluster = draw(st.one_of(st.just(devices), _clusters(devices)))
    return graph, assignment, cluster, priority


@settings(max_examples=250, deadline=None)
@given(simulation_cases())
def test_engines_agree_and_schedules_are_valid(case):
    graph, assignment, devices, priority = case
    fast = wb.simulate(graph, assignment, devices, engine="fast", priority=priority)
    ref = wb.simulate(graph, assignment, devices, engine="simpy", priority=priority)
    assert fast.makespan == ref.makespan
    assert fast.trace.same_as(ref.trace)
    assert wb.validate(graph, assignment, fast.trace, devices, makespan=fast.makespan) == []
    assert fast.makespan >= wb.lower_bound(graph, devices) * (1 - 1e-12)


@settings(max_examples=150, deadline=None)
@given(simulation_cases().filter(lambda case: case[3] in ("fifo", "blevel")), st.floats(0.0, 1.5))
def test_a_simulation_stops_at_its_cutoff_only_when_the_makespan_reaches_it(case, share):
    """local_search's compiled loop stops a proposal's simulation once its devices' work proves the cutoff reached: it
    must never stop one below the cutoff, and must give the exact makespan of every other."""
    from workbench.sim.fast import simulate_one

    graph, assignment, devices, priority = case
    arrays = wb.Evaluator(graph, devices, priority).kernel_arrays
    makespan = wb.simulate(graph, assignment, devices, priority=priority).makespan
    cutoff = makespan * share
    times = [np.empty(graph.num_nodes) for _ in range(3)]
    got = simulate_one(*arrays, np.array(assignment, dtype=np.int64), *times, cutoff)
    if got == np.inf:
        assert makespan >= cutoff * (1 - 1e-12)
    else:
        assert got == makespan
    if makespan > 0 and share < 1 - 1e-9:
        assert got == np.inf  # the sinks' own end times reach it at the latest
    assert simulate_one(*arrays, np.array(assignment, dtype=np.int64), *times, np.inf) == makespan


@settings(max_examples=60, deadline=None)
@given(simulation_cases().filter(lambda case: case[3] in ("fifo", "blevel")), st.integers(1, 3))
def test_the_evaluators_op_times_are_the_traces_and_count_as_evaluations(case, rows):
    graph, assignment, devices, priority = case
    n_dev = devices if isinstance(devices, int) else devices.num_devices
    batch = np.array([assignment] + [list(np.roll(assignment, k) % n_dev) for k in range(1, rows)])
    evaluator = wb.Evaluator(graph, devices, priority)
    ready, end = evaluator.times(batch)
    assert evaluator.evaluations == rows
    for row, a in enumerate(batch):
        trace = wb.simulate(graph, a, devices, priority=priority).trace
        assert np.array_equal(ready[row], trace.ready) and np.array_equal(end[row], trace.end)
    with pytest.raises(wb.AssignmentError, match="entries but the graph has"):
        evaluator.times(batch[:, :-1] if graph.num_nodes else np.zeros((1, 1), int))


@settings(max_examples=120, deadline=None)
@given(random_dags(), st.integers(1, 3), st.data())
def test_link_contention_is_valid_and_never_faster(graph, devices, data):
    assignment = data.draw(st.lists(st.integers(0, devices - 1), min_size=graph.num_nodes, max_size=graph.num_nodes))
    contended = wb.Cluster(speeds=(1.0,) * devices, contention=True)
    result = wb.simulate(graph, assignment, contended, engine="simpy")
    assert wb.validate(graph, assignment, result.trace, contended) == []
    free = wb.simulate(graph, assignment, devices, engine="simpy")
    # one link per ordered device pair: transfers on a link never overlap
    frame = result.trace.to_frame("transfers")
    for _, link in frame.groupby(["src_device", "dst_device"]):
        link = link.sort_values(["start", "end"])  # zero-length transfers at one instant first
        assert np.all(link["start"].to_numpy()[1:] >= link["end"].to_numpy()[:-1])
    if graph.num_edges == 0:
        assert result.makespan == free.makespan


def test_fast_engine_refuses_contention():
    g = small_dag("fork")
    with pytest.raises(ValueError, match="contention"):
        wb.simulate(g, [0, 1, 1, 0], wb.Cluster(speeds=(1.0, 1.0), contention=True), engine="fast")


def test_known_schedule_of_a_diamond():
    g = small_dag("diamond")  # compute 1,4,4,1; edges cost 2
    r = wb.simulate(g, [0, 0, 1, 0], 2)
    t = r.trace
    assert t.start.tolist() == [0, 1, 3, 9] and t.end.tolist() == [1, 5, 7, 10]
    assert t.ready.tolist() == [0, 1, 3, 9]
    assert r.makespan == 10
    frame = t.to_frame("transfers")
    assert frame[["src_op", "dst_op", "start", "end"]].values.tolist() == [[0, 2, 1, 3], [2, 3, 7, 9]]


def test_fifo_ties_follow_request_order_and_priorities_reorder():
    # three independent ops on one device: FIFO serves them in id order
    g = wb.DataflowGraph.from_edges([3.0, 2.0, 1.0], [])
    assert wb.simulate(g, [0, 0, 0], 1).trace.start.tolist() == [0, 3, 5]
    # op 0 got the idle device at once; then op 2 outranks op 1
    assert wb.simulate(g, [0, 0, 0], 1, priority=[2, 1, 0]).trace.start.tolist() == [0, 4, 3]
    # ops 1 and 2 become ready at t=1 while op 3 holds the device: the queue order decides
    g = wb.DataflowGraph.from_edges([1.0, 5.0, 1.0, 10.0], [(0, 1), (0, 2)])
    assert wb.simulate(g, [0] * 4, 1, priority="fifo").trace.start.tolist() == [0, 11, 16, 1]
    assert wb.simulate(g, [0] * 4, 1, priority=[0, 3, 2, 1]).trace.start.tolist() == [0, 12, 11, 1]
    assert wb.simulate(g, [0] * 4, 1, priority="blevel").trace.start.tolist() == [0, 11, 16, 1]  # 1 has the longer path
    swapped = wb.DataflowGraph.from_edges([1.0, 1.0, 5.0, 10.0], [(0, 1), (0, 2)])
    assert wb.simulate(swapped, [0] * 4, 1, priority="fifo").trace.start.tolist() == [0, 11, 12, 1]
    assert wb.simulate(swapped, [0] * 4, 1, priority="blevel").trace.start.tolist() == [0, 16, 11, 1]


def test_validate_catches_broken_traces():
    g = small_dag("diamond")
    trace = wb.simulate(g, [0, 0, 1, 0], 2).trace

    def broken(**changes):
        data = trace.to_dict()
        for key, (index, value) in changes.items():
            data["ops"][key][index] = value
        return wb.Trace.from_dict(data)

    assert wb.validate(g, [0, 0, 1, 0], trace, 2) == []
    assert any("before its input" in p for p in wb.validate(g, [0, 0, 1, 0], broken(start=(3, 8.0), end=(3, 9.0)), 2))
    assert any("at once" in p for p in wb.validate(g, [0, 0, 1, 0], broken(start=(1, 0.5), end=(1, 4.5)), 2))
    assert any("idles" in p for p in wb.validate(g, [0, 0, 1, 0], broken(start=(1, 2.0), end=(1, 6.0)), 2))
    assert any("compute time" in p for p in wb.validate(g, [0, 0, 1, 0], broken(end=(0, 2.0)), 2))
    assert any("makespan" in p for p in wb.validate(g, [0, 0, 1, 0], trace, 2, makespan=11.0))


def test_no_random_assignment_beats_the_stg_optimum():
    import csv

    from workbench.datasets import DATASETS_DIR, stg_graphs

    with open(DATASETS_DIR / "stg" / "optimal_makespans.csv") as handle:
        optimum = {(r["graph"], int(r["processors"])): float(r["optimal_makespan"]) for r in csv.DictReader(handle)}
    for path in stg_graphs()[::6]:
        g = wb.load_graph(path)
        for p in (2, 4, 8, 16):
            makespans = wb.simulate_many(g, assignments_for(g, p, 200, seed=p), p)
            assert makespans.min() >= optimum[f"50/{path.name}", p]


@pytest.mark.parametrize(
    "assignment, message",
    [
        ([0, 1, 2], "3 entries but the graph has 4"),
        ([0, 1, 4, 0], "device 4"),
        ([0, -1, 0, 0], "device -1"),
        ([0, 1.5, 0, 0], "not an integer"),
        ([0, "a", 0, 0], "must be integers"),
        ([True, 0, 0, 0], "must be integers"),
    ],
)
def test_bad_assignments_are_refused(assignment, message):
    with pytest.raises(wb.AssignmentError, match=message):
        wb.simulate(small_dag("diamond"), assignment, 4)


def test_simulate_and_the_evaluator_take_the_same_assignments():
    g = small_dag("diamond")
    whole = np.array([0.0, 1.0, 1.0, 0.0])  # floats holding whole numbers, as a JSON file may
    expected = wb.simulate(g, whole.astype(np.int64), 2).makespan
    assert wb.simulate(g, whole, 2).makespan == expected
    assert wb.Evaluator(g, 2)(whole) == expected
    assert np.array_equal(wb.Evaluator(g, 2)(np.stack([whole, whole])), [expected, expected])
    for bad, message in (
        (np.array([0.0, 1.5, 0.0, 0.0]), "not an integer"),
        (np.array([0.0, np.nan, 0.0, 0.0]), "not an integer"),
        (np.array([True, False, True, False]), "must be integers"),
        (np.array(["0", "1", "0", "1"]), "must be integers"),
    ):
        with pytest.raises(wb.AssignmentError, match=message):
            wb.simulate(g, bad, 2)
        with pytest.raises(wb.AssignmentError, match=message):
            wb.Evaluator(g, 2)(bad)
    with pytest.raises(wb.AssignmentError, match="entry 1 of assignment 1 is"):
        wb.Evaluator(g, 2)(np.array([[0, 1, 1, 0], [0, 0.5, 0, 0]]))


def test_bad_priority_orders_are_refused():
    g = small_dag("diamond")
    with pytest.raises(wb.AssignmentError, match="not a permutation"):
        wb.simulate(g, [0] * 4, 2, priority=[0, 1, 1, 2])
    with pytest.raises(wb.AssignmentError, match="unknown priority"):
        wb.simulate(g, [0] * 4, 2, priority="lifo")
    with pytest.raises(ValueError, match="unknown engine"):
        wb.simulate(g, [0] * 4, 2, engine="turbo")


def test_trace_json_and_frame_round_trip(tmp_path, paper_graphs):
    g = paper_graphs["chain_mm_112nodes"]
    result = wb.simulate(g, assignments_for(g, 4, 1)[0], 4)
    path = tmp_path / "trace.json"
    result.trace.to_json(path)
    back = wb.Trace.from_json(path)
    assert back.same_as(result.trace)
    ops = back.to_frame()
    assert len(ops) == g.num_nodes and (ops["duration"] == g.compute).all()
    assert ops["end"].max() == result.makespan


def test_lower_bound_of_paper_graphs(paper_graphs):
    g = paper_graphs["chain_mm_112nodes"]
    assert wb.lower_bound(g, 4) == max(g.longest_path(), g.total_compute / 4)
    assert wb.lower_bound(g, 1) == g.total_compute
    fast_device = wb.Cluster(speeds=(2.0, 1.0))
    assert wb.lower_bound(g, fast_device) == max(g.longest_path() / 2, g.total_compute / 3)
