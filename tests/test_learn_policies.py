"""Every learned method: valid rollouts, consistent log-probabilities, learning, checkpoints, registry."""

from __future__ import annotations

import os
from dataclasses import replace

os.environ.setdefault("DGLBACKEND", "pytorch")

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

import workbench as wb
from workbench.learn import METHODS, Guide, PlacementState, load_policy, make_policy
from workbench.learn.nets import graph_tensors
from workbench.learn.policy import Chooser
from workbench.placers.base import REGISTRY
from workbench.sim import Evaluator

from .conftest import save_trained_for
from .test_learn import SIX, SMALL, assert_topological, dags, reinforce

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def policies():
    torch.manual_seed(0)
    return {method: make_policy(method, SMALL) for method in METHODS}


class RecordingChooser(Chooser):
    """Samples like :class:`Chooser` and remembers log p of every choice it made."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.log_probs: list[float] = []

    def __call__(self, probs, decision, teacher=None):
        pick = super().__call__(probs, decision, teacher)
        self.log_probs.append(float(np.log(probs[pick])))
        return pick


@pytest.mark.parametrize("method", sorted(METHODS))
def test_batched_log_prob_equals_the_step_loop_choices(policies, method):
    graph = wb.bundled_graph("chain_mm")
    choose = RecordingChooser("sample", 0.0, 2 * graph.num_nodes, torch.Generator().manual_seed(4))
    policy = policies[method]
    rollout = policy.play(PlacementState(graph, 3), choose, False, policy.encode(graph_tensors(graph, torch.device("cpu"))))
    assert len(choose.log_probs) == (2 if method == "doppler" else 1) * graph.num_nodes
    assert float(rollout.log_prob) == pytest.approx(sum(choose.log_probs), rel=1e-4, abs=1e-3)


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_other_activations_score_consistently(activation):
    torch.manual_seed(1)
    policy = make_policy("joint", replace(SMALL, activation=activation, head_hidden=(16, 8)))
    graph = wb.bundled_graph("chain_mm")
    choose = RecordingChooser("sample", 0.0, 2 * graph.num_nodes, torch.Generator().manual_seed(4))
    rollout = policy.play(PlacementState(graph, 3), choose, False, policy.encode(graph_tensors(graph, torch.device("cpu"))))
    assert float(rollout.log_prob) == pytest.approx(sum(choose.log_probs), rel=1e-4, abs=1e-3)
    with pytest.raises(ValueError, match="activation"):
        replace(SMALL, activation="gelu")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    graph=dags(),
    devices=st.integers(1, 4),
    method=st.sampled_from(sorted(METHODS)),
    mode=st.sampled_from(["greedy", "sample", "epsilon", "teacher"]),
)
def test_every_method_gives_valid_rollouts(policies, graph, devices, method, mode):
    r = policies[method].rollout(graph, devices, mode=mode, epsilon=0.3, teacher=True)
    assert r.assignment.min() >= 0 and r.assignment.max() < devices
    assert_topological(graph, r.order)
    assert float(r.log_prob) <= 1e-5 and float(r.imitation_loss) >= -1e-5 and 0.0 <= r.teacher_agreement <= 1.0
    r.log_prob.backward()  # differentiable end to end


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_round_trips_a_checkpoint_and_is_reproducible(tmp_path, policies, method):
    graph = wb.bundled_graph("ffnn")
    policy = policies[method]
    policy.save(tmp_path / "p.safetensors")
    loaded = load_policy(tmp_path / "p.safetensors")
    assert loaded.method == method and loaded.config == policy.config
    runs = [p.rollout(graph, 4, generator=torch.Generator().manual_seed(5)) for p in (policy, loaded, loaded)]
    for r in runs[1:]:
        assert np.array_equal(r.assignment, runs[0].assignment) and float(r.log_prob) == pytest.approx(float(runs[0].log_prob))


@pytest.mark.parametrize("method", sorted(METHODS))
def test_several_rollouts_share_one_encoder_pass(policies, method):
    graph = wb.bundled_graph("chain_mm")
    policy = policies[method]
    many = policy.rollouts(graph, 3, 3, generator=torch.Generator().manual_seed(2), teacher=True)
    one = policy.rollout(graph, 3, generator=torch.Generator().manual_seed(2), teacher=True)
    assert np.array_equal(many[0].assignment, one.assignment) and float(many[0].log_prob) == pytest.approx(float(one.log_prob))
    assert not all(np.array_equal(r.assignment, many[0].assignment) for r in many[1:])
    policy.zero_grad()
    sum(r.log_prob + r.imitation_loss for r in many).backward()
    assert all(p.grad is not None for p in policy.parameters())


@pytest.mark.parametrize("method", sorted(METHODS))
def test_teacher_mode_replays_the_critical_path_teacher(policies, method):
    graph = wb.bundled_graph("chain_mm")
    r = policies[method].rollout(graph, 3, mode="teacher")
    assert r.teacher_agreement == 1.0 and float(r.imitation_loss) > 0
    if method == "placeto":  # its op order is fixed: the teacher only picks devices
        state = PlacementState(graph, 3)
        for op in graph.topological_order.tolist():
            state.place(op, int(state.teacher_devices(op, state.schedule.earliest_starts(op))[0]))
        assert np.array_equal(r.assignment, state.schedule.device)
    else:
        teacher = wb.place(graph, "critical_path", devices=3)
        assert np.array_equal(r.assignment, teacher.assignment)
        if method != "gdp":
            assert np.array_equal(r.order, teacher.order)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_a_guide_replays_a_placement_and_scores_it(policies, method):
    graph, policy = wb.bundled_graph("chain_mm"), policies[method]
    sampled = policy.rollout(graph, 3, mode="sample", generator=torch.Generator().manual_seed(7))
    replay = policy.rollout(graph, 3, mode="teacher", guide=Guide(sampled.order, sampled.assignment))
    assert np.array_equal(replay.assignment, sampled.assignment) and np.array_equal(replay.order, sampled.order)
    assert replay.teacher_agreement == 1.0
    # self-imitation's loss is the replayed placement's mean -log probability per step
    assert float(replay.imitation_loss) == pytest.approx(-float(sampled.log_prob) / graph.num_nodes, rel=1e-4)
    other = policy.rollout(graph, 3, mode="teacher", guide=Guide(sampled.order, (sampled.assignment + 1) % 3))
    assert np.array_equal(other.assignment, (sampled.assignment + 1) % 3)


def test_a_bad_guide_is_refused():
    with pytest.raises(ValueError, match="permutation"):
        Guide([0, 0, 1], [0, 1, 2])
    with pytest.raises(ValueError, match="graph has"):
        PlacementState(SIX, 2, Guide([0, 1], [0, 0]))


def test_ablations_follow_the_teacher_in_the_head_they_do_not_learn(policies):
    graph = wb.bundled_graph("chain_mm")
    teacher = wb.place(graph, "critical_path", devices=2)
    sel_only = policies["doppler_sel_only"].rollout(graph, 2, mode="greedy", teacher=True)
    plc_only = policies["doppler_plc_only"].rollout(graph, 2, mode="greedy", teacher=True)
    # learned PLC with the teacher's op rule: the first op placed is the teacher's first op
    assert plc_only.order[0] == teacher.order[0]
    # learned SEL with the teacher's device rule: the first op goes to device 0 (every device ties, smallest id)
    assert sel_only.assignment[sel_only.order[0]] == 0
    assert not any(name.startswith("plc") for name in policies["doppler_sel_only"].state_dict())
    assert not any(name.startswith("sel") for name in policies["doppler_plc_only"].state_dict())


def test_shared_encoder_option():
    shared = make_policy("doppler", replace(SMALL, share_encoder=True))
    assert not hasattr(shared, "plc_encoder")
    assert sum(p.numel() for p in shared.parameters()) < sum(p.numel() for p in make_policy("doppler", SMALL).parameters())
    shared.rollout(wb.bundled_graph("chain_mm"), 2).log_prob.backward()


def test_gdp_refuses_more_devices_than_its_output():
    policy = make_policy("gdp", SMALL)
    with pytest.raises(ValueError, match="max_devices"):
        policy.rollout(SIX, SMALL.max_devices + 1)


@pytest.mark.slow
def test_joint_overfits_the_six_op_graph():
    torch.manual_seed(0)  # the initial weights too: unseeded, they depended on which tests ran first
    assert reinforce(make_policy("joint", SMALL), SIX, 2, episodes=300, lr=1e-2) == 13.0


@pytest.mark.slow
def test_placeto_improves_on_the_six_op_graph():
    # Measured over seeds 0-3 (300 episodes): the one-pass Placeto reaches the optimum 13 on one seed and
    # settles at 15 on the others (the graph's makespans range 13-20), so it must improve, not overfit.
    torch.manual_seed(0)
    policy = make_policy("placeto", SMALL)
    start = Evaluator(SIX, 2)(policy.rollout(SIX, 2, mode="greedy").assignment)
    final = reinforce(policy, SIX, 2, episodes=300, lr=1e-2)
    assert final <= 15.0 < start


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_is_a_registered_placer(tmp_path, policies, method):
    path = tmp_path / f"{method}.safetensors"
    save_trained_for(policies[method], path, [SIX], 2)
    placement = wb.place(SIX, method=method, devices=2, checkpoint=path)
    assert placement.method == method and placement.assignment.shape == (6,)
    assert method in REGISTRY
