"""Structured group moves (issue 28): the groups found, local_search's and learned_search's moves of them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import workbench as wb
from workbench import corpus
from workbench.learn.learned_search import LearnedMoves, MoveScorer, move_features
from workbench.placers.groups import MAX_GROUP, critical_segments, parse_group_kinds, structural_groups
from workbench.placers.local_search import Moves
from workbench.placers.registry import PlacerError


@pytest.fixture(scope="module")
def block() -> wb.DataflowGraph:
    """A validation transformer block: named sharded tensors, chains and reductions."""
    return corpus.build(corpus.entries("validation", families=["transformer_block"])[0])


def _graph() -> wb.DataflowGraph:
    # 0 -> 1 -> 2 -> 3 is a chain; 4 and 5 feed 6 alone (and 3 feeds 6); t[0, 0], t[0, 1] share a row, t[1, 0] does not
    names = ["a", "b", "c", "d", "t[0, 0]", "t[0, 1]", "t[1, 0]"]
    src, dst = [0, 1, 2, 3, 4, 5], [1, 2, 3, 6, 6, 6]
    return wb.DataflowGraph(compute=np.ones(7), src=src, dst=dst, comm=np.ones(6), names=names)


def test_each_structured_kind_finds_the_groups_its_definition_names():
    graph = _graph()
    as_sets = lambda kinds: {tuple(g.tolist()) for g in structural_groups(graph, kinds)}  # noqa: E731
    assert as_sets(("chain",)) == {(0, 1, 2, 3)}
    assert as_sets(("producers",)) == {(0, 1), (1, 2), (2, 3), (3, 4, 5, 6)}
    assert as_sets(("tensor",)) == {(4, 5)}  # t[1, 0] alone in its row: no group
    assert as_sets(("chain", "producers")) == as_sets(("chain",)) | as_sets(("producers",))


def test_a_long_chain_is_cut_into_groups_of_at_most_max_group_ops():
    n = 2 * MAX_GROUP + 3
    graph = wb.DataflowGraph(compute=np.ones(n), src=np.arange(n - 1), dst=np.arange(1, n), comm=np.ones(n - 1))
    groups = structural_groups(graph, ("chain",))
    assert [g.size for g in groups] == [MAX_GROUP, MAX_GROUP, 3]
    assert np.array_equal(np.concatenate(groups), np.arange(n))


def test_critical_segments_are_the_chains_runs_on_one_device():
    critical = np.array([9, 7, 5, 3, 1])
    assignment = np.zeros(10, dtype=np.int64)
    assignment[[5, 3]] = 1
    assert [s.tolist() for s in critical_segments(critical, assignment)] == [[7, 9], [3, 5]]  # op 1 alone on device 0: none


def test_group_kinds_are_parsed_and_an_unknown_kind_is_refused_in_one_line():
    assert parse_group_kinds("connected+structured") == ("connected", "chain", "producers", "tensor", "segment")
    with pytest.raises(PlacerError, match="groups must be '\\+'-joined kinds of connected, chain, .* got 'blocks'"):
        wb.place(_graph(), "local_search", devices=2, budget=20, groups="blocks")


@pytest.mark.parametrize("groups", ["structured", "connected+segment", "tensor"])
def test_group_moves_keep_the_placement_valid_and_every_proposal_changes_it(block, groups):
    rng = np.random.default_rng(0)
    moves = Moves(block, 4, rng, parse_group_kinds(groups))
    assignment = rng.integers(0, 4, block.num_nodes)
    moves.set_critical(assignment, wb.sim.Evaluator(block, 4))
    for op in rng.integers(0, block.num_nodes, 200):
        members, device = moves.group_move(assignment, int(op))
        moved = assignment.copy()
        moved[members] = device
        assert 0 <= device < 4 and not np.array_equal(moved, assignment)
    proposals = moves.propose(assignment, 64)
    assert proposals.min() >= 0 and proposals.max() < 4


@pytest.mark.parametrize("method", ["local_search", "learned_search"])
def test_a_search_with_structured_groups_spends_its_budget_exactly_and_repeats_for_a_seed(block, method):
    first = wb.place(block, method, devices=4, budget=137, seed=3, groups="connected+structured")
    again = wb.place(block, method, devices=4, budget=137, seed=3, groups="connected+structured")
    assert first.evaluations == 137 and np.array_equal(first.assignment, again.assignment)
    assert first.makespan <= first.details["start_makespan"]
    assert wb.simulate(block, first.assignment, 4).makespan == pytest.approx(first.makespan)


def test_the_scorer_ranks_structured_group_moves_beside_unchanged_single_and_connected_ones(block):
    rng = np.random.default_rng(1)
    assignment = rng.integers(0, 4, block.num_nodes)
    kinds = parse_group_kinds("structured")
    moves = LearnedMoves(block, 4, np.random.default_rng(0), MoveScorer(), 0.5, 0.05, focus="all", group_kinds=kinds)
    moves.set_critical(assignment, wb.sim.Evaluator(block, 4))
    trace = wb.simulate(block, assignment, 4).trace
    plain = move_features(moves, assignment, trace, moves.critical)
    both = moves.candidates
    assert both is not None and np.isfinite(both.features).all()
    assert np.array_equal(both.features[: plain.features.shape[0]], plain.features)  # the old candidates come first, unchanged
    for k in range(both.features.shape[0]):
        members = both.members(k)
        moved = both.apply(assignment, k)
        assert (moved[members] == both.targets[k]).all() and not np.array_equal(moved, assignment)
        assert np.array_equal(np.delete(moved, members), np.delete(assignment, members))
    structured = np.arange(plain.features.shape[0], both.features.shape[0])
    assert structured.size and {len(both.members(int(k))) for k in structured} - {1}  # groups, moved whole


def test_the_scorer_trains_on_structured_group_moves_when_asked():
    from workbench.training.learned_search import ScorerTrainConfig, collect_states

    config = ScorerTrainConfig(devices=(4,), trajectory_budget=60, states_per_run=2, candidates_per_state=4000, max_graphs=1, seed=0)
    plain, _ = collect_states(config, "train", MoveScorer(), False, 0)
    grouped, _ = collect_states(replace(config, groups="connected+structured"), "train", MoveScorer(), False, 0)
    assert grouped.mask.sum() > plain.mask.sum()  # more candidate moves per state: the structured groups'
    with pytest.raises(ValueError, match="groups must be"):
        ScorerTrainConfig(groups="rows")
