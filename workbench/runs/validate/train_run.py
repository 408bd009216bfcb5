"""The checks of a ``workbench train`` run directory: ``metrics.csv``, ``greedy.csv``, ``meta.json`` and the whole run."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..layout import GREEDY_COLUMNS, RunPaths

if TYPE_CHECKING:
    from ...graph import DataflowGraph
from .best import check_best
from .common import (
    LOSS_COLUMNS,
    RATIO_LIMIT,
    STATUSES,
    TOLERANCE,
    at_least,
    damaged,
    is_int,
    is_number,
    number_field,
    read_json_object,
    table_lines,
    whole_number,
    within,
)


@dataclass(frozen=True)
class RunPlan:
    """What a run's config says it does, episode by episode (built from a ``TrainConfig``; see ``workbench.training``)."""

    method: str
    seed: int
    devices: int
    graphs: tuple[str, ...]
    """The run's graph names, in the order episodes cycle through them."""
    stages: tuple[tuple[str, int, int], ...]
    """``(stage, first episode, end)`` per stage."""
    group: int
    """Rollouts per update in an RL stage (Stage I updates after every episode)."""
    greedy_every: int
    checkpoint_every: int
    lr: Mapping[str, tuple[float, float]]
    """Per stage, the smallest and largest learning rate its schedule reaches."""
    columns: tuple[str, ...]
    """The header of ``metrics.csv``."""
    bounds: Mapping[str, float]
    """Per graph, a lower bound on any simulated makespan (``workbench.sim.lower_bound``)."""

    @property
    def total(self) -> int:
        """Episodes in the whole run."""
        return self.stages[-1][2] if self.stages else 0

    @property
    def stage_names(self) -> tuple[str, ...]:
        return tuple(stage for stage, _, _ in self.stages)

    def _stage(self, episode: int) -> tuple[str, int, int]:
        return next((s for s in self.stages if s[1] <= episode < s[2]), self.stages[-1])

    def stage_of(self, episode: int) -> str:
        """The stage that trains ``episode``."""
        return self._stage(episode)[0]

    def graph_of(self, episode: int) -> str:
        """The graph that ``episode`` trains on (graphs cycle per update)."""
        stage, first, _ = self._stage(episode)
        group = 1 if stage == "il" else self.group
        return self.graphs[(first + (episode - first) // group) % len(self.graphs)]

    def _updates(self) -> list[tuple[str, int, int]]:
        """``(stage, episodes done, steps)`` after every update of the run, in order."""
        found = []
        for stage, first, end in self.stages:
            group, done = (1 if stage == "il" else self.group), first
            while done < end:
                steps = min(group, end - done)
                done += steps
                found.append((stage, done, steps))
        return found

    def next_checkpoint(self, episode: int) -> int:
        """The episode of the first checkpoint the run writes after ``episode`` (every ``checkpoint_every``, each stage's end)."""
        ends = {end for _, _, end in self.stages}
        return next(
            (
                done
                for _, done, steps in self._updates()
                if done > episode and (done in ends or _crossed(done, steps, self.checkpoint_every))
            ),
            self.total,
        )

    def evaluations(self) -> list[tuple[str, int]]:
        """Every greedy evaluation of the run, in the order ``greedy.csv`` logs them: ``(stage, episodes trained)``.

        Each RL stage evaluates at its start, after every update that crosses a
        multiple of ``greedy_every`` and at its end.
        """
        if not self.greedy_every:
            return []
        ends = {stage: end for stage, _, end in self.stages}
        found = [(stage, first) for stage, first, end in self.stages if stage != "il" and end > first]
        found += [
            (s, done) for s, done, steps in self._updates() if s != "il" and (done == ends[s] or _crossed(done, steps, self.greedy_every))
        ]
        order = {stage: index for index, stage in enumerate(self.stage_names)}
        return sorted(found, key=lambda item: (item[1], order[item[0]]))


def _crossed(episode: int, steps: int, every: int) -> bool:
    """Whether the ``steps`` episodes ending before ``episode`` passed a multiple of ``every`` (the trainer's rule)."""
    return episode // every > (episode - steps) // every


@dataclass(frozen=True)
class Progress:
    """Where the run's newest training checkpoint is: ``episode`` episodes done, last in ``stage`` (0 and ``None``: none)."""

    episode: int = 0
    stage: str | None = None

    def covers(self, stage: str, episode: int) -> bool:
        """Whether a greedy evaluation ``(stage, episode)`` came before this checkpoint (so it is kept on resume)."""
        return episode < self.episode or (episode == self.episode and stage == self.stage)


@dataclass(frozen=True)
class RunCheck:
    """A checked run directory: where resuming cuts each table, and how many episodes ``metrics.csv`` logs."""

    metrics_rows: int
    metrics_keep: int
    """Bytes of ``metrics.csv`` to keep: up to the last row before the checkpoint's episode."""
    greedy_keep: int | None
    """Bytes of ``greedy.csv`` to keep; ``None`` when the file is missing and nothing was due in it."""
    status: str
    """``meta.json``'s status, checked against the files."""


_REQUIRED = {
    **dict.fromkeys(("makespan", "reward", "loss", "loss_entropy", "lr", "seconds"), ("il", "sim", "real")),
    **dict.fromkeys(("baseline", "loss_policy"), ("sim", "real")),
    "loss_imitation": ("il",),
    "predicted": ("real",),
}
"""Which stages always log a metrics column (an empty field there is damage)."""


def _metrics_row(path: Path, plan: RunPlan, number: int, row: dict[str, str], seen: bool, seconds: float) -> float:
    """Check one row's text and number fields; returns its ``seconds``. ``seen``: the checkpoint has this episode (its
    values are checked for range too; a replayed row may hold the non-finite loss that stopped a run)."""
    episode, stage, graph = int(row["episode"]), row["stage"], row["graph"]
    if graph != plan.graph_of(episode):
        raise damaged(path, f"episode {episode} trains graph {plan.graph_of(episode)!r}, not {graph!r}", number, "graph")
    oracle = row["oracle"]
    if oracle not in ("sim", "real") or (oracle == "real" and stage != "real"):
        raise damaged(path, f"{oracle!r} is not an oracle of stage {stage!r}", number, "oracle")
    values = {}
    for column in plan.columns:
        if column in ("stage", "episode", "graph", "oracle"):
            continue
        if not seen and column in LOSS_COLUMNS:
            if row[column] not in ("", "nan", "inf", "-inf"):
                number_field(path, number, column, row[column], False)
            continue
        values[column] = number_field(path, number, column, row[column], seen and stage in _REQUIRED.get(column, ()))
    if not seen:
        return seconds
    bound = plan.bounds.get(graph, 0.0)
    for column, value in values.items():
        if value is None:
            continue
        if column == "makespan":  # Stage III's oracle may be a scaled simulator or a real system: its makespans are only positive
            at_least(path, number, column, value, bound if stage != "real" else math.ulp(0.0), "a lower bound on any schedule")
        elif column == "predicted":
            at_least(path, number, column, value, bound, "a lower bound on any schedule")
        elif column in ("reward", "baseline"):
            within(path, number, column, value, -RATIO_LIMIT, 0.0)
        elif column in ("teacher_agreement", "epsilon"):
            within(path, number, column, value, 0.0, 1.0)
        elif column == "lr":
            within(path, number, column, value, *plan.lr[stage])
        elif column == "seconds":
            at_least(path, number, column, value, seconds, "the seconds of the row before")
    return values["seconds"] or 0.0


def check_metrics(path: str | os.PathLike, plan: RunPlan, progress: Progress) -> tuple[int, int, list[dict[str, str]]]:
    """``metrics.csv`` checked against ``plan``: ``(rows, bytes to keep, rows)``.

    One row per episode ``0, 1, ...`` at least up to the checkpoint's, each
    with the stage and graph the plan gives it, every number finite and in
    its range (:data:`_REQUIRED` says which a stage must log), ``seconds``
    never decreasing. Rows after the checkpoint (replayed on resume) are
    checked for form only. A half-written last line is allowed.
    """
    path = Path(path)
    if not path.is_file():
        if progress.episode == 0:  # killed before the header was written: nothing logged, nothing lost
            return 0, 0, []
        raise damaged(path, f"missing, but the checkpoint is at episode {progress.episode}")
    rows: list[dict[str, str]] = []
    seconds = 0.0
    end, lines = table_lines(path, plan.columns)
    for number, offset, fields in lines:
        row = dict(zip(plan.columns, fields, strict=True))
        episode, expected = whole_number(path, number, "episode", row["episode"]), len(rows)
        if episode != expected:
            fault = f"episode {episode} appears twice" if episode < expected else f"episodes {expected}..{episode - 1} are missing"
            raise damaged(path, f"{fault} (expected episode {expected})", number, "episode")
        if episode >= plan.next_checkpoint(progress.episode):
            raise damaged(
                path,
                f"episode {episode} comes after the checkpoint at episode {plan.next_checkpoint(progress.episode)}, which is not there "
                f"(the newest is at episode {progress.episode})",
                number,
                "episode",
            )
        if row["stage"] != plan.stage_of(episode):
            raise damaged(
                path, f"episode {episode} has stage {row['stage']!r}, the config says {plan.stage_of(episode)!r}", number, "stage"
            )
        seconds = _metrics_row(path, plan, number, row, episode < progress.episode, seconds)
        if episode < progress.episode:
            end = offset
        rows.append(row)
    if len(rows) < progress.episode:
        raise damaged(
            path,
            f"ends at episode {len(rows) - 1} but the checkpoint is at episode {progress.episode}: rows are missing (a truncated file, "
            "or a checkpoint from another run)",
        )
    return len(rows), end, rows


def check_greedy(path: str | os.PathLike, plan: RunPlan, progress: Progress) -> int | None:
    """``greedy.csv`` checked against the evaluations ``plan`` makes: the bytes to keep (``None``: missing, none due).

    Its rows must be the plan's evaluations in order (one row per graph each),
    every one the checkpoint comes after present, each ``greedy`` finite and
    no better than a lower bound (simulated stages), ``seconds`` never decreasing.
    """
    path = Path(path)
    due = [(stage, episode, graph) for stage, episode in plan.evaluations() for graph in plan.graphs]
    kept = sum(progress.covers(stage, episode) for stage, episode, _ in due)
    if not path.is_file():
        if kept:
            raise damaged(path, f"missing, but {kept // len(plan.graphs)} greedy evaluation(s) came before the checkpoint")
        return None
    seconds = 0.0
    end, rows = table_lines(path, GREEDY_COLUMNS)
    for index, (number, offset, fields) in enumerate(rows):
        row = dict(zip(GREEDY_COLUMNS, fields, strict=True))
        episode = whole_number(path, number, "episode", row["episode"])
        if index >= len(due):
            raise damaged(path, f"the run makes {len(due) // len(plan.graphs)} greedy evaluation(s); this row is one too many", number)
        stage, wanted, graph = due[index]
        for column, value, expected in (("stage", row["stage"], stage), ("episode", episode, wanted), ("graph", row["graph"], graph)):
            if value != expected:
                raise damaged(path, f"{value!r} where the run's evaluation {index + 1} has {expected!r}", number, column)
        greedy = number_field(path, number, "greedy", row["greedy"], True)
        taken = number_field(path, number, "seconds", row["seconds"], True)
        assert greedy is not None and taken is not None
        at_least(path, number, "greedy", greedy, plan.bounds.get(graph, 0.0) if stage != "real" else math.ulp(0.0), "a lower bound")
        at_least(path, number, "seconds", taken, seconds, "the seconds of the row before")
        seconds = taken
        if index < kept:
            end = offset
    if len(rows) < kept:
        raise damaged(path, f"holds {len(rows)} row(s) but the checkpoint comes after {kept}: evaluations are missing")
    return end


def check_meta(path: str | os.PathLike, meta: Any, plan: RunPlan, progress: Progress, rows: int) -> str:
    """``meta.json`` checked against ``plan``, the checkpoint and ``rows`` (episodes in ``metrics.csv``): its status.

    Every field this workbench writes has its type and range; ``status`` must
    agree with the files (``finished``: the checkpoint at the last episode and
    the final ``evaluation``; ``diverged``: ``diverged_at`` and ``error``).
    """
    path = Path(path)
    if not isinstance(meta, dict):
        raise damaged(path, f"holds a JSON {type(meta).__name__}, not an object")

    def field(name: str, ok: bool, wanted: str) -> None:
        if not ok:
            shown = repr(meta[name]) if name in meta else "missing"
            raise damaged(path, f"{shown[:80]} where the run needs {wanted}", field=name)

    for name, expected in (("method", plan.method), ("seed", plan.seed), ("devices", plan.devices)):
        field(name, meta.get(name) == expected and type(meta.get(name)) is type(expected), repr(expected))
    field("graphs", meta.get("graphs") == list(plan.graphs), repr(list(plan.graphs)))
    field("stages", meta.get("stages") == list(plan.stage_names), repr(list(plan.stage_names)))
    field("status", meta.get("status") in STATUSES, f"one of {', '.join(STATUSES)}")
    field("run_id", isinstance(meta.get("run_id"), str) and bool(meta["run_id"]), "the run's id (a string)")
    for name in ("started", "updated", "command"):
        field(name, isinstance(meta.get(name), str), "a string")
    field("error", meta.get("error") is None or isinstance(meta.get("error"), str), "null or a string")
    done = meta.get("episodes_done", 0)
    field("episodes_done", is_int(done) and 0 <= done <= progress.episode, f"a whole number up to the checkpoint's {progress.episode}")
    _check_reference(path, meta.get("reference"), plan)
    for stage in plan.stage_names:
        key = f"greedy_selection_{stage}"
        if key in meta:
            _check_selection(path, key, meta[key], plan, stage)
    stray = [key for key in meta if key.startswith("greedy_selection_") and key.removeprefix("greedy_selection_") not in plan.stage_names]
    if stray:
        raise damaged(path, "not a stage of this run", field=stray[0])
    status = meta["status"]
    if status == "finished":
        evaluation = meta.get("evaluation")
        field(
            "status",
            progress.episode == plan.total and rows == plan.total,
            f"a finished run's checkpoint and metrics at episode {plan.total}, not {progress.episode} and {rows} rows",
        )
        field(
            "evaluation",
            isinstance(evaluation, dict)
            and all(isinstance(evaluation.get(g), dict) and is_number(evaluation[g].get("greedy")) for g in plan.graphs),
            "a finished run's greedy evaluation of every graph",
        )
        field("finished", isinstance(meta.get("finished"), str), "a finished run's time (a string)")
    elif status == "diverged":
        at = meta.get("diverged_at")
        field(
            "diverged_at",
            is_int(at) and progress.episode <= at <= rows and at < plan.total,
            f"the episode a diverged run stopped in (from the checkpoint's {progress.episode} to the one after the last logged, {rows})",
        )
        field("error", isinstance(meta.get("error"), str) and bool(meta["error"].strip()), "what diverged (a diverged run says)")
    return str(status)


def _check_reference(path: Path, reference: Any, plan: RunPlan) -> None:
    if not isinstance(reference, dict) or sorted(reference) != sorted(plan.graphs):
        raise damaged(path, f"needs the reference makespans of the graphs {', '.join(plan.graphs)}", field="reference")
    for graph, values in reference.items():
        ok = isinstance(values, dict) and isinstance(values.get("best_heuristic_method"), str)
        cp, best = (values.get("critical_path"), values.get("best_heuristic")) if isinstance(values, dict) else (None, None)
        bound = plan.bounds.get(graph, 0.0)
        ok = ok and is_number(cp) and is_number(best) and bound * (1 - TOLERANCE) <= best <= cp and best > 0
        if not ok:
            raise damaged(
                path, f"{graph}: needs finite critical_path ≥ best_heuristic ≥ the lower bound {bound!r}, and the method", field="reference"
            )


def _check_selection(path: Path, key: str, value: Any, plan: RunPlan, stage: str) -> None:
    record = value if isinstance(value, dict) else {}
    episode, greedy, evaluations = record.get("episode"), record.get("greedy"), record.get("evaluations")
    ok = is_int(evaluations) and evaluations >= 0 and (episode is None or (is_int(episode) and 0 <= episode <= plan.total))
    if isinstance(greedy, dict) and set(greedy) <= set(plan.graphs):
        floor = 0.0 if stage == "real" else 1.0
        ok = ok and all(is_number(v) and v > 0 and v >= floor * plan.bounds.get(g, 0.0) * (1 - TOLERANCE) for g, v in greedy.items())
    else:
        ok = False
    if not ok:
        raise damaged(path, "needs evaluations (≥ 0), the kept episode and finite greedy makespans of the run's graphs", field=key)


# --- the whole directory ------------------------------------------------------------------------------------------
def check_run(path: str | os.PathLike, plan: RunPlan, graphs: Mapping[str, DataflowGraph], progress: Progress) -> RunCheck:
    """Check every file of the run directory ``path`` whose newest checkpoint is ``progress`` (see the module docstring).

    Reads only: a damaged directory is a :class:`RunDamaged` naming the file, line and field.
    """
    paths = RunPaths(path)
    if not paths.meta_path.is_file():
        raise damaged(paths.meta_path, "missing, so the run's status and references are lost")
    meta = read_json_object(paths.meta_path)
    rows, keep, logged = check_metrics(paths.metrics_path, plan, progress)
    greedy = check_greedy(paths.greedy_path, plan, progress)
    status = check_meta(paths.meta_path, meta, plan, progress, rows)
    check_best(paths, plan, graphs, logged, progress)
    return RunCheck(rows, keep, greedy, status)
