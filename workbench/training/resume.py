"""Where a resumed run starts (:func:`resume_point`), and the checks it makes of its own files before it touches any of them.

A run directory damaged by hand, by a disk or by a copied file is refused
with a message naming the file, line and field (:func:`workbench.runs.validate.check_run`,
against the :func:`run_plan` of the config); nothing is rewritten and no
metrics row is deleted. Only rows of episodes the checkpoint has not seen
(the ones the resumed run replays) and a half-written last line are cut
off, by truncating the file after the last row kept, so every earlier byte
stays as it was.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..fileio import atomic_write_bytes
from ..graph import DataflowGraph
from ..learn.checkpoint import CheckpointError, TrainedFor, read_checkpoint, stale_temporaries
from ..runs import PICKLE_CHECKPOINT_SUFFIX, read_rows
from ..runs.validate import Progress, RunCheck, RunDamaged, RunPlan, check_run
from ..sim import lower_bound
from .checkpoint import TrainingState, load_checkpoint, state_from_extra
from .config import TrainConfig
from .rundir import RunDirectory

__all__ = [
    "ResumeError",
    "read_json_file",
    "run_plan",
    "check_directory",
    "ResumePoint",
    "resume_point",
    "hand_over",
    "remove_stale_temporaries",
]

ResumeError = RunDamaged
"""A run directory that cannot be resumed as it is (the message names the file, line and field)."""


def run_plan(config: TrainConfig, graphs: Mapping[str, DataflowGraph], columns: tuple[str, ...]) -> RunPlan:
    """What ``config`` makes a run do, episode by episode, for :func:`~workbench.runs.validate.check_run`."""
    rl = (min(config.rl_lr_start, config.rl_lr_end), max(config.rl_lr_start, config.rl_lr_end))
    return RunPlan(
        method=config.method,
        seed=config.seed,
        devices=config.devices,
        graphs=tuple(graphs),
        stages=tuple(config.stage_bounds()),
        group=config.rollouts_per_update,
        greedy_every=config.greedy_every,
        checkpoint_every=config.checkpoint_every,
        lr={stage: (config.il_lr, config.il_lr) if stage == "il" else rl for stage in config.stages},
        columns=columns,
        bounds={name: lower_bound(graph, config.devices) for name, graph in graphs.items()},
    )


def check_directory(
    run: RunDirectory, config: TrainConfig, graphs: Mapping[str, DataflowGraph], state: TrainingState | None
) -> RunCheck | None:
    """Every file of ``run`` checked against ``config`` and its newest checkpoint's ``state``; ``None`` for a run killed
    before it logged anything (no ``meta.json``, no checkpoint, no metrics row), which starts afresh."""
    if not run.meta_path.exists() and state is None and not (run.metrics_path.exists() and read_rows(run.metrics_path)):
        return None
    progress = Progress(state.episode, state.stage) if state is not None else Progress()
    return check_run(run.path, run_plan(config, graphs, run.columns(config)), graphs, progress)


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
class ResumePoint:
    """Where a resumed run starts: the newest checkpoint (its file, policy and state)."""

    path: Path
    policy: Any
    state: TrainingState


def resume_point(
    run: RunDirectory, config: TrainConfig, library: Any, device: Any, meta: Mapping[str, Any], trained_for: TrainedFor
) -> ResumePoint | None:
    """The newest training checkpoint of ``run`` (``last`` or a stage's); None when there is none.

    Refused: a checkpoint trained for other graphs or devices or written by
    another run (``run_id``), a missing stage checkpoint the run is past, and
    an old pickle-format run. The other files are :func:`check_directory`'s.
    """
    candidates = [run.last_checkpoint, *(run.stage_checkpoint(stage) for stage in config.stages)]
    newest: tuple[int, Path] | None = None
    for path in candidates:
        if path.exists():
            checkpoint = read_checkpoint(path, weights=library.policy_weights(path))  # the header checked before any tensor is read
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
        old = sorted(run.checkpoint_dir.glob(f"*{PICKLE_CHECKPOINT_SUFFIX}"))
        if old:
            raise ResumeError(
                f"{run.path} was written by an older workbench ({old[0].name} is in the pickle format) and cannot be resumed; start a "
                f"new run (python -m workbench.learn.migrate {old[0]} --trust-pickle-checkpoint converts its weights for --init-checkpoint)"
            )
        return None
    policy, state = load_checkpoint(library, newest[1], map_location=device)
    assert state is not None  # newest was chosen for holding a training state
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
    return ResumePoint(newest[1], policy, state)


def hand_over(run: RunDirectory, resume: ResumePoint) -> None:
    """Finish a save a kill cut short: when a stage checkpoint is newer than ``last`` (written before it), ``last`` becomes
    a copy of it and ``meta.json`` records its episode, so ``last`` and ``meta.json`` are never behind the newest weights."""
    if resume.path != run.last_checkpoint:
        atomic_write_bytes(run.last_checkpoint, resume.path.read_bytes())
        run.update_meta(episodes_done=resume.state.episode)


def remove_stale_temporaries(*folders: str | os.PathLike) -> list[Path]:
    """Delete the temporary files killed saves left in ``folders``; returns them."""
    removed = []
    for folder in folders:
        for path in stale_temporaries(folder):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed
