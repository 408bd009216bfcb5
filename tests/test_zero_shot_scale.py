"""Lean zero-shot inference (issue 32, part 4): a rule SEL keeps its ops in a queue, and places exactly as the scan did.

The oracle is the per-step scan of the ready ops (``rule_queue`` returning None, as it does on a graph whose
static levels nearly tie), which computes the rule's scores over every ready op at every step.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

import workbench as wb
from workbench.learn import doppler, load_policy, make_policy
from workbench.learn.compiled_play import compiled_episode
from workbench.learn.doppler import rule_queue
from workbench.learn.env import PlacementState
from workbench.learn.policy import PolicyConfig
from workbench.runs import zero_shot_checkpoint

from .conftest import random_dags


@pytest.fixture(scope="module")
def policies():
    gate = load_policy(zero_shot_checkpoint())
    torch.manual_seed(0)
    paper = make_policy("doppler_plc_only", PolicyConfig.paper())  # critical_path_index_bug: the smallest ready id
    return {"gate": gate, "bottom_level": gate.rule_policy(0), "earliest_start": gate.rule_policy(1), "paper": paper}


# The random cases both queue tests draw: small DAGs with integer and float costs, 60 examples each.
RANDOM_EPISODES = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
SMALL_DAGS = st.one_of(random_dags(max_nodes=24), random_dags(max_nodes=24, integer_costs=False))


def _placements(policy, graph, devices, mode, seed, scan: bool, monkeypatch) -> tuple[np.ndarray, np.ndarray, str | None]:
    with monkeypatch.context() as patch:
        if scan:
            patch.setattr(doppler, "rule_queue", lambda *args: None)
        with torch.no_grad():
            rollout = policy.rollout(graph, devices, mode=mode, generator=torch.Generator().manual_seed(seed))
    return rollout.assignment, rollout.order, rollout.rule


def _assert_same_as_scan(policy, graph, devices, mode, seed, monkeypatch) -> None:
    queued = _placements(policy, graph, devices, mode, seed, False, monkeypatch)
    scanned = _placements(policy, graph, devices, mode, seed, True, monkeypatch)
    assert np.array_equal(queued[1], scanned[1]), "the rule took its ops in another order than the scan"
    assert np.array_equal(queued[0], scanned[0]) and queued[2] == scanned[2]


@RANDOM_EPISODES
@given(
    graph=SMALL_DAGS,
    devices=st.integers(1, 5),
    name=st.sampled_from(["bottom_level", "earliest_start", "paper"]),
    mode=st.sampled_from(["greedy", "sample"]),
    seed=st.integers(0, 100),
)
def test_rule_queue_places_as_the_scan_on_random_dags(policies, graph, devices, name, mode, seed, monkeypatch):
    _assert_same_as_scan(policies[name], graph, devices, mode, seed, monkeypatch)


@pytest.mark.parametrize("graph_name", wb.PAPER_GRAPHS)
@pytest.mark.parametrize("devices", [4, 8])
def test_rule_queue_places_as_the_scan_on_the_paper_graphs(policies, graph_name, devices, monkeypatch):
    graph = wb.bundled_graph(graph_name)
    for name in ("gate", "bottom_level", "earliest_start"):
        _assert_same_as_scan(policies[name], graph, devices, "greedy", 0, monkeypatch)


def test_rule_queue_places_as_the_scan_on_a_medium_generated_graph(policies, monkeypatch):
    graph = wb.generate("layered", layers=30, width=30, width_jitter=0.0, edge_prob=1 / 30, seed=1)
    for name in ("bottom_level", "earliest_start"):
        _assert_same_as_scan(policies[name], graph, 8, "greedy", 0, monkeypatch)


def _compiled_against_python(policy, graph, devices, mode, seed, monkeypatch) -> None:
    """The compiled step loop (taken: counted) and the Python loop place alike."""
    calls, queues = [], []
    with monkeypatch.context() as patch:
        patch.setattr(doppler, "compiled_episode", lambda *args: calls.append(1) or compiled_episode(*args))
        patch.setattr(doppler, "rule_queue", lambda *args: queues.append(rule_queue(*args)) or queues[-1])
        compiled = _placements(policy, graph, devices, mode, seed, False, monkeypatch)
    # taken wherever SEL's rule has a queue (a graph whose rule scores would be subnormal scans instead: rule_queue's None)
    assert bool(calls) == any(queue is not None for queue in queues), "the compiled loop was not taken where a rule queue was"
    with monkeypatch.context() as patch:
        patch.setattr(doppler, "compiled_head", lambda head: None)  # the Python loop with the same queue
        python = _placements(policy, graph, devices, mode, seed, False, monkeypatch)
    assert np.array_equal(compiled[1], python[1]) and np.array_equal(compiled[0], python[0]) and compiled[2] == python[2]


@RANDOM_EPISODES
@given(
    graph=SMALL_DAGS,
    devices=st.integers(1, 5),
    name=st.sampled_from(["gate", "bottom_level", "earliest_start"]),
    mode=st.sampled_from(["greedy", "sample"]),
    seed=st.integers(0, 100),
)
def test_the_compiled_step_loop_places_as_the_python_loop_on_random_dags(policies, graph, devices, name, mode, seed, monkeypatch):
    _compiled_against_python(policies[name], graph, devices, mode, seed, monkeypatch)


@pytest.mark.parametrize("mode", ["greedy", "sample"])
def test_the_compiled_step_loop_places_as_the_python_loop_on_a_medium_generated_graph(policies, mode, monkeypatch):
    graph = wb.generate("layered", layers=30, width=30, width_jitter=0.0, edge_prob=1 / 30, seed=1)
    for name in ("bottom_level", "earliest_start"):  # the affinity and the earliest-start device rules
        _compiled_against_python(policies[name], graph, 8, mode, 3, monkeypatch)


def test_a_scored_or_paper_rollout_keeps_the_python_loop(policies, monkeypatch):
    monkeypatch.setattr(doppler, "compiled_episode", lambda *args: pytest.fail("compiled loop taken"))
    graph = wb.bundled_graph("ffnn")
    policies["bottom_level"].rollout(graph, 4, mode="greedy")  # with gradients: scored
    with torch.no_grad():
        policies["paper"].rollout(graph, 4, mode="greedy")
        policies["bottom_level"].rollout(graph, 4, mode="teacher")


def test_near_tied_static_levels_fall_back_to_the_scan():
    # 0.1 + 0.2 and 0.3 differ by one ulp: divided by the largest ready level they may round to one ETF score
    graph = wb.DataflowGraph.from_edges([0.1, 0.2, 0.3, 1.0], [(0, 1, 0.0)])
    state = PlacementState(graph, 2)
    assert doppler.rule_queue(state, "earliest_start", False) is None
    assert doppler.rule_queue(state, "bottom_level", False) is not None  # compares levels exactly, as the scan does
    # the smallest positive float: half of it over the largest level rounds to 0, the score of a zero-cost op
    tiny = wb.DataflowGraph.from_edges([0.0, 5e-324], [])
    assert doppler.rule_queue(PlacementState(tiny, 1), "earliest_start", False) is None
    exact = wb.DataflowGraph.from_edges([1.0, 2.0, 3.0], [(0, 1, 0.0)])
    assert doppler.rule_queue(PlacementState(exact, 2), "earliest_start", False) is not None


def test_an_unscored_rollout_keeps_no_per_step_rows_and_places_as_a_scored_one(policies):
    graph = wb.bundled_graph("ffnn")
    policy = policies["bottom_level"]
    with torch.no_grad():
        lean = policy.rollout(graph, 4, mode="greedy")
    scored = policy.rollout(graph, 4, mode="greedy")
    assert np.isnan(float(lean.log_prob)) and torch.isfinite(scored.log_prob)
    assert np.array_equal(lean.assignment, scored.assignment) and np.array_equal(lean.order, scored.order)


@pytest.mark.parametrize("block", [250, 8192])
def test_the_compiled_encoder_without_gradients_gives_the_same_embeddings_bit_for_bit(policies, monkeypatch, block):
    from workbench.learn import nets

    graph = wb.generate("layered", layers=30, width=30, width_jitter=0.0, edge_prob=1 / 30, seed=1)
    encoder = policies["gate"].plc_encoder
    inputs = policies["gate"].inputs(graph, torch.Generator().manual_seed(0))
    whole = encoder(inputs).detach()  # with gradients: torch's sparse product, no blocks
    monkeypatch.setattr(nets, "ENCODER_BLOCK", block)
    assert nets.node_blocks(900, 250) == [0, 225, 450, 675, 900]  # 900 ops: four even blocks
    with torch.no_grad():
        compiled = encoder(inputs)
    assert torch.equal(compiled, whole)


def _loop_levels(graph, compute, comm, downward: bool) -> np.ndarray:
    """The numpy loops the compiled levels replaced: bottom levels (``downward``) or top levels."""
    if downward:
        level = compute.astype(float).copy()
        ptr, succ, edge = graph.succ_csr
        for u in graph.topological_order[::-1]:
            lo, hi = ptr[u], ptr[u + 1]
            if hi > lo:
                level[u] = compute[u] + np.max(comm[edge[lo:hi]] + level[succ[lo:hi]])
        return level
    level = np.zeros(graph.num_nodes)
    ptr, pred, edge = graph.pred_csr
    for v in graph.topological_order:
        lo, hi = ptr[v], ptr[v + 1]
        if hi > lo:
            level[v] = np.max(level[pred[lo:hi]] + compute[pred[lo:hi]] + comm[edge[lo:hi]])
    return level


@settings(max_examples=80, deadline=None)
@given(graph=st.one_of(random_dags(max_nodes=30), random_dags(max_nodes=30, integer_costs=False)))
def test_compiled_levels_and_depths_equal_the_numpy_loops_bit_for_bit(graph):
    from workbench.levels import longest_to_exit
    from workbench.placers.list_scheduling import mean_costs, upward_rank

    for with_comm in (True, False):
        comm = graph.comm if with_comm else np.zeros_like(graph.comm)
        assert np.array_equal(graph.bottom_level(with_comm), _loop_levels(graph, graph.compute, comm, True))
        assert np.array_equal(graph.top_level(with_comm), _loop_levels(graph, graph.compute, comm, False))
    depth = np.zeros(graph.num_nodes, dtype=np.int64)
    ptr, pred, _ = graph.pred_csr
    for v in graph.topological_order:
        if ptr[v + 1] > ptr[v]:
            depth[v] = depth[pred[ptr[v] : ptr[v + 1]]].max() + 1
    assert np.array_equal(graph.depth, depth)
    compute, comm = mean_costs(graph, 3)
    assert np.array_equal(upward_rank(graph, compute, comm), _loop_levels(graph, compute, comm, True))
    assert np.array_equal(longest_to_exit(graph, compute, comm), upward_rank(graph, compute, comm))


@pytest.mark.slow
def test_bench_zeroshot_measures_the_same_placement_in_a_fresh_process():
    from workbench.bench import zeroshot

    result = zeroshot.run(quick=True)
    (row,) = result["rows"]
    graph = zeroshot._graph("layered-2k")
    placed = wb.place(graph, method="doppler_plc_only", devices=zeroshot.DEVICES, checkpoint=zero_shot_checkpoint())
    assert (row["ops"], row["edges"]) == (graph.num_nodes, graph.num_edges)
    assert row["makespan"] == placed.makespan
    assert row["cpu_s"] > 0 and row["peak_gb"] >= row["before_call_gb"] > 0.1  # torch alone holds more than 0.1 GB
    assert row["met"] is None and f"| layered-2k | {graph.num_nodes:,} |" in result["markdown"]


def test_the_paper_preset_places_a_graph_without_edges(policies):
    # the wide edge network's grouped messages: DGL's segment_mm failed on zero edge groups
    for graph in (wb.DataflowGraph.from_edges([0.0], []), wb.DataflowGraph.from_edges([1.0, 2.0, 3.0], [])):
        with torch.no_grad():
            rollout = policies["paper"].rollout(graph, 2, mode="greedy")
        assert rollout.order.tolist() == list(range(graph.num_nodes))  # the index bug: the smallest ready id first
