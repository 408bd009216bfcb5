"""Compare (the landing page): several methods on one graph, side by side.

Per method: its Gantt chart from the simulator trace (all on one time axis,
zoom linked) and its placement heatmap; above them, the makespans against
the lower bound. Clicking an op, or searching one by id or name, highlights
it in every chart. The method list is computed for the current graph and
device count in the same callback that draws, so a learned checkpoint is
only ever applied to a graph it was trained on (or, for a cross-graph
policy, labelled "trained on X; placed on Y"). A checkpoint whose policy
adapts itself per instance is offered a second time as its active search,
which spends the search budget (within the time limit) like any search; a
caption gives the evaluations a method spent. Below, "makespan against
evaluations" draws any-time curves of searches and sampled policies on the
same graph and devices (:mod:`workbench.dashboard.anytime`).
"""

from __future__ import annotations

import math
from typing import Any

import flask
from dash import ALL, Input, Output, Patch, State, ctx, dcc, html, no_update

from ...placers import methods as registered_methods
from ...sim import lower_bound
from ...viz import (
    find_ops,
    format_time,
    gantt_figure,
    gantt_frame,
    gantt_highlight,
    heatmap_frame,
    heatmap_highlight,
    is_paper_graph,
    makespan_bars,
    makespan_frame,
    placement_heatmap,
)
from ..anytime import (
    DEFAULT_BUDGET,
    DEFAULT_SEEDS,
    MAX_SEEDS,
    anytime_charts,
    anytime_options,
    anytime_progress,
    default_series,
    find_job,
    start_anytime,
)
from ..components import controls, field, figure_card, message, trace_events_for
from ..context import PathError
from ..learned import checkpoint_origin, selection_key, usable
from ..picker import DEFAULT_GRAPH, graph_picker, register_graph_picker
from ..sources import graph_label, load_graph_key, method_choices, method_label, parse_method
from ..summary import plural, sort_rows, stop_reason, summary_rows, summary_table, unplaced_row
from ..work import NOT_RUN, RUNNER, Cancelled, request_deadline, run_placement, search_clock, simulate_placement
from .whatif import HIDDEN, MAX_SEED, SHOWN, checked_state, editor, register_whatif_callbacks

PATH = "/"
NAME = "Compare"
PAGE = "compare"
MAX_DEVICES = 64
DEFAULT_DEVICES = 4
SEARCH_EXAMPLE = "op12"
"""The op name the search box offers as an example (the paper graphs name their ops op0, op1, …)."""
POLL_MS = 1000
"""How often the page asks a running any-time job how far it got."""


def default_methods(options: list[dict[str, str]]) -> list[str]:
    """On first load: the first registered heuristic (the paper's teacher) and the fair baseline, the best of every one-pass
    method (plus a pretrained policy when there is one)."""
    values = [o["value"] for o in options]
    chosen = [m for m in [*registered_methods("heuristic")[:1], "best_constructive"] if m in values]
    chosen += [v for v in values if v.startswith("doppler@datasets:")][:1]
    return chosen


def method_options(context, graph, devices: int) -> list[dict[str, str]]:
    """The methods that may place ``graph`` on ``devices``: every non-learned method, and checkpoints trained for it."""
    out = []
    for option in method_choices(context, graph.name):
        origin = checkpoint_origin(context, option["value"])
        if usable(origin, graph.name, devices):
            out.append({"label": origin.label(graph.name) if origin else option["label"], "value": option["value"]})
    return out


def carry_selection(context, selected: list[str] | None, options: list[dict[str, str]]) -> tuple[list[str], list[str]]:
    """``(kept, dropped)``: the selection mapped onto new options (a pretrained policy → this graph's pretrained policy);
    ``dropped`` names what has no counterpart."""
    kept, dropped = restore_selection(context, selected, None, options)
    return kept, [method_label(value) for value in dropped]


MAX_SELECTED = 200
"""Method values a request may carry as the selection or the pending list (more than any page offers)."""


