"""Device timelines (Gantt charts) as a trace viewer draws them.

One row per device, one bar per op, transfers as arrows from the sending to
the receiving row, idle time in grey, a utilisation counter track per device
under the timeline, and optionally the trace's critical path outlined. Times
are in the graph's own unit. Ops are identified by their index in
``customdata[0]`` of every point, so a click on any chart names the op.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import CRITICAL, HIGHLIGHT, base_layout, device_color, format_numbers, format_time, time_axis

if TYPE_CHECKING:
    from ..graph import DataflowGraph
    from ..sim.trace import Trace

__all__ = [
    "LARGE_GRAPH",
    "op_names",
    "gantt_frame",
    "gantt_figure",
    "gantt_highlight",
    "gantt_grid",
    "trace_critical_path",
    "critical_path_parts",
    "critical_path_split",
    "utilisation_frame",
    "find_ops",
]

LARGE_GRAPH = 1000
"""Past this many ops, Gantt bars are drawn as WebGL segments (graph views switch at half of it)."""


def op_names(graph: DataflowGraph | None, count: int) -> list[str]:
    """The graph's op names, or ``op<i>``."""
    if graph is not None and graph.names is not None:
        return list(graph.names)
    return [f"op{i}" for i in range(count)]


def gantt_frame(graph: DataflowGraph | None, trace: Trace) -> pd.DataFrame:
    """One row per op: device, ready, start, end, duration, wait, compute cost."""
    frame = trace.to_frame("ops")
    frame["name"] = op_names(graph, trace.num_ops)
    frame["compute"] = graph.compute if graph is not None else frame["duration"]
    return frame


def trace_critical_path(graph: DataflowGraph | None, trace: Trace) -> list[int]:
    """The ops whose chain of waits sets the makespan, first to last.

    From the op that ends last, step back to whatever made each op start when
    it did: the input that arrived last (when the op started as soon as it was
    ready) or the op before it on the same device.
    """
    if trace.num_ops == 0:
        return []
    device, start, end, ready = (np.asarray(a, dtype=float) for a in (trace.device, trace.start, trace.end, trace.ready))
    arrival: dict[int, list[tuple[float, int]]] = {}
    if graph is not None:
        for u, v in zip(graph.src.tolist(), graph.dst.tolist(), strict=False):
            arrival.setdefault(v, []).append((end[u], u))
        for k in range(trace.transfer_src_op.size):
            u, v = int(trace.transfer_src_op[k]), int(trace.transfer_dst_op[k])
            arrival[v] = [(float(trace.transfer_end[k]), u) if src == u else (t, src) for t, src in arrival.get(v, [])]
    order = np.lexsort((start, device))
    previous = {}
    for a, b in zip(order[:-1], order[1:], strict=False):
        if device[a] == device[b]:
            previous[int(b)] = int(a)
    path = [int(np.argmax(end))]
    while True:
        v = path[-1]
        inputs = arrival.get(v, [])
        last_input = max(inputs) if inputs else None
        if last_input is not None and math.isclose(start[v], ready[v], rel_tol=1e-9, abs_tol=1e-12) and ready[v] > 0:
            path.append(last_input[1])
        elif v in previous and math.isclose(end[previous[v]], start[v], rel_tol=1e-9, abs_tol=1e-12):
            path.append(previous[v])
        elif last_input is not None and ready[v] > 0:
            path.append(last_input[1])
        else:
            break
    return path[::-1]


