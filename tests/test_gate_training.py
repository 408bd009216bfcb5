"""SEL's ETF rule and the per-graph rule gate: a fresh policy is exactly its rules, the gate round-trips and trains."""

from __future__ import annotations

import csv
import dataclasses

import numpy as np
import pytest
import torch

import workbench as wb
from workbench.learn import load_policy, make_policy
from workbench.learn.env import teacher_assignment
from workbench.learn.features import GRAPH_STATISTICS, earliest_start_scores, graph_statistics
from workbench.learn.policy import PolicyConfig
from workbench.runs import zero_shot_checkpoint
from workbench.training.config import replace_policy
from workbench.training.corpus_evaluation import evaluate_split
from workbench.training.corpus_training import residual_policy
from workbench.training.gate_training import GateTrainConfig, gated_policy, rule_costs, train_gate

from .test_corpus_training import TINY

PAIRS = ("bottom_level/affinity", "earliest_start/earliest_start")


def graphs(seed: int) -> list[wb.DataflowGraph]:
    """A random layered DAG, and two with many ties in ETF's earliest starts (identical entry ops, identical layers)."""
    return [wb.generate("layered", layers=6, width=5, ccr=2.0, seed=seed), wb.bundled_graph("chain_mm"), wb.generate("ffnn")]


@pytest.mark.parametrize(("method", "select_weight"), [("doppler", 50.0), ("doppler_plc_only", 0.0)])
@pytest.mark.parametrize("devices", [2, 4, 8])
def test_a_fresh_policy_on_the_earliest_start_rules_places_exactly_as_etf(devices, method, select_weight):
    torch.manual_seed(devices)
    policy = residual_policy(method, 50.0, select_weight, select_rule="earliest_start")
    for graph in graphs(devices):
        with torch.no_grad():
            greedy = policy.rollout(graph, devices, mode="greedy")
        etf = wb.place(graph, "etf", devices=devices)
        assert np.array_equal(greedy.assignment, etf.assignment) and np.array_equal(greedy.order, etf.order)
        assert greedy.rule is None  # no gate


def test_etfs_op_rule_takes_the_earliest_start_then_the_larger_static_level_then_the_smaller_id():
    scores = earliest_start_scores(np.array([3.0, 1.0, 1.0, 2.0, 1.0]), np.array([5.0, 2.0, 4.0, 9.0, 4.0]), 10.0)
    assert int(np.argmax(scores)) == 2  # ops 1, 2, 4 start first; 2 and 4 have the larger static level; 2 is the smaller id
    assert scores[[0, 3]].max() < -1.0 <= 0.0 <= scores[[1, 2, 4]].min()  # a later start scores below every tied op
    assert scores[0] < scores[3]  # later ops are ranked by their delay


def test_a_fresh_gate_picks_the_first_rule_pair_and_its_rule_policies_are_their_rules():
    torch.manual_seed(0)
    policy = residual_policy("doppler", 50.0, 50.0, "op", place_rule="affinity", gate_rules=PAIRS)
    graph = graphs(3)[0]
    with torch.no_grad():
        greedy = policy.rollout(graph, 4, mode="greedy")
        fixed = [policy.rule_policy(k).rollout(graph, 4, mode="greedy").assignment for k in range(2)]
    assert greedy.rule == PAIRS[0] and np.array_equal(greedy.assignment, teacher_assignment(graph, 4, "affinity"))
    assert np.array_equal(fixed[0], greedy.assignment) and np.array_equal(fixed[1], wb.place(graph, "etf", devices=4).assignment)
    assert policy.rule_policy(1).sel_head is policy.sel_head  # the pairs share the heads
    with torch.no_grad():
        policy.gate_head.bias.copy_(torch.tensor([0.0, 30.0]))
        assert np.array_equal(policy.rollout(graph, 4, mode="greedy").assignment, fixed[1])
        draws = {policy.rollout(graph, 4, mode="sample", generator=torch.Generator().manual_seed(s)).rule for s in range(4)}
        assert draws == {PAIRS[1]}  # a sampled rollout draws the pair from the gate too
        policy.gate_head.bias.zero_()
        draws = {policy.rollout(graph, 4, mode="sample", generator=torch.Generator().manual_seed(s)).rule for s in range(12)}
        assert draws == set(PAIRS)


def test_the_gates_weights_and_rules_round_trip_and_checkpoints_without_them_still_load(tmp_path):
    torch.manual_seed(1)
    policy = residual_policy("doppler_plc_only", 50.0, gate_rules=PAIRS)
    with torch.no_grad():
        policy.gate_head.weight.normal_()
    policy.save(tmp_path / "gated.safetensors")
    loaded = load_policy(tmp_path / "gated.safetensors")
    assert loaded.config == policy.config and loaded.config.gate_rules == PAIRS
    assert torch.equal(loaded.gate_head.weight, policy.gate_head.weight)
    graph = graphs(2)[0]
    with torch.no_grad():
        assert loaded.rollout(graph, 8, mode="greedy").rule == policy.rollout(graph, 8, mode="greedy").rule
    old = load_policy(wb.datasets.DATASETS_DIR / "pretrained" / "ffnn_192nodes" / "doppler.safetensors")  # saved before the gate existed
    assert old.config.gate_rules == () and old.config.select_rule == "bottom_level" and not hasattr(old, "gate_head")


