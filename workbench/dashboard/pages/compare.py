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

The methods on offer and the selection carried across graphs are in
:mod:`.compare_choice`, the any-time section in :mod:`.compare_anytime`, the
linked highlight and zoom in :mod:`.compare_highlight`.
"""

from __future__ import annotations

from typing import Any

import flask
from dash import Input, Output, State, ctx, dcc, html, no_update

from ...placers import methods as registered_methods
from ...sim import lower_bound
from ...viz import format_time, gantt_figure, gantt_frame, heatmap_frame, is_paper_graph, makespan_bars, makespan_frame, placement_heatmap
from ..components import controls, field, figure_card, message, trace_events_for
from ..learned import checkpoint_origin, usable
from ..picker import DEFAULT_GRAPH, graph_picker, register_graph_picker
from ..sources import graph_label, load_graph_key, method_label, parse_method
from ..summary import plural, sort_rows, stop_reason, summary_rows, summary_table, unplaced_row
from ..work import NOT_RUN, RUNNER, Cancelled, request_deadline, run_placement, search_clock, simulate_placement
from .compare_anytime import anytime_section, register_anytime_callbacks
from .compare_choice import MAX_DEVICES, default_methods, method_options, names, parse_devices, restore_selection
from .compare_highlight import register_highlight_callbacks
from .compare_options import checked_options, options_section, placement_arguments, register_options_callbacks
from .whatif import HIDDEN, MAX_SEED, SHOWN, editor, register_whatif_callbacks

PATH = "/"
NAME = "Compare"
PAGE = "compare"
DEFAULT_DEVICES = 4
SEARCH_EXAMPLE = "op12"
"""The op name the search box offers as an example (the paper graphs name their ops op0, op1, …)."""


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
            options_section(),
            html.Div(id="compare-search-message"),
            dcc.Store(id="compare-state"),
            dcc.Store(id="compare-pending", data=[]),
            dcc.Loading(html.Div(id="compare-results"), type="default", delay_show=400),
            anytime_section(),
        ]
    )


DRAWING_RESERVE = 2.0
"""Seconds of ``--max-request-time`` kept for drawing a Compare request's charts (or a tenth of it when that is more)."""


def placing_time(request_time: float) -> float:
    """The part of ``--max-request-time`` a Compare request's placements may take: the charts are drawn in the rest (a
    tenth of it, at least :data:`DRAWING_RESERVE` seconds, at most half)."""
    return request_time - min(max(0.1 * request_time, DRAWING_RESERVE), 0.5 * request_time)


def compare_view(
    context,
    graph_key: str | None,
    devices: Any,
    methods: list[str] | None,
    seed: Any = 0,
    budget: Any = None,
    time_limit: Any = None,
    options: Any = None,
) -> tuple[list, dict | None]:
    """The results area and the state the highlight callback needs; every failure becomes a message. ``options`` is
    ``{method: {key: value}}`` (the options form's, :func:`~.compare_options.checked_options` checks it)."""
    if not graph_key:
        return [message("choose a graph", "warning")], None
    try:
        devices = parse_devices(devices)
    except (TypeError, ValueError):
        return [message(f"devices must be a whole number from 1 to {MAX_DEVICES}")], None
    if not methods:
        return [message("choose one or more methods", "warning")], None
    try:
        graph, seed, budget, time_limit = _checked_request(context, graph_key, devices, seed, budget, time_limit)
        chosen = checked_options(context, options)
    except ValueError as exc:
        return [message(str(exc))], None
    bound = lower_bound(graph, devices)
    # the methods run one after another within one deadline, which leaves the drawing of their charts a share of it
    with request_deadline(placing_time(context.limits.max_request_time)):
        done, cut = _place_each(context, graph_key, graph, devices, methods, seed, budget, time_limit, chosen)
    placements = {label: placement for label, placement, _, _ in done if placement is not None}
    longest = max((r.trace.makespan for _, _, r, _ in done if r is not None), default=0.0)
    panels = [_panel(context, graph, devices, bound, longest * 1.01, index, methods[index], entry) for index, entry in enumerate(done)]
    paper = " Times are in the paper's raw units; in brackets ÷1e10, as the paper reports them." if is_paper_graph(graph) else ""
    header = html.P(
        f"{graph_label(graph_key)}: {graph.num_nodes} ops, {graph.num_edges} edges, {devices} devices, "
        f"lower bound {format_time(bound, graph)}.{paper} "
        "Click an op to outline it (magenta) in every chart; zooming one timeline zooms all; the black line is each placement's "
        "critical path, solid while its ops run, dashed while its data is in flight, dotted while it waits (click a legend entry "
        "to show or hide a part). The table gives each method's numbers; click a column's header to sort by it."
    )
    rows = [(label, stop, placement, result.trace) for label, placement, result, stop in done if placement is not None]
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
        "labels": [label for label, _, _, _ in done],
        "seed": seed,
        "budget": budget,
        "time_limit": time_limit,
        "options": options or {},
        "x_max": longest * 1.01,
    }
    succeeded = [(index, label) for index, (label, placement, _, _) in enumerate(done) if placement is not None]
    return [header, bars, html.Div(panels, className="wb-grid"), editor(succeeded, devices) if succeeded else None], state


