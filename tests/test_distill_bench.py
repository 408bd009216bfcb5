"""The distilled-policy measurement (workbench/bench/distill.py): the extra start is counted, the ratios are the placers'."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.bench import distill
from workbench.datasets import bundled_graph
from workbench.placers.best_constructive import constructive_methods
from workbench.runs import zero_shot_checkpoint


def test_the_extra_start_is_one_more_counted_start_and_a_better_one_is_kept():
    graph = bundled_graph("chain_mm")
    searched = wb.place(graph, method="local_search", devices=4, seed=0, budget=400)
    budget = len(constructive_methods()) + 1  # the starts only: no move is left
    decision = distill.LocalSearchWithStart(searched.assignment, budget=budget).place(graph, 4, seed=0)
    fair = wb.place(graph, method="best_constructive", devices=4)
    assert searched.makespan < fair.makespan  # the extra start is the best one
    assert decision.details["evaluations"] == budget
    assert decision.details["start_method"] == "policy"
    assert np.array_equal(decision.assignment, searched.assignment)
    with pytest.raises(wb.placers.PlacerError, match="budget must be at least"):
        distill.LocalSearchWithStart(searched.assignment, budget=budget - 1)


def test_one_pass_ratios_are_the_policy_over_best_constructive():
    graph, checkpoint = bundled_graph("chain_mm"), zero_shot_checkpoint()
    [row] = distill.one_pass({"a": checkpoint, "b": checkpoint}, [("chain_mm", graph, 8)])
    policy = wb.place(graph, method="doppler_plc_only", devices=8, checkpoint=checkpoint).makespan
    floor = wb.place(graph, method="best_constructive", devices=8).makespan
    assert row["best_constructive"] == floor
    assert row["a"] == row["b"] == row["a|b"] == pytest.approx(policy / floor)
    assert row["a cpu_s"] > 0
    rules = min(wb.place(graph, method=rule, devices=8).makespan for rule in ("affinity", "etf"))
    assert row[distill.RULE_PAIR] == pytest.approx(rules / floor)
    assert row["a pairs"] <= row["a"] * (1 + 1e-12)  # the gate picks one of the pairs the best of is taken over
    table = distill.markdown([row], ["a", "b"])
    assert "| a pairs | 8 |" in table and "| affinity|etf | all |" in table and "cpu_s |" not in table


def test_as_start_is_never_worse_than_its_start_and_compares_the_same_seed():
    graph, checkpoint = bundled_graph("chain_mm"), zero_shot_checkpoint()
    rows = distill.as_start(checkpoint, [("chain_mm", graph, 8)], budgets=(30,), seeds=(0, 1))
    policy = wb.place(graph, method="doppler_plc_only", devices=8, checkpoint=checkpoint).makespan
    for row in rows:
        fair = wb.place(graph, method="local_search", devices=8, seed=row["seed"], budget=30).makespan
        assert row["local_search"] == fair and row["evaluations"] == 30
        assert row["with_policy"] * fair <= policy * (1 + 1e-12)


def test_summary_counts_wins_ties_and_losses_and_names_the_worst_cell():
    rows = [{"graph": "g", "devices": d, "x": x} for d, x in ((2, 0.9), (4, 1.0), (8, 1.2), (16, 1.1))]
    assert distill.summary(rows, "x") == {
        "mean": pytest.approx(1.05),
        "worst": 1.2,
        "worst_cell": "g@8",
        "wins": 1,
        "ties": 1,
        "losses": 2,
    }


def test_a_start_policy_that_is_not_given_is_refused(capsys):
    with pytest.raises(SystemExit):
        distill.main(["a=x.safetensors", "--start", "b"])
    assert "--start b names no policy given (a)" in capsys.readouterr().err
