"""learned_search: local_search's loop steered by a learned move scorer, its features, checkpoint and training."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import workbench as wb
from workbench import corpus
from workbench.learn.learned_search import (
    FEATURES,
    LearnedMoves,
    LearnedSearchPlacer,
    MoveScorer,
    load_scorer,
    move_features,
    save_scorer,
)
from workbench.placers.local_search import CRITICAL_REFRESH
from workbench.placers.registry import PlacerError
from workbench.training.learned_search import ScorerTrainConfig, _loss, collect_states, train_scorer, transfer_wait

TINY = ScorerTrainConfig(
    devices=(4,), rounds=1, trajectory_budget=80, states_per_run=4, candidates_per_state=48, epochs=25, batch_states=4, max_graphs=1, seed=0
)


@pytest.fixture(scope="module")
def graph() -> wb.DataflowGraph:
    return corpus.build(corpus.entries("train", families=["layered"])[0])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A scorer trained for a few seconds on one training graph at 4 devices, saved as a checkpoint."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: extra threads only contend for the cores
    try:
        scorer, rows, costs = train_scorer(TINY)
    finally:
        torch.set_num_threads(threads)
    path = save_scorer(tmp_path_factory.mktemp("scorer") / "learned_search.safetensors", scorer, costs)
    return path, rows


def test_a_short_training_run_ranks_moves_better_than_its_start(trained):
    _, rows = trained
    start, end = rows[0], rows[-1]
    assert start["epoch"] == 0 and end["epoch"] == TINY.epochs
    assert end["loss"] < start["loss"]
    assert end["train_top1_decrease"] > start["train_top1_decrease"]


@pytest.mark.parametrize("budget", [9, 137, 400])
def test_the_budget_is_honoured_exactly(trained, graph, budget):
    path, _ = trained
    placement = wb.place(graph, "learned_search", devices=4, budget=budget, checkpoint=path, seed=1)
    assert placement.details["evaluations"] == budget


def test_a_checkpoint_trained_at_four_devices_places_at_two_and_eight_and_never_worse_than_its_start(trained, graph):
    path, _ = trained
    for devices in (2, 8):
        placement = wb.place(graph, "learned_search", devices=devices, budget=150, checkpoint=path, seed=0)
        assert placement.assignment.min() >= 0 and placement.assignment.max() < devices
        assert wb.simulate(graph, placement.assignment, devices).makespan <= placement.details["start_makespan"]
    again = wb.place(graph, "learned_search", devices=8, budget=150, checkpoint=path, seed=0)
    assert np.array_equal(again.assignment, placement.assignment)


def test_every_candidate_move_changes_the_placement_to_its_target(graph):
    rng = np.random.default_rng(0)
    assignment = rng.integers(0, 4, graph.num_nodes)
    moves = LearnedMoves(graph, 4, rng, MoveScorer(), 0.5, 0.05)
    moves.set_critical(assignment, wb.sim.Evaluator(graph, 4))
    candidates = move_features(moves, assignment, wb.simulate(graph, assignment, 4).trace, moves.critical)
    assert candidates.features.shape[1] == len(FEATURES) and np.isfinite(candidates.features).all()
    assert np.sum(~candidates.grouped) == graph.num_nodes * 3
    for k in rng.choice(len(candidates.targets), 50, replace=False):
        moved = candidates.apply(assignment, int(k))
        members = candidates.members(int(k))
        assert (moved[members] == candidates.targets[k]).all() and (assignment[members] != candidates.targets[k]).all()
        assert np.array_equal(np.delete(moved, members), np.delete(assignment, members))


def test_a_checkpoint_of_another_method_or_a_damaged_file_is_refused(trained, graph, tmp_path):
    path, _ = trained
    assert isinstance(load_scorer(path), MoveScorer)
    damaged = tmp_path / "damaged.safetensors"
    damaged.write_bytes(path.read_bytes()[:-7])
    with pytest.raises(PlacerError, match="damaged|corrupt|truncated"):
        wb.place(graph, "learned_search", devices=4, budget=50, checkpoint=damaged)
    doppler = wb.datasets.DATASETS_DIR / "pretrained" / "ffnn_192nodes" / "doppler.safetensors"
    with pytest.raises(PlacerError, match="not a learned_search scorer"):
        wb.place(graph, "learned_search", devices=4, budget=50, checkpoint=doppler)


class _Observed(LearnedSearchPlacer):
    """learned_search that records every placement whose trace it observes."""

    def moves(self, graph, devices, rng):
        moves = super().moves(graph, devices, rng)
        seen = self.seen = []
        observe = moves.observe

        def record(assignment, trace):
            seen.append(assignment.copy())
            observe(assignment, trace)

        moves.observe = record
        return moves


@pytest.mark.parametrize(("budget", "refresh", "learned_start"), [(9, 1, True), (10, 4, True), (137, 1, False), (200, 3, True)])
@pytest.mark.parametrize("screen", [0.0, 0.5])
def test_refresh_learned_start_and_screen_honour_the_budget_and_never_end_worse_than_the_start(
    trained, graph, budget, refresh, learned_start, screen
):
    path, _ = trained
    placer = _Observed(path, refresh=refresh, learned_start=learned_start, screen=screen, budget=budget)
    decision = placer.place(graph, 4, seed=2)
    assert decision.details["evaluations"] == budget
    assert wb.simulate(graph, decision.assignment, 4).makespan <= decision.details["start_makespan"]


def test_a_learned_start_ranks_the_starting_heuristic_before_any_proposal_and_refresh_sets_how_often(trained, graph):
    path, _ = trained
    start = _Observed(path, learned_start=True, budget=120)
    decision = start.place(graph, 4, seed=0)
    expected = wb.place(graph, decision.details["start_method"], devices=4).assignment
    assert np.array_equal(start.seen[0], expected)
    rare, often = _Observed(path, refresh=32, budget=300), _Observed(path, refresh=2, budget=300)
    rare.place(graph, 4, seed=0), often.place(graph, 4, seed=0)
    assert len(often.seen) > len(rare.seen) >= 1


@pytest.mark.parametrize("options", [{"refresh": 0}, {"refresh": -3}, {"share": 1.5}, {"temperature": 0}, {"screen": 1}, {"screen": -0.1}])
def test_bad_search_options_are_refused(trained, graph, options):
    path, _ = trained
    with pytest.raises(PlacerError, match=next(iter(options))):
        wb.place(graph, "learned_search", devices=4, budget=50, checkpoint=path, **options)


def test_tuning_reads_the_validation_split_and_a_scorer_with_no_share_is_local_search(tmp_path):
    from workbench.bench.learned import validate

    unsteered = {"share": 0.0, "refresh": CRITICAL_REFRESH, "learned_start": False}
    table = validate({"unsteered": unsteered}, budget=10, seeds=1, root=tmp_path)
    assert table.splitlines()[-1].endswith("| 1.000 | 1.000 |")
    keys = json.loads((tmp_path / "validation.json").read_text())
    graphs = {key.split("|")[0] for key in keys}
    assert graphs == {e.name for e in corpus.entries("validation")}
    with pytest.raises(ValueError, match="never tuned on"):
        validate({"unsteered": unsteered}, budget=10, seeds=1, root=tmp_path, split="test")


def test_screening_redraws_local_searchs_proposals_that_the_scorer_ranks_lowest(trained, graph):
    scorer = load_scorer(trained[0])
    assignment = np.random.default_rng(3).integers(0, 4, graph.num_nodes)
    bad = {}
    for screen in (0.0, 0.6):
        moves = LearnedMoves(graph, 4, np.random.default_rng(0), scorer, 0.0, 0.05, screen=0.6)
        moves.set_critical(assignment, wb.sim.Evaluator(graph, 4))
        moves.screen = screen  # the same ranking and threshold; screening on or off
        proposals = moves.propose(assignment, 400)
        bad[screen] = np.mean([moves._screened_out(assignment, p) for p in proposals])
    assert bad[0.0] > 0.2 and bad[0.6] < bad[0.0] / 3


def test_a_start_policy_joins_the_starting_candidates_within_the_budget(trained, graph):
    path, _ = trained
    ffnn = wb.bundled_graph("ffnn")
    shipped = wb.datasets.DATASETS_DIR / "pretrained" / "ffnn_192nodes" / "doppler.safetensors"
    greedy = wb.place(ffnn, "doppler", devices=4, checkpoint=shipped).makespan
    plain = wb.place(ffnn, "learned_search", devices=4, budget=60, checkpoint=path, seed=0)
    steered = wb.place(ffnn, "learned_search", devices=4, budget=60, checkpoint=path, seed=0, start_policy=shipped)
    assert steered.details["evaluations"] == 60  # the policy's start is one of the 60
    assert greedy < plain.details["start_makespan"]  # the shipped policy beats every heuristic on FFNN ...
    assert steered.details["start_method"] == "start_policy" and steered.details["start_makespan"] == greedy  # ... so it is the start
    assert wb.simulate(ffnn, steered.assignment, 4).makespan <= greedy
    starts = len(wb.placers.methods("heuristic", "rule", "baseline"))
    with pytest.raises(PlacerError, match=f"at least {starts + 1} evaluations"):
        wb.place(ffnn, "learned_search", devices=4, budget=starts, checkpoint=path, start_policy=shipped)
    with pytest.raises(PlacerError, match="not for graph 'layered-00'.*not a cross-graph policy"):
        wb.place(graph, "learned_search", devices=4, budget=60, checkpoint=path, start_policy=shipped)
    with pytest.raises(PlacerError, match="start_policy: .*does not exist"):
        wb.place(ffnn, "learned_search", devices=4, budget=60, checkpoint=path, start_policy=shipped.with_name("missing.safetensors"))


def test_the_dense_term_counts_the_time_ops_wait_for_inputs_in_transfer():
    g = wb.DataflowGraph.from_edges([2.0, 5.0, 1.0], [(0, 2, 4.0), (1, 2, 1.0)])
    evaluator = wb.Evaluator(g, 2)
    # op 2 on device 1 with op 1: it waits 4 for op 0's output (ends 2, arrives 6) after op 1 ends at 5
    ready, end = evaluator.times(np.array([[0, 1, 1], [0, 0, 0]]))
    assert transfer_wait(g, ready, end).tolist() == [1.0, 0.0]


def test_the_transfer_weight_reorders_moves_that_leave_the_makespan_as_it_is():
    config = ScorerTrainConfig(**{**TINY.__dict__, "epochs": 1})
    states, _ = collect_states(config, "train", MoveScorer(), False, 0)
    neutral = states.mask & (np.abs(states.decrease) < 1e-12)
    assert neutral.any() and np.any(np.abs(states.wait_decrease[neutral]) > 0)
    torch.manual_seed(0)
    scorer = MoveScorer()  # untrained: scores that are not uniform
    tensors = [torch.as_tensor(x) for x in states.arrays()]
    losses = [float(_loss(scorer, tensors, ScorerTrainConfig(transfer_weight=w))) for w in (0.0, 1.0)]
    assert losses[0] != losses[1]


def test_a_start_policy_with_a_given_start_tries_both_and_counts_both(trained):
    path, _ = trained
    ffnn = wb.bundled_graph("ffnn")
    shipped = wb.datasets.DATASETS_DIR / "pretrained" / "ffnn_192nodes" / "doppler.safetensors"
    greedy = wb.place(ffnn, "doppler", devices=4, checkpoint=shipped).makespan
    single = np.zeros(ffnn.num_nodes, dtype=np.int64)
    both = wb.place(ffnn, "learned_search", devices=4, budget=2, checkpoint=path, start=single, start_policy=shipped)
    assert both.details["evaluations"] == 2  # the given start and the policy's greedy placement, nothing else
    assert both.details["start_method"] == "start_policy" and both.makespan == greedy  # the policy beats everything on one device
    given = wb.place(ffnn, "learned_search", devices=4, budget=1, checkpoint=path, start=single)
    assert given.details["start_method"] == "given" and given.details["evaluations"] == 1
    with pytest.raises(PlacerError, match="at least 2 evaluations"):
        wb.place(ffnn, "learned_search", devices=4, budget=1, checkpoint=path, start=single, start_policy=shipped)


def test_a_move_scorer_given_as_start_policy_is_named_as_the_wrong_kind_of_file(trained):
    path, _ = trained
    with pytest.raises(PlacerError, match="start_policy: .*holds a 'learned_search' file, not a placement policy"):
        LearnedSearchPlacer(checkpoint=path, budget=60, start_policy=path)


def test_a_critical_focus_ranks_the_moves_of_the_critical_chain_and_its_neighbours_with_unchanged_features(graph):
    rng = np.random.default_rng(4)
    assignment = rng.integers(0, 4, graph.num_nodes)
    moves = LearnedMoves(graph, 4, np.random.default_rng(0), MoveScorer(), 0.5, 0.05, focus="critical")
    moves.set_critical(assignment, wb.sim.Evaluator(graph, 4))
    near = set(moves.critical.tolist()) | {int(v) for op in moves.critical for v in moves.neighbours(int(op))}
    assert set(moves.candidates.ops.tolist()) == near and len(near) < graph.num_nodes  # observed with the chain just set
    every = move_features(moves, assignment, wb.simulate(graph, assignment, 4).trace, moves.critical)
    rows = {(int(o), bool(g), int(t)): f for o, g, t, f in zip(every.ops, every.grouped, every.targets, every.features, strict=True)}
    for o, g, t, f in zip(moves.candidates.ops, moves.candidates.grouped, moves.candidates.targets, moves.candidates.features, strict=True):
        assert np.array_equal(rows[int(o), bool(g), int(t)], f)  # a focused move is described exactly as among all moves
    placed = wb.place(graph, "learned_search", devices=4, budget=120, seed=0, focus="critical")
    assert placed.evaluations == 120 and placed.makespan <= placed.details["start_makespan"]
    with pytest.raises(PlacerError, match="focus must be one of auto, all, critical"):
        LearnedSearchPlacer(focus="chain")


class _FullySorted(LearnedSearchPlacer):
    """learned_search ranking every candidate by a full sort at each observation, as before the ranking was made lazy."""

    def moves(self, graph, devices, rng):
        moves = super().moves(graph, devices, rng)
        moves._ranked = lambda size: np.argsort(-moves.keys)
        return moves


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(st.floats(-50, 50), min_size=0, max_size=300, unique=True), block=st.integers(1, 8))
def test_the_lazy_ranking_hands_out_candidates_in_the_full_sorts_order_until_all_are_used(graph, keys, block):
    moves = LearnedMoves(graph, 4, np.random.default_rng(0), MoveScorer(), 0.5, 0.05)
    moves.keys = np.array(keys, dtype=float)
    moves.ranking, moves.taken = moves._ranked(block), 0
    handed = list(iter(moves._next_candidate, None))
    assert handed == np.argsort(-moves.keys).tolist()  # each candidate once, best first, across the doubling blocks


@pytest.mark.parametrize("name", ["ffnn_192nodes", "chain_mm_112nodes"])
def test_the_lazy_ranking_keeps_learned_searchs_trajectory_for_a_seed(name):
    graph = wb.datasets.bundled_graph(name)
    lazy = wb.place(graph, "learned_search", devices=4, budget=300, seed=1)
    full = _FullySorted(budget=300).place(graph, 4, seed=1)
    assert np.array_equal(lazy.assignment, full.assignment) and lazy.evaluations == full.details["evaluations"] == 300
    assert [p[:2] for p in lazy.details["anytime"]] == [p[:2] for p in full.details["anytime"]]


def test_auto_focus_ranks_the_critical_chains_moves_from_the_size_threshold_up(graph, monkeypatch):
    from workbench.learn import learned_search

    singles = graph.num_nodes * 3  # single-op moves at 4 devices
    assert LearnedMoves(graph, 4, np.random.default_rng(0), MoveScorer(), 0.5, 0.05).focus == "all"
    monkeypatch.setattr(learned_search, "AUTO_CRITICAL_MOVES", singles)
    assert LearnedMoves(graph, 4, np.random.default_rng(0), MoveScorer(), 0.5, 0.05).focus == "critical"
    assert LearnedMoves(graph, 2, np.random.default_rng(0), MoveScorer(), 0.5, 0.05).focus == "all"  # fewer moves at 2 devices
    auto = wb.place(graph, "learned_search", devices=4, budget=120, seed=0)
    critical = wb.place(graph, "learned_search", devices=4, budget=120, seed=0, focus="critical")
    assert np.array_equal(auto.assignment, critical.assignment)
    assert [p[:2] for p in auto.details["anytime"]] == [p[:2] for p in critical.details["anytime"]]


def test_bench_lsearch_alternates_both_focuses_and_both_searches_within_their_budgets(monkeypatch):
    from workbench import datasets
    from workbench.bench import lsearch
    from workbench.learn import learned_search

    monkeypatch.setattr(lsearch, "LARGE_NODES", 400)
    monkeypatch.setattr(lsearch, "LARGE_BUDGET", 60)
    monkeypatch.setattr(lsearch, "PAPER_BUDGET", 40)
    monkeypatch.setattr(learned_search, "AUTO_CRITICAL_MOVES", 400 * 7)  # the small graph ranks the critical chain's moves
    monkeypatch.setattr(datasets, "PAPER_GRAPHS", ("chain_mm_112nodes",))
    result = lsearch.run(quick=True, seed=1)
    large, (paper,) = result["large"], result["paper"].values()
    assert large["all"]["evaluations"] == large["auto"]["evaluations"] == 60
    assert paper["learned_search"]["evaluations"] == paper["local_search"]["evaluations"] == 40
    assert large["auto"]["evals_per_cpu_s"] == pytest.approx(60 / large["auto"]["cpu_min_s"])
    assert "| chain_mm_112nodes |" in result["markdown"] and "Target under 10 CPU s" in result["markdown"]


def test_one_thread_scores_in_blocks_as_the_whole_array_and_a_large_search_runs_on_one_thread(graph, monkeypatch):
    from workbench.learn import learned_search, move_scorer

    features = np.random.default_rng(0).random((1_300, len(FEATURES)))
    score = load_scorer(learned_search.PRETRAINED_SCORER).scoring()
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        blocked = score(features)
        monkeypatch.setattr(move_scorer, "SCORE_BLOCK_ROWS", 10**9)
        assert np.array_equal(blocked, score(features)), "block boundaries change no score"
    finally:
        torch.set_num_threads(threads)
    seen = []
    monkeypatch.setattr(LearnedMoves, "observe", lambda self, *args: seen.append(torch.get_num_threads()))
    monkeypatch.setattr(learned_search, "AUTO_CRITICAL_MOVES", graph.num_nodes * 3)  # this graph at 4 devices is large
    wb.place(graph, "learned_search", devices=4, budget=60, seed=0)
    assert seen and set(seen) == {1} and torch.get_num_threads() == threads, "one thread inside, restored after"
    seen.clear()
    wb.place(graph, "learned_search", devices=2, budget=60, seed=0)  # below the threshold: torch as the caller set it
    assert set(seen) == {threads}
