"""Cross-graph training on the corpus: the teacher's replay, resuming, Stage II, and policies placed on other device counts."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

import workbench as wb
from workbench.corpus import CorpusEntry
from workbench.learn import load_policy, make_policy
from workbench.learn.checkpoint import CheckpointError, TrainedFor
from workbench.learn.doppler import place_rule_times
from workbench.learn.env import teacher_assignment
from workbench.learn.policy import PolicyConfig
from workbench.training import corpus_training
from workbench.training.config import replace_policy
from workbench.training.corpus_training import CorpusTrainConfig, teacher_guide, train_on_corpus

TINY = [  # two small training graphs, one to select on and one held out, built like the shipped manifest's entries
    CorpusEntry("layered-a", "layered", {"layers": 4, "width": 3, "ccr": 2.0}, seed=1, split="train", devices=(2, 4)),
    CorpusEntry("layered-b", "layered", {"layers": 3, "width": 4, "ccr": 1.0}, seed=2, split="train", devices=(2,)),
    CorpusEntry("layered-c", "layered", {"layers": 4, "width": 4, "ccr": 2.0}, seed=3, split="test", devices=(2, 4)),
    CorpusEntry("layered-d", "layered", {"layers": 5, "width": 3, "ccr": 3.0}, seed=4, split="validation", devices=(2, 4)),
]
FAST = {"teacher_budget": 40, "checkpoint_every": 2, "devices": (2, 4), "seed": 3}
RESIDUAL = PolicyConfig(method="doppler_plc_only", place_rule_weight=50.0)  # PLC on critical_path's device rule


def test_the_teachers_replay_keeps_its_makespan_and_names_devices_in_order_of_first_use():
    graph = wb.generate("layered", layers=6, width=5, ccr=2.0, seed=4)
    searched = wb.place(graph, "local_search", devices=4, budget=200, seed=1)
    order, assignment = teacher_guide(graph, 4, searched.assignment)
    position = np.empty(graph.num_nodes, dtype=int)
    position[order] = np.arange(graph.num_nodes)
    assert np.all(position[graph.src] < position[graph.dst])  # a topological order: the policy can place ops in it
    first_use = list(dict.fromkeys(assignment[order].tolist()))
    assert first_use == list(range(len(first_use)))
    assert wb.simulate(graph, assignment, 4).makespan == pytest.approx(searched.makespan)  # renaming devices changes nothing


def test_an_interrupted_run_resumes_to_the_same_weights_and_refuses_other_settings(tmp_path, monkeypatch):
    torch.manual_seed(0)
    straight = train_on_corpus(tmp_path / "straight", CorpusTrainConfig(episodes=5, **FAST), corpus=TINY)
    real_step, calls = corpus_training.apply_gradient, []

    def stop_at_the_fourth(*args):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        real_step(*args)

    monkeypatch.setattr(corpus_training, "apply_gradient", stop_at_the_fourth)
    with pytest.raises(KeyboardInterrupt):
        train_on_corpus(tmp_path / "resumed", CorpusTrainConfig(episodes=5, **FAST), corpus=TINY)
    monkeypatch.setattr(corpus_training, "apply_gradient", real_step)
    resumed = train_on_corpus(tmp_path / "resumed", CorpusTrainConfig(episodes=5, **FAST), corpus=TINY)
    a, b = load_policy(straight), load_policy(resumed)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))
    metrics = (tmp_path / "resumed" / "metrics.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in metrics[1:]] == ["0", "1", "2", "3", "4"]
    assert a.trained_for.cross_graph and a.trained_for.devices == 4 and {g.name for g in a.trained_for.graphs} == {"layered-a", "layered-b"}
    with pytest.raises(ValueError, match="rollout must be one of teacher, epsilon"):
        CorpusTrainConfig(rollout="greedy")
    with pytest.raises(ValueError, match="other settings .*learning_rate"):
        train_on_corpus(tmp_path / "resumed", CorpusTrainConfig(episodes=5, learning_rate=0.1, **FAST), corpus=TINY)
    saved = json.loads((tmp_path / "resumed" / "config.json").read_text())
    del saved["policy"]["select_rule_weight"]  # a run saved before that setting existed resumes with it at its default
    (tmp_path / "resumed" / "config.json").write_text(json.dumps(saved))
    assert train_on_corpus(tmp_path / "resumed", CorpusTrainConfig(episodes=5, **FAST), corpus=TINY) == resumed


def test_imitating_the_search_teacher_lowers_the_imitation_loss(tmp_path):
    out = tmp_path / "run"
    train_on_corpus(out, CorpusTrainConfig(episodes=24, learning_rate=3e-3, **FAST), corpus=TINY)
    rows = (out / "metrics.csv").read_text().splitlines()[1:]
    loss = np.array([float(row.split(",")[3]) for row in rows])
    assert loss[-6:].mean() < 0.8 * loss[:6].mean()


def test_evaluation_places_the_held_out_split_at_every_device_count(tmp_path):
    last = train_on_corpus(tmp_path / "run", CorpusTrainConfig(episodes=2, rollout="epsilon", **FAST), corpus=TINY)  # DAgger states
    frame = corpus_training.evaluate_split(last, "test", (2, 4), samples=3, corpus=TINY)
    assert frame[["graph", "devices"]].values.tolist() == [["layered-c", 2], ["layered-c", 4]]
    assert (frame["best_of_3"] <= frame["greedy"]).all() and (frame["best_heuristic_makespan"] <= frame["critical_path"]).all()


@pytest.mark.parametrize("method", ["doppler", "placeto"])
def test_a_cross_graph_policy_trained_at_4_devices_places_at_8(tmp_path, method):
    torch.manual_seed(0)
    graphs = [wb.generate("layered", layers=4, width=4, seed=s) for s in (1, 2)]
    policy = make_policy(method)
    policy.trained_for = TrainedFor.of(graphs, 4)
    policy.save(tmp_path / "p.safetensors")
    unseen = wb.generate("layered", layers=5, width=6, seed=9)
    placed = wb.place(unseen, method, devices=8, checkpoint=tmp_path / "p.safetensors")
    assert placed.assignment.min() >= 0 and placed.assignment.max() <= 7 and np.isfinite(placed.makespan)


def test_a_gdp_policy_refuses_more_devices_than_it_was_trained_with(tmp_path):
    torch.manual_seed(0)
    graphs = [wb.generate("layered", layers=4, width=4, seed=s) for s in (1, 2)]
    policy = make_policy("gdp")
    policy.trained_for = TrainedFor.of(graphs, 4)
    policy.save(tmp_path / "gdp.safetensors")
    unseen = wb.generate("layered", layers=5, width=6, seed=9)
    with pytest.raises(CheckpointError, match="trained with 4 devices; it scores devices by index, so it cannot place on 8"):
        wb.place(unseen, "gdp", devices=8, checkpoint=tmp_path / "gdp.safetensors")
    assert wb.place(unseen, "gdp", devices=4, checkpoint=tmp_path / "gdp.safetensors").assignment.max() <= 3


def test_stage_two_from_a_distilled_start_keeps_the_weights_that_win_most_often_on_the_selection_split(tmp_path):
    start = train_on_corpus(tmp_path / "il", CorpusTrainConfig(episodes=2, **FAST), corpus=TINY)
    config = CorpusTrainConfig(objective="reinforce", start_from=str(start), episodes=4, rollouts_per_update=3, select_every=1, **FAST)
    chosen = train_on_corpus(tmp_path / "rl", config, corpus=TINY)
    assert chosen.name == "sim-best.safetensors"
    rows = [line.split(",") for line in (tmp_path / "rl" / "selection.csv").read_text().splitlines()[1:]]
    assert [int(r[0]) for r in rows] == [0, 1, 2, 3, 4]  # the start, then after every update
    scores = [(float(r[1]), -float(r[2])) for r in rows]
    best = max(range(len(rows)), key=lambda i: (scores[i], -i))  # the first of the best
    assert [int(r[3]) for r in rows][best] == 1 and not any(int(r[3]) for r in rows[best + 1 :])
    pairs = corpus_training._selection_pairs(config, TINY)
    assert [key for key, *_ in pairs] == ["layered-d@2", "layered-d@4"]
    wider = corpus_training._selection_pairs(dataclasses.replace(config, devices=(2,), select_devices=(4, 8)), TINY)
    assert [key for key, *_ in wider] == ["layered-d@4"]  # the selection's own device counts, as far as the manifest lists them
    assert corpus_training.greedy_score(load_policy(chosen), pairs) == pytest.approx((scores[best][0], -scores[best][1]))
    metrics = (tmp_path / "rl" / "metrics.csv").read_text().splitlines()
    assert len(metrics) == 5 and all(float(line.split(",")[6]) > 0 for line in metrics[1:])  # makespan over critical_path logged
    placed = wb.place(corpus_training.build(TINY[2]), "doppler", devices=4, checkpoint=chosen)
    assert placed.assignment.max() <= 3 and np.isfinite(placed.makespan)
    with pytest.raises(ValueError, match="holds a doppler policy, not placeto"):
        train_on_corpus(
            tmp_path / "other", CorpusTrainConfig(objective="reinforce", start_from=str(start), method="placeto", **FAST), corpus=TINY
        )


@pytest.mark.parametrize(
    ("method", "select_rule", "scale"), [("doppler_plc_only", 0.0, "graph"), ("doppler", 50.0, "graph"), ("doppler", 50.0, "op")]
)
@pytest.mark.parametrize("devices", [2, 4, 8])
def test_the_residual_heads_start_as_critical_path(devices, method, select_rule, scale):
    torch.manual_seed(devices)
    policy = corpus_training.residual_policy(method, 50.0, select_rule, scale)
    graph = wb.generate("layered", layers=6, width=5, ccr=2.0, seed=devices)
    with torch.no_grad():
        greedy = policy.rollout(graph, devices, mode="greedy")
    critical = wb.place(graph, "critical_path", devices=devices)
    assert np.array_equal(greedy.assignment, critical.assignment) and np.array_equal(greedy.order, critical.order)
    with torch.no_grad():  # the rules, not the untrained net, decide: without them the same net places otherwise
        plain = make_policy(method).rollout(graph, devices, mode="greedy").assignment
    assert not np.array_equal(plain, greedy.assignment)


@pytest.mark.parametrize(
    ("method", "select_rule", "scale"), [("doppler_plc_only", 0.0, "graph"), ("doppler", 50.0, "graph"), ("doppler", 50.0, "op")]
)
@pytest.mark.parametrize("devices", [2, 4, 8])
def test_the_residual_heads_on_the_affinity_rule_start_as_the_affinity_teacher(devices, method, select_rule, scale):
    torch.manual_seed(devices)
    policy = corpus_training.residual_policy(method, 50.0, select_rule, scale, place_rule="affinity")
    graph = wb.generate("layered", layers=6, width=5, ccr=2.0, seed=devices)
    with torch.no_grad():
        greedy = policy.rollout(graph, devices, mode="greedy").assignment
    assert np.array_equal(greedy, teacher_assignment(graph, devices, "affinity"))
    assert not np.array_equal(greedy, wb.place(graph, "critical_path", devices=devices).assignment)  # the rule is not critical_path's


def test_an_unknown_place_rule_or_one_without_its_weight_is_refused():
    with pytest.raises(ValueError, match="place_rule must be one of earliest_start, affinity, got 'nearest'"):
        PolicyConfig(place_rule="nearest", place_rule_weight=1.0)
    with pytest.raises(ValueError, match="place_rule 'affinity' needs a place_rule_weight > 0"):
        PolicyConfig(place_rule="affinity")
    with pytest.raises(ValueError, match="CorpusTrainConfig.policy: place_rule 'affinity' needs a place_rule_weight > 0"):
        replace_policy(CorpusTrainConfig(), place_rule="affinity", select_rule_weight=50.0)


def test_a_residual_run_trains_and_saves_the_rule_with_its_checkpoint(tmp_path):
    config = CorpusTrainConfig(method="doppler_plc_only", policy=RESIDUAL, objective="reinforce", episodes=2, **FAST)
    last = train_on_corpus(tmp_path / "run", dataclasses.replace(config, rollouts_per_update=2), corpus=TINY)
    assert load_policy(last).config.place_rule_weight == 50.0
    with pytest.raises(ValueError, match="place_rule_weight and select_rule_weight build a fresh policy"):
        CorpusTrainConfig(policy=RESIDUAL, start_from=str(last))
    with pytest.raises(ValueError, match="objective must be one of imitation, reinforce"):
        CorpusTrainConfig(objective="search")


def test_a_run_written_before_place_rule_existed_resumes_with_the_rule_at_its_default(tmp_path):
    config = CorpusTrainConfig(method="doppler_plc_only", policy=RESIDUAL, objective="reinforce", episodes=1, rollouts_per_update=2, **FAST)
    train_on_corpus(tmp_path / "run", config, corpus=TINY)
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    del saved["policy"]["place_rule"]  # an older run's config.json
    (tmp_path / "run" / "config.json").write_text(json.dumps(saved))
    train_on_corpus(tmp_path / "run", dataclasses.replace(config, episodes=2), corpus=TINY)
    assert load_policy(tmp_path / "run" / "checkpoints" / "last.safetensors").checkpoint_extra["episode"] == 2
    with pytest.raises(ValueError, match="holds a run with other settings \\(policy.place_rule\\)"):
        train_on_corpus(tmp_path / "run", replace_policy(dataclasses.replace(config, episodes=3), place_rule="affinity"), corpus=TINY)


def test_the_op_scaled_place_rule_divides_by_each_ops_compute_time_with_the_smallest_positive_one_as_floor():
    compute = np.array([0.0, 2.0, 8.0, 0.5])
    assert place_rule_times(compute, 100.0, "op").tolist() == [0.5, 2.0, 8.0, 0.5]
    assert place_rule_times(compute, 100.0, "graph").tolist() == [100.0] * 4
    assert place_rule_times(np.zeros(3), 7.0, "op").tolist() == [7.0] * 3  # no op computes: the graph's time scale
    with pytest.raises(ValueError, match="place_rule_scale must be one of graph, op"):
        PolicyConfig(place_rule_scale="device")
