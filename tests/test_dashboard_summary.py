"""Compare's summary table, its agreement with the CLI, true units, one number format, and the smaller dashboard defects
of issue 29 (no browser: the pages' functions called directly)."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import workbench as wb
from workbench import viz
from workbench.dashboard.pages import compare, compare_choice, graph as graph_page, measured, training
from workbench.dashboard.picker import chosen_message, resolve_graph_key
from workbench.dashboard.summary import sort_rows, stop_reason
from workbench.placers import methods, placers

from .test_dashboard import add_real_stage, write_run

CHAIN = "bundled:doppler-paper/chain_mm_112nodes.txt"
FFNN = "bundled:doppler-paper/ffnn_192nodes.txt"
OWN = "doppler@datasets:pretrained/ffnn_192nodes/doppler.safetensors"


def summary(children) -> list[dict]:
    """The summary table's rows in a Compare results area (the table comes right after the header)."""
    table = children[1].children[0]
    assert table.id == "compare-summary"
    return table.data


def test_compare_shows_a_sortable_summary_table_before_the_bars(context):
    children, state = compare.compare_view(context, CHAIN, 4, ["round_robin", "local_search", "critical_path"], 0, 40, None)
    rows = summary(children)
    assert children[1].children[1].children[1].id["index"] == "makespans"  # the bar chart comes after the table
    assert [r["_makespan"] for r in rows] == sorted(r["_makespan"] for r in rows)  # best first
    by_method = {r["method"]: r for r in rows}
    assert set(by_method) == {"round_robin", "local_search", "critical_path"}
    search = by_method["local_search"]
    assert search["_evaluations"] == 40 and search["evaluations"] == "40" and search["stop"] == "its budget of 40 evaluations"
    assert by_method["critical_path"]["stop"] == "one pass" and by_method["critical_path"]["_stop"] == "one pass"
    best = rows[0]["_makespan"]
    bound = wb.lower_bound(wb.bundled_graph("chain_mm"), 4)
    for row in rows:
        assert row["_ratio"] == pytest.approx(row["_makespan"] / best) and row["_gap"] == pytest.approx(row["_makespan"] / bound - 1)
        assert row["_seconds"] > 0 and row["_cpu_seconds"] >= 0
        assert sum(float(p.rstrip("%")) for p in row["why"].split(" / ")) == pytest.approx(100, abs=2)
    by_evaluations = sort_rows(rows, [{"column_id": "evaluations", "direction": "desc"}])
    assert by_evaluations[0]["method"] == "local_search"
    assert [r["method"] for r in sort_rows(rows, [{"column_id": "makespan", "direction": "desc"}])] == [r["method"] for r in rows[::-1]]
    colors = {r["method"]: r["color"] for r in rows}
    again = summary(compare.compare_view(context, CHAIN, 4, ["critical_path", "heft"], 0, 40, None)[0])
    assert {r["method"]: r["color"] for r in again}["critical_path"] == colors["critical_path"]  # stable per method
    assert len(set(colors.values())) == 3


def no_nested_lists(children) -> bool:
    """True when no list of children holds another list (the browser cannot render one: React error #31, a blank page)."""
    items = children if isinstance(children, list) else [children]
    for item in items:
        if isinstance(item, list):
            return False
        inner = getattr(item, "children", None)
        if inner is not None and not isinstance(inner, str) and not no_nested_lists(inner):
            return False
    return True


def test_compare_results_render_in_a_browser_no_list_nested_in_a_list(context):
    children, _ = compare.compare_view(context, CHAIN, 4, ["critical_path", "heft"], 0, 40, None)
    assert no_nested_lists(children)


def test_sorting_uses_the_numbers_not_their_text():
    rows = [{"method": m, "makespan": viz.format_number(v), "_makespan": v} for m, v in (("a", 9.5e12), ("b", 1.2e13), ("c", 12.0))]
    assert [r["method"] for r in sort_rows(rows, [{"column_id": "makespan", "direction": "asc"}])] == ["c", "a", "b"]
    assert [r["method"] for r in sort_rows(rows, [{"column_id": "method", "direction": "desc"}])] == ["c", "b", "a"]


