"""The graph itself: ops in topological layers with the critical path, and its statistics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

from .style import CRITICAL, base_layout, device_color, format_numbers, time_unit
from .timeline import LARGE_GRAPH, op_names

if TYPE_CHECKING:
    from ..graph import DataflowGraph

__all__ = ["graph_frame", "graph_figure", "graph_statistics"]


def _layered_positions(graph: DataflowGraph) -> tuple[np.ndarray, np.ndarray]:
    """x = topological depth, y = position in the layer ordered by the parents' mean y (fewer crossings)."""
    depth = np.asarray(graph.depth)
    y = np.zeros(graph.num_nodes)
    ptr, pred, _ = graph.pred_csr
    for level in range(int(depth.max(initial=-1)) + 1):
        ops = np.flatnonzero(depth == level)
        keys = [y[pred[ptr[v] : ptr[v + 1]]].mean() if ptr[v + 1] > ptr[v] else float(v) for v in ops]
        ranked = ops[np.argsort(keys, kind="stable")]
        y[ranked] = np.arange(ranked.size) - (ranked.size - 1) / 2
    return depth.astype(float), y


def graph_frame(graph: DataflowGraph, assignment: Sequence[int] | None = None) -> pd.DataFrame:
    """One row per op: name, type, compute, depth, bottom level, on the critical path, device."""
    critical = np.zeros(graph.num_nodes, dtype=bool)
    critical[graph.critical_path(with_comm=True)] = True
    frame = pd.DataFrame(
        {
            "op": np.arange(graph.num_nodes),
            "name": op_names(graph, graph.num_nodes),
            "op_type": list(graph.op_types) if graph.op_types is not None else [""] * graph.num_nodes,
            "compute": graph.compute,
            "depth": graph.depth,
            "bottom_level": graph.bottom_level(with_comm=True),
            "critical": critical,
        }
    )
    if assignment is not None:
        frame["device"] = np.asarray(assignment)
    return frame


def graph_figure(
    graph: DataflowGraph,
    color_by: str = "compute",
    assignment: Sequence[int] | None = None,
    title: str | None = None,
    large_threshold: int = LARGE_GRAPH // 2,
) -> go.Figure:
    """The graph drawn in layers (x = topological depth); ops colored by ``compute``, ``device`` or ``op_type``.

    The critical path (compute + communication) is drawn in black. Past
    ``large_threshold`` ops, nodes and edges are drawn with WebGL.
    """
    if color_by == "device" and assignment is None:
        raise ValueError("color_by='device' needs an assignment")
    if color_by not in ("compute", "device", "op_type"):
        raise ValueError(f"color_by must be 'compute', 'device' or 'op_type', got {color_by!r}")
    frame = graph_frame(graph, assignment)
    x, y = _layered_positions(graph)
    large = graph.num_nodes > large_threshold
    scatter = go.Scattergl if large else go.Scatter
    fig = go.Figure()
    path = graph.critical_path(with_comm=True)
    on_path = set(zip(path[:-1], path[1:], strict=False))
    for name, keep, style in (
        ("edges", False, dict(color="rgba(120,120,120,0.35)", width=0.7)),
        ("critical path", True, dict(color=CRITICAL, width=2.5)),
    ):
        edges = [(s, d) for s, d in zip(graph.src.tolist(), graph.dst.tolist(), strict=False) if ((s, d) in on_path) == keep]
        ex = np.full(3 * len(edges), np.nan)
        ey = np.full(3 * len(edges), np.nan)
        if edges:
            s, d = np.array(edges).T
            ex[0::3], ex[1::3], ey[0::3], ey[1::3] = x[s], x[d], y[s], y[d]
        fig.add_trace(scatter(x=ex, y=ey, mode="lines", line=style, hoverinfo="skip", name=name, connectgaps=False))
    custom = frame[["op", "name", "compute", "depth", "bottom_level", "op_type"]].to_numpy(dtype=object)
    custom[:, 2], custom[:, 4] = format_numbers(custom[:, 2]), format_numbers(custom[:, 4])
    hover = (
        "<b>%{customdata[1]}</b> (op %{customdata[0]})<br>compute %{customdata[2]}<br>depth %{customdata[3]}"
        "<br>bottom level %{customdata[4]}<br>%{customdata[5]}<extra></extra>"
    )
    outline = dict(color=np.where(frame["critical"], CRITICAL, "white").tolist(), width=np.where(frame["critical"], 2, 0.5).tolist())
    size = 6 if large else 10
    if color_by == "compute":
        marker = dict(
            color=frame["compute"],
            colorscale="Viridis",
            showscale=True,
            colorbar=dict(title=f"compute<br>({time_unit(graph)})", exponentformat="power"),
            size=size,
            line=outline,
        )
        fig.add_trace(scatter(x=x, y=y, mode="markers", marker=marker, customdata=custom, hovertemplate=hover, name="ops"))
    else:
        column = "device" if color_by == "device" else "op_type"
        for index, (value, rows) in enumerate(frame.groupby(column, sort=True).groups.items()):
            rows = np.asarray(rows)
            color = device_color(int(value)) if color_by == "device" else qualitative.Alphabet[index % len(qualitative.Alphabet)]
            label = f"device {value}" if color_by == "device" else (value or "untyped")
            line = dict(color=[outline["color"][r] for r in rows], width=[outline["width"][r] for r in rows])
            fig.add_trace(
                scatter(
                    x=x[rows],
                    y=y[rows],
                    mode="markers",
                    marker=dict(color=color, size=size, line=line),
                    customdata=custom[rows],
                    hovertemplate=hover,
                    name=str(label),
                )
            )
    fig.update_xaxes(title="topological depth", showgrid=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(legend=dict(orientation="h", y=-0.15, x=0))
    return base_layout(fig, title, 560)


def graph_statistics(graph: DataflowGraph, devices: int = 4) -> dict[str, Any]:
    """Size, shape and cost figures of a graph, and the makespan lower bound on ``devices``."""
    from ..sim import lower_bound

    depth = np.asarray(graph.depth)
    width = np.bincount(depth).max() if depth.size else 0
    total_compute, total_comm = graph.total_compute, graph.total_comm
    return {
        "ops": graph.num_nodes,
        "edges": graph.num_edges,
        "depth (layers)": int(depth.max(initial=-1)) + 1,
        "max width": int(width),
        "entry ops": int((graph.in_degree == 0).sum()),
        "exit ops": int((graph.out_degree == 0).sum()),
        "total compute": total_compute,
        "total communication": total_comm,
        "communication / compute": total_comm / total_compute if total_compute else float("nan"),
        "longest path (compute)": graph.longest_path(with_comm=False),
        "longest path (with communication)": graph.longest_path(with_comm=True),
        "critical path ops": len(graph.critical_path(with_comm=True)),
        f"lower bound on {devices} devices": lower_bound(graph, devices),
    }
