"""Plain figure builders: plotly figures from graphs, traces, placements and training metrics.

The dashboard's pages draw with these, and notebooks can import them
directly (``from workbench.dashboard.figures import gantt_figure``). Each
``*_figure`` has a ``*_frame`` twin (or takes a frame) giving the data behind
the chart, which the dashboard offers as CSV. Times are in the graph's own
unit. Ops are identified by their index in ``customdata[0]`` of every point,
so a click on any chart names the op.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

__all__ = [
    "LARGE_GRAPH",
    "device_color",
    "gantt_figure",
    "gantt_frame",
    "gantt_highlight",
    "placement_heatmap",
    "heatmap_frame",
    "heatmap_highlight",
    "makespan_bars",
    "makespan_frame",
    "training_curves",
    "graph_figure",
    "graph_frame",
    "graph_statistics",
    "calibration_scatter",
    "message_figure",
    "to_png",
]

LARGE_GRAPH = 1000
"""Past this many ops, Gantt bars are drawn as WebGL segments (graph views switch at half of it)."""

HIGHLIGHT = "#d62728"
STAGE_COLORS = {"il": "rgba(31,119,180,0.08)", "sim": "rgba(44,160,44,0.08)", "real": "rgba(255,127,14,0.10)"}
STAGE_NAMES = {"il": "Stage I: imitation", "sim": "Stage II: simulator RL", "real": "Stage III: real system"}


def device_color(device: int) -> str:
    """A fixed color per device id."""
    palette = qualitative.Plotly + qualitative.D3
    return palette[int(device) % len(palette)]


def _names(graph, count: int) -> list[str]:
    if graph is not None and graph.names is not None:
        return list(graph.names)
    return [f"op{i}" for i in range(count)]


def _base_layout(fig: go.Figure, title: str | None, height: int, uirevision: str | None = None) -> go.Figure:
    """Shared look; ``uirevision`` keeps the user's zoom across redraws of the same kind of chart."""
    fig.update_layout(
        title=title,
        height=height,
        margin=dict(l=10, r=10, t=40 if title else 10, b=40),
        template="plotly_white",
        uirevision=uirevision,
    )
    return fig


# ----------------------------------------------------------------- Gantt
def gantt_frame(graph, trace) -> pd.DataFrame:
    """One row per op: device, ready, start, end, duration, wait, compute cost."""
    frame = trace.to_frame("ops")
    frame["name"] = _names(graph, trace.num_ops)
    frame["compute"] = graph.compute if graph is not None else frame["duration"]
    return frame


def gantt_figure(graph, trace, title: str | None = None, devices: int | None = None, large_threshold: int = LARGE_GRAPH) -> go.Figure:
    """Device timelines: one row per device, one bar per op, transfers between rows, idle in grey.

    Ops too short to see (under 0.2% of the makespan) also get a tick mark.

    ``graph`` gives op names and compute costs for the hover (``None``: names
    ``op<i>`` and costs from the trace). ``devices`` rows are drawn (default:
    up to the highest device used), so unused devices show as idle rows. Bars are ``go.Bar(base=start,
    x=duration, orientation="h")`` on a numeric time axis; past
    ``large_threshold`` ops they become WebGL line segments and transfers
    start hidden (click their legend entry to show them).
    """
    frame = gantt_frame(graph, trace)
    devices = max(int(devices or 1), int(frame["device"].max()) + 1 if len(frame) else 1)
    makespan = trace.makespan
    busy = frame.groupby("device")["duration"].sum().reindex(range(devices), fill_value=0.0)
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            name="idle",
            y=list(range(devices)),
            x=[makespan] * devices,
            base=[0.0] * devices,
            orientation="h",
            marker=dict(color="rgba(0,0,0,0.06)", line=dict(width=0)),
            width=0.9,
            hoverinfo="skip",
            showlegend=False,
        )
    )
    custom = frame[["op", "name", "compute", "ready", "start", "end", "wait", "device"]].to_numpy(dtype=object)
    hover = (
        "<b>%{customdata[1]}</b> (op %{customdata[0]}) on device %{customdata[7]}<br>compute %{customdata[2]:.6g}"
        "<br>ready %{customdata[3]:.6g}<br>start %{customdata[4]:.6g}<br>end %{customdata[5]:.6g}"
        "<br>waited %{customdata[6]:.6g}<extra></extra>"
    )
    large = len(frame) > large_threshold
    for device in range(devices):
        rows = frame["device"].to_numpy() == device
        if large:
            fig.add_trace(_segments(frame[rows], custom[rows], device, hover))
        else:
            fig.add_trace(
                go.Bar(
                    name=f"device {device}",
                    y=frame.loc[rows, "device"],
                    x=frame.loc[rows, "duration"],
                    base=frame.loc[rows, "start"],
                    orientation="h",
                    width=0.7,
                    marker=dict(color=device_color(device), line=dict(width=0.5, color="white")),
                    customdata=custom[rows],
                    hovertemplate=hover,
                    showlegend=False,
                )
            )
    tiny = frame["duration"].to_numpy() < 0.002 * makespan
    if tiny.any():
        fig.add_trace((go.Scattergl if large else go.Scatter)(
            name="short ops", x=frame.loc[tiny, "start"], y=frame.loc[tiny, "device"], mode="markers",
            marker=dict(symbol="line-ns-open", size=16, line=dict(width=2), color=[device_color(d) for d in frame.loc[tiny, "device"]]),
            customdata=custom[tiny], hovertemplate=hover, showlegend=False,
        ))  # fmt: skip
    fig.add_trace(_transfer_lines(trace, large))
    labels = [f"dev {d}<br>{busy[d] / makespan:.0%} busy" if makespan > 0 else f"dev {d}" for d in range(devices)]
    fig.update_layout(barmode="overlay", bargap=0.1, hovermode="closest", legend=dict(orientation="h", x=1, xanchor="right", y=1, yanchor="bottom"))
    fig.update_yaxes(tickvals=list(range(devices)), ticktext=labels, autorange="reversed", range=None, title=None)
    fig.update_xaxes(title="time", range=[0, makespan * 1.01 if makespan > 0 else 1], zeroline=False)
    return _base_layout(fig, title, 120 + 45 * devices, uirevision=f"gantt-{devices}")


