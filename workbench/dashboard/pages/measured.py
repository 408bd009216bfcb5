"""Measured vs simulated: a measured Gantt chart beside the simulated one, and calibration scatters.

Needs the real-system backend (``workbench.systems``); until it exists the
page says so. Measured traces come from ``workbench calibrate`` folders under
runs/ (each line of ``measurements.jsonl`` holds a measurement with its trace)
or from any ``*trace*.json`` file in the :class:`workbench.Trace` JSON format
under runs/ or datasets/. The simulated chart replays the same assignment in
the folder's calibrated simulator (``calibration.json``), in seconds, or else
in the plain simulator, in graph units. Runs whose real stage logged
``measured`` and ``predicted`` makespans get their own scatter.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from dash import Input, Output, dcc, html

from ...datasets import bundled_graph
from ...graph import DataflowGraph
from ...runs import RunPaths, read_frame
from ...sim import Trace, simulate
from ...systems import SimulatorOracle
from ...viz import calibration_scatter, format_number, format_time, gantt_figure, gantt_frame, message_figure
from ...viz.training import stage_three_unit
from ..components import controls, field, figure_card, message, trace_events_for
from ..context import PathError
from ..picker import graph_picker, register_graph_picker
from ..sources import load_graph_key

PATH = "/measured"
NAME = "Measured vs simulated"
PAGE = "measured"
MAX_SOURCES = 500


def _journal_lines(path: Path) -> list[dict]:
    """Whole, readable lines of a measurements journal (a half-written last line is skipped)."""
    entries = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return entries
    lines = text.split("\n")
    for line in lines if text.endswith("\n") else lines[:-1]:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("measurement"), dict):
            entries.append(entry)
    return entries


def measured_sources(context) -> list[dict[str, str]]:
    """Dropdown options: each traced measurement of a calibration journal, then each trace file."""
    options = []
    for journal in sorted(context.runs_dir.glob("*/measurements.jsonl")):
        folder = journal.parent.name
        for index, entry in enumerate(_journal_lines(journal)):
            measurement = entry["measurement"]
            if measurement.get("trace"):
                label = str(entry.get("key", "")).split("|", 1)[0] or f"#{index}"
                seconds = measurement.get("seconds")
                ms = f"{seconds * 1e3:.2f} ms" if isinstance(seconds, (int, float)) else "failed"
                if measurement.get("oracle") == "sim" and isinstance(seconds, (int, float)):
                    ms = f"{format_number(seconds)} graph units, simulator oracle"
                options.append({"label": f"{folder}: {label} ({ms})", "value": f"journal:{folder}:{index}"})
    for root_name, root in (("runs", context.runs_dir), ("datasets", context.datasets_dir)):
        if root.is_dir():
            for path in sorted(root.rglob("*trace*.json")):
                if path.parent.name == "best":  # training's best placement: simulated, not measured
                    continue
                relative = path.relative_to(root).as_posix()
                options.append({"label": f"{root_name}/{relative}", "value": f"{root_name}:{relative}"})
    return options[:MAX_SOURCES]


def load_measured(context, ref: str) -> tuple[Trace, Path | None]:
    """The measured trace a dropdown value names, and its calibration folder (``None`` for a plain file)."""
    kind, _, rest = ref.partition(":")
    if kind == "journal":
        folder, _, index = rest.rpartition(":")
        directory = context.in_runs(folder)
        entries = _journal_lines(directory / "measurements.jsonl")
        if not index.isdigit() or int(index) >= len(entries):
            raise ValueError(f"{folder}/measurements.jsonl has no measurement #{index}")
        return Trace.from_dict(entries[int(index)]["measurement"]["trace"]), directory
    if kind == "runs":
        return Trace.from_json(context.in_runs(rest)), None
    if kind == "datasets":
        return Trace.from_json(context.in_datasets(rest)), None
    raise PathError(f"not a measured trace: {ref!r}")


def measured_in_seconds(context, ref: str) -> bool:
    """False for a journal's measurement taken by the simulator oracle (``"oracle": "sim"``: graph units, not seconds)."""
    kind, _, rest = ref.partition(":")
    if kind != "journal":
        return True
    folder, _, index = rest.rpartition(":")
    entries = _journal_lines(context.in_runs(folder) / "measurements.jsonl")
    return not (index.isdigit() and int(index) < len(entries) and entries[int(index)]["measurement"].get("oracle") == "sim")


