"""The checks of a run's ``best/`` folder: each placement file re-simulated, against what ``metrics.csv`` logged."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..layout import RunPaths

if TYPE_CHECKING:
    from ...graph import DataflowGraph
from .common import (
    TOLERANCE,
    RunDamaged,
    close_to,
    damaged,
    is_int,
    is_number,
)

if TYPE_CHECKING:
    from .train_run import Progress, RunPlan


# --- best/ ---------------------------------------------------------------------------------------------------------
def best_subdir(graphs: Sequence[str], graph: str) -> str | None:
    """The folder under ``best/`` that holds the best placement of ``graph``: none, or ``<graph>`` when the run trains
    several graphs (:meth:`~workbench.runs.RunPaths.best_placement_path`)."""
    return None if len(graphs) == 1 else graph.replace("/", "_")


def best_folder(paths: RunPaths, graphs: Sequence[str], graph: str) -> Path:
    """Where the best placement of ``graph`` is: ``best/``, or ``best/<graph>/`` when the run trains several graphs."""
    return paths.best_placement_path(best_subdir(graphs, graph)).parent


def simulated_makespan(row: Mapping[str, str]) -> float | None:
    """The simulated makespan a metrics row logs (``predicted`` in Stage III), ``None`` when it is not a finite number."""
    try:
        value = float(row["predicted"] if row["stage"] == "real" else row["makespan"])
    except (KeyError, ValueError):
        return None
    return value if math.isfinite(value) else None


def check_best(
    paths: RunPaths, plan: RunPlan, graphs: Mapping[str, DataflowGraph], rows: Sequence[Mapping[str, str]], progress: Progress
) -> None:
    """``best/``: for every graph with an episode before the checkpoint, a placement of that graph on the run's devices
    whose makespan is what its assignment simulates to, logged by the episode it names, and no worse than any episode
    before the checkpoint; and its trace. With several graphs ``best/`` mirrors the first graph's (checked as a placement)."""
    folders = [(graph, best_folder(paths, plan.graphs, graph)) for graph in plan.graphs]
    if len(plan.graphs) > 1:
        folders.append((plan.graphs[0], paths.best_dir))
    for graph, folder in folders:
        logged = {int(row["episode"]): simulated_makespan(row) for row in rows if row["graph"] == graph}
        seen = [value for episode, value in logged.items() if episode < progress.episode and value is not None]
        placement = folder / "placement.json"
        if not placement.is_file():
            if seen:
                raise damaged(placement, f"missing, but metrics.csv logs {len(seen)} episode(s) of {graph} before the checkpoint")
            continue
        mirror = folder == paths.best_dir and len(plan.graphs) > 1
        best = _check_placement(placement, plan, graph, graphs[graph])
        if not mirror:
            _check_against_metrics(placement, best, logged, seen)
        _check_trace(folder / "trace.json")


def _check_placement(path: Path, plan: RunPlan, name: str, graph: DataflowGraph) -> dict[str, Any]:
    """A best placement file checked as a placement of ``graph`` and re-simulated; returns its fields besides the placement."""
    from ...placers.placement_file import PlacementError, check_placement, read_placement_file
    from ...sim import simulate

    try:
        data = read_placement_file(path)
        checked = check_placement(data, graph, plan.devices, source=str(path))
    except PlacementError as exc:
        raise RunDamaged(f"{exc}; refusing to resume (nothing was changed)") from None
    fields = checked.fields
    if data.get("graph") != name:
        raise damaged(path, f"{data.get('graph')!r} where the run names the graph {name!r}", field="graph")
    if fields.get("method") != plan.method:
        raise damaged(path, f"{fields.get('method')!r} where the run trains {plan.method!r}", field="method")
    if fields.get("stage") not in (*plan.stage_names, "search"):
        raise damaged(path, f"{fields.get('stage')!r} is not a stage of the run, nor 'search'", field="stage")
    episode = fields.get("episode")
    if not is_int(episode) or not 0 <= episode <= plan.total:
        raise damaged(path, f"{episode!r} is not an episode of the run (0..{plan.total})", field="episode")
    makespan = fields.get("makespan")
    if not is_number(makespan):
        raise damaged(path, f"{makespan!r} is not a finite number", field="makespan")
    simulated = simulate(graph, checked.assignment, plan.devices).makespan
    if not close_to(makespan, simulated):
        raise damaged(path, f"{makespan!r}, but its assignment simulates to {simulated!r}", field="makespan")
    return fields


def _check_against_metrics(path: Path, best: Mapping[str, Any], logged: Mapping[int, float | None], seen: list[float]) -> None:
    """The best placement is the one its episode logged (unless the final search found it) and no episode before the
    checkpoint did better."""
    episode, makespan = best["episode"], best["makespan"]
    if best["stage"] != "search":
        value = logged.get(episode)
        if value is None or not close_to(value, makespan):
            shown = "no such episode" if episode not in logged else f"{value!r}"
            raise damaged(
                path, f"episode {episode} logged a simulated makespan of {shown} in metrics.csv, not {makespan!r}", field="episode"
            )
    if seen and makespan > min(seen) * (1 + TOLERANCE):
        raise damaged(path, f"{makespan!r} is worse than {min(seen)!r}, logged before the checkpoint: it is not the best", field="makespan")


def _check_trace(path: Path) -> None:
    from ...sim import Trace

    if not path.is_file():
        raise damaged(path, "missing beside its placement.json (written first)")
    try:
        Trace.from_json(path)
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise damaged(path, f"not a trace ({type(exc).__name__}: {exc})") from None
