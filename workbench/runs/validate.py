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
from collections.abc import Callable, Mapping, Sequence
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
    "damaged",
    "Column",
    "check_table",
    "CorpusPlan",
    "TrainerCheck",
    "check_corpus_run",
    "GatePlan",
    "check_gate_run",
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


def damaged(path: Path, fault: str, line: int | None = None, field: str | None = None) -> RunDamaged:
    """The refusal of a damaged run: ``path``, the line (CSV) and field when known, what is wrong."""
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
        raise damaged(path, f"unreadable ({exc})") from None
    lines = data.split(b"\n")[:-1]
    if not lines:
        raise damaged(path, f"no header line; expected {','.join(columns)}", 1)
    header = _fields(path, 1, lines[0])
    if tuple(header) != columns:
        at = next((i for i, (a, b) in enumerate(zip(header, columns, strict=False)) if a != b), min(len(header), len(columns)))
        found, wanted = (header[at] if at < len(header) else "(nothing)"), (columns[at] if at < len(columns) else "(nothing)")
        raise damaged(path, f"the header differs from the expected one at column {at + 1} ({found!r} instead of {wanted!r})", 1)
    rows, offset = [], len(lines[0]) + 1
    for number, line in enumerate(lines[1:], start=2):
        offset += len(line) + 1
        fields = _fields(path, number, line)
        if len(fields) != len(columns):
            raise damaged(path, f"{len(fields)} fields where the header has {len(columns)}", number)
        rows.append((number, offset, fields))
    return len(lines[0]) + 1, rows


def _fields(path: Path, number: int, line: bytes) -> list[str]:
    try:
        rows = list(csv.reader([line.decode("utf-8")], strict=True))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise damaged(path, f"not a CSV row ({exc})", number) from None
    return rows[0] if rows else []


def _integer(path: Path, number: int, column: str, text: str) -> int:
    if not text.isdigit():
        raise damaged(path, f"{text!r} is not a whole number", number, column)
    return int(text)


def _number(path: Path, number: int, column: str, text: str, required: bool) -> float | None:
    """The field as a float (``None`` when empty and not ``required``); a word, an empty required field or a non-finite
    value is refused."""
    if text == "":
        if required:
            raise damaged(path, "empty, but this stage logs it", number, column)
        return None
    try:
        value = float(text)
    except ValueError:
        raise damaged(path, f"{text!r} is not a number", number, column) from None
    if not math.isfinite(value):
        raise damaged(path, f"{text!r} is not finite", number, column)
    return value


def _at_least(path: Path, number: int, column: str, value: float, low: float, what: str) -> None:
    if value < low - TOLERANCE * abs(low):
        raise damaged(path, f"{value!r} is below {what} ({low!r})", number, column)