def critical_path_parts(
    graph: DataflowGraph | None, trace: Trace, path: Sequence[int] | None = None
) -> dict[str, list[tuple[float, float, int, int]]]:
    """The critical path's time as ``(begin, end, from device, to device)`` pieces of each kind: ``compute`` (its ops
    running), ``transfer`` (its data in flight between two of its ops) and ``waiting`` (the rest: a queue for a link, a
    device or an input, drawn on the device that waits). ``path`` defaults to :func:`trace_critical_path`."""
    path = trace_critical_path(graph, trace) if path is None else list(path)
    parts: dict[str, list[tuple[float, float, int, int]]] = {"compute": [], "transfer": [], "waiting": []}
    if not path:
        return parts
    start, end, device = (np.asarray(a, dtype=float) for a in (trace.start, trace.end, trace.device))
    sent = {
        (int(s), int(d)): (float(b), float(e))
        for s, d, b, e in zip(trace.transfer_src_op, trace.transfer_dst_op, trace.transfer_start, trace.transfer_end, strict=True)
    }
    first = path[0]
    if start[first] > 0:
        parts["waiting"].append((0.0, float(start[first]), int(device[first]), int(device[first])))
    for index, op in enumerate(path):
        parts["compute"].append((float(start[op]), float(end[op]), int(device[op]), int(device[op])))
        if index + 1 == len(path):
            break
        after = path[index + 1]
        here, there = int(device[op]), int(device[after])
        gap_end = float(start[after])
        if gap_end <= end[op]:
            continue
        begin, arrive = sent.get((op, after), (float(end[op]), float(end[op])))
        begin, arrive = max(begin, float(end[op])), min(arrive, gap_end)
        if begin > end[op]:  # queued for the link
            parts["waiting"].append((float(end[op]), begin, here, here))
        if arrive > begin:
            parts["transfer"].append((begin, arrive, here, there))
        if gap_end > max(arrive, begin):  # arrived, then waited for the device or another input
            parts["waiting"].append((max(arrive, begin), gap_end, there, there))
    return parts


def critical_path_split(graph: DataflowGraph | None, trace: Trace, path: Sequence[int] | None = None) -> dict[str, float]:
    """Why the makespan is what it is: the critical path's time split into ``compute``, ``transfer`` and ``waiting``
    (:func:`critical_path_parts`); the three add up to the end of the path's last op (the makespan)."""
    return {kind: float(sum(b - a for a, b, _, _ in pieces)) for kind, pieces in critical_path_parts(graph, trace, path).items()}


def utilisation_frame(trace: Trace, devices: int, bins: int = 120) -> pd.DataFrame:
    """Busy share of each device in ``bins`` equal time windows: columns ``time`` (window start), ``device``, ``busy``."""
    makespan = trace.makespan
    edges = np.linspace(0.0, makespan if makespan > 0 else 1.0, bins + 1)
    width = edges[1] - edges[0]
    rows = []
    for d in range(devices):
        mine = np.asarray(trace.device) == d
        starts, ends = np.asarray(trace.start)[mine], np.asarray(trace.end)[mine]
        overlap = np.clip(np.minimum(ends[None, :], edges[1:, None]) - np.maximum(starts[None, :], edges[:-1, None]), 0.0, None).sum(axis=1)
        rows.append(pd.DataFrame({"time": edges[:-1], "device": d, "busy": np.minimum(overlap / width, 1.0)}))
    return pd.concat(rows, ignore_index=True)


def find_ops(graph: DataflowGraph | None, count: int, query: str) -> list[int]:
    """Ops whose id equals ``query`` or whose name contains it (case-insensitive)."""
    query = (query or "").strip()
    if not query:
        return []
    if query.isdigit():
        return [int(query)] if int(query) < count else []
    needle = query.lower()
    return [i for i, name in enumerate(op_names(graph, count)) if needle in name.lower()]


