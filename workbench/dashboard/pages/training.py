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
two seconds the browser polls (:data:`GATE`), but only when the charts show
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
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from typing import Any

import pandas as pd
from dash import Input, Output, Patch, State, ctx, dash_table, dcc, html, no_update
from plotly.colors import qualitative

from ...datasets import PAPER_GRAPHS, bundled_graph
from ...graph import DataflowGraph
from ...runs import STAGE_NAMES, VALUE_COLUMNS, Run, RunFollowers, greedy_evaluations, reference_lines
from ...viz import format_number, format_time, gantt_figure, gantt_frame, message_figure
from ...viz.style import format_numbers
from ...viz.training import SeriesParts, series_parts, training_figure
from ..components import controls, csv_on_demand, field, figure_card, message, trace_events_for
from ..context import PathError
from ..summary import SORTABLE, sort_rows

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
APPENDED_POINTS = 1_000
"""Points the polls may append to a chart (:func:`extension`) before it is drawn whole again (at least its series'
budget): a whole redraw of 20 runs costs the browser seconds on a loaded machine, so not every few polls."""
PALETTE = qualitative.Plotly
"""The series' colors, in the order they are chosen."""
REAL = "real"
COLUMNS = [
    ("run", "run"),
    ("status", "status"),
    ("method", "method"),
    ("graphs", "graphs"),
    ("stage", "stage"),
    ("episodes", "episodes"),
    ("best", "best makespan"),
    ("wall", "wall time"),
    ("problems", "problems"),
]
"""``(row key, header)`` of each column of the run table."""


def point_budget(series: int) -> tuple[int, int]:
    """``(raw points, rolling-mean points)`` drawn per series when a chart has ``series`` of them: 2,000 for one, 840 each
    for 2, 353 for 4, 112 for 10, none for more (:data:`RAW_SERIES`)."""
    raw = int(RAW_POINTS / max(1, series) ** 1.25) if series <= RAW_SERIES else 0
    return raw, max(150, raw // 4)


def run_label(key: str) -> str:
    """How a run key is named in the table and the legends (``pretrained <folder>`` for a shipped run)."""
    root, _, name = key.partition(":")
    return name if root == "runs" else f"pretrained {name}"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60)} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60)} min"


def _sampled(run: Run) -> pd.Series:
    """The sampled makespans of a run's simulated stages (Stage III's are seconds, another unit)."""
    metrics = run.metrics
    if "makespan" not in metrics:
        return pd.Series(dtype=float)
    return metrics.loc[metrics.get("stage", pd.Series(dtype=str)) != REAL, "makespan"].dropna()


def _best(run: Run):
    """``(placement dict, graph or None, trace)`` of a run's best placement (:attr:`workbench.runs.Run.best_trace`), or ``None``."""
    if run.best_trace is None:
        return None
    placement = run.best_placement or {}
    try:
        graph = bundled_graph(placement["graph"])
    except (KeyError, ValueError, OSError, TypeError):
        graph = None
    return placement, graph if graph is not None and graph.num_nodes == run.best_trace.num_ops else None, run.best_trace


def _problems(run: Run, found) -> list[str]:
    return [p for p in run.problems if "trace.json" not in p or not found]


def run_row(key: str, run: Run) -> dict[str, Any]:
    """One row of the run table; each display value has a ``_<key>`` number to sort by (:func:`workbench.dashboard.summary.sort_rows`)."""
    meta = run.meta or {}
    metrics = run.metrics
    found = _best(run)
    sampled = _sampled(run)
    best = float(found[2].makespan) if found else float(sampled.min()) if len(sampled) else None
    stages = [str(s) for s in meta.get("stages", [])] if isinstance(meta.get("stages"), list) else []
    current = str(metrics["stage"].iloc[-1]) if "stage" in metrics and len(metrics) else None
    seconds = metrics["seconds"].dropna() if "seconds" in metrics else pd.Series(dtype=float)
    wall = float(seconds.iloc[-1]) if len(seconds) else None
    graphs = meta.get("graphs") if isinstance(meta.get("graphs"), list) else []
    problems = _problems(run, found)
    return {
        "id": key,
        "run": run_label(key),
        "status": run.status,
        "method": str(meta.get("method", "?")),
        "graphs": ", ".join(map(str, graphs)),
        "stage": (STAGE_NAMES.get(current, current).partition(":")[0] if current else "–") + (f" ({' → '.join(stages)})" if stages else ""),
        "episodes": f"{len(metrics):,}",
        "_episodes": len(metrics),
        "best": "–" if best is None else format_time(best) + ("" if found else " (sampled)"),
        "_best": best,
        "wall": "–" if wall is None else _duration(wall),
        "_wall": wall,
        "problems": "; ".join(problems) or "ok",
    }


