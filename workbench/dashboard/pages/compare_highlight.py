"""Compare's linked charts: a clicked or searched op is outlined in every chart, and zooming one timeline zooms all."""

from __future__ import annotations

import math

from dash import ALL, Input, Output, Patch, State, ctx, no_update

from ...viz import find_ops, gantt_highlight, heatmap_highlight
from ..components import message
from ..sources import load_graph_key
from ..work import simulate_placement
from .compare_options import state_arguments
from .whatif import checked_state

__all__ = ["MAX_HIGHLIGHTED", "clicked_op", "highlight_patches", "register_highlight_callbacks", "zoom_patches", "zoomed_range"]

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
        try:
            if kind == "gantt":
                shapes = gantt_highlight(simulate_placement(*state_arguments(context, state, int(index))).trace, op)
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


def register_highlight_callbacks(app, context, page: str) -> None:
    """Select an op by a click, outline the selected or searched ops, link the timelines' zoom (the charts of ``page``)."""

    @app.callback(
        Output("selected-op", "data"), Input({"type": "figure", "page": page, "index": ALL}, "clickData"), prevent_initial_call=True
    )
    def select(_clicks):
        trigger = ctx.triggered[0] if ctx.triggered else None
        op = clicked_op(trigger["value"]) if trigger else None
        return op if op is not None else no_update

    @app.callback(
        Output({"type": "figure", "page": page, "index": ALL}, "figure"),
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
        Output({"type": "figure", "page": page, "index": ALL}, "figure", allow_duplicate=True),
        Input({"type": "figure", "page": page, "index": ALL}, "relayoutData"),
        State("compare-state", "data"),
        prevent_initial_call=True,
    )
    def link_zoom(_relayouts, state):
        trigger = ctx.triggered_id
        if not trigger or not str(trigger.get("index", "")).startswith("gantt/"):
            return [no_update] * len(ctx.outputs_list)
        return zoom_patches(state, trigger["index"], ctx.triggered[0]["value"], [o["id"] for o in ctx.outputs_list])