def _names(values: Any) -> list[str]:
    """The method values the browser sent: a list of at most :data:`MAX_SELECTED` strings (anything else is nothing)."""
    if not isinstance(values, list) or len(values) > MAX_SELECTED:
        return []
    return [value for value in values if isinstance(value, str)]


def restore_selection(
    context, selected: list[str] | None, pending: list[str] | None, options: list[dict[str, str]]
) -> tuple[list[str], list[str]]:
    """``(kept, dropped values)``: the selection, and what an earlier graph or device count could not offer
    (``pending``), mapped onto new options. The dropped values are kept pending by the page, so going 4 → 8 → 4
    devices brings the graph's own pretrained policy back."""
    by_key: dict[tuple[str, str], str] = {}
    for option in options:
        by_key.setdefault(selection_key(context, option["value"]), option["value"])
    kept, dropped = [], []
    for value in [*(selected or []), *(pending or [])]:
        try:
            key = selection_key(context, value)
        except (PathError, ValueError):
            key = None
        if key in by_key:
            if by_key[key] not in kept:
                kept.append(by_key[key])
        elif value not in dropped:
            dropped.append(value)
    return kept, dropped


def layout(context, jobs, **_query) -> html.Div:
    options = method_options(context, load_graph_key(context, DEFAULT_GRAPH), DEFAULT_DEVICES)
    return html.Div(
        [
            html.H2("Compare placements"),
            controls(
                graph_picker(PAGE, context),
                field(
                    "Devices",
                    dcc.Input(id="compare-devices", type="number", min=1, max=MAX_DEVICES, step=1, value=DEFAULT_DEVICES, debounce=True),
                ),
                field(
                    "Methods", dcc.Dropdown(id="compare-methods", options=options, value=default_methods(options), multi=True), wide=True
                ),
                field("Seed", dcc.Input(id="compare-seed", type="number", min=0, step=1, value=0)),
                field("Search budget (evaluations)", dcc.Input(id="compare-budget", type="number", min=1, step=1, value=20000)),
                field(
                    "Time limit (s)",
                    dcc.Input(id="compare-time-limit", type="number", min=0.1, value=None, placeholder="none, as the CLI"),
                    note="empty: no clock, so a search spends its whole budget, as workbench place does",
                ),
                html.Button("Compare", id="compare-run", className="wb-primary"),
                html.Button("Cancel", id="compare-cancel", style=HIDDEN, title="stop every placement still running"),
                html.Span(id="compare-busy", className="wb-note"),
                field(
                    "Find an op (id or name)",
                    dcc.Input(id="compare-search", type="text", debounce=True, placeholder=f"e.g. 12 or {SEARCH_EXAMPLE}"),
                ),
            ),
            html.Div(id="compare-search-message"),
            dcc.Store(id="compare-state"),
            dcc.Store(id="compare-pending", data=[]),
            dcc.Loading(html.Div(id="compare-results"), type="default", delay_show=400),
            anytime_section(),
        ]
    )


def anytime_section() -> html.Div:
    """The "makespan against evaluations" controls and chart (same graph and devices as above)."""
    return html.Div(
        [
            html.H3("Makespan against evaluations and CPU time"),
            html.P(
                "The best makespan found so far against the simulator evaluations spent, and against the CPU seconds spent, both "
                "measured in the same runs, for searches and for learned policies (best of K samples, active search), mean and "
                "spread over seeds. Uses the graph and devices chosen above. The series run one after the other and each is "
                "drawn when it finishes; Cancel stops the rest."
            ),
            controls(
                field("Series", dcc.Dropdown(id="anytime-methods", options=[], value=[], multi=True), wide=True),
                field("Budget (evaluations)", dcc.Input(id="anytime-budget", type="number", min=1, step=1, value=DEFAULT_BUDGET)),
                field("Seeds", dcc.Input(id="anytime-seeds", type="number", min=1, max=MAX_SEEDS, step=1, value=DEFAULT_SEEDS)),
                html.Button("Draw", id="anytime-run", className="wb-primary"),
                html.Button("Cancel", id="anytime-cancel", style=HIDDEN, title="stop the runs still going; what is drawn stays"),
            ),
            html.Div(id="anytime-progress"),
            html.Div(id="anytime-results"),
            dcc.Store(id="anytime-job"),
            dcc.Interval(id="anytime-poll", interval=POLL_MS, disabled=True),
        ]
    )