def _checked_request(
    context, graph_key: str, devices: int, seed: Any, budget: Any, time_limit: Any
) -> tuple[Any, int, int | None, float | None]:
    """``(graph, seed, budget, time limit)`` of a Compare request, within the server's caps; ValueError names what is wrong."""
    try:
        seed = int(seed or 0)
        budget = int(budget) if budget else None
        time_limit = float(time_limit) if time_limit else None
    except (TypeError, ValueError, OverflowError):
        raise ValueError("the seed and the budget must be whole numbers, the time limit a number") from None
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"the seed must be from 0 to {MAX_SEED:,} (got {seed:,})")
    graph = load_graph_key(context, graph_key)  # a LimitError, or a graph that does not load, is a ValueError
    budget, time_limit = context.limits.bound_compare(graph, devices, budget, time_limit)
    return graph, seed, budget, time_limit


def _place_each(
    context, graph_key: str, graph, devices: int, methods: list[str], seed: int, budget: int | None, time_limit: float | None, chosen: dict
) -> tuple[list[tuple], list[tuple[str, str]]]:
    """``(done, cut)``: per method ``(label, placement, result, stop)``, or ``(label, None, None, why it failed)``; and the
    ``(label, summary text)`` of the methods a deadline cut."""
    learned = registered_methods("learned")
    done: list[tuple] = []
    cut: list[tuple[str, str]] = []
    for value in methods:
        try:
            origin = checkpoint_origin(context, value)
        except ValueError as exc:  # its checkpoint was removed or damaged since it was offered
            done.append((value, None, None, str(exc)))
            continue
        label = origin.label(graph.name) if origin else value
        if not usable(origin, graph.name, devices):
            done.append((label, None, None, f"{label} was not trained for {graph.name} on {devices} devices; it is not applied here"))
            continue
        try:
            args = placement_arguments(context, graph_key, value, devices, seed, budget, time_limit, chosen)
            placement, result = run_placement(*args), simulate_placement(*args)
        except Cancelled as exc:
            short, text = _cancelled(exc, context, args.time_limit)  # the clock this method ran on
            if short:
                cut.append((label, short))
            done.append((label, None, None, f"{label} {text}"))
            continue
        except Exception as exc:  # one method failing must not take the page down
            done.append((label, None, None, f"{label} failed: {exc}"))
            continue
        method, options = parse_method(context, value)
        clock = args.time_limit if args.time_limit is not None else search_clock(context, value)
        searched = method not in learned or "search" in options
        stop = stop_reason(method, placement, args.budget, clock, searched=searched, capped=args.time_limit is None)
        done.append((label, placement, result, stop))
    return done, cut


def _panel(context, graph, devices: int, bound: float, x_max: float, index: int, value: str, entry: tuple) -> html.Div:
    """One method's card: its Gantt chart and placement heatmap, or the message saying why it has none."""
    label, placement, result, stop = entry
    if isinstance(stop, str):  # the method failed: its message
        return html.Div(className="wb-card", children=[html.Div(label, className="wb-caption"), message(stop)])
    gap = placement.makespan / bound - 1 if bound else 0.0
    makespan = format_time(placement.makespan, graph)
    caption = f"{label}: makespan {makespan} (+{gap:.1%} over the lower bound), placed in {placement.seconds:.2f} s"
    if stop.kind != "one pass":
        caption += f" with {plural(placement.evaluations, 'simulator evaluation')}; stopped by {stop.text}"
    origin = checkpoint_origin(context, value)
    short, detail = (origin.short, f"; {origin.detail(graph.name)}") if origin else (label, "")
    title = f"{short}: device timelines<br><sup>{graph.name}, {devices} devices, makespan {makespan}{detail}</sup>"
    gantt = gantt_figure(graph, result.trace, title=title, devices=devices, x_max=x_max, critical_path=True)
    return html.Div(
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
                    graph, placement.assignment, devices, title=f"{short}: placement<br><sup>{graph.name}, {devices} devices{detail}</sup>"
                ),
                heatmap_frame(graph, placement.assignment),
            ),
        ]
    )


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


def register_callbacks(app, context, jobs) -> None:
    register_graph_picker(app, context, PAGE)
    register_whatif_callbacks(app, context)
    register_anytime_callbacks(app, context, PAGE)
    register_highlight_callbacks(app, context, PAGE)
    register_options_callbacks(app, context)

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
        State("compare-options", "data"),
        State("compare-state", "data"),
        State("compare-pending", "data"),
        running=[
            (Output("compare-cancel", "style"), SHOWN, HIDDEN),
            (Output("compare-busy", "children"), "placing…", ""),
        ],
    )
    def run(_clicks, graph_key, devices, selected, seed, budget, time_limit, option_values, shown, pending):
        """One callback decides the methods for this graph and device count and draws them: no stale method list."""
        same = isinstance(shown, dict) and (shown.get("graph_key"), shown.get("devices")) == (graph_key, devices)
        if ctx.triggered_id == "compare-devices" and same:
            return no_update, no_update, no_update, no_update, no_update  # the devices box fired again (Enter, then blur), no change
        if not graph_key:
            return no_update, no_update, [message("choose a graph", "warning")], None, no_update
        try:
            count = parse_devices(devices)
        except (TypeError, ValueError):
            return no_update, no_update, [message(f"devices must be a whole number from 1 to {MAX_DEVICES}")], None, no_update
        try:
            graph = load_graph_key(context, graph_key)
        except ValueError as exc:
            return no_update, no_update, [message(f"cannot load the graph: {exc}")], None, no_update
        options = method_options(context, graph, count)
        kept, dropped = restore_selection(context, names(selected), names(pending), options)
        if not kept and ctx.triggered_id != "compare-run":
            kept = default_methods(options)
        results, state = compare_view(context, graph_key, devices, kept, seed, budget, time_limit, option_values)
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
