"""Where a resumed run starts (:func:`resume_point`), and the checks it makes of its own files before it touches any of them.

A run directory damaged by hand, by a disk or by a copied file is refused
with a message naming the file and the fault; nothing is rewritten and no
metrics row is deleted. Only rows of episodes the checkpoint has not seen
(the ones the resumed run replays) and a half-written last line are cut
off, by truncating the file after the last row kept, so every earlier byte
stays as it was.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..learn.checkpoint import CheckpointError, TrainedFor, read_checkpoint, stale_temporaries
from .checkpoint import TrainingState, load_checkpoint, state_from_extra
from .config import TrainConfig
from .rundir import RunDirectory

__all__ = ["ResumeError", "read_json_file", "MetricsCheck", "check_metrics", "ResumePoint", "resume_point", "remove_stale_temporaries"]


class ResumeError(ValueError):
    """A run directory that cannot be resumed as it is."""


def read_json_file(path: str | os.PathLike, what: str = "file") -> Any:
    """The JSON in ``path``; a :class:`ResumeError` naming the file when it is unreadable or not JSON."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResumeError(f"{path} is missing ({what})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ResumeError(f"{path} is unreadable ({what}): {exc}") from None
    except json.JSONDecodeError as exc:
        raise ResumeError(
            f"{path} is not valid JSON ({what}): {exc.msg} at line {exc.lineno} column {exc.colno}; repair or remove it"
        ) from None
    except RecursionError:
        raise ResumeError(f"{path} is not valid JSON ({what}): nested too deeply") from None


@dataclass(frozen=True)
class MetricsCheck:
    """A checked ``metrics.csv``: rows for episodes ``0 .. rows - 1``; ``keep_bytes`` ends the last row before the resume point."""

    rows: int
    keep_bytes: int


def check_metrics(path: str | os.PathLike, columns: tuple[str, ...], resume_at: int, stage_of: Callable[[int], str]) -> MetricsCheck:
    """Check that ``metrics.csv`` holds one row per episode ``0, 1, ...`` at least up to ``resume_at - 1``.

    Refused (:class:`ResumeError`, naming the file and line): a missing file,
    a header other than ``columns``, a line that is not one CSV row of that
    width, a non-integer, duplicate or missing episode, a row whose stage is
    not the one the config gives that episode, and fewer rows than the
    checkpoint has episodes. A half-written last line (no newline) is
    allowed; it lies past ``keep_bytes``.
    """
    path = Path(path)
    if not path.is_file():
        raise ResumeError(f"{path} is missing but the checkpoint is at episode {resume_at}; refusing to resume with a gap in the metrics")
    data = path.read_bytes()
    lines = data.split(b"\n")
    complete = lines[:-1]  # the part after the last newline is empty or a half-written line
    if not complete:
        raise ResumeError(f"{path} has no header line; expected {','.join(columns)}")
    header = _row(path, 1, complete[0])
    if tuple(header) != columns:
        diff = next((i for i, (a, b) in enumerate(zip(header, columns, strict=False)) if a != b), min(len(header), len(columns)))
        found, wanted = (header[diff] if diff < len(header) else "(nothing)"), (columns[diff] if diff < len(columns) else "(nothing)")
        raise ResumeError(
            f"{path} line 1: the header differs from the expected one at column {diff + 1} ({found!r} instead of {wanted!r}); refusing to "
            "resume"
        )
    offset, keep = len(complete[0]) + 1, None
    episode_column, stage_column = columns.index("episode"), columns.index("stage")
    for number, line in enumerate(complete[1:], start=2):
        row = _row(path, number, line)
        if len(row) != len(columns):
            raise ResumeError(f"{path} line {number}: {len(row)} fields where the header has {len(columns)}; refusing to resume")
        try:
            episode = int(row[episode_column])
        except ValueError:
            raise ResumeError(f"{path} line {number}: episode {row[episode_column]!r} is not an integer; refusing to resume") from None
        expected = number - 2
        if episode != expected:
            fault = f"episode {episode} appears twice" if episode < expected else f"episodes {expected}..{episode - 1} are missing"
            raise ResumeError(f"{path} line {number}: {fault} (expected episode {expected}); refusing to resume")
        if row[stage_column] != stage_of(episode):
            raise ResumeError(
                f"{path} line {number}: episode {episode} has stage {row[stage_column]!r}, the config says {stage_of(episode)!r}; "
                "refusing to resume"
            )
        if episode == resume_at:
            keep = offset
        offset += len(line) + 1
    rows = len(complete) - 1
    if rows < resume_at:
        raise ResumeError(
            f"{path} ends at episode {rows - 1} but the checkpoint is at episode {resume_at}: "
            "rows are missing (a truncated file, or a checkpoint from another run); refusing to resume"
        )
    return MetricsCheck(rows, offset if keep is None else keep)