def _devices(value: Any) -> int:
    try:
        devices = int(value)
    except OverflowError:  # infinity
        raise ValueError from None
    if not 1 <= devices <= MAX_DEVICES:
        raise ValueError
    return devices


def compare_view(
    context, graph_key: str | None, devices: Any, methods: list[str] | None, seed: Any = 0, budget: Any = None, time_limit: Any = None
) -> tuple[list, dict | None]:
    """The results area and the state the highlight callback needs; every failure becomes a message."""
    if not graph_key:
        return [message("choose a graph", "warning")], None
    try:
        devices = _devices(devices)
    except (TypeError, ValueError):
        return [message(f"devices must be a whole number from 1 to {MAX_DEVICES}")], None
    if not methods:
        return [message("choose one or more methods", "warning")], None
    try:
        seed = int(seed or 0)
        budget = int(budget) if budget else None
        time_limit = float(time_limit) if time_limit else None
    except (TypeError, ValueError, OverflowError):
        return [message("the seed and the budget must be whole numbers, the time limit a number")], None
    if not 0 <= seed <= MAX_SEED:
        return [message(f"the seed must be from 0 to {MAX_SEED:,} (got {seed:,})")], None
    try:
        graph = load_graph_key(context, graph_key)
        budget, time_limit = context.limits.bound_compare(graph, devices, budget, time_limit)
    except ValueError as exc:  # a LimitError, or a graph that does not load
        return [message(str(exc))], None
    bound = lower_bound(graph, devices)
    learned = registered_methods("learned")
    done, placements, labels, rows, cut = [], {}, [], [], []
    with request_deadline(context.limits.max_request_time):  # the methods run one after another, within one deadline
        for value in methods:
            origin = checkpoint_origin(context, value)
            label = origin.label(graph.name) if origin else value
            labels.append(label)
            if not usable(origin, graph.name, devices):
                done.append((label, None, None, f"{label} was not trained for {graph.name} on {devices} devices; it is not applied here"))
                continue
            try:
                placement = run_placement(context, graph_key, value, devices, seed, budget, time_limit)
                result = simulate_placement(context, graph_key, value, devices, seed, budget, time_limit)
            except Cancelled as exc:
                short, text = _cancelled(exc, context, time_limit)
                if short:
                    cut.append((label, short))
                done.append((label, None, None, f"{label} {text}"))
                continue
            except Exception as exc:  # one method failing must not take the page down
                done.append((label, None, None, f"{label} failed: {exc}"))
                continue
            placements[label] = placement
            method, options = parse_method(context, value)
            clock = time_limit if time_limit is not None else search_clock(context, value)
            searched = method not in learned or "search" in options
            stop = stop_reason(method, placement, budget, clock, searched=searched, capped=time_limit is None)
            rows.append((label, stop, placement, result.trace))
            done.append((label, placement, result, stop))
    longest = max((r.trace.makespan for _, _, r, _ in done if r is not None), default=0.0)
    panels = []
    for index, (label, placement, result, stop) in enumerate(done):
        if isinstance(stop, str):  # the method failed: its message
            panels.append(html.Div(className="wb-card", children=[html.Div(label, className="wb-caption"), message(stop)]))
            continue
        gap = placement.makespan / bound - 1 if bound else 0.0
        makespan = format_time(placement.makespan, graph)
        caption = f"{label}: makespan {makespan} (+{gap:.1%} over the lower bound), placed in {placement.seconds:.2f} s"
        if stop.kind != "one pass":
            caption += f" with {plural(placement.evaluations, 'simulator evaluation')}; stopped by {stop.text}"
        origin = checkpoint_origin(context, methods[index])
        short, detail = (origin.short, f"; {origin.detail(graph.name)}") if origin else (label, "")
        title = f"{short}: device timelines<br><sup>{graph.name}, {devices} devices, makespan {makespan}{detail}</sup>"
        gantt = gantt_figure(graph, result.trace, title=title, devices=devices, x_max=longest * 1.01, critical_path=True)
        panels.append(
            html.Div(
                [
                    figure_card(
                        PAGE,
                        f"gantt/{index}",
                        gantt,
                        gantt_frame(graph, result.trace),
                        caption,
                        timeline=True,
                        trace_events=trace_events_for(graph, result.trace, f"{graph.name}, {devices} devices, {label}"),
                    ),
                    figure_card(
                        PAGE,
                        f"heatmap/{index}",
                        placement_heatmap(
                            graph,
                            placement.assignment,
                            devices,
                            title=f"{short}: placement<br><sup>{graph.name}, {devices} devices{detail}</sup>",
                        ),
                        heatmap_frame(graph, placement.assignment),
                    ),
                ]
            )
        )
    paper = " Times are in the paper's raw units; in brackets ÷1e10, as the paper reports them." if is_paper_graph(graph) else ""
    header = html.P(
        f"{graph_label(graph_key)}: {graph.num_nodes} ops, {graph.num_edges} edges, {devices} devices, "
        f"lower bound {format_time(bound, graph)}.{paper} "
        "Click an op to outline it (magenta) in every chart; zooming one timeline zooms all; the black line is each placement's "
        "critical path, solid while its ops run, dashed while its data is in flight, dotted while it waits (click a legend entry "
        "to show or hide a part). The table gives each method's numbers; click a column's header to sort by it."
    )
    table = summary_table("compare-summary", summary_rows(rows, bound, graph) + [unplaced_row(label, short) for label, short in cut])
    makespans = (
        figure_card(
            PAGE,
            "makespans",
            makespan_bars(placements, bound, title=f"{graph.name} on {devices} devices: makespan per method", graph=graph),
            makespan_frame(placements, bound),
        )
        if placements
        else message("no method succeeded")
    )
    # a component, not a list: Dash renders no list nested in a list of children
    bars = html.Div([table, makespans, *([_deadline_note(context, cut)] if cut else [])]) if placements or cut else makespans
    state = {
        "graph_key": graph_key,
        "devices": devices,
        "methods": list(methods),
        "labels": labels,
        "seed": seed,
        "budget": budget,
        "time_limit": time_limit,
        "x_max": longest * 1.01,
    }
    succeeded = [(index, label) for index, (label, placement, _, _) in enumerate(done) if placement is not None]
    return [header, bars, html.Div(panels, className="wb-grid"), editor(succeeded, devices) if succeeded else None], state


