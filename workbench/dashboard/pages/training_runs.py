"""Training's run table: the runs the page lists, one row each, and the selected runs read for the charts."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pandas as pd
from dash import dash_table, no_update

from ...datasets import bundled_graph
from ...runs import STAGE_NAMES, Run, RunFollowers
from ...viz import format_time
from ..summary import SORTABLE, sort_rows

__all__ = [
    "COLUMNS",
    "best_placement",
    "read_selected",
    "run_label",
    "run_problems",
    "run_row",
    "run_series",
    "run_table",
    "table_rows",
    "table_update",
]

REAL = "real"
COLUMNS = [
    ("run", "run"),
    ("status", "status"),
    ("method", "method"),
    ("graphs", "graphs"),
    ("stage", "stage"),
    ("episodes", "episodes"),
    ("best", "best makespan"),
    ("wall", "wall time"),
    ("problems", "problems"),
]
"""``(row key, header)`` of each column of the run table."""


def run_label(key: str) -> str:
    """How a run key is named in the table and the legends (``pretrained <folder>`` for a shipped run)."""
    root, _, name = key.partition(":")
    return name if root == "runs" else f"pretrained {name}"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60)} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60)} min"


def _sampled(run: Run) -> pd.Series:
    """The sampled makespans of a run's simulated stages (Stage III's are seconds, another unit)."""
    metrics = run.metrics
    if "makespan" not in metrics:
        return pd.Series(dtype=float)
    return metrics.loc[metrics.get("stage", pd.Series(dtype=str)) != REAL, "makespan"].dropna()


def best_placement(run: Run):
    """``(placement dict, graph or None, trace)`` of a run's best placement (:attr:`workbench.runs.Run.best_trace`), or ``None``."""
    if run.best_trace is None:
        return None
    placement = run.best_placement or {}
    try:
        graph = bundled_graph(placement["graph"])
    except (KeyError, ValueError, OSError, TypeError):
        graph = None
    return placement, graph if graph is not None and graph.num_nodes == run.best_trace.num_ops else None, run.best_trace


def run_problems(run: Run, found) -> list[str]:
    """A run's problems, less a missing trace.json when its best placement was found anyway."""
    return [p for p in run.problems if "trace.json" not in p or not found]


def run_row(key: str, run: Run) -> dict[str, Any]:
    """One row of the run table; each display value has a ``_<key>`` number to sort by (:func:`workbench.dashboard.summary.sort_rows`)."""
    meta = run.meta or {}
    metrics = run.metrics
    found = best_placement(run)
    sampled = _sampled(run)
    best = float(found[2].makespan) if found else float(sampled.min()) if len(sampled) else None
    stages = [str(s) for s in meta.get("stages", [])] if isinstance(meta.get("stages"), list) else []
    current = str(metrics["stage"].iloc[-1]) if "stage" in metrics and len(metrics) else None
    seconds = metrics["seconds"].dropna() if "seconds" in metrics else pd.Series(dtype=float)
    wall = float(seconds.iloc[-1]) if len(seconds) else None
    graphs = meta.get("graphs") if isinstance(meta.get("graphs"), list) else []
    problems = run_problems(run, found)
    return {
        "id": key,
        "run": run_label(key),
        "status": run.status,
        "method": str(meta.get("method", "?")),
        "graphs": ", ".join(map(str, graphs)),
        "stage": (STAGE_NAMES.get(current, current).partition(":")[0] if current else "–") + (f" ({' → '.join(stages)})" if stages else ""),
        "episodes": f"{len(metrics):,}",
        "_episodes": len(metrics),
        "best": "–" if best is None else format_time(best) + ("" if found else " (sampled)"),
        "_best": best,
        "wall": "–" if wall is None else _duration(wall),
        "_wall": wall,
        "problems": "; ".join(problems) or "ok",
    }


def table_rows(context, followers: RunFollowers, sort_by=None) -> list[dict[str, Any]]:
    """A :func:`run_row` per run the page offers (:meth:`~workbench.dashboard.context.DashboardContext.run_keys`: newest
    first, then the shipped ones), sorted as the table's ``sort_by`` asks."""
    return sort_rows([run_row(key, followers.poll(path)[0]) for key, path in context.run_keys()], sort_by)


def run_table(rows: list[dict[str, Any]]) -> dash_table.DataTable:
    """The sortable run table: a click on a row adds the run to the charts or takes it away (highlighted when drawn)."""
    return dash_table.DataTable(
        id="training-table",
        columns=[{"id": key, "name": name} for key, name in COLUMNS],
        data=rows,
        **SORTABLE,
        style_table={"maxHeight": "340px", "overflowY": "auto"},
        style_cell={"fontFamily": "inherit", "fontSize": "0.9em", "padding": "4px 8px", "textAlign": "left", "cursor": "pointer"},
        style_cell_conditional=[{"if": {"column_id": key}, "textAlign": "right"} for key in ("episodes", "best", "wall")]
        + [{"if": {"column_id": "problems"}, "maxWidth": "26em", "overflow": "hidden", "textOverflow": "ellipsis"}],
        style_header={"fontWeight": "bold"},
    )


def table_update(context, followers: RunFollowers, sort_by, stamp) -> tuple:
    """``(rows, their stamp)`` of the run table (:func:`table_rows`), or ``no_update`` twice when the rows are those of ``stamp``."""
    rows = table_rows(context, followers, sort_by)
    current = hashlib.sha1(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()
    return (no_update, no_update) if current == stamp else (rows, current)


def read_selected(context, followers: RunFollowers, keys) -> list[tuple[str, Run, list[int]]]:
    """``(key, run, [generation, revision, rows])`` of each selected run, polled (:class:`~workbench.runs.RunFollowers`);
    raises :class:`~workbench.dashboard.context.PathError` for a key outside the dashboard's folders."""
    out = []
    for key in keys or []:
        run, change = followers.poll(context.run_path(key))
        out.append((key, run, [change.generation, change.revision, len(run.metrics)]))
    return out


def run_series(label: str, run: Run) -> list[tuple[str, pd.DataFrame, str | None]]:
    """``(series label, metrics rows, graph)`` of a run: one series, or one per graph when it trained on several."""
    metrics = run.metrics
    if metrics.empty:
        return []
    if "graph" in metrics and metrics["graph"].nunique() > 1:
        return [(f"{label} / {name}", frame, str(name)) for name, frame in metrics.groupby("graph")]
    graph = metrics["graph"].dropna().iloc[0] if "graph" in metrics and metrics["graph"].notna().any() else None
    return [(label, metrics, graph)]
