"""Figures: plotly only (no Dash), for the dashboard, notebooks, sweeps and calibration.

Each ``*_figure`` has a ``*_frame`` twin (or takes a frame) giving the data
behind the chart. Times are in the graph's own unit; paper graphs also show
the paper's ÷1e10. ``to_png`` / ``write_figure`` are the one way figures
become files.
"""

from .anytime import anytime_figure, anytime_frame
from .calibration import calibration_scatter
from .export import figure_bundle, static_fallbacks, static_fallbacks_on, to_png, write_figure
from .graphview import graph_figure, graph_frame, graph_statistics
from .placement import diff_frame, diff_heatmap, heatmap_frame, heatmap_highlight, makespan_bars, makespan_frame, placement_heatmap
from .style import (
    CRITICAL,
    HIGHLIGHT,
    device_color,
    format_number,
    format_time,
    is_paper_graph,
    message_figure,
    method_color,
    time_axis,
    time_unit,
)
from .timeline import (
    LARGE_GRAPH,
    critical_path_parts,
    critical_path_split,
    find_ops,
    gantt_figure,
    gantt_frame,
    gantt_grid,
    gantt_highlight,
    op_names,
    trace_critical_path,
    utilisation_frame,
)
from .training import training_curves

__all__ = [
    "LARGE_GRAPH",
    "anytime_figure",
    "anytime_frame",
    "CRITICAL",
    "HIGHLIGHT",
    "calibration_scatter",
    "critical_path_parts",
    "critical_path_split",
    "device_color",
    "diff_frame",
    "diff_heatmap",
    "figure_bundle",
    "find_ops",
    "format_number",
    "format_time",
    "gantt_figure",
    "gantt_frame",
    "gantt_grid",
    "gantt_highlight",
    "graph_figure",
    "graph_frame",
    "graph_statistics",
    "heatmap_frame",
    "heatmap_highlight",
    "is_paper_graph",
    "makespan_bars",
    "makespan_frame",
    "message_figure",
    "method_color",
    "op_names",
    "placement_heatmap",
    "static_fallbacks",
    "static_fallbacks_on",
    "time_axis",
    "time_unit",
    "to_png",
    "trace_critical_path",
    "training_curves",
    "utilisation_frame",
    "write_figure",
]
