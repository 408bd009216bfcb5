"""Graph: the dataflow graph in layers (topological depth), colored by cost, op type or device, with its statistics.

The graph is within the server's size caps (:func:`~workbench.dashboard.sources.load_graph_key`), and the drawing,
its CSV and statistics are computed in a killable child under the server's caps
(:func:`~workbench.dashboard.work.run_bounded`), as the placement coloring it is.
"""

from __future__ import annotations

from dash import Input, Output, State, dcc, html

from ...viz import format_time, graph_figure, graph_frame, graph_statistics, message_figure
from ..choice import MethodChoice
from ..components import controls, field, figure_card, message
from ..picker import graph_picker, register_graph_picker
from ..sources import load_graph_key, method_choices, method_label
from ..work import Cancelled, run_bounded, run_placement

PATH = "/graph"
NAME = "Graph"
PAGE = "graph"
COLORINGS = ("compute", "op_type", "device")


def placement_options(context, graph_key: str | None, devices) -> list[dict[str, str]]:
    """The placements that may color the ops: every non-learned method, and each learned checkpoint usable on this graph
    and device count (Compare's list, so a policy is never applied to a graph it was not trained for)."""
    from .compare import method_options

    try:
        return method_options(context, load_graph_key(context, graph_key), int(devices))
    except (TypeError, ValueError, OverflowError, OSError):
        return _without_checkpoints(context)


def _without_checkpoints(context) -> list[dict[str, str]]:
    """The methods that place any graph: those that need no checkpoint."""
    return [o for o in method_choices(context, "") if not MethodChoice.from_value(o["value"]).root]


def layout(context, jobs, **_query) -> html.Div:
    options = _without_checkpoints(context)
    return html.Div(
        [
            html.H2("Dataflow graph"),
            controls(
                graph_picker(PAGE, context),
                field("Color ops by", dcc.RadioItems(id="graph-color", options=list(COLORINGS), value="compute", inline=True)),
                field(
                    "Placement (for device colors)",
                    dcc.Dropdown(id="graph-method", options=options, value="critical_path", clearable=False),
                ),
                field("Devices", dcc.Input(id="graph-devices", type="number", min=1, max=context.limits.max_devices, step=1, value=4)),
            ),
            html.Div(id="graph-message"),
            figure_card(
                PAGE,
                "graph",
                message_figure("loading…"),
                None,
                "Ops in layers by topological depth; the critical path (compute + communication) in black",
            ),
            html.H3("Statistics"),
            html.Div(id="graph-stats"),
        ]
    )


def graph_view(context, graph_key: str | None, color_by: str, method: str | None, devices) -> tuple:
    """``(figure, csv text, statistics table, message)`` for the Graph page; a refusal or a failure is the message."""
    if not graph_key:
        return message_figure("choose a graph"), None, None, None
    most = context.limits.max_devices
    if isinstance(devices, float) and devices.is_integer():
        devices = int(devices)
    if isinstance(devices, bool) or not isinstance(devices, int) or not 1 <= devices <= most:
        return message_figure(f"devices must be 1..{most}"), None, None, message(f"devices must be a whole number from 1 to {most}")
    if color_by not in COLORINGS:
        return message_figure("choose a coloring"), None, None, message(f"color ops by one of {', '.join(COLORINGS)}")
    try:
        graph = load_graph_key(context, graph_key)
    except (ValueError, Cancelled) as exc:
        return message_figure("no graph"), None, None, message(f"cannot load the graph: {exc}")
    assignment, note = None, None
    if color_by == "device":
        try:
            assignment = run_placement(context, graph_key, str(method or "critical_path"), devices).assignment
        except Exception as exc:  # show the failure, draw without devices
            note, color_by = message(f"{method_label(str(method or ''))} failed: {exc}"), "compute"
    if color_by == "op_type" and graph.op_types is None:
        note = message("this graph has no op types; colored by compute instead", "info")
        color_by = "compute"
    try:
        figure, csv, stats = run_bounded(context, _drawing, context, graph_key, color_by, assignment, devices)
    except (ValueError, Cancelled) as exc:
        return message_figure("no drawing"), None, None, message(f"cannot draw the graph: {exc}")
    ratio = "communication / compute"
    rows = [
        html.Tr([html.Th(k), html.Td(f"{v:.4g}" if k == ratio else format_time(v, graph) if isinstance(v, float) else f"{v:,}")])
        for k, v in stats.items()
    ]
    return figure, csv, html.Table(rows, className="wb-table"), note


def _drawing(context, graph_key: str, color_by: str, assignment, devices: int) -> tuple:
    """``(figure, csv text, statistics)`` of the Graph page (runs in the child)."""
    graph = load_graph_key(context, graph_key)
    figure = graph_figure(graph, color_by=color_by, assignment=assignment, title=f"{graph.name}: {graph.num_nodes} ops")
    return figure, graph_frame(graph, assignment).to_csv(index=False), graph_statistics(graph, devices)


def register_callbacks(app, context, jobs) -> None:
    register_graph_picker(app, context, PAGE)

    @app.callback(
        Output("graph-method", "options"),
        Output("graph-method", "value"),
        Input(f"{PAGE}-graph-key", "data"),
        Input("graph-devices", "value"),
        State("graph-method", "value"),
    )
    def offer(graph_key, devices, chosen):
        options = placement_options(context, graph_key, devices)
        offered = [o["value"] for o in options]
        return options, chosen if chosen in offered else "critical_path"

    @app.callback(
        Output({"type": "figure", "page": PAGE, "index": "graph"}, "figure"),
        Output({"type": "csv-data", "page": PAGE, "index": "graph"}, "data"),
        Output("graph-stats", "children"),
        Output("graph-message", "children"),
        Input(f"{PAGE}-graph-key", "data"),
        Input("graph-color", "value"),
        Input("graph-method", "value"),
        Input("graph-devices", "value"),
    )
    def draw(graph_key, color_by, method, devices):
        return graph_view(context, graph_key, color_by, method, devices)