def _segments(rows: pd.DataFrame, custom: np.ndarray, device: int, hover: str) -> go.Scattergl:
    """Ops of one device as thick WebGL line segments (start→end), with a hover at both ends."""
    count = len(rows)
    xs = np.full(3 * count, np.nan)
    xs[0::3], xs[1::3] = rows["start"].to_numpy(), rows["end"].to_numpy()
    ys = np.full(3 * count, np.nan)
    ys[0::3] = ys[1::3] = device
    data = np.empty((3 * count, custom.shape[1]), dtype=object)
    data[0::3], data[1::3], data[2::3] = custom, custom, None
    return go.Scattergl(
        name=f"device {device}",
        x=xs,
        y=ys,
        mode="lines",
        line=dict(color=device_color(device), width=14),
        customdata=data,
        hovertemplate=hover,
        connectgaps=False,
        showlegend=False,
    )


def _transfer_lines(trace, large: bool):
    count = trace.transfer_start.size
    xs = np.full(3 * count, np.nan)
    ys = np.full(3 * count, np.nan)
    xs[0::3], xs[1::3] = trace.transfer_start, trace.transfer_end
    ys[0::3], ys[1::3] = trace.transfer_src_device, trace.transfer_dst_device
    kind = go.Scattergl if large else go.Scatter
    return kind(
        name=f"{count} transfers",
        visible="legendonly" if large else True,
        x=xs,
        y=ys,
        mode="lines",
        line=dict(color="rgba(80,80,80,0.35)", width=1),
        hoverinfo="skip",
        connectgaps=False,
        showlegend=True,
    )


def gantt_highlight(trace, op: int | None) -> list[dict[str, Any]]:
    """Layout shapes outlining ``op``'s bar and its transfers in a Gantt chart (empty for ``None``)."""
    if op is None or not 0 <= op < trace.num_ops:
        return []
    device = int(trace.device[op])
    shapes = [
        dict(type="rect", x0=float(trace.start[op]), x1=float(trace.end[op]), y0=device - 0.45, y1=device + 0.45,
             line=dict(color=HIGHLIGHT, width=3), fillcolor="rgba(214,39,40,0.25)"),
        dict(type="line", x0=float(trace.start[op]), x1=float(trace.start[op]), y0=-0.5, y1=int(trace.device.max()) + 0.5,
             line=dict(color=HIGHLIGHT, width=1, dash="dot")),
    ]  # fmt: skip
    touching = np.flatnonzero((trace.transfer_src_op == op) | (trace.transfer_dst_op == op))
    for k in touching:
        shapes.append(dict(type="line", x0=float(trace.transfer_start[k]), x1=float(trace.transfer_end[k]),
                           y0=int(trace.transfer_src_device[k]), y1=int(trace.transfer_dst_device[k]),
                           line=dict(color=HIGHLIGHT, width=2)))  # fmt: skip
    return shapes