def test_a_search_cut_by_the_clock_says_so_and_an_empty_time_limit_sets_no_clock(context):
    cut = SimpleNamespace(evaluations=14131, seconds=10.02)
    stop = stop_reason("local_search", cut, 20000, 10.0)
    assert stop.kind == "clock" and stop.text == "the 10 s clock after 14,131 of 20,000 evaluations"
    assert stop_reason("local_search", SimpleNamespace(evaluations=20000, seconds=3.0), 20000, 10.0).kind == "budget"
    assert stop_reason("local_search", SimpleNamespace(evaluations=1, seconds=0.1), 20000, None).kind == "converged"
    assert (
        stop_reason("doppler", SimpleNamespace(evaluations=1, seconds=0.1), 20000, None, searched=False).text == "one pass (1 evaluation)"
    )
    children, state = compare.compare_view(context, CHAIN, 4, ["local_search"], 0, 200_000, 0.3)
    assert state["time_limit"] == 0.3
    text = str(children)
    assert "stopped by the 0.3 s clock after " in text and " of 200,000 evaluations" in text
    assert state is not None and compare.compare_view(context, CHAIN, 4, ["critical_path"], 0, 30, None)[1]["time_limit"] is None
    assert not re.search(r"(?<![\d,])1 simulator evaluations", text)  # "1 evaluation" is singular; 501 is not 1


def untrained_runs(context, methods_without_a_shipped_checkpoint: list[str]) -> None:
    """A run per learned method that ships no checkpoint: a small untrained policy for ChainMM and FFNN on 4 devices, kept as
    the run's Stage II weights, so Compare offers it on both graphs as any run's checkpoint."""
    torch = pytest.importorskip("torch")
    from workbench.learn import make_policy
    from workbench.learn.policy import PolicyConfig

    from .conftest import save_trained_for

    torch.manual_seed(0)
    small = PolicyConfig(width=16, message_passing_steps=2, head_hidden=(16,), attention_heads=2)
    graphs = [wb.bundled_graph("chain_mm"), wb.bundled_graph("ffnn")]
    for method in methods_without_a_shipped_checkpoint:
        run = context.runs_dir / f"untrained-{method}"
        (run / "checkpoints").mkdir(parents=True)
        meta = {"status": "finished", "method": method, "graphs": [g.name for g in graphs], "devices": 4, "stages": ["sim"]}
        (run / "meta.json").write_text(json.dumps(meta))
        save_trained_for(make_policy(method, small), run / "checkpoints" / "sim.safetensors", graphs, 4, cross_graph=True)


def cli_makespan(key: str, value: str, context, seed: int, budget: int, capsys) -> float:
    """What ``workbench place`` prints for a Compare method value (its checkpoint as --option checkpoint=FILE, active search as
    --option search=active, --budget where the method takes one), by the CLI's own code path."""
    from workbench.cli import main
    from workbench.dashboard.sources import parse_method

    method, options = parse_method(context, value)
    argv = ["place", str(context.in_datasets(key.partition(":")[2])), "--method", method, "--devices", "4", "--seed", str(seed)]
    argv += ["--budget", str(budget)] if "budget" in wb.placers.placer_options(method) else []
    argv += ["--option", f"checkpoint={options['checkpoint']}"] if "checkpoint" in options else []
    argv += ["--option", "search=active"] if options.get("search") == "active" else []
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0, argv
    return float(json.loads(capsys.readouterr().out)["makespan"])


