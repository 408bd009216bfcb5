"""What the notebooks are built from: method comparisons, side-by-side charts and the compare panel.

The notebooks in ``notebooks/`` call only the public API and this module, so
everything they show is tested code. :class:`Comparison` places graphs with
several methods and keeps the placements; :func:`gantt_grid` draws their
Gantt charts side by side on one time axis (:func:`workbench.viz.gantt_grid`); :func:`compare_panel` is the
ipywidgets panel (graph, devices, methods → table, bars and Gantt charts).
Importing this module imports neither torch nor ipywidgets.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .graph import DataflowGraph
from .placers import REGISTRY, Placement, methods, place
from .runs import RunPaths, read_meta, try_read_json
from .sim import simulate
from .training.oracle import seconds_oracle
from .viz import gantt_grid, makespan_bars

__all__ = [
    "HEURISTICS",
    "SEARCH",
    "LEARNED",
    "pretrained_methods",
    "default_methods",
    "Comparison",
    "relative_to",
    "scaling_exponents",
    "moved_ops",
    "placement_changes",
    "stage_placements",
    "seconds_oracle",
    "gantt_grid",
    "ComparePanel",
    "compare_panel",
]

HEURISTICS = tuple(methods("baseline", "heuristic", "rule"))
"""Constructive heuristics and rules, in the order the tables list them."""
SEARCH = tuple(methods("search", "exact"))
"""Search methods: simulated annealing and the time-limited exact CP-SAT model."""
LEARNED = tuple(methods("learned"))
"""Learned placers offered when a bundled checkpoint for the graph exists."""


def pretrained_methods(graph: DataflowGraph, methods: Iterable[str] = LEARNED, devices: int | None = None) -> list[str]:
    """Those of ``methods`` with a bundled checkpoint for ``graph`` (``datasets/pretrained/<graph>/<method>.safetensors``).

    With ``devices``, only checkpoints trained for that device count (their run's
    ``meta.json``; one without a record is kept and its loading decides).
    """
    from .learn.placers import pretrained_path

    found = [m for m in methods if pretrained_path(graph, m).is_file()]
    if devices is None:
        return found
    return [m for m in found if try_read_json(RunPaths(pretrained_path(graph, m).parent).meta_path).get("devices", devices) == devices]


def default_methods(graph: DataflowGraph, devices: int | None = None) -> list[str]:
    """Every heuristic, both search methods, and the learned placers pretrained for ``graph`` (on ``devices``, when given)."""
    return [*HEURISTICS, *SEARCH, *pretrained_methods(graph, devices=devices)]


class Comparison:
    """Placements of graphs × device counts × methods, computed on first use and kept.

    Args:
        graphs: the graphs (a sequence, or label → graph).
        options: per-method placer options, e.g. ``{"local_search": {"budget": 2000}}``.
        seed: the seed every placer gets.
    """

    def __init__(
        self,
        graphs: Sequence[DataflowGraph] | Mapping[str, DataflowGraph],
        options: Mapping[str, Mapping[str, Any]] | None = None,
        seed: int = 0,
    ) -> None:
        self.graphs = dict(graphs) if isinstance(graphs, Mapping) else {g.name: g for g in graphs}
        if not self.graphs:
            raise ValueError("Comparison needs at least one graph")
        self.options = {method: dict(values) for method, values in (options or {}).items()}
        unknown = sorted(set(self.options) - set(REGISTRY))
        if unknown:
            raise ValueError(f"options given for unknown method(s) {', '.join(unknown)}; registered: {', '.join(REGISTRY)}")
        self.seed = int(seed)
        self.placements: dict[tuple[str, int, str], Placement] = {}

    def graph(self, label: str) -> DataflowGraph:
        if label not in self.graphs:
            raise ValueError(f"unknown graph {label!r}; this comparison has {', '.join(self.graphs)}")
        return self.graphs[label]

    def placement(self, graph: str, devices: int, method: str) -> Placement:
        """The placement of ``graph`` (a label) on ``devices`` by ``method``, placing it if not done yet."""
        key = (graph, int(devices), method)
        if key not in self.placements:
            self.placements[key] = place(
                self.graph(graph), method=method, devices=int(devices), seed=self.seed, **self.options.get(method, {})
            )
        return self.placements[key]

    def run(self, devices: Iterable[int], methods: Sequence[str] | None = None, progress: bool = True) -> pd.DataFrame:
        """Place every graph on every device count with every method (default: :func:`default_methods`); returns :meth:`table`."""
        from .progress import progress_bar  # saved in its final state in an executed notebook

        devices = [int(d) for d in devices]
        cells = [(label, d, m) for label, g in self.graphs.items() for d in devices for m in (methods or default_methods(g, d))]
        for cell in progress_bar(cells, desc="placing", unit="placement", disable=not progress):
            self.placement(*cell)
        return self.table()

    def table(self) -> pd.DataFrame:
        """One row per placement so far: makespan, its ratio to critical_path's, gap to the best lower bound, seconds."""
        rows = [
            {"graph": g, "devices": d, "method": m, "makespan": p.makespan, "lower_bound": p.lower_bound, "seconds": p.seconds}
            for (g, d, m), p in self.placements.items()
        ]
        frame = pd.DataFrame(rows, columns=["graph", "devices", "method", "makespan", "lower_bound", "seconds"])
        per_cell = frame.groupby(["graph", "devices"])
        frame["lower_bound"] = per_cell["lower_bound"].transform("max")
        frame["gap"] = frame["makespan"] / frame["lower_bound"] - 1
        frame["vs_critical_path"] = relative_to(frame, "critical_path")
        return frame[["graph", "devices", "method", "makespan", "vs_critical_path", "gap", "lower_bound", "seconds"]]

    def bars(self, graph: str, devices: int, methods: Sequence[str]) -> go.Figure:
        """Makespan per method with the best lower bound as a line."""
        placements = {m: self.placement(graph, devices, m) for m in methods}
        bound = max(p.lower_bound for p in placements.values())
        return makespan_bars(placements, lower_bound=bound, title=f"{graph} on {devices} devices", graph=self.graph(graph))

    def gantts(self, graph: str, devices: int, methods: Sequence[str], columns: int = 2) -> go.Figure:
        """The methods' Gantt charts side by side (see :func:`gantt_grid`)."""
        g = self.graph(graph)
        traces = {m: simulate(g, self.placement(graph, devices, m).assignment, devices).trace for m in methods}
        return gantt_grid(g, traces, columns=columns, title=f"{graph} on {devices} devices")