def _cancelled(exc: Cancelled, context, time_limit: float | None) -> tuple[str | None, str]:
    """``(what the summary table says, or None where it says nothing, the card's sentence)`` for a placement that was
    stopped or not started, and what to change when a deadline (the server's cap, no clock set) passed."""
    text = str(exc)
    whole = f"the whole comparison may compute for {context.limits.max_request_time:g} s (the server's --max-request-time)"
    if text == NOT_RUN:
        return NOT_RUN, f"{NOT_RUN}: {whole}; choose fewer methods or set a time limit"
    if "request's deadline" in text:
        return "stopped: request deadline", f"did not finish: {whole}"
    if "deadline" in text and time_limit is None:
        return None, (
            f"did not finish: it ran past the {context.limits.max_time_limit:g} s this server allows a placement "
            "(its --max-time-limit); set a time limit or a smaller search budget"
        )
    return None, "did not finish: " + text.removeprefix("stopped: ")


def _deadline_note(context, cut: list[tuple[str, str]]):
    """A message naming the methods the request's deadline cut, under the summary table."""
    names = "; ".join(f"{label} ({short})" for label, short in cut)
    return message(
        f"cut by the request's deadline, {context.limits.max_request_time:g} s for the whole comparison "
        f"(the server's --max-request-time): {names}",
        "warning",
    )


