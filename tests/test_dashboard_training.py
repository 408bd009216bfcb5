"""The Training page's callbacks in-process: a tick sends nothing for an unchanged run, only the appended points for a
growing one, a bounded figure for many long runs, and a whole redraw when a run is rewritten."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from dash import Patch
from dash._utils import to_json

from workbench.dashboard.context import DashboardContext
from workbench.dashboard.pages import training, training_runs
from workbench.runs import GREEDY_COLUMNS, METRIC_COLUMNS, CsvLog, RunFollowers, RunWriter

GRAPH = "chain_mm_112nodes"


def makespan(episode: int, seed: int) -> float:
    """A noisy learning curve: 1.8e13 falling towards 1.2e13."""
    noise = np.random.default_rng([seed, episode]).standard_normal()
    return float(1.2e13 * (1 + 0.5 * np.exp(-episode / 3000)) * (1 + 0.05 * noise))


def metric_rows(episodes: range, seed: int, stage: str | None = None) -> list[dict]:
    split = 2 * (episodes.stop - episodes.start) // 3
    return [
        {
            "stage": stage or ("il" if e < split else "sim"),
            "episode": e,
            "graph": GRAPH,
            "makespan": makespan(e, seed),
            "reward": -makespan(e, seed) / 1e13,
            "loss": 0.5 / (e + 1),
            "lr": 1e-4,
            "seconds": 0.05 * e,
            "oracle": "sim",
        }
        for e in episodes
    ]


def write_synthetic_run(folder: Path, seed: int, episodes: int, status: str = "finished") -> RunWriter:
    """A run directory of ``episodes`` episodes on ChainMM, written as a trainer writes one (:mod:`workbench.runs`)."""
    run = RunWriter(folder)
    folder.mkdir(parents=True)
    run.write_config({"seed": seed, "episodes": episodes})
    reference = {GRAPH: {"critical_path": 1.5e13, "best_heuristic": 1.3e13, "best_heuristic_method": "heft"}}
    meta = {"status": status, "method": "doppler", "graphs": [GRAPH], "devices": 4, "seed": seed, "stages": ["il", "sim"]}
    run.write_meta({**meta, "reference": reference})
    with CsvLog(run.metrics_path, METRIC_COLUMNS) as log:
        log.start()
        log.append(metric_rows(range(episodes), seed))
    with CsvLog(run.greedy_path, GREEDY_COLUMNS) as log:
        log.start()
        log.append(
            {"stage": "sim", "episode": e, "graph": GRAPH, "greedy": 0.95 * makespan(e, seed), "seconds": 0.05 * e}
            for e in range(2 * episodes // 3, episodes, 500)
        )
    return run


def append_episodes(run: RunWriter, episodes: range, seed: int) -> None:
    with CsvLog(run.metrics_path, METRIC_COLUMNS) as log:
        log.append(metric_rows(episodes, seed, stage="sim"))


def apply_patch(figure: dict, patch: Patch) -> dict:
    """``figure`` after the operations of ``patch``, as the browser applies them (Assign and Extend only)."""
    out = json.loads(to_json(figure))  # what the browser holds
    for operation in json.loads(to_json(patch))["operations"]:
        *path, last = operation["location"]
        target = out
        for step in path:
            target = target[step]
        value = operation["params"]["value"]
        if operation["operation"] == "Extend":
            target[last] = list(target[last]) + value
        else:
            assert operation["operation"] == "Assign", operation
            target[last] = value
    return out


def sent(outputs: tuple) -> int:
    """The bytes of the outputs Dash sends to the browser (it leaves out those that are ``no_update``)."""
    return len(to_json([output for output in outputs if output is not training.no_update]))


def trace(figure: dict, name: str) -> dict:
    return next(t for t in figure["data"] if t.get("name") == name)


@pytest.fixture
def context(tmp_path):
    context = DashboardContext.create(tmp_path / "runs", tmp_path / "datasets")  # no shipped runs: the runs written here only
    yield context
    context.close()


def test_a_tick_sends_nothing_for_an_unchanged_run_and_only_the_appended_points_for_a_growing_one(context):
    live = write_synthetic_run(context.runs_dir / "live", 1, 10_000, status="running")
    write_synthetic_run(context.runs_dir / "done", 2, 10_000)
    followers, keys = RunFollowers(), ["runs:live", "runs:done"]
    full = training.redraw(context, followers, keys, "loss", 25, "episode", False, None)
    drawn = full[-1]
    assert isinstance(full[0], dict) and sent(full) < 400_000, "a bounded figure, no CSV of 20,000 rows"
    raw = trace(full[0], "live (raw)")
    assert 500 < len(raw["x"]) <= training.point_budget(2)[0] and raw["x"][-1] == 9_999
    quiet = training.redraw(context, followers, keys, "loss", 25, "episode", True, drawn, 7)  # nothing changed
    assert all(part is training.no_update for part in quiet[:-1]) and sent(quiet) < 150, to_json(quiet)
    assert apply_patch(drawn, quiet[-1])["answered"] == 7, "only the poll's number, so the browser polls again"

    append_episodes(live, range(10_000, 10_010), 1)
    tick = training.redraw(context, followers, keys, "loss", 25, "episode", True, drawn, 8)
    assert isinstance(tick[0], Patch) and isinstance(tick[2], Patch) and tick[1] is training.no_update
    assert sent(tick) < 6_000, sent(tick)
    grown = apply_patch(full[0], tick[0])
    raw, line = trace(grown, "live (raw)"), trace(grown, "live")
    assert raw["x"][-11:] == list(range(9_999, 10_010)) and raw["y"][-1] == makespan(10_009, 1)
    assert raw["customdata"][-1] == training.format_number(makespan(10_009, 1))
    series = followers.poll(context.runs_dir / "live")[0].metrics["makespan"]
    assert line["y"][-1] == pytest.approx(series.rolling(25, min_periods=1).mean().iloc[-1])
    band = grown["layout"]["shapes"][drawn["makespan"]["live"]["band"]]
    assert band["x1"] == 10_009.5, "the last stage's band reaches the newest episode"
    assert max(trace(grown, name)["x"][1] for name in [t["name"] for t in grown["data"] if "best heuristic" in t["name"]]) == 10_009
    after = tick[-1]
    assert after["runs"]["runs:live"][2] == 10_010 and after["runs"]["runs:done"] == drawn["runs"]["runs:done"]
    assert after["answered"] == 8
    assert sent(training.redraw(context, followers, keys, "loss", 25, "episode", True, after, 9)) < 150

    with CsvLog(live.greedy_path, GREEDY_COLUMNS) as log:  # a new greedy evaluation: a new point on another trace, redrawn whole
        log.append([{"stage": "sim", "episode": 10_010, "graph": GRAPH, "greedy": 1.1e13, "seconds": 500.5}])
    redrawn = training.redraw(context, followers, keys, "loss", 25, "episode", True, after, 10)
    assert isinstance(redrawn[0], dict) and redrawn[-1]["appended"] == 0 and redrawn[-1]["answered"] == 10
    with open(live.metrics_path, "r+b") as handle:  # a resumed run cut its table back: the charts are redrawn from the file
        handle.truncate(len(b"".join(live.metrics_path.read_bytes().splitlines(keepends=True)[:5001])))
    again = training.redraw(context, followers, keys, "loss", 25, "episode", True, redrawn[-1])
    assert isinstance(again[0], dict) and trace(again[0], "live (raw)")["x"][-1] == 4_999


def test_a_selection_change_redraws_whole_even_on_a_tick_and_a_bad_key_is_named(context):
    for seed in range(3):
        write_synthetic_run(context.runs_dir / f"run{seed}", seed, 200)
    followers = RunFollowers()
    drawn = training.redraw(context, followers, ["runs:run0"], "loss", 25, "episode", False, None)[-1]
    both = training.redraw(context, followers, ["runs:run0", "runs:run1"], "loss", 25, "episode", True, drawn)
    assert {t["name"] for t in both[0]["data"]} >= {"run0", "run1"} and both[-1]["view"][0] == ["runs:run0", "runs:run1"]
    other_metric = training.redraw(context, followers, ["runs:run0", "runs:run1"], "reward", 25, "episode", True, both[-1])
    assert "reward per episode" in other_metric[2]["layout"]["title"]["text"]
    none = training.redraw(context, followers, [], "loss", 25, "episode", False, None)
    assert "no run selected" in str(none[6]) and none[-1]["view"] == [[], "loss", 25, "episode"], "polled: new runs reach the table"


def test_twenty_runs_of_ten_thousand_episodes_draw_in_a_bounded_figure(tmp_path):
    context = DashboardContext.create(tmp_path / "runs", tmp_path / "datasets")
    for seed in range(20):
        write_synthetic_run(context.runs_dir / f"run{seed:02d}", seed, 10_000)
    followers = RunFollowers()
    rows = training_runs.table_rows(context, followers, [{"column_id": "best", "direction": "asc"}])
    assert len(rows) == 20 and all(row["episodes"] == "10,000" for row in rows)
    assert [row["_best"] for row in rows] == sorted(row["_best"] for row in rows), "sorted by the number, not its text"
    full = training.redraw(context, followers, [row["id"] for row in rows], "loss", 25, "episode", False, None)
    size = sent(full)
    assert size < 1_500_000, size  # before: 36 MB of figures and 24 MB of CSV for 200,000 episodes
    lines = [trace(full[0], f"run{seed:02d}") for seed in range(20)]
    assert all(len(line["x"]) <= training.point_budget(20)[1] for line in lines) and lines[0]["x"][-1] == 9_999
    assert not any(t["name"].endswith("(raw)") for t in full[0]["data"]), "20 clouds of raw points: none drawn, the means alone"
    print(f"20 runs x 10,000 episodes: a whole redraw sends {size:,} bytes")
    grown = RunWriter(context.runs_dir / "run07")
    append_episodes(grown, range(10_000, 10_010), 7)
    tick = training.redraw(context, followers, [row["id"] for row in rows], "loss", 25, "episode", True, full[-1], 1)
    assert isinstance(tick[0], Patch) and apply_patch(full[0], tick[0])["data"][full[-1]["makespan"]["run07"]["line"]]["x"][-1] == 10_009


def test_four_runs_name_each_reference_line_once_and_label_each_stage_once_without_overlaps(context):
    for seed in range(3):
        write_synthetic_run(context.runs_dir / f"run{seed}", seed, 300)
    write_synthetic_run(context.runs_dir / "longer", 3, 450)  # its stages end later: its bands are staggered
    keys = ["runs:run0", "runs:run1", "runs:run2", "runs:longer"]
    figure = training.redraw(context, RunFollowers(), keys, "loss", 25, "episode", False, None)[0]
    legend = [t["name"] for t in figure["data"] if t.get("showlegend", True)]
    assert sorted(legend) == sorted(
        [
            "run0",
            "run1",
            "run2",
            "longer",
            "teacher (critical_path) 1.5e13",
            "best heuristic heft 1.3e13",
            "greedy evaluations (each run's color)",
        ]
    ), legend  # before: 16 entries, the 2 reference lines and the greedy evaluations once per run
    assert sum("greedy" in t["name"] for t in figure["data"] if t.get("showlegend") is False) == 4, "each run's own, without an entry"
    layout = figure["layout"]
    labels = [(a["text"], a["x"], a["y"]) for a in layout["annotations"]]
    assert sorted(text for text, _x, _y in labels) == ["Stage I: imitation", "Stage II: simulator RL"], labels  # once, not per run
    assert all(top <= 1 for shape in layout["shapes"] for top in (shape["y0"], shape["y1"])), "the bands stay inside the figure"
    assert min(shape["y0"] for shape in layout["shapes"]) >= layout["yaxis"]["domain"][1], "the bands sit above the plot, not on it"
    assert len({(s["y0"], s["y1"]) for s in layout["shapes"]}) == 4, "a band per run"
    assert overlaps(layout["annotations"], 449) == 0


def overlaps(annotations: list[dict], width: float) -> int:
    """Pairs of stage labels at one height whose boxes (as wide as their text at 11 px, on the assumed plot width) meet."""
    from workbench.viz.training import LABEL_PX, PLOT_PX

    boxes = [(a["y"], a["x"] / width * PLOT_PX, len(a["text"]) * LABEL_PX / 2) for a in annotations]
    return sum(
        1
        for i, (y, x, half) in enumerate(boxes)
        for other_y, other_x, other_half in boxes[:i]
        if y == other_y and abs(x - other_x) < half + other_half
    )


def test_reference_lines_of_several_runs_are_drawn_once_per_value_and_named_apart_only_when_they_differ():
    shared = {"a": ("g1", {"teacher": 5.0}), "b": ("g1", {"teacher": 5.0})}
    assert training.shared_references(shared) == {"teacher": 5.0}
    assert training.shared_references({**shared, "c": ("g2", {"teacher": 7.0})}) == {"g1: teacher": 5.0, "g2: teacher": 7.0}
    devices = {"a": ("g1", {"teacher": 5.0}), "b": ("g1", {"teacher": 6.0})}  # one graph, two values (other device counts)
    assert training.shared_references(devices) == {"teacher (a)": 5.0, "teacher (b)": 6.0}


def test_a_series_is_computed_once_while_its_run_is_unchanged_even_without_greedy_csv(context, monkeypatch):
    write_synthetic_run(context.runs_dir / "a", 1, 300)
    write_synthetic_run(context.runs_dir / "b", 2, 300).greedy_path.unlink()  # as the shipped runs: no greedy.csv
    followers, cache, made = RunFollowers(), training.SeriesCache(), []
    real = training.series_parts
    monkeypatch.setattr(training, "series_parts", lambda label, *args: made.append(label) or real(label, *args))
    training.redraw(context, followers, ["runs:a", "runs:b"], "loss", 25, "episode", False, None, None, cache)
    assert sorted(made) == ["a", "a", "b", "b"]  # each series, on both charts
    training.redraw(context, followers, ["runs:a", "runs:b"], "loss", 25, "episode", False, None, None, cache)
    assert len(made) == 4, "a redraw of unchanged runs computes nothing again"
    append_episodes(RunWriter(context.runs_dir / "a"), range(300, 305), 1)
    training.redraw(context, followers, ["runs:a", "runs:b"], "loss", 25, "episode", False, None, None, cache)
    assert sorted(made[4:]) == ["a", "a"], "only the run that grew"
