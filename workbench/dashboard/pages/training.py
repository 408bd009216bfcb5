"""Training: per-episode curves of selected runs (stages shaded, smoothed, reference lines) and the best placement.

Reads run directories (CONTRACTS.md section 2) and redraws every two seconds
while a selected run's files change.
"""

from __future__ import annotations

import re

import pandas as pd
from dash import Input, Output, State, ctx, dcc, html, no_update

from ..components import controls, field, figure_card, message
from workbench.viz import gantt_figure, gantt_frame, message_figure, training_curves
from ..runs import METRIC_COLUMNS, list_runs, read_run, references
from ..context import PathError

PATH = "/training"
NAME = "Training"
PAGE = "training"
REFRESH_MS = 2000
_RUN_NAME = re.compile(r"[^/\\\x00]+")


def run_options(context) -> list[dict[str, str]]:
    options = []
    for run in list_runs(context.runs_dir):
        meta = run.meta or {}
        graphs = ", ".join(map(str, meta.get("graphs", []))) if isinstance(meta.get("graphs"), list) else ""
        detail = " · ".join(str(x) for x in (run.status, meta.get("method"), graphs) if x)
        options.append({"label": f"{run.name} ({detail})", "value": run.name})
    return options


def layout(context, jobs, **_query) -> html.Div:
    options = run_options(context)
    return html.Div(
        [
            html.H2("Training runs"),
            controls(
                field(f"Runs (in {context.runs_dir})", dcc.Dropdown(id="training-runs", options=options, value=[o["value"] for o in options[:1]], multi=True), wide=True),
                field("Second chart", dcc.Dropdown(id="training-metric", options=[m for m in METRIC_COLUMNS if m != "makespan"], value="loss", clearable=False)),
                field("Smoothing (episodes)", dcc.Input(id="training-window", type="number", min=1, step=1, value=25)),
            ),
            dcc.Interval(id="training-tick", interval=REFRESH_MS),
            dcc.Store(id="training-signature"),
            html.Div(id="training-status"),
            html.Div(className="wb-grid", children=[figure_card(PAGE, "makespan", message_figure("choose a run"), None),
                                                    figure_card(PAGE, "metric", message_figure(""), None)]),  # fmt: skip
            figure_card(PAGE, "best", message_figure("no best placement yet"), None, "Best placement so far (simulator trace)"),
        ]
    )


def _run_paths(context, names):
    paths = []
    for name in names or []:
        if not isinstance(name, str) or not _RUN_NAME.fullmatch(name):
            raise PathError(f"not a run name: {name!r}")
        paths.append(context.in_runs(name))
    return paths


def signature(context, names) -> list:
    """Modification stamps of the files a selected run's charts depend on."""
    out = []
    for path in _run_paths(context, names):
        for part in ("meta.json", "metrics.csv", "best/trace.json"):
            try:
                stat = (path / part).stat()
                out.append([str(path / part), stat.st_mtime_ns, stat.st_size])
            except OSError:
                out.append([str(path / part), None, None])
    return out


def _best_graph(placement: dict | None, trace):
    """The graph of a run's best placement when it is a bundled graph of the right size, else ``None``."""
    import workbench as wb

    name = (placement or {}).get("graph")
    if not isinstance(name, str):
        return None
    try:
        graph = wb.bundled_graph(name)
    except (KeyError, ValueError, OSError):
        return None
    return graph if graph.num_nodes == trace.num_ops else None


