"""A run's greedy evaluations as one curve: the periodic ones of ``greedy.csv``, the kept weights' and the final policy's.

Training records a greedy placement's makespan in three places: every
``greedy_every`` episodes in ``greedy.csv``, the kept weights of each stage in
``meta.json``'s ``greedy_selection_<stage>``, and the final policy in
``meta.json``'s ``evaluation``. :func:`greedy_evaluations` puts them in one
frame for a chart (:func:`workbench.viz.training_curves`' ``greedy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .layout import STAGE_NAMES

if TYPE_CHECKING:
    import pandas as pd

    from .read import Run


GREEDY_PERIODIC = "greedy evaluations"
"""The ``what`` of a run's periodic greedy evaluations (``greedy.csv``): drawn as a line; other greedy points as large diamonds."""
_COLUMNS = ["episode", "seconds", "makespan", "stage", "what"]


def _periodic(periodic: pd.DataFrame, graph: str | None) -> list[dict[str, Any]]:
    """The rows of ``greedy.csv`` for ``graph`` (all of them when the run has one graph and none is named)."""
    if not {"episode", "graph", "greedy"} <= set(periodic.columns):
        return []
    mine = periodic[periodic["graph"] == graph] if graph is not None or periodic["graph"].nunique() > 1 else periodic
    seconds = mine["seconds"] if "seconds" in mine else [float("nan")] * len(mine)
    return [
        {"episode": float(episode), "seconds": float(second), "makespan": float(greedy), "stage": str(stage), "what": GREEDY_PERIODIC}
        for episode, second, greedy, stage in zip(mine["episode"], seconds, mine["greedy"], mine["stage"], strict=True)
    ]


def _kept(meta: dict[str, Any], graph: str | None) -> list[dict[str, Any]]:
    """The greedy makespan of each stage's kept weights (``greedy_selection_<stage>``)."""
    rows = []
    for key, value in meta.items():
        if key.startswith("greedy_selection_") and isinstance(value, dict) and isinstance(value.get("greedy"), dict):
            makespans = value["greedy"]
            name = graph if graph in makespans else next(iter(makespans), None)
            if name is not None and isinstance(value.get("episode"), (int, float)):
                stage = key.removeprefix("greedy_selection_")
                what = f"greedy, kept {STAGE_NAMES.get(stage, stage).partition(':')[0]} weights"
                rows.append({"episode": float(value["episode"]), "makespan": float(makespans[name]), "stage": stage, "what": what})
    return rows


def _final(meta: dict[str, Any], graph: str | None) -> list[dict[str, Any]]:
    """The final policy's greedy makespan (``evaluation``, simulated, so stage ``sim``) at the last episode."""
    evaluation = meta.get("evaluation")
    if not isinstance(evaluation, dict) or not evaluation or not isinstance(meta.get("episodes_done"), (int, float)):
        return []
    entry = evaluation.get(graph) if graph in evaluation else next(iter(evaluation.values()))
    if not isinstance(entry, dict) or not isinstance(entry.get("greedy"), (int, float)):
        return []
    return [{"episode": float(meta["episodes_done"]), "makespan": float(entry["greedy"]), "stage": "sim", "what": "greedy, final policy"}]


def greedy_evaluations(run: Run, graph: str | None = None) -> pd.DataFrame:
    """The greedy makespans ``run`` recorded for ``graph`` (default: its only graph), at their episode and training second.

    Columns ``episode``, ``seconds``, ``makespan``, ``stage``, ``what``: every periodic evaluation (``what``
    :data:`GREEDY_PERIODIC`), then each stage's kept weights and the final
    policy. Runs without ``greedy.csv`` (the shipped ones) have only the
    latter two; their training second is interpolated from ``metrics.csv``.
    """
    import numpy as np
    import pandas as pd

    meta = run.meta or {}
    rows = _periodic(run.greedy, graph) + _kept(meta, graph) + _final(meta, graph)
    frame = pd.DataFrame(rows, columns=_COLUMNS)
    missing = frame["seconds"].isna()
    metrics = run.metrics
    if missing.any() and not metrics.empty and {"episode", "seconds"} <= set(metrics.columns):
        known = metrics[["episode", "seconds"]].dropna().sort_values("episode")
        if len(known):
            frame.loc[missing, "seconds"] = np.interp(frame.loc[missing, "episode"], known["episode"], known["seconds"])
    return frame
