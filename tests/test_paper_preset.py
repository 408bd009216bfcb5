"""The paper preset (``PolicyConfig.paper``, ``TrainConfig.paper``) and each switch it turns on.

Every pinned value cites the file of the paper's public code
(github.com/xinyuyao/Doppler) it comes from.
"""

from __future__ import annotations

import dataclasses
import types

import numpy as np
import pytest
import torch

import workbench as wb
from workbench.graph import DataflowGraph
from workbench.learn import PolicyConfig, make_policy
from workbench.learn.features import traversal_order
from workbench.learn.nets import EdgeConv, Encoder, graph_tensors, numpy_zscore, zscore
from workbench.runs import read_rows
from workbench.training import TrainConfig, train
from workbench.training.reinforce import discounted_log_prob, make_scheduler, reinforce_update

CHAIN = "chain_mm_112nodes"


# --- the preset's values -------------------------------------------------------------------------------
def test_policy_preset_pins_the_paper_code_values():
    paper = PolicyConfig.paper()
    assert paper.width == 128  # scheduler/rl_agent.py: MPNNGNN(node_out_feats=hidden1), hidden1=128
    assert paper.edge_hidden == 128  # scheduler/rl_agent.py: MPNNGNN(edge_hidden_feats=hidden1)
    assert paper.message_passing_steps == 6  # scheduler/rl_agent.py: num_step_message_passing=6
    assert paper.aggregator == "sum"  # dgllife MPNNGNN, used by scheduler/rl_agent.py: NNConv(aggregator_type="sum")
    assert paper.share_encoder is False  # scheduler/rl_agent.py: Node_Policy and Device_Policy each build an MPNNGNN
    assert paper.head_hidden == (64,)  # scheduler/rl_agent.py: Linear(hidden1 * 4, hidden2), hidden2=64, then Linear(hidden2, 1)
    assert (paper.activation, paper.negative_slope) == ("leaky_relu", 0.1)  # scheduler/rl_agent.py: m = nn.LeakyReLU(0.1)
    assert paper.zscore_graph_features  # scheduler/rl_agent.py: normalize_feat_state(state), normalize_feat_state(g.edata["feat"])
    assert paper.zscore_device_features  # scheduler/rl_agent.py: normalize_feat_state(device_feat_state) and of device_sum_embedding
    assert paper.zscore_ready_inputs  # scheduler/rl_agent.py: normalize_feat_state(state[legal_action]) and of the level embeddings
    assert paper.leaky_projections  # scheduler/rl_agent.py: m(self.mpnn_layer.forward(...)), m(self.ffnn_layer1(...))
    assert paper.critical_path_index_bug  # scheduler/rl_agent.py: cp_node_selection returns legal_nodes[chosen_index]
    assert paper.path_sum_order_bug  # scheduler/rl_agent.py compute_level_embedding over cp_utils.py's path dict, indexed by op id
    default = PolicyConfig()
    switches = ("zscore_graph_features", "zscore_device_features", "zscore_ready_inputs", "leaky_projections")
    assert not any(getattr(default, name) for name in (*switches, "critical_path_index_bug", "path_sum_order_bug"))


def test_train_preset_pins_the_paper_code_values():
    paper = TrainConfig.paper((CHAIN,))
    assert paper.devices == 4  # config_files/run_doppler/*.json: "num_device": 4
    assert paper.stages == ("il", "sim") and paper.episodes == (2000, 2000)  # imitation_learning.json, rl_simulation_learning.json
    assert paper.il_lr == 1e-3  # config_files/run_doppler/imitation_learning.json: "learning_rate": 0.001
    assert paper.il_epsilon == 1.0 and paper.il_epsilon_decay  # imitation_learning.json: epsilon 1.0; run_placement.py decays to 0
    assert paper.il_entropy_weight == 1e-3  # imitation_learning.json: "entropy_weight": 0.001
    assert paper.rl_lr_start == 1e-4  # config_files/run_doppler/rl_simulation_learning.json: "learning_rate": 0.0001
    assert paper.lr_decay_unread  # scheduler/rl_agent.py finish_episode: self.node_optim.lr = self.lr, never read by Adam
    assert (paper.rl_epsilon_start, paper.rl_epsilon_end) == (0.2, 0.0)  # rl_simulation_learning.json 0.2; run_placement.py to 0
    assert paper.rl_mode == "epsilon"  # scheduler/rl_agent.py node_selection: argmax unless rand <= epsilon
    assert paper.entropy_weight == 0.0  # rl_simulation_learning.json: "entropy_weight": 0.0
    assert paper.rollouts_per_update == 1  # run_placement.py: finish_episode once per episode
    assert paper.baseline == "cumulative_mean"  # run_placement.py: running_time_sum / (episode_id + 1) after adding this cost
    assert paper.discount == 0.99  # scheduler/rl_agent.py: finish_episode(..., gamma=0.99)
    assert paper.grad_clip == 0.0  # scheduler/rl_agent.py: loss.backward(); optim.step(), no clipping
    assert (paper.greedy_every, paper.search_samples) == (0, 0)  # run_placement.py: last weights
    assert paper.policy_preset == "paper"
    assert TrainConfig.paper((CHAIN,), seed=3).seed == 3
    default = TrainConfig(graphs=(CHAIN,))
    assert (default.discount, default.baseline, default.il_epsilon_decay, default.lr_decay_unread) == (1.0, "running_mean", False, False)


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [({"discount": 0.0}, "discount"), ({"baseline": "median"}, "baseline"), ({"policy_preset": "x"}, "policy_preset")],
)
def test_bad_preset_switches_are_refused_by_name(changes, fragment):
    with pytest.raises(ValueError, match=fragment):
        TrainConfig(graphs=(CHAIN,), **changes)