# --------------------------------------------------------------- heatmap
def heatmap_frame(graph, assignment: Sequence[int]) -> pd.DataFrame:
    """One row per op in topological order: position, op, name, device."""
    order = np.asarray(graph.topological_order)
    assignment = np.asarray(assignment)
    names = _names(graph, graph.num_nodes)
    return pd.DataFrame({"position": np.arange(order.size), "op": order, "name": [names[i] for i in order], "device": assignment[order]})


def placement_heatmap(graph, assignment: Sequence[int], devices: int, title: str | None = None) -> go.Figure:
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
            hovertemplate="<b>%{customdata[1]}</b> (op %{customdata[0]})<br>position %{x} in topological order<br>device %{y}<extra></extra>",
            xgap=0 if n > 300 else 1,
            ygap=2,
        )
    )
    fig.update_yaxes(tickvals=list(range(devices)), ticktext=[f"dev {d}" for d in range(devices)], autorange="reversed")
    fig.update_xaxes(title="ops in topological order", dtick=1 if n <= 40 else None)
    return _base_layout(fig, title, 90 + 28 * devices)


def heatmap_highlight(graph, op: int | None, devices: int) -> list[dict[str, Any]]:
    """A column outline marking ``op`` in a placement heatmap (empty for ``None``)."""
    if op is None or not 0 <= op < graph.num_nodes:
        return []
    position = int(np.flatnonzero(np.asarray(graph.topological_order) == op)[0])
    return [dict(type="rect", x0=position - 0.5, x1=position + 0.5, y0=-0.5, y1=devices - 0.5, line=dict(color=HIGHLIGHT, width=2))]


# -------------------------------------------------------- makespan bars
def makespan_frame(placements: Mapping[str, Any] | Sequence[Any], lower_bound: float | None = None) -> pd.DataFrame:
    """One row per method: makespan, gap to the lower bound, seconds."""
    rows = []
    items = placements.items() if isinstance(placements, Mapping) else ((p.method, p) for p in placements)
    for label, value in items:
        makespan = float(getattr(value, "makespan", value))
        seconds = getattr(value, "seconds", None)
        gap = makespan / lower_bound - 1 if lower_bound else None
        rows.append({"method": label, "makespan": makespan, "lower_bound": lower_bound, "gap": gap, "seconds": seconds})
    return pd.DataFrame(rows, columns=["method", "makespan", "lower_bound", "gap", "seconds"])


def makespan_bars(placements: Mapping[str, Any] | Sequence[Any], lower_bound: float | None = None, title: str | None = None) -> go.Figure:
    """Makespan per method (``{label: Placement or number}`` or Placements), the lower bound as a line."""
    frame = makespan_frame(placements, lower_bound)
    text = [f"{m:.4g}" + (f" (+{g:.1%})" if g is not None else "") for m, g in zip(frame["makespan"], frame["gap"])]
    fig = go.Figure(
        go.Bar(
            x=frame["method"],
            y=frame["makespan"],
            text=text,
            textposition="outside",
            marker_color=["#1f77b4" if m > frame["makespan"].min() else "#2ca02c" for m in frame["makespan"]],
            hovertemplate="%{x}<br>makespan %{y:.6g}<extra></extra>",
            name="makespan",
        )
    )
    if lower_bound:
        fig.add_trace(
            go.Scatter(
                x=list(frame["method"]),
                y=[lower_bound] * len(frame),
                mode="lines",
                line=dict(color="black", dash="dash"),
                name=f"lower bound {lower_bound:.4g}",
                hovertemplate="lower bound %{y:.6g}<extra></extra>",
            )
        )
    fig.update_yaxes(title="makespan", rangemode="tozero")
    fig.update_layout(legend=dict(orientation="h", y=1.0, x=1.0, xanchor="right", yanchor="bottom"))
    return _base_layout(fig, title, 340)


