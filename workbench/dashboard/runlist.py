"""Every training run the dashboard can show: run folders at any depth under the runs folder, and the shipped pretrained runs.

A run is named by a key the browser can hold: ``runs:<path under the runs
folder>`` or ``pretrained:<folder under datasets/pretrained>`` (read-only).
A folder is a run when it holds ``meta.json`` or ``metrics.csv``; the search
does not descend into a run (its ``checkpoints/``, ``best/``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..rundir import shipped_training_runs
from ..viz.training import GREEDY_PERIODIC, STAGE_NAMES
from .context import DashboardContext, PathError

__all__ = ["MAX_DEPTH", "run_keys", "run_path", "read_json_object", "greedy_evaluations", "best_placement_trace"]

MAX_DEPTH = 5


def _is_run(path: Path) -> bool:
    return (path / "meta.json").is_file() or (path / "metrics.csv").is_file()


def _nested(root: Path, depth: int) -> list[Path]:
    if depth < 0 or not root.is_dir():
        return []
    found = []
    for path in sorted(root.iterdir()):
        if path.name.startswith((".", "_")) or not path.is_dir():
            continue
        found += [path] if _is_run(path) else _nested(path, depth - 1)
    return found


def run_keys(ctx: DashboardContext) -> list[tuple[str, Path]]:
    """``(key, folder)`` of every run: the runs folder's (newest first), then the shipped pretrained runs."""
    own = sorted(_nested(ctx.runs_dir, MAX_DEPTH), key=lambda p: -p.stat().st_mtime)
    shipped = shipped_training_runs(ctx.datasets_dir / "pretrained")
    return [("runs:" + p.relative_to(ctx.runs_dir).as_posix(), p) for p in own] + [("pretrained:" + p.name, p) for p in shipped]


def run_path(ctx: DashboardContext, key: str) -> Path:
    """The folder a run key names, inside the runs folder or datasets/pretrained (no path traversal)."""
    root, _, relative = str(key).partition(":")
    if root == "runs" and relative:
        return ctx.in_runs(relative)
    if root == "pretrained" and relative and "/" not in relative:
        return ctx.in_datasets(f"pretrained/{relative}")
    raise PathError(f"not a run: {key!r}")


def read_json_object(path: Path) -> dict:
    """A JSON object file's contents; empty when missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def greedy_evaluations(
    meta: dict | None, metrics: pd.DataFrame, graph: str | None = None, periodic: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The greedy makespans a run recorded for ``graph``, at their episode and training second.

    Columns ``episode``, ``seconds``, ``makespan``, ``stage``, ``what``:
    every evaluation in ``periodic`` (``greedy.csv``, what
    :data:`~workbench.viz.training.GREEDY_PERIODIC`), then from ``meta.json``
    the kept weights of each stage (``greedy_selection_<stage>``) and the
    final policy (``evaluation``, simulated, so stage ``sim``). Runs without
    ``greedy.csv`` (the shipped ones) have only the latter.
    """
    rows = []
    if periodic is not None and {"episode", "graph", "greedy"} <= set(periodic.columns):
        mine = periodic[periodic["graph"] == graph] if graph is not None or periodic["graph"].nunique() > 1 else periodic
        for row in mine.itertuples(index=False):
            rows.append(
                {
                    "episode": float(row.episode),
                    "seconds": float(getattr(row, "seconds", np.nan)),
                    "makespan": float(row.greedy),
                    "stage": str(row.stage),
                    "what": GREEDY_PERIODIC,
                }
            )
    for key, value in (meta or {}).items():
        if key.startswith("greedy_selection_") and isinstance(value, dict) and isinstance(value.get("greedy"), dict):
            makespans = value["greedy"]
            name = graph if graph in makespans else next(iter(makespans), None)
            if name is not None and isinstance(value.get("episode"), (int, float)):
                stage = key.removeprefix("greedy_selection_")
                rows.append(
                    {
                        "episode": float(value["episode"]),
                        "makespan": float(makespans[name]),
                        "stage": stage,
                        "what": f"greedy, kept {STAGE_NAMES.get(stage, stage).partition(':')[0]} weights",
                    }
                )
    evaluation = (meta or {}).get("evaluation")
    if isinstance(evaluation, dict) and evaluation and isinstance(meta.get("episodes_done"), (int, float)):
        entry = evaluation.get(graph) if graph in evaluation else next(iter(evaluation.values()))
        if isinstance(entry, dict) and isinstance(entry.get("greedy"), (int, float)):
            rows.append(
                {
                    "episode": float(meta["episodes_done"]),
                    "makespan": float(entry["greedy"]),
                    "stage": "sim",
                    "what": "greedy, final policy",
                }
            )
    frame = pd.DataFrame(rows, columns=["episode", "seconds", "makespan", "stage", "what"])
    missing = frame["seconds"].isna()
    if missing.any() and not metrics.empty and {"episode", "seconds"} <= set(metrics.columns):
        known = metrics[["episode", "seconds"]].dropna().sort_values("episode")
        if len(known):
            frame.loc[missing, "seconds"] = np.interp(frame.loc[missing, "episode"], known["episode"], known["seconds"])
    return frame


def best_placement_trace(folder: Path):
    """``(placement dict, graph, trace)`` from a shipped run's ``best_placement.json`` (simulated), or ``None``."""
    import workbench as wb

    placement = read_json_object(folder / "best_placement.json")
    if not isinstance(placement.get("assignment"), list) or not isinstance(placement.get("graph"), str):
        return None
    try:
        graph = wb.bundled_graph(placement["graph"])
        devices = int(placement.get("devices") or max(placement["assignment"]) + 1)
        trace = wb.simulate(graph, placement["assignment"], devices).trace
    except (KeyError, ValueError, OSError, TypeError):
        return None
    return placement, graph, trace