def _idle_bars(devices: int, makespan: float) -> go.Bar:
    """One grey bar per device row spanning the makespan: what no op covers reads as idle."""
    return go.Bar(
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


def _op_traces(frame: pd.DataFrame, custom: np.ndarray, hover: str, devices: int, large: bool, makespan: float) -> list:
    """The ops' bars per device (WebGL segments when ``large``), and tick marks for ops too short to see."""
    traces: list = []
    for device in range(devices):
        mine = frame["device"].to_numpy() == device
        if large:
            traces.append(_segments(frame[mine], custom[mine], device, hover))
        else:
            traces.append(
                go.Bar(
                    name=f"device {device}",
                    y=frame.loc[mine, "device"],
                    x=frame.loc[mine, "duration"],
                    base=frame.loc[mine, "start"],
                    orientation="h",
                    width=0.7,
                    marker=dict(color=device_color(device), line=dict(width=0.5, color="white")),
                    customdata=custom[mine],
                    hovertemplate=hover,
                    showlegend=False,
                ),
            )
    tiny = frame["duration"].to_numpy() < 0.002 * makespan
    if tiny.any():
        traces.append(
            (go.Scattergl if large else go.Scatter)(
                name="short ops",
                x=frame.loc[tiny, "start"],
                y=frame.loc[tiny, "device"],
                mode="markers",
                marker=dict(symbol="line-ns-open", size=16, line=dict(width=2), color=[device_color(d) for d in frame.loc[tiny, "device"]]),
                customdata=custom[tiny],
                hovertemplate=hover,
                showlegend=False,
            ),
        )
    return traces


def gantt_figure(
    graph: DataflowGraph | None,
    trace: Trace,
    title: str | None = None,
    devices: int | None = None,
    large_threshold: int = LARGE_GRAPH,
    x_max: float | None = None,
    critical_path: bool = False,
    utilisation: bool = True,
    unit: str | None = None,
) -> go.Figure:
    """Device timelines: one row per device, one bar per op, transfers as arrows between rows, idle in grey.

    ``graph`` gives op names, compute costs and the time unit (``None``: names
    ``op<i>`` and costs from the trace). ``devices`` rows are drawn (default:
    up to the highest device used), so unused devices show as idle rows.
    ``x_max`` fixes the time axis (several charts on one scale).
    ``critical_path`` outlines :func:`trace_critical_path`; ``utilisation``
    adds a counter track per device below the timeline (busy share over
    time). ``unit`` names the time unit when it is not the graph's (a measured
    trace: ``"s"``). Ops too short to see get a tick mark. Past ``large_threshold``
    ops bars become WebGL line segments and transfers start hidden.
    """
    frame = gantt_frame(graph, trace)
    devices = max(int(devices or 1), int(frame["device"].max()) + 1 if len(frame) else 1)
    makespan = trace.makespan
    busy = frame.groupby("device")["duration"].sum().reindex(range(devices), fill_value=0.0)
    rows = 2 if utilisation else 1
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, row_heights=[0.78, 0.22] if utilisation else None, vertical_spacing=0.04)
    fig.add_trace(_idle_bars(devices, makespan), row=1, col=1)
    custom = frame[["op", "name", "compute", "ready", "start", "end", "wait", "device"]].to_numpy(dtype=object)
    for column in range(2, 7):  # times as the CLI writes numbers
        custom[:, column] = format_numbers(custom[:, column])
    hover = (
        "<b>%{customdata[1]}</b> (op %{customdata[0]}) on device %{customdata[7]}<br>compute %{customdata[2]}"
        "<br>ready %{customdata[3]}<br>start %{customdata[4]}<br>end %{customdata[5]}"
        "<br>waited %{customdata[6]}<extra></extra>"
    )
    large = len(frame) > large_threshold
    for part in _op_traces(frame, custom, hover, devices, large, makespan):
        fig.add_trace(part, row=1, col=1)
    fig.add_trace(_transfer_arrows(trace, large), row=1, col=1)
    if critical_path:
        for part in _critical_overlay(graph, trace, custom, hover):
            fig.add_trace(part, row=1, col=1)
    if utilisation:
        fig.add_trace(_utilisation_heatmap(trace, devices), row=2, col=1)
        fig.update_yaxes(
            title="busy", tickvals=list(range(devices)), ticktext=[f"dev {d}" for d in range(devices)], autorange="reversed", row=2, col=1
        )
    labels = [f"dev {d}<br>{busy[d] / makespan:.0%} busy" if makespan > 0 else f"dev {d}" for d in range(devices)]
    fig.update_layout(
        barmode="overlay",
        bargap=0.1,
        hovermode="closest",
        legend=dict(orientation="h", x=1, xanchor="right", y=-0.2 if utilisation else -0.3, yanchor="top"),
    )
    fig.update_yaxes(tickvals=list(range(devices)), ticktext=labels, autorange="reversed", title=None, row=1, col=1)
    top = x_max if x_max else makespan * 1.01 if makespan > 0 else 1.0
    fig.update_xaxes(range=[0, top], zeroline=False, exponentformat="power", showexponent="all")
    fig.update_xaxes(title=f"time ({unit})" if unit else time_axis(graph)["title"], row=rows, col=1)
    height = 150 + 45 * devices + (110 if utilisation else 0)
    base_layout(fig, title, height, uirevision=f"gantt-{devices}")
    fig.update_layout(margin=dict(t=60 if title else 10, b=90))
    return fig


