"""Issue 20's plateau options: random node features, dense return, shared baseline, selection by best-of-K."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

os.environ.setdefault("DGLBACKEND", "pytorch")

import workbench as wb
from workbench.learn import PolicyConfig, make_policy
from workbench.runs import read_meta, read_rows
from workbench.training import TrainConfig, train
from workbench.training.reinforce import reinforce_update, transfer_wait

from .conftest import save_trained_for

SMALL = dict(width=16, message_passing_steps=2, head_hidden=(16,), attention_heads=2)
NOISE = 3
CHAIN = wb.bundled_graph("chain_mm")
PAIR = wb.DataflowGraph.from_edges([2.0, 3.0], [(0, 1, 5.0)])


@pytest.fixture(scope="module")
def noisy():
    torch.manual_seed(0)
    return make_policy("doppler", PolicyConfig(random_features=NOISE, **SMALL))


def recorded_noise(policy, run) -> list[torch.Tensor]:
    """The noise columns every encoder pass of ``run()`` saw."""
    seen, encode = [], policy.encode
    policy.encode = lambda inputs: seen.append(inputs.node[:, -NOISE:].clone()) or encode(inputs)
    try:
        run()
    finally:
        del policy.encode
    return seen


def test_random_features_are_drawn_anew_per_rollout_and_fixed_by_the_seed(noisy):
    def three(seed):
        return recorded_noise(noisy, lambda: noisy.rollouts(CHAIN, 4, 3, generator=torch.Generator().manual_seed(seed)))

    first, again, other = three(5), three(5), three(6)
    assert len(first) == 3 and first[0].shape == (CHAIN.num_nodes, NOISE)
    assert not torch.equal(first[0], first[1]) and not torch.equal(first[1], first[2])
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not any(torch.equal(a, b) for a, b in zip(first, other, strict=True))
    assert float(first[0].min()) >= 0 and float(first[0].max()) < 1
    greedy = [noisy.rollout(CHAIN, 4, mode="greedy").assignment for _ in range(2)]  # no generator: draw 0, every time
    assert np.array_equal(*greedy)


def test_best_of_k_over_draws_is_never_worse_than_greedy(tmp_path, noisy):
    path = tmp_path / "doppler.safetensors"
    save_trained_for(noisy, path, [CHAIN], 4)
    greedy = wb.place(CHAIN, "doppler", devices=4, checkpoint=path)
    found = wb.place(CHAIN, "doppler", devices=4, checkpoint=path, samples=5, seed=3)
    assert found.details["makespans"][0] == greedy.makespan and found.makespan == min(found.details["makespans"]) <= greedy.makespan
    assert found.details["winner"] == "greedy" or found.details["winner"].startswith("draw ")
    draws = noisy.candidates(CHAIN, 4, 5, seed=3)
    noise = recorded_noise(noisy, lambda: noisy.candidates(CHAIN, 4, 5, seed=3))
    assert len(draws) == 5 and len({n.sum().item() for n in noise}) == 5  # five different draws, the greedy one included
    assert [r.assignment.tolist() for r in draws] == [r.assignment.tolist() for r in noisy.candidates(CHAIN, 4, 5, seed=3)]


def test_policy_options_reach_the_networks_and_survive_a_checkpoint(tmp_path, noisy):
    assert noisy.plc_device.in_features == 5 and noisy.sel_node.in_features == 5 + NOISE
    path = tmp_path / "p.safetensors"
    noisy.save(path)
    assert wb.learn.load_policy(path).config == noisy.config
    with pytest.raises(ValueError, match="inputs of the doppler policies"):
        PolicyConfig(method="gdp", random_features=2)


def test_transfer_wait_counts_only_cross_device_inputs():
    assert transfer_wait(PAIR, np.array([0, 0]), 2) == 0.0
    assert transfer_wait(PAIR, np.array([0, 1]), 2) == pytest.approx(5.0)  # comm 5 at bandwidth 1


def reinforce_steps(policy, config, count, wait_weight=0.0, shared=False):
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.0)
    oracle = wb.training.SimulatorOracle(4)
    generator = torch.Generator().manual_seed(0)
    return reinforce_update(
        policy, optimizer, CHAIN, oracle, 1e13, None, 0.0, config, generator, count, wait_weight=wait_weight, shared_baseline=shared
    )


def test_dense_return_and_shared_baseline(noisy):
    config = TrainConfig(graphs=("chain_mm",), rl_mode="sample")
    steps = reinforce_steps(noisy, config, 4, wait_weight=2.0, shared=True)
    rollouts = noisy.rollouts(CHAIN, 4, 4, mode="sample", generator=torch.Generator().manual_seed(0))
    for step, rollout in zip(steps, rollouts, strict=True):
        wait = transfer_wait(CHAIN, rollout.assignment, 4)
        assert step["reward"] == pytest.approx(-(step["makespan"] + 2.0 * wait) / 1e13)
    rewards = [s["reward"] for s in steps]
    assert all(s["baseline"] == pytest.approx(np.mean(rewards)) for s in steps)
    leave_one_out = reinforce_steps(noisy, config, 4, wait_weight=2.0)
    assert [s["baseline"] for s in leave_one_out] == pytest.approx([(sum(rewards) - r) / 3 for r in rewards])


def test_training_anneals_the_wait_weight_and_selects_by_best_of_k(tmp_path):
    config = TrainConfig(
        graphs=("chain_mm",),
        stages=("sim",),
        episodes=(3,),
        rl_mode="sample",
        transfer_wait_weight=4.0,
        policy=PolicyConfig(random_features=2),
        greedy_every=3,
        selection_samples=3,
        search_samples=2,
        device="cpu",
    )
    result = train(config, tmp_path / "run", progress=False)
    rows = read_rows(tmp_path / "run" / "metrics.csv")
    assert result.status == "finished" and len(rows) == 3
    makespans, rewards = [float(r["makespan"]) for r in rows], [float(r["reward"]) for r in rows]
    reference = read_meta(tmp_path / "run" / "meta.json")["reference"][CHAIN.name]["critical_path"]
    assert rewards[0] * reference < -makespans[0]  # λ = 4 at the first episode: the transfer wait costs too
    assert rewards[-1] * reference == pytest.approx(-makespans[-1])  # annealed to 0 at the last
    selection = read_meta(tmp_path / "run" / "meta.json")["greedy_selection_sim"]
    assert selection["evaluations"] == 2 * 3  # stage start and stage end, best of 3 each
