"""Training: a sortable table of runs, the curves of the runs chosen in it (stages shaded per run, greedy evaluations,
reference lines), their configs, the best placement.

Lists the runs under the runs folder (:func:`workbench.runs.list_runs`, the
same as Compare) and the shipped pretrained runs (``datasets/pretrained/*``,
read-only). Runs are read through :class:`workbench.runs.RunFollowers`: a poll
reads only the lines appended since the last one, and a stopped run reads
nothing until its files change.

What is drawn follows one source of truth, the ``training-selection`` store,
changed in the browser alone (a click on a table row, "Select all", "Clear"),
so no server reply can undo a click. The charts redraw when it changes. Every
two seconds the browser polls (:data:`~.training_poll.GATE`), but only when the charts show
the chosen view and the last poll was answered: a poll never supersedes a
redraw in flight (Dash drops the older of two requests of one callback, which
is how a 2-second timer starved the old page's redraws), and a change of
selection always supersedes a poll. A poll refreshes the table and sends only
what grew: the poll's number alone when no chosen run changed, the appended
points (a :class:`dash.Patch`) when rows were only added, a whole figure
otherwise. Each series is drawn with a bounded number of points
(:func:`point_budget`), so a figure's size does not grow with the runs'
length; the CSV behind a chart is made when its button is clicked, never sent
with a redraw.

The run table lives in :mod:`.training_runs`, the polls' gate and appended points
in :mod:`.training_poll`; this module draws the charts and registers the callbacks.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

import pandas as pd
from dash import Input, Output, Patch, State, ctx, dcc, html, no_update
from plotly.colors import qualitative

from ...datasets import PAPER_GRAPHS, bundled_graph
from ...graph import DataflowGraph
from ...runs import STAGE_NAMES, VALUE_COLUMNS, Run, RunFollowers, greedy_evaluations, reference_lines
from ...viz import format_number, format_time, gantt_figure, gantt_frame, message_figure
from ...viz.training import SeriesParts, series_parts, training_figure
from ..components import controls, csv_on_demand, field, figure_card, message, trace_events_for
from ..context import PathError
from .training_poll import APPENDED_POINTS, GATE, extension
from .training_runs import best_placement, read_selected, run_label, run_problems, run_series, run_table, table_update

PATH = "/training"
NAME = "Training"
PAGE = "training"
REFRESH_MS = 2000
RAW_POINTS = 2_000
"""Raw points of a chart of one series; a chart of more holds fewer in all, and one of more than :data:`RAW_SERIES`
none (:func:`point_budget`): a browser draws each as an SVG element, and they were most of a 20-run redraw's time in
Chromium."""
RAW_SERIES = 10
"""The most series a chart draws raw points for; beyond, their rolling means alone (20 clouds of points overlap into
one no one can read)."""
PALETTE = qualitative.Plotly
"""The series' colors, in the order they are chosen."""