def _utilisation_heatmap(trace: Trace, devices: int) -> go.Heatmap:
    """The utilisation track: a row per device, its busy share per time window from white (idle) to dark (busy), so any
    number of devices stays readable (one line per device overlapped at eight)."""
    use = utilisation_frame(trace, devices)
    busy = use.pivot(index="device", columns="time", values="busy").reindex(range(devices))
    starts = busy.columns.to_numpy(dtype=float)
    width = starts[1] - starts[0] if starts.size > 1 else 1.0
    return go.Heatmap(
        x=starts + width / 2,
        y=list(range(devices)),
        z=busy.to_numpy(),
        zmin=0.0,
        zmax=1.0,
        colorscale=[[0.0, "#ffffff"], [1.0, "#2f2f2f"]],
        showscale=False,
        name="busy",
        customdata=np.tile(format_numbers(starts), (devices, 1)),
        hovertemplate="dev %{y}: %{z:.0%} busy from %{customdata}<extra></extra>",
        ygap=1,
    )


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


def _transfer_arrows(trace: Trace, large: bool) -> go.Scatter | go.Scattergl:
    """Transfers as lines from (start, sending device) to (end, receiving device), an arrowhead at the receiver."""
    count = trace.transfer_start.size
    xs = np.full(3 * count, np.nan)
    ys = np.full(3 * count, np.nan)
    xs[0::3], xs[1::3] = trace.transfer_start, trace.transfer_end
    ys[0::3], ys[1::3] = trace.transfer_src_device, trace.transfer_dst_device
    text = np.empty(3 * count, dtype=object)
    text[0::3] = text[1::3] = [
        f"op {s} → op {d}: device {a} → {b}"
        for s, d, a, b in zip(
            trace.transfer_src_op, trace.transfer_dst_op, trace.transfer_src_device, trace.transfer_dst_device, strict=True
        )
    ]
    symbols = np.array(["circle", "arrow", "circle"] * count, dtype=object)
    sizes = np.tile([3, 9, 0], count)
    if large:
        return go.Scattergl(
            name=f"{count} transfers",
            visible="legendonly",
            x=xs,
            y=ys,
            mode="lines",
            line=dict(color="rgba(80,80,80,0.35)", width=1),
            hoverinfo="skip",
            connectgaps=False,
            showlegend=True,
        )
    return go.Scatter(
        name=f"{count} transfers",
        x=xs,
        y=ys,
        mode="lines+markers",
        line=dict(color="rgba(80,80,80,0.4)", width=1),
        marker=dict(symbol=symbols, size=sizes, angleref="previous", color="rgba(80,80,80,0.7)"),
        text=text,
        hovertemplate="%{text}<extra></extra>",
        connectgaps=False,
        showlegend=True,
    )


CRITICAL_DASH = {"compute": "solid", "transfer": "dash", "waiting": "dot"}
"""How each part of the critical path is drawn (all in :data:`~workbench.viz.style.CRITICAL`)."""


def _critical_overlay(graph: DataflowGraph | None, trace: Trace, custom: np.ndarray, hover: str) -> list[go.Scatter]:
    """The critical path drawn over the bars in three parts, each its own legend entry (click one to hide or show it):
    its ops running (a solid line along each op), its data in flight (dashed, sender to receiver) and its waiting
    (dotted), each named with its share of the makespan."""
    path = trace_critical_path(graph, trace)
    parts = critical_path_parts(graph, trace, path)
    total = sum(b - a for pieces in parts.values() for a, b, _, _ in pieces) or 1.0
    traces = []
    for kind, pieces in parts.items():
        xs: list[float | None] = []
        ys: list[float | None] = []
        for begin, finish, source, target in pieces:
            xs += [begin, finish, None]
            ys += [source, target, None]
        share = sum(b - a for a, b, _, _ in pieces) / total
        compute = kind == "compute"
        data = [row for op in path for row in (custom[op], custom[op], None)] if compute else None
        traces.append(
            go.Scatter(
                name=f"critical path ({len(path)} ops): compute {share:.0%}" if compute else f"critical path: {kind} {share:.0%}",
                x=xs,
                y=ys,
                mode="lines+markers" if compute else "lines",
                line=dict(color=CRITICAL, width=3 if compute else 2.5, dash=CRITICAL_DASH[kind]),
                marker=dict(size=4, color=CRITICAL),
                customdata=data,
                hovertemplate=hover if compute else f"critical path: {kind}<extra></extra>",
                connectgaps=False,
                legendgroup=f"critical-{kind}",
                showlegend=True,
            )
        )
    return traces