@pytest.mark.parametrize("key", [CHAIN, FFNN])
def test_compare_agrees_with_workbench_place_for_every_registered_method(context, key, capsys):
    """Compare's defaults are the CLI's: no clock unless one is set, so each makespan is what `workbench place` prints for the
    same seed and budget; for every registered method, a learned one with each checkpoint Compare offers for the graph (its
    own pretrained policy, the zero-shot policy, a run's weights) and as active search where it has one. cpsat is the one
    method left out: it always runs on a clock (10 s by default), so two runs need not agree."""
    learned = methods("learned")
    shipped = {"doppler", "doppler_plc_only"}  # the graph's own pretrained policy, and the zero-shot one
    untrained_runs(context, sorted(set(learned) - shipped))
    graph = wb.load_graph(context.in_datasets(key.partition(":")[2]))
    offered = [o["value"] for o in compare_choice.method_options(context, graph, 4)]
    chosen = [m for m in placers() if m not in learned and m != "cpsat"]
    chosen += [value for value in offered if value.partition("|")[2].partition("@")[0] in learned or value.partition("@")[0] in learned]
    covered = {value.rpartition("|")[2].partition("@")[0] for value in chosen}
    assert covered == set(placers()) - {"cpsat"}, sorted(set(placers()) - covered)  # every registered method, once at least
    assert sum(value.startswith("active|") for value in chosen) == 2  # the graph's own policy and the zero-shot one, searched
    budget, seed = 60, 3
    children, state = compare.compare_view(context, key, 4, chosen, seed, budget, None)
    shown = dict(zip(state["methods"], state["labels"], strict=True))
    rows = {r["method"]: r for r in summary(children)}
    assert len(rows) == len(chosen), [str(c) for c in children if "failed" in str(c) or "did not finish" in str(c)]
    for value in chosen:
        row = rows[shown[value]]
        assert row["_makespan"] == cli_makespan(key, value, context, seed, budget, capsys), value
        assert row["_stop"] != "clock", value  # nothing was cut by the server's cap, so nothing differs from the CLI for that


def test_critical_path_split_adds_up_to_the_makespan():
    graph = wb.bundled_graph("ffnn")
    for assignment in (np.zeros(graph.num_nodes, int), np.arange(graph.num_nodes) % 4):
        trace = wb.simulate(graph, assignment, 4).trace
        split = viz.critical_path_split(graph, trace)
        assert sum(split.values()) == pytest.approx(trace.makespan)
        assert min(split.values()) >= 0
    assert viz.critical_path_split(graph, wb.simulate(graph, np.zeros(graph.num_nodes, int), 4).trace)["transfer"] == 0.0
    spread = viz.critical_path_split(graph, wb.simulate(graph, np.arange(graph.num_nodes) % 4, 4).trace)
    assert spread["transfer"] > 0  # ops on different devices: data in flight on the path


def test_one_number_format_the_clis_digits():
    assert viz.format_number(68719476736.0) == "6.87195e10" == f"{68719476736.0:,.6g}".replace("e+", "e")
    assert viz.format_number(12345.678) == "12,345.7" and viz.format_number(0.0123) == "0.0123" and viz.format_number(None) == "–"
    paper = wb.bundled_graph("ffnn")
    assert viz.format_time(8.41823e11, paper) == "8.41823e11 (84.1823 ÷1e10)"
    assert viz.format_time(0.5, paper, unit="s") == "0.5 s"
    trace = wb.simulate(paper, np.arange(paper.num_nodes) % 4, 4).trace
    fig = viz.gantt_figure(paper, trace)
    hovers = [str(t.customdata[0][2]) for t in fig.data if t.type == "bar" and t.customdata is not None]
    assert hovers and all("e+" not in h for h in hovers) and "customdata[2]}" in fig.data[1].hovertemplate


def test_makespan_bars_cut_long_labels_keep_values_beside_the_bars_and_name_the_best():
    graph = wb.bundled_graph("ffnn")
    placements = {m: wb.place(graph, m, 4) for m in ("critical_path", "round_robin")}
    placements["x" * 150] = placements["critical_path"]
    fig = viz.makespan_bars(placements, wb.lower_bound(graph, 4), graph=graph)
    bars = fig.data[0]
    assert max(len(label) for label in bars.y) <= 48 and bars.customdata[2][0] == "x" * 150  # full label on hover
    assert bars.textposition == "outside" and fig.layout.xaxis.range[1] > max(bars.x) * 1.3  # values right of the bars
    assert any(t.name == "best makespan (outlined)" for t in fig.data)
    assert list(bars.marker.color) == [viz.method_color(m) for m in placements]


