"""The run-directory contract (``docs/contracts.md``, "Run directory"): paths, columns, readers, checkpoint names.

Training writes a run directory (:mod:`workbench.training.rundir` builds on
:class:`RunPaths`); the dashboard, the notebooks, ``workbench reproduce``, the
benchmarks and the pretrained export read it through this module. It imports
nothing but the standard library (no torch, no pandas), so every reader can
use it::

    runs/NAME/
      config.json          TrainConfig
      meta.json            status, method, graphs, devices, stages, versions, machine, reference, ...
      metrics.csv          METRIC_COLUMNS (+ "predicted" with a real-system stage), one line per episode
      greedy.csv           GREEDY_COLUMNS, one line per graph per periodic greedy evaluation (none in older runs)
      checkpoints/         last, <stage>, <stage>-best  (checkpoint_file names them)
      best/                placement.json + trace.json (best/<graph>/ each with several graphs)
      tensorboard/         optional

A reader never trusts the last line of ``metrics.csv``: a run being written
(or cut by a power loss) may end in half a line, which is ignored.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "METRIC_COLUMNS",
    "PREDICTED_COLUMN",
    "TEXT_COLUMNS",
    "GREEDY_COLUMNS",
    "VALUE_COLUMNS",
    "CHECKPOINT_SUFFIX",
    "RunPaths",
    "checkpoint_file",
    "pretrained_checkpoint",
    "ZERO_SHOT_FOLDER",
    "zero_shot_checkpoint",
    "shipped_training_runs",
    "complete_lines",
    "read_metrics",
    "read_meta",
    "try_read_meta",
    "references",
    "reference",
]

METRIC_COLUMNS = (
    "stage", "episode", "graph", "makespan", "reward", "baseline", "loss", "loss_policy", "loss_entropy",
    "loss_imitation", "teacher_agreement", "epsilon", "lr", "seconds", "oracle",
)  # fmt: skip
"""The header of ``metrics.csv``, in order (a new column goes here, at the end, and nowhere else)."""
PREDICTED_COLUMN = "predicted"
"""Appended to the header when the run has a ``real`` stage: the simulator's makespan beside the oracle's."""
TEXT_COLUMNS = ("stage", "graph", "oracle")
"""Columns that hold words; every other column is a number (empty: not logged in that stage)."""
VALUE_COLUMNS = tuple(c for c in METRIC_COLUMNS if c not in TEXT_COLUMNS and c != "episode")
"""The numeric columns a chart can plot against the episode."""

GREEDY_COLUMNS = ("stage", "episode", "graph", "greedy", "seconds")
"""The header of ``greedy.csv``: each greedy evaluation (``TrainConfig.greedy_every``, and at the start and end of an RL stage).

