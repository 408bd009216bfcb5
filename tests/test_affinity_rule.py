"""The affinity rule as a registered core placer: the same placements as the imitation teacher, co-parents kept together."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import workbench as wb
from workbench import corpus
from workbench.learn.env import teacher_assignment
from workbench.placers import methods
from workbench.placers.affinity import affinity_cost
from workbench.schedule import PartialSchedule

from .conftest import random_dags

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


def _forced_transfers(graph: wb.DataflowGraph, device: np.ndarray, op: int, devices: int) -> np.ndarray:
    """The affinity cost's transfer term written out directly from the graph: per consumer of ``op`` whose other inputs
    are placed, the cheaper of moving those inputs to each device or ``op``'s output to them (unit links)."""
    penalty = np.zeros(devices)
    for consumer in sorted(set(graph.dst[graph.src == op].tolist())):
        into = np.flatnonzero(graph.dst == consumer)
        others = [e for e in into if graph.src[e] != op and device[graph.src[e]] >= 0]
        own = [e for e in into if graph.src[e] == op]
        for d in range(devices):
            away = [e for e in others if device[graph.src[e]] != d]
            inbound = sum(graph.comm[e] for e in away) * len(own)  # each of op's edges to the consumer pairs with each input
            if away:
                penalty[d] += min(inbound, min(graph.comm[e] for e in own))
    return penalty


@settings(max_examples=80, deadline=None)
@given(random_dags(max_nodes=10), st.integers(2, 4), st.data())
def test_the_affinity_cost_is_earliest_finish_plus_the_cheaper_forced_transfer_per_consumer(graph, devices, data):
    schedule = PartialSchedule(graph, devices)
    for _ in range(data.draw(st.integers(0, graph.num_nodes - 1))):  # a random partial placement
        schedule.place(data.draw(st.sampled_from(schedule.ready_ops)), data.draw(st.integers(0, devices - 1)))
    for op in schedule.ready_ops:
        earliest = schedule.earliest_starts(op)
        expected = earliest + graph.compute[op] + _forced_transfers(graph, schedule.device, op, devices)
        np.testing.assert_allclose(affinity_cost(schedule, op, earliest), expected, rtol=1e-12)