# --------------------------------------------------------- training curves
def training_curves(
    runs: Mapping[str, pd.DataFrame] | pd.DataFrame,
    metric: str = "makespan",
    references: Mapping[str, float] | None = None,
    window: int = 25,
    title: str | None = None,
) -> go.Figure:
    """``metric`` per episode for each run (raw points + a rolling mean), stages shaded, reference lines.

    ``runs`` maps a label to a ``metrics.csv`` frame (``stage``, ``episode``
    and the metric's column); a single frame is labelled ``run``.
    """
    runs = {"run": runs} if isinstance(runs, pd.DataFrame) else dict(runs)
    fig = go.Figure()
    palette = qualitative.Plotly
    spans: dict[str, tuple[float, float]] = {}
    for index, (label, frame) in enumerate(runs.items()):
        if metric not in frame or frame[metric].dropna().empty:
            continue
        data = frame[["episode", metric] + (["stage"] if "stage" in frame else [])].dropna(subset=["episode", metric]).sort_values("episode")
        color = palette[index % len(palette)]
        big = len(data) > 2000
        fig.add_trace(
            (go.Scattergl if big else go.Scatter)(
                x=data["episode"], y=data[metric], mode="markers", name=f"{label} (raw)",
                marker=dict(color=color, size=4, opacity=0.3), legendgroup=label, showlegend=False,
                hovertemplate=f"{label}<br>episode %{{x}}<br>{metric} %{{y:.6g}}<extra></extra>",
            )
        )  # fmt: skip
        smooth = data[metric].rolling(max(1, int(window)), min_periods=1).mean()
        fig.add_trace(go.Scatter(x=data["episode"], y=smooth, mode="lines", name=label, line=dict(color=color, width=2), legendgroup=label))
        if "stage" in data:
            for stage, episodes in data.groupby("stage", sort=False)["episode"]:
                low, high = spans.get(stage, (np.inf, -np.inf))
                spans[stage] = (min(low, episodes.min()), max(high, episodes.max()))
    for stage, (low, high) in sorted(spans.items(), key=lambda item: item[1][0]):
        fig.add_vrect(x0=low - 0.5, x1=high + 0.5, fillcolor=STAGE_COLORS.get(stage, "rgba(127,127,127,0.08)"), line_width=0,
                      layer="below", annotation_text=STAGE_NAMES.get(stage, stage), annotation_position="top left")  # fmt: skip
    for index, (label, value) in enumerate((references or {}).items()):
        fig.add_hline(y=value, line=dict(color=["#7f7f7f", "#9467bd", "#8c564b"][index % 3], dash="dash"),
                      annotation_text=f"{label} {value:.4g}", annotation_position="bottom right")  # fmt: skip
    fig.update_xaxes(title="episode")
    fig.update_yaxes(title=metric)
    fig.update_layout(legend=dict(orientation="h", y=-0.2, x=0))
    if not fig.data:
        fig.add_annotation(text=f"no {metric} values logged yet", showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    return _base_layout(fig, title, 380, uirevision=f"curves-{metric}")


# ------------------------------------------------------------ graph view
def _layered_positions(graph) -> tuple[np.ndarray, np.ndarray]:
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


def graph_frame(graph, assignment: Sequence[int] | None = None) -> pd.DataFrame:
    """One row per op: name, type, compute, depth, bottom level, on the critical path, device."""
    critical = np.zeros(graph.num_nodes, dtype=bool)
    critical[graph.critical_path(with_comm=True)] = True
    frame = pd.DataFrame(
        {
            "op": np.arange(graph.num_nodes),
            "name": _names(graph, graph.num_nodes),
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
    graph, color_by: str = "compute", assignment: Sequence[int] | None = None, title: str | None = None, large_threshold: int = LARGE_GRAPH // 2
) -> go.Figure:
    """The graph drawn in layers (x = topological depth); ops colored by ``compute``, ``device`` or ``op_type``.

    The critical path (compute + communication) is drawn in red. Past
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
    on_path = set(zip(path[:-1], path[1:]))
    for name, keep, style in (("edges", False, dict(color="rgba(120,120,120,0.35)", width=0.7)),
                              ("critical path", True, dict(color=HIGHLIGHT, width=2.5))):  # fmt: skip
        edges = [(s, d) for s, d in zip(graph.src.tolist(), graph.dst.tolist()) if ((s, d) in on_path) == keep]
        ex = np.full(3 * len(edges), np.nan)
        ey = np.full(3 * len(edges), np.nan)
        if edges:
            s, d = np.array(edges).T
            ex[0::3], ex[1::3], ey[0::3], ey[1::3] = x[s], x[d], y[s], y[d]
        fig.add_trace(scatter(x=ex, y=ey, mode="lines", line=style, hoverinfo="skip", name=name, connectgaps=False))
    custom = frame[["op", "name", "compute", "depth", "bottom_level", "op_type"]].to_numpy(dtype=object)
    hover = "<b>%{customdata[1]}</b> (op %{customdata[0]})<br>compute %{customdata[2]:.6g}<br>depth %{customdata[3]}<br>bottom level %{customdata[4]:.6g}<br>%{customdata[5]}<extra></extra>"
    outline = dict(color=np.where(frame["critical"], HIGHLIGHT, "white").tolist(), width=np.where(frame["critical"], 2, 0.5).tolist())
    size = 6 if large else 10
    if color_by == "compute":
        marker = dict(color=frame["compute"], colorscale="Viridis", showscale=True, colorbar=dict(title="compute"), size=size, line=outline)
        fig.add_trace(scatter(x=x, y=y, mode="markers", marker=marker, customdata=custom, hovertemplate=hover, name="ops"))
    else:
        column = "device" if color_by == "device" else "op_type"
        for index, (value, rows) in enumerate(frame.groupby(column, sort=True).groups.items()):
            rows = np.asarray(rows)
            color = device_color(int(value)) if color_by == "device" else qualitative.Alphabet[index % len(qualitative.Alphabet)]
            label = f"device {value}" if color_by == "device" else (value or "untyped")
            line = dict(color=[outline["color"][r] for r in rows], width=[outline["width"][r] for r in rows])
            fig.add_trace(scatter(x=x[rows], y=y[rows], mode="markers", marker=dict(color=color, size=size, line=line),
                                  customdata=custom[rows], hovertemplate=hover, name=str(label)))  # fmt: skip
    fig.update_xaxes(title="topological depth", showgrid=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(legend=dict(orientation="h", y=-0.15, x=0))
    return _base_layout(fig, title, 560)


def graph_statistics(graph, devices: int = 4) -> dict[str, Any]:
    """Size, shape and cost figures of a graph, and the makespan lower bound on ``devices``."""
    from workbench import lower_bound

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


# ------------------------------------------------------- measured vs sim
def calibration_scatter(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    labels: Sequence[str] | None = None,
    title: str | None = None,
    reference: str = "identity",
    x_title: str = "simulated",
    y_title: str = "measured",
) -> go.Figure:
    """Measured (y) against simulated (x) per series, each named with its Spearman rank correlation.

    ``reference``: ``"identity"`` draws y = x (same units), ``"fit"`` the
    least-squares line through the origin (different units).
    """
    fig = go.Figure()
    top = 0.0
    for name, (simulated, measured) in series.items():
        sim = pd.Series(np.asarray(simulated, dtype=float))
        real = pd.Series(np.asarray(measured, dtype=float))
        rho = sim.rank().corr(real.rank()) if len(sim) > 2 else float("nan")
        fig.add_trace(go.Scatter(
            x=sim, y=real, mode="markers", name=f"{name}: Spearman {rho:.3f}" if np.isfinite(rho) else name,
            text=list(labels) if labels is not None else None, marker=dict(size=7, opacity=0.7),
            hovertemplate="%{text}<br>" + x_title + " %{x:.6g}<br>" + y_title + " %{y:.6g}<extra></extra>",
        ))  # fmt: skip
        if len(sim):
            top = max(top, float(sim.max()))
            if reference == "fit" and float((sim * sim).sum()) > 0:
                slope = float((sim * real).sum() / (sim * sim).sum())
                fig.add_trace(go.Scatter(x=[0, top], y=[0, slope * top], mode="lines", line=dict(color="gray", dash="dash"), name=f"fit: y = {slope:.3g} x"))
    if reference == "identity" and top > 0:
        fig.add_trace(go.Scatter(x=[0, top], y=[0, top], mode="lines", line=dict(color="gray", dash="dash"), name="y = x"))
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title)
    fig.update_layout(legend=dict(orientation="h", y=-0.25, x=0))
    return _base_layout(fig, title, 420)


# ------------------------------------------------------------- utilities
def message_figure(text: str, height: int = 200) -> go.Figure:
    """An empty figure that shows ``text``."""
    fig = go.Figure()
    fig.add_annotation(text=text, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _base_layout(fig, None, height)


def to_png(figure: go.Figure | Mapping[str, Any], width: int = 1200, scale: float = 2.0) -> bytes:
    """The figure as PNG bytes (Kaleido, driving Debian's chromium when no other browser is set)."""
    import os

    import plotly.io as pio

    if "BROWSER_PATH" not in os.environ and os.path.exists("/usr/bin/chromium"):
        os.environ["BROWSER_PATH"] = "/usr/bin/chromium"
    fig = figure if isinstance(figure, go.Figure) else go.Figure(figure)
    height = fig.layout.height or 500
    return pio.to_image(fig, format="png", width=width, height=height, scale=scale)
