"""Training checkpoints: the policy's own save format plus the training state under ``extra``.

``extra`` holds the episode count, the stage, optimizer and LR-scheduler
state, the running baselines, the random generators' state and the wall
time so far, so that a resumed run continues exactly where the checkpoint
left it. Writes go to a temporary file that is then renamed over the target.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Mapping

import torch

__all__ = ["save_checkpoint", "read_training_state", "load_checkpoint", "CHECKPOINT_FORMAT"]

CHECKPOINT_FORMAT = "workbench-train-1"


def save_checkpoint(policy: Any, path: str | os.PathLike, state: Mapping[str, Any]) -> None:
    """``policy.save`` to a temporary file beside ``path``, then rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.name)
    os.close(fd)
    try:
        policy.save(tmp, extra={"format": CHECKPOINT_FORMAT, **state})
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _read_payload(path: Path) -> Any:
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ValueError(f"checkpoint {path} is unreadable (truncated, corrupt or not a torch checkpoint): {exc}") from None


def read_training_state(path: str | os.PathLike) -> dict[str, Any] | None:
    """The training state stored in a checkpoint, or None for a bare policy checkpoint."""
    payload = _read_payload(Path(path))
    extra = payload.get("extra") if isinstance(payload, dict) else None
    if isinstance(extra, dict) and extra.get("format") == CHECKPOINT_FORMAT:
        return extra
    return None


def load_checkpoint(library: Any, path: str | os.PathLike, map_location: Any = None) -> tuple[Any, dict[str, Any] | None]:
    """``(policy, training state or None)`` from ``path``, with a clear error for missing or corrupt files."""
    state = read_training_state(path)
    try:
        policy = library.load_policy(path, map_location=map_location)
    except (FileNotFoundError, ValueError):
        raise
    except Exception as exc:
        raise ValueError(f"checkpoint {path} could not be loaded as a policy: {exc}") from None
    return policy, state
