"""The fair baseline: best_constructive and local_search's start, counted exactly; CPU time recorded for every method."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import workbench as wb
from workbench.placers import REGISTRY, PlacerError, methods
from workbench.placers.best_constructive import constructive_methods
from workbench.runs import zero_shot_checkpoint

from .conftest import random_dags, small_dag

FAST_OPTIONS = {"local_search": {"budget": 60}, "cpsat": {"time_limit": 2.0, "workers": 1}}
CORE_PLACERS = [name for name, entry in REGISTRY.items() if entry.module.startswith("workbench.placers.")]


def each_constructive(graph: wb.DataflowGraph, devices: int, starts: str = "all") -> dict[str, float]:
    return {m: wb.place(graph, method=m, devices=devices).makespan for m in constructive_methods(starts)}


def test_the_fair_start_set_is_every_one_pass_method_rules_included():
    assert set(constructive_methods()) == set(methods("heuristic", "rule", "baseline"))
    assert "affinity" in constructive_methods() and "affinity" not in constructive_methods("literature")
    assert "random" not in constructive_methods() and "local_search" not in constructive_methods()
    with pytest.raises(PlacerError, match="starts must be one of all, literature"):
        wb.place(small_dag("diamond"), method="local_search", devices=2, starts="heuristics")


@given(graph=random_dags(max_nodes=12), devices=st.integers(2, 4))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_best_constructive_is_the_best_one_pass_method_at_one_evaluation_each(graph, devices):
    makespans = each_constructive(graph, devices)
    best = wb.place(graph, method="best_constructive", devices=devices)
    assert best.makespan == min(makespans.values())
    assert best.details["start_method"] == min(makespans, key=makespans.get)  # the first of equal ones
    assert best.evaluations == best.details["evaluations"] == len(constructive_methods())
    assert best.details["makespans"] == pytest.approx(makespans)


@pytest.mark.parametrize("starts", ["all", "literature"])
@pytest.mark.parametrize("name", ["ffnn", "transformer_block"])
def test_local_search_at_a_budget_of_its_starts_returns_the_best_start_exactly(name, starts):
    graph = wb.bundled_graph(name)
    count = len(constructive_methods(starts))
    makespans = each_constructive(graph, 4, starts)
    search = wb.place(graph, method="local_search", devices=4, budget=count, starts=starts)
    assert search.evaluations == count  # one per start, none left for a move
    assert search.makespan == min(makespans.values()) and search.details["start_method"] == min(makespans, key=makespans.get)
    with pytest.raises(PlacerError, match=f"budget must be at least {count} evaluations"):
        wb.place(graph, method="local_search", devices=4, budget=count - 1, starts=starts)


def test_the_fair_start_never_loses_to_the_literature_start_on_a_paper_graph():
    graph = wb.bundled_graph("transformer_block")
    fair = wb.place(graph, method="best_constructive", devices=8)
    literature = wb.place(graph, method="best_constructive", devices=8, starts="literature")
    assert fair.makespan <= literature.makespan and fair.evaluations == literature.evaluations + len(methods("rule"))


@pytest.mark.parametrize("method", CORE_PLACERS)
def test_every_placement_records_wall_and_cpu_seconds_and_the_evaluations_it_counted(method):
    graph = small_dag("diamond")
    placement = wb.place(graph, method=method, devices=2, seed=1, **FAST_OPTIONS.get(method, {}))
    assert placement.seconds >= 0 and placement.cpu_seconds >= 0 and np.isfinite(placement.cpu_seconds)
    assert placement.evaluations == placement.details.get("evaluations", 0)
    as_dict = placement.to_dict()
    assert as_dict["cpu_seconds"] == placement.cpu_seconds and as_dict["evaluations"] == placement.evaluations
    if "anytime" in placement.details:  # every search: [evaluation, best so far, CPU seconds], times never decreasing
        points = np.asarray(placement.details["anytime"])
        assert points.shape[1] == 3 and points[-1, 0] == placement.evaluations
        assert np.all(np.diff(points[:, 2]) >= 0) and 0 <= points[-1, 2] <= placement.cpu_seconds


@given(graph=random_dags(max_nodes=10), devices=st.integers(2, 4))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_guarded_learned_placement_never_loses_to_the_best_one_pass_method_and_counts_what_it_spends(graph, devices):
    policy = {"method": "doppler_plc_only", "checkpoint": zero_shot_checkpoint(), "devices": devices}
    plain = wb.place(graph, **policy)
    guarded = wb.place(graph, guard=True, **policy)
    best = wb.place(graph, method="best_constructive", devices=devices)
    assert guarded.makespan <= min(best.makespan, plain.makespan)
    assert guarded.evaluations == 1 + best.evaluations and plain.evaluations == 1
    winner = guarded.details["winner"]
    assert (winner == "greedy") == (plain.makespan <= best.makespan)  # the policy wins its ties with the rules
    if winner != "greedy":
        assert winner == f"guard {best.details['start_method']}" and guarded.makespan == best.makespan


def test_guard_and_active_search_do_not_combine():
    with pytest.raises(PlacerError, match="guard and search='active' do not combine"):
        wb.place(small_dag("diamond"), method="doppler", devices=2, guard=True, search="active")


def test_bench_learned_measures_every_method_with_its_clock_and_resumes_from_its_cache(tmp_path, monkeypatch):
    from workbench.bench import learned

    first = learned.run(quick=True, root=tmp_path)
    cells = first["cells"]
    assert {key.split("|")[2] for key in cells} == {*learned.SEARCHES, *learned.ONE_PASS}
    for key, cell in cells.items():
        method, budget = key.split("|")[2], int(key.split("|")[4])
        assert cell["cpu_seconds"] > 0 and cell["seconds"] > 0
        expected = {"best_constructive": len(constructive_methods()), "zero_shot": 1}.get(method, budget)
        assert cell["evaluations"] == expected and cell["anytime"][-1][0] == expected
    assert "| paper (1) | 4 | learned_search |" in first["markdown"] and "guarded" in first["markdown"]
    assert "local_search's speed" in first["markdown"]
    monkeypatch.setattr(learned, "measure", lambda *args: pytest.fail("a cached cell was measured again"))
    assert learned.run(quick=True, root=tmp_path)["cells"] == cells
    partial = learned.report(tmp_path, splits=["paper"], budgets=(200,), seeds=(0,))  # the pairs measured so far, nothing more
    assert "| paper (1) | 4 | learned_search |" in partial and "| paper (1) | 8 |" not in partial
    assert learned.report(tmp_path, splits=["large"]).startswith("no (graph, devices) pair is measured")


def test_the_equal_cpu_reading_takes_the_best_reached_by_then():
    from workbench.bench.learned import best_at

    curve = [[1, 10.0, 0.1], [5, 8.0, 0.4], [9, 7.0, 0.9]]
    assert best_at(curve, 0.05) == 10.0  # nothing yet: where every search begins, its starts
    assert best_at(curve, 0.4) == 8.0 and best_at(curve, 0.89) == 8.0 and best_at(curve, 5.0) == 7.0


@pytest.mark.parametrize(
    "method, options",
    [
        ("doppler", {"samples": 3}),
        ("doppler", {"search": "active", "budget": 12, "rollouts": 4}),
        ("learned_search", {"budget": 40}),
        ("doppler_plc_only", {"checkpoint": zero_shot_checkpoint()}),
    ],
)
def test_learned_placements_record_cpu_seconds_and_their_evaluations_too(method, options):
    graph = wb.bundled_graph("ffnn")
    placement = wb.place(graph, method=method, devices=4, **options)
    points = np.asarray(placement.details["anytime"])
    assert placement.cpu_seconds > 0 and placement.evaluations == points[-1, 0] == options.get("budget", options.get("samples", 1))
    assert points.shape[1] == 3 and np.all(np.diff(points[:, 2]) >= 0) and points[-1, 2] <= placement.cpu_seconds