def relative_to(
    frame: pd.DataFrame, reference: str, value: str = "makespan", by: str = "method", keys: Sequence[str] = ("graph", "devices")
) -> pd.Series:
    """``value`` of each row divided by the ``reference`` row's with the same ``keys`` (NaN where there is none).

    For a sweep table, ``relative_to(results, "critical_path", by="label", keys=("graph", "devices", "seed"))``
    relates every method to the teacher on the same graph, device count and seed.
    """
    keys = list(keys)
    base = frame.loc[frame[by] == reference, [*keys, value]]
    if base.duplicated(keys).any():
        raise ValueError(f"{reference!r} has several rows per {', '.join(keys)}; add the distinguishing column to keys")
    merged = frame[keys].merge(base.rename(columns={value: "_reference"}), on=keys, how="left")
    return pd.Series(frame[value].to_numpy() / merged["_reference"].to_numpy(), index=frame.index, name=f"{value} / {reference}")


def scaling_exponents(frame: pd.DataFrame, x: str = "nodes", y: str = "seconds", by: str = "method") -> pd.Series:
    """Per group, the slope of log ``y`` against log ``x`` (least squares): cost grows like ``x ** slope``."""
    slopes = {}
    for label, group in frame.groupby(by, sort=False):
        data = group[(group[x] > 0) & (group[y] > 0)]
        if data[x].nunique() < 2:
            raise ValueError(f"{by}={label!r}: a slope needs at least two distinct {x} values with positive {y}")
        slopes[label] = float(np.polyfit(np.log(data[x].astype(float)), np.log(data[y].astype(float)), 1)[0])
    return pd.Series(slopes, name=f"{y} ~ {x}^k")


def moved_ops(before: Sequence[int], after: Sequence[int], devices: int) -> int:
    """How many ops ``after`` places elsewhere than ``before``, once its devices are renamed to match best.

    Identical devices make device ids arbitrary: a placement with devices 0 and 1
    swapped is the same placement. The renaming maximizes the ops that stay
    (a linear assignment between the two sets of devices).
    """
    from ortools.graph.python import linear_sum_assignment

    before, after = np.asarray(before, dtype=np.int64), np.asarray(after, dtype=np.int64)
    if before.shape != after.shape:
        raise ValueError(f"the placements differ in length ({before.size} and {after.size} ops)")
    if before.size and (min(before.min(), after.min()) < 0 or max(before.max(), after.max()) >= devices):
        raise ValueError(f"device ids must lie in 0..{devices - 1}")
    overlap = np.zeros((devices, devices), dtype=np.int64)
    np.add.at(overlap, (after, before), 1)
    matching = linear_sum_assignment.SimpleLinearSumAssignment()
    rows, cols = np.divmod(np.arange(devices * devices), devices)
    matching.add_arcs_with_cost(rows, cols, -overlap.ravel())
    if matching.solve() != matching.OPTIMAL:
        raise RuntimeError("device matching failed")
    return int(before.size + matching.optimal_cost())


