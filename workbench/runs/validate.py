"""Checking a run directory before it is resumed: every field of every file, against the run's plan and each other.

``workbench train`` resumes a run from its newest checkpoint. Before anything
is written, :func:`check_run` reads ``metrics.csv``, ``greedy.csv``,
``meta.json`` and ``best/`` and checks each field for its type and range and
the files against each other and against the :class:`RunPlan` (what the
run's config says each episode trains, and when it evaluates). A damaged
directory is refused with a :class:`RunDamaged` naming the file, the line
(CSV) and the field; nothing is changed. What it returns says where each
table is cut (:class:`RunCheck`): only the rows of episodes the checkpoint has
not seen (they are replayed) go, by truncation, so every earlier byte stays.

``status`` in ``meta.json`` is not trusted but checked against the files: a
run is ``finished`` only when its newest checkpoint is at the last episode
and ``meta.json`` holds the final evaluation, ``diverged`` only with the
episode and the reason. No torch: ``best/`` is checked with the placement
file reader and re-simulated (:mod:`workbench.placers`, :mod:`workbench.sim`,
imported when used).
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from .layout import GREEDY_COLUMNS, RunPaths

if TYPE_CHECKING:
    from ..graph import DataflowGraph

__all__ = [
    "RunDamaged",
    "RunPlan",
    "Progress",
    "RunCheck",
    "STATUSES",
    "check_run",
    "check_metrics",
    "check_greedy",
    "check_meta",
    "check_best",
    "best_folder",
    "read_json_object",
]

STATUSES = ("running", "interrupted", "failed", "finished", "diverged")
"""The values of ``meta.json``'s ``status``."""
LOSS_COLUMNS = ("loss", "loss_policy", "loss_entropy", "loss_imitation")
RATIO_LIMIT = 1e9
"""Rewards and baselines are minus a makespan over the teacher's (times a wait penalty): never beyond this."""
TOLERANCE = 1e-9
"""Relative slack of a float compared with a bound or with its re-simulated value."""


class RunDamaged(ValueError):
    """A run directory that cannot be resumed as it is: the message names the file, the line and the field."""


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


def _damaged(path: Path, fault: str, line: int | None = None, field: str | None = None) -> RunDamaged:
    where = "".join([f" line {line}" if line is not None else "", f" field {field!r}" if field is not None else ""])
    return RunDamaged(f"{path}{where}: {fault}; refusing to resume (nothing was changed)")