def test_path_sum_order_bug_needs_the_per_step_select_inputs():
    with pytest.raises(ValueError, match="path_sum_order_bug"):
        PolicyConfig(path_sum_order_bug=True)


# --- network switches ----------------------------------------------------------------------------------
def test_sum_and_mean_aggregation_give_different_embeddings_from_the_same_weights():
    inputs = graph_tensors(wb.bundled_graph("ffnn"), torch.device("cpu"))
    torch.manual_seed(0)
    summed = Encoder(16, 2, 8, "sum")
    averaged = Encoder(16, 2, 8, "mean")
    averaged.load_state_dict(summed.state_dict())
    with torch.no_grad():
        a, b = summed(inputs), averaged(inputs)
    assert not torch.allclose(a, b, atol=1e-3)
    single = graph_tensors(DataflowGraph(compute=[1.0, 2.0], src=[0], dst=[1], comm=[1.0]), torch.device("cpu"))
    with torch.no_grad():  # with one message per op, sum and mean agree
        torch.testing.assert_close(summed(single), averaged(single))


@pytest.mark.parametrize("aggregator", ["sum", "mean"])
def test_grouped_edge_conv_equals_the_sparse_path(aggregator):
    inputs = graph_tensors(wb.bundled_graph("transformer_block"), torch.device("cpu"))
    torch.manual_seed(1)
    conv = EdgeConv(16, 40, aggregator)
    torch.nn.init.normal_(conv.bias)
    edge_net = torch.nn.Sequential(torch.nn.Linear(inputs.edge.shape[1], 40), torch.nn.ReLU())
    feat, hidden = torch.randn(inputs.num_nodes, 16), edge_net(inputs.edge)
    groups = EdgeConv.edge_groups(inputs.edge)
    assert len(groups[2]) < inputs.edge.shape[0] // 4  # few distinct edge rows: the point of grouping
    torch.testing.assert_close(
        conv.grouped(inputs.graph, feat, hidden[groups[2]], groups), conv(inputs.graph, feat, hidden), rtol=1e-4, atol=1e-4
    )


