"""Training: curves of selected runs (stages shaded per run, greedy evaluations, reference lines), configs, the best placement.

Lists the runs under the runs folder (:func:`workbench.runs.list_runs`, the
same as Compare) and the shipped pretrained runs (``datasets/pretrained/*``,
read-only), reads them with :func:`workbench.runs.read_run`, and redraws every
two seconds while a selected run's files change.
"""

from __future__ import annotations

import json

import pandas as pd
from dash import Input, Output, State, ctx, dcc, html, no_update

import workbench as wb
from workbench.datasets import PAPER_GRAPHS
from workbench.viz import format_number, format_time, gantt_figure, gantt_frame, message_figure, training_curves

from ...runs import STAGE_NAMES, VALUE_COLUMNS, greedy_evaluations, read_run, reference_lines, try_read_json
from ..components import controls, field, figure_card, message, trace_events_for
from ..context import PathError

PATH = "/training"
NAME = "Training"
PAGE = "training"
REFRESH_MS = 2000
WATCHED = ("meta.json", "metrics.csv", "greedy.csv", "best/trace.json", "best_placement.json")


def run_options(context) -> list[dict[str, str]]:
    """One option per run: its path, status, method, graphs and stages; shipped runs say so."""
    options = []
    for key, path in context.run_keys():
        meta = try_read_json(path / "meta.json")
        graphs = ", ".join(map(str, meta.get("graphs", []))) if isinstance(meta.get("graphs"), list) else ""
        stages = "+".join(map(str, meta.get("stages", []))) if isinstance(meta.get("stages"), list) else ""
        detail = " · ".join(str(x) for x in (meta.get("status"), meta.get("method"), graphs, stages) if x)
        name = f"shipped pretrained {key.partition(':')[2]}" if key.startswith("pretrained:") else key.partition(":")[2]
        options.append({"label": f"{name} ({detail})" if detail else name, "value": key})
    return options


def layout(context, jobs, **_query) -> html.Div:
    options = run_options(context)
    return html.Div(
        [
            html.H2("Training runs"),
            controls(
                field(
                    f"Runs (in {context.runs_dir}, and the shipped pretrained runs)",
                    dcc.Dropdown(id="training-runs", options=options, value=[o["value"] for o in options[:1]], multi=True),
                    wide=True,
                ),
                field(
                    "Second chart",
                    dcc.Dropdown(
                        id="training-metric", options=[m for m in VALUE_COLUMNS if m != "makespan"], value="loss", clearable=False
                    ),
                ),
                field("Smoothing (episodes)", dcc.Input(id="training-window", type="number", min=1, step=1, value=25)),
                field(
                    "x-axis",
                    dcc.RadioItems(
                        id="training-x",
                        options=[{"label": "episode", "value": "episode"}, {"label": "wall-clock time", "value": "seconds"}],
                        value="episode",
                        inline=True,
                    ),
                ),
            ),
            dcc.Interval(id="training-tick", interval=REFRESH_MS),
            dcc.Store(id="training-signature"),
            html.Div(id="training-status"),
            html.Div(
                className="wb-grid",
                children=[
                    figure_card(PAGE, "makespan", message_figure("choose a run"), None),
                    figure_card(PAGE, "metric", message_figure(""), None),
                ],
            ),
            figure_card(
                PAGE,
                "best",
                message_figure("no best placement yet"),
                None,
                "Best placement of the first selected run (simulator trace)",
                timeline=True,
            ),
            html.Div(id="training-configs"),
        ]
    )


def _run_paths(context, keys):
    return [context.run_path(key) for key in keys or []]


def signature(context, keys) -> list:
    """Modification stamps of the files a selected run's charts depend on."""
    out = []
    for path in _run_paths(context, keys):
        for part in WATCHED:
            try:
                stat = (path / part).stat()
                out.append([str(path / part), stat.st_mtime_ns, stat.st_size])
            except OSError:
                out.append([str(path / part), None, None])
    return out


def _best(run):
    """``(placement dict, graph or None, trace)`` of a run's best placement (:attr:`workbench.runs.Run.best_trace`), or ``None``."""
    if run.best_trace is None:
        return None
    placement = run.best_placement or {}
    try:
        graph = wb.bundled_graph(placement["graph"])
    except (KeyError, ValueError, OSError, TypeError):
        graph = None
    return placement, graph if graph is not None and graph.num_nodes == run.best_trace.num_ops else None, run.best_trace


def _configs(runs) -> html.Div:
    """Each run's config.json (``{label: Run}``), folded."""
    return html.Div(
        [
            html.Details(
                [
                    html.Summary(f"{label}: config.json"),
                    html.Pre(json.dumps(run.config, indent=1) if run.config else "no readable config.json"),
                ]
            )
            for label, run in runs.items()
        ]
    )


def found_when(placement: dict) -> str:
    """When a run's best placement was found: in a training stage (by its name), or by sampling the trained policy after
    training (``stage`` ``search``: best of K samples, which is why it can beat the policy's greedy placement on Compare)."""
    stage, episode = placement.get("stage", "?"), placement.get("episode", "?")
    if stage == "search":
        return f"best of the trained policy's samples after training (episode {episode}), not its greedy placement"
    return f"{STAGE_NAMES.get(str(stage), f'stage {stage}')}, episode {episode}"