def placement_changes(placements: Mapping[str, Any], devices: int) -> pd.DataFrame:
    """From each placement to the next (``{label: Placement or assignment}``, in order): ops moved and makespans.

    ``moved`` counts ops on a different device up to renaming devices
    (:func:`moved_ops`); ``moved_same_ids`` compares device ids as they are.
    """
    labels = list(placements)
    assignments = {k: np.asarray(getattr(v, "assignment", v)) for k, v in placements.items()}
    rows = []
    for first, second in zip(labels, labels[1:], strict=False):
        row = {
            "from": first,
            "to": second,
            "moved": moved_ops(assignments[first], assignments[second], devices),
            "moved_same_ids": int((assignments[first] != assignments[second]).sum()),
        }
        for label, key in ((first, "makespan_from"), (second, "makespan_to")):
            row[key] = getattr(placements[label], "makespan", None)
        rows.append(row)
    return pd.DataFrame(rows, columns=["from", "to", "moved", "moved_same_ids", "makespan_from", "makespan_to"])


def stage_placements(run_dir: str | Path, graph: DataflowGraph) -> dict[str, Placement]:
    """The greedy placement of ``graph`` by each stage checkpoint of a training run, in stage order.

    Keys are the stages (``checkpoints/<stage>.safetensors``, the stage's final weights)
    and ``<stage>-best`` where training kept its best greedy weights.
    """
    run = RunPaths(run_dir)
    if not run.meta_path.is_file():
        raise ValueError(f"{run_dir} is not a training run directory (no meta.json)")
    meta = read_meta(run.meta_path)
    found = run.stage_checkpoints(meta["stages"])
    if not found:
        raise ValueError(
            f"{run_dir} holds no stage checkpoint ({run.stage_checkpoint('<stage>').relative_to(run.path)} for {', '.join(meta['stages'])})"
        )
    return {stage: place(graph, method=meta["method"], devices=int(meta["devices"]), checkpoint=path) for stage, path in found.items()}


