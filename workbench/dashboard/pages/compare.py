"""Compare (the landing page): several methods on one graph, side by side.

Per method: its Gantt chart from the simulator trace and its placement
heatmap; above them, the makespans against the lower bound. Clicking an op in
any chart highlights it in all of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import workbench as wb
from dash import ALL, Input, Output, Patch, State, ctx, dcc, html, no_update
from workbench.placers import methods

from ..components import controls, field, figure_card, message
from ..figures import gantt_frame, gantt_figure, gantt_highlight, heatmap_frame, heatmap_highlight, makespan_bars, makespan_frame, placement_heatmap
from ..picker import DEFAULT_GRAPH, graph_picker, register_graph_picker
from ..limits import LimitError
from ..sources import graph_label, load_graph_key, method_choices, method_label
from ..work import run_placement, simulate_placement

PATH = "/"
NAME = "Compare"
PAGE = "compare"
MAX_DEVICES = 64


def default_methods(options: list[dict[str, str]]) -> list[str]:
    """The first two registered heuristics, fast and telling, on first load (plus a pretrained policy when there is one)."""
    values = [o["value"] for o in options]
    chosen = [m for m in methods("heuristic") if m in values][:2]
    chosen += [v for v in values if v.startswith("doppler@")][:1]
    return chosen


def layout(context, jobs, **_query) -> html.Div:
    options = method_choices(context, Path(DEFAULT_GRAPH).stem)
    return html.Div(
        [
            html.H2("Compare placements"),
            controls(
                graph_picker(PAGE, context),
                field("Devices", dcc.Input(id="compare-devices", type="number", min=1, max=MAX_DEVICES, step=1, value=4)),
                field("Methods", dcc.Dropdown(id="compare-methods", options=options, value=default_methods(options), multi=True), wide=True),
                field("Seed", dcc.Input(id="compare-seed", type="number", min=0, step=1, value=0)),
                field("Search budget (evaluations)", dcc.Input(id="compare-budget", type="number", min=1, step=1, value=20000)),
                field("Time limit (s)", dcc.Input(id="compare-time-limit", type="number", min=0.1, value=10)),
                html.Button("Compare", id="compare-run", className="wb-primary"),
            ),
            dcc.Store(id="compare-state"),
            dcc.Loading(html.Div(id="compare-results"), type="default", delay_show=400),
        ]
    )


def compare_view(context, graph_key: str | None, devices: Any, methods: list[str] | None, seed: Any = 0, budget: Any = None, time_limit: Any = None) -> tuple[list, dict | None]:
    """The results area and the state the highlight callback needs; every failure becomes a message."""
    if not graph_key:
        return [message("choose a graph", "warning")], None
    try:
        devices = int(devices)
        if not 1 <= devices <= MAX_DEVICES:
            raise ValueError
    except (TypeError, ValueError):
        return [message(f"devices must be a whole number from 1 to {MAX_DEVICES}")], None
    if not methods:
        return [message("choose one or more methods", "warning")], None
    seed = int(seed or 0)
    budget = int(budget) if budget else None
    time_limit = float(time_limit) if time_limit else None
    graph = load_graph_key(context, graph_key)
    try:
        budget, time_limit = context.limits.bound_compare(graph, devices, budget, time_limit)
    except LimitError as exc:
        return [message(str(exc))], None
    bound = wb.lower_bound(graph, devices)
    panels, placements = [], {}
    for index, value in enumerate(methods):
        label = method_label(value)
        if label in placements:
            label = f"{label} #{index + 1}"
        try:
            placement = run_placement(context, graph_key, value, devices, seed, budget, time_limit)
            result = simulate_placement(context, graph_key, value, devices, seed, budget, time_limit)
        except Exception as exc:  # one method failing must not take the page down
            panels.append(html.Div(className="wb-card", children=[html.Div(label, className="wb-caption"), message(f"{label} failed: {exc}")]))
            continue
        placements[label] = placement
        gap = placement.makespan / bound - 1 if bound else 0.0
        caption = f"{label}: makespan {placement.makespan:.6g} (+{gap:.1%} over the lower bound), placed in {placement.seconds:.2f} s"
        panels.append(
            html.Div(
                [
                    figure_card(PAGE, f"gantt/{index}", gantt_figure(graph, result.trace, title=f"{label}: device timelines", devices=devices), gantt_frame(graph, result.trace), caption),
                    figure_card(PAGE, f"heatmap/{index}", placement_heatmap(graph, placement.assignment, devices, title=f"{label}: placement"), heatmap_frame(graph, placement.assignment)),
                ]
            )
        )
    header = html.P(f"{graph_label(graph_key)}: {graph.num_nodes} ops, {graph.num_edges} edges, {devices} devices, lower bound {bound:.6g}. Click an op to highlight it in every chart.")
    bars = figure_card(PAGE, "makespans", makespan_bars(placements, bound, title="makespan per method"), makespan_frame(placements, bound)) if placements else message("no method succeeded")
    state = {"graph_key": graph_key, "devices": devices, "methods": list(methods), "seed": seed, "budget": budget, "time_limit": time_limit}
    return [header, bars, html.Div(panels, className="wb-grid")], state


def highlight_patches(context, state: dict | None, op: int | None, output_ids: list[dict]) -> list:
    """A figure Patch per output id (Gantt or heatmap of the current comparison) outlining ``op``."""
    if not state:
        return [no_update] * len(output_ids)
    graph = load_graph_key(context, state["graph_key"])
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


def register_callbacks(app, context, jobs) -> None:
    register_graph_picker(app, context, PAGE)

    @app.callback(Output("compare-methods", "options"), Output("compare-methods", "value"), Input(f"{PAGE}-graph-key", "data"), State("compare-methods", "value"))
    def methods_for_graph(graph_key, selected):
        if not graph_key:
            return no_update, no_update
        try:
            options = method_choices(context, load_graph_key(context, graph_key).name)
        except Exception:
            return no_update, no_update
        valid = {o["value"] for o in options}
        kept = [v for v in (selected or []) if v in valid]
        return options, kept or default_methods(options)

    @app.callback(
        Output("compare-results", "children"),
        Output("compare-state", "data"),
        Input("compare-run", "n_clicks"),
        Input(f"{PAGE}-graph-key", "data"),
        State("compare-devices", "value"),
        State("compare-methods", "value"),
        State("compare-seed", "value"),
        State("compare-budget", "value"),
        State("compare-time-limit", "value"),
    )
    def run(_clicks, graph_key, devices, methods, seed, budget, time_limit):
        return compare_view(context, graph_key, devices, methods, seed, budget, time_limit)

    @app.callback(Output("selected-op", "data"), Input({"type": "figure", "page": PAGE, "index": ALL}, "clickData"), prevent_initial_call=True)
    def select(_clicks):
        trigger = ctx.triggered[0] if ctx.triggered else None
        op = clicked_op(trigger["value"]) if trigger else None
        return op if op is not None else no_update

    @app.callback(
        Output({"type": "figure", "page": PAGE, "index": ALL}, "figure"),
        Input("selected-op", "data"),
        State("compare-state", "data"),
        prevent_initial_call=True,
    )
    def highlight(op, state):
        return highlight_patches(context, state, op, [o["id"] for o in ctx.outputs_list])