# --- the CSV tables ------------------------------------------------------------------------------------------------
def _lines(path: Path, columns: tuple[str, ...]) -> tuple[int, list[tuple[int, int, list[str]]]]:
    """The byte offset where the header ends, and ``(line number, byte offset of the line's end, fields)`` of every whole
    row after it; the header must equal ``columns``.

    A half-written last line (no newline) is left out: it is no damage.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _damaged(path, f"unreadable ({exc})") from None
    lines = data.split(b"\n")[:-1]
    if not lines:
        raise _damaged(path, f"no header line; expected {','.join(columns)}", 1)
    header = _fields(path, 1, lines[0])
    if tuple(header) != columns:
        at = next((i for i, (a, b) in enumerate(zip(header, columns, strict=False)) if a != b), min(len(header), len(columns)))
        found, wanted = (header[at] if at < len(header) else "(nothing)"), (columns[at] if at < len(columns) else "(nothing)")
        raise _damaged(path, f"the header differs from the expected one at column {at + 1} ({found!r} instead of {wanted!r})", 1)
    rows, offset = [], len(lines[0]) + 1
    for number, line in enumerate(lines[1:], start=2):
        offset += len(line) + 1
        fields = _fields(path, number, line)
        if len(fields) != len(columns):
            raise _damaged(path, f"{len(fields)} fields where the header has {len(columns)}", number)
        rows.append((number, offset, fields))
    return len(lines[0]) + 1, rows


def _fields(path: Path, number: int, line: bytes) -> list[str]:
    try:
        rows = list(csv.reader([line.decode("utf-8")], strict=True))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise _damaged(path, f"not a CSV row ({exc})", number) from None
    return rows[0] if rows else []


def _integer(path: Path, number: int, column: str, text: str) -> int:
    if not text.isdigit():
        raise _damaged(path, f"{text!r} is not a whole number", number, column)
    return int(text)


def _number(path: Path, number: int, column: str, text: str, required: bool) -> float | None:
    """The field as a float (``None`` when empty and not ``required``); a word, an empty required field or a non-finite
    value is refused."""
    if text == "":
        if required:
            raise _damaged(path, "empty, but this stage logs it", number, column)
        return None
    try:
        value = float(text)
    except ValueError:
        raise _damaged(path, f"{text!r} is not a number", number, column) from None
    if not math.isfinite(value):
        raise _damaged(path, f"{text!r} is not finite", number, column)
    return value


def _at_least(path: Path, number: int, column: str, value: float, low: float, what: str) -> None:
    if value < low - TOLERANCE * abs(low):
        raise _damaged(path, f"{value!r} is below {what} ({low!r})", number, column)


def _within(path: Path, number: int, column: str, value: float, low: float, high: float) -> None:
    if not low - TOLERANCE * abs(low) <= value <= high + TOLERANCE * abs(high):
        raise _damaged(path, f"{value!r} is outside [{low!r}, {high!r}]", number, column)


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
        raise _damaged(path, f"episode {episode} trains graph {plan.graph_of(episode)!r}, not {graph!r}", number, "graph")
    oracle = row["oracle"]
    if oracle not in ("sim", "real") or (oracle == "real" and stage != "real"):
        raise _damaged(path, f"{oracle!r} is not an oracle of stage {stage!r}", number, "oracle")
    values = {}
    for column in plan.columns:
        if column in ("stage", "episode", "graph", "oracle"):
            continue
        if not seen and column in LOSS_COLUMNS:
            if row[column] not in ("", "nan", "inf", "-inf"):
                _number(path, number, column, row[column], False)
            continue
        values[column] = _number(path, number, column, row[column], seen and stage in _REQUIRED.get(column, ()))
    if not seen:
        return seconds
    bound = plan.bounds.get(graph, 0.0)
    for column, value in values.items():
        if value is None:
            continue
        if column == "makespan":  # Stage III's oracle may be a scaled simulator or a real system: its makespans are only positive
            _at_least(path, number, column, value, bound if stage != "real" else math.ulp(0.0), "a lower bound on any schedule")
        elif column == "predicted":
            _at_least(path, number, column, value, bound, "a lower bound on any schedule")
        elif column in ("reward", "baseline"):
            _within(path, number, column, value, -RATIO_LIMIT, 0.0)
        elif column in ("teacher_agreement", "epsilon"):
            _within(path, number, column, value, 0.0, 1.0)
        elif column == "lr":
            _within(path, number, column, value, *plan.lr[stage])
        elif column == "seconds":
            _at_least(path, number, column, value, seconds, "the seconds of the row before")
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
        raise _damaged(path, f"missing, but the checkpoint is at episode {progress.episode}")
    rows: list[dict[str, str]] = []
    seconds = 0.0
    end, lines = _lines(path, plan.columns)
    for number, offset, fields in lines:
        row = dict(zip(plan.columns, fields, strict=True))
        episode, expected = _integer(path, number, "episode", row["episode"]), len(rows)
        if episode != expected:
            fault = f"episode {episode} appears twice" if episode < expected else f"episodes {expected}..{episode - 1} are missing"
            raise _damaged(path, f"{fault} (expected episode {expected})", number, "episode")
        if episode >= plan.next_checkpoint(progress.episode):
            raise _damaged(
                path,
                f"episode {episode} comes after the checkpoint at episode {plan.next_checkpoint(progress.episode)}, which is not there "
                f"(the newest is at episode {progress.episode})",
                number,
                "episode",
            )
        if row["stage"] != plan.stage_of(episode):
            raise _damaged(
                path, f"episode {episode} has stage {row['stage']!r}, the config says {plan.stage_of(episode)!r}", number, "stage"
            )
        seconds = _metrics_row(path, plan, number, row, episode < progress.episode, seconds)
        if episode < progress.episode:
            end = offset
        rows.append(row)
    if len(rows) < progress.episode:
        raise _damaged(
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
            raise _damaged(path, f"missing, but {kept // len(plan.graphs)} greedy evaluation(s) came before the checkpoint")
        return None
    seconds = 0.0
    end, rows = _lines(path, GREEDY_COLUMNS)
    for index, (number, offset, fields) in enumerate(rows):
        row = dict(zip(GREEDY_COLUMNS, fields, strict=True))
        episode = _integer(path, number, "episode", row["episode"])
        if index >= len(due):
            raise _damaged(path, f"the run makes {len(due) // len(plan.graphs)} greedy evaluation(s); this row is one too many", number)
        stage, wanted, graph = due[index]
        for column, value, expected in (("stage", row["stage"], stage), ("episode", episode, wanted), ("graph", row["graph"], graph)):
            if value != expected:
                raise _damaged(path, f"{value!r} where the run's evaluation {index + 1} has {expected!r}", number, column)
        greedy = _number(path, number, "greedy", row["greedy"], True)
        taken = _number(path, number, "seconds", row["seconds"], True)
        assert greedy is not None and taken is not None
        _at_least(path, number, "greedy", greedy, plan.bounds.get(graph, 0.0) if stage != "real" else math.ulp(0.0), "a lower bound")
        _at_least(path, number, "seconds", taken, seconds, "the seconds of the row before")
        seconds = taken
        if index < kept:
            end = offset
    if len(rows) < kept:
        raise _damaged(path, f"holds {len(rows)} row(s) but the checkpoint comes after {kept}: evaluations are missing")
    return end


# --- meta.json ---------------------------------------------------------------------------------------------------
def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_meta(path: str | os.PathLike, meta: Any, plan: RunPlan, progress: Progress, rows: int) -> str:
    """``meta.json`` checked against ``plan``, the checkpoint and ``rows`` (episodes in ``metrics.csv``): its status.

    Every field this workbench writes has its type and range; ``status`` must
    agree with the files (``finished``: the checkpoint at the last episode and
    the final ``evaluation``; ``diverged``: ``diverged_at`` and ``error``).
    """
    path = Path(path)
    if not isinstance(meta, dict):
        raise _damaged(path, f"holds a JSON {type(meta).__name__}, not an object")

    def field(name: str, ok: bool, wanted: str) -> None:
        if not ok:
            shown = repr(meta[name]) if name in meta else "missing"
            raise _damaged(path, f"{shown[:80]} where the run needs {wanted}", field=name)

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
    field("episodes_done", _is_int(done) and 0 <= done <= progress.episode, f"a whole number up to the checkpoint's {progress.episode}")
    _check_reference(path, meta.get("reference"), plan)
    for stage in plan.stage_names:
        key = f"greedy_selection_{stage}"
        if key in meta:
            _check_selection(path, key, meta[key], plan, stage)
    stray = [key for key in meta if key.startswith("greedy_selection_") and key.removeprefix("greedy_selection_") not in plan.stage_names]
    if stray:
        raise _damaged(path, "not a stage of this run", field=stray[0])
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
            and all(isinstance(evaluation.get(g), dict) and _is_number(evaluation[g].get("greedy")) for g in plan.graphs),
            "a finished run's greedy evaluation of every graph",
        )
        field("finished", isinstance(meta.get("finished"), str), "a finished run's time (a string)")
    elif status == "diverged":
        at = meta.get("diverged_at")
        field(
            "diverged_at",
            _is_int(at) and progress.episode <= at <= rows and at < plan.total,
            f"the episode a diverged run stopped in (from the checkpoint's {progress.episode} to the one after the last logged, {rows})",
        )
        field("error", isinstance(meta.get("error"), str) and bool(meta["error"].strip()), "what diverged (a diverged run says)")
    return str(status)


def _check_reference(path: Path, reference: Any, plan: RunPlan) -> None:
    if not isinstance(reference, dict) or sorted(reference) != sorted(plan.graphs):
        raise _damaged(path, f"needs the reference makespans of the graphs {', '.join(plan.graphs)}", field="reference")
    for graph, values in reference.items():
        ok = isinstance(values, dict) and isinstance(values.get("best_heuristic_method"), str)
        cp, best = (values.get("critical_path"), values.get("best_heuristic")) if isinstance(values, dict) else (None, None)
        bound = plan.bounds.get(graph, 0.0)
        ok = ok and _is_number(cp) and _is_number(best) and bound * (1 - TOLERANCE) <= best <= cp and best > 0
        if not ok:
            raise _damaged(
                path, f"{graph}: needs finite critical_path ≥ best_heuristic ≥ the lower bound {bound!r}, and the method", field="reference"
            )


def _check_selection(path: Path, key: str, value: Any, plan: RunPlan, stage: str) -> None:
    record = value if isinstance(value, dict) else {}
    episode, greedy, evaluations = record.get("episode"), record.get("greedy"), record.get("evaluations")
    ok = _is_int(evaluations) and evaluations >= 0 and (episode is None or (_is_int(episode) and 0 <= episode <= plan.total))
    if isinstance(greedy, dict) and set(greedy) <= set(plan.graphs):
        floor = 0.0 if stage == "real" else 1.0
        ok = ok and all(_is_number(v) and v > 0 and v >= floor * plan.bounds.get(g, 0.0) * (1 - TOLERANCE) for g, v in greedy.items())
    else:
        ok = False
    if not ok:
        raise _damaged(path, "needs evaluations (≥ 0), the kept episode and finite greedy makespans of the run's graphs", field=key)


# --- best/ ---------------------------------------------------------------------------------------------------------
def best_folder(paths: RunPaths, graphs: Sequence[str], graph: str) -> Path:
    """Where the best placement of ``graph`` is: ``best/``, or ``best/<graph>/`` when the run trains several graphs."""
    return paths.best_dir if len(graphs) == 1 else paths.best_dir / graph.replace("/", "_")


def _simulated(row: Mapping[str, str]) -> float | None:
    """The simulated makespan a metrics row logs (``predicted`` in Stage III), ``None`` when it is not a finite number."""
    try:
        value = float(row["predicted"] if row["stage"] == "real" else row["makespan"])
    except (KeyError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= TOLERANCE * max(abs(a), abs(b))


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
        logged = {int(row["episode"]): _simulated(row) for row in rows if row["graph"] == graph}
        seen = [value for episode, value in logged.items() if episode < progress.episode and value is not None]
        placement = folder / "placement.json"
        if not placement.is_file():
            if seen:
                raise _damaged(placement, f"missing, but metrics.csv logs {len(seen)} episode(s) of {graph} before the checkpoint")
            continue
        mirror = folder == paths.best_dir and len(plan.graphs) > 1
        best = _check_placement(placement, plan, graph, graphs[graph])
        if not mirror:
            _check_against_metrics(placement, best, logged, seen)
        _check_trace(folder / "trace.json")


def _check_placement(path: Path, plan: RunPlan, name: str, graph: DataflowGraph) -> dict[str, Any]:
    """A best placement file checked as a placement of ``graph`` and re-simulated; returns its fields besides the placement."""
    from ..placers.placement_file import PlacementError, check_placement, read_placement_file
    from ..sim import simulate

    try:
        data = read_placement_file(path)
        checked = check_placement(data, graph, plan.devices, source=str(path))
    except PlacementError as exc:
        raise RunDamaged(f"{exc}; refusing to resume (nothing was changed)") from None
    fields = checked.fields
    if data.get("graph") != name:
        raise _damaged(path, f"{data.get('graph')!r} where the run names the graph {name!r}", field="graph")
    if fields.get("method") != plan.method:
        raise _damaged(path, f"{fields.get('method')!r} where the run trains {plan.method!r}", field="method")
    if fields.get("stage") not in (*plan.stage_names, "search"):
        raise _damaged(path, f"{fields.get('stage')!r} is not a stage of the run, nor 'search'", field="stage")
    episode = fields.get("episode")
    if not _is_int(episode) or not 0 <= episode <= plan.total:
        raise _damaged(path, f"{episode!r} is not an episode of the run (0..{plan.total})", field="episode")
    makespan = fields.get("makespan")
    if not _is_number(makespan):
        raise _damaged(path, f"{makespan!r} is not a finite number", field="makespan")
    simulated = simulate(graph, checked.assignment, plan.devices).makespan
    if not _close(makespan, simulated):
        raise _damaged(path, f"{makespan!r}, but its assignment simulates to {simulated!r}", field="makespan")
    return fields


def _check_against_metrics(path: Path, best: Mapping[str, Any], logged: Mapping[int, float | None], seen: list[float]) -> None:
    """The best placement is the one its episode logged (unless the final search found it) and no episode before the
    checkpoint did better."""
    episode, makespan = best["episode"], best["makespan"]
    if best["stage"] != "search":
        value = logged.get(episode)
        if value is None or not _close(value, makespan):
            shown = "no such episode" if episode not in logged else f"{value!r}"
            raise _damaged(
                path, f"episode {episode} logged a simulated makespan of {shown} in metrics.csv, not {makespan!r}", field="episode"
            )
    if seen and makespan > min(seen) * (1 + TOLERANCE):
        raise _damaged(
            path, f"{makespan!r} is worse than {min(seen)!r}, logged before the checkpoint: it is not the best", field="makespan"
        )


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON object file of the run; one that is unreadable, not JSON or not an object is a :class:`RunDamaged` naming it."""
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _damaged(path, f"unreadable or not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise _damaged(path, f"holds a JSON {type(data).__name__}, not an object")
    return data


def _check_trace(path: Path) -> None:
    from ..sim import Trace

    if not path.is_file():
        raise _damaged(path, "missing beside its placement.json (written first)")
    try:
        Trace.from_json(path)
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise _damaged(path, f"not a trace ({type(exc).__name__}: {exc})") from None


# --- the whole directory ------------------------------------------------------------------------------------------
def check_run(path: str | os.PathLike, plan: RunPlan, graphs: Mapping[str, DataflowGraph], progress: Progress) -> RunCheck:
    """Check every file of the run directory ``path`` whose newest checkpoint is ``progress`` (see the module docstring).

    Reads only: a damaged directory is a :class:`RunDamaged` naming the file, line and field.
    """
    paths = RunPaths(path)
    if not paths.meta_path.is_file():
        raise _damaged(paths.meta_path, "missing, so the run's status and references are lost")
    meta = read_json_object(paths.meta_path)
    rows, keep, logged = check_metrics(paths.metrics_path, plan, progress)
    greedy = check_greedy(paths.greedy_path, plan, progress)
    status = check_meta(paths.meta_path, meta, plan, progress, rows)
    check_best(paths, plan, graphs, logged, progress)
    return RunCheck(rows, keep, greedy, status)
