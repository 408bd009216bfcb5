"""Training's step loop compiled (issue 32, part 5): with SEL and PLC both learned, the compiled loop plays and scores
each episode exactly as the Python loop does (the oracle: the same policy with ``compiled_head`` patched to None)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

import workbench as wb
from workbench.learn import doppler, make_policy
from workbench.learn.choice import Chooser, head_terms
from workbench.learn.compiled_play import compiled_scored_episode
from workbench.learn.env import PlacementState
from workbench.learn.policy import PolicyConfig

from .conftest import random_dags

CONFIGS = {
    "default": PolicyConfig(),
    "rule terms": PolicyConfig(select_rule_weight=1.5, place_rule_weight=2.0),
    "affinity rule": PolicyConfig(place_rule="affinity", place_rule_weight=1.0, place_rule_scale="op"),
    "shared encoder, noise": PolicyConfig(share_encoder=True, random_features=2),
}


@pytest.fixture(scope="module")
def policies():
    torch.manual_seed(0)
    return {name: make_policy("doppler", config) for name, config in CONFIGS.items()}


def _episode(policy, graph, devices, mode, seed, offset, compiled: bool, monkeypatch):
    """One scored episode (and how often the compiled loop ran) by the compiled loop or the Python loop."""
    calls = []
    with monkeypatch.context() as patch:
        if compiled:
            patch.setattr(doppler, "compiled_scored_episode", lambda *args: calls.append(1) or compiled_scored_episode(*args))
        else:
            patch.setattr(doppler, "compiled_head", lambda head: None)
        encoded = policy.encode(policy.inputs(graph, torch.Generator().manual_seed(seed)))
        if offset:
            encoded.plc_offset = torch.randn((graph.num_nodes, devices), generator=torch.Generator().manual_seed(seed))
        chooser = Chooser(mode, 0.3, policy.decisions(graph), torch.Generator().manual_seed(seed))
        rollout = policy.play(PlacementState(graph, devices), chooser, False, encoded)
    return rollout, len(calls)


def _assert_compiled_as_python(policy, graph, devices, mode, seed, offset, monkeypatch) -> None:
    compiled, calls = _episode(policy, graph, devices, mode, seed, offset, True, monkeypatch)
    python, _ = _episode(policy, graph, devices, mode, seed, offset, False, monkeypatch)
    assert calls == 1, "the compiled loop was not taken"
    assert np.array_equal(compiled.order, python.order), "the compiled loop took its ops in another order"
    assert np.array_equal(compiled.assignment, python.assignment)
    # the same decisions re-scored: the same per-step log-probabilities and entropy, bit for bit
    assert torch.equal(compiled.step_log_prob, python.step_log_prob) and torch.equal(compiled.entropy, python.entropy)
    assert compiled.log_prob.requires_grad


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    graph=st.one_of(random_dags(max_nodes=24), random_dags(max_nodes=24, integer_costs=False)),
    devices=st.integers(1, 5),
    name=st.sampled_from(sorted(CONFIGS)),
    mode=st.sampled_from(["greedy", "sample", "epsilon"]),
    seed=st.integers(0, 100),
    offset=st.booleans(),
)
def test_the_compiled_scored_loop_plays_and_scores_as_the_python_loop_on_random_dags(
    policies, graph, devices, name, mode, seed, offset, monkeypatch
):
    _assert_compiled_as_python(policies[name], graph, devices, mode, seed, offset, monkeypatch)


@pytest.mark.parametrize("graph_name", ["chain_mm_112nodes", "full_transformer_layer_261nodes"])
def test_the_compiled_scored_loop_plays_and_scores_as_the_python_loop_on_the_paper_graphs(policies, graph_name, monkeypatch):
    graph = wb.bundled_graph(graph_name)
    for seed in range(3):
        _assert_compiled_as_python(policies["rule terms"], graph, 4, "sample", seed, False, monkeypatch)


def test_a_wide_ready_set_and_parallel_edges_play_as_the_python_loop(policies, monkeypatch):
    # 300 entry ops (a softmax over more than 128 ready ops sums pairwise in halves) and a doubled edge into the exit op
    edges = [(i, 300, 1.0) for i in range(300)] + [(0, 300, 2.0)]
    graph = wb.DataflowGraph.from_edges([float(1 + i % 7) for i in range(301)], edges)
    for mode in ("sample", "greedy"):
        _assert_compiled_as_python(policies["default"], graph, 3, mode, 1, False, monkeypatch)


def test_ops_whose_logits_differ_in_the_last_bit_are_chosen_as_the_python_loop_chooses(policies, monkeypatch):
    # eleven identical ops and one of compute 1e-15: SEL's logits differ in the last bit, where numpy's exp and numba's
    # once differed by one ulp, and the compiled loop took op 12 before op 0
    graph = wb.DataflowGraph.from_edges([0.0] * 11 + [7.0, 1e-15], [])
    _assert_compiled_as_python(policies["rule terms"], graph, 1, "greedy", 0, False, monkeypatch)


def test_teacher_and_affinity_feature_episodes_keep_the_python_loop(policies, monkeypatch):
    monkeypatch.setattr(doppler, "compiled_scored_episode", lambda *args: pytest.fail("compiled loop taken"))
    graph = wb.bundled_graph("ffnn")
    policies["default"].rollout(graph, 4, mode="teacher")
    torch.manual_seed(0)
    make_policy("doppler", PolicyConfig(affinity_features=True)).rollout(graph, 4, mode="sample")
    make_policy("doppler", PolicyConfig.paper()).rollout(graph, 4, mode="sample")


def test_a_legal_action_of_probability_zero_adds_nothing_to_the_entropy():
    # PLC's rule term divided by a tiny op's time overflows float32 to -inf: 0 log 0 = 0, not NaN
    logits = torch.tensor([[0.0, -float("inf"), 0.0], [1.0, 2.0, 0.0]])
    legal = torch.tensor([[True, True, True], [True, True, False]])
    terms = head_terms(logits, legal, torch.tensor([0, 1]), None)
    assert torch.allclose(terms.entropy, torch.tensor([0.6931472, 0.5822031]), atol=1e-6)
    assert torch.allclose(terms.step_log_prob, torch.log(torch.tensor([0.5, 0.7310586])))


def test_a_training_run_writes_the_same_episodes_with_the_compiled_loop_as_with_the_python_loop(tmp_path, monkeypatch):
    from workbench.bench.training import TUNED
    from workbench.runs import RunPaths, read_rows
    from workbench.training import train
    from workbench.training.config import config_from_values

    values = {"graphs": ("chain_mm_112nodes",), "method": "doppler", "seed": 0, "device": "cpu", "devices": 4, **TUNED}
    config = config_from_values({**values, "stages": ("il", "sim"), "episodes": (4, 24), "greedy_every": 8})

    def makespans(name: str) -> tuple[list, dict]:
        result = train(config, tmp_path / name, progress=False)
        return [row["makespan"] for row in read_rows(RunPaths(result.run_dir).metrics_path)], result.evaluation

    calls = []
    with monkeypatch.context() as patch:
        patch.setattr(doppler, "compiled_scored_episode", lambda *args: calls.append(1) or compiled_scored_episode(*args))
        compiled = makespans("compiled")
    monkeypatch.setattr(doppler, "compiled_head", lambda head: None)
    python = makespans("python")
    assert len(calls) >= 24, "Stage II's rollouts did not take the compiled loop"
    assert len(compiled[0]) == 28 and compiled == python