def training_view(context, names, metric: str, window) -> tuple:
    """``(makespan figure, its CSV, ``metric`` figure, best Gantt figure, its CSV, status children)``.

    The makespan chart carries the teacher's and best heuristic's reference lines.
    """
    if not names:
        return message_figure("choose a run"), None, message_figure(""), message_figure("no run chosen"), None, message("no run selected; runs appear here when training writes them", "info")
    try:
        paths = _run_paths(context, names)
    except PathError as exc:
        return message_figure(str(exc)), None, message_figure(""), message_figure(""), None, message(str(exc))
    window = int(window) if window and int(window) > 0 else 25
    frames, refs, status, best = {}, {}, [], None
    for path in paths:
        run = read_run(path)
        meta = run.meta or {}
        episodes = len(run.metrics)
        last = run.metrics["makespan"].dropna() if "makespan" in run.metrics else pd.Series(dtype=float)
        status.append(html.Tr([html.Td(run.name), html.Td(run.status), html.Td(str(meta.get("method", "?"))), html.Td(f"{episodes:,}"),
                               html.Td(f"{last.min():.6g}" if len(last) else "–"), html.Td("; ".join(run.problems) or "ok")]))  # fmt: skip
        if not run.metrics.empty and "graph" in run.metrics and run.metrics["graph"].nunique() > 1:
            for graph_name, frame in run.metrics.groupby("graph"):
                frames[f"{run.name} / {graph_name}"] = frame
                if len(paths) == 1:
                    refs.update({f"{graph_name}: {k}": v for k, v in references(meta, graph_name).items()})
        elif not run.metrics.empty:
            frames[run.name] = run.metrics
            graph_name = run.metrics["graph"].dropna().iloc[0] if "graph" in run.metrics and run.metrics["graph"].notna().any() else None
            refs.update({(k if len(paths) == 1 else f"{run.name}: {k}"): v for k, v in references(meta, graph_name).items()})
        if best is None and run.best_trace is not None:
            best = run
    header = html.Tr([html.Th(h) for h in ("run", "status", "method", "episodes", f"best makespan", "problems")])
    table = html.Table([header, *status], className="wb-table")
    makespans = training_curves(frames, "makespan", refs, window, title="makespan per episode")
    second = training_curves(frames, metric, None, window, title=f"{metric} per episode")
    csv = pd.concat([f.assign(run=label) for label, f in frames.items()]).to_csv(index=False) if frames else None
    if best is None:
        return makespans, csv, second, message_figure("no best placement written yet"), None, table
    graph = _best_graph(best.best_placement, best.best_trace)
    placement = best.best_placement or {}
    title = f"{best.name}: best makespan {best.best_trace.makespan:.6g} (stage {placement.get('stage', '?')}, episode {placement.get('episode', '?')})"
    return makespans, csv, second, gantt_figure(graph, best.best_trace, title=title, devices=placement.get("devices") if isinstance(placement.get("devices"), int) else None), gantt_frame(graph, best.best_trace).to_csv(index=False), table


def register_callbacks(app, context, jobs) -> None:
    @app.callback(Output("training-runs", "options"), Input("training-tick", "n_intervals"), State("training-runs", "options"), prevent_initial_call=True)
    def refresh_options(_tick, current):
        options = run_options(context)
        return options if options != current else no_update

    @app.callback(
        Output({"type": "figure", "page": PAGE, "index": "makespan"}, "figure"),
        Output({"type": "csv-data", "page": PAGE, "index": "makespan"}, "data"),
        Output({"type": "figure", "page": PAGE, "index": "metric"}, "figure"),
        Output({"type": "csv-data", "page": PAGE, "index": "metric"}, "data"),
        Output({"type": "figure", "page": PAGE, "index": "best"}, "figure"),
        Output({"type": "csv-data", "page": PAGE, "index": "best"}, "data"),
        Output("training-status", "children"),
        Output("training-signature", "data"),
        Input("training-runs", "value"),
        Input("training-metric", "value"),
        Input("training-window", "value"),
        Input("training-tick", "n_intervals"),
        State("training-signature", "data"),
    )
    def update(names, metric, window, _tick, previous):
        try:
            current = signature(context, names)
        except PathError as exc:
            return message_figure(str(exc)), None, message_figure(""), None, message_figure(""), None, message(str(exc)), None
        if ctx.triggered_id == "training-tick" and current == previous:
            return (no_update,) * 8
        makespans, csv, second, *rest = training_view(context, names, metric, window)
        return (makespans, csv, second, csv, *rest, current)
