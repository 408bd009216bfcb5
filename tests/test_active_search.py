"""Best-of-K placement and per-instance active search for the DOPPLER policy (issue 20)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import workbench as wb
from workbench.learn import PolicyConfig, make_policy
from workbench.sim import Evaluator

SMALL = PolicyConfig(width=16, message_passing_steps=2, head_hidden=(16,), attention_heads=2)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """An untrained DOPPLER policy saved for any graph."""
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("policy") / "doppler.safetensors"
    make_policy("doppler", SMALL).save(path)
    return path


@pytest.fixture
def evaluations(monkeypatch):
    """Counts every assignment the simulator's Evaluator scores."""
    counted = [0]
    original = Evaluator.__call__

    def counting(self, assignments):
        counted[0] += np.atleast_2d(np.asarray(assignments)).shape[0]
        return original(self, assignments)

    monkeypatch.setattr(Evaluator, "__call__", counting)
    return counted


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_best_of_k_is_never_worse_than_greedy_and_costs_k_evaluations(checkpoint, evaluations, seed):
    graph = wb.bundled_graph("chain_mm")
    greedy = wb.place(graph, "doppler", devices=4, checkpoint=checkpoint)
    evaluations[0] = 0
    best = wb.place(graph, "doppler", devices=4, checkpoint=checkpoint, samples=6, seed=seed)
    assert evaluations[0] == 6 and best.details["evaluations"] == 6
    assert best.makespan <= greedy.makespan
    assert best.makespan == min(best.details["makespans"]) and best.details["makespans"][0] == greedy.makespan
    winner = best.details["winner"]
    index = 0 if winner == "greedy" else int(winner.split()[1])
    assert best.details["makespans"][index] == best.makespan
