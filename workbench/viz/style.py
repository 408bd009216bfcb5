"""The look every chart shares: device colors, layout, units and readable numbers."""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go
from plotly.colors import qualitative

__all__ = [
    "HIGHLIGHT",
    "PAPER_SCALE",
    "device_color",
    "base_layout",
    "message_figure",
    "time_unit",
    "is_paper_graph",
    "format_time",
    "time_axis",
]

HIGHLIGHT = "#d62728"
PAPER_SCALE = 1e10
"""The DOPPLER paper reports its graphs' times divided by this."""


def device_color(device: int) -> str:
    """A fixed color per device id."""
    palette = qualitative.Plotly + qualitative.D3
    return palette[int(device) % len(palette)]


def base_layout(fig: go.Figure, title: str | None, height: int, uirevision: str | None = None) -> go.Figure:
    """Shared look; ``uirevision`` keeps the user's zoom across redraws of the same kind of chart."""
    fig.update_layout(
        title=title,
        height=height,
        margin=dict(l=10, r=10, t=40 if title else 10, b=40),
        template="plotly_white",
        uirevision=uirevision,
        separators=".,",
    )
    return fig


def message_figure(text: str, height: int = 200) -> go.Figure:
    """An empty figure that shows ``text``."""
    fig = go.Figure()
    fig.add_annotation(text=text, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return base_layout(fig, None, height)


def is_paper_graph(graph: Any) -> bool:
    """Whether ``graph`` comes from the DOPPLER paper's files (whose times the paper reports ÷1e10)."""
    return graph is not None and graph.metadata.get("format") == "doppler-paper"


def time_unit(graph: Any) -> str:
    """The graph's time unit for axis titles: ``s``, ``arbitrary``, ``paper units``, or ``graph units``."""
    if graph is None:
        return "graph units"
    if is_paper_graph(graph):
        return "paper units"
    return str(graph.metadata.get("time_unit") or "graph units")


def format_time(value: float, graph: Any = None) -> str:
    """A time in the graph's unit, readable: ``1.2001e13 (1,200.1 ÷1e10)`` for paper graphs, ``0.0123 s``, ``8.42e11``.

    Never SI suffixes (plotly's "800B" reads as bytes).
    """
    if value is None or not math.isfinite(float(value)):
        return "–"
    value = float(value)
    text = f"{value:.5g}".replace("e+", "e")
    if is_paper_graph(graph):
        return f"{text} ({value / PAPER_SCALE:,.1f} ÷1e10)"
    unit = time_unit(graph)
    return f"{text} {unit}" if unit == "s" else text


def time_axis(graph: Any, what: str = "time") -> dict[str, Any]:
    """Axis settings for a time axis in the graph's unit: a title naming the unit, no SI suffixes."""
    unit = time_unit(graph)
    title = f"{what} ({unit}{', the paper reports ÷1e10' if is_paper_graph(graph) else ''})"
    return dict(title=title, exponentformat="power", showexponent="all")
