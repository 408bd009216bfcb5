"""The STG 50-task set: no placer may ever report a makespan below the proven optimum.

STG graphs have no communication costs; ``optimal_makespans.csv`` holds the
proven optimum of every graph on 2, 4, 8 and 16 processors (51 rows instead
hold a proven lower bound and the best known makespan). A makespan below the
proven floor, or a CP-SAT bound above the best known makespan, means the
simulator or the method is wrong. The test takes a sample of graphs; ``workbench bench placers`` runs
every graph with every method.
"""

from __future__ import annotations

import pytest

import workbench as wb
from workbench.bench.placers import stg_optima
from workbench.datasets import stg_graphs
from workbench.placers import methods

HEURISTICS = methods("baseline", "random", "heuristic")
SAMPLE = stg_graphs()[::30]  # 6 of the 180 graphs


OPTIMA = stg_optima()


def key(path) -> str:
    return f"{path.parent.name}/{path.name}"


def test_every_bundled_graph_has_an_optimum_for_each_processor_count():
    assert len(stg_graphs()) == 180
    for path in stg_graphs():
        for processors in (2, 4, 8, 16):
            assert (key(path), processors) in OPTIMA


@pytest.mark.parametrize("path", SAMPLE, ids=key)
def test_no_method_beats_the_proven_optimum(path):
    graph = wb.load_graph(path)
    assert graph.total_comm == 0
    for processors in (2, 4, 8, 16):
        floor, _ = OPTIMA[key(path), processors]
        assert wb.lower_bound(graph, processors) <= floor
        for method in HEURISTICS:
            assert wb.place(graph, method=method, devices=processors).makespan >= floor, method
        searched = wb.place(graph, method="local_search", devices=processors, budget=400)
        assert searched.makespan >= floor


def test_unproven_rows_hold_a_floor_below_the_best_known_makespan():
    unproven = {k: v for k, v in OPTIMA.items() if v[0] != v[1]}
    assert len(unproven) == 51
    assert all(floor < best for floor, best in unproven.values())


# rand0060 on 2 processors is one of the unproven rows (157 .. 165): CP-SAT proves 165.
@pytest.mark.parametrize("path", [SAMPLE[0], SAMPLE[2]], ids=key)
def test_cpsat_bound_never_exceeds_the_best_known_and_its_makespan_never_beats_the_floor(path):
    graph = wb.load_graph(path)
    for processors in (2, 4):
        floor, best_known = OPTIMA[key(path), processors]
        placement = wb.place(graph, method="cpsat", devices=processors, time_limit=3.0, workers=1)
        assert floor <= placement.makespan
        assert placement.details["proven_lower_bound"] <= best_known
        if placement.details["optimal_in_model"]:
            assert floor <= placement.details["model_makespan"] <= best_known
