"""The checks of the corpus and gate trainers' run directories: declared columns, scorings and teachers."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..layout import RunPaths

if TYPE_CHECKING:
    from ...graph import DataflowGraph
from .common import (
    at_least,
    close_to,
    damaged,
    is_int,
    is_number,
    number_field,
    read_json_object,
    table_lines,
    whole_number,
    within,
)


# --- the corpus and gate trainers' run directories ----------------------------------------------------------------
@dataclass(frozen=True)
class Column:
    """How one field of a trainer's table is checked: a whole number (``kind="whole"``), a number in ``low .. high``
    (finite unless ``finite`` is false: NaN and infinities are then read as written) or text (one of ``choices`` when
    given); ``optional``: it may be empty."""

    kind: str = "number"
    low: float = -math.inf
    high: float = math.inf
    optional: bool = False
    finite: bool = True
    choices: tuple[str, ...] = ()


POSITIVE = math.ulp(0.0)
"""The smallest positive float: the low end of a ratio of makespans."""
NON_FINITE = ("nan", "inf", "-inf")
"""How a non-finite float is written in a table (``repr``)."""
CORPUS_METRICS = {
    "episode": Column("whole"),
    "graph": Column("text"),
    "devices": Column("whole", 1),
    "loss": Column(finite=False),
    "teacher_agreement": Column(low=0.0, high=1.0, optional=True),
    "makespan_over_teacher": Column(low=POSITIVE, optional=True),
    "makespan_over_critical_path": Column(low=POSITIVE, optional=True),
    "seconds": Column(low=0.0),
}
"""``metrics.csv`` of the corpus trainer: one row per episode (the teacher columns are empty in a reinforce run, and every
column but the loss in the row of an episode whose update failed on non-finite values)."""
CORPUS_SELECTION = {
    "episode": Column("whole"),
    "wins": Column(low=0.0, high=1.0),
    "mean_over_critical_path": Column(low=POSITIVE),
    "best": Column("whole", 0, 1),
}
"""``selection.csv`` of the corpus trainer: one row per greedy scoring of the held-out split."""
GATE_SELECTION = {
    "step": Column("whole"),
    "wins": Column(low=0.0, high=1.0, optional=True),
    "mean_over_critical_path": Column(low=POSITIVE, optional=True),
    "best": Column("whole", 0, 1),
    "loss": Column(low=POSITIVE, finite=False),
}
"""``selection.csv`` of the gate trainer: one row per scoring of the gate, and a last row with a non-finite loss (scores
empty) when the training diverged."""


def _value(path: Path, number: int, name: str, text: str, column: Column) -> Any:
    if column.kind == "text":
        if column.choices and text not in column.choices:
            raise damaged(path, f"{text!r} is not one of {', '.join(column.choices)}", number, name)
        return text
    if text == "" and column.optional:
        return None
    if column.kind == "whole":
        value: float = whole_number(path, number, name, text)
    elif not column.finite and text in NON_FINITE:
        return float(text)
    else:
        value = number_field(path, number, name, text, True) or 0.0
    within(path, number, name, value, column.low, column.high)
    return value


def check_table(path: Path, columns: Mapping[str, Column]) -> list[tuple[int, dict[str, Any]]]:
    """Every whole row of the table ``path`` (its header: the names of ``columns``), each field checked by its
    :class:`Column`: ``(line number, values)``. A half-written last line is left out."""
    _, lines = table_lines(path, tuple(columns))
    return [
        (number, {name: _value(path, number, name, text, column) for (name, column), text in zip(columns.items(), fields, strict=True)})
        for number, _, fields in lines
    ]


@dataclass(frozen=True)
class TrainerCheck:
    """A checked corpus or gate run directory: its status, derived from the files (``new``, ``interrupted``,
    ``finished`` or ``diverged``), why it diverged, and which scoring kept ``<stage>-best.safetensors``."""

    status: str
    reason: str = ""
    best_at: int | None = None
    """The episode (corpus) or step (gate) of the last scoring that kept ``<stage>-best.safetensors``; None: none did."""


def _non_finite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def _check_scores(path: Path, rows: list[tuple[int, dict[str, Any]]], at: str) -> int | None:
    """Each scoring's ``best`` is 1 exactly when it wins more often than every one before (or as often, closer to
    critical_path's makespan); returns the ``at`` of the last that is."""
    record, kept = None, None
    for number, row in rows:
        if row["wins"] is None:
            continue
        score = (row["wins"], -row["mean_over_critical_path"])
        if row["best"] != int(record is None or score > record):
            raise damaged(path, f"{row['best']} where the scores before make it {int(not row['best'])}", number, "best")
        if row["best"]:
            record, kept = score, row[at]
    return kept