def test_critical_path_and_the_op_highlight_have_colors_no_device_has():
    devices = {viz.device_color(d).lower() for d in range(20)}
    assert viz.CRITICAL.lower() not in devices and viz.HIGHLIGHT.lower() not in devices and viz.CRITICAL != viz.HIGHLIGHT
    graph = wb.bundled_graph("chain_mm")
    trace = wb.simulate(graph, np.arange(graph.num_nodes) % 4, 4).trace
    fig = viz.gantt_figure(graph, trace, critical_path=True)
    assert next(t for t in fig.data if t.name.startswith("critical path")).line.color == viz.CRITICAL
    assert viz.gantt_highlight(trace, 3)[0]["line"]["color"] == viz.HIGHLIGHT


def test_graph_page_colors_ops_by_a_learned_placement_of_its_graph(context):
    options = [o["value"] for o in graph_page.placement_options(context, FFNN, 4)]
    assert OWN in options and "critical_path" in options
    assert OWN not in [o["value"] for o in graph_page.placement_options(context, CHAIN, 4)]
    fig, _csv, _stats, note = graph_page.graph_view(context, FFNN, "device", OWN, 4)
    assert note is None and any((t.name or "").startswith("device") for t in fig.data)


def test_going_4_then_8_then_4_devices_brings_the_graphs_pretrained_policy_back(context):
    ffnn = wb.bundled_graph("ffnn")
    selected = ["critical_path", OWN]
    kept, pending = compare_choice.restore_selection(context, selected, [], compare_choice.method_options(context, ffnn, 8))
    assert kept == ["critical_path"] and pending == [OWN]
    kept, pending = compare_choice.restore_selection(context, kept, pending, compare_choice.method_options(context, ffnn, 4))
    assert kept == ["critical_path", OWN] and pending == []


def test_anytime_evaluation_axis_has_no_ticks_below_one():
    records = {"local_search": [[[1, 10.0, 0.01], [50, 8.0, 0.2], [400, 7.0, 1.0]]]}
    fig = viz.anytime_figure(records)
    assert fig.layout.xaxis.range[0] == 0.0 and fig.layout.xaxis.dtick == 1
    assert viz.anytime_figure(records, x="cpu_seconds").layout.xaxis.range is None  # CPU seconds below 1 are real


def test_texts_say_what_they_mean(context):
    assert "`" not in str(measured.layout(context, None))  # the help text shows code, not backticks
    when = training.found_when({"stage": "search", "episode": 4300})
    assert "stage search" not in when and "samples after training" in when
    assert training.found_when({"stage": "sim", "episode": 12}) == "Stage II: simulator RL, episode 12"
    for name in wb.PAPER_GRAPHS:  # the op search's example finds an op in every paper graph
        graph = wb.bundled_graph(name)
        assert viz.find_ops(graph, graph.num_nodes, compare.SEARCH_EXAMPLE)
    spec = json.dumps({"layers": 3, "width": 2})
    key, error = resolve_graph_key(context, "generated", None, None, "layered", spec)
    assert error is None and "ops" in str(chosen_message(context, key))  # replaces "choose a generator family…"


def test_stage_three_of_the_simulator_oracle_is_in_graph_units(context):
    frame = pd.DataFrame({"stage": ["sim", "real"], "episode": [0, 1], "makespan": [1e13, 2e13], "oracle": ["sim", "sim"]})
    fig = viz.training_curves({"run": frame})
    assert "s, measured" not in fig.layout.yaxis2.title.text and "simulator oracle" in fig.layout.yaxis2.title.text
    assert viz.training_curves({"run": frame.assign(oracle=["sim", "real"])}).layout.yaxis2.title.text == "Stage III makespan (s, measured)"
    add_real_stage(write_run(context.runs_dir, "simulated"), oracle="sim")
    scatter, _ = measured.training_calibration(context)
    assert scatter.layout.yaxis.title.text == "simulator oracle (graph units)"