def table_rows(context, followers: RunFollowers, sort_by=None) -> list[dict[str, Any]]:
    """A :func:`run_row` per run the page offers (:meth:`~workbench.dashboard.context.DashboardContext.run_keys`: newest
    first, then the shipped ones), sorted as the table's ``sort_by`` asks."""
    return sort_rows([run_row(key, followers.poll(path)[0]) for key, path in context.run_keys()], sort_by)


def run_table(rows: list[dict[str, Any]]) -> dash_table.DataTable:
    """The sortable run table: a click on a row adds the run to the charts or takes it away (highlighted when drawn)."""
    return dash_table.DataTable(
        id="training-table",
        columns=[{"id": key, "name": name} for key, name in COLUMNS],
        data=rows,
        **SORTABLE,
        style_table={"maxHeight": "340px", "overflowY": "auto"},
        style_cell={"fontFamily": "inherit", "fontSize": "0.9em", "padding": "4px 8px", "textAlign": "left", "cursor": "pointer"},
        style_cell_conditional=[{"if": {"column_id": key}, "textAlign": "right"} for key in ("episodes", "best", "wall")]
        + [{"if": {"column_id": "problems"}, "maxWidth": "26em", "overflow": "hidden", "textOverflow": "ellipsis"}],
        style_header={"fontWeight": "bold"},
    )


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


def read_selected(context, followers: RunFollowers, keys) -> list[tuple[str, Run, list[int]]]:
    """``(key, run, [generation, revision, rows])`` of each selected run, polled (:class:`~workbench.runs.RunFollowers`);
    raises :class:`~workbench.dashboard.context.PathError` for a key outside the dashboard's folders."""
    out = []
    for key in keys or []:
        run, change = followers.poll(context.run_path(key))
        out.append((key, run, [change.generation, change.revision, len(run.metrics)]))
    return out


def _series(label: str, run: Run) -> list[tuple[str, pd.DataFrame, str | None]]:
    """``(series label, metrics rows, graph)`` of a run: one series, or one per graph when it trained on several."""
    metrics = run.metrics
    if metrics.empty:
        return []
    if "graph" in metrics and metrics["graph"].nunique() > 1:
        return [(f"{label} / {name}", frame, str(name)) for name, frame in metrics.groupby("graph")]
    graph = metrics["graph"].dropna().iloc[0] if "graph" in metrics and metrics["graph"].notna().any() else None
    return [(label, metrics, graph)]


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
        found = _best(run)
        notes += [message(f"{label}: {problem}", "warning") for problem in _problems(run, found)]
        for name, frame, graph_name in _series(label, run):
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


def _extend(patch: Patch, anchors: dict[str, Any], frames: dict[str, pd.DataFrame], rows: dict[str, int], metric: str, window: int, x: str):
    """Append each series' rows from ``rows[label]`` on to ``patch`` (its raw points, rolling mean and last stage band);
    ``None`` when a series cannot just grow (its new rows start a stage, reach Stage III or go back in ``x``)."""
    for label, frame in frames.items():
        anchor = anchors.get(label)
        new = frame.iloc[rows[label] :].dropna(subset=[c for c in (x, metric) if c in frame])
        if new.empty:
            continue
        old = frame.iloc[: rows[label]].dropna(subset=[x, metric]) if anchor else None
        if anchor is None or old is None or old.empty or x not in new or metric not in new:
            return None
        if "stage" in frame and (new["stage"] != old["stage"].iloc[-1]).any() or float(new[x].iloc[0]) < anchor["last"]:
            return None
        smooth = frame.dropna(subset=[x, metric])[metric].rolling(window, min_periods=1).mean().iloc[len(old) :]
        if anchor["raw"] is not None:
            patch["data"][anchor["raw"]]["x"].extend(new[x].tolist())
            patch["data"][anchor["raw"]]["y"].extend(new[metric].tolist())
            patch["data"][anchor["raw"]]["customdata"].extend(format_numbers(new[metric]).tolist())
        patch["data"][anchor["line"]]["x"].extend(new[x].tolist())
        patch["data"][anchor["line"]]["y"].extend(smooth.tolist())
        last = float(new[x].iloc[-1])
        if "band" in anchor:
            patch["layout"]["shapes"][anchor["band"]]["x1"] = last + anchor["pad"]
            anchor["right"] = max(anchor["right"], last + anchor["pad"])
            right = max(other["right"] for other in anchors.values() if other.get("label") == anchor["label"])
            patch["layout"]["annotations"][anchor["label"]]["x"] = (anchor["x0"] + right) / 2  # the label stays over its stage
        anchor["last"] = last
    return patch