@dataclass(frozen=True)
class CorpusPlan:
    """What a corpus training run's config says it does (built by :mod:`workbench.training.corpus_training`)."""

    imitation: bool
    """Stage I (replaying the teachers of ``teachers.json``) or Stage II (reinforce)."""
    episodes: int
    checkpoint_every: int
    select_every: int
    pair_of: Callable[[int], str]
    """The pair (``graph@devices``) an episode trains."""
    pairs: Mapping[str, tuple[DataflowGraph, int, float]]
    """Per pair: the graph, the device count and critical_path's makespan."""
    floors: Mapping[str, float]
    """Per pair, the smallest makespan over critical_path's any placement reaches (its lower bound over critical_path's)."""
    selection_floor: float
    """The smallest mean makespan over critical_path's the selection pairs can score (from their lower bounds)."""

    @property
    def stage(self) -> str:
        """The run's stage as ``workbench train`` names it, ``il`` (imitation) or ``sim`` (reinforce on the simulator): its
        kept weights are ``checkpoints/<stage>-best``."""
        return "il" if self.imitation else "sim"


def check_corpus_run(path: str | os.PathLike, plan: CorpusPlan, episode: int) -> TrainerCheck:
    """Every file of the corpus run ``path`` whose ``last.safetensors`` is at ``episode`` (0: none), besides the
    checkpoints' own contents (the trainer's, with torch): ``teachers.json``, ``metrics.csv``, ``selection.csv`` and
    whether ``<stage>-best.safetensors`` is there. Reads only; a damaged directory is a :class:`RunDamaged`.

    ``metrics.csv`` is written before the checkpoint that covers it, so rows past ``episode`` (at most a checkpoint's
    worth) are there after a kill, and the run's last row when it diverged (a non-finite loss).
    """
    paths = RunPaths(path)
    if plan.imitation and (paths.path / "teachers.json").is_file():
        _check_teachers(paths.path / "teachers.json", plan, episode)
    elif plan.imitation and episode:
        raise damaged(paths.path / "teachers.json", f"missing, but the checkpoint is at episode {episode}")
    rows = check_table(paths.metrics_path, CORPUS_METRICS) if paths.metrics_path.is_file() else []
    if not paths.metrics_path.is_file() and episode:
        raise damaged(paths.metrics_path, f"missing, but the checkpoint is at episode {episode}")
    reason = ""
    for index, (number, row) in enumerate(rows):
        if row["episode"] != index:
            raise damaged(paths.metrics_path, f"{row['episode']} where episode {index} comes next", number, "episode")
        if index >= episode + plan.checkpoint_every:
            raise damaged(
                paths.metrics_path,
                f"episode {index} is more than checkpoint_every ({plan.checkpoint_every}) past the checkpoint at episode {episode}",
                number,
                "episode",
            )
        key = f"{row['graph']}@{row['devices']}"
        if key != plan.pair_of(index):
            raise damaged(paths.metrics_path, f"episode {index} trains {plan.pair_of(index)}, not {key}", number, "graph")
        if _non_finite(row["loss"]):
            if index < episode or index != len(rows) - 1:
                raise damaged(paths.metrics_path, f"{row['loss']!r} is not finite", number, "loss")
            reason = f"diverged in episode {index} ({key}): the loss is {row['loss']}"
            continue
        for name, logged in (
            ("teacher_agreement", plan.imitation),
            ("makespan_over_teacher", plan.imitation),
            ("makespan_over_critical_path", True),
        ):
            if (row[name] is None) == logged:
                fault = "empty, but this run logs it" if logged else "a reinforce run has no teacher to log"
                raise damaged(paths.metrics_path, fault, number, name)
        ratio = row["makespan_over_critical_path"]
        at_least(paths.metrics_path, number, "makespan_over_critical_path", ratio, plan.floors[key], "the lower bound")
    if len(rows) < episode:
        raise damaged(paths.metrics_path, f"ends at episode {len(rows) - 1} but the checkpoint is at episode {episode}: rows are missing")
    best_at = _check_corpus_selection(paths, plan, episode)
    if reason:
        return TrainerCheck("diverged", reason, best_at)
    status = "finished" if episode >= plan.episodes else "interrupted" if rows or episode else "new"
    return TrainerCheck(status, "", best_at)