def test_a_measurement_by_the_simulator_oracle_is_not_called_seconds(context):
    from .test_dashboard import write_calibration

    write_calibration(context.runs_dir)
    journal = context.runs_dir / "calibrate-chain_mm_112nodes-2d" / "measurements.jsonl"
    entry = json.loads(journal.read_text().splitlines()[0])
    entry["measurement"]["oracle"] = "sim"
    journal.write_text(json.dumps(entry) + "\n")
    (source,) = [o for o in measured.measured_sources(context) if o["value"].startswith("journal:")]
    assert "graph units" in source["label"] and " ms" not in source["label"]
    gantt, *_rest, note = measured.measured_view(context, source["value"], None)
    assert "seconds" not in gantt.layout.title.text and "graph units" in gantt.layout.xaxis2.title.text
    assert "0.01 s" not in str(note)


def test_gantt_draws_the_critical_path_in_three_parts_each_its_own_legend_entry():
    graph = wb.bundled_graph("transformer_block")
    trace = wb.simulate(graph, np.arange(graph.num_nodes) % 4, 4).trace
    parts = viz.critical_path_parts(graph, trace)
    assert sum(b - a for pieces in parts.values() for a, b, _, _ in pieces) == pytest.approx(trace.makespan)
    assert all(source != target for _, _, source, target in parts["transfer"])  # data moves between devices
    fig = viz.gantt_figure(graph, trace, critical_path=True)
    drawn = [t for t in fig.data if (t.name or "").startswith("critical path")]
    assert [t.line.dash for t in drawn] == ["solid", "dash", "dot"] and all(t.showlegend for t in drawn)
    split = viz.critical_path_split(graph, trace)
    assert drawn[1].name == f"critical path: transfer {split['transfer'] / trace.makespan:.0%}"


def test_whatif_polish_runs_in_a_child_that_the_servers_time_cap_stops(context, monkeypatch):
    from workbench.dashboard import work
    from workbench.dashboard.context import DashboardContext
    from workbench.dashboard.limits import Limits

    graph = wb.bundled_graph("chain_mm")
    start = wb.place(graph, "round_robin", 4)
    polished = work.polish_placement(context, CHAIN, 4, 0, 30, None, start.assignment.tolist())
    assert polished.evaluations == 30 and polished.makespan <= start.makespan
    monkeypatch.setattr(work, "GRACE", 0.0)
    capped = DashboardContext(context.runs_dir, context.datasets_dir, context.upload_dir, Limits(max_time_limit=0.5))
    with pytest.raises(work.Cancelled, match="deadline"):  # no clock set, so the server's cap stops it
        work.polish_placement(capped, CHAIN, 4, 0, 200_000, None, start.assignment.tolist())
    assert not work.RUNNER.children()


def test_diff_colors_a_and_b_apart_and_the_utilisation_track_is_one_row_per_device():
    graph = wb.bundled_graph("chain_mm")
    a, b = np.arange(graph.num_nodes) % 8, np.arange(graph.num_nodes)[::-1] % 8
    fig = viz.diff_heatmap(graph, viz.diff_frame(graph, a, b), 8)
    sides = [t for t in fig.data if t.name in ("A", "B")]
    assert [t.marker.color for t in sides] == list(viz.placement.DIFF_COLORS) and sides[0].marker.color != sides[1].marker.color
    trace = wb.simulate(graph, a, 8).trace
    track = [t for t in viz.gantt_figure(graph, trace, devices=8).data if t.type == "heatmap"]
    assert len(track) == 1 and np.asarray(track[0].z).shape == (8, 120)  # eight devices: eight rows, not eight overlaid lines
    busy = np.nan_to_num(np.asarray(track[0].z, dtype=float))
    assert busy.min() >= 0 and busy.max() <= 1


def test_measured_page_without_a_measurement_says_what_each_card_will_show(context):
    out = measured.measured_view(context, None, None)
    texts = [fig.layout.annotations[0].text for fig in (out[0], out[2], out[4], out[6])]
    assert all(texts) and len(set(texts)) == 4  # no blank card