def extension(drawn: dict[str, Any], selected: list[tuple[str, Run, list[int]]], metric: str, window: int, x: str):
    """``(makespan Patch, metric Patch, what is drawn then)`` appending the rows the selected runs gained since ``drawn``;
    ``None`` when a whole redraw is needed (a run was rewritten, its greedy evaluations, meta.json or best placement
    changed, a series cannot just grow, or the points appended since the last redraw reach its point budget)."""
    rows: dict[str, int] = {}
    frames: dict[str, pd.DataFrame] = {}
    for key, run, stamp in selected:
        before = drawn["runs"].get(key)
        if before is None or before[:2] != stamp[:2] or stamp[2] < before[2]:
            return None
        for name, frame, _graph in _series(run_label(key), run):
            if name != run_label(key) and stamp[2] > before[2]:
                return None  # a run on several graphs: its new rows are split per graph; redraw
            frames[name], rows[name] = frame, before[2]
    appended = drawn["appended"] + sum(stamp[2] - drawn["runs"][key][2] for key, _run, stamp in selected)
    if appended >= drawn["budget"]:
        return None
    after = json.loads(json.dumps(drawn))
    patches = []
    for name, column in (("makespan", "makespan"), ("metric", metric)):
        patch = _extend(Patch(), after[name], frames, rows, column, window, x)
        if patch is None:
            return None
        patches.append(patch)
    high = max((anchor["last"] for anchor in after["makespan"].values()), default=None)
    if after["refs"] and high is not None and (after["high"] is None or high > after["high"]):
        for index in after["refs"]:
            patches[0]["data"][index]["x"][1] = high  # the reference lines reach the newest point
        after["high"] = high
    after["runs"] = {key: stamp for key, _run, stamp in selected}
    after["appended"] = appended
    return patches[0], patches[1], after


def metrics_csv(context, followers: RunFollowers, request) -> str | None:
    """The metrics rows of the runs a chart's CSV request names (:func:`training_view`), with a ``run`` column."""
    if not isinstance(request, dict) or not isinstance(request.get("runs"), list):
        return None
    try:
        selected = read_selected(context, followers, [str(k) for k in request["runs"]])
    except PathError:  # a request crafted in the browser naming a folder outside the dashboard's
        return None
    frames = [frame.assign(run=label) for key, run, _stamp in selected for label, frame, _graph in _series(run_label(key), run)]
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
GATE = """
function (n, poll, drawn, selection, metric, window, x) {
    const keep = dash_clientside.no_update;
    const rows = parseInt(window) > 0 ? parseInt(window) : 25;
    if (!drawn || JSON.stringify(drawn.view) !== JSON.stringify([selection || [], metric, rows, x])) { return keep; }
    const pending = poll && (drawn.answered === null || drawn.answered === undefined || drawn.answered < poll.n);
    if (pending && Date.now() - poll.t < 300000) { return keep; }
    return {n: n, t: Date.now()};
}
"""
"""The timer, gated in the browser: a poll goes to the server only when the charts show the chosen view (no redraw for a
new selection is on its way) and the last poll was answered (or five minutes passed), so a poll never supersedes a
redraw in flight, and a change of selection always supersedes a poll."""
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


def table_update(context, followers: RunFollowers, sort_by, stamp) -> tuple:
    """``(rows, their stamp)`` of the run table (:func:`table_rows`), or ``no_update`` twice when the rows are those of ``stamp``."""
    rows = table_rows(context, followers, sort_by)
    current = hashlib.sha1(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()
    return (no_update, no_update) if current == stamp else (rows, current)


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