def gantt_highlight(trace: Trace, op: int | Sequence[int] | None) -> list[dict[str, Any]]:
    """Layout shapes outlining ``op``'s bar (or several ops') and their transfers (empty for ``None``)."""
    ops = [] if op is None else [op] if isinstance(op, (int, np.integer)) else list(op)
    shapes: list[dict[str, Any]] = []
    top = int(trace.device.max()) + 0.5 if trace.num_ops else 0.5
    for one in ops:
        if not 0 <= one < trace.num_ops:
            continue
        device = int(trace.device[one])
        shapes += [
            dict(
                type="rect",
                x0=float(trace.start[one]),
                x1=float(trace.end[one]),
                y0=device - 0.45,
                y1=device + 0.45,
                xref="x",
                yref="y",
                line=dict(color=HIGHLIGHT, width=3),
                fillcolor="rgba(255,0,255,0.25)",
            ),
            dict(
                type="line",
                x0=float(trace.start[one]),
                x1=float(trace.start[one]),
                y0=-0.5,
                y1=top,
                xref="x",
                yref="y",
                line=dict(color=HIGHLIGHT, width=1, dash="dot"),
            ),
        ]
        for k in np.flatnonzero((trace.transfer_src_op == one) | (trace.transfer_dst_op == one)):
            shapes.append(
                dict(
                    type="line",
                    x0=float(trace.transfer_start[k]),
                    x1=float(trace.transfer_end[k]),
                    xref="x",
                    yref="y",
                    y0=int(trace.transfer_src_device[k]),
                    y1=int(trace.transfer_dst_device[k]),
                    line=dict(color=HIGHLIGHT, width=2),
                )
            )
    return shapes


GRID_ROW_PX = 40
"""Height of one device row in :func:`gantt_grid`: room for its two-line label (``dev 3`` over ``71% busy``)."""
GRID_GAP_PX = 60
"""Between two rows of charts in :func:`gantt_grid`: the lower chart's title, clear of the upper chart's last device."""


def gantt_grid(graph: DataflowGraph | None, traces: Mapping[str, Trace], columns: int = 2, title: str | None = None) -> go.Figure:
    """One Gantt chart per label (``{label: Trace}``) in a grid sharing one time axis, so lengths compare at a glance.

    Heights are laid out in pixels from the device count (:data:`GRID_ROW_PX` per device row, :data:`GRID_GAP_PX`
    between rows of charts for the titles), so no chart's title or device labels fall on another chart.
    """
    if not traces:
        raise ValueError("gantt_grid needs at least one trace")
    if columns < 1:
        raise ValueError(f"columns must be >= 1, got {columns}")
    columns = min(columns, len(traces))
    rows = math.ceil(len(traces) / columns)
    charts = [gantt_figure(graph, trace, utilisation=False) for trace in traces.values()]
    devices = max(len(chart.layout.yaxis.tickvals) for chart in charts)
    plot_px = GRID_ROW_PX * devices + 20
    top, bottom = (90 if title else 40), 60
    height = top + bottom + rows * plot_px + (rows - 1) * GRID_GAP_PX
    labels = [f"{label}: makespan {format_time(trace.makespan, graph)}" for label, trace in traces.items()]
    fig = make_subplots(
        rows=rows,
        cols=columns,
        shared_xaxes="all",
        subplot_titles=labels,
        vertical_spacing=GRID_GAP_PX / (height - top - bottom) if rows > 1 else 0.0,
        horizontal_spacing=0.12,
    )
    longest = max(trace.makespan for trace in traces.values())
    for index, chart in enumerate(charts):
        row, col = divmod(index, columns)
        for item in chart.data:
            item.showlegend = False
            fig.add_trace(item, row=row + 1, col=col + 1)
        axis = chart.layout.yaxis  # its labels, not its domain: the grid places each chart
        fig.update_yaxes(tickvals=axis.tickvals, ticktext=axis.ticktext, autorange=axis.autorange, row=row + 1, col=col + 1)
    fig.update_xaxes(range=[0, longest * 1.01 if longest > 0 else 1], exponentformat="power", showexponent="all")
    fig.update_xaxes(title=time_axis(graph)["title"], row=rows)
    fig.update_layout(
        barmode="overlay",
        bargap=0.1,
        hovermode="closest",
        height=height,
        margin=dict(l=10, r=10, t=top, b=bottom),
        template="plotly_white",
        title=title,
    )
    return fig
