"""Population search (uniform and with the move scorer's learned table): exact counting, determinism, its table."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.learn.learned_population import LearnedPopulationPlacer, scorer_table
from workbench.placers.best_constructive import BestConstructivePlacer, constructive_methods, constructive_starts
from workbench.placers.population import PopulationSearchPlacer, uniform_table
from workbench.placers.registry import PlacerError

from .conftest import small_dag as dag
from .test_placers import brute_force_optimum


def test_population_search_counts_every_evaluation_and_is_seeded():
    graph = wb.bundled_graph("ffnn")
    first = PopulationSearchPlacer(budget=300).place(graph, 4, seed=1)
    again = PopulationSearchPlacer(budget=300).place(graph, 4, seed=1)
    assert first.details["evaluations"] == 300 and first.details["anytime"][-1][0] == 300
    np.testing.assert_array_equal(first.assignment, again.assignment)
    assert [point[:2] for point in first.details["anytime"]] == [point[:2] for point in again.details["anytime"]]
    best = [point[1] for point in first.details["anytime"]]
    assert best == sorted(best, reverse=True)
    assert wb.simulate(graph, first.assignment, 4).makespan == best[-1] <= first.details["start_makespan"]


def test_population_search_starts_from_every_one_pass_method_counted():
    graph = wb.bundled_graph("ffnn")
    starts = len(constructive_methods())
    only_starts = PopulationSearchPlacer(budget=starts).place(graph, 4)
    fair = BestConstructivePlacer().place(graph, 4)
    assert only_starts.details["evaluations"] == starts and only_starts.details["generations"] == 0
    np.testing.assert_array_equal(only_starts.assignment, fair.assignment)
    assert only_starts.details["start_method"] == fair.details["start_method"]
    with pytest.raises(PlacerError, match=f"budget must be at least {starts} evaluations"):
        PopulationSearchPlacer(budget=starts - 1)


@pytest.mark.parametrize("name", ["diamond", "fork", "join", "independent"])
def test_population_search_finds_the_brute_force_optimum_and_stops_when_nothing_is_unseen(name):
    graph = dag(name)
    placement = PopulationSearchPlacer(budget=400).place(graph, 2)
    assert wb.simulate(graph, placement.assignment, 2).makespan == brute_force_optimum(graph, 2)
    _, starts = constructive_starts(graph, 2)
    unseen = 2**graph.num_nodes - len(np.unique(starts, axis=0))
    assert placement.details["evaluations"] <= len(starts) + unseen  # every start once, then no assignment twice


def test_population_search_refuses_bad_options_in_one_line():
    for options, message in [
        ({"population": 0}, "population and offspring must be >= 1"),
        ({"elite": 0}, "elite must be in"),
        ({"crossover": 1.5}, "crossover and inherit must be in"),
        ({"mutations": 0.5}, "mutations must be >= 1"),
        ({"starts": "some"}, "starts must be one of"),
    ]:
        with pytest.raises(PlacerError, match=message):
            PopulationSearchPlacer(**options)


def test_the_scorer_table_is_a_distribution_over_moves_that_mixes_in_the_uniform_one():
    graph = wb.bundled_graph("ffnn")
    scorer = LearnedPopulationPlacer().scorer
    _, starts = constructive_starts(graph, 4)
    start = starts[0]
    table = scorer_table(scorer, graph, 4, start, temperature=0.2, explore=0.0)
    assert table.shape == (graph.num_nodes, 4) and np.isclose(table.sum(), 1.0)
    assert np.all(table[np.arange(graph.num_nodes), start] == 0)  # staying put is no mutation
    sharp, soft = (scorer_table(scorer, graph, 4, start, t, 0.0).max() for t in (0.05, 1.0))
    assert sharp > soft
    mixed = scorer_table(scorer, graph, 4, start, temperature=0.2, explore=0.3)
    np.testing.assert_allclose(mixed, 0.7 * table + 0.3 * uniform_table(graph.num_nodes, 4))


def test_learned_population_counts_its_table_trace_and_is_seeded():
    graph = wb.bundled_graph("ffnn")
    starts = len(constructive_methods())
    table_only = LearnedPopulationPlacer(budget=starts + 1).place(graph, 4)
    assert table_only.details["evaluations"] == starts + 1 and table_only.details["generations"] == 0
    first = LearnedPopulationPlacer(budget=200, refresh=0).place(graph, 4, seed=5)
    again = LearnedPopulationPlacer(budget=200, refresh=0).place(graph, 4, seed=5)
    assert first.details["evaluations"] == 200
    np.testing.assert_array_equal(first.assignment, again.assignment)
    assert wb.simulate(graph, first.assignment, 4).makespan <= first.details["start_makespan"]
    assert first.details["tables"] == 1
    refreshed = LearnedPopulationPlacer(budget=200, refresh=1).place(graph, 4, seed=5)
    assert refreshed.details["evaluations"] == 200 and refreshed.details["tables"] > 1  # each table's trace counted in the 200
    with pytest.raises(PlacerError, match="refresh must be >= 0"):
        LearnedPopulationPlacer(refresh=-1)
    with pytest.raises(PlacerError, match="temperature must be > 0"):
        LearnedPopulationPlacer(temperature=0)
    with pytest.raises(PlacerError, match="explore must be in"):
        LearnedPopulationPlacer(explore=2)


def test_the_population_benchmark_tabulates_every_variant_against_local_search():
    from workbench.bench.population import compare

    table = compare({"uniform": {"table": "uniform"}, "learned": {}}, devices=(4,), seeds=range(1), budgets=(12,), cpu_budget=12)
    rows = [line for line in table.splitlines() if line.startswith("| 4 |")]
    assert [row.split(" | ")[1] for row in rows] == ["uniform", "learned"]
    assert all(row.count("(") == 2 and row.endswith("× |") for row in rows)  # the ratio at 12 evaluations and at equal CPU
    with pytest.raises(ValueError, match="table must be one of uniform, learned"):
        compare({"bad": {"table": "gnn"}})