def point_budget(series: int) -> tuple[int, int]:
    """``(raw points, rolling-mean points)`` drawn per series when a chart has ``series`` of them: 2,000 for one, 840 each
    for 2, 353 for 4, 112 for 10, none for more (:data:`RAW_SERIES`)."""
    raw = int(RAW_POINTS / max(1, series) ** 1.25) if series <= RAW_SERIES else 0
    return raw, max(150, raw // 4)


def layout(context, jobs, **_query) -> html.Div:
    keys = [key for key, _ in context.run_keys()]
    return html.Div(
        [
            html.H2("Training runs"),
            controls(
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
            html.Div(
                className="wb-card",
                children=[
                    html.Div(
                        className="wb-downloads",
                        children=[
                            html.Span(
                                f"Runs in {context.runs_dir} and the shipped pretrained runs: click a row to draw the run or take it "
                                "away, click a header to sort",
                                className="wb-note",
                            ),
                            html.Button("Select all", id="training-all", className="wb-small"),
                            html.Button("Clear", id="training-none", className="wb-small"),
                        ],
                    ),
                    run_table([]),
                ],
            ),
            dcc.Store(id="training-selection", data=keys[:1]),
            dcc.Store(id="training-drawn"),
            dcc.Store(id="training-table-stamp"),
            dcc.Store(id="training-poll"),
            dcc.Interval(id="training-tick", interval=REFRESH_MS),
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


def _configs(runs: dict[str, Run]) -> html.Div:
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


def shared_references(per_series: dict[str, tuple[str | None, dict[str, float]]]) -> dict[str, float]:
    """The reference lines of several series (``{series: (graph, {name: makespan})}``), each distinct one once: named as
    it is when every series shares its value, else after its graph (or, for one graph, the series it belongs to)."""
    owners: dict[tuple[str, float], list[tuple[str, str | None]]] = {}
    for series, (graph, lines) in per_series.items():
        for name, value in lines.items():
            owners.setdefault((name, value), []).append((series, graph))
    out: dict[str, float] = {}
    for (name, value), where in owners.items():
        rivals = [other for other in owners if other[0] == name and other[1] != value]
        graphs = {graph for _series, graph in where}
        rival_graphs = {graph for other in rivals for _series, graph in owners[other]}
        if not rivals:
            out[name] = value
        elif len(graphs) == 1 and None not in graphs and graphs.isdisjoint(rival_graphs):
            out[f"{graphs.pop()}: {name}"] = value
        else:
            labels = [series for series, _graph in where]
            out[f"{name} ({', '.join(labels[:3])}{', …' if len(labels) > 3 else ''})"] = value
    return out


class SeriesCache:
    """The drawn parts of each series (:func:`~workbench.viz.training.series_parts`), kept while its run's rows and
    other files are unchanged: a redraw computes only the series that are new or grew (adding a run to 20 computes
    one). An entry holds the frames it was made from, so their ``id`` cannot be reused while it is kept."""

    def __init__(self, most: int = 512) -> None:
        self.most = most
        self._parts: OrderedDict[tuple, tuple[Any, Any, SeriesParts]] = OrderedDict()
        self._lock = threading.Lock()

    def parts(self, run: Run, revision: int, name: str, frame: pd.DataFrame, greedy, view: tuple) -> SeriesParts:
        """``series_parts(name, frame, *view)`` with the run's greedy evaluations ``greedy`` (a callable, called on a miss)."""
        greedy_frame = id(run.greedy) if len(run.greedy.columns) else None  # a run without greedy.csv gets a new empty frame each poll
        key = (id(run.metrics), greedy_frame, revision, name, view)
        with self._lock:
            if key in self._parts:
                self._parts.move_to_end(key)
                return self._parts[key][2]
        metric, x, window, color, raw, line, shared = view
        made = series_parts(name, frame, metric, x, window, color, greedy() if metric == "makespan" else None, raw, line, shared)
        with self._lock:
            self._parts[key] = (run.metrics, run.greedy, made)
            while len(self._parts) > self.most:
                self._parts.popitem(last=False)
        return made


def _anchors(figure: dict[str, Any], bands: dict[str, dict[str, Any]], parts: list[SeriesParts]) -> dict[str, dict[str, Any]]:
    """Where each single-axis series lies in ``figure``: its raw and line trace, its last stage band and that band's
    label (:func:`~workbench.viz.training.stage_bands`) and the last ``x`` drawn; what a Patch needs to append to it."""
    names = [trace["name"] for trace in figure["data"]]
    anchors = {}
    for series in parts:
        label = series.label
        if label not in names or any(trace["yaxis"] == "y2" for trace in series.traces):
            continue
        raw = names.index(f"{label} (raw)") if f"{label} (raw)" in names else None  # none beyond RAW_SERIES series
        anchor = {"raw": raw, "line": names.index(label), "last": series.high}
        band = bands.get(label)
        if band is not None:
            pad = float(figure["layout"]["shapes"][band["band"]]["x1"]) - series.high
            anchor.update(band=band["band"], label=band["label"], x0=band["x0"], right=band["right"], pad=pad)
        anchors[label] = anchor
    return anchors


def training_view(
    context, keys, metric: str, window, x: str = "episode", followers: RunFollowers | None = None, cache: SeriesCache | None = None
) -> tuple:
    """``(makespan figure, its CSV request, metric figure, best Gantt figure, its CSV, status children, configs, best trace
    events, what is drawn)``.

    The makespan chart carries the teacher's and best heuristic's reference
    lines and the greedy evaluations each run recorded. A CSV request names the
    runs whose rows :func:`metrics_csv` writes when the CSV button is clicked;
    what is drawn (a dict) lets :func:`extension` append to the charts later.
    """
    followers = followers if followers is not None else RunFollowers()
    if not keys:
        return (
            message_figure("choose a run"),
            None,
            message_figure(""),
            message_figure("no run chosen"),
            None,
            message("no run selected: click a run in the table; runs appear there when training writes them", "info"),
            None,
            None,
            None,
        )
    try:
        selected = read_selected(context, followers, keys)
    except PathError as exc:
        return message_figure(str(exc)), None, message_figure(""), message_figure(""), None, message(str(exc)), None, None, None
    window = int(window) if window and int(window) > 0 else 25
    series, references, notes, runs, best = [], {}, [], {}, None
    for key, run, stamp in selected:
        label = run_label(key)
        runs[label] = run
        meta = run.meta or {}
        found = best_placement(run)
        notes += [message(f"{label}: {problem}", "warning") for problem in run_problems(run, found)]
        for name, frame, graph_name in run_series(label, run):
            series.append((run, stamp[1], name, frame, graph_name))
            references[name] = (graph_name, reference_lines(meta, graph_name))
        if best is None and found is not None:
            best = (label, *found)
    cache = cache if cache is not None else SeriesCache()
    raw, line = point_budget(len(series))
    frames = {name: frame for _run, _revision, name, frame, _graph in series}

    def chart(column: str, title: str, refs: dict[str, float] | None, graph=None) -> tuple[dict[str, Any], dict[str, Any]]:
        parts = [
            cache.parts(
                run,
                revision,
                name,
                frame,
                lambda run=run, graph_name=graph_name: greedy_evaluations(run, graph_name),
                (column, x, window, PALETTE[index % len(PALETTE)], raw, line, len(series) > 1),
            )
            for index, (run, revision, name, frame, graph_name) in enumerate(series)
        ]
        figure, bands = training_figure(parts, column, refs, title, x, graph)
        return figure, _anchors(figure, bands, parts)

    refs = shared_references(references)
    title = "makespan per episode (sampled) and greedy evaluations"
    makespans, makespan_anchors = chart("makespan", title, refs, _unit_graph(frames))
    second, metric_anchors = chart(metric, f"{metric} per episode", None)
    shown = {f"{label} (raw)" for label in frames} | set(frames)
    drawn = {
        "view": [list(keys), metric, window, x],
        "runs": {key: stamp for key, _run, stamp in selected},
        "makespan": makespan_anchors,
        "metric": metric_anchors,
        "refs": [i for i, trace in enumerate(makespans["data"]) if trace["name"] in {f"{k} {format_number(v)}" for k, v in refs.items()}],
        "high": max((float(trace["x"][-1]) for trace in makespans["data"] if trace["name"] in shown), default=None),
        "appended": 0,
        "budget": max(raw, APPENDED_POINTS),
        "shown": sorted(shown),
    }
    request = {"runs": list(keys)} if frames else None
    names = ", ".join(runs)
    status = html.Div([message(f"drawing {len(runs)} run(s): {names}", "info"), *notes])
    if best is None:
        return makespans, request, second, message_figure("no best placement written yet"), None, status, _configs(runs), None, drawn
    label, placement, graph, trace = best
    where = f"{placement.get('graph', '?')}, {placement.get('devices', '?')} devices"
    title = f"{label}: best placement, makespan {format_time(trace.makespan, graph)}<br><sup>{where}, {found_when(placement)}</sup>"
    devices = placement.get("devices") if isinstance(placement.get("devices"), int) else None
    events = trace_events_for(graph, trace, f"{label}: best placement")
    gantt = gantt_figure(graph, trace, title=title, devices=devices, critical_path=True)
    return makespans, request, second, gantt, gantt_frame(graph, trace).to_csv(index=False), status, _configs(runs), events, drawn


def metrics_csv(context, followers: RunFollowers, request) -> str | None:
    """The metrics rows of the runs a chart's CSV request names (:func:`training_view`), with a ``run`` column."""
    if not isinstance(request, dict) or not isinstance(request.get("runs"), list):
        return None
    try:
        selected = read_selected(context, followers, [str(k) for k in request["runs"]])
    except PathError:  # a request crafted in the browser naming a folder outside the dashboard's
        return None
    frames = [frame.assign(run=label) for key, run, _stamp in selected for label, frame, _graph in run_series(run_label(key), run)]
    return pd.concat(frames).to_csv(index=False) if frames else None


SELECT = """
function (cell, all, none, selection, data) {
    const fired = dash_clientside.callback_context.triggered.map(t => t.prop_id);
    const keep = dash_clientside.no_update;
    if (fired.includes("training-all.n_clicks")) { return [(data || []).map(row => row.id), keep, keep]; }
    if (fired.includes("training-none.n_clicks")) { return [[], keep, keep]; }
    if (!cell || cell.row_id === undefined || cell.row_id === null) { return [keep, keep, keep]; }
    const chosen = selection || [];
    const next = chosen.includes(cell.row_id) ? chosen.filter(key => key !== cell.row_id) : chosen.concat([cell.row_id]);
    return [next, null, []];
}
"""
"""Selection in the browser: a click on a row adds its run or takes it away (then the cell is released, so a second click
on it counts), "Select all" takes every row, "Clear" none. No server reply takes part, so none can undo a click."""
HIGHLIGHT = """
function (selection, data) {
    const chosen = new Set(selection || []);
    return (data || []).flatMap((row, index) => chosen.has(row.id)
        ? [{if: {row_index: index}, backgroundColor: "#dbe9fb", fontWeight: 600}] : []);
}
"""
"""The drawn runs' rows, highlighted."""


def register_callbacks(app, context, jobs) -> None:
    followers, cache = RunFollowers(), SeriesCache()
    csv_on_demand(app, PAGE, lambda request: metrics_csv(context, followers, request))
    app.clientside_callback(
        SELECT,
        Output("training-selection", "data"),
        Output("training-table", "active_cell"),
        Output("training-table", "selected_cells"),
        Input("training-table", "active_cell"),
        Input("training-all", "n_clicks"),
        Input("training-none", "n_clicks"),
        State("training-selection", "data"),
        State("training-table", "data"),
        prevent_initial_call=True,
    )
    app.clientside_callback(
        HIGHLIGHT,
        Output("training-table", "style_data_conditional"),
        Input("training-selection", "data"),
        Input("training-table", "data"),
    )

    app.clientside_callback(
        GATE,
        Output("training-poll", "data"),
        Input("training-tick", "n_intervals"),
        State("training-poll", "data"),
        State("training-drawn", "data"),
        State("training-selection", "data"),
        State("training-metric", "value"),
        State("training-window", "value"),
        State("training-x", "value"),
        prevent_initial_call=True,
    )

    @app.callback(
        Output("training-table", "data", allow_duplicate=True),
        Output("training-table-stamp", "data", allow_duplicate=True),
        Input("training-table", "sort_by"),
        prevent_initial_call=True,
    )
    def sort_table(sort_by):
        return table_update(context, followers, sort_by, None)

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
        Output("training-drawn", "data"),
        Output("training-table", "data"),
        Output("training-table-stamp", "data"),
        Input("training-selection", "data"),
        Input("training-metric", "value"),
        Input("training-window", "value"),
        Input("training-x", "value"),
        Input("training-poll", "data"),
        State("training-drawn", "data"),
        State("training-table", "sort_by"),
        State("training-table-stamp", "data"),
    )
    def update(keys, metric, window, x, poll, drawn, sort_by, stamp):
        polled = ctx.triggered_id in ("training-poll", None)  # a poll, or the first call: the table is (re)filled
        table = table_update(context, followers, sort_by, stamp) if polled else (no_update, no_update)
        answered = poll.get("n") if isinstance(poll, dict) else None
        return (*redraw(context, followers, keys, metric, window, x, ctx.triggered_id == "training-poll", drawn, answered, cache), *table)


def redraw(
    context,
    followers: RunFollowers,
    keys,
    metric,
    window,
    x,
    tick: bool,
    drawn,
    answered: int | None = None,
    cache: SeriesCache | None = None,
) -> tuple:
    """The Training charts' outputs. On a timer ``tick`` (a poll, :data:`GATE`) with the view of ``drawn``: nothing but
    the poll's number (``answered``) when no chosen run changed, the appended points (:func:`extension`) when they only
    grew. Otherwise the whole view. What is drawn records ``answered``, so the browser polls again."""
    window_rows = int(window) if window and int(window) > 0 else 25
    if tick and drawn and drawn.get("view") == [list(keys or []), metric, window_rows, x]:
        try:
            selected = read_selected(context, followers, keys)
        except PathError:
            selected = None
        if selected is None or all(drawn["runs"].get(key) == stamp for key, _run, stamp in selected):
            acknowledged = Patch()
            acknowledged["answered"] = answered
            return (*(no_update,) * 9, acknowledged)
        patched = extension(drawn, selected, metric, window_rows, x)
        if patched is not None:
            makespans, second, after = patched
            return (makespans, no_update, second, *(no_update,) * 6, {**after, "answered": answered})
    makespans, request, second, *rest, drawn_now = training_view(context, keys, metric, window, x, followers, cache)
    if drawn_now:
        drawn_now["answered"] = answered
    elif not keys:
        drawn_now = {"view": [[], metric, window_rows, x], "runs": {}, "answered": answered}
    return (makespans, request, second, request, *rest, drawn_now)


def _unit_graph(frames: dict[str, pd.DataFrame]) -> DataflowGraph | None:
    """The bundled paper graph every charted run trained on, so the axis names its unit (÷1e10); ``None`` otherwise."""
    names = {str(name) for frame in frames.values() if "graph" in frame for name in frame["graph"].dropna().unique()}
    if len(names) != 1 or names.isdisjoint(PAPER_GRAPHS):
        return None
    return bundled_graph(names.pop())
