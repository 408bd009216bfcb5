"""Compare (the landing page): several methods on one graph, side by side.

Per method: its Gantt chart from the simulator trace (all on one time axis,
zoom linked) and its placement heatmap; above them, the makespans against
the lower bound. Clicking an op, or searching one by id or name, highlights
it in every chart. The method list is computed for the current graph and
device count in the same callback that starts placing, so a learned checkpoint is
only ever applied to a graph it was trained on (or, for a cross-graph
policy, labelled "trained on X; placed on Y"). A checkpoint whose policy
adapts itself per instance is offered a second time as its active search,
which spends the search budget (within the time limit) like any search; a
caption gives the evaluations a method spent. Below, "makespan against
evaluations" draws any-time curves of searches and sampled policies on the
same graph and devices (:mod:`workbench.dashboard.anytime`).

The methods are placed one after another in a job that the page polls, each
drawn as soon as it is placed (:mod:`.compare_stream`); the methods on offer
and the selection carried across graphs are in :mod:`.compare_choice`, the
any-time section in :mod:`.compare_anytime`, the linked highlight and zoom in
:mod:`.compare_highlight`.
"""

from __future__ import annotations

from typing import Any

from dash import Input, Output, State, ctx, dcc, html, no_update

from ...sim import lower_bound
from ...viz import format_time, gantt_figure, gantt_frame, heatmap_frame, is_paper_graph, makespan_bars, makespan_frame, placement_heatmap
from ..components import controls, field, figure_card, message, trace_events_for
from ..learned import checkpoint_origin
from ..picker import DEFAULT_GRAPH, graph_picker, register_graph_picker
from ..polled import next_poll
from ..sources import graph_label, load_graph_key, method_label
from ..summary import plural, sort_rows, summary_rows, summary_table, unplaced_row
from .compare_anytime import anytime_section, register_anytime_callbacks
from .compare_choice import MAX_DEVICES, default_methods, method_options, names, parse_devices, restore_selection
from .compare_highlight import register_highlight_callbacks
from .compare_options import options_section, register_options_callbacks
from .compare_stream import POLL_MS, CompareJob, JobView, check_request, find_compare_job, start_compare, stream_step
from .whatif import HIDDEN, editor, register_whatif_callbacks

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
                html.Button("Cancel", id="compare-cancel", style=HIDDEN, title="stop the placements still to come; what is placed stays"),
                field(
                    "Find an op (id or name)",
                    dcc.Input(id="compare-search", type="text", debounce=True, placeholder=f"e.g. 12 or {SEARCH_EXAMPLE}"),
                ),
            ),
            options_section(),
            html.Div(id="compare-progress"),
            html.Div(id="compare-search-message"),
            dcc.Store(id="compare-state"),
            dcc.Store(id="compare-pending", data=[]),
            dcc.Store(id="compare-job"),
            dcc.Store(id="compare-drawn"),
            dcc.Interval(id="compare-poll", interval=POLL_MS, disabled=True),
            html.Div(id="compare-notes"),
            html.Div(id="compare-results"),
            anytime_section(),
        ]
    )


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
    """The results area and the state the highlight callback needs, every method placed in this thread first (the page
    streams them instead: :mod:`.compare_stream`); every failure becomes a message. ``options`` is ``{method: {key:
    value}}`` (the options form's, :func:`~.compare_options.checked_options` checks it)."""
    request = check_request(context, graph_key, devices, methods, seed, budget, time_limit, options)
    if isinstance(request, list):
        return request, None
    job = CompareJob(context, request)
    job.run()
    return compare_results(context, job.view())