def _check_corpus_selection(paths: RunPaths, plan: CorpusPlan, episode: int) -> int | None:
    path = paths.path / "selection.csv"
    rows = check_table(path, CORPUS_SELECTION) if path.is_file() else []
    every = plan.select_every
    for index, (number, row) in enumerate(rows):
        if not every:
            raise damaged(path, "a scoring, but this run scores nothing (select_every 0)", number)
        if row["episode"] != index * every:
            raise damaged(path, f"{row['episode']} where the run's scoring {index + 1} is at episode {index * every}", number, "episode")
        if row["episode"] > episode + plan.checkpoint_every:
            raise damaged(path, f"episode {row['episode']} is more than a checkpoint past the checkpoint at {episode}", number, "episode")
        at_least(path, number, "mean_over_critical_path", row["mean_over_critical_path"], plan.selection_floor, "the lower bound")
    due = episode // every + 1 if every and episode else 0
    if len(rows) < due:
        raise damaged(path, f"holds {len(rows)} scoring(s), but {due} came before the checkpoint at episode {episode}")
    best_at = _check_scores(path, [(n, r) for n, r in rows if r["episode"] <= episode], "episode")
    if best_at is not None and not paths.best_checkpoint(plan.stage).is_file():
        raise damaged(paths.best_checkpoint(plan.stage), f"missing, but selection.csv keeps the weights of episode {best_at}")
    return best_at


TEACHER_FIELDS = ("assignment", "makespan", "critical_path", "seconds")


def _check_teachers(path: Path, plan: CorpusPlan, episode: int) -> None:
    """``teachers.json``: for pairs of this run only, a placement of the pair's graph whose makespan is what it simulates
    to, critical_path's makespan and the search's seconds; every pair's once training began."""
    from ...sim import simulate

    teachers = read_json_object(path)
    for key, record in teachers.items():
        if key not in plan.pairs:
            raise damaged(path, "not a pair (graph@devices) of this run", field=key)
        graph, devices, critical = plan.pairs[key]
        if not isinstance(record, dict) or sorted(record) != sorted(TEACHER_FIELDS):
            raise damaged(path, f"needs exactly {', '.join(TEACHER_FIELDS)}", field=key)
        assignment = record["assignment"]
        if not isinstance(assignment, list) or len(assignment) != graph.num_nodes:
            raise damaged(path, f"the assignment must list a device for each of the {graph.num_nodes} ops", field=f"{key}.assignment")
        if not all(is_int(d) and 0 <= d < devices for d in assignment):
            raise damaged(path, f"the assignment must hold devices 0..{devices - 1}", field=f"{key}.assignment")
        for name, expected in (("makespan", simulate(graph, assignment, devices).makespan), ("critical_path", critical)):
            if not is_number(record[name]) or not close_to(record[name], expected):
                raise damaged(path, f"{str(record[name])[:40]}, but it is {expected!r}", field=f"{key}.{name}")
        if not is_number(record["seconds"]) or record["seconds"] < 0:
            raise damaged(path, f"{str(record['seconds'])[:40]} is not a time", field=f"{key}.seconds")
    missing = [key for key in plan.pairs if key not in teachers]
    if episode and missing:
        raise damaged(path, f"lacks the teacher of {missing[0]}, but the checkpoint is at episode {episode}")