def _calibration(folder: Path | None) -> dict | None:
    if folder is None or not (folder / "calibration.json").is_file():
        return None
    try:
        data = json.loads((folder / "calibration.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def layout(context, jobs, **_query) -> html.Div:
    sources = measured_sources(context)
    return html.Div(
        [
            html.H2(NAME),
            html.P(
                [
                    "Measure placements with ",
                    html.Code("workbench calibrate GRAPH --devices N"),
                    " (writes ",
                    html.Code("runs/calibrate-GRAPH-Nd/"),
                    "); pick one measurement here.",
                ],
                className="wb-note",
            ),
            controls(
                field(
                    "Measured trace",
                    dcc.Dropdown(id="measured-trace", options=sources, value=sources[0]["value"] if sources else None),
                    wide=True,
                ),
                graph_picker(PAGE, context),
            ),
            html.Div(id="measured-message"),
            html.Div(
                className="wb-grid",
                children=[
                    figure_card(PAGE, "measured", message_figure("choose a measured trace"), None, "Measured", timeline=True),
                    figure_card(PAGE, "simulated", message_figure(""), None, "Simulated, same assignment", timeline=True),
                ],
            ),
            html.Div(
                className="wb-grid",
                children=[
                    figure_card(PAGE, "calibration", message_figure(""), None, "Makespans of the calibration placements"),
                    figure_card(PAGE, "ops", message_figure(""), None, "Per op: measured duration against compute cost"),
                ],
            ),
            figure_card(
                PAGE, "training", *training_calibration(context), "Real stage of training runs: measured against predicted makespan"
            ),
        ]
    )


def training_calibration(context) -> tuple:
    """Measured (``makespan``) against predicted (``predicted``) makespans of the real stage of every run that logged both."""
    rows = []
    for _key, path in context.run_keys():
        metrics = read_frame(RunPaths(path).metrics_path)
        if {"makespan", "predicted"} <= set(metrics.columns):
            real = metrics[metrics["stage"] == "real"] if "stage" in metrics else metrics
            rows.append(real[["makespan", "predicted"]].dropna().assign(run=path.name, unit=stage_three_unit(metrics)))
    frame = pd.concat(rows) if rows else pd.DataFrame()
    if frame.empty:
        return message_figure("no training run has a real stage (Stage III) with measured and predicted makespans yet"), None
    units = set(frame["unit"])
    simulated = "simulator oracle" in units
    series = {
        "Stage III episodes" + (" (simulator oracle, graph units)" if simulated and "s" not in units else ""): (
            frame["predicted"],
            frame["makespan"],
        )
    }
    y_title = (
        "measured (s)"
        if not simulated
        else "simulator oracle (graph units)"
        if "s" not in units
        else "measured (s) or simulator oracle (graph units)"
    )
    return calibration_scatter(
        series, frame["run"].tolist(), title="makespan", reference="fit", x_title="predicted by the simulator", y_title=y_title
    ), frame


def _graph_for(context, calibration: dict | None, graph_key: str | None, ops: int) -> DataflowGraph:
    """The calibration's bundled graph when it fits, else the picked graph."""
    name = (calibration or {}).get("graph")
    if isinstance(name, str):
        try:
            graph = bundled_graph(name)
            if graph.num_nodes == ops:
                return graph
        except (KeyError, OSError, ValueError):
            pass
    if not graph_key:
        raise ValueError("choose the graph this trace was measured on")
    return load_graph_key(context, graph_key)


def measured_view(context, trace_ref: str | None, graph_key: str | None) -> tuple:
    """``(measured, CSV, simulated, CSV, calibration scatter, CSV, per-op scatter, CSV, trace events of both timelines, message)``."""
    blank = message_figure("")
    if not trace_ref:
        return (
            message_figure("no measured trace yet: run workbench calibrate"),
            None,
            message_figure("the simulator's timeline of the measured assignment appears here"),
            None,
            message_figure("simulated against measured makespans, before and after calibration, appear here"),
            None,
            message_figure("each op's measured duration against its compute cost appears here"),
            None,
            None,
            None,
            None,
        )
    try:
        measured, folder = load_measured(context, trace_ref)
        calibration = _calibration(folder)
        graph = _graph_for(context, calibration, graph_key, measured.num_ops)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return message_figure("cannot show this trace"), None, blank, None, blank, None, blank, None, None, None, message(str(exc))
    if measured.num_ops != graph.num_nodes:
        text = f"the trace has {measured.num_ops} ops but {graph.name} has {graph.num_nodes}; choose the graph it was measured on"
        return message_figure(text), None, blank, None, blank, None, blank, None, None, None, message(text)
    devices = int(measured.device.max()) + 1
    if calibration and isinstance(calibration.get("fitted"), dict):
        oracle = SimulatorOracle.from_dict(calibration["fitted"])
        simulated, unit, axis_unit = oracle.measure(graph, measured.device, devices).trace, "calibrated simulator, seconds", "s"
    else:
        simulated, unit, axis_unit = simulate(graph, measured.device, devices).trace, "simulator, graph units", None
    names = [graph.op_name(i) for i in range(graph.num_nodes)]
    durations = measured.end - measured.start
    ops = pd.DataFrame({"op": np.arange(graph.num_nodes), "name": names, "compute": graph.compute, "measured_seconds": durations})
    per_op = calibration_scatter(
        {"ops": (graph.compute, durations)},
        names,
        title="per-op duration",
        reference="fit",
        x_title="compute cost (graph units)",
        y_title="measured seconds",
    )
    placements, scatter = _calibration_placements(calibration)
    simulated_text = format_time(simulated.makespan, graph, unit=axis_unit)
    seconds = measured_in_seconds(context, trace_ref)
    measured_unit, measured_title = ("s", "measured (seconds)") if seconds else ("graph units", "by the simulator oracle (graph units)")
    measured_text = format_time(measured.makespan, unit=measured_unit)
    note = message(f"measured makespan {measured_text}; simulated {simulated_text} ({unit})", "info")
    return (
        gantt_figure(graph, measured, title=measured_title, devices=devices, unit=measured_unit),
        gantt_frame(graph, measured).to_csv(index=False),
        gantt_figure(graph, simulated, title=f"simulated ({unit})", devices=devices, unit=axis_unit),
        gantt_frame(graph, simulated).to_csv(index=False),
        scatter,
        None if placements is None else placements.to_csv(index=False),
        per_op,
        ops.to_csv(index=False),
        trace_events_for(graph, measured, f"{graph.name}: measured", unit=measured_unit),
        trace_events_for(graph, simulated, f"{graph.name}: {unit}", unit=axis_unit),
        note,
    )


def _calibration_placements(calibration: dict | None):
    """The calibration's placements as a frame and its before/after scatter."""
    rows = (calibration or {}).get("placements")
    if not isinstance(rows, list) or not rows:
        return None, message_figure("this trace has no calibration report (calibration.json) beside it")
    frame = pd.DataFrame([{k: r.get(k) for k in ("label", "measured", "before", "after")} for r in rows if isinstance(r, dict)])
    frame = frame.dropna(subset=["measured"])
    series = {
        name: (frame[column].astype(float), frame["measured"].astype(float))
        for name, column in (("before calibration", "before"), ("after calibration", "after"))
    }
    return frame, calibration_scatter(series, frame["label"].tolist(), title="makespan (seconds)")


def register_callbacks(app, context, jobs) -> None:
    register_graph_picker(app, context, PAGE)

    @app.callback(
        *(
            Output({"type": kind, "page": PAGE, "index": index}, "figure" if kind == "figure" else "data")
            for index in ("measured", "simulated", "calibration", "ops")
            for kind in ("figure", "csv-data")
        ),
        Output({"type": "trace-data", "page": PAGE, "index": "measured"}, "data"),
        Output({"type": "trace-data", "page": PAGE, "index": "simulated"}, "data"),
        Output("measured-message", "children"),
        Input("measured-trace", "value"),
        Input(f"{PAGE}-graph-key", "data"),
    )
    def draw(trace_ref, graph_key):
        return measured_view(context, trace_ref, graph_key)