class ComparePanel:
    """Pick a graph, a device count and methods; the table, makespan bars and Gantt charts redraw.

    ``widget`` is the box of plain ipywidgets a notebook shows; ``table``,
    ``bars`` and ``gantts`` hold what is currently drawn. Each chart is a
    ``go.Figure`` shown in an ``Output`` widget (``bars_output``,
    ``gantts_output``) whose output is replaced on every change: core widgets
    only, which JupyterLab and Notebook 7 restore from a live kernel when a
    notebook is reopened and from a saved widget state without one. The
    panel's own output carries a static copy (the status, the table and, with
    :func:`workbench.viz.static_fallbacks` on, the charts as PNGs) that viewers
    without a widget manager show: GitHub, nbviewer, ``jupyter nbconvert``.
    """

    def __init__(
        self,
        comparison: Comparison,
        devices: Sequence[int],
        methods: Sequence[str],
        selected: Sequence[str] | None = None,
        columns: int = 2,
    ) -> None:
        import ipywidgets as widgets

        if not devices or not methods:
            raise ValueError("compare_panel needs at least one device count and one method")
        unknown = sorted(set(methods) - set(REGISTRY))
        if unknown:
            raise ValueError(f"unknown method(s) {', '.join(unknown)}; registered: {', '.join(REGISTRY)}")
        self.comparison, self.columns = comparison, columns
        self.graph = widgets.Dropdown(options=list(comparison.graphs), description="graph")
        self.devices = widgets.ToggleButtons(options=[int(d) for d in devices], description="devices")
        self.methods = widgets.SelectMultiple(
            options=list(methods), value=tuple(selected or methods), rows=min(10, len(methods)), description="methods"
        )
        self.status = widgets.HTML()
        self.table_widget = widgets.HTML()
        self.bars_output, self.gantts_output = widgets.Output(), widgets.Output()
        controls = widgets.HBox([widgets.VBox([self.graph, self.devices]), self.methods])
        self.widget = widgets.VBox([controls, self.status, self.table_widget, self.bars_output, self.gantts_output])
        self.table: pd.DataFrame | None = None
        self.bars: go.Figure | None = None
        self.gantts: go.Figure | None = None
        for control in (self.graph, self.devices, self.methods):
            control.observe(lambda _change: self.redraw(), names="value")
        self.redraw()

    def redraw(self) -> None:
        """Place what is missing for the current choice and draw it again."""
        methods = list(self.methods.value)
        if not methods:
            self._show("<b>pick at least one method</b>")
            return
        graph, devices = self.graph.value, self.devices.value
        self.status.value = f"placing {graph} on {devices} devices with {len(methods)} method(s)..."
        failed = {}
        for method in methods:
            try:
                self.comparison.placement(graph, devices, method)
            except ValueError as exc:  # e.g. a learned method without a checkpoint for this graph
                failed[method] = str(exc)
        methods = [m for m in methods if m not in failed]
        notes = "".join(f"<br>{m} skipped: {html.escape(message)}" for m, message in failed.items())
        if not methods:
            self._show("nothing to draw" + notes)
            return
        table = self.comparison.table()
        self.table = table[(table["graph"] == graph) & (table["devices"] == devices) & table["method"].isin(methods)].reset_index(drop=True)
        self.bars = self.comparison.bars(graph, devices, methods)
        self.gantts = self.comparison.gantts(graph, devices, methods, columns=self.columns)
        best = self.table.loc[self.table["makespan"].idxmin()]
        self._show(
            f"best: <b>{best['method']}</b>, makespan {best['makespan']:.4g} ({best['gap']:.1%} above the lower bound){notes}",
            self.table.to_html(index=False, float_format=lambda v: f"{v:.5g}"),
            (self.bars, self.gantts),
        )

    def _show(self, status: str, table: str = "", figures: tuple[go.Figure, ...] = ()) -> None:
        """Put ``status``, ``table`` and ``figures`` (nothing drawn for the charts left out) on the widgets."""
        from .viz import figure_bundle

        if not figures:
            self.table, self.bars, self.gantts = None, None, None
        self.status.value, self.table_widget.value = status, table
        for index, output in enumerate((self.bars_output, self.gantts_output)):
            shown = [figure_bundle(figures[index])] if index < len(figures) else []
            output.outputs = tuple({"output_type": "display_data", "data": data, "metadata": {}} for data in shown)

    def static_html(self) -> str:
        """What is drawn now as HTML without scripts: the status, the table and each chart's PNG where it has one."""
        parts = [f"<p>{self.status.value}</p>", self.table_widget.value]
        for output in (self.bars_output, self.gantts_output):
            for item in output.outputs:
                png = item["data"].get("image/png")
                if png:
                    title = item["data"].get("application/vnd.plotly.v1+json", {}).get("layout", {}).get("title", {}).get("text", "")
                    parts.append(f'<img src="data:image/png;base64,{png}" alt="{html.escape(str(title))}"/>')
        return "<div>" + "\n".join(parts) + "</div>"

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = dict(self.widget._repr_mimebundle_(**kwargs))
        bundle["text/html"] = self.static_html()  # skipped where the widget draws
        bundle["text/plain"] = f"compare panel: {self.graph.value} on {self.devices.value} devices, {', '.join(self.methods.value)}"
        return bundle


def compare_panel(
    graphs: Comparison | Sequence[DataflowGraph] | Mapping[str, DataflowGraph],
    devices: Sequence[int] = (4, 8),
    methods: Sequence[str] | None = None,
    selected: Sequence[str] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    columns: int = 2,
) -> ComparePanel:
    """An interactive comparison: dropdown of graphs, device toggle, method list → table, bars, Gantt charts.

    Args:
        graphs: a :class:`Comparison` (its placements are reused) or the graphs.
        devices: the device counts to offer.
        methods: the methods to offer (default: :func:`default_methods` of the first graph).
        selected: the methods selected at first (default: all offered).
        options: per-method placer options when ``graphs`` are graphs.
        columns: Gantt charts per row.
    """
    comparison = graphs if isinstance(graphs, Comparison) else Comparison(graphs, options=options)
    if methods is None:
        methods = default_methods(next(iter(comparison.graphs.values())))
    return ComparePanel(comparison, devices, methods, selected=selected, columns=columns)