MAX_HIGHLIGHTED = 500
"""Ops one highlight outlines (a search matching more outlines the first ones)."""


def highlight_patches(context, state: dict | None, op: int | list[int] | None, output_ids: list[dict]) -> list:
    """A figure Patch per output id (Gantt or heatmap of the current comparison) outlining ``op`` (or several ops).

    ``state`` must have been revalidated (:func:`~workbench.dashboard.pages.whatif.checked_state`)."""
    if not state:
        return [no_update] * len(output_ids)
    graph = load_graph_key(context, state["graph_key"])
    op = op[:MAX_HIGHLIGHTED] if isinstance(op, list) else op
    out = []
    for output in output_ids:
        kind, _, index = output["index"].partition("/")
        if kind not in ("gantt", "heatmap") or not index.isdigit() or int(index) >= len(state["methods"]):
            out.append(no_update)
            continue
        value = state["methods"][int(index)]
        args = (context, state["graph_key"], value, state["devices"], state["seed"], state["budget"], state["time_limit"])
        try:
            if kind == "gantt":
                shapes = gantt_highlight(simulate_placement(*args).trace, op)
            else:
                shapes = heatmap_highlight(graph, op, state["devices"])
        except Exception:  # a failed method has no chart to patch
            out.append(no_update)
            continue
        patch = Patch()
        patch["layout"]["shapes"] = shapes
        out.append(patch)
    return out


def clicked_op(click: dict | None) -> int | None:
    """The op index in a chart's clickData (``customdata[0]`` of the point)."""
    try:
        value = click["points"][0]["customdata"][0]
        return int(value)
    except (TypeError, KeyError, IndexError, ValueError):
        return None


def zoomed_range(relayout: dict | None, x_max: float) -> list[float] | None:
    """The time range a Gantt chart's relayoutData sets (its timeline or its utilisation track), ``None`` if it sets none
    (or sets something else than two numbers)."""
    try:
        span = _zoomed_range(relayout, x_max)
    except (TypeError, ValueError, AttributeError):
        return None
    return span if span is None or all(math.isfinite(v) for v in span) else None


def _zoomed_range(relayout: dict | None, x_max: float) -> list[float] | None:
    if not relayout:
        return None
    for axis in ("xaxis", "xaxis2"):
        if f"{axis}.range[0]" in relayout and f"{axis}.range[1]" in relayout:
            return [float(relayout[f"{axis}.range[0]"]), float(relayout[f"{axis}.range[1]"])]
        if isinstance(relayout.get(f"{axis}.range"), list) and len(relayout[f"{axis}.range"]) == 2:
            return [float(v) for v in relayout[f"{axis}.range"]]
        if relayout.get(f"{axis}.autorange"):
            return [0.0, float(x_max)]
    return None


def zoom_patches(state: dict | None, source: str, relayout: dict | None, output_ids: list[dict]) -> list:
    """The same time range for every other Gantt chart of the comparison (Patches; ``no_update`` elsewhere)."""
    span = zoomed_range(relayout, state.get("x_max") or 1.0) if isinstance(state, dict) else None
    out = []
    for output in output_ids:
        if span is None or not output["index"].startswith("gantt/") or output["index"] == source:
            out.append(no_update)
            continue
        patch = Patch()
        for axis in ("xaxis", "xaxis2"):  # the timeline and its utilisation track (matched axes)
            patch["layout"][axis]["range"] = span
            patch["layout"][axis]["autorange"] = False
        out.append(patch)
    return out


