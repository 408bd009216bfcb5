"""learned_search in local_search's compiled loop (issues 32 and 28): the scorer ranks in Python, the compiled loop proposes,
simulates and accepts, and a seed gives the Python loop's trajectory (the reference) exactly."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import workbench as wb
from workbench.learn.learned_search import PRETRAINED_SCORER, LearnedMoves, LearnedSearchPlacer, load_scorer
from workbench.placers.local_search import LocalSearchPlacer
from workbench.sim import resume

from .conftest import random_dags

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def scorer():
    return load_scorer(PRETRAINED_SCORER)


def _trajectory(placement: wb.Placement) -> tuple[list[int], int, list[list[float]]]:
    """What a seed fixes: the assignment, the evaluations, and the any-time points without their CPU seconds."""
    return placement.assignment.tolist(), placement.details["evaluations"], [point[:2] for point in placement.details["anytime"]]


def _both_loops(graph: wb.DataflowGraph, devices: int, seed: int, **options: object) -> tuple[wb.Placement, wb.Placement]:
    python = wb.place(graph, "learned_search", devices=devices, seed=seed, loop="python", **options)
    return python, wb.place(graph, "learned_search", devices=devices, seed=seed, loop="compiled", **options)


@SETTINGS
@given(
    graph=random_dags(max_nodes=24, integer_costs=False),
    devices=st.integers(2, 5),
    seed=st.integers(0, 2**32 - 1),
    budget=st.integers(1, 300),
    max_batch=st.integers(1, 16),
    share=st.sampled_from([0.0, 0.5, 1.0]),
    screen=st.sampled_from([0.0, 0.3]),
    refresh=st.integers(1, 10),
    learned_start=st.booleans(),
    focus=st.sampled_from(["all", "critical"]),
)
def test_the_compiled_loop_follows_the_python_loops_steered_trajectory(
    scorer, graph, devices, seed, budget, max_batch, share, screen, refresh, learned_start, focus
):
    start = np.random.default_rng(seed).integers(0, devices, size=graph.num_nodes)
    options = {"budget": budget, "start": start, "max_batch": max_batch, "initial_temperature": 0.1}
    steering = {"share": share, "screen": screen, "refresh": refresh, "learned_start": learned_start, "focus": focus}
    python, compiled = _both_loops(graph, devices, seed, checkpoint=scorer, **options, **steering)
    assert _trajectory(compiled) == _trajectory(python)
    assert compiled.details["evaluations"] == min(budget, python.details["evaluations"]) <= budget
    assert compiled.makespan == python.makespan <= wb.simulate(graph, start, devices).makespan


CASES = [("chain_mm_112nodes", 4, None), ("full_transformer_layer_261nodes", 16, None), ("ffnn_192nodes", 8, 0)]


@pytest.mark.parametrize(("name", "devices", "resume_from"), CASES)
def test_the_compiled_loop_equals_the_python_loop_on_paper_graphs_from_the_fair_start(
    scorer, paper_graphs, name, devices, resume_from, monkeypatch
):
    """``resume_from`` 0: the compiled loop resumes its simulations from checkpoints, as it does on large graphs."""
    if resume_from is not None:
        monkeypatch.setattr(resume, "RESUME_FROM_EVENTS", resume_from)
    python, compiled = _both_loops(paper_graphs[name], devices, 3, checkpoint=scorer, budget=600, screen=0.2)
    assert _trajectory(compiled) == _trajectory(python)
    assert compiled.details["evaluations"] == 600
    assert len(compiled.details["anytime"]) > 2  # it improved on its start: the loops were compared on a real search


def test_learned_moves_run_compiled_and_a_subclass_of_moves_without_a_ranking_runs_the_python_loop(monkeypatch, scorer):
    graph = wb.bundled_graph("chain_mm_112nodes")
    loops: list[str] = []
    for name in ("_python_loop", "_compiled_loop"):
        original = getattr(LocalSearchPlacer, name)

        def spy(self, run, current, makespan, original=original, name=name):
            loops.append(name)
            return original(self, run, current, makespan)

        monkeypatch.setattr(LocalSearchPlacer, name, spy)
    LearnedSearchPlacer(checkpoint=scorer, budget=60).place(graph, 4)
    assert issubclass(LearnedMoves, wb.placers.local_search.Moves) and loops == ["_compiled_loop"]

    class Steered(wb.placers.local_search.Moves):
        def propose(self, assignment: np.ndarray, count: int) -> np.ndarray:
            return super().propose(assignment, count)

    class SteeredSearch(LocalSearchPlacer):
        def moves(self, graph, devices, rng):
            return Steered(graph, devices, rng)

    SteeredSearch(budget=60).place(graph, 4)
    assert loops == ["_compiled_loop", "_python_loop"]

    class Relearned(LearnedMoves):  # inherits the declaration, not the right to run compiled: its proposals may differ
        pass

    class RelearnedSearch(LearnedSearchPlacer):
        def moves(self, graph, devices, rng):
            return Relearned(graph, devices, rng, self.scorer, self.share, self.temperature)

    RelearnedSearch(checkpoint=scorer, budget=60).place(graph, 4)
    assert loops == ["_compiled_loop", "_python_loop", "_python_loop"]
