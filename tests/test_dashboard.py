"""The dashboard's figure builders, readers and callbacks as plain functions (no browser)."""

from __future__ import annotations

import base64
import json
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

import workbench as wb
from workbench import viz as figures
from workbench.dashboard import context as dashboard_context, create_app
from workbench.dashboard.context import PathError, checkout_root, default_runs_dir, resolve_inside
from workbench.dashboard.jobs import JobManager, LaunchError, validate_arguments
from workbench.dashboard.learned import checkpoint_origin
from workbench.dashboard.pages import compare, compare_choice, compare_highlight, graph as graph_page, measured, training, training_runs
from workbench.dashboard.sources import UploadError, load_graph_key, method_choices, method_label, parse_method, save_upload
from workbench.runs import GREEDY_COLUMNS, GREEDY_PERIODIC, RunFollowers, RunPaths, read_frame, read_run, reference_lines

DIAMOND = wb.DataflowGraph.from_edges(
    [1.0, 4.0, 3.0, 1.0], [(0, 1, 2.0), (0, 2, 2.0), (1, 3, 2.0), (2, 3, 2.0)], names=("a", "b", "c", "d")
)
METRICS_HEADER = (
    "stage,episode,graph,makespan,reward,baseline,loss,loss_policy,loss_entropy,loss_imitation,"
    "teacher_agreement,epsilon,lr,seconds,oracle\n"
)


def op_bars(fig: go.Figure) -> list:
    return [t for t in fig.data if t.type == "bar" and t.customdata is not None]