def training_view(context, keys, metric: str, window, x: str = "episode") -> tuple:
    """``(makespan figure, its CSV, ``metric`` figure, best Gantt figure, its CSV, status children, configs, best trace events)``.

    The makespan chart carries the teacher's and best heuristic's reference
    lines and the greedy evaluations each run recorded.
    """
    if not keys:
        return (
            message_figure("choose a run"),
            None,
            message_figure(""),
            message_figure("no run chosen"),
            None,
            message("no run selected; runs appear here when training writes them", "info"),
            None,
            None,
        )
    try:
        paths = _run_paths(context, keys)
    except PathError as exc:
        return message_figure(str(exc)), None, message_figure(""), message_figure(""), None, message(str(exc)), None, None
    window = int(window) if window and int(window) > 0 else 25
    frames, refs, greedy, status, runs, best = {}, {}, {}, [], {}, None
    for key, path in zip(keys, paths, strict=False):
        run = read_run(path)
        label = key.partition(":")[2] if key.startswith("runs:") else f"pretrained {key.partition(':')[2]}"
        runs[label] = run
        meta = run.meta or {}
        episodes = len(run.metrics)
        sampled = (
            run.metrics.loc[run.metrics.get("stage", pd.Series(dtype=str)) != "real", "makespan"].dropna()
            if "makespan" in run.metrics
            else pd.Series(dtype=float)
        )
        found = _best(run)
        best_text = format_time(found[2].makespan) if found else (format_number(sampled.min()) + " (sampled)" if len(sampled) else "–")
        stages = " → ".join(str(s) for s in meta.get("stages", [])) if isinstance(meta.get("stages"), list) else "?"
        status.append(
            html.Tr(
                [
                    html.Td(label),
                    html.Td(run.status),
                    html.Td(str(meta.get("method", "?"))),
                    html.Td(stages),
                    html.Td(f"{episodes:,}"),
                    html.Td(best_text),
                    html.Td("; ".join(p for p in run.problems if "trace.json" not in p or not found) or "ok"),
                ]
            )
        )
        if not run.metrics.empty and "graph" in run.metrics and run.metrics["graph"].nunique() > 1:
            for graph_name, frame in run.metrics.groupby("graph"):
                frames[f"{label} / {graph_name}"] = frame
                greedy[f"{label} / {graph_name}"] = greedy_evaluations(run, graph_name)
                if len(paths) == 1:
                    refs.update({f"{graph_name}: {k}": v for k, v in reference_lines(meta, graph_name).items()})
        elif not run.metrics.empty:
            frames[label] = run.metrics
            graph_name = run.metrics["graph"].dropna().iloc[0] if "graph" in run.metrics and run.metrics["graph"].notna().any() else None
            greedy[label] = greedy_evaluations(run, graph_name)
            refs.update({(k if len(paths) == 1 else f"{label}: {k}"): v for k, v in reference_lines(meta, graph_name).items()})
        if best is None and found is not None:
            best = (label, *found)
    header = html.Tr([html.Th(h) for h in ("run", "status", "method", "stages", "episodes", "best placement makespan", "problems")])
    table = html.Table([header, *status], className="wb-table")
    makespans = training_curves(
        frames,
        "makespan",
        refs,
        window,
        title="makespan per episode (sampled) and greedy evaluations",
        x=x,
        greedy=greedy,
        graph=_unit_graph(frames),
    )
    second = training_curves(frames, metric, None, window, title=f"{metric} per episode", x=x)
    csv = pd.concat([f.assign(run=label) for label, f in frames.items()]).to_csv(index=False) if frames else None
    if best is None:
        return makespans, csv, second, message_figure("no best placement written yet"), None, table, _configs(runs), None
    label, placement, graph, trace = best
    where = f"{placement.get('graph', '?')}, {placement.get('devices', '?')} devices"
    when = found_when(placement)
    title = f"{label}: best placement, makespan {format_time(trace.makespan, graph)}<br><sup>{where}, {when}</sup>"
    devices = placement.get("devices") if isinstance(placement.get("devices"), int) else None
    events = trace_events_for(graph, trace, f"{label}: best placement")
    return (
        makespans,
        csv,
        second,
        gantt_figure(graph, trace, title=title, devices=devices, critical_path=True),
        gantt_frame(graph, trace).to_csv(index=False),
        table,
        _configs(runs),
        events,
    )


def register_callbacks(app, context, jobs) -> None:
    @app.callback(
        Output("training-runs", "options"),
        Input("training-tick", "n_intervals"),
        State("training-runs", "options"),
        prevent_initial_call=True,
    )
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
        Output("training-configs", "children"),
        Output({"type": "trace-data", "page": PAGE, "index": "best"}, "data"),
        Output("training-signature", "data"),
        Input("training-runs", "value"),
        Input("training-metric", "value"),
        Input("training-window", "value"),
        Input("training-x", "value"),
        Input("training-tick", "n_intervals"),
        State("training-signature", "data"),
    )
    def update(keys, metric, window, x, _tick, previous):
        try:
            current = signature(context, keys)
        except PathError as exc:
            return message_figure(str(exc)), None, message_figure(""), None, message_figure(""), None, message(str(exc)), None, None, None
        if ctx.triggered_id == "training-tick" and current == previous:
            return (no_update,) * 10
        makespans, csv, second, *rest = training_view(context, keys, metric, window, x)
        return (makespans, csv, second, csv, *rest, current)


def _unit_graph(frames: dict[str, pd.DataFrame]) -> wb.DataflowGraph | None:
    """The bundled paper graph every charted run trained on, so the axis names its unit (÷1e10); ``None`` otherwise."""
    names = {str(name) for frame in frames.values() if "graph" in frame for name in frame["graph"].dropna().unique()}
    if len(names) != 1 or names.isdisjoint(PAPER_GRAPHS):
        return None
    return wb.bundled_graph(names.pop())
