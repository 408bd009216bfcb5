"""Training curves: a metric per episode (or wall-clock second) per run, stages shaded per run, greedy evaluations beside.

Stage III (``stage == "real"``) measures makespans in seconds on a real
system while Stages I and II simulate in the graph's unit, so Stage III's
makespans get their own axis on the right. A Stage III run whose oracle was
the simulator (its ``oracle`` column says ``sim``) measured graph units, and
its axis and legend say so (:func:`stage_three_unit`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

from ..runs import GREEDY_PERIODIC, STAGE_NAMES
from .style import base_layout, format_number, format_numbers, time_axis, time_unit

__all__ = ["STAGE_SHORT", "stage_three_unit", "training_curves"]

STAGE_RGB = {"il": "31,119,180", "sim": "44,160,44", "real": "255,127,14"}
STAGE_SHORT = {"il": "I", "sim": "II", "real": "III"}
REAL = "real"
X_TITLES = {"episode": "episode", "seconds": "training wall-clock time (s)"}


def _spans(data: pd.DataFrame, x: str) -> list[tuple[str, float, float]]:
    """``(stage, first x, last x)`` of each run of consecutive rows of one stage."""
    if "stage" not in data or data.empty:
        return []
    stage = data["stage"].fillna("?").to_numpy()
    cuts = np.flatnonzero(stage[1:] != stage[:-1]) + 1
    values = data[x].to_numpy(dtype=float)
    return [(str(stage[a]), float(values[a]), float(values[b - 1])) for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(stage)], strict=False)]


MAX_RAW_POINTS = 20_000
"""Raw points drawn per run and axis by default; a longer run shows each stretch's lowest and highest (the rolling mean
still uses all)."""
MAX_LINE_POINTS = 2_000
"""Points of each rolling-mean line (an SVG line of 300,000 points took seconds to redraw)."""


def stage_three_unit(frame: pd.DataFrame) -> str:
    """``"s"`` when a run's Stage III rows were measured on a system, ``"simulator oracle"`` when its oracle was the
    simulator (every Stage III row's ``oracle`` is ``sim``), so graph units; ``"s"`` for a run that logged no oracle."""
    if "oracle" not in frame or "stage" not in frame:
        return "s"
    oracles = frame.loc[frame["stage"] == REAL, "oracle"].dropna().astype(str)
    return "simulator oracle" if len(oracles) and (oracles == "sim").all() else "s"


def _stage_three_title(units: set[str], graph: Any) -> str:
    """The right axis's title for the Stage III units of the runs drawn."""
    simulated = f"{time_unit(graph)}, simulator oracle"
    if units == {"s"}:
        return "Stage III makespan (s, measured)"
    if units == {"simulator oracle"}:
        return f"Stage III makespan ({simulated})"
    return f"Stage III makespan (s measured; {simulated})"


def _stride(rows: int, most: int) -> int:
    """The step that keeps at most ``most`` of ``rows`` points."""
    return max(1, -(-rows // most))


def extremes(values: Any, most: int) -> np.ndarray:
    """Positions of at most ``most`` of ``values`` (no NaN) that keep their shape: the first and the last, and the lowest
    and the highest of each of ``(most - 2) // 2`` equal stretches, in order (all positions when there are no more)."""
    values = np.asarray(values, dtype=float)
    if len(values) <= most:
        return np.arange(len(values))
    stretch = np.arange(len(values)) * max(1, (most - 2) // 2) // len(values)
    order = np.lexsort((values, stretch))
    firsts = np.flatnonzero(np.r_[True, stretch[order][1:] != stretch[order][:-1]])
    lasts = np.r_[firsts[1:] - 1, len(order) - 1]
    return np.unique(np.concatenate([[0, len(values) - 1], order[firsts], order[lasts]]))


def training_curves(
    runs: Mapping[str, pd.DataFrame] | pd.DataFrame,
    metric: str = "makespan",
    references: Mapping[str, float] | None = None,
    window: int = 25,
    title: str | None = None,
    x: str = "episode",
    greedy: Mapping[str, pd.DataFrame] | None = None,
    graph: Any = None,
    raw_points: int = MAX_RAW_POINTS,
    line_points: int = MAX_LINE_POINTS,
) -> go.Figure:
    """``metric`` per ``x`` (``episode`` or ``seconds`` of training) for each run: raw points, a rolling mean, stages shaded.

    ``runs`` maps a label to a ``metrics.csv`` frame (``stage``, ``episode``
    and the metric's column); a single frame is labelled ``run``.
    ``references`` (teacher, best heuristic) are dashed lines named in the
    legend; ``greedy`` maps a run label to its greedy evaluations (columns
    ``episode``/``seconds``, ``makespan``, ``what``, optionally ``stage``):
    the periodic ones (``what`` :data:`GREEDY_PERIODIC`) as a dotted line with
    small diamonds beside the sampled makespans, others as large diamonds. With
    one run its stages shade the whole height; with several, each run gets its
    own band at the bottom. Stage III makespans (seconds) go on a right axis.
    Each run draws at most ``raw_points`` raw points per axis (:func:`extremes`)
    and ``line_points`` points of its rolling mean.
    """
    if x not in X_TITLES:
        raise ValueError(f"x must be 'episode' or 'seconds', got {x!r}")
    runs = {"run": runs} if isinstance(runs, pd.DataFrame) else dict(runs)
    fig = go.Figure()
    traces: list[go.Scatter | go.Scattergl] = []  # added at once: each add_trace copies the figure's data again
    palette = qualitative.Plotly
    shaded: list[tuple[str, list[tuple[str, float, float]]]] = []
    low, high, real_units = np.inf, -np.inf, set()
    for index, (label, frame) in enumerate(runs.items()):
        if metric not in frame or x not in frame or frame[metric].dropna().empty:
            continue
        data = frame[[c for c in dict.fromkeys(["episode", x, metric, "stage", "oracle"]) if c in frame]].dropna(subset=[x, metric])
        data = data.sort_values(x)
        real_unit = stage_three_unit(data)
        shaded.append((label, _spans(data, x)))
        low, high = min(low, float(data[x].min())), max(high, float(data[x].max()))
        color = palette[index % len(palette)]
        is_real = (data["stage"] == REAL).to_numpy() if "stage" in data and metric == "makespan" else np.zeros(len(data), bool)
        for part, axis, suffix in ((data[~is_real], "y", ""), (data[is_real], "y2", f" (Stage III, {real_unit})")):
            if part.empty:
                continue
            if axis == "y2":
                real_units.add(real_unit)
            raw = part.iloc[extremes(part[metric], raw_points)]
            big = len(raw) > 2000
            traces.append(
                (go.Scattergl if big else go.Scatter)(
                    x=raw[x],
                    y=raw[metric],
                    mode="markers",
                    name=f"{label}{suffix} (raw)",
                    yaxis=axis,
                    marker=dict(color=color, size=4, opacity=0.3, symbol="circle" if axis == "y" else "triangle-up"),
                    legendgroup=label,
                    showlegend=False,
                    customdata=format_numbers(raw[metric]),
                    hovertemplate=f"{label}{suffix}<br>{x} %{{x:,.6~g}}<br>{metric} %{{customdata}}<extra></extra>",
                )
            )
            smooth = part[metric].rolling(max(1, int(window)), min_periods=1).mean()
            step = _stride(len(part), max(1, line_points - 1))
            line_rows = np.unique(np.r_[np.arange(0, len(part), step), len(part) - 1])  # every step-th, and the last
            traces.append(
                go.Scatter(
                    x=part[x].iloc[line_rows],
                    y=smooth.iloc[line_rows],
                    mode="lines",
                    name=f"{label}{suffix}",
                    yaxis=axis,
                    line=dict(color=color, width=2, dash="solid" if axis == "y" else "dot"),
                    legendgroup=label,
                )
            )
        evaluations = (greedy or {}).get(label)
        if evaluations is None or evaluations.empty or metric != "makespan":
            continue
        measured = evaluations["stage"].eq(REAL) if "stage" in evaluations else pd.Series(False, index=evaluations.index)
        for (what, real), points in evaluations.groupby([evaluations["what"], measured], sort=False):
            points = points.dropna(subset=[x, "makespan"]).sort_values(x)
            if real:
                real_units.add(real_unit)
            periodic = what == GREEDY_PERIODIC
            name = f"{label}: {what}" + (f" (Stage III, {real_unit})" if real else "")
            traces.append(
                go.Scatter(
                    x=points[x],
                    y=points["makespan"],
                    mode="lines+markers" if periodic else "markers",
                    name=name,
                    yaxis="y2" if real else "y",
                    legendgroup=label,
                    line=dict(color=color, width=1.5, dash="dot"),
                    marker=dict(color=color, symbol="diamond", size=6 if periodic else 11, line=dict(color="black", width=1)),
                    customdata=format_numbers(points["makespan"]),
                    hovertemplate=f"{name}<br>{x} %{{x:,.6~g}}<br>greedy makespan %{{customdata}}<extra></extra>",
                )
            )
    _shade(fig, shaded, high - low if np.isfinite(high - low) else 0.0, x)
    references = references or {}
    for index, (label, value) in enumerate(references.items()):
        traces.append(
            go.Scatter(
                x=[low, high] if np.isfinite(low) else [0, 1],
                y=[value, value],
                mode="lines",
                name=f"{label} {format_number(value)}",
                line=dict(color=["#7f7f7f", "#9467bd", "#8c564b"][index % 3], dash="dash"),
                hovertemplate=f"{label} {format_number(value)}<extra></extra>",
            )
        )
    fig.add_traces(traces)
    fig.update_xaxes(title=X_TITLES[x])
    y_title = time_axis(graph, metric)["title"] if metric == "makespan" else metric
    fig.update_yaxes(title=y_title, exponentformat="power", showexponent="all")
    if real_units:
        fig.update_layout(
            yaxis2=dict(title=_stage_three_title(real_units, graph), overlaying="y", side="right", showgrid=False, exponentformat="power")
        )
    entries = sum(1 for t in fig.data if t.showlegend is not False)
    fig.update_layout(legend=dict(orientation="h", y=-0.15, x=0, yanchor="top"))
    if not fig.data:
        fig.add_annotation(text=f"no {metric} values logged yet", showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    base_layout(fig, title, 360 + 24 * entries, uirevision=f"curves-{metric}-{x}")
    fig.update_layout(margin=dict(b=60 + 24 * entries))  # the legend below, one line per entry, never over the plot
    return fig


def _shade(fig: go.Figure, shaded: list[tuple[str, list[tuple[str, float, float]]]], width: float, x: str) -> None:
    """Stage bands: the whole height for one run, one band per run at the bottom for several; labels never overlap.

    A label gets the stage's full name where its span is wide enough, else the
    stage's numeral (``I``, ``II``, ``III``); the full names are in the hover.
    """
    count = len(shaded)
    band = 0.06
    pad = 0.5 if x == "episode" else 0.0
    shapes: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    for index, (label, spans) in enumerate(shaded):
        y0, y1 = (0.0, 1.0) if count == 1 else (index * band, (index + 1) * band)
        for stage, first, last in spans:
            shapes.append(
                dict(
                    type="rect",
                    xref="x",
                    yref="paper",
                    x0=first - pad,
                    x1=last + pad,
                    y0=y0,
                    y1=y1,
                    line=dict(width=0),
                    layer="below",
                    fillcolor=f"rgba({STAGE_RGB.get(stage, '127,127,127')},{0.10 if count == 1 else 0.4})",
                )
            )
            share = (last - first) / width if width > 0 else 1.0
            name = STAGE_NAMES.get(stage, stage)
            text = name if share > 0.25 else STAGE_SHORT.get(stage, stage)
            if count > 1:
                text = f"{label}: {text}" if share > 0.4 else text
            annotations.append(
                dict(
                    x=(first + last) / 2,
                    y=y1 if count == 1 else (y0 + y1) / 2,
                    xref="x",
                    yref="paper",
                    text=text,
                    hovertext=f"{label}: {name}",
                    showarrow=False,
                    yanchor="top" if count == 1 else "middle",
                    font=dict(size=11, color="#444"),
                )
            )
    # set once: each add_shape or add_annotation validates every one added before it again
    fig.update_layout(shapes=[*fig.layout.shapes, *shapes], annotations=[*fig.layout.annotations, *annotations])
