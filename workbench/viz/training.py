"""Training curves: a metric per episode (or wall-clock second) per run, stages shaded per run, greedy evaluations beside.

Stage III (``stage == "real"``) measures makespans in seconds on a real
system while Stages I and II simulate in the graph's unit, so Stage III's
makespans get their own axis on the right. A Stage III run whose oracle was
the simulator (its ``oracle`` column says ``sim``) measured graph units, and
its axis and legend say so (:func:`stage_three_unit`).

A chart is built from plain dicts (:func:`series_parts` per series, then
:func:`training_figure`), which plotly.js takes as they are: the dashboard
keeps each series' parts until its run changes, so adding a run to a chart
computes that run alone, and no figure object validates thousands of points.
:func:`training_curves` wraps the same dict in a :class:`plotly.graph_objects.Figure`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.colors import qualitative

from ..runs import GREEDY_PERIODIC, STAGE_NAMES
from .style import format_number, format_numbers, time_axis, time_unit

__all__ = ["STAGE_SHORT", "SeriesParts", "series_parts", "stage_three_unit", "training_curves", "training_figure"]

STAGE_RGB = {"il": "31,119,180", "sim": "44,160,44", "real": "255,127,14"}
STAGE_SHORT = {"il": "I", "sim": "II", "real": "III"}
REAL = "real"
X_TITLES = {"episode": "episode", "seconds": "training wall-clock time (s)"}
REFERENCE_COLORS = ["#7f7f7f", "#9467bd", "#8c564b"]
KEY_COLOR = "#555555"
"""The legend key of a kind of greedy evaluation shared by several runs (each run's own points keep its color)."""
LABEL_PX = 6.6
"""Width of one character of a stage label (11 px font), for keeping the labels apart."""
PLOT_PX = 520
"""The plot's width assumed when stage labels are placed (a chart of the dashboard's two-column grid at 1400 px)."""
LABEL_ROW = 0.07
"""Height of a row of stage labels, as a share of the plot's height."""


def _spans(stage: np.ndarray, values: np.ndarray) -> list[tuple[str, float, float]]:
    """``(stage, first x, last x)`` of each run of consecutive rows of one ``stage`` (an array of names, x ``values``)."""
    if not len(stage):
        return []
    cuts = np.flatnonzero(stage[1:] != stage[:-1]) + 1
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


def _whole(values: np.ndarray) -> list[Any]:
    """``values`` as a list, whole numbers (episodes) written without a fraction."""
    if len(values) and np.all(values == np.floor(values)) and np.abs(values).max() < 2**53:
        return values.astype(np.int64).tolist()
    return values.tolist()


@dataclass
class SeriesParts:
    """What one series draws (:func:`series_parts`): its traces (plain dicts, x and y as lists), its stage spans, its
    ``x`` range, the Stage III units it puts on the right axis and its greedy evaluations' legend keys
    (``(name, periodic)``, drawn once per chart by :func:`training_figure` when the legend is shared)."""

    label: str
    traces: list[dict[str, Any]] = field(default_factory=list)
    spans: list[tuple[str, float, float]] = field(default_factory=list)
    low: float = np.inf
    high: float = -np.inf
    real_units: set[str] = field(default_factory=set)
    keys: list[tuple[str, bool]] = field(default_factory=list)


def series_parts(
    label: str,
    frame: pd.DataFrame,
    metric: str,
    x: str,
    window: int,
    color: str,
    greedy: pd.DataFrame | None = None,
    raw_points: int = MAX_RAW_POINTS,
    line_points: int = MAX_LINE_POINTS,
    shared_legend: bool = False,
) -> SeriesParts:
    """One series' raw points (at most ``raw_points``, :func:`extremes`; none for 0), rolling mean (at most ``line_points``) and
    greedy evaluations (``greedy``, makespan only) in ``color``. With ``shared_legend`` (a chart of several series) its
    greedy evaluations have no legend entry of their own: one key per kind stands for every series' (:func:`training_figure`).
    """
    parts = SeriesParts(label)
    if metric not in frame or x not in frame:
        return parts
    xs, ys = (frame[column].to_numpy(dtype=float, na_value=np.nan) for column in (x, metric))  # numpy: pandas cost more than the rest
    kept = ~(np.isnan(xs) | np.isnan(ys))
    if not kept.any():
        return parts
    stage = frame["stage"].fillna("?").to_numpy(dtype=object)[kept] if "stage" in frame else np.full(kept.sum(), "?", dtype=object)
    xs, ys = xs[kept], ys[kept]
    if np.any(np.diff(xs) < 0):
        order = np.argsort(xs, kind="stable")
        xs, ys, stage = xs[order], ys[order], stage[order]
    is_real = stage == REAL if "stage" in frame and metric == "makespan" else np.zeros(len(xs), bool)
    real_unit = "s"
    if "stage" in frame and "oracle" in frame and (stage == REAL).any():
        real_unit = stage_three_unit(frame.loc[kept, ["stage", "oracle"]])
    parts.spans = _spans(stage, xs) if "stage" in frame else []
    parts.low, parts.high = float(xs.min()), float(xs.max())
    for rows, axis, suffix in ((~is_real, "y", ""), (is_real, "y2", f" (Stage III, {real_unit})")):
        if not rows.any():
            continue
        if axis == "y2":
            parts.real_units.add(real_unit)
        part_x, part_y = xs[rows], ys[rows]
        if raw_points > 0:
            raw = extremes(part_y, raw_points)
            parts.traces.append(
                {
                    "type": "scattergl" if len(raw) > 2000 else "scatter",
                    "x": _whole(part_x[raw]),
                    "y": part_y[raw].tolist(),
                    "mode": "markers",
                    "name": f"{label}{suffix} (raw)",
                    "yaxis": axis,
                    "marker": {"color": color, "size": 4, "opacity": 0.3, "symbol": "circle" if axis == "y" else "triangle-up"},
                    "legendgroup": label,
                    "showlegend": False,
                    "customdata": format_numbers(part_y[raw]).tolist(),
                    "hovertemplate": f"{label}{suffix}<br>{x} %{{x:,.6~g}}<br>{metric} %{{customdata}}<extra></extra>",
                }
            )
        smooth = pd.Series(part_y).rolling(max(1, int(window)), min_periods=1).mean().to_numpy()
        step = _stride(len(part_y), max(1, line_points - 1))
        line_rows = np.unique(np.r_[np.arange(0, len(part_y), step), len(part_y) - 1])  # every step-th, and the last
        parts.traces.append(
            {
                "type": "scatter",
                "x": _whole(part_x[line_rows]),
                "y": smooth[line_rows].tolist(),
                "mode": "lines",
                "name": f"{label}{suffix}",
                "yaxis": axis,
                "line": {"color": color, "width": 2, "dash": "solid" if axis == "y" else "dot"},
                "legendgroup": label,
            }
        )
    if greedy is not None and not greedy.empty and metric == "makespan":
        _add_greedy(parts, label, greedy, x, color, real_unit, shared_legend)
    return parts


def _add_greedy(parts: SeriesParts, label: str, greedy: pd.DataFrame, x: str, color: str, real_unit: str, shared_legend: bool) -> None:
    """The series' greedy evaluations (periodic ones joined by a dotted line), Stage III's on the second axis."""
    measured = greedy["stage"].eq(REAL) if "stage" in greedy else pd.Series(False, index=greedy.index)
    for (what, real), points in greedy.groupby([greedy["what"], measured], sort=False):
        points = points.dropna(subset=[x, "makespan"]).sort_values(x)
        if real:
            parts.real_units.add(real_unit)
        periodic = what == GREEDY_PERIODIC
        kind = f"{what}" + (f" (Stage III, {real_unit})" if real else "")
        name = f"{label}: {kind}"
        if shared_legend:
            parts.keys.append((kind, periodic))
        parts.traces.append(
            {
                "type": "scatter",
                "x": points[x].tolist(),
                "y": points["makespan"].tolist(),
                "mode": "lines+markers" if periodic else "markers",
                "name": name,
                "yaxis": "y2" if real else "y",
                "legendgroup": f"greedy: {kind}" if shared_legend else label,
                "showlegend": not shared_legend,
                "line": {"color": color, "width": 1.5, "dash": "dot"},
                "marker": {"color": color, "symbol": "diamond", "size": 6 if periodic else 11, "line": {"color": "black", "width": 1}},
                "customdata": format_numbers(points["makespan"]).tolist(),
                "hovertemplate": f"{name}<br>{x} %{{x:,.6~g}}<br>greedy makespan %{{customdata}}<extra></extra>",
            }
        )


@functools.cache
def _template() -> dict[str, Any]:
    """The ``plotly_white`` template as plotly.js takes it (plotly.js knows no template names)."""
    template: dict[str, Any] = pio.templates["plotly_white"].to_plotly_json()
    return template


def _key_trace(kind: str, periodic: bool) -> dict[str, Any]:
    """A legend key for one kind of greedy evaluation of several runs: a click shows or hides every run's."""
    return {
        "type": "scatter",
        "x": [None],
        "y": [None],
        "mode": "lines+markers" if periodic else "markers",
        "name": f"{kind} (each run's color)",
        "legendgroup": f"greedy: {kind}",
        "line": {"color": KEY_COLOR, "width": 1.5, "dash": "dot"},
        "marker": {"color": KEY_COLOR, "symbol": "diamond", "size": 6 if periodic else 11, "line": {"color": "black", "width": 1}},
        "hoverinfo": "skip",
    }


def training_figure(
    parts: list[SeriesParts],
    metric: str = "makespan",
    references: Mapping[str, float] | None = None,
    title: str | None = None,
    x: str = "episode",
    graph: Any = None,
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``(figure dict, bands)``: the chart of ``parts`` (:func:`series_parts`), with ``references`` as dashed lines, the
    stages shaded (:func:`stage_bands`), the legend below; ``bands`` maps each series to where its last stage band
    and that band's label are (``band``, ``label``: indexes in the layout's shapes and annotations, ``x0``, ``right``:
    the label's span), so a caller can stretch them as the series grows."""
    if x not in X_TITLES:
        raise ValueError(f"x must be 'episode' or 'seconds', got {x!r}")
    drawn = [p for p in parts if p.traces]
    data = [trace for p in drawn for trace in p.traces]
    keys = list(dict.fromkeys(key for p in drawn for key in p.keys))
    data += [_key_trace(kind, periodic) for kind, periodic in keys]
    low = min((p.low for p in drawn), default=np.inf)
    high = max((p.high for p in drawn), default=-np.inf)
    for index, (label, value) in enumerate((references or {}).items()):
        data.append(
            {
                "type": "scatter",
                "x": [low, high] if np.isfinite(low) else [0, 1],
                "y": [value, value],
                "mode": "lines",
                "name": f"{label} {format_number(value)}",
                "line": {"color": REFERENCE_COLORS[index % 3], "dash": "dash"},
                "hovertemplate": f"{label} {format_number(value)}<extra></extra>",
            }
        )
    shapes, annotations, bands, top = stage_bands([(p.label, p.spans) for p in drawn], high - low if np.isfinite(high - low) else 0.0, x)
    real_units = set().union(*(p.real_units for p in drawn))
    names = [t["name"] for t in data if t.get("showlegend", True)]
    entries = _legend_rows(names)
    height = 360 + 22 * entries + (4 * len(drawn) if len(drawn) > 1 else 0)
    y_title = time_axis(graph, metric)["title"] if metric == "makespan" else metric
    layout: dict[str, Any] = {
        "height": height,
        "margin": {"l": 10, "r": 10, "t": 40 if title else 10, "b": 60 + 22 * entries},  # the legend below, never over the plot
        "template": _template(),
        "uirevision": f"curves-{metric}-{x}",
        "separators": ".,",
        "xaxis": {"title": {"text": X_TITLES[x]}},
        "yaxis": {"title": {"text": y_title}, "exponentformat": "power", "showexponent": "all", "domain": [0, top]},
        "legend": {"orientation": "h", "y": -0.15, "x": 0, "yanchor": "top"},
        "shapes": shapes,
        "annotations": annotations,
    }
    if title:
        layout["title"] = {"text": title}
    if real_units:
        layout["yaxis2"] = {
            "title": {"text": _stage_three_title(real_units, graph)},
            "overlaying": "y",
            "side": "right",
            "showgrid": False,
            "exponentformat": "power",
        }
    if not data:
        layout["annotations"] = [
            {"text": f"no {metric} values logged yet", "showarrow": False, "x": 0.5, "y": 0.5, "xref": "paper", "yref": "paper"}
        ]
    return {"data": data, "layout": layout}, bands


def _legend_rows(names: list[str]) -> int:
    """Rows of a horizontal legend of ``names`` across a :data:`PLOT_PX` plot (an entry is its text and a 40 px symbol)."""
    rows, used = 0, float(PLOT_PX)
    for name in names:
        width = 40 + LABEL_PX * len(name)
        if used + width > PLOT_PX:
            rows, used = rows + 1, 0
        used += width
    return rows


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
    small diamonds beside the sampled makespans, others as large diamonds; with
    several runs, one legend key per kind stands for every run's. With one run
    its stages shade the whole height; with several, each run gets its own thin
    band above the plot, and each stage is labelled once (:func:`stage_bands`).
    Stage III makespans (seconds) go on a right axis. Each run draws at most
    ``raw_points`` raw points per axis (:func:`extremes`) and ``line_points``
    points of its rolling mean.
    """
    runs = {"run": runs} if isinstance(runs, pd.DataFrame) else dict(runs)
    palette = qualitative.Plotly
    several = len(runs) > 1
    parts = [
        series_parts(
            label, frame, metric, x, window, palette[index % len(palette)], (greedy or {}).get(label), raw_points, line_points, several
        )
        for index, (label, frame) in enumerate(runs.items())
    ]
    figure, _bands = training_figure(parts, metric, references, title, x, graph)
    return go.Figure(figure)


def _label_width(text: str, width: float) -> float:
    """How much of the x axis (of ``width`` data units) a stage label of ``text`` takes, with a character's margin."""
    return (len(text) + 1) * LABEL_PX / PLOT_PX * width


def stage_bands(
    shaded: list[tuple[str, list[tuple[str, float, float]]]], width: float, x: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, dict[str, Any]], float]:
    """``(shapes, annotations, bands, top)``: the stage bands of each series (``(label, spans)``) and their labels, and the
    top of the plot's y domain.

    One series: its stages shade the whole height, each labelled at the top.
    Several: the plot ends at ``top``, and above it each series has a thin
    band of its own; each stage is labelled once, above the bands, over the
    spans of every series it covers that overlap (its hover names them).
    A label is the stage's full name where it fits, else its numeral (``I``,
    ``II``, ``III``), and a label that would still touch its left neighbour
    goes one row up: no two labels overlap (:data:`PLOT_PX` wide).
    """
    pad = 0.5 if x == "episode" else 0.0
    shapes: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    bands: dict[str, dict[str, Any]] = {}
    count = len(shaded)
    row = min(0.03, 0.2 / max(1, count))
    top = 1.0 if count < 2 else 1.0 - LABEL_ROW - row * count
    groups: list[dict[str, Any]] = []  # a label: its stage, left and right ends and the series under it
    for index, (label, spans) in enumerate(shaded):
        y0, y1 = (0.0, 1.0) if count < 2 else (top + row * (count - 1 - index), top + row * (count - index))
        for stage, first, last in spans:
            shapes.append(
                {
                    "type": "rect",
                    "xref": "x",
                    "yref": "paper",
                    "x0": first - pad,
                    "x1": last + pad,
                    "y0": y0,
                    "y1": y1,
                    "line": {"width": 0},
                    "layer": "below",
                    "fillcolor": f"rgba({STAGE_RGB.get(stage, '127,127,127')},{0.10 if count < 2 else 0.45})",
                }
            )
            group = next(
                (g for g in groups if count > 1 and g["stage"] == stage and first - pad <= g["right"] and last + pad >= g["left"]), None
            )
            if group is None:
                group = {"stage": stage, "left": first - pad, "right": last + pad, "series": []}
                groups.append(group)
            group["left"], group["right"] = min(group["left"], first - pad), max(group["right"], last + pad)
            group["series"].append(label)
            bands[label] = {"band": len(shapes) - 1, "group": groups.index(group)}
    placed: list[tuple[float, float, int]] = []  # (left, right, label row) of each label so far
    order = sorted(range(len(groups)), key=lambda i: (groups[i]["left"] + groups[i]["right"]) / 2)
    for index in order:
        group = groups[index]
        middle = (group["left"] + group["right"]) / 2
        name = STAGE_NAMES.get(group["stage"], group["stage"])
        text = name if _label_width(name, width) <= group["right"] - group["left"] else STAGE_SHORT.get(group["stage"], group["stage"])
        half = _label_width(text, width) / 2
        level = 0
        while any(lvl == level and left < middle + half and middle - half < right for left, right, lvl in placed):
            level += 1
        placed.append((middle - half, middle + half, level))
        runs = ", ".join(group["series"])
        annotations.append(
            {
                "x": middle,
                "y": 1.0 - 0.06 * level if count < 2 else top + row * count + LABEL_ROW / 2 + 0.06 * level,
                "xref": "x",
                "yref": "paper",
                "text": text,
                "hovertext": f"{name}: {runs}" if count > 1 else f"{group['series'][0]}: {name}",
                "showarrow": False,
                "yanchor": "top" if count < 2 else "middle",
                "font": {"size": 11, "color": "#444"},
            }
        )
        group["annotation"] = len(annotations) - 1
    for band in bands.values():
        group = groups[band.pop("group")]
        band.update(label=group["annotation"], x0=group["left"], right=group["right"])
    return shapes, annotations, bands, top