One line per graph per evaluation: ``episode`` is the number of episodes
trained when the policy was evaluated (so the weights that sample that
episode next), ``greedy`` the greedy placement's makespan (the stage's
oracle: seconds in a ``real`` stage), ``seconds`` the training time so far.
It is a file of its own because an evaluation covers every graph of the run
at once, also before a stage's first episode, while ``metrics.csv`` holds
exactly one line per episode. Runs written before it have none.
"""

CHECKPOINT_SUFFIX = ".safetensors"
"""Policy checkpoints are safetensors files with a JSON header (:mod:`workbench.learn.checkpoint`); the old pickle ``.pt`` is refused."""


def checkpoint_file(directory: str | os.PathLike, name: str) -> Path:
    """The checkpoint called ``name`` (``last``, a stage, ``<stage>-best``, a method) in ``directory``.

    The one place a checkpoint file is named: a new format changes :data:`CHECKPOINT_SUFFIX` only.
    """
    return Path(directory) / f"{name}{CHECKPOINT_SUFFIX}"


ZERO_SHOT_FOLDER = "zero_shot"


def pretrained_checkpoint(graph: str, method: str, root: str | os.PathLike | None = None) -> Path:
    """Where a shipped policy of ``method`` for the graph named ``graph`` is (``datasets/pretrained/<graph>/<method>``)."""
    if root is None:
        from .datasets import DATASETS_DIR

        root = DATASETS_DIR / "pretrained"
    return checkpoint_file(Path(root) / graph, method)


def zero_shot_checkpoint(root: str | os.PathLike | None = None) -> Path:
    """The shipped cross-graph policy (``datasets/pretrained/zero_shot/``): trained across the corpus, it places any graph
    at any device count; its ``meta.json`` names the graphs it was trained on."""
    if root is None:
        from .datasets import DATASETS_DIR

        root = DATASETS_DIR / "pretrained"
    return Path(root) / ZERO_SHOT_FOLDER / "doppler_gate.safetensors"


def shipped_training_runs(root: str | os.PathLike | None = None) -> list[Path]:
    """The shipped per-graph training runs under ``datasets/pretrained/`` (folders with an ``export.json``).

    Other shipped policies there (``learned_search/``, a move scorer with no training stages) are not runs.
    """
    if root is None:
        from .datasets import DATASETS_DIR

        root = DATASETS_DIR / "pretrained"
    return sorted(path.parent for path in Path(root).glob("*/export.json") if (path.parent / "meta.json").is_file())


class RunPaths:
    """The paths of one run directory (nothing is read or created)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.config_path = self.path / "config.json"
        self.meta_path = self.path / "meta.json"
        self.metrics_path = self.path / "metrics.csv"
        self.greedy_path = self.path / "greedy.csv"
        self.best_dir = self.path / "best"
        self.checkpoint_dir = self.path / "checkpoints"
        self.tensorboard_dir = self.path / "tensorboard"

    def checkpoint(self, name: str) -> Path:
        return checkpoint_file(self.checkpoint_dir, name)

    @property
    def last_checkpoint(self) -> Path:
        """Written every ``checkpoint_every`` episodes with the training state; resuming starts from it."""
        return self.checkpoint("last")

    def stage_checkpoint(self, stage: str) -> Path:
        """The weights at the end of ``stage``."""
        return self.checkpoint(stage)

    def best_checkpoint(self, stage: str) -> Path:
        """The weights of ``stage`` whose greedy placements were best (``TrainConfig.greedy_every``)."""
        return self.checkpoint(f"{stage}-best")

    def stage_checkpoints(self, stages: Iterable[str]) -> dict[str, Path]:
        """The existing stage checkpoints in stage order: ``<stage>`` then ``<stage>-best`` for each stage."""
        found = {}
        for stage in stages:
            for name, path in ((stage, self.stage_checkpoint(stage)), (f"{stage}-best", self.best_checkpoint(stage))):
                if path.is_file():
                    found[name] = path
        return found

    def selected_checkpoint(self, stage: str) -> Path | None:
        """The weights to use after ``stage``: ``<stage>-best`` when training kept one, else ``<stage>``; None when neither exists."""
        for path in (self.best_checkpoint(stage), self.stage_checkpoint(stage)):
            if path.is_file():
                return path
        return None

    def checkpoints(self) -> tuple[Path, ...]:
        """Every checkpoint file in ``checkpoints/``, sorted by name."""
        return tuple(sorted(self.checkpoint_dir.glob(f"*{CHECKPOINT_SUFFIX}"))) if self.checkpoint_dir.is_dir() else ()


def complete_lines(text: str) -> str:
    """``text`` up to and including its last newline: a half-written last line is dropped."""
    return text if text.endswith("\n") else text[: text.rfind("\n") + 1]


def read_metrics(path: str | os.PathLike) -> list[dict[str, str]]:
    """The complete rows of a ``metrics.csv`` as strings (a half-written last line and malformed rows are ignored).

    Each line is parsed on its own: metrics never span lines, so a stray quote
    costs only its own row instead of swallowing every row after it.
    """
    lines = complete_lines(Path(path).read_text(encoding="utf-8")).splitlines()
    if not lines:
        return []
    header = next(csv.reader([lines[0]]))
    rows = (next(csv.reader([line]), []) for line in lines[1:])
    return [dict(zip(header, values, strict=True)) for values in rows if len(values) == len(header)]


def read_meta(path: str | os.PathLike) -> dict[str, Any]:
    """``meta.json`` as a dict."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def try_read_meta(path: str | os.PathLike) -> dict[str, Any]:
    """``meta.json`` as a dict, or ``{}`` when it is missing, unreadable or not a JSON object (for scans over many runs)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def references(meta: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """``meta["reference"]`` keyed per graph: ``{graph: {"critical_path", "best_heuristic", "best_heuristic_method"}}``.

    Training writes it keyed per graph. Runs written before that (the shipped
    ones in ``datasets/pretrained/``) hold one graph's values flat; they are
    keyed by the run's only graph here. Anything else gives ``{}``.
    """
    ref = meta.get("reference") if meta is not None else None
    if meta is None or not isinstance(ref, Mapping):
        return {}
    if "critical_path" in ref and not isinstance(ref["critical_path"], Mapping):
        graphs = meta.get("graphs") or []
        return {str(graphs[0]): dict(ref)} if len(graphs) == 1 else {}
    return {str(graph): dict(values) for graph, values in ref.items() if isinstance(values, Mapping)}


def reference(meta: Mapping[str, Any] | None, graph: str | None = None) -> dict[str, Any]:
    """The references of ``graph`` (default: the run's only graph); ``{}`` when the run has none for it."""
    per_graph = references(meta)
    if graph is None:
        return next(iter(per_graph.values())) if len(per_graph) == 1 else {}
    return per_graph.get(graph, {})
