"""Finding run directories: one rule for every page and tool that lists runs.

A folder is a run when it holds ``meta.json`` or ``metrics.csv``. The search
goes down at most :data:`MAX_DEPTH` folders below the root (``runs/sweep1/seed0``
is two), never into a run (its ``checkpoints/``, ``best/``), and skips folders
whose name starts with ``.`` or ``_``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .layout import RunPaths
from .read import try_read_json

MAX_DEPTH = 5
"""How many folders below the root a run may lie (``runs/sweep1/seed0`` lies two below ``runs/``)."""


@dataclass(frozen=True)
class RunSummary:
    """A run directory: its ``name`` (the path below the root, ``sweep1/seed0``), ``path`` and ``meta.json`` (``{}`` when
    missing or unreadable)."""

    name: str
    path: Path
    meta: dict[str, Any]

    @property
    def status(self) -> str:
        """``meta.json``'s status, ``unknown`` without one."""
        return str(self.meta.get("status", "unknown"))


def is_run(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a run directory (it holds ``meta.json`` or ``metrics.csv``)."""
    paths = RunPaths(path)
    return paths.meta_path.is_file() or paths.metrics_path.is_file()


def _runs_below(folder: Path, depth: int) -> list[Path]:
    if depth < 1 or not folder.is_dir():
        return []
    found: list[Path] = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith((".", "_")) or not path.is_dir():
            continue
        found += [path] if is_run(path) else _runs_below(path, depth - 1)
    return found


def list_runs(root: str | os.PathLike) -> list[RunSummary]:
    """The runs under ``root`` (see the module docstring), newest first; ``[]`` when ``root`` is not a folder."""
    root = Path(root)
    runs = sorted(_runs_below(root, MAX_DEPTH), key=lambda path: -path.stat().st_mtime)
    return [RunSummary(path.relative_to(root).as_posix(), path, try_read_json(RunPaths(path).meta_path)) for path in runs]
