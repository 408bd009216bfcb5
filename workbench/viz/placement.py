"""Placements: the ops × devices heatmap, makespans per method, and the diff of two placements."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .style import CRITICAL, HIGHLIGHT, base_layout, device_color, format_time, method_color, time_axis
from .timeline import op_names

if TYPE_CHECKING:
    from ..graph import DataflowGraph

__all__ = [
    "heatmap_frame",
    "placement_heatmap",
    "heatmap_highlight",
    "makespan_frame",
    "makespan_bars",
    "diff_frame",
    "diff_heatmap",
    "short_label",
]


def heatmap_frame(graph: DataflowGraph, assignment: Sequence[int]) -> pd.DataFrame:
    """One row per op in topological order: position, op, name, device."""
    order = np.asarray(graph.topological_order)
    names = op_names(graph, graph.num_nodes)
    return pd.DataFrame(
        {"position": np.arange(order.size), "op": order, "name": [names[i] for i in order], "device": np.asarray(assignment)[order]}
    )


def placement_heatmap(graph: DataflowGraph, assignment: Sequence[int], devices: int, title: str | None = None) -> go.Figure:
    """Ops (x, in topological order) × devices (y): a cell in the device's color where the op runs."""
    frame = heatmap_frame(graph, assignment)
    n = len(frame)
    z = np.full((devices, n), np.nan)
    z[frame["device"].to_numpy(), frame["position"].to_numpy()] = frame["device"].to_numpy()
    op_ids = np.tile(frame["op"].to_numpy(), (devices, 1))
    names = np.tile(frame["name"].to_numpy(dtype=object), (devices, 1))
    custom = np.dstack([op_ids, names])
    colors = [device_color(d) for d in range(devices)]
    scale = [[bound, colors[d]] for d in range(devices) for bound in (d / devices, (d + 1) / devices)]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=frame["position"],
            y=list(range(devices)),
            zmin=-0.5,
            zmax=devices - 0.5,
            colorscale=scale,
            showscale=False,
            customdata=custom,
            xgap=0 if n > 300 else 1,
            ygap=2,
            hovertemplate="<b>%{customdata[1]}</b> (op %{customdata[0]})<br>position %{x} in topological order<br>device %{y}"
            "<extra></extra>",
        )
    )
    fig.update_yaxes(tickvals=list(range(devices)), ticktext=[f"dev {d}" for d in range(devices)], autorange="reversed")
    fig.update_xaxes(title="ops in topological order", dtick=1 if n <= 40 else None)
    return base_layout(fig, title, 90 + 28 * devices)


def heatmap_highlight(graph: DataflowGraph, op: int | Sequence[int] | None, devices: int) -> list[dict[str, Any]]:
    """Column outlines marking ``op`` (or several ops) in a placement heatmap (empty for ``None``)."""
    ops = [] if op is None else [op] if isinstance(op, (int, np.integer)) else list(op)
    position = np.empty(graph.num_nodes, dtype=int)
    position[np.asarray(graph.topological_order)] = np.arange(graph.num_nodes)
    return [
        dict(type="rect", x0=position[o] - 0.5, x1=position[o] + 0.5, y0=-0.5, y1=devices - 0.5, line=dict(color=HIGHLIGHT, width=2))
        for o in ops
        if 0 <= o < graph.num_nodes
    ]


def makespan_frame(placements: Mapping[str, Any] | Sequence[Any], lower_bound: float | None = None) -> pd.DataFrame:
    """One row per method: makespan, gap to the lower bound, seconds."""
    rows = []
    items = placements.items() if isinstance(placements, Mapping) else ((p.method, p) for p in placements)
    for label, value in items:
        makespan = float(value.makespan) if hasattr(value, "makespan") else float(value)
        seconds = getattr(value, "seconds", None)
        gap = makespan / lower_bound - 1 if lower_bound else None
        rows.append({"method": label, "makespan": makespan, "lower_bound": lower_bound, "gap": gap, "seconds": seconds})
    return pd.DataFrame(rows, columns=["method", "makespan", "lower_bound", "gap", "seconds"])


LABEL_CHARS = 48
"""A bar's label is cut to this many characters (the full one shows on hover), so a long label cannot squeeze the chart."""


