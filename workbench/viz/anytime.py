"""Any-time curves: the best makespan found so far against simulator evaluations, mean and spread over seeds.

Input per method label: one record per seed, each the ``details["anytime"]``
of a placement (``[evaluation, best so far, CPU seconds]`` points of a step
function, see :mod:`workbench.placers.anytime`). The x axis is the
evaluations spent or the CPU seconds spent (``x="cpu_seconds"``), both
recorded in the same run. The curves are drawn where every seed has a value
(from the latest first point to the earliest last one), so each point
averages all seeds; the band is the min..max over seeds or mean ± one
standard deviation. The x axis is logarithmic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import hex_to_rgb

from .style import base_layout, device_color, format_numbers, time_axis

__all__ = ["ANYTIME_COLUMNS", "SPREADS", "X_AXES", "anytime_frame", "anytime_figure"]

ANYTIME_COLUMNS = ["method", "evaluation", "mean", "low", "high", "std", "seeds"]
SPREADS = ("minmax", "std")
"""Band kinds: ``minmax`` (min to max over seeds) or ``std`` (mean ± one standard deviation)."""
X_AXES = {"evaluation": "simulator evaluations", "cpu_seconds": "CPU seconds"}
"""What the x axis counts (a frame's x column is named after it)."""

Records = Mapping[str, Sequence[Sequence[Sequence[float]]]]


def _table(points: Sequence[Sequence[float]], x: str) -> np.ndarray:
    """``points`` as rows of (x, best so far); x the evaluation or the CPU seconds (a record without them is refused)."""
    table = np.asarray(points, dtype=float)
    table = table.reshape(len(points), -1) if table.size else np.zeros((0, 3))
    if x == "evaluation":
        return table[:, :2]
    if table.shape[1] < 3:
        raise ValueError("an any-time record without CPU seconds cannot be drawn against CPU time")
    return np.column_stack([table[:, 2], table[:, 1]])  # process CPU time never decreases


def _best_so_far(table: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The step function of ``table`` (rows of x, best so far) at each x of ``grid`` (NaN before its first point)."""
    index = np.searchsorted(table[:, 0], grid, side="right") - 1
    values = table[np.maximum(index, 0), 1]
    return np.where(index >= 0, values, np.nan)


def _steps(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The corners of the step function through ``(x, y)`` (each value holds until the next x), for a filled band."""
    return np.repeat(x, 2)[1:], np.repeat(y, 2)[:-1]


def anytime_frame(records: Records, spread: str = "minmax", x: str = "evaluation") -> pd.DataFrame:
    """One row per method and x (evaluation, or CPU seconds) where the best so far changes: mean, band (``low``, ``high``), std, seeds."""
    if spread not in SPREADS:
        raise ValueError(f"spread must be one of {', '.join(SPREADS)}, got {spread!r}")
    if x not in X_AXES:
        raise ValueError(f"x must be one of {', '.join(X_AXES)}, got {x!r}")
    columns = [x if c == "evaluation" else c for c in ANYTIME_COLUMNS]
    frames = []
    for label, seeds in records.items():
        runs = [_table(points, x) for points in seeds if len(points)]
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
                {
                    "method": label,
                    x: grid.astype(int) if x == "evaluation" else grid,
                    "mean": mean,
                    "low": low,
                    "high": high,
                    "std": std,
                    "seeds": len(runs),
                }
            )
        )
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)[columns]


def anytime_figure(
    records: Records, title: str | None = None, graph: object = None, spread: str = "minmax", x: str = "evaluation"
) -> go.Figure:
    """Best makespan so far against evaluations or CPU seconds (log axis): per method a mean line and a shaded band over seeds."""
    frame = anytime_frame(records, spread, x)
    fig = go.Figure()
    band = "min–max" if spread == "minmax" else "±1 std"
    for number, (label, rows) in enumerate(frame.groupby("method", sort=False)):
        color = device_color(number)
        seeds = int(rows["seeds"].iloc[0])
        corners, high = _steps(rows[x].to_numpy(), rows["high"].to_numpy())
        _, low = _steps(rows[x].to_numpy(), rows["low"].to_numpy())
        fig.add_trace(
            go.Scatter(
                x=np.concatenate([corners, corners[::-1]]),
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
                x=rows[x],
                y=rows["mean"],
                mode="lines+markers",
                line=dict(color=color, shape="hv"),
                marker=dict(size=4),
                legendgroup=label,
                name=f"{label} (mean of {seeds} seed{'s' if seeds > 1 else ''})",
                customdata=np.stack([format_numbers(rows[column]) for column in (x, "mean", "low", "high")], axis=1),
                hovertemplate=(
                    f"{label}<br>{X_AXES[x]} %{{customdata[0]}}<br>mean best %{{customdata[1]}}<br>{band} %{{customdata[2]}} .. "
                    "%{customdata[3]}<extra></extra>"
                ),
            )
        )
    fig.update_xaxes(type="log", title=f"{X_AXES[x]} (log scale)")
    if x == "evaluation" and len(frame) and float(frame[x].max()) > 1:  # whole evaluations: no ticks below 1, one per decade
        fig.update_xaxes(range=[0.0, float(np.log10(frame[x].max())) + 0.05], dtick=1, tickformat=",d")
    fig.update_yaxes(**time_axis(graph, "best makespan so far"))
    fig.update_layout(
        legend=dict(orientation="h", y=1.0, x=1.0, xanchor="right", yanchor="bottom", title=dict(text=f"band: {band} over seeds")),
    )
    return base_layout(fig, title, 420)