def write_run(root: Path, name: str = "demo", episodes: int = 60, trailing: str = "sim,60,chain_mm_112nodes,12") -> Path:
    """A run directory per docs/contracts.md ("Run directory") whose metrics end in a half-written line."""
    graph = wb.bundled_graph("chain_mm")
    placement = wb.place(graph, "critical_path", 4)
    run = root / name
    (run / "best").mkdir(parents=True)
    meta = {
        "status": "running",
        "method": "doppler",
        "graphs": [graph.name],
        "devices": 4,
        "seed": 0,
        "stages": ["il", "sim"],
        "error": None,
        "reference": {"critical_path": placement.makespan, "best_heuristic": placement.makespan * 0.9, "best_heuristic_method": "heft"},
    }
    (run / "meta.json").write_text(json.dumps(meta))
    (run / "config.json").write_text("{}")
    rows = [
        f"{'il' if e < episodes // 2 else 'sim'},{e},{graph.name},{placement.makespan * (1.5 - e / episodes)},"
        "-1,,0.5,0.4,0.1,,0.8,0.1,1e-4,1,sim\n"
        for e in range(episodes)
    ]
    (run / "metrics.csv").write_text(METRICS_HEADER + "".join(rows) + trailing)
    evaluations = [
        f"sim,{e},{graph.name},{placement.makespan * (1.3 - e / episodes / 2)},{e}\n" for e in range(episodes // 2, episodes + 1, 10)
    ]
    (run / "greedy.csv").write_text(",".join(GREEDY_COLUMNS) + "\n" + "".join(evaluations))
    wb.simulate(graph, placement.assignment, 4).trace.to_json(run / "best" / "trace.json")
    (run / "best" / "placement.json").write_text(
        json.dumps({"graph": graph.name, "devices": 4, "assignment": placement.assignment.tolist(), "stage": "sim", "episode": 3})
    )
    return run


# ---------------------------------------------------------------- figures
def test_gantt_has_one_bar_per_op_on_its_device_row_with_simulated_times():
    result = wb.simulate(DIAMOND, [0, 1, 0, 1], devices=2)
    fig = figures.gantt_figure(DIAMOND, result.trace)
    bars = op_bars(fig)
    seen = {}
    for bar in bars:
        for y, x, base, custom in zip(bar.y, bar.x, bar.base, bar.customdata, strict=False):
            seen[int(custom[0])] = (y, base, x)
    assert sorted(seen) == [0, 1, 2, 3]
    for op, (row, start, duration) in seen.items():
        assert row == result.trace.device[op]
        assert start == result.trace.start[op]
        assert duration == pytest.approx(result.trace.end[op] - result.trace.start[op])
    transfers = next(t for t in fig.data if t.name.endswith("transfers"))
    assert np.count_nonzero(~np.isnan(np.asarray(transfers.x, dtype=float))) == 2 * result.trace.transfer_start.size
    assert fig.layout.xaxis.range[1] >= result.makespan
    assert len(figures.gantt_figure(DIAMOND, result.trace, devices=4).layout.yaxis.tickvals) == 4  # unused devices are idle rows


def test_large_gantt_uses_webgl_segments_for_every_op():
    graph = wb.bundled_graph("ffnn")
    result = wb.simulate(graph, np.arange(graph.num_nodes) % 4, devices=4)
    fig = figures.gantt_figure(graph, result.trace, large_threshold=50)
    segments = [t for t in fig.data if t.type == "scattergl" and t.name.startswith("device")]
    assert len(segments) == 4
    assert sum(np.count_nonzero(~np.isnan(np.asarray(t.x, dtype=float))) for t in segments) == 2 * graph.num_nodes


def test_highlight_shapes_outline_the_op_in_gantt_and_heatmap():
    result = wb.simulate(DIAMOND, [0, 1, 0, 1], devices=2)
    shapes = figures.gantt_highlight(result.trace, 1)
    assert shapes[0]["x0"] == result.trace.start[1] and shapes[0]["x1"] == result.trace.end[1]
    assert len(shapes) == 2 + 1  # the bar, the time marker, and the transfer 0 -> 1 (op 3 shares its device)
    assert figures.gantt_highlight(result.trace, None) == []
    column = figures.heatmap_highlight(DIAMOND, 3, 2)[0]
    assert column["x0"] == 2.5  # op 3 is last in topological order


def test_placement_heatmap_puts_each_op_on_its_device_in_topological_order():
    graph = wb.bundled_graph("chain_mm")
    assignment = np.random.default_rng(0).integers(0, 3, graph.num_nodes)
    heat = figures.placement_heatmap(graph, assignment, 3).data[0]
    z = np.asarray(heat.z, dtype=float)
    order = np.asarray(graph.topological_order)
    assert z.shape == (3, graph.num_nodes)
    assert np.array_equal(np.nanargmax(np.nan_to_num(z, nan=-1) + 1, axis=0), assignment[order])
    assert (~np.isnan(z)).sum() == graph.num_nodes


def test_makespan_bars_draw_the_lower_bound_and_the_gap():
    graph = wb.bundled_graph("chain_mm")
    placements = [wb.place(graph, m, 4) for m in ("critical_path", "round_robin")]
    bound = wb.lower_bound(graph, 4)
    fig = figures.makespan_bars(placements, bound)
    assert list(fig.data[0].x) == [p.makespan for p in placements]  # one horizontal bar per method
    assert list(fig.data[0].y) == [p.method for p in placements]
    assert set(fig.data[1].x) == {bound}
    frame = figures.makespan_frame(placements, bound)
    assert frame["gap"].tolist() == pytest.approx([p.makespan / bound - 1 for p in placements])


def test_training_curves_shade_stages_smooth_and_draw_references():
    frame = pd.DataFrame({"stage": ["il"] * 10 + ["sim"] * 10, "episode": range(20), "makespan": np.arange(20.0)[::-1]})
    fig = figures.training_curves({"run": frame}, "makespan", {"teacher": 5.0}, window=4)
    smooth = next(t for t in fig.data if t.mode == "lines")
    assert smooth.y[5] == pytest.approx(np.mean([17, 16, 15, 14]))
    rects = [s for s in fig.layout.shapes if s.type == "rect"]
    assert [(r.x0, r.x1) for r in rects] == [(-0.5, 9.5), (9.5, 19.5)]
    assert any(t.name.startswith("teacher") and set(t.y) == {5.0} for t in fig.data)  # a legend entry, not a colliding label
    assert any("Stage II" in a.text for a in fig.layout.annotations)


def test_graph_figure_layers_ops_by_depth_and_marks_the_critical_path():
    fig = figures.graph_figure(DIAMOND)
    ops = next(t for t in fig.data if t.name == "ops")
    assert list(ops.x) == [0, 1, 1, 2]
    path = next(t for t in fig.data if t.name == "critical path")
    assert np.count_nonzero(~np.isnan(np.asarray(path.x, dtype=float))) == 2 * 2  # a -> b -> d
    with pytest.raises(ValueError, match="assignment"):
        figures.graph_figure(DIAMOND, color_by="device")
    assert figures.graph_statistics(DIAMOND, 2)["depth (layers)"] == 3


@pytest.mark.slow
def test_png_and_csv_downloads_of_a_card(context):
    from workbench.dashboard.components import download_payload

    figure = figures.makespan_bars({"a": 1.0, "b": 2.0}, 0.5).to_plotly_json()  # what the browser sends back
    data, text = download_payload(context, "png-button", "compare/makespans", figure, None)
    assert text == "" and data["filename"] == "compare-makespans.png"
    assert base64.b64decode(data["content"])[:8] == b"\x89PNG\r\n\x1a\n"
    data, _ = download_payload(context, "csv-button", "compare/makespans", figure, "method,makespan\na,1\n")
    assert data["content"].startswith("method,makespan")
    assert download_payload(context, "csv-button", "x", figure, None) == (None, "no data to download")


# ------------------------------------------------------------- safe input
def test_paths_cannot_escape_their_folder(tmp_path):
    assert resolve_inside(tmp_path, "a/b.txt") == (tmp_path / "a" / "b.txt").resolve()
    for bad in ("../x", "/etc/passwd", "a/../../x", ""):
        with pytest.raises(PathError):
            resolve_inside(tmp_path, bad)


def test_runs_folder_is_the_checkouts_or_else_the_current_folders_never_site_packages(tmp_path, monkeypatch):
    """An installed wheel's package sits in site-packages, whose parent is no checkout: its runs go to ./runs, not beside it."""
    root = Path(figures.__file__).resolve().parents[2]
    assert checkout_root(root / "workbench") == root and dashboard_context.CHECKOUT == root
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    (site / "workbench").mkdir(parents=True)
    assert checkout_root(site / "workbench") is None
    monkeypatch.delenv("WORKBENCH_RUNS", raising=False)
    assert default_runs_dir() == root / "runs"
    monkeypatch.setattr(dashboard_context, "CHECKOUT", None)
    monkeypatch.chdir(tmp_path)
    assert default_runs_dir() == tmp_path / "runs"
    monkeypatch.setenv("WORKBENCH_RUNS", str(tmp_path / "shared"))
    assert default_runs_dir() == tmp_path / "shared"


def test_uploads_are_checked_and_errors_name_the_file(context):
    def data_url(text: str) -> str:
        return "data:text/plain;base64," + base64.b64encode(text.encode()).decode()

    key = save_upload(context, "tiny.json", data_url(json.dumps(DIAMOND.to_dict())))
    assert load_graph_key(context, key).num_nodes == 4
    with pytest.raises(wb.GraphFormatError, match="notes.txt"):
        save_upload(context, "notes.txt", data_url("hello\nworld\n"))
    with pytest.raises(UploadError, match="upload limit"):
        save_upload(context, "big.txt", "data:text/plain;base64," + "A" * (17 * 1024 * 1024 * 4 // 3))
    with pytest.raises(PathError):
        load_graph_key(context, "upload:../../etc/passwd")
    with pytest.raises(PathError):
        load_graph_key(context, "bundled:../README.md")


def test_learned_methods_need_a_checkpoint_inside_the_allowed_folders(context):
    values = [o["value"] for o in method_choices(context, "ffnn_192nodes")]
    assert "critical_path" in values and not any(v.split("@")[0] in ("doppler", "gdp") and "@" not in v for v in values)
    with pytest.raises(PathError):
        parse_method(context, "critical_path@runs:../../etc/passwd")
    with pytest.raises(PathError):
        parse_method(context, "critical_path@home:/x.pt")


# -------------------------------------------------------------- run dirs
def test_read_run_ignores_a_half_written_line_and_reports_corrupt_files(tmp_path):
    run = write_run(tmp_path)
    loaded = read_run(run)
    assert len(loaded.metrics) == 60 and loaded.problems == ()
    assert loaded.best_trace.num_ops == wb.bundled_graph("chain_mm").num_nodes
    assert set(reference_lines(loaded.meta)) == {"teacher (critical_path)", "best heuristic heft"}
    (run / "meta.json").write_text('{"status": "runn')
    (run / "best" / "trace.json").write_text("[]")
    broken = read_run(run)
    assert broken.meta is None and broken.best_trace is None
    assert any("meta.json" in p for p in broken.problems) and any("trace.json" in p for p in broken.problems)
    assert read_run(tmp_path / "missing").problems


def test_read_frame_skips_and_reports_damaged_rows_and_handles_empty_files(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text(
        METRICS_HEADER + "il,0,g,5,,,,,,,,,,,sim\nil,x,g,6,,,,,,,,,,,sim\nil,2,g,7,,,,,,,,,,,sim,extra,extra\nil,3,g,8,,,,,,,,,,,sim\n"
    )
    problems: list[str] = []
    frame = read_frame(path, problems)
    assert frame["episode"].tolist() == [0, 3] and frame["makespan"].tolist() == [5.0, 8.0]
    assert problems == ["metrics.csv: skipped 2 damaged line(s) (line 3, 4): each line needs 15 fields and a whole episode number"]
    path.write_text("stage,epis")
    assert read_frame(path, []).empty


def test_a_stray_quote_in_metrics_spoils_no_other_row(tmp_path):
    path = tmp_path / "metrics.csv"
    rows = [f"il,{episode},g,5,,,,,,,,,,,sim\n" for episode in range(400)]
    rows[30] = 'il,30,"g,5,,,,,,,,,,,sim\n'  # one unbalanced quote used to swallow the 370 rows after it
    path.write_text(METRICS_HEADER + "".join(rows))
    problems: list[str] = []
    assert read_frame(path, problems)["episode"].tolist() == [e for e in range(400) if e != 30]
    assert problems == ["metrics.csv: skipped 1 damaged line(s) (line 32): each line needs 15 fields and a whole episode number"]


def test_training_view_draws_curves_and_best_gantt_and_survives_bad_runs(context):
    write_run(context.runs_dir, "good")
    followers = RunFollowers()
    view = training.training_view(context, ["runs:good"], "loss", 10, followers=followers)
    curves, request, losses, gantt, gantt_csv, _status, _configs, events, _drawn = view
    curves, losses = go.Figure(curves), go.Figure(losses)  # plain dicts, as plotly.js takes them
    assert sum(e.get("cat") == "op" for e in json.loads(events)["traceEvents"]) == gantt_csv.count("\n") - 1
    assert any(t.name == "good" for t in curves.data) and any(t.name == "good" for t in losses.data)
    assert any(t.name.startswith("teacher") for t in curves.data) and not any(t.name.startswith("teacher") for t in losses.data)
    csv = training.metrics_csv(context, followers, request)  # made when the CSV button is clicked, not sent with the figure
    assert len(op_bars(gantt)) == 4 and len(pd.read_csv(pd.io.common.StringIO(csv))) == 60 and len(json.dumps(request)) < 100
    (context.runs_dir / "empty").mkdir()
    (context.runs_dir / "empty" / "meta.json").write_text("not json")
    *_, status, _configs, _events, _drawn = training.training_view(context, ["runs:empty"], "loss", 10)
    assert "unreadable" in str(status) and "metrics.csv is missing" in str(status)
    for key in ("runs:../../etc", "pretrained:../../etc"):
        with pytest.raises(PathError):
            training_runs.read_selected(context, followers, [key])
        assert training.redraw(context, followers, [key], "loss", 10, "episode", False, None)[6].className == "wb-message wb-error"
        assert training.metrics_csv(context, followers, {"runs": [key]}) is None


# -------------------------------------------------------------- callbacks
def test_compare_view_shows_each_method_and_a_message_for_failures(context):
    key = "bundled:doppler-paper/chain_mm_112nodes.txt"
    children, state = compare.compare_view(context, key, 4, ["critical_path", "round_robin", "no_such_method"], 0, 100, 1)
    text = str(children)
    assert "'gantt/0'" in text and "'gantt/1'" in text and "'heatmap/1'" in text
    assert "no_such_method failed: unknown method" in text
    assert state["methods"] == ["critical_path", "round_robin", "no_such_method"]
    patches = compare_highlight.highlight_patches(context, state, 5, [{"index": "gantt/0"}, {"index": "heatmap/1"}, {"index": "makespans"}])
    assert patches[0].to_plotly_json()["operations"][0]["params"]["value"][0]["type"] == "rect"
    assert compare.compare_view(context, key, 0, ["critical_path"])[1] is None
    assert "devices must be" in str(compare.compare_view(context, key, "x", ["critical_path"])[0])
    assert compare_highlight.clicked_op({"points": [{"customdata": [7, "op7"]}]}) == 7
    assert compare_highlight.clicked_op({"points": [{"x": 1}]}) is None


def test_graph_view_colors_ops_by_device(context):
    key = "bundled:doppler-paper/chain_mm_112nodes.txt"
    fig, csv, stats, note = graph_page.graph_view(context, key, "device", "critical_path", 4)
    assert {t.name for t in fig.data} >= {"device 0", "critical path"} and note is None


def write_calibration(root: Path) -> wb.Trace:
    """A ``workbench calibrate`` folder whose journal ends in a half-written line; returns the measured trace."""
    graph = wb.bundled_graph("chain_mm")
    trace = wb.simulate(graph, np.arange(graph.num_nodes) % 2, 2).trace
    folder = root / "calibrate-chain_mm_112nodes-2d"
    folder.mkdir()
    entry = {"key": "round_robin|0,1", "measurement": {"seconds": 0.01, "trace": trace.to_dict()}}
    (folder / "measurements.jsonl").write_text(json.dumps(entry) + "\n" + json.dumps(entry)[:40])
    fitted = {"cluster": wb.Cluster.identical(2).to_dict(), "time_scale": 1e-3, "op_overhead": 0.0}
    placements = [{"label": f"p{i}", "measured": 0.01 * i, "before": 0.012 * i, "after": 0.011 * i} for i in range(1, 5)]
    (folder / "calibration.json").write_text(json.dumps({"graph": graph.name, "fitted": fitted, "placements": placements}))
    return trace


def test_measured_view_reads_calibration_journals_and_trace_files(context):
    trace = write_calibration(context.runs_dir)
    trace.to_json(context.runs_dir / "measured_trace.json")
    values = [o["value"] for o in measured.measured_sources(context)]
    assert values == ["journal:calibrate-chain_mm_112nodes-2d:0", "runs:measured_trace.json"]
    out = measured.measured_view(context, values[0], None)
    assert len(op_bars(out[0])) == 2 and "calibrated simulator" in out[2].layout.title.text
    assert out[2].layout.xaxis.range[1] == pytest.approx(trace.makespan * 1e-3 * 1.01)
    assert [t.name.split(":")[0] for t in out[4].data[:2]] == ["before calibration", "after calibration"]
    slices = [e for e in json.loads(out[8])["traceEvents"] if e.get("cat") == "op"]
    assert max(e["ts"] + e["dur"] for e in slices) == pytest.approx(trace.makespan * 1e6)  # measured seconds as microseconds
    plain = measured.measured_view(context, values[1], "bundled:doppler-paper/chain_mm_112nodes.txt")
    assert "graph units" in plain[2].layout.title.text
    wrong = measured.measured_view(context, values[1], "bundled:doppler-paper/ffnn_192nodes.txt")
    assert "choose the graph it was measured on" in str(wrong[-1])
    assert "outside" in str(measured.measured_view(context, "runs:../../x_trace.json", None)[-1])


def test_graph_picker_resolves_each_source(context):
    from workbench.dashboard.picker import resolve_graph_key

    assert resolve_graph_key(context, "bundled", "bundled:stg/50/rand0000.stg", None, None, None) == ("bundled:stg/50/rand0000.stg", None)
    assert resolve_graph_key(context, "uploaded", None, None, None, None)[1] == "upload a graph file"
    assert "not valid JSON" in resolve_graph_key(context, "generated", None, None, "layered", "{bad")[1]
    key, error = resolve_graph_key(context, "generated", None, None, "layered", json.dumps({"layers": 3, "width": 2}))
    assert error is None and load_graph_key(context, key).num_nodes > 0
    assert "cannot load the graph" in resolve_graph_key(context, "generated", None, None, "layered", '{"no_such_parameter": 1}')[1]


# ---------------------------------------------------------------- launch
def test_launch_arguments_are_validated_by_the_cli_parser(context):
    assert validate_arguments(context, "place", {"graph": "chain_mm", "devices": "4", "method": "critical_path"}) == [
        "chain_mm",
        "--devices",
        "4",
        "--method",
        "critical_path",
    ]
    with pytest.raises(LaunchError, match="datasets/ or runs/"):
        validate_arguments(context, "place", {"graph": "/etc/passwd"})
    with pytest.raises(LaunchError, match="outside"):
        validate_arguments(context, "place", {"graph": "datasets/../../etc/passwd"})
    with pytest.raises(LaunchError, match="not an integer|must be"):
        validate_arguments(context, "place", {"graph": "chain_mm", "devices": "zero"})
    with pytest.raises(LaunchError, match="looks like an option"):
        validate_arguments(context, "place", {"graph": "chain_mm", "method": "--help"})
    with pytest.raises(LaunchError, match="cannot be launched"):
        validate_arguments(context, "info", {})


def test_jobs_run_in_the_background_and_can_be_stopped(context):
    jobs = JobManager(context)
    job = jobs.start("place", {"graph": "chain_mm", "devices": "2", "method": "critical_path"})
    assert job.process.args[:4][1:] == ["-m", "workbench", "place"]
    deadline = time.time() + 60
    while job.returncode is None and time.time() < deadline:
        time.sleep(0.2)
    assert job.state == "finished" and "makespan" in job.log_tail()
    slow = jobs.start("place", {"graph": "datasets/stg/50/rand0000.stg", "method": "critical_path"})
    jobs.stop(slow.id)
    slow.process.wait(timeout=30)
    assert slow.state in ("stopped", "finished")
    jobs.shutdown()


def test_app_factory_serves_every_page(context):
    app = create_app(runs_dir=context.runs_dir)
    client = app.server.test_client()
    assert client.get("/").status_code == 200
    layout = client.get("/_dash-layout").get_json()
    assert "selected-op" in json.dumps(layout)
    assert app.server.config["MAX_CONTENT_LENGTH"] > 16 * 1024 * 1024


def test_compare_offers_a_checkpoint_only_for_its_graph_and_carries_the_selection_across_graphs(context):
    ffnn, chain = wb.bundled_graph("ffnn"), wb.bundled_graph("chain_mm")
    ffnn_options = compare_choice.method_options(context, ffnn, 4)
    doppler = [o for o in ffnn_options if o["value"].startswith("doppler@")]
    assert [o["value"] for o in doppler] == ["doppler@datasets:pretrained/ffnn_192nodes/doppler.safetensors"]
    assert "trained on ffnn_192nodes" in doppler[0]["label"] and "Stage II" in doppler[0]["label"]
    chain_options = compare_choice.method_options(context, chain, 4)
    assert not any("ffnn_192nodes" in o["value"] for o in chain_options)
    kept, dropped = compare_choice.carry_selection(context, ["heft", doppler[0]["value"]], chain_options)
    assert kept == ["heft", "doppler@datasets:pretrained/chain_mm_112nodes/doppler.safetensors"] and not dropped
    generated = wb.generate("chain_mm")  # a generated graph has no checkpoint
    generated_options = compare_choice.method_options(context, generated, 4)
    kept, dropped = compare_choice.carry_selection(context, ["heft", doppler[0]["value"]], generated_options)
    assert kept == ["heft"] and dropped == ["doppler (pretrained)"]
    assert not any(o["value"].startswith("doppler@") for o in compare_choice.method_options(context, chain, 8))  # trained on 4 devices


ZERO_SHOT = "doppler_plc_only@datasets:pretrained/zero_shot/doppler_gate.safetensors"


def test_compare_offers_the_shipped_zero_shot_policy_on_every_graph_and_device_count_under_its_own_name(context):
    ffnn, generated = wb.bundled_graph("ffnn"), wb.generate("chain_mm")
    for graph, devices in ((ffnn, 4), (ffnn, 8), (generated, 2)):
        offered = {o["value"]: o["label"] for o in compare_choice.method_options(context, graph, devices)}
        assert offered[ZERO_SHOT].startswith("doppler_plc_only (pretrained zero_shot, trained on 39 graphs (chain_mm-00, ")
        assert offered["active|" + ZERO_SHOT].startswith("doppler_plc_only active search (pretrained zero_shot")  # from it, per graph
    own = "doppler@datasets:pretrained/ffnn_192nodes/doppler.safetensors"
    kept, dropped = compare_choice.carry_selection(context, [ZERO_SHOT, own], compare_choice.method_options(context, generated, 2))
    assert kept == [ZERO_SHOT] and dropped == ["doppler (pretrained)"]
    assert method_label(ZERO_SHOT) == "doppler_plc_only (pretrained zero_shot)"
    key = "bundled:doppler-paper/ffnn_192nodes.txt"
    children, state = compare.compare_view(context, key, 8, [ZERO_SHOT, "critical_path"])
    assert state["labels"][0].endswith("rule gate on Stage II heads; placed on ffnn_192nodes)")
    spans = [float(m) for m in re.findall(r"makespan ([0-9.e+]+) \(", str(children))]
    assert len(spans) == 2 and spans[0] < spans[1]  # it beats critical_path on FFNN at 8 devices (0.769 of it)


def test_compare_refuses_another_graphs_checkpoint_and_names_the_checkpoint(context):
    key = "bundled:doppler-paper/chain_mm_112nodes.txt"
    children, state = compare.compare_view(context, key, 4, ["doppler@datasets:pretrained/ffnn_192nodes/doppler.safetensors"])
    assert "not trained for chain_mm_112nodes on 4 devices" in str(children) and "'gantt/0'" not in str(children)
    children, state = compare.compare_view(context, key, 4, ["doppler@datasets:pretrained/chain_mm_112nodes/doppler.safetensors", "heft"])
    assert state["labels"][0].startswith("doppler (pretrained, trained on chain_mm_112nodes, Stage II")
    assert "makespan 1.2001e13 (1,200.1 ÷1e10)" in str(children)


def test_compare_runs_a_checkpoints_active_search_within_the_search_budget(context):
    graph = wb.bundled_graph("chain_mm")
    values = [o["value"] for o in compare_choice.method_options(context, graph, 4)]
    plain = "doppler@datasets:pretrained/chain_mm_112nodes/doppler.safetensors"
    active = "active|" + plain
    assert plain in values and active in values and not any(v.startswith("active|heft") for v in values)
    assert parse_method(context, active)[1]["search"] == "active" and "search" not in parse_method(context, plain)[1]
    key = "bundled:doppler-paper/chain_mm_112nodes.txt"
    children, state = compare.compare_view(context, key, 4, [active, plain], 0, 24, 60)
    assert state["labels"][0].startswith("doppler active search (pretrained, trained on chain_mm_112nodes")
    assert "with 24 simulator evaluations" in str(children) and "'gantt/1'" in str(children)
    kept, _ = compare_choice.carry_selection(context, [active], compare_choice.method_options(context, wb.bundled_graph("ffnn"), 4))
    assert kept == ["active|doppler@datasets:pretrained/ffnn_192nodes/doppler.safetensors"]
    kept, dropped = compare_choice.carry_selection(context, [active], compare_choice.method_options(context, wb.generate("chain_mm"), 4))
    assert not kept and dropped == ["doppler active search (pretrained)"]


def test_gantt_zoom_is_copied_to_every_other_gantt(context):
    key = "bundled:doppler-paper/chain_mm_112nodes.txt"
    _, state = compare.compare_view(context, key, 4, ["critical_path", "round_robin"])
    outputs = [{"index": "gantt/0"}, {"index": "heatmap/0"}, {"index": "gantt/1"}]
    patches = compare_highlight.zoom_patches(state, "gantt/0", {"xaxis.range[0]": 10.0, "xaxis.range[1]": 2e12}, outputs)
    assert patches[0] is compare_highlight.no_update and patches[1] is compare_highlight.no_update
    operations = patches[2].to_plotly_json()["operations"]
    assert {tuple(o["location"]) for o in operations if o["params"]["value"] == [10.0, 2e12]} == {
        ("layout", "xaxis", "range"),
        ("layout", "xaxis2", "range"),
    }
    reset = compare_highlight.zoom_patches(state, "gantt/1", {"xaxis.autorange": True}, outputs)[0]
    assert reset.to_plotly_json()["operations"][0]["params"]["value"] == [0.0, state["x_max"]]
    assert all(p is compare_highlight.no_update for p in compare_highlight.zoom_patches(state, "gantt/0", {"autosize": True}, outputs))


def test_training_lists_nested_runs_and_the_shipped_pretrained_runs(context):
    write_run(context.runs_dir / "bench-training" / "doppler", "seed0")
    rows = training_runs.table_rows(context, RunFollowers())
    keys = [row["id"] for row in rows]
    assert keys[0] == "runs:bench-training/doppler/seed0"
    assert {k for k in keys if k.startswith("pretrained:")} == {
        f"pretrained:{g}" for g in ("chain_mm_112nodes", "ffnn_192nodes", "full_transformer_layer_261nodes", "transformer_block_215nodes")
    }
    curves, _, _, gantt, _, _status, configs, _events, _drawn = training.training_view(
        context, ["pretrained:chain_mm_112nodes"], "loss", 10
    )
    curves = go.Figure(curves)
    shipped = next(row for row in rows if row["id"] == "pretrained:chain_mm_112nodes")
    assert shipped["best"] == "1.2001e13" and shipped["status"] == "finished" and "rl_lr_start" in str(configs)
    assert "makespan 1.2001e13" in gantt.layout.title.text  # best/placement.json with its trace
    greedy = [t for t in curves.data if "greedy" in (t.name or "")]
    assert {t.name.split(": ")[1] for t in greedy} == {"greedy, kept Stage II weights", "greedy, final policy"}  # no greedy.csv
    assert [a.text for a in curves.layout.annotations][:2] == ["I", "Stage II: simulator RL"]
    assert curves.layout.yaxis.title.text == "makespan (paper units, the paper reports ÷1e10)"  # as on Compare
    by_time = go.Figure(training.training_view(context, ["pretrained:chain_mm_112nodes"], "loss", 10, x="seconds")[0])
    assert by_time.layout.xaxis.title.text.startswith("training wall-clock") and max(by_time.data[0].x) > 80


def write_checkpoints(run: Path, extras: dict[str, dict], weights_of: str = "chain_mm_112nodes") -> RunPaths:
    """The shipped policy of ``weights_of`` saved as each named checkpoint of ``run``, with that ``extra`` in its header (a
    ``last`` one's training state names its stage) and the shipped chain_mm policy's ``trained_for`` (chain_mm_112nodes, 4
    devices)."""
    from workbench.learn.checkpoint import read_checkpoint, write_checkpoint

    weights = read_checkpoint(wb.runs.pretrained_checkpoint(weights_of, "doppler"))
    trained_for = read_checkpoint(wb.runs.pretrained_checkpoint("chain_mm_112nodes", "doppler")).trained_for
    paths = RunPaths(run)
    paths.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    for name, extra in extras.items():
        write_checkpoint(paths.checkpoint(name), weights.weights, weights.header, extra, trained_for)
    return paths


def test_a_run_two_levels_deep_is_offered_on_compare_with_its_best_weights_and_the_origin_its_header_gives(context):
    run = write_checkpoints(write_run(context.runs_dir / "sweep1", "seed0"), {n: {"episode": 3} for n in ("il", "sim", "sim-best", "last")})
    meta = json.loads(run.meta_path.read_text())
    run.meta_path.write_text(json.dumps({**meta, "graphs": ["ffnn_192nodes"], "devices": 8}))  # the header, not meta.json, says
    assert "runs:sweep1/seed0" in [row["id"] for row in training_runs.table_rows(context, RunFollowers())]
    offered = {o["value"]: o["label"] for o in compare_choice.method_options(context, wb.bundled_graph("chain_mm"), 4)}
    il, best = (f"doppler@runs:{run.checkpoint(name).relative_to(context.runs_dir).as_posix()}" for name in ("il", "sim-best"))
    assert [v for v in offered if v.startswith("doppler@runs:")] == [il, best], "each stage's weights to use: sim-best, not sim or last"
    assert offered[best] == "doppler (run sweep1/seed0, trained on chain_mm_112nodes, Stage II best greedy)"
    assert offered[il] == "doppler (run sweep1/seed0, trained on chain_mm_112nodes, Stage I)"
    assert not any("@runs:" in v for v in (o["value"] for o in compare_choice.method_options(context, wb.bundled_graph("ffnn"), 8)))
    assert method_label(best) == "doppler (run sweep1/seed0, sim-best)"
    assert parse_method(context, best) == ("doppler", {"checkpoint": str(run.checkpoint("sim-best"))})
    options = compare_choice.method_options(context, wb.bundled_graph("chain_mm"), 4)
    assert compare_choice.restore_selection(context, [best], None, options) == ([best], [])  # not taken for the run's il weights
    origin = checkpoint_origin(context, "active|" + best)
    assert (origin.run, origin.graphs, origin.devices, origin.search) == ("sweep1/seed0", ("chain_mm_112nodes",), 4, "active")
    write_checkpoints(run.path, {"last": {"stage": "sim", "episode": 40}})
    assert checkpoint_origin(context, best.replace("sim-best", "last")).stage == "last weights, in Stage II"
    run.checkpoint("il").write_bytes(b"not a checkpoint")  # a file no placer could load is not offered
    assert il not in {o["value"] for o in compare_choice.method_options(context, wb.bundled_graph("chain_mm"), 4)}
    with pytest.raises(ValueError, match="il.safetensors"):
        checkpoint_origin(context, il)
    results, _state = compare.compare_view(context, "bundled:doppler-paper/chain_mm_112nodes.txt", 4, [il], 0, None, None)
    assert "il.safetensors is not a readable policy checkpoint" in str(results)  # damaged since it was offered: a message


def test_training_charts_every_row_of_a_run_whose_graph_path_holds_a_comma(context):
    from tests.test_runs import COMMA, write_comma_run

    write_comma_run(context.runs_dir / "comma")
    followers = RunFollowers()
    _curves, request, *_rest, status, _configs, _events, _drawn = training.training_view(
        context, ["runs:comma"], "loss", 10, "episode", followers
    )
    charted = pd.read_csv(pd.io.common.StringIO(training.metrics_csv(context, followers, request)))
    assert charted["graph"].tolist() == [COMMA] * 6 and charted["episode"].tolist() == list(range(6))
    assert "damaged" not in str(status)


def add_real_stage(run: Path, episodes: range = range(60, 70), oracle: str = "real") -> None:
    """Append Stage III rows (measured seconds in ``makespan``, the simulator's ``predicted``) to a run of :func:`write_run`;
    ``oracle="sim"``: measured by the simulator oracle, in graph units."""
    rows = "".join(
        f"real,{e},chain_mm_112nodes,{0.01 + e * 1e-4},-1,,0.5,0.4,0.1,,,0.1,1e-4,{e},{oracle},{1e13 + e * 1e10}\n" for e in episodes
    )
    text = (run / "metrics.csv").read_text()
    lines = text[: text.rfind("\n") + 1].splitlines(keepends=True)
    earlier = "".join(line.rstrip("\n") + ",\n" for line in lines[1:])  # Stages I and II predicted nothing: an empty field
    (run / "metrics.csv").write_text(lines[0].rstrip("\n") + ",predicted\n" + earlier + rows)
    with open(run / "greedy.csv", "a") as handle:  # Stage III's greedy evaluations, measured in seconds
        handle.write("".join(f"real,{e},chain_mm_112nodes,{0.012 - (e - episodes[0]) * 1e-4},{e}\n" for e in episodes[::3]))
    meta = json.loads((run / "meta.json").read_text())
    (run / "meta.json").write_text(json.dumps({**meta, "stages": ["il", "sim", "real"]}))


def test_training_draws_every_periodic_greedy_evaluation_stage_three_on_its_own_axis(context):
    run = write_run(context.runs_dir, "three")
    add_real_stage(run)
    periodic = read_frame(run / "greedy.csv")
    for x in ("episode", "seconds"):
        curves = go.Figure(training.training_view(context, ["runs:three"], "loss", 10, x=x)[0])
        lines = {t.name: t for t in curves.data if GREEDY_PERIODIC in (t.name or "")}
        assert set(lines) == {f"three: {GREEDY_PERIODIC}", f"three: {GREEDY_PERIODIC} (Stage III, s)"}
        simulated, measured_line = lines[f"three: {GREEDY_PERIODIC}"], lines[f"three: {GREEDY_PERIODIC} (Stage III, s)"]
        for trace, stage in ((simulated, "sim"), (measured_line, "real")):
            rows = periodic[periodic["stage"] == stage]
            assert list(trace.x) == list(rows[x]) and list(trace.y) == list(rows["greedy"])
        assert simulated.yaxis == "y" and measured_line.yaxis == "y2" and simulated.mode == "lines+markers"


def test_measured_reads_makespan_and_predicted_of_real_stage_runs(context):
    add_real_stage(write_run(context.runs_dir, "three"))
    figure, frame = measured.training_calibration(context)
    assert len(frame) == 10 and list(figure.data[0].y) == pytest.approx([0.01 + e * 1e-4 for e in range(60, 70)])


def test_whatif_moves_ops_and_simulates_the_edited_assignment(context):
    from workbench.dashboard.pages import whatif

    key = "bundled:doppler-paper/chain_mm_112nodes.txt"
    graph = load_graph_key(context, key)
    assert whatif.parse_ops(graph, "3, 7-9, 3") == [3, 7, 8, 9]
    for bad, error in (("", "name the ops"), ("500", "no op matches '500'"), ("70-80", "no op matches")):
        with pytest.raises(ValueError, match=error):
            whatif.parse_ops(graph, bad)
    with pytest.raises(ValueError, match="0..3"):
        whatif.move_ops(np.zeros(graph.num_nodes), [1], 4, 4)
    _, state = compare.compare_view(context, key, 4, ["critical_path", "heft"])
    base = wb.place(graph, "critical_path", 4).assignment
    edited = whatif.move_ops(base, [5, 6], 3, 4)
    assert list(edited[[5, 6]]) == [3, 3] and (np.delete(edited, [5, 6]) == np.delete(base, [5, 6])).all()
    data, figure, summary = whatif.whatif_result(context, state, edited, "moved")
    assert data["makespan"] == wb.simulate(graph, edited, 4).makespan and data["assignment"] == edited.tolist()
    assert repr(data["makespan"]) in str(summary)
    fig, note = whatif.diff_view(context, state, 0, 1)
    moved = int((wb.place(graph, "critical_path", 4).assignment != wb.place(graph, "heft", 4).assignment).sum())
    assert f"{moved} of {graph.num_nodes} ops on another device id" in str(note)
    assert fig.data[2].name == f"{moved} ops moved"