def compare_results(context, view: JobView) -> tuple[list, dict | None]:
    """The results area of a comparison as far as it got: the summary table, the makespans and a card per method ended so
    far; with the what-if editor and the state the highlight callbacks need once it has ended (``None`` before)."""
    request, done, cut, cancelled = view.request, view.done, view.cut, view.cancelled
    ended = view.state != "running"
    graph, devices, graph_key, methods = request.graph, request.devices, request.graph_key, request.methods
    bound = lower_bound(graph, devices)
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
    unplaced = [unplaced_row(label, short) for label, short in cut + cancelled]
    table = summary_table("compare-summary", summary_rows(rows, bound, graph) + unplaced)
    makespans = (
        figure_card(
            PAGE,
            "makespans",
            makespan_bars(placements, bound, title=f"{graph.name} on {devices} devices: makespan per method", graph=graph),
            makespan_frame(placements, bound),
        )
        if placements
        else message("no method succeeded")
        if ended
        else None
    )
    # a component, not a list: Dash renders no list nested in a list of children
    bars = html.Div([table, makespans, *([_deadline_note(context, cut)] if cut else [])]) if placements or unplaced else makespans
    if not ended:
        return [header, bars, html.Div(panels, className="wb-grid")], None
    state = {
        "graph_key": graph_key,
        "devices": devices,
        "methods": list(methods),
        "labels": [label for label, _, _, _ in done],
        "seed": request.seed,
        "budget": request.budget,
        "time_limit": request.time_limit,
        "options": request.sent_options,
        "x_max": longest * 1.01,
    }
    succeeded = [(index, label) for index, (label, placement, _, _) in enumerate(done) if placement is not None]
    return [header, bars, html.Div(panels, className="wb-grid"), editor(succeeded, devices) if succeeded else None], state


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
        Output("compare-notes", "children"),
        Output("compare-job", "data"),
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
        State("compare-job", "data"),
    )
    def run(_clicks, graph_key, devices, selected, seed, budget, time_limit, option_values, shown, pending, held):
        """One callback decides the methods for this graph and device count and starts placing them (stopping the page's
        last comparison): no stale method list. The results stream in through :func:`stream`."""
        same = isinstance(shown, dict) and (shown.get("graph_key"), shown.get("devices")) == (graph_key, devices)
        if ctx.triggered_id == "compare-devices" and same:
            return no_update, no_update, no_update, no_update, no_update  # the devices box fired again (Enter, then blur), no change
        previous = find_compare_job(held.get("id") if isinstance(held, dict) else None)
        if previous is not None:
            previous.cancel()
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
        request = check_request(context, graph_key, devices, kept, seed, budget, time_limit, option_values)
        notes, job = (request, None) if isinstance(request, list) else ([], {"id": start_compare(context, request).id})
        if dropped:
            notes = [
                message(
                    f"not offered for {graph.name} on {devices} devices (no checkpoint trained for it): "
                    + ", ".join(map(method_label, dropped))
                    + "; chosen again where it is offered",
                    "info",
                ),
                *notes,
            ]
        return options, kept, notes, job, dropped

    @app.callback(
        Output("compare-results", "children"),
        Output("compare-state", "data"),
        Output("compare-drawn", "data"),
        Output("compare-progress", "children"),
        Output("compare-poll", "disabled"),
        Output("compare-cancel", "style"),
        Output("compare-poll", "max_intervals"),
        Input("compare-job", "data"),
        Input("compare-poll", "n_intervals"),
        Input("compare-cancel", "n_clicks"),
        State("compare-drawn", "data"),
        prevent_initial_call=True,
    )
    def stream(held, polls, _cancel, drawn):
        """A new comparison, the timer or Cancel: the cards of the methods placed so far, and how far it got (the timer
        ticks again only after this answer: :func:`~workbench.dashboard.polled.next_poll`)."""
        return *stream_step(ctx.triggered_id, held, drawn, lambda view: compare_results(context, view)), next_poll(polls)

    @app.callback(
        Output("compare-summary", "data"),
        Input("compare-summary", "sort_by"),
        State("compare-summary", "data"),
        prevent_initial_call=True,
    )
    def sort_summary(sort_by, rows):
        return sort_rows(rows or [], sort_by)
