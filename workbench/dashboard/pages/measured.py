"""Measured vs simulated: a measured Gantt chart beside the simulated one, and calibration scatters.

Needs the real-system backend (``workbench.systems``); until it exists the
page says so. A measured trace is a :class:`workbench.Trace` JSON file under
runs/ or datasets/ (the same format as the simulator's); the simulated chart
replays its assignment in the simulator. Runs with a real stage add a scatter
of measured against predicted makespans (``measured``/``predicted`` columns of
metrics.csv).
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pandas as pd
import workbench as wb
from dash import Input, Output, dcc, html

from ..components import controls, field, figure_card, message
from ..figures import calibration_scatter, gantt_figure, gantt_frame, message_figure
from ..picker import graph_picker, register_graph_picker
from ..runs import list_runs, read_metrics
from ..sources import load_graph_key

PATH = "/measured"
NAME = "Measured vs simulated"
PAGE = "measured"


def backend_available() -> bool:
    """Whether this workbench has the real-system backend package."""
    try:
        return importlib.util.find_spec("workbench.systems") is not None
    except (ImportError, ValueError):
        return False


def trace_files(context) -> list[dict[str, str]]:
    """JSON files named like traces under runs/ and datasets/ (``*trace*.json``)."""
    options = []
    for root_name, root in (("runs", context.runs_dir), ("datasets", context.datasets_dir)):
        if root.is_dir():
            for path in sorted(root.rglob("*trace*.json"))[:500]:
                relative = path.relative_to(root).as_posix()
                options.append({"label": f"{root_name}/{relative}", "value": f"{root_name}:{relative}"})
    return options


def layout(context, jobs, **_query) -> html.Div:
    if not backend_available():
        return html.Div([html.H2(NAME), message("The real-system backend is not available in this workbench yet (no workbench.systems package). "
                                                "This page shows measured traces once it is installed.", "warning")])  # fmt: skip
    files = trace_files(context)
    return html.Div(
        [
            html.H2(NAME),
            controls(
                graph_picker(PAGE, context),
                field("Measured trace", dcc.Dropdown(id="measured-trace", options=files, value=files[0]["value"] if files else None), wide=True),
            ),
            html.Div(id="measured-message"),
            html.Div(className="wb-grid", children=[figure_card(PAGE, "measured", message_figure("choose a measured trace"), None, "Measured"),
                                                    figure_card(PAGE, "simulated", message_figure(""), None, "Simulated (same assignment)")]),  # fmt: skip
            figure_card(PAGE, "ops", message_figure(""), None, "Per-op duration: measured against the graph's compute cost"),
            figure_card(PAGE, "makespans", *makespan_calibration(context), "Makespans of the real stage of training runs"),
        ]
    )


def makespan_calibration(context) -> tuple:
    """A measured-vs-predicted makespan scatter over every run that logged both columns."""
    rows = []
    for run in list_runs(context.runs_dir):
        metrics = read_metrics(run.path / "metrics.csv", [])
        if {"measured", "predicted"} <= set(metrics.columns):
            rows.append(metrics[["measured", "predicted"]].dropna().assign(run=run.name))
    if not rows:
        return message_figure("no training run has logged measured and predicted makespans yet"), None
    frame = pd.concat(rows)
    return calibration_scatter(frame["predicted"], frame["measured"], frame["run"].tolist(), title="makespan"), frame


def measured_view(context, graph_key: str | None, trace_ref: str | None) -> tuple:
    """``(measured fig, CSV, simulated fig, CSV, per-op scatter, CSV, message)``."""
    empty = message_figure("")
    if not graph_key or not trace_ref:
        return message_figure("choose a graph and a measured trace"), None, empty, None, empty, None, None
    root, _, relative = trace_ref.partition(":")
    try:
        path = context.in_runs(relative) if root == "runs" else context.in_datasets(relative)
        measured = wb.Trace.from_json(path)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return message_figure("unreadable trace"), None, empty, None, empty, None, message(f"{relative}: not a readable trace: {exc}")
    graph = load_graph_key(context, graph_key)
    if measured.num_ops != graph.num_nodes:
        text = f"the trace has {measured.num_ops} ops but {graph.name} has {graph.num_nodes}; choose the graph it was measured on"
        return message_figure(text), None, empty, None, empty, None, message(text)
    devices = int(measured.device.max()) + 1
    simulated = wb.simulate(graph, measured.device, devices).trace
    durations = measured.end - measured.start
    names = [graph.op_name(i) for i in range(graph.num_nodes)]
    scatter = calibration_scatter(graph.compute, durations, names, title="per-op duration")
    ops = pd.DataFrame({"op": np.arange(graph.num_nodes), "name": names, "compute": graph.compute, "measured": durations})
    note = message(f"measured makespan {measured.makespan:.6g}, simulated {simulated.makespan:.6g} (ratio {measured.makespan / simulated.makespan:.3g})", "info") if simulated.makespan else None
    return (gantt_figure(graph, measured, title="measured"), gantt_frame(graph, measured).to_csv(index=False),
            gantt_figure(graph, simulated, title="simulated"), gantt_frame(graph, simulated).to_csv(index=False),
            scatter, ops.to_csv(index=False), note)  # fmt: skip


def register_callbacks(app, context, jobs) -> None:
    if not backend_available():
        return
    register_graph_picker(app, context, PAGE)

    @app.callback(
        Output({"type": "figure", "page": PAGE, "index": "measured"}, "figure"),
        Output({"type": "csv-data", "page": PAGE, "index": "measured"}, "data"),
        Output({"type": "figure", "page": PAGE, "index": "simulated"}, "figure"),
        Output({"type": "csv-data", "page": PAGE, "index": "simulated"}, "data"),
        Output({"type": "figure", "page": PAGE, "index": "ops"}, "figure"),
        Output({"type": "csv-data", "page": PAGE, "index": "ops"}, "data"),
        Output("measured-message", "children"),
        Input(f"{PAGE}-graph-key", "data"),
        Input("measured-trace", "value"),
    )
    def draw(graph_key, trace_ref):
        return measured_view(context, graph_key, trace_ref)
