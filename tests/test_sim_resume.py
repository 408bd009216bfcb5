"""Simulations resumed from a recorded assignment's checkpoints equal simulations from the start."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

import workbench as wb
from workbench.sim import resume
from workbench.sim.fast import simulate_from, simulate_recorded

from .test_sim import simulation_cases


@settings(max_examples=150, deadline=None)
@given(simulation_cases().filter(lambda case: case[3] in ("fifo", "blevel")), st.data())
def test_a_walk_of_resumed_simulations_gives_every_makespan_and_end_time_of_a_full_one(case, data):
    """Each step changes 1–3 ops of the current assignment, simulates it from the last checkpoint before its first
    change (with and without a cutoff), then makes it current; makespans and committed end times must equal a full
    simulation's, bit for bit, and a cutoff must stop only a simulation that reaches it."""
    graph, assignment, devices, priority = case
    arrays = wb.Evaluator(graph, devices, priority).kernel_arrays
    n, num_dev = graph.num_nodes, arrays[7].size
    pred_ptr, pred, _ = graph.pred_csr
    current = np.array(assignment, dtype=np.int64)
    recorded, scratch = (resume.checkpoint_set(n, graph.num_edges, num_dev) for _ in range(2))
    assert simulate_recorded(arrays, current, recorded) == wb.simulate(graph, current, devices, priority=priority).makespan
    for _ in range(10):
        proposal = current.copy()
        for op in data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3)):
            proposal[op] = data.draw(st.integers(0, num_dev - 1))
        full = wb.simulate(graph, proposal, devices, priority=priority)
        work = np.empty(num_dev)
        cutoff = full.makespan * data.draw(st.floats(0.0, 1.5))
        at = resume.resume_point(recorded, pred_ptr, pred, current, proposal, arrays[0], arrays[7], work)
        times = (np.empty(n), np.empty(n), np.empty(n))
        cut = simulate_from(arrays, proposal, times, cutoff, work, (recorded, at), resume.checkpoint_set(0, 0, num_dev, 0))
        assert cut == full.makespan or (cut == np.inf and full.makespan >= cutoff * (1 - 1e-12))
        resume.resume_point(recorded, pred_ptr, pred, current, proposal, arrays[0], arrays[7], work)
        into = (scratch[resume.READY], scratch[resume.START], scratch[resume.END])
        assert simulate_from(arrays, proposal, into, np.inf, work, (recorded, at), scratch) == full.makespan
        resume.commit(recorded, scratch, at)
        assert np.array_equal(recorded[resume.READY], full.trace.ready)
        assert np.array_equal(recorded[resume.START], full.trace.start)
        assert np.array_equal(recorded[resume.END], full.trace.end)
        current = proposal
    if n > 6 and graph.num_edges > n:
        assert recorded[resume.HEADER][resume.COUNT] > 0


def test_resuming_skips_the_events_before_the_first_change_on_a_paper_graph(paper_graphs):
    """On the layer graph, moving an op late in the schedule resumes from a late checkpoint, and the result is exact."""
    graph = paper_graphs["full_transformer_layer_261nodes"]
    arrays = wb.Evaluator(graph, 4).kernel_arrays
    pred_ptr, pred, _ = graph.pred_csr
    current = wb.place(graph, method="heft", devices=4).assignment.astype(np.int64)
    recorded, scratch = (resume.checkpoint_set(graph.num_nodes, graph.num_edges, 4) for _ in range(2))
    simulate_recorded(arrays, current, recorded)
    count = recorded[resume.HEADER][resume.COUNT]
    assert count > resume.CHECKPOINTS // 2  # about one per (5 n + 2 m) / CHECKPOINTS events
    last = int(np.argmax(recorded[resume.END]))  # the op that ends last
    proposal = current.copy()
    proposal[last] = (current[last] + 1) % 4
    work = np.empty(4)
    at = resume.resume_point(recorded, pred_ptr, pred, current, proposal, arrays[0], arrays[7], work)
    assert at >= count * 3 // 4
    times = [np.empty(graph.num_nodes) for _ in range(3)]
    got = simulate_from(arrays, proposal, tuple(times), np.inf, work, (recorded, at), scratch)
    assert got == wb.simulate(graph, proposal, 4).makespan
