"""Measured against simulated: a scatter per series, each named with its Spearman rank correlation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .style import base_layout, format_numbers

__all__ = ["calibration_scatter"]


def calibration_scatter(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    labels: Sequence[str] | None = None,
    title: str | None = None,
    reference: str = "identity",
    x_title: str = "simulated",
    y_title: str = "measured",
    height: int = 420,
) -> go.Figure:
    """Measured (y) against simulated (x) per series, each named with its Spearman rank correlation.

    ``reference``: ``"identity"`` draws y = x (same units), ``"fit"`` the
    least-squares line through the origin (different units).
    """
    fig = go.Figure()
    low, top = np.inf, 0.0
    for name, (simulated, measured) in series.items():
        sim = pd.Series(np.asarray(simulated, dtype=float))
        real = pd.Series(np.asarray(measured, dtype=float))
        rho = sim.rank().corr(real.rank()) if len(sim) > 2 else float("nan")
        fig.add_trace(
            go.Scatter(
                x=sim,
                y=real,
                mode="markers",
                name=f"{name}: Spearman {rho:.3f}" if np.isfinite(rho) else name,
                text=list(labels) if labels is not None else None,
                customdata=np.stack([format_numbers(sim), format_numbers(real)], axis=1) if len(sim) else None,
                marker=dict(size=7, opacity=0.7),
                hovertemplate="%{text}<br>" + x_title + " %{customdata[0]}<br>" + y_title + " %{customdata[1]}<extra></extra>",
            )
        )
        if len(sim):
            top = max(top, float(sim.max()), float(real.max()))
            low = min(low, float(sim.min()), float(real.min()))
            if reference == "fit" and float((sim * sim).sum()) > 0:
                slope = float((sim * real).sum() / (sim * sim).sum())
                fig.add_trace(
                    go.Scatter(
                        x=[0, float(sim.max())],
                        y=[0, slope * float(sim.max())],
                        mode="lines",
                        line=dict(color="gray", dash="dash"),
                        name=f"fit: y = {slope:.3g} x",
                    )
                )
    if reference == "identity" and top > 0:
        fig.add_trace(
            go.Scatter(x=[low, top], y=[low, top], mode="lines", line=dict(color="gray", dash="dash"), name="measured = simulated")
        )
    fig.update_xaxes(title=x_title, exponentformat="power")
    fig.update_yaxes(title=y_title, exponentformat="power")
    fig.update_layout(legend=dict(orientation="h", y=-0.25, x=0))
    return base_layout(fig, title, height)