GATE_STAGE = "gate"
"""The gate trainer's one stage: its kept weights are ``checkpoints/gate-best``."""


@dataclass(frozen=True)
class GatePlan:
    """What a gate training run's config says it does (built by :mod:`workbench.training.gate_training`)."""

    rules: tuple[str, ...]
    pairs: tuple[tuple[str, str, float], ...]
    """``(split, pair, floor)`` per row of ``costs.csv``, in order: the floor is the pair's lower bound over critical_path's."""
    steps: int
    select_every: int


def check_gate_run(path: str | os.PathLike, plan: GatePlan) -> TrainerCheck:
    """``costs.csv``, ``selection.csv`` and whether ``gate-best.safetensors`` is there, of the gate run ``path``; its status:
    ``finished`` once every scoring of the plan is logged, ``diverged`` when the last row's loss is not finite. Reads only."""
    paths = RunPaths(path)
    costs, selection = paths.path / "costs.csv", paths.path / "selection.csv"
    rows = check_table(selection, GATE_SELECTION) if selection.is_file() else []
    if rows and not costs.is_file():
        raise damaged(costs, "missing, but selection.csv logs scorings (the costs are written first)")
    if costs.is_file():
        _check_costs(costs, plan)
    reason, due = "", plan.steps // plan.select_every + 1
    for index, (number, row) in enumerate(rows):
        if _non_finite(row["loss"]):
            if index != len(rows) - 1 or row["wins"] is not None or row["best"]:
                raise damaged(selection, f"{row['loss']!r} is not finite", number, "loss")
            reason = f"diverged at step {row['step']}: the loss is {row['loss']}"
            continue
        if row["step"] != index * plan.select_every or index >= due:
            raise damaged(
                selection, f"{row['step']} where the run's scoring {index + 1} is at step {index * plan.select_every}", number, "step"
            )
        for name in ("wins", "mean_over_critical_path"):
            if row[name] is None:
                raise damaged(selection, "empty, but every scoring logs it", number, name)
        floor = min((f for split, _, f in plan.pairs if split != "train"), default=POSITIVE)
        at_least(selection, number, "mean_over_critical_path", row["mean_over_critical_path"], floor, "the lower bound")
    best_at = _check_scores(selection, rows, "step")
    if best_at is not None and not paths.best_checkpoint(GATE_STAGE).is_file():
        raise damaged(paths.best_checkpoint(GATE_STAGE), f"missing, but selection.csv keeps the weights of step {best_at}")
    if reason:
        return TrainerCheck("diverged", reason, best_at)
    return TrainerCheck("finished" if len(rows) == due else "interrupted" if rows else "new", "", best_at)


def _check_costs(path: Path, plan: GatePlan) -> None:
    columns = {"split": Column("text"), "pair": Column("text"), **{rule: Column(low=POSITIVE) for rule in plan.rules}}
    rows = check_table(path, columns)
    if len(rows) != len(plan.pairs):
        raise damaged(path, f"holds {len(rows)} row(s); the run places {len(plan.pairs)} pairs")
    for (number, row), (split, pair, floor) in zip(rows, plan.pairs, strict=True):
        for name, expected in (("split", split), ("pair", pair)):
            if row[name] != expected:
                raise damaged(path, f"{row[name]!r} where the run's row has {expected!r}", number, name)
        for rule in plan.rules:
            at_least(path, number, rule, row[rule], floor, "the lower bound")
