"""Ties in the list schedulers: a documented, seeded choice, and ``ties=K`` trying K tie orders (issue 32, part 3)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import workbench as wb
from workbench.bench.ties import schedulers
from workbench.placers.base import get_placer
from workbench.placers.registry import PlacerError, placer_options
from workbench.placers.ties import TIE_RULES, TieBreak, TieRanks, tie_rules
from workbench.sim import Evaluator

from .conftest import random_dags

SCHEDULERS = schedulers()


def test_every_list_scheduling_heuristic_takes_ties():
    assert set(SCHEDULERS) == {"critical_path", "heft", "cpop", "peft", "etf", "affinity"}
    assert all("ties" in placer_options(m) for m in SCHEDULERS)


@pytest.mark.parametrize("method", SCHEDULERS)
@pytest.mark.parametrize("rule", TIE_RULES)
def test_each_rule_is_deterministic_for_a_seed_and_valid(method, rule):
    graph = wb.bundled_graph("chain_mm")
    first, again = (wb.place(graph, method, 4, seed=3, ties=rule) for _ in range(2))
    assert np.array_equal(first.assignment, again.assignment) and first.makespan == again.makespan
    assert first.evaluations == 0 and first.makespan >= first.lower_bound
    if rule == "id":
        assert np.array_equal(first.assignment, wb.place(graph, method, 4).assignment), "id is the default"


@pytest.mark.parametrize("method", SCHEDULERS)
def test_random_ties_depend_on_the_seed(method):
    graph = wb.bundled_graph("ffnn")  # sharded: many equally ranked ops
    found = {tuple(wb.place(graph, method, 4, seed=seed, ties="random").assignment) for seed in range(6)}
    assert len(found) > 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_dags(), devices=st.integers(1, 4), count=st.integers(1, 6), seed=st.integers(0, 50), method=st.sampled_from(SCHEDULERS))
def test_k_tie_orders_keep_the_best_of_exactly_those_orders_and_count_them(graph, devices, count, seed, method):
    placement = wb.place(graph, method, devices, seed=seed, ties=count)
    rules = tie_rules(count)
    random_seed = iter(range(seed, seed + count))
    singles = [get_placer(method, ties=rule).place(graph, devices, seed=next(random_seed) if rule == "random" else seed) for rule in rules]
    makespans = Evaluator(graph, devices)(np.stack([s.assignment for s in singles]))
    assert placement.evaluations == count
    assert placement.makespan == pytest.approx(float(np.min(makespans)), rel=1e-12)
    assert placement.details["tie_order"] == rules[int(np.argmin(makespans))]


@settings(max_examples=40, deadline=None)
@given(graph=random_dags(), rule=st.sampled_from(TIE_RULES), seed=st.integers(0, 1000))
def test_every_tie_order_of_ops_is_topological(graph, rule, seed):
    order = TieBreak.of(rule, graph.num_nodes, 3, seed).topological_order(graph)
    position = np.empty(graph.num_nodes, dtype=int)
    position[order] = np.arange(graph.num_nodes)
    assert sorted(order.tolist()) == list(range(graph.num_nodes))
    assert np.all(position[graph.src] < position[graph.dst])


def test_ready_ties_go_first_in_first_out_and_id_ties_by_the_smaller_id():
    priority = np.array([1.0, 1.0, 1.0, 2.0, 1.0, 1.0])
    for rule, expected in (("ready", [3, 5, 1, 4]), ("id", [3, 1, 4, 5])):
        ranks = TieRanks(priority, TieBreak.of(rule, 6, 2))
        queued = sorted(ranks.ranked(op) for op in (5, 1, 3, 4))
        assert [ranks.op(rank) for rank in queued] == expected, rule


def test_device_ties_follow_the_rule():
    values = np.array([2.0, 1.0, 1.0, 1.0])
    assert TieBreak.of("id", 1, 4).argmin(values) == 1
    random = TieBreak.of("random", 1, 4, seed=0)
    assert random.argmin(values) == next(d for d in random.device_order if values[d] == 1.0)
    assert random.first(values == 1.0) == random.argmin(values)


@pytest.mark.parametrize("ties", ["fifo", 0, -1, 1001, 2.5, True, None])
def test_a_bad_ties_value_is_refused_naming_the_option(ties):
    with pytest.raises(PlacerError, match="ties must be one of id, ready, random"):
        get_placer("heft", ties=ties)