def anytime_step(context, trigger: str | None, shown: dict | None, graph_key, devices, selected, budget, seeds) -> tuple:
    """``(job data, results, progress, poll disabled, Cancel style)`` after a Draw, a poll or a Cancel.

    A Draw takes the series on offer from the server (:func:`~workbench.dashboard.anytime.anytime_options`), never from
    the browser. The chart is rebuilt only when a series finished or failed since the page last drew (``shown["version"]``).
    """
    job = find_job(shown.get("id") if isinstance(shown, dict) else None)
    if trigger == "anytime-run":
        if job is not None:
            job.cancel()  # a new chart replaces this page's last one
        try:
            devices = _devices(devices)
        except (TypeError, ValueError):
            return None, [message(f"devices must be a whole number from 1 to {MAX_DEVICES}")], [], True, HIDDEN
        try:
            options = anytime_options(context, method_options(context, load_graph_key(context, graph_key), devices)) if graph_key else []
        except ValueError as exc:
            return None, [message(str(exc))], [], True, HIDDEN
        started = start_anytime(context, graph_key, devices, options, selected, budget, seeds)
        if isinstance(started, list):
            return None, started, [], True, HIDDEN
        job, shown = started, None
    elif job is None:
        return None, no_update, [message("this chart's runs are no longer known to the server; draw again", "warning")], True, HIDDEN
    elif trigger == "anytime-cancel":
        job.cancel()
    job.touch()
    running = job.state == "running"
    changed = shown is None or shown.get("version") != job.version
    results = anytime_charts(job) if changed else no_update
    return {"id": job.id, "version": job.version}, results, anytime_progress(job), not running, SHOWN if running else HIDDEN


