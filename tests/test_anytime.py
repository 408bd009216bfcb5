"""Any-time records (best makespan so far per evaluation) and their chart."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import workbench as wb
from workbench.placers.anytime import BestSoFar
from workbench.viz import anytime_figure, anytime_frame


@given(st.lists(st.lists(st.floats(1.0, 100.0), min_size=1, max_size=6), min_size=1, max_size=6))
@settings(max_examples=60, deadline=None)
def test_best_so_far_matches_the_running_minimum_of_every_evaluation(batches):
    record = BestSoFar()
    for batch in batches:
        record.add(batch)
    flat = np.concatenate(batches)
    points = np.asarray(record.points)
    assert points[-1, 0] == flat.size and points[0, 0] == 1
    assert np.all(np.diff(points[:, 0]) > 0) and np.all(np.diff(points[:, 1]) <= 0)
    assert np.all(np.diff(points[:, 2]) >= 0) and np.all(points[:, 2] >= 0)  # CPU seconds since the record began
    for evaluation, best, _ in points:
        assert best == flat[: int(evaluation)].min()


def test_best_so_far_counts_evaluations_that_scored_no_candidate():
    record = BestSoFar()
    record.add([5.0, 4.0])
    record.add([3.0], evaluations=4)  # one evaluation (a critical-chain refresh) in between
    assert [point[:2] for point in record.points] == [[1, 5.0], [2, 4.0], [4, 3.0]]


def test_local_search_records_its_best_so_far_against_the_evaluations_it_counts():
    graph = wb.bundled_graph("chain_mm")
    placement = wb.place(graph, method="local_search", devices=4, budget=300, seed=1)
    points = np.asarray(placement.details["anytime"])
    assert points[-1, 0] == placement.details["evaluations"] == 300
    assert points[-1, 1] == pytest.approx(placement.makespan)
    assert points[0, 1] >= placement.details["start_makespan"] >= points[-1, 1]
    assert np.all(np.diff(points[:-1, 1]) < 0) and points[-1, 1] == points[-2, 1]  # a point per improvement, then the last evaluation
    assert len(points) >= 3  # the heuristics improve on each other, then the search on them


def test_anytime_frame_averages_seeds_only_where_every_seed_has_a_value():
    records = {"search": [[[1, 10.0], [5, 8.0], [20, 8.0]], [[2, 9.0], [7, 6.0], [30, 6.0]]]}
    frame = anytime_frame(records)
    assert frame["evaluation"].tolist() == [2, 5, 7, 20]  # from the later start to the earlier end
    assert frame["mean"].tolist() == [9.5, 8.5, 7.0, 7.0]
    assert frame["low"].tolist() == [9.0, 8.0, 6.0, 6.0] and frame["high"].tolist() == [10.0, 9.0, 8.0, 8.0]
    spread = anytime_frame(records, spread="std")
    assert np.allclose(spread["high"] - spread["mean"], spread["std"]) and spread["std"].tolist() == [0.5, 0.5, 1.0, 1.0]
    with pytest.raises(ValueError, match="spread"):
        anytime_frame(records, spread="iqr")


def test_anytime_figure_draws_a_band_and_a_mean_per_method_on_a_log_axis():
    records = {
        "local_search": [[[1, 10.0], [50, 7.0], [100, 7.0]], [[1, 10.0], [80, 6.0], [100, 6.0]]],
        "doppler best of K": [[[1, 9.0], [100, 9.0]]],
    }
    figure = anytime_figure(records, title="t")
    assert figure.layout.xaxis.type == "log"
    means = [trace for trace in figure.data if trace.showlegend is not False]
    bands = [trace for trace in figure.data if trace.fill == "toself"]
    assert [trace.name for trace in means] == ["local_search (mean of 2 seeds)", "doppler best of K (mean of 1 seed)"]
    assert len(bands) == 2 and all(b.mode == "lines" and b.fillcolor.startswith("rgba(") for b in bands)  # no dots, see-through
    assert list(means[0].y) == [10.0, 8.5, 6.5, 6.5] and list(means[0].x) == [1, 50, 80, 100]
    assert max(bands[0].y) == 10.0 and min(bands[0].y) == 6.0  # min..max over the two seeds
    assert anytime_figure({}).data == ()


def test_sampled_and_searched_learned_placements_record_their_anytime_curve():
    graph = wb.bundled_graph("ffnn")
    sampled = wb.place(graph, method="doppler", devices=4, samples=6, seed=0)
    points = np.asarray(sampled.details["anytime"])
    assert points[0, 0] == 1 and points[-1, 0] == 6
    assert points[0, 1] == sampled.details["makespans"][0] and points[-1, 1] == pytest.approx(sampled.makespan)
    searched = wb.place(graph, method="doppler", devices=4, search="active", budget=20, rollouts=4, seed=0)
    points = np.asarray(searched.details["anytime"])
    assert points[0, :2].tolist() == [1, searched.details["start_makespan"]] and points[-1, 0] == 20
    assert points[-1, 1] == pytest.approx(searched.makespan)


def test_the_same_records_chart_against_cpu_seconds_and_records_without_them_are_refused():
    records = {"search": [[[1, 10.0, 0.1], [5, 8.0, 0.4], [20, 8.0, 1.0]], [[2, 9.0, 0.2], [7, 6.0, 0.3], [30, 6.0, 0.9]]]}
    by_time = anytime_frame(records, x="cpu_seconds")
    assert by_time["cpu_seconds"].tolist() == [0.2, 0.3, 0.4, 0.9]  # from the later first point to the earlier last one
    assert by_time["mean"].tolist() == [9.5, 8.0, 7.0, 7.0]
    assert anytime_frame(records)["evaluation"].tolist() == [2, 5, 7, 20]  # the same records, by evaluations
    figure = anytime_figure(records, x="cpu_seconds")
    assert figure.layout.xaxis.title.text == "CPU seconds (log scale)"
    with pytest.raises(ValueError, match="without CPU seconds"):
        anytime_frame({"old": [[[1, 10.0], [5, 8.0]]]}, x="cpu_seconds")
    with pytest.raises(ValueError, match="x must be one of"):
        anytime_frame(records, x="wall")
