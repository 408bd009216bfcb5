"""The look every chart shares: device colors, layout, units and readable numbers."""

from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative

__all__ = [
    "CRITICAL",
    "HIGHLIGHT",
    "PAPER_SCALE",
    "device_color",
    "base_layout",
    "message_figure",
    "time_unit",
    "is_paper_graph",
    "format_number",
    "format_numbers",
    "format_time",
    "method_color",
    "time_axis",
]

HIGHLIGHT = "#ff00ff"
"""The selected op's outline: magenta, a color no device and no critical path uses."""
CRITICAL = "#111111"
"""The critical path's line: near-black, distinct from every device color and from :data:`HIGHLIGHT`."""
METHOD_PALETTE = qualitative.Dark24
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


def method_color(label: str) -> str:
    """A fixed color per method (the same in every table and chart, whatever else is shown beside it).

    A registered method's color follows its place in the registry, so two
    registered methods never share one; a label's text up to `` (`` names the
    method (``doppler (pretrained, …)`` is doppler, ``doppler active search (…)``
    a method of its own, colored from its name).
    """
    from ..placers import REGISTRY

    name = label.split(" (", 1)[0]
    names = list(REGISTRY)
    index = names.index(name) if name in names else len(names) + zlib.crc32(name.encode())
    return METHOD_PALETTE[index % len(METHOD_PALETTE)]


def format_number(value: float | None) -> str:
    """The one number format of every axis label, tooltip and table: the CLI's ``:,.6g`` (``workbench place`` prints
    makespans so), with the exponent's ``+`` dropped: ``1.20012e13``, ``12,345.7``, ``0.0123``; ``–`` for none."""
    if value is None or not math.isfinite(float(value)):
        return "–"
    return f"{float(value):,.6g}".replace("e+", "e")


def format_numbers(values: Any) -> np.ndarray:
    """:func:`format_number` of each value, as an object array (a chart's hover text: plotly's own ``:.6g`` writes
    ``6.87195e+10``)."""
    return np.array([format_number(v) for v in np.asarray(values, dtype=float).ravel()], dtype=object)


def format_time(value: float, graph: Any = None, unit: str | None = None) -> str:
    """A time in the graph's unit (or ``unit``), readable: ``1.20012e13 (1,200.12 ÷1e10)`` for paper graphs, ``0.0123 s``,
    ``8.42e11``. Digits as :func:`format_number`; never SI suffixes (plotly's "800B" reads as bytes).
    """
    if value is None or not math.isfinite(float(value)):
        return "–"
    value = float(value)
    text = format_number(value)
    if unit is not None:
        return f"{text} s" if unit == "s" else text
    if is_paper_graph(graph):
        return f"{text} ({format_number(value / PAPER_SCALE)} ÷1e10)"
    unit = time_unit(graph)
    return f"{text} {unit}" if unit == "s" else text


def time_axis(graph: Any, what: str = "time") -> dict[str, Any]:
    """Axis settings for a time axis in the graph's unit: a title naming the unit, no SI suffixes."""
    unit = time_unit(graph)
    title = f"{what} ({unit}{', the paper reports ÷1e10' if is_paper_graph(graph) else ''})"
    return dict(title=title, exponentformat="power", showexponent="all")
