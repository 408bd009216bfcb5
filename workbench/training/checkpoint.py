"""Training checkpoints: the policy's own ``.safetensors`` file plus a :class:`TrainingState` under ``extra``.

The state holds the episode count, the stage, optimizer and LR-scheduler
state (Adam's moments become named tensors, its scalars and parameter groups
JSON), the running baselines, the stage's best placements and greedy
selection, the torch RNG state, the wall time so far and the run's id, so a
resumed run continues exactly where the checkpoint left it. Files are written
through a temporary file and a rename (:func:`workbench.learn.checkpoint.write_checkpoint`)
and read without unpickling anything.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..learn.checkpoint import CheckpointError, read_checkpoint

__all__ = [
    "TrainingState",
    "GreedySelection",
    "save_checkpoint",
    "read_training_state",
    "state_from_extra",
    "load_checkpoint",
    "CHECKPOINT_FORMAT",
    "weights_are_finite",
    "non_finite_failure",
]

CHECKPOINT_FORMAT = "workbench-train-2"


@dataclass(frozen=True)
class GreedySelection:
    """The stage's best greedy weights so far (``TrainConfig.greedy_every``): their score, episode and makespans."""

    score: float = math.inf
    """Mean greedy makespan ÷ reference over the training graphs (lower is better)."""
    episode: int | None = None
    greedy: dict[str, float] = field(default_factory=dict)
    evaluations: int = 0

    def to_meta(self) -> dict[str, Any]:
        """What ``meta.json`` records as ``greedy_selection_<stage>``."""
        return {"episode": self.episode, "greedy": dict(self.greedy), "evaluations": self.evaluations}


@dataclass(frozen=True)
class TrainingState:
    """Everything a resumed run needs besides the weights, as of the end of episode ``episode - 1``."""

    episode: int
    """Episodes completed (the next one to run)."""
    stage: str
    seconds: float
    """Training wall time so far, summed over sessions."""
    optimizer: dict[str, Any]
    scheduler: dict[str, Any] | None
    baselines: dict[str, float]
    references: dict[str, float]
    selection: GreedySelection
    torch_rng: torch.Tensor
    run_id: str | None = None
    """The ``run_id`` of the ``meta.json`` of the run that wrote it: a checkpoint copied from another run is refused."""

    def to_extra(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["selection"] = dataclasses.asdict(self.selection)
        return {"format": CHECKPOINT_FORMAT, **data}

    @classmethod
    def from_extra(cls, extra: Mapping[str, Any], path: str | os.PathLike) -> TrainingState:
        try:
            data = {f.name: extra[f.name] for f in dataclasses.fields(cls) if f.name in extra}
            data["selection"] = GreedySelection(**data["selection"])
            state = cls(**data)
        except (KeyError, TypeError, ValueError) as error:
            raise CheckpointError(f"{os.fspath(path)} has a malformed training state ({type(error).__name__}: {error})") from None
        if not isinstance(state.torch_rng, torch.Tensor) or state.torch_rng.dtype != torch.uint8:
            raise CheckpointError(f"{os.fspath(path)} has a malformed training state (torch_rng is not a byte tensor)")
        return state


def save_checkpoint(policy: Any, path: str | os.PathLike, state: TrainingState | Mapping[str, Any]) -> None:
    """``policy.save(path, extra=...)``: the training state, or other plain data (greedy selections)."""
    extra = state.to_extra() if isinstance(state, TrainingState) else dict(state)
    policy.save(Path(path), extra=extra)


def read_training_state(path: str | os.PathLike) -> TrainingState | None:
    """The training state stored in a checkpoint, or None for a bare policy checkpoint."""
    return state_from_extra(read_checkpoint(path).extra, path)


def state_from_extra(extra: Mapping[str, Any], path: str | os.PathLike) -> TrainingState | None:
    """The :class:`TrainingState` in a checkpoint's ``extra`` (None when it holds none)."""
    if extra.get("format") != CHECKPOINT_FORMAT:
        return None
    return TrainingState.from_extra(extra, path)


def load_checkpoint(library: Any, path: str | os.PathLike, map_location: Any = None) -> tuple[Any, TrainingState | None]:
    """``(policy, training state or None)`` from ``path``, with a clear error for missing, corrupt or unsafe files."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    try:
        policy = library.load_policy(path, map_location=map_location)
    except (FileNotFoundError, ValueError):
        raise
    except Exception as exc:
        raise ValueError(f"checkpoint {path} could not be loaded as a policy: {exc}") from None
    return policy, state_from_extra(getattr(policy, "checkpoint_extra", {}) or {}, path)


def weights_are_finite(policy: Any) -> bool:
    """Whether every floating-point parameter and buffer of ``policy`` is finite."""
    return all(bool(torch.isfinite(t).all()) for t in policy.state_dict().values() if t.is_floating_point())


_NON_FINITE_WORDS = re.compile(r"\b(nan|inf|infinity|overflow)\b|invalid values", re.IGNORECASE)


def non_finite_failure(exc: Exception, policy: Any) -> str | None:
    """What went non-finite when an update raised ``exc`` (the weights, their gradients, or a float overflow or NaN the
    message names); None for any other failure, which is not divergence."""
    gradients = [p.grad for p in policy.parameters() if p.grad is not None]
    if weights_are_finite(policy) and all(bool(torch.isfinite(g).all()) for g in gradients) and not _NON_FINITE_WORDS.search(str(exc)):
        return None
    return f"the update failed on non-finite values ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
