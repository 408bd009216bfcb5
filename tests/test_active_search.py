"""Best-of-K placement and per-instance active search for the DOPPLER policy (issue 20)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import workbench as wb
from workbench.learn import PolicyConfig, make_policy
from workbench.placers.local_search import LocalSearchPlacer
from workbench.sim import Evaluator

from .conftest import save_trained_for

SMALL = PolicyConfig(width=16, message_passing_steps=2, head_hidden=(16,), attention_heads=2)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """An untrained DOPPLER policy saved for any graph (cross-graph)."""
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("policy") / "doppler.safetensors"
    save_trained_for(make_policy("doppler", SMALL), path, [wb.bundled_graph("chain_mm"), wb.bundled_graph("ffnn")], 4, cross_graph=True)
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
    # local_search's compiled loop simulates inside numba, out of this count's sight: polish with its Python loop, whose
    # trajectory and count the compiled one equals (tests/test_local_search_kernel.py)
    monkeypatch.setattr(LocalSearchPlacer, "_compiled_loop", LocalSearchPlacer._python_loop)
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


@pytest.mark.parametrize("budget", [1, 7, 21])
def test_active_search_honours_its_budget_exactly_and_never_loses_its_start(checkpoint, evaluations, budget):
    graph = wb.bundled_graph("chain_mm")
    greedy = wb.place(graph, "doppler", devices=4, checkpoint=checkpoint)
    evaluations[0] = 0
    found = wb.place(graph, "doppler", devices=4, checkpoint=checkpoint, search="active", budget=budget, rollouts=4)
    assert evaluations[0] == budget and found.details["evaluations"] == budget
    assert found.details["start_makespan"] == greedy.makespan
    assert found.makespan <= greedy.makespan
    assert 1 <= found.details["found_at_evaluation"] <= budget


def test_active_search_is_fixed_by_its_seed(checkpoint):
    graph = wb.bundled_graph("chain_mm")
    runs = [wb.place(graph, "doppler", devices=4, checkpoint=checkpoint, search="active", budget=24, rollouts=4, seed=s) for s in (3, 3, 4)]
    assert np.array_equal(runs[0].assignment, runs[1].assignment)

    def without_clock(details):  # CPU seconds are measured, not seeded
        return {**details, "anytime": [point[:2] for point in details["anytime"]]}

    assert without_clock(runs[0].details) == without_clock(runs[1].details)
    assert runs[0].details["found_at_evaluation"] != runs[2].details["found_at_evaluation"] or not np.array_equal(
        runs[0].assignment, runs[2].assignment
    )


def test_a_short_active_search_improves_on_a_greedy_start_that_is_not_optimal(checkpoint):
    graph = wb.bundled_graph("chain_mm")
    greedy = wb.place(graph, "doppler", devices=4, checkpoint=checkpoint)
    assert greedy.makespan > greedy.lower_bound  # room to improve
    found = wb.place(graph, "doppler", devices=4, checkpoint=checkpoint, search="active", budget=64, rollouts=8)
    assert found.makespan < greedy.makespan and found.details["found_at_evaluation"] > 1


def test_active_search_leaves_the_policy_unchanged(checkpoint):
    from workbench.learn import load_policy
    from workbench.learn.active_search import ActiveSearchConfig, active_search

    policy = load_policy(checkpoint)
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    active_search(policy, wb.bundled_graph("chain_mm"), 4, ActiveSearchConfig(budget=9, rollouts=4))
    assert all(torch.equal(before[k], v) for k, v in policy.state_dict().items())
    assert all(p.requires_grad for p in policy.parameters())


@pytest.mark.parametrize(
    "options, message",
    [
        ({"search": "beam"}, "search must be one of none, active"),
        ({"search": "active", "samples": 4}, "do not combine"),
        ({"search": "active", "budget": 0}, "budget must be >= 1"),
        ({"search": "active", "rollouts": 0}, "rollouts must be >= 1"),
        ({"search": "active", "learning_rate": 0}, "learning_rate must be > 0"),
        ({"search": "active", "polish": 1.0}, "polish must be in"),
    ],
)
def test_bad_search_options_are_refused(checkpoint, options, message):
    with pytest.raises(ValueError, match=message):
        wb.place(wb.bundled_graph("chain_mm"), "doppler", devices=4, checkpoint=checkpoint, **options)


def test_search_options_are_listed_by_the_registry():
    from workbench.placers import placer_options

    assert {"search", "budget", "rollouts", "learning_rate", "imitation_weight"} <= set(placer_options("doppler"))
    assert "search" not in placer_options("placeto")


@pytest.mark.parametrize("budget", [2, 9, 40])
def test_polished_active_search_honours_its_budget_and_never_loses_its_start(checkpoint, evaluations, budget, monkeypatch):
    from workbench.placers.local_search import Moves

    graph = wb.bundled_graph("ffnn")
    greedy = wb.place(graph, "doppler", devices=4, checkpoint=checkpoint)
    traced = Moves.set_critical  # local search also simulates with a trace now and then (one evaluation each)
    monkeypatch.setattr(Moves, "set_critical", lambda *a: evaluations.__setitem__(0, evaluations[0] + 1) or traced(*a))
    evaluations[0] = 0
    found = wb.place(graph, "doppler", devices=4, checkpoint=checkpoint, search="active", budget=budget, rollouts=4, polish=0.5)
    assert evaluations[0] == budget and found.details["evaluations"] == budget
    assert found.details["polished_evaluations"] == min(budget // 2, budget - 1)
    assert found.makespan <= greedy.makespan


def test_active_search_adapts_a_policy_with_random_features_from_its_greedy_draw(tmp_path, evaluations):
    torch.manual_seed(1)
    path = tmp_path / "noisy.safetensors"
    graph = wb.bundled_graph("chain_mm")
    noisy = make_policy("doppler", PolicyConfig(random_features=2, **{k: getattr(SMALL, k) for k in ("width", "message_passing_steps")}))
    save_trained_for(noisy, path, [graph], 4)
    greedy = wb.place(graph, "doppler", devices=4, checkpoint=path)
    evaluations[0] = 0
    found = wb.place(graph, "doppler", devices=4, checkpoint=path, search="active", budget=12, rollouts=4)
    assert evaluations[0] == 12 and found.details["start_makespan"] == greedy.makespan and found.makespan <= greedy.makespan


def test_interleaved_polishing_splits_its_share_into_rounds_each_from_the_best_so_far(checkpoint, evaluations, monkeypatch):
    from workbench.learn import active_search as module

    graph, bursts = wb.bundled_graph("ffnn"), []
    original = module.place

    def recording(graph, method, devices, seed, budget, time_limit, start):
        placement = original(graph, method, devices, seed=seed, budget=budget, time_limit=time_limit, start=start)
        bursts.append((budget, float(Evaluator(graph, devices)(start)), placement.makespan))
        return placement

    monkeypatch.setattr(module, "place", recording)
    found = wb.place(graph, "doppler", devices=4, checkpoint=checkpoint, search="active", budget=61, rollouts=4, polish=0.5, rounds=3)
    assert [b[0] for b in bursts] == [10, 10, 10] and found.details["polished_evaluations"] == 30
    assert found.details["evaluations"] == 61 and found.details["steps"] > 0
    for (_, _, polished), (_, next_start, _) in itertools.pairwise(bursts):
        assert next_start <= polished  # the next burst starts from the best so far, the polished placement included
    assert found.makespan <= min(b[2] for b in bursts)


def test_a_time_limit_stops_active_search_early_with_its_best_so_far(checkpoint, evaluations):
    graph = wb.bundled_graph("chain_mm")
    greedy = wb.place(graph, "doppler", devices=4, checkpoint=checkpoint)
    evaluations[0] = 0
    found = wb.place(graph, "doppler", devices=4, checkpoint=checkpoint, search="active", budget=500, polish=0.5, time_limit=1e-9)
    assert evaluations[0] == 1 and found.details["evaluations"] == 1 and found.makespan == greedy.makespan


def test_active_search_shows_the_evaluations_spent_and_its_gain_over_the_greedy_start(checkpoint, capsys):
    graph = wb.bundled_graph("chain_mm")
    found = wb.place(graph, "doppler", devices=4, checkpoint=checkpoint, search="active", budget=40, polish=0.5, progress=True)
    bar = capsys.readouterr().err.splitlines()[-1]
    assert bar.startswith("active search") and "40/40" in bar
    assert f"best={found.makespan:.6g}, gain={1 - found.makespan / found.details['start_makespan']:.2%}" in bar
    wb.place(graph, "doppler", devices=4, checkpoint=checkpoint, search="active", budget=40)
    assert capsys.readouterr().err == "", "no bar unless asked"


def test_place_cli_runs_active_search_with_a_polish_share(checkpoint, capsys):
    import json

    from workbench.cli import main

    options = ["--option", f"checkpoint={checkpoint}", "--option", "search=active", "--option", "polish=0.5"]
    assert main(["place", "chain_mm", "--method", "doppler", *options, "--budget", "12", "--json"]) == 0
    details = json.loads(capsys.readouterr().out)["details"]
    assert details["evaluations"] == 12 and details["polished_evaluations"] == 6 and details["search"] == "active"


def test_active_search_starts_from_the_zero_shot_policy_on_a_graph_it_never_saw():
    from workbench.runs import zero_shot_checkpoint

    graph = wb.generate("layered", layers=4, width=5, ccr=2.0, seed=11)  # in no corpus split
    greedy = wb.place(graph, "doppler_plc_only", devices=3, checkpoint=zero_shot_checkpoint())
    searched = wb.place(graph, "doppler_plc_only", devices=3, checkpoint=zero_shot_checkpoint(), search="active", budget=30, seed=0)
    assert searched.evaluations == 30 and searched.details["start_makespan"] == greedy.makespan  # the gate's greedy placement first
    assert searched.makespan <= greedy.makespan
