"""local_search's compiled loop (issue 32) against the Python loop it replaces: the same random stream, the same trajectory."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from numba import njit

import workbench as wb
from workbench.placers import PlacerError
from workbench.placers.local_search_kernel import pcg64_state, random_bounded, random_double, set_pcg64_state
from workbench.sim import resume

from .conftest import random_dags

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@njit(cache=True)
def _draws(words: np.ndarray, bounds: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """A double for each row whose low bound is negative, else an integer in [low, high)."""
    out = np.empty(bounds.shape[0])
    for i in range(bounds.shape[0]):
        out[i] = random_double(words) if bounds[i, 0] < 0 else random_bounded(words, bounds[i, 0], bounds[i, 1])
    return out


@SETTINGS
@given(
    seed=st.integers(0, 2**63),
    skip=st.integers(0, 3),
    bounds=st.lists(
        st.one_of(st.just((-1, 0)), st.tuples(st.integers(0, 9), st.sampled_from([1, 2, 3, 7, 229, 2_025, 2**31 - 1, 2**32 - 2]))),
        max_size=200,
    ),
)
def test_kernel_draws_equal_the_generators(seed, skip, bounds):
    rng = np.random.default_rng(seed)
    rng.integers(0, 5, size=skip)  # an odd count leaves a spare 32-bit half in the bit generator
    words = pcg64_state(rng)
    table = np.array([(low, low + span if low >= 0 else 0) for low, span in bounds], dtype=np.int64).reshape(-1, 2)
    got = _draws(words, table)
    expected = [rng.random() if low < 0 else rng.integers(low, high) for low, high in table.tolist()]
    assert got.tolist() == expected
    copy = np.random.default_rng(0)
    set_pcg64_state(copy, words)
    assert copy.bit_generator.state == rng.bit_generator.state  # written back, the Python side continues the same stream


def test_other_bit_generators_are_refused():
    with pytest.raises(ValueError, match="PCG64 only, not MT19937"):
        pcg64_state(np.random.Generator(np.random.MT19937(0)))


def _search(graph: wb.DataflowGraph, devices: int, loop: str, **options: object) -> wb.Placement:
    return wb.place(graph, method="local_search", devices=devices, loop=loop, **options)


def _trajectory(placement: wb.Placement) -> tuple[list[int], int, list[list[float]]]:
    """What a seed fixes: the assignment, the evaluations, and the any-time points without their CPU seconds."""
    return placement.assignment.tolist(), placement.details["evaluations"], [point[:2] for point in placement.details["anytime"]]


@SETTINGS
@given(
    graph=random_dags(max_nodes=24, integer_costs=False),
    devices=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
    budget=st.integers(1, 400),
    max_batch=st.integers(1, 16),
    ties=st.booleans(),
    resumed=st.booleans(),
)
def test_compiled_loop_follows_the_python_loops_trajectory(graph, devices, seed, budget, max_batch, ties, resumed):
    """``resumed``: the compiled loop resumes its simulations from checkpoints even on these small graphs."""
    if ties:  # integer costs: equal makespans, so acceptance and the best's first-of-the-lowest rule are exercised
        graph = wb.DataflowGraph.from_edges(np.round(graph.compute), list(zip(graph.src, graph.dst, np.round(graph.comm), strict=True)))
    start = np.random.default_rng(seed).integers(0, devices, size=graph.num_nodes)
    options = {"budget": budget, "start": start, "seed": seed, "max_batch": max_batch}
    python = _search(graph, devices, "python", **options)
    with mock.patch.object(resume, "RESUME_FROM_EVENTS", 0 if resumed else resume.RESUME_FROM_EVENTS):
        compiled = _search(graph, devices, "compiled", **options)
    assert _trajectory(compiled) == _trajectory(python)
    assert compiled.makespan == python.makespan <= wb.simulate(graph, start, devices).makespan


@pytest.mark.parametrize(
    "name, resume_from", [("chain_mm_112nodes", None), ("full_transformer_layer_261nodes", None), ("full_transformer_layer_261nodes", 0)]
)
def test_compiled_loop_equals_the_python_loop_on_paper_graphs_from_the_fair_start(paper_graphs, name, resume_from, monkeypatch):
    """``resume_from`` 0: the compiled loop resumes its simulations from checkpoints (the paper graphs are below the size
    where it does by default)."""
    if resume_from is not None:
        monkeypatch.setattr(resume, "RESUME_FROM_EVENTS", resume_from)
    options = {"budget": 1_500, "seed": 3, "initial_temperature": 0.1}  # hot: many accepted moves and critical refreshes
    python, compiled = _search(paper_graphs[name], 4, "python", **options), _search(paper_graphs[name], 4, "compiled", **options)
    assert _trajectory(compiled) == _trajectory(python)
    assert len(compiled.details["anytime"]) > 2  # it improved on its start, so the loops were compared on a real search


def test_an_unknown_loop_is_refused_in_one_line():
    with pytest.raises(PlacerError, match="loop must be one of compiled, python, got 'numba'"):
        wb.place(wb.bundled_graph("chain_mm_112nodes"), method="local_search", loop="numba")


def test_bench_search_alternates_both_loops_and_reports_the_same_trajectory(monkeypatch, paper_graphs):
    from workbench.bench import search

    monkeypatch.setattr(search, "_graphs", lambda: {"chain_mm_112nodes": paper_graphs["chain_mm_112nodes"]})
    result = search.run(quick=True, seed=2)
    (row,) = result["rows"]
    assert row["same"] and row["evaluations"] == 2_000
    assert row["ratio"] == pytest.approx(row["python_cpu_s"] / row["compiled_cpu_s"])
    assert "| chain_mm_112nodes | 76 | 2,000 |" in result["markdown"] and "met on" in result["markdown"]