def _within(path: Path, number: int, column: str, value: float, low: float, high: float) -> None:
    if not low - TOLERANCE * abs(low) <= value <= high + TOLERANCE * abs(high):
        raise damaged(path, f"{value!r} is outside [{low!r}, {high!r}]", number, column)


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
        raise damaged(path, f"missing, but the checkpoint is at episode {progress.episode}")
    rows: list[dict[str, str]] = []
    seconds = 0.0
    end, lines = _lines(path, plan.columns)
    for number, offset, fields in lines:
        row = dict(zip(plan.columns, fields, strict=True))
        episode, expected = _integer(path, number, "episode", row["episode"]), len(rows)
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
    end, rows = _lines(path, GREEDY_COLUMNS)
    for index, (number, offset, fields) in enumerate(rows):
        row = dict(zip(GREEDY_COLUMNS, fields, strict=True))
        episode = _integer(path, number, "episode", row["episode"])
        if index >= len(due):
            raise damaged(path, f"the run makes {len(due) // len(plan.graphs)} greedy evaluation(s); this row is one too many", number)
        stage, wanted, graph = due[index]
        for column, value, expected in (("stage", row["stage"], stage), ("episode", episode, wanted), ("graph", row["graph"], graph)):
            if value != expected:
                raise damaged(path, f"{value!r} where the run's evaluation {index + 1} has {expected!r}", number, column)
        greedy = _number(path, number, "greedy", row["greedy"], True)
        taken = _number(path, number, "seconds", row["seconds"], True)
        assert greedy is not None and taken is not None
        _at_least(path, number, "greedy", greedy, plan.bounds.get(graph, 0.0) if stage != "real" else math.ulp(0.0), "a lower bound")
        _at_least(path, number, "seconds", taken, seconds, "the seconds of the row before")
        seconds = taken
        if index < kept:
            end = offset
    if len(rows) < kept:
        raise damaged(path, f"holds {len(rows)} row(s) but the checkpoint comes after {kept}: evaluations are missing")
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
    field("episodes_done", _is_int(done) and 0 <= done <= progress.episode, f"a whole number up to the checkpoint's {progress.episode}")
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
        raise damaged(path, f"needs the reference makespans of the graphs {', '.join(plan.graphs)}", field="reference")
    for graph, values in reference.items():
        ok = isinstance(values, dict) and isinstance(values.get("best_heuristic_method"), str)
        cp, best = (values.get("critical_path"), values.get("best_heuristic")) if isinstance(values, dict) else (None, None)
        bound = plan.bounds.get(graph, 0.0)
        ok = ok and _is_number(cp) and _is_number(best) and bound * (1 - TOLERANCE) <= best <= cp and best > 0
        if not ok:
            raise damaged(
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
        raise damaged(path, "needs evaluations (≥ 0), the kept episode and finite greedy makespans of the run's graphs", field=key)


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
                raise damaged(placement, f"missing, but metrics.csv logs {len(seen)} episode(s) of {graph} before the checkpoint")
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
        raise damaged(path, f"{data.get('graph')!r} where the run names the graph {name!r}", field="graph")
    if fields.get("method") != plan.method:
        raise damaged(path, f"{fields.get('method')!r} where the run trains {plan.method!r}", field="method")
    if fields.get("stage") not in (*plan.stage_names, "search"):
        raise damaged(path, f"{fields.get('stage')!r} is not a stage of the run, nor 'search'", field="stage")
    episode = fields.get("episode")
    if not _is_int(episode) or not 0 <= episode <= plan.total:
        raise damaged(path, f"{episode!r} is not an episode of the run (0..{plan.total})", field="episode")
    makespan = fields.get("makespan")
    if not _is_number(makespan):
        raise damaged(path, f"{makespan!r} is not a finite number", field="makespan")
    simulated = simulate(graph, checked.assignment, plan.devices).makespan
    if not _close(makespan, simulated):
        raise damaged(path, f"{makespan!r}, but its assignment simulates to {simulated!r}", field="makespan")
    return fields


def _check_against_metrics(path: Path, best: Mapping[str, Any], logged: Mapping[int, float | None], seen: list[float]) -> None:
    """The best placement is the one its episode logged (unless the final search found it) and no episode before the
    checkpoint did better."""
    episode, makespan = best["episode"], best["makespan"]
    if best["stage"] != "search":
        value = logged.get(episode)
        if value is None or not _close(value, makespan):
            shown = "no such episode" if episode not in logged else f"{value!r}"
            raise damaged(
                path, f"episode {episode} logged a simulated makespan of {shown} in metrics.csv, not {makespan!r}", field="episode"
            )
    if seen and makespan > min(seen) * (1 + TOLERANCE):
        raise damaged(path, f"{makespan!r} is worse than {min(seen)!r}, logged before the checkpoint: it is not the best", field="makespan")


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON object file of the run; one that is unreadable, not JSON or not an object is a :class:`RunDamaged` naming it."""
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise damaged(path, f"unreadable or not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise damaged(path, f"holds a JSON {type(data).__name__}, not an object")
    return data


def _check_trace(path: Path) -> None:
    from ..sim import Trace

    if not path.is_file():
        raise damaged(path, "missing beside its placement.json (written first)")
    try:
        Trace.from_json(path)
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise damaged(path, f"not a trace ({type(exc).__name__}: {exc})") from None


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
        value: float = _integer(path, number, name, text)
    elif not column.finite and text in NON_FINITE:
        return float(text)
    else:
        value = _number(path, number, name, text, True) or 0.0
    _within(path, number, name, value, column.low, column.high)
    return value


def check_table(path: Path, columns: Mapping[str, Column]) -> list[tuple[int, dict[str, Any]]]:
    """Every whole row of the table ``path`` (its header: the names of ``columns``), each field checked by its
    :class:`Column`: ``(line number, values)``. A half-written last line is left out."""
    _, lines = _lines(path, tuple(columns))
    return [
        (number, {name: _value(path, number, name, text, column) for (name, column), text in zip(columns.items(), fields, strict=True)})
        for number, _, fields in lines
    ]


@dataclass(frozen=True)
class TrainerCheck:
    """A checked corpus or gate run directory: its status, derived from the files (``new``, ``interrupted``,
    ``finished`` or ``diverged``), why it diverged, and which scoring kept ``best.safetensors``."""

    status: str
    reason: str = ""
    best_at: int | None = None
    """The episode (corpus) or step (gate) of the last scoring that kept ``best.safetensors``; None: none did."""


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


def check_corpus_run(path: str | os.PathLike, plan: CorpusPlan, episode: int) -> TrainerCheck:
    """Every file of the corpus run ``path`` whose ``last.safetensors`` is at ``episode`` (0: none), besides the
    checkpoints' own contents (the trainer's, with torch): ``teachers.json``, ``metrics.csv``, ``selection.csv`` and
    whether ``best.safetensors`` is there. Reads only; a damaged directory is a :class:`RunDamaged`.

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
        _at_least(paths.metrics_path, number, "makespan_over_critical_path", ratio, plan.floors[key], "the lower bound")
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
        _at_least(path, number, "mean_over_critical_path", row["mean_over_critical_path"], plan.selection_floor, "the lower bound")
    due = episode // every + 1 if every and episode else 0
    if len(rows) < due:
        raise damaged(path, f"holds {len(rows)} scoring(s), but {due} came before the checkpoint at episode {episode}")
    best_at = _check_scores(path, [(n, r) for n, r in rows if r["episode"] <= episode], "episode")
    if best_at is not None and not paths.checkpoint("best").is_file():
        raise damaged(paths.checkpoint("best"), f"missing, but selection.csv keeps the weights of episode {best_at}")
    return best_at


