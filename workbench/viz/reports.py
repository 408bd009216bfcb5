"""Figures of the reports that sweeps and benchmarks write: the paper comparison and the scaling curves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.express as px
import plotly.graph_objects as go
from plotly.subplots import make_subplots

__all__ = ["improvement_bars", "scaling_figure"]


def improvement_bars(ours: Mapping[str, Sequence[float | None]], paper: Mapping[str, Sequence[float]], titles: Sequence[str]) -> go.Figure:
    """Improvement over critical path (%) per graph: each of our methods (left) beside each of the paper's columns (right)."""
    chart = make_subplots(rows=1, cols=2, subplot_titles=("ours: simulator, 4 devices", "paper: real system, 4×P100"), shared_yaxes=True)
    for label, values in ours.items():
        chart.add_trace(go.Bar(name=label, x=list(titles), y=list(values), legendgroup="ours"), row=1, col=1)
    for column, values in paper.items():
        chart.add_trace(go.Bar(name=f"paper: {column}", x=list(titles), y=list(values), legendgroup="paper"), row=1, col=2)
    chart.update_layout(barmode="group", yaxis_title="improvement over critical path (%)", width=1300, height=520, template="plotly_white")
    return chart


def scaling_figure(rows: Sequence[Mapping[str, Any]], devices: Sequence[int]) -> go.Figure:
    """Seconds per call and peak traced memory against ops (log-log), a colour per method and a dash per device count.

    ``rows`` hold ``method``, ``devices``, ``nodes``, ``seconds`` (None: not measured) and ``peak_mib``.
    """
    figure = make_subplots(rows=1, cols=2, subplot_titles=("seconds per call", "peak traced memory (MiB)"))
    for index, name in enumerate(dict.fromkeys(r["method"] for r in rows)):
        colour = px.colors.qualitative.Dark24[index % 24]
        for count, dash in zip(devices, ("solid", "dot", "dash", "dashdot"), strict=False):
            measured = [r for r in rows if r["method"] == name and r["devices"] == count and r["seconds"] is not None]
            for col, key in ((1, "seconds"), (2, "peak_mib")):
                figure.add_trace(
                    go.Scatter(
                        x=[r["nodes"] for r in measured],
                        y=[r[key] for r in measured],
                        name=f"{name}, {count} devices",
                        legendgroup=f"{name}{count}",
                        showlegend=col == 1,
                        line={"dash": dash, "color": colour},
                    ),
                    row=1,
                    col=col,
                )
    figure.update_xaxes(type="log", title_text="ops")
    figure.update_yaxes(type="log")
    figure.update_layout(width=1300, height=650, template="plotly_white", legend={"font": {"size": 11}})
    return figure