def test_zscore_gives_zero_mean_unit_std_columns_and_ignores_masked_rows():
    torch.manual_seed(2)
    devices = torch.rand(4, 5) * 1e3
    devices[:, 2] = 7.0  # a constant column (all devices alike) maps to 0
    z = zscore(devices)
    torch.testing.assert_close(z.mean(0), torch.zeros(5), atol=1e-5, rtol=0)
    torch.testing.assert_close(z[:, [0, 1, 3, 4]].std(0, unbiased=False), torch.ones(4), atol=1e-3, rtol=0)
    assert torch.equal(z[:, 2], torch.zeros(4))
    np.testing.assert_allclose(numpy_zscore(devices.double().numpy()), z.double().numpy(), atol=1e-5)
    steps = torch.rand(3, 6, 2, requires_grad=True)
    legal = torch.tensor([[1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.bool)
    masked = zscore(steps, dim=1, mask=legal)
    torch.testing.assert_close(masked[0, :3], zscore(steps[0, :3]))
    assert torch.equal(masked[1], torch.zeros(6, 2)) and torch.equal(masked[0, 3:], torch.zeros(3, 2))
    masked.pow(2).sum().backward()  # a single ready op (zero spread) must not make the gradient NaN
    assert torch.isfinite(steps.grad).all()


def test_traversal_order_is_depth_first_from_the_entries_in_id_order():
    graph = DataflowGraph(compute=np.ones(5), src=[0, 1, 0, 2], dst=[2, 2, 3, 4], comm=np.ones(4))
    assert traversal_order(graph, downward=True).tolist() == [0, 2, 4, 3, 1]
    assert traversal_order(graph, downward=False).tolist() == [3, 0, 4, 2, 1]


def _spy_head_terms(monkeypatch):
    import workbench.learn.choice as choice

    captured, original = [], choice.head_terms

    def spy(logits, legal, chosen, teacher):
        captured.append((logits.detach(), legal, chosen))
        return original(logits, legal, chosen, teacher)

    monkeypatch.setattr(choice, "head_terms", spy)
    return captured


@pytest.mark.parametrize("device_zscore", [True, False])
def test_paper_policy_scores_its_steps_as_it_chose_them(monkeypatch, device_zscore):
    """Per-step numpy logits (the rollout) and the batched torch logits (the gradient) agree: greedy picks their argmax."""
    captured = _spy_head_terms(monkeypatch)
    torch.manual_seed(3)
    config = dataclasses.replace(PolicyConfig.paper(), width=32, edge_hidden=32, zscore_device_features=device_zscore)
    policy = make_policy("doppler", config)
    rollout = policy.rollout(wb.bundled_graph("chain_mm"), 4, mode="greedy", generator=torch.Generator().manual_seed(0))
    assert len(captured) == 2
    for logits, legal, chosen in captured:
        assert torch.equal(logits.masked_fill(~legal, -torch.inf).argmax(-1), chosen)
    rollout.log_prob.backward()
    assert all(torch.isfinite(p.grad).all() for p in policy.parameters() if p.grad is not None)
    assert rollout.step_log_prob.shape == (rollout.steps,)
    torch.testing.assert_close(rollout.step_log_prob.sum(), rollout.log_prob)


def test_ready_set_normalisation_makes_an_ops_score_depend_on_the_other_ready_ops():
    torch.manual_seed(4)
    config = dataclasses.replace(PolicyConfig.paper(), width=16, edge_hidden=16)
    policy = make_policy("doppler", config)
    inputs = graph_tensors(wb.bundled_graph("transformer_block"), torch.device("cpu"))
    with torch.no_grad():
        e = policy.encode(inputs)
    ready_a, ready_b = np.array([0, 40, 80]), np.array([0, 40, 120, 160])
    logits_a = policy.numpy_ready_select_logits(e, ready_a, e.sel_down_np, e.sel_up_np)
    logits_b = policy.numpy_ready_select_logits(e, ready_b, e.sel_down_np, e.sel_up_np)
    assert abs((logits_a[0] - logits_a[1]) - (logits_b[0] - logits_b[1])) > 1e-6


def test_critical_path_index_bug_selects_the_first_ready_op():
    graph = wb.bundled_graph("transformer_block")
    config = dataclasses.replace(PolicyConfig(), critical_path_index_bug=True)
    torch.manual_seed(5)
    buggy = make_policy("doppler_plc_only", config).rollout(graph, 4, mode="greedy")
    fixed = make_policy("doppler_plc_only").rollout(graph, 4, mode="greedy")
    waiting, expected = graph.in_degree.copy(), []
    ready = set(np.flatnonzero(waiting == 0).tolist())
    while ready:
        op = min(ready)
        expected.append(op)
        ready.remove(op)
        for succ in graph.successors(op).tolist():
            waiting[succ] -= 1
            if waiting[succ] == 0:
                ready.add(succ)
    assert buggy.order.tolist() == expected
    assert fixed.order.tolist() != expected


# --- training switches ---------------------------------------------------------------------------------
def test_discounted_log_prob_weights_step_t_by_gamma_to_the_remaining_steps():
    steps = torch.tensor([-1.0, -2.0, -3.0])
    rollout = types.SimpleNamespace(log_prob=steps.sum(), step_log_prob=steps)
    assert float(discounted_log_prob(rollout, 0.5)) == pytest.approx(0.25 * -1 + 0.5 * -2 + -3)
    assert float(discounted_log_prob(rollout, 1.0)) == -6.0
    with pytest.raises(ValueError, match="per-step"):
        discounted_log_prob(types.SimpleNamespace(log_prob=steps.sum(), step_log_prob=None), 0.9)


class _FixedPolicy(torch.nn.Module):
    """Returns rollouts with a given log-probability; their makespans come from a list."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(()))

    def rollout(self, graph, devices, **options):
        steps = self.weight + torch.tensor([-1.0, -1.0])
        return types.SimpleNamespace(assignment=np.zeros(2, dtype=np.int64), log_prob=steps.sum(), step_log_prob=steps, entropy=self.weight)


def test_cumulative_mean_baseline_includes_the_current_episode():
    config = TrainConfig.paper((CHAIN,), discount=1.0)
    makespans = iter([10.0, 20.0, 60.0])
    oracle = types.SimpleNamespace(measure=lambda graph, assignment: next(makespans))
    policy = _FixedPolicy()
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.0)
    baseline, seen = None, []
    for episode in range(3):
        (step,) = reinforce_update(policy, optimizer, None, oracle, 10.0, baseline, 0.0, config, None, seen=episode)
        baseline = step["new_baseline"]
        seen.append((step["reward"], step["baseline"]))
    assert seen == [(-1.0, -1.0), (-2.0, pytest.approx(-1.5)), (-6.0, pytest.approx(-3.0))]


def test_unread_lr_decay_keeps_the_learning_rate_constant():
    params = [torch.nn.Parameter(torch.zeros(1))]
    for unread, last in ((True, 1e-4), (False, 1e-7)):
        optimizer = torch.optim.Adam(params, lr=1e-4)
        scheduler = make_scheduler(optimizer, TrainConfig(graphs=(CHAIN,), lr_decay_unread=unread), 10)
        for _ in range(9):
            optimizer.step()
            scheduler.step()
        assert optimizer.param_groups[0]["lr"] == pytest.approx(last)


def test_paper_preset_trains_end_to_end_with_decaying_imitation_epsilon(tmp_path):
    config = TrainConfig.paper(("chain_mm",), episodes=(5, 3), device="cpu")
    config = config.replace(stages=("il", "sim"))
    result = train(dataclasses.replace(config), tmp_path / "run", progress=False)
    assert result.status == "finished"
    rows = read_rows(tmp_path / "run" / "metrics.csv")
    assert [float(r["epsilon"]) for r in rows if r["stage"] == "il"] == pytest.approx([1.0, 0.75, 0.5, 0.25, 0.0])
    sim = [r for r in rows if r["stage"] == "sim"]
    assert float(sim[0]["baseline"]) == float(sim[0]["reward"])  # the first advantage is 0
    assert {float(r["lr"]) for r in sim} == {1e-4}


# --- where the preset's runs are used ------------------------------------------------------------------
def test_reproduce_keeps_paper_preset_runs_for_the_doppler_paper_row(tmp_path):
    import json

    from workbench.sweeps.paper import ROWS
    from workbench.sweeps.reproduce import find_checkpoint

    for name, preset in (("ours", None), ("paper", "paper")):
        run = tmp_path / name
        (run / "checkpoints").mkdir(parents=True)
        (run / "checkpoints" / "sim.safetensors").write_bytes(b"weights")
        (run / "meta.json").write_text(json.dumps({"method": "doppler", "graphs": [CHAIN], "updated": name}))
        (run / "config.json").write_text(json.dumps({} if preset is None else {"policy_preset": preset}))
    assert find_checkpoint("doppler", CHAIN, "sim", tmp_path) == tmp_path / "ours" / "checkpoints" / "sim.safetensors"
    assert find_checkpoint("doppler", CHAIN, "sim", tmp_path, "paper") == tmp_path / "paper" / "checkpoints" / "sim.safetensors"
    assert find_checkpoint("doppler", "ffnn_192nodes", "sim", tmp_path, "paper") is None  # never the shipped (default) policy
    assert [row.preset for row in ROWS if row.label.startswith("doppler-paper")] == ["paper"]


def test_the_training_benchmark_trains_doppler_paper_with_the_preset():
    from workbench.bench.training import VARIANTS

    (variant,) = [v for v in VARIANTS if v.name == "doppler-paper"]
    assert variant.preset == "paper" and not variant.settings


def test_cli_preset_paper_starts_from_the_paper_config_and_applies_options_on_top(tmp_path):
    import json

    from workbench.cli import main

    out = tmp_path / "run"
    code = main(["train", "chain_mm", "--preset", "paper", "--episodes", "2,1", "--set", "device=cpu", "--out", str(out), "--no-progress"])
    assert code == 0
    config = json.loads((out / "config.json").read_text())
    assert config["episodes"] == [2, 1] and config["device"] == "cpu"
    assert (config["policy_preset"], config["discount"], config["baseline"], config["grad_clip"]) == ("paper", 0.99, "cumulative_mean", 0.0)
