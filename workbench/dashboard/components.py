"""Shared pieces of every page: figure cards with PNG/CSV download, messages, the download callback."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pandas as pd
from dash import MATCH, Input, Output, State, ctx, dcc, html, no_update

__all__ = ["card_id", "controls", "csv_on_demand", "field", "figure_card", "message", "register_download_callback", "download_payload"]


def message(text: str, kind: str = "error") -> html.Div:
    """A boxed line of text; ``kind`` is ``error``, ``warning`` or ``info``."""
    return html.Div(text, className=f"wb-message wb-{kind}", role="alert" if kind == "error" else "status")


def field(label: str, control: Any, wide: bool = False, note: str | None = None) -> html.Div:
    """A labelled form control (``wide``: takes the remaining row width)."""
    children = [html.Label(label), control] + ([html.Span(note, className="wb-note")] if note else [])
    return html.Div(className="wb-field wb-wide" if wide else "wb-field", title=note, children=children)


def controls(*fields: Any) -> html.Div:
    """The boxed row of form fields at the top of a page."""
    return html.Div(className="wb-controls", children=list(fields))


def _slug(index: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", index).strip("-") or "figure"


def card_id(kind: str, page: str, index: str) -> dict[str, str]:
    """The id of one part (``figure``, ``csv-data``, ...) of a figure card."""
    return {"type": kind, "page": page, "index": index}


def trace_events_for(graph: Any, trace: Any, title: str, unit: str | None = None) -> str:
    """A trace as Chrome/Perfetto trace-event JSON: seconds as real time, paper graphs ÷1e10 as µs, other units 1 per µs.

    ``unit`` names the trace's unit when it is not the graph's (``"s"`` for a measured trace).
    """
    from ..sim.trace_events import trace_events_json
    from ..viz import is_paper_graph, op_names, time_unit

    scale = 1e6 if (unit or time_unit(graph)) == "s" else 1e-10 if is_paper_graph(graph) else 1.0
    return trace_events_json(trace, op_names(graph, trace.num_ops), title, scale)


def figure_card(
    page: str,
    index: str,
    figure: Any,
    frame: pd.DataFrame | None = None,
    caption: str | None = None,
    timeline: bool = False,
    trace_events: str | None = None,
) -> html.Div:
    """A chart with "PNG" and "CSV" download buttons; ``frame`` is the data offered as CSV.

    A ``timeline`` card also offers its trace (``trace_events``, see
    :func:`trace_events_for`) as Chrome/Perfetto trace-event JSON. Its
    graph's id is ``{"type": "figure", "page": page, "index": index}``.
    """
    perfetto = (
        [
            html.Button(
                "Trace JSON (Perfetto)", id=card_id("perfetto-button", page, index), className="wb-small", title="opens in ui.perfetto.dev"
            ),
            dcc.Store(id=card_id("trace-data", page, index), data=trace_events),
            dcc.Download(id=card_id("perfetto", page, index)),
        ]
        if timeline
        else []
    )
    return html.Div(
        className="wb-card",
        children=[
            html.Div(caption, className="wb-caption") if caption else None,
            dcc.Graph(id=card_id("figure", page, index), figure=figure, config={"displaylogo": False}),
            html.Div(
                className="wb-downloads",
                children=[
                    html.Button("PNG", id=card_id("png-button", page, index), className="wb-small"),
                    html.Button("CSV", id=card_id("csv-button", page, index), className="wb-small"),
                    *perfetto,
                    html.Span(id=card_id("download-message", page, index), className="wb-note"),
                    dcc.Store(id=card_id("csv-data", page, index), data=None if frame is None else frame.to_csv(index=False)),
                    dcc.Download(id=card_id("download", page, index)),
                ],
            ),
        ],
    )


MAX_PNG_HEIGHT = 4000
"""Pixels of height (before scaling) a PNG export renders at most, whatever height the figure sent asks for."""


def download_payload(context: Any, kind: str, index: str, figure: Any, csv_text: Any) -> tuple[dict | None, str]:
    """``(dcc.Download data, message)`` for a PNG or CSV download of one card.

    The figure comes from the browser: it is rendered in a killable child under the server's caps
    (:func:`~workbench.dashboard.work.run_bounded`; the browser Kaleido starts is held to the memory cap too), at most
    :data:`MAX_PNG_HEIGHT` pixels high; a failure or a refusal is the message.
    """
    name = _slug(index)
    if kind == "csv-button":
        if not csv_text or not isinstance(csv_text, str):
            return None, "no data to download"
        return dcc.send_string(csv_text, f"{name}.csv"), ""
    if not figure or not isinstance(figure, dict):
        return None, "no figure to export"
    from .work import run_bounded

    try:
        png = run_bounded(context, _png, figure, seconds=context.limits.max_time_limit, cap_data=False)
    except Exception as exc:  # Kaleido or its browser missing or failing, a cap, a malformed figure: say so, keep the page alive
        return None, f"PNG export failed: {exc}"
    return dcc.send_bytes(png, f"{name}.png"), ""


def _png(figure: dict) -> bytes:
    """The figure as PNG bytes, its height capped at :data:`MAX_PNG_HEIGHT` (runs in the child)."""
    import plotly.graph_objects as go

    from ..viz import to_png

    shown = go.Figure(figure)
    height = shown.layout.height
    if height is not None and height > MAX_PNG_HEIGHT:
        shown.layout.height = MAX_PNG_HEIGHT
    return to_png(shown)


def csv_on_demand(app, page: str, make: Callable[[Any], str | None]) -> None:
    """Make the CSV of ``page``'s cards when a CSV button is clicked: their ``csv-data`` store holds a small request, and
    ``make(request)`` writes the CSV, so a large table is never sent to the browser with a redraw."""
    app.workbench_csv_makers = {**getattr(app, "workbench_csv_makers", {}), page: make}


def register_download_callback(app, context: Any) -> None:
    """Pattern-matching callbacks serving every card's PNG, CSV and trace-event buttons."""

    @app.callback(
        Output({"type": "download", "page": MATCH, "index": MATCH}, "data"),
        Output({"type": "download-message", "page": MATCH, "index": MATCH}, "children"),
        Input({"type": "png-button", "page": MATCH, "index": MATCH}, "n_clicks"),
        Input({"type": "csv-button", "page": MATCH, "index": MATCH}, "n_clicks"),
        State({"type": "figure", "page": MATCH, "index": MATCH}, "figure"),
        State({"type": "csv-data", "page": MATCH, "index": MATCH}, "data"),
        prevent_initial_call=True,
    )
    def download(_png, _csv, figure, csv_text):
        trigger = ctx.triggered_id
        if not trigger:
            return no_update, no_update
        make = getattr(app, "workbench_csv_makers", {}).get(trigger["page"])
        if make is not None and trigger["type"] == "csv-button" and csv_text is not None:
            csv_text = make(csv_text)
        data, text = download_payload(context, trigger["type"], f"{trigger['page']}-{trigger['index']}", figure, csv_text)
        return (data if data is not None else no_update), text

    @app.callback(
        Output({"type": "perfetto", "page": MATCH, "index": MATCH}, "data"),
        Input({"type": "perfetto-button", "page": MATCH, "index": MATCH}, "n_clicks"),
        State({"type": "trace-data", "page": MATCH, "index": MATCH}, "data"),
        prevent_initial_call=True,
    )
    def perfetto(_clicks, events):
        trigger = ctx.triggered_id
        if not events or not isinstance(events, str) or not trigger:
            return no_update
        return dcc.send_string(events, f"{_slug(trigger['page'] + '-' + trigger['index'])}.trace.json")