def test_bad_rules_and_gates_are_refused():
    with pytest.raises(ValueError, match="select_rule must be one of bottom_level, earliest_start, got 'first'"):
        PolicyConfig(select_rule="first")
    with pytest.raises(ValueError, match="select_rule 'earliest_start' needs a select_rule_weight > 0"):
        PolicyConfig(select_rule="earliest_start")
    with pytest.raises(ValueError, match="a gate rule is 'select_rule/place_rule'.*got 'bottom_level'"):
        PolicyConfig(place_rule_weight=1.0, select_rule_weight=1.0, gate_rules=("bottom_level", "earliest_start/affinity"))
    with pytest.raises(ValueError, match="two or more different rule pairs"):
        PolicyConfig(place_rule_weight=1.0, gate_rules=(PAIRS[0], PAIRS[0]))
    with pytest.raises(ValueError, match="gate_rules needs a place_rule_weight > 0"):
        PolicyConfig(method="doppler_plc_only", gate_rules=PAIRS)
    with pytest.raises(ValueError, match="gate_rules needs a doppler policy with a learned PLC, not 'doppler_sel_only'"):
        make_policy("doppler_sel_only", PolicyConfig(method="doppler_sel_only", place_rule_weight=1.0, gate_rules=PAIRS))


def test_graph_statistics_are_unit_free_and_follow_the_device_count():
    graph = graphs(1)[0]
    stats = graph_statistics(graph, 4)
    assert stats.shape == (len(GRAPH_STATISTICS),) and np.all(np.isfinite(stats))
    scaled = dataclasses.replace(graph, compute=graph.compute * 1000.0, comm=graph.comm * 1000.0)
    assert np.allclose(graph_statistics(scaled, 4), stats)  # the same graph in another time unit
    at_8 = graph_statistics(graph, 8)
    assert at_8[0] == 3.0 and stats[0] == 2.0 and np.isclose(stats[5] - at_8[5], np.log(2.0))  # parallelism per device halves


def test_the_trained_gate_keeps_the_selection_pairs_best_choice_and_places_with_it(tmp_path):
    config = GateTrainConfig(devices=(2, 4), select_devices=(2, 4), steps=60, select_every=20, learning_rate=0.05)
    best = train_gate(tmp_path / "gate", config, corpus=TINY)
    rows = list(csv.DictReader((tmp_path / "gate" / "selection.csv").open()))
    assert [int(r["step"]) for r in rows] == [0, 20, 40, 60]
    chosen = max(rows, key=lambda r: (float(r["wins"]), -float(r["mean_over_critical_path"])))
    policy = load_policy(best)
    assert policy.checkpoint_extra["step"] == int(chosen["step"]) and policy.trained_for.cross_graph
    assert [g.name for g in policy.trained_for.graphs] == [e.name for e in TINY if e.split == "train"]  # each once, at 2 and 4 devices
    held = [(f"{e.name}@{d}", wb.corpus.build(e), d) for e in TINY if e.split == "validation" for d in (2, 4)]
    _, costs = rule_costs(gated_policy(config), held)
    with torch.no_grad():  # the checkpoint's own greedy placements score what selection recorded
        placed = [
            wb.simulate(g, policy.rollout(g, d, mode="greedy").assignment, d).makespan / wb.place(g, "critical_path", devices=d).makespan
            for _, g, d in held
        ]
    assert np.mean(np.array(placed) < 1.0) == float(chosen["wins"])
    assert np.isclose(np.mean(placed), float(chosen["mean_over_critical_path"]))
    assert all(min(abs(p - c) for c in row) < 1e-12 for p, row in zip(placed, costs, strict=True))  # each is one rule pair's placement
    frame = evaluate_split(best, "test", (2, 4), samples=2, corpus=TINY)
    assert set(frame["greedy_rule"]) <= set(PAIRS) and len(frame) == 2
    with pytest.raises(ValueError, match=r"holds a run with other settings \(steps\)"):
        train_gate(tmp_path / "gate", dataclasses.replace(config, steps=61), corpus=TINY)


def test_a_gate_run_refuses_a_policy_without_a_learned_plc_or_bad_rule_pairs():
    with pytest.raises(ValueError, match="gate_rules needs a doppler policy with a learned PLC, not 'doppler_sel_only'"):
        GateTrainConfig(method="doppler_sel_only")
    with pytest.raises(ValueError, match="is an option of the doppler policies, not of 'placeto'"):
        GateTrainConfig(method="placeto")
    with pytest.raises(ValueError, match="GateTrainConfig.policy: a gate rule is 'select_rule/place_rule'"):
        replace_policy(GateTrainConfig(), gate_rules=("bottom_level/nearest", PAIRS[1]))


def test_the_shipped_zero_shot_policy_beats_critical_path_on_each_paper_graph_at_four_devices():
    policy = load_policy(zero_shot_checkpoint())
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as measured: ChainMM's win is 0.0006%, within reach of another thread count's rounding
    try:
        with torch.no_grad():
            rollouts = {name: policy.rollout(wb.bundled_graph(name), 4, mode="greedy") for name in wb.PAPER_GRAPHS}
    finally:
        torch.set_num_threads(threads)
    for name, rollout in rollouts.items():
        graph = wb.bundled_graph(name)
        assert rollout.rule in policy.config.gate_rules
        assert wb.simulate(graph, rollout.assignment, 4).makespan < wb.place(graph, "critical_path", devices=4).makespan, name