def register_callbacks(app, context, jobs) -> None:
    register_graph_picker(app, context, PAGE)
    register_whatif_callbacks(app, context)

    @app.callback(
        Output("compare-methods", "options"),
        Output("compare-methods", "value"),
        Output("compare-results", "children"),
        Output("compare-state", "data"),
        Output("compare-pending", "data"),
        Input("compare-run", "n_clicks"),
        Input(f"{PAGE}-graph-key", "data"),
        Input("compare-devices", "value"),
        State("compare-methods", "value"),
        State("compare-seed", "value"),
        State("compare-budget", "value"),
        State("compare-time-limit", "value"),
        State("compare-state", "data"),
        State("compare-pending", "data"),
        running=[
            (Output("compare-cancel", "style"), SHOWN, HIDDEN),
            (Output("compare-busy", "children"), "placing…", ""),
        ],
    )
    def run(_clicks, graph_key, devices, selected, seed, budget, time_limit, shown, pending):
        """One callback decides the methods for this graph and device count and draws them: no stale method list."""
        same = isinstance(shown, dict) and (shown.get("graph_key"), shown.get("devices")) == (graph_key, devices)
        if ctx.triggered_id == "compare-devices" and same:
            return no_update, no_update, no_update, no_update, no_update  # the devices box fired again (Enter, then blur), no change
        if not graph_key:
            return no_update, no_update, [message("choose a graph", "warning")], None, no_update
        try:
            count = _devices(devices)
        except (TypeError, ValueError):
            return no_update, no_update, [message(f"devices must be a whole number from 1 to {MAX_DEVICES}")], None, no_update
        try:
            graph = load_graph_key(context, graph_key)
        except ValueError as exc:
            return no_update, no_update, [message(f"cannot load the graph: {exc}")], None, no_update
        options = method_options(context, graph, count)
        kept, dropped = restore_selection(context, _names(selected), _names(pending), options)
        if not kept and ctx.triggered_id != "compare-run":
            kept = default_methods(options)
        results, state = compare_view(context, graph_key, devices, kept, seed, budget, time_limit)
        if dropped:
            results = [
                message(
                    f"not offered for {graph.name} on {devices} devices (no checkpoint trained for it): "
                    + ", ".join(map(method_label, dropped))
                    + "; chosen again where it is offered",
                    "info",
                ),
                *results,
            ]
        return options, kept, results, state, dropped

    @app.callback(Input("compare-cancel", "n_clicks"), prevent_initial_call=True)
    def cancel(_clicks):
        """Stop this browser's Compare placements: their children are killed, their cards say so."""
        RUNNER.cancel(flask.request.remote_addr, "compare-results.children")

    @app.callback(
        Output("compare-summary", "data"),
        Input("compare-summary", "sort_by"),
        State("compare-summary", "data"),
        prevent_initial_call=True,
    )
    def sort_summary(sort_by, rows):
        return sort_rows(rows or [], sort_by)

    @app.callback(
        Output("anytime-methods", "options"),
        Output("anytime-methods", "value"),
        Input(f"{PAGE}-graph-key", "data"),
        Input("compare-devices", "value"),
        State("anytime-methods", "value"),
    )
    def anytime_choices(graph_key, devices, selected):
        try:
            options = anytime_options(context, method_options(context, load_graph_key(context, graph_key), _devices(devices)))
        except (TypeError, ValueError):
            return [], []
        offered = {o["value"] for o in options}
        kept = [v for v in _names(selected) if v in offered]
        return options, kept or default_series(options)

    @app.callback(
        Output("anytime-job", "data"),
        Output("anytime-results", "children"),
        Output("anytime-progress", "children"),
        Output("anytime-poll", "disabled"),
        Output("anytime-cancel", "style"),
        Input("anytime-run", "n_clicks"),
        Input("anytime-poll", "n_intervals"),
        Input("anytime-cancel", "n_clicks"),
        State(f"{PAGE}-graph-key", "data"),
        State("compare-devices", "value"),
        State("anytime-methods", "value"),
        State("anytime-budget", "value"),
        State("anytime-seeds", "value"),
        State("anytime-job", "data"),
        prevent_initial_call=True,
    )
    def anytime(_clicks, _polls, _cancel, graph_key, devices, selected, budget, seeds, shown):
        """Draw starts a job (stopping this page's last one), the timer shows how far it got, Cancel stops it."""
        return anytime_step(context, ctx.triggered_id, shown, graph_key, devices, selected, budget, seeds)

    @app.callback(
        Output("selected-op", "data"), Input({"type": "figure", "page": PAGE, "index": ALL}, "clickData"), prevent_initial_call=True
    )
    def select(_clicks):
        trigger = ctx.triggered[0] if ctx.triggered else None
        op = clicked_op(trigger["value"]) if trigger else None
        return op if op is not None else no_update

    @app.callback(
        Output({"type": "figure", "page": PAGE, "index": ALL}, "figure"),
        Output("compare-search-message", "children"),
        Input("selected-op", "data"),
        Input("compare-search", "value"),
        State("compare-state", "data"),
        prevent_initial_call=True,
    )
    def highlight(op, query, state):
        outputs = [o["id"] for o in ctx.outputs_list[0]]
        try:
            state = checked_state(context, state) if state else None
        except ValueError as exc:
            return [no_update] * len(outputs), message(str(exc))
        if op is not None and (isinstance(op, bool) or not isinstance(op, int)):
            op = None  # the store holds one op id (clicked_op), or nothing
        if ctx.triggered_id != "compare-search":
            return highlight_patches(context, state, op, outputs), ""
        if not state or not query:
            return highlight_patches(context, state, None, outputs), ""
        graph = load_graph_key(context, state["graph_key"])
        found = find_ops(graph, graph.num_nodes, str(query)[:200])
        note = (
            message(f"no op matches {query!r}", "warning")
            if not found
            else message(
                f"{len(found)} op(s) match {query!r}: " + ", ".join(map(str, found[:20])) + (" ..." if len(found) > 20 else ""), "info"
            )
        )
        return highlight_patches(context, state, found, outputs), note

    @app.callback(
        Output({"type": "figure", "page": PAGE, "index": ALL}, "figure", allow_duplicate=True),
        Input({"type": "figure", "page": PAGE, "index": ALL}, "relayoutData"),
        State("compare-state", "data"),
        prevent_initial_call=True,
    )
    def link_zoom(_relayouts, state):
        trigger = ctx.triggered_id
        if not trigger or not str(trigger.get("index", "")).startswith("gantt/"):
            return [no_update] * len(ctx.outputs_list)
        return zoom_patches(state, trigger["index"], ctx.triggered[0]["value"], [o["id"] for o in ctx.outputs_list])