def _row(path: Path, number: int, line: bytes) -> list[str]:
    try:
        text = line.decode("utf-8")
        rows = list(csv.reader([text], strict=True))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ResumeError(f"{path} line {number} is not a CSV row ({exc}); refusing to resume") from None
    return rows[0] if rows else []


@dataclass(frozen=True)
class ResumePoint:
    """Where a resumed run starts: the newest checkpoint's policy and state, and the checked metrics."""

    policy: Any
    state: TrainingState
    metrics: MetricsCheck


def resume_point(
    run: RunDirectory, config: TrainConfig, library: Any, device: Any, meta: Mapping[str, Any], trained_for: TrainedFor
) -> ResumePoint | None:
    """The newest training checkpoint of ``run`` (``last`` or a stage's) with the run's files checked; None when there is none.

    Refused: a checkpoint trained for other graphs or devices or written by
    another run (``run_id``), a missing stage checkpoint the run is past, an
    old pickle-format run, and a damaged ``metrics.csv`` (:func:`check_metrics`).
    """
    candidates = [run.last_checkpoint, *(run.stage_checkpoint(stage) for stage in config.stages)]
    newest: tuple[int, Path] | None = None
    for path in candidates:
        if path.exists():
            checkpoint = read_checkpoint(path)
            found = state_from_extra(checkpoint.extra, path)
            if path == run.last_checkpoint and found is None:
                raise ValueError(f"{path} holds a policy but no training state; it was not written by `workbench train`")
            if checkpoint.trained_for is not None and (checkpoint.trained_for.graphs, checkpoint.trained_for.devices) != (
                trained_for.graphs,
                trained_for.devices,
            ):
                raise CheckpointError(
                    f"{path} was trained for {checkpoint.trained_for.describe()}, but this run trains {trained_for.describe()}; it "
                    "belongs to another run"
                )
            if found is not None and (newest is None or found.episode > newest[0]):
                newest = (found.episode, path)
    if newest is None:
        old = sorted(run.checkpoint_dir.glob("*.pt"))
        if old:
            raise ResumeError(
                f"{run.path} was written by an older workbench ({old[0].name} is in the pickle format) and cannot be resumed; start a "
                f"new run (python -m workbench.learn.migrate {old[0]} --trust-pickle-checkpoint converts its weights for --init-checkpoint)"
            )
        return None
    policy, state = load_checkpoint(library, newest[1], map_location=device)
    if meta.get("run_id") and state.run_id and state.run_id != meta["run_id"]:
        raise ResumeError(
            f"{newest[1]} belongs to another run (run id {state.run_id}; {run.meta_path.name} says {meta['run_id']}); refusing to resume"
        )
    if state.stage not in config.stages or not 0 < state.episode <= config.total_episodes:
        raise ResumeError(
            f"{newest[1]} is at episode {state.episode} of stage {state.stage!r}, outside this run's stages {', '.join(config.stages)} "
            f"({config.total_episodes} episodes)"
        )
    for stage, _, end in config.stage_bounds():
        if end <= state.episode and not run.stage_checkpoint(stage).exists():
            raise ResumeError(
                f"{run.stage_checkpoint(stage)} is missing although the run is past the end of stage {stage} (episode {end}); it cannot "
                "be rebuilt, start a new run"
            )
    stages = [(stage, end) for stage, _, end in config.stage_bounds()]
    metrics = check_metrics(run.metrics_path, run.columns(config), state.episode, lambda e: next(s for s, end in stages if e < end))
    return ResumePoint(policy, state, metrics)


def remove_stale_temporaries(*folders: str | os.PathLike) -> list[Path]:
    """Delete the temporary files killed saves left in ``folders``; returns them."""
    removed = []
    for folder in folders:
        for path in stale_temporaries(folder):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed
