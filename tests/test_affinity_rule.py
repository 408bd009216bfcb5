"""The affinity rule as a registered core placer: the same placements as the imitation teacher, co-parents kept together."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import corpus
from workbench.learn.env import teacher_assignment
from workbench.placers import methods

# Two sources meet at one consumer over heavy edges: starting each source as early as possible splits them.
MEETING = wb.DataflowGraph.from_edges([1.0, 1.0, 1.0], [(0, 2, 10.0), (1, 2, 10.0)])


def test_it_is_a_rule_of_its_own_and_never_a_search_start():
    assert "affinity" in methods("rule") and "affinity" not in methods("heuristic", "baseline")


def test_it_keeps_co_parents_together_where_critical_path_splits_them():
    rule, critical = (wb.place(MEETING, method, devices=2) for method in ("affinity", "critical_path"))
    assert rule.assignment[0] == rule.assignment[1] and critical.assignment[0] != critical.assignment[1]
    assert rule.makespan == pytest.approx(3.0) and critical.makespan > 10.0


@pytest.mark.parametrize("devices", [2, 4, 8])
def test_it_places_exactly_as_the_imitation_teacher(devices):
    for entry in corpus.entries("validation")[:4]:
        graph = corpus.build(entry)
        placed = wb.place(graph, "affinity", devices=devices).assignment
        np.testing.assert_array_equal(placed, teacher_assignment(graph, devices, "affinity"))