TEACHER_FIELDS = ("assignment", "makespan", "critical_path", "seconds")


def _check_teachers(path: Path, plan: CorpusPlan, episode: int) -> None:
    """``teachers.json``: for pairs of this run only, a placement of the pair's graph whose makespan is what it simulates
    to, critical_path's makespan and the search's seconds; every pair's once training began."""
    from ..sim import simulate

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
        if not all(_is_int(d) and 0 <= d < devices for d in assignment):
            raise damaged(path, f"the assignment must hold devices 0..{devices - 1}", field=f"{key}.assignment")
        for name, expected in (("makespan", simulate(graph, assignment, devices).makespan), ("critical_path", critical)):
            if not _is_number(record[name]) or not _close(record[name], expected):
                raise damaged(path, f"{str(record[name])[:40]}, but it is {expected!r}", field=f"{key}.{name}")
        if not _is_number(record["seconds"]) or record["seconds"] < 0:
            raise damaged(path, f"{str(record['seconds'])[:40]} is not a time", field=f"{key}.seconds")
    missing = [key for key in plan.pairs if key not in teachers]
    if episode and missing:
        raise damaged(path, f"lacks the teacher of {missing[0]}, but the checkpoint is at episode {episode}")


@dataclass(frozen=True)
class GatePlan:
    """What a gate training run's config says it does (built by :mod:`workbench.training.gate_training`)."""

    rules: tuple[str, ...]
    pairs: tuple[tuple[str, str, float], ...]
    """``(split, pair, floor)`` per row of ``costs.csv``, in order: the floor is the pair's lower bound over critical_path's."""
    steps: int
    select_every: int


def check_gate_run(path: str | os.PathLike, plan: GatePlan) -> TrainerCheck:
    """``costs.csv``, ``selection.csv`` and whether ``best.safetensors`` is there, of the gate run ``path``; its status:
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
        _at_least(selection, number, "mean_over_critical_path", row["mean_over_critical_path"], floor, "the lower bound")
    best_at = _check_scores(selection, rows, "step")
    if best_at is not None and not paths.checkpoint("best").is_file():
        raise damaged(paths.checkpoint("best"), f"missing, but selection.csv keeps the weights of step {best_at}")
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
            _at_least(path, number, rule, row[rule], floor, "the lower bound")