def short_label(text: str, limit: int = LABEL_CHARS) -> str:
    """``text``, or its first ``limit - 1`` characters and an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def makespan_bars(
    placements: Mapping[str, Any] | Sequence[Any], lower_bound: float | None = None, title: str | None = None, graph: Any = None
) -> go.Figure:
    """Makespan per method as horizontal bars (``{label: Placement or number}`` or Placements), the lower bound as a line.

    One row per method, so labels stay readable with many methods (long ones
    cut to :data:`LABEL_CHARS`); each bar in its method's color
    (:func:`~workbench.viz.style.method_color`), the best outlined and named
    in the legend; values beside the bars, clear of the lower-bound line.
    ``graph`` gives the time unit (and the paper's ÷1e10 for paper graphs).
    """
    frame = makespan_frame(placements, lower_bound)
    gaps = zip(frame["makespan"], frame["gap"], strict=True)
    text = [format_time(m, graph) + (f"  (+{g:.1%})" if g is not None else "") for m, g in gaps]
    best = frame["makespan"].min() if len(frame) else 0.0
    is_best = (frame["makespan"] <= best).to_numpy()
    labels: list[str] = []
    for method in frame["method"]:  # cut labels stay distinct rows
        label = short_label(str(method))
        labels.append(label if label not in labels else f"{label} #{len(labels) + 1}")
    fig = go.Figure(
        go.Bar(
            y=labels,
            x=frame["makespan"],
            orientation="h",
            text=text,
            textposition="outside",
            cliponaxis=False,
            marker=dict(
                color=[method_color(str(m)) for m in frame["method"]],
                line=dict(color=["black" if b else "rgba(0,0,0,0)" for b in is_best], width=3),
            ),
            customdata=np.stack([frame["method"].astype(str), text], axis=1) if len(frame) else None,
            hovertemplate="%{customdata[0]}<br>makespan %{customdata[1]}<extra></extra>",
            name="makespan",
            showlegend=False,
        )
    )
    if lower_bound:
        fig.add_trace(
            go.Scatter(
                x=[lower_bound] * len(frame),
                y=labels,
                mode="lines",
                line=dict(color="black", dash="dash"),
                name=f"lower bound {format_time(lower_bound, graph)}",
                hovertemplate=f"lower bound {format_time(lower_bound, graph)}<extra></extra>",
            )
        )
    if len(frame):
        fig.add_trace(  # a legend entry for the outline (the bars' colors name their methods already)
            go.Bar(
                y=[labels[int(np.argmax(is_best))]],
                x=[None],
                orientation="h",
                marker=dict(color="rgba(0,0,0,0)", line=dict(color="black", width=3)),
                name="best makespan (outlined)",
                hoverinfo="skip",
            )
        )
    longest = float(frame["makespan"].max()) if len(frame) else 1.0
    fig.update_xaxes(range=[0, longest * 1.45], **time_axis(graph, "makespan"))  # room for the values beside the bars
    fig.update_yaxes(autorange="reversed", automargin=True)
    fig.update_layout(
        barmode="overlay",
        legend=dict(orientation="h", y=1.0, x=1.0, xanchor="right", yanchor="bottom"),
        uniformtext=dict(minsize=11, mode="show"),
    )
    return base_layout(fig, title, 110 + 30 * max(len(frame), 2))


def diff_frame(
    graph: DataflowGraph | None,
    first: Sequence[int],
    second: Sequence[int],
    first_path: Sequence[int] = (),
    second_path: Sequence[int] = (),
) -> pd.DataFrame:
    """One row per op: its device in each placement, whether it moved, whether it is on each critical path."""
    a, b = np.asarray(first), np.asarray(second)
    on_first, on_second = np.zeros(a.size, np.bool_), np.zeros(a.size, np.bool_)
    on_first[list(first_path)] = True
    on_second[list(second_path)] = True
    return pd.DataFrame(
        {
            "op": np.arange(a.size),
            "name": op_names(graph, a.size),
            "device_a": a,
            "device_b": b,
            "moved": a != b,
            "critical_a": on_first,
            "critical_b": on_second,
        }
    )


DIFF_COLORS = ("#1f4e9c", "#e08a00")
"""A's and B's markers in the diff: one color per side (the row already says the device), so A and B never look alike."""


def diff_heatmap(
    graph: DataflowGraph, frame: pd.DataFrame, devices: int, labels: tuple[str, str] = ("A", "B"), title: str | None = None
) -> go.Figure:
    """Ops in topological order: where A and B put each op (A above B in each device's row, each side in its own color,
    :data:`DIFF_COLORS`), moved ops and each critical path marked."""
    position = np.empty(len(frame), dtype=int)
    position[np.asarray(graph.topological_order)] = np.arange(len(frame))
    fig = go.Figure()
    sides = (("device_a", labels[0], -0.18, "critical_a", DIFF_COLORS[0]), ("device_b", labels[1], 0.18, "critical_b", DIFF_COLORS[1]))
    for column, label, offset, critical, color in sides:
        custom = frame[["op", "name", "device_a", "device_b"]].to_numpy(dtype=object)
        fig.add_trace(
            go.Scatter(
                x=position,
                y=frame[column] + offset,
                mode="markers",
                name=label,
                marker=dict(
                    symbol="square",
                    size=7,
                    color=color,
                    line=dict(color=np.where(frame[critical], CRITICAL, "rgba(0,0,0,0)").tolist(), width=2),
                ),
                customdata=custom,
                hovertemplate=f"{label}: "
                + "<b>%{customdata[1]}</b> (op %{customdata[0]})<br>device %{customdata[2]} → %{customdata[3]}<extra></extra>",
            )
        )
    moved = frame[frame["moved"]]
    xs, ys = [], []
    for _, row in moved.iterrows():
        xs += [position[row["op"]], position[row["op"]], None]
        ys += [row["device_a"] - 0.18, row["device_b"] + 0.18, None]
    fig.add_trace(
        go.Scatter(
            x=xs, y=ys, mode="lines", line=dict(color="rgba(80,80,80,0.5)", width=1), name=f"{len(moved)} ops moved", hoverinfo="skip"
        )
    )
    fig.update_yaxes(tickvals=list(range(devices)), ticktext=[f"dev {d}" for d in range(devices)], autorange="reversed")
    fig.update_xaxes(title="ops in topological order (black outline: on that placement's critical path)")
    fig.update_layout(legend=dict(orientation="h", y=1.0, x=1.0, xanchor="right", yanchor="bottom"))
    return base_layout(fig, title, 140 + 40 * devices)
