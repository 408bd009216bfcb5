"""Any-time curves: the best makespan found so far against simulator evaluations, mean and spread over seeds.

Input per method label: one record per seed, each the ``details["anytime"]``
of a placement (``[evaluation, best so far]`` points of a step function, see
:mod:`workbench.placers.anytime`). The curves are drawn where every seed has a
value (from the latest first point to the earliest last evaluation), so each
point averages all seeds; the band is the min..max over seeds or mean ± one
standard deviation. The x axis is logarithmic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import hex_to_rgb

from .style import base_layout, device_color, time_axis

__all__ = ["ANYTIME_COLUMNS", "SPREADS", "anytime_frame", "anytime_figure"]

ANYTIME_COLUMNS = ["method", "evaluation", "mean", "low", "high", "std", "seeds"]
SPREADS = ("minmax", "std")
"""Band kinds: ``minmax`` (min to max over seeds) or ``std`` (mean ± one standard deviation)."""

Records = Mapping[str, Sequence[Sequence[Sequence[float]]]]


def _best_so_far(points: Sequence[Sequence[float]], grid: np.ndarray) -> np.ndarray:
    """The step function ``points`` at each evaluation of ``grid`` (NaN before its first point)."""
    table = np.asarray(points, dtype=float).reshape(-1, 2)
    index = np.searchsorted(table[:, 0], grid, side="right") - 1
    values = table[np.maximum(index, 0), 1]
    return np.where(index >= 0, values, np.nan)


def _steps(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The corners of the step function through ``(x, y)`` (each value holds until the next x), for a filled band."""
    return np.repeat(x, 2)[1:], np.repeat(y, 2)[:-1]


def anytime_frame(records: Records, spread: str = "minmax") -> pd.DataFrame:
    """One row per method and evaluation where the best so far changes: mean, band (``low``, ``high``), std, seeds."""
    if spread not in SPREADS:
        raise ValueError(f"spread must be one of {', '.join(SPREADS)}, got {spread!r}")
    frames = []
    for label, seeds in records.items():
        runs = [np.asarray(points, dtype=float).reshape(-1, 2) for points in seeds if len(points)]
        if not runs:
            continue
        first = max(run[0, 0] for run in runs)
        last = min(run[-1, 0] for run in runs)
        steps = np.unique(np.concatenate([run[:, 0] for run in runs]))
        grid = np.unique(np.concatenate([[first, last], steps[(steps >= first) & (steps <= last)]]))
        values = np.stack([_best_so_far(run, grid) for run in runs])
        mean, std = values.mean(axis=0), values.std(axis=0)
        low, high = (values.min(axis=0), values.max(axis=0)) if spread == "minmax" else (mean - std, mean + std)
        frames.append(
            pd.DataFrame(
                {"method": label, "evaluation": grid.astype(int), "mean": mean, "low": low, "high": high, "std": std, "seeds": len(runs)}
            )
        )
    if not frames:
        return pd.DataFrame(columns=ANYTIME_COLUMNS)
    return pd.concat(frames, ignore_index=True)[ANYTIME_COLUMNS]


def anytime_figure(records: Records, title: str | None = None, graph: object = None, spread: str = "minmax") -> go.Figure:
    """Best makespan so far against evaluations (log axis): per method a mean line and a shaded band over seeds."""
    frame = anytime_frame(records, spread)
    fig = go.Figure()
    band = "min–max" if spread == "minmax" else "±1 std"
    for number, (label, rows) in enumerate(frame.groupby("method", sort=False)):
        color = device_color(number)
        seeds = int(rows["seeds"].iloc[0])
        x, high = _steps(rows["evaluation"].to_numpy(), rows["high"].to_numpy())
        _, low = _steps(rows["evaluation"].to_numpy(), rows["low"].to_numpy())
        fig.add_trace(
            go.Scatter(
                x=np.concatenate([x, x[::-1]]),
                y=np.concatenate([high, low[::-1]]),
                mode="lines",
                fill="toself",
                fillcolor=f"rgba{(*hex_to_rgb(color), 0.2)}",
                line=dict(width=0),
                hoverinfo="skip",
                legendgroup=label,
                showlegend=False,
                name=f"{label} ({band})",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=rows["evaluation"],
                y=rows["mean"],
                mode="lines+markers",
                line=dict(color=color, shape="hv"),
                marker=dict(size=4),
                legendgroup=label,
                name=f"{label} (mean of {seeds} seed{'s' if seeds > 1 else ''})",
                customdata=np.stack([rows["low"], rows["high"]], axis=1),
                hovertemplate=(
                    f"{label}<br>evaluation %{{x}}<br>mean best %{{y:.6g}}<br>{band} %{{customdata[0]:.6g}} .. %{{customdata[1]:.6g}}"
                    "<extra></extra>"
                ),
            )
        )
    fig.update_xaxes(type="log", title="simulator evaluations (log scale)")
    fig.update_yaxes(**time_axis(graph, "best makespan so far"))
    fig.update_layout(
        legend=dict(orientation="h", y=1.0, x=1.0, xanchor="right", yanchor="bottom", title=dict(text=f"band: {band} over seeds")),
    )
    return base_layout(fig, title, 420)
