"""Every registered core placer on small DAGs, plus exact checks of the heuristics, local search and CP-SAT."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import workbench as wb
from workbench.placers import REGISTRY, get_placer, placers
from workbench.placers.list_scheduling import InsertionSchedule, rank_order, upward_rank
from workbench.placers.local_search import critical_chain

from .conftest import SMALL_DAGS, small_dag as dag

# Options that keep the search and exact methods fast (and CP-SAT deterministic: one worker).
FAST_OPTIONS = {"local_search": {"budget": 300}, "cpsat": {"time_limit": 5.0, "workers": 1}}
CORE_PLACERS = [name for name, entry in REGISTRY.items() if entry.module.startswith("workbench.placers.")]

# (dag, devices): every DAG on 2 devices, and more devices than ops.
CASES = [(name, 2) for name in SMALL_DAGS] + [("fork", 8), ("single_op", 3)]


def brute_force_optimum(graph: wb.DataflowGraph, devices: int) -> float:
    """The smallest simulated makespan over every assignment (tiny graphs only)."""
    every = np.array(list(itertools.product(range(devices), repeat=graph.num_nodes)))
    return float(np.min(wb.simulate_many(graph, every, devices)))


@pytest.mark.parametrize("method", CORE_PLACERS)
@pytest.mark.parametrize("case", CASES, ids=[f"{n}-{d}dev" for n, d in CASES])
def test_placer_is_valid_bounded_and_deterministic(method, case):
    name, devices = case
    graph = dag(name)
    options = FAST_OPTIONS.get(method, {})
    first = wb.place(graph, method=method, devices=devices, seed=3, **options)
    again = wb.place(graph, method=method, devices=devices, seed=3, **options)
    assert first.assignment.shape == (graph.num_nodes,)
    assert first.assignment.min() >= 0 and first.assignment.max() < devices
    assert first.makespan == wb.simulate(graph, first.assignment, devices).makespan
    assert first.makespan >= first.lower_bound * (1 - 1e-12)
    assert first.makespan <= graph.total_compute + graph.total_comm  # never worse than fully serial with every transfer
    np.testing.assert_array_equal(first.assignment, again.assignment)


@pytest.mark.parametrize("method", ["critical_path", "heft", "cpop", "peft", "etf"])
def test_list_schedulers_keep_a_chain_with_costly_transfers_on_one_device(method):
    graph = dag("chain")  # transfers (2) outweigh any parallelism (none)
    placement = wb.place(graph, method=method, devices=3)
    assert len(set(placement.assignment.tolist())) == 1
    assert placement.makespan == graph.total_compute


@pytest.mark.parametrize("method", ["critical_path", "heft", "cpop", "peft", "etf"])
def test_list_schedulers_spread_independent_ops(method):
    graph = dag("independent")  # 2, 7, 1, 8, 2 on 2 devices: 10 is optimal (8+2 | 7+2+1)
    placement = wb.place(graph, method=method, devices=2)
    assert placement.makespan <= 12  # a serial placement would take 20


@pytest.mark.parametrize("name", ["diamond", "fork", "join", "independent"])
def test_local_search_finds_the_brute_force_optimum(name):
    graph = dag(name)
    placement = wb.place(graph, method="local_search", devices=2, budget=400)
    assert placement.makespan == brute_force_optimum(graph, 2)
    assert placement.details["evaluations"] <= 400


def test_local_search_counts_every_evaluation_and_honours_the_time_limit():
    graph = wb.bundled_graph("ffnn")
    placement = wb.place(graph, method="local_search", devices=4, budget=1500)
    assert placement.details["evaluations"] == 1500
    assert placement.makespan <= wb.place(graph, method="heft", devices=4).makespan
    limited = wb.place(graph, method="local_search", devices=4, budget=10**9, time_limit=0.5)
    assert limited.details["evaluations"] < 10**9  # stopped by the clock, not the budget


def test_local_search_polishes_a_given_start_and_never_returns_worse():
    graph = wb.bundled_graph("ffnn")
    start = wb.place(graph, method="round_robin", devices=4)
    untouched = wb.place(graph, method="local_search", devices=4, budget=1, start=start.assignment)
    assert np.array_equal(untouched.assignment, start.assignment)
    assert untouched.details["start_method"] == "given" and untouched.details["evaluations"] == 1
    polished = wb.place(graph, method="local_search", devices=4, budget=300, start=start.assignment)
    assert polished.details["start_makespan"] == start.makespan
    assert polished.makespan < start.makespan  # round robin leaves plenty to gain on ffnn
    with pytest.raises(ValueError, match="each of the 180 ops a device in 0..3"):
        wb.place(graph, method="local_search", devices=4, budget=10, start=start.assignment[:-1])
    with pytest.raises(ValueError, match="each of the 180 ops a device in 0..3"):
        wb.place(graph, method="local_search", devices=4, budget=10, start=start.assignment + 4)


@pytest.mark.parametrize("name", ["diamond", "fork", "join", "chain"])
def test_cpsat_bound_never_exceeds_the_best_simulated_makespan(name):
    graph = dag(name)
    placement = wb.place(graph, method="cpsat", devices=2, time_limit=5.0, workers=1)
    optimum = brute_force_optimum(graph, 2)
    assert placement.details["status"] == "OPTIMAL"
    assert placement.details["proven_lower_bound"] <= optimum
    assert placement.lower_bound <= optimum
    assert placement.details["model_makespan"] == pytest.approx(placement.details["proven_lower_bound"])


def test_cpsat_bound_is_scaled_down_and_still_valid_on_paper_costs():
    graph = wb.bundled_graph("chain_mm")
    placement = wb.place(graph, method="cpsat", devices=4, time_limit=2.0)
    assert placement.details["time_scale"] > 1  # costs ~1e12 had to be scaled
    assert placement.lower_bound >= wb.lower_bound(graph, 4)
    assert placement.details["proven_lower_bound"] <= placement.makespan


def test_unknown_method_and_bad_options_name_what_exists():
    with pytest.raises(ValueError, match="registered: .*heft.*local_search.*cpsat"):
        wb.place(dag("chain"), method="hefty")
    with pytest.raises(ValueError, match="takes: budget, time_limit"):
        wb.place(dag("chain"), method="local_search", iterations=5)
    with pytest.raises(ValueError, match="does not take option"):
        wb.place(dag("chain"), method="heft", budget=5)
    with pytest.raises(ValueError, match="budget must be at least"):
        get_placer("local_search", budget=3)
    with pytest.raises(ValueError, match="time_limit must be > 0"):
        get_placer("cpsat", time_limit=0)


def test_every_method_is_listed_with_a_description():
    listed = placers()  # `workbench.placers` the attribute is shadowed by the subpackage once imported
    for name in ("single", "round_robin", "random", "critical_path", "heft", "cpop", "peft", "etf", "local_search", "cpsat"):
        assert listed[name]


def test_critical_chain_follows_inputs_and_device_waits():
    graph = dag("diamond")  # 0 -> {1, 2} -> 3, all on device 0: 1 and 2 share the device, so one waits
    assignment = np.zeros(4, dtype=np.int64)
    trace = wb.simulate(graph, assignment, 2).trace
    chain = critical_chain(graph, assignment, trace.ready, trace.start, trace.end)
    assert chain[0] == 3 and chain[-1] == 0
    assert set(chain.tolist()) == {0, 1, 2, 3}


@st.composite
def random_dags(draw, max_nodes: int = 12):
    n = draw(st.integers(1, max_nodes))
    compute = draw(st.lists(st.integers(0, 20).map(float), min_size=n, max_size=n))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=min(len(pairs), 3 * n))) if pairs else []
    comm = draw(st.lists(st.integers(0, 20).map(float), min_size=len(chosen), max_size=len(chosen)))
    perm = draw(st.permutations(range(n)))
    return wb.DataflowGraph.from_edges(compute, [(perm[i], perm[j], c) for (i, j), c in zip(chosen, comm, strict=True)])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_dags(), devices=st.integers(1, 4))
def test_heuristics_never_beat_the_lower_bound_on_random_dags(graph, devices):
    bound = wb.lower_bound(graph, devices)
    for method in ("critical_path", "heft", "cpop", "peft", "etf"):
        placement = wb.place(graph, method=method, devices=devices)
        assert placement.makespan >= bound * (1 - 1e-12)


@settings(max_examples=40, deadline=None)
@given(graph=random_dags(), devices=st.integers(1, 4))
def test_insertion_schedule_is_a_valid_schedule(graph, devices):
    schedule = InsertionSchedule(graph, devices)
    for op in rank_order(graph, upward_rank(graph, graph.compute, graph.comm)):
        schedule.place(int(op), int(np.argmin(schedule.earliest_finishes(int(op)))))
    for e in range(graph.num_edges):
        u, v = graph.src[e], graph.dst[e]
        delay = graph.comm[e] if schedule.device[u] != schedule.device[v] else 0.0
        assert schedule.start[v] >= schedule.end[u] + delay - 1e-9
    for d in range(devices):
        ops = np.flatnonzero((schedule.device == d) & (graph.compute > 0))
        ops = ops[np.argsort(schedule.start[ops])]
        assert np.all(schedule.start[ops[1:]] >= schedule.end[ops[:-1]] - 1e-9)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_dags(max_nodes=6), unit=st.sampled_from([1.0, 1e11]))
def test_cpsat_bound_is_valid_with_transfers_and_scaled_costs(graph, unit):
    """The proven bound never exceeds the best simulated makespan, also when costs need scaling."""
    scaled = wb.DataflowGraph(graph.compute * unit, graph.src, graph.dst, graph.comm * unit)
    placement = wb.place(scaled, method="cpsat", devices=2, time_limit=5.0, workers=1)
    assert placement.details["proven_lower_bound"] <= brute_force_optimum(scaled, 2)
    assert placement.makespan >= placement.lower_bound * (1 - 1e-12)
