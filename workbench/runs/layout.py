"""The layout of a run directory (``docs/contracts.md``, "Run directory"): its paths, columns and checkpoint names.

Standard library only, so a checkpoint writer (:mod:`workbench.learn.checkpoint`)
names files through it without pulling in pandas::

    runs/NAME/
      config.json          the trainer's config (TrainConfig for workbench train)
      meta.json            status, method, graphs, devices, stages, command, versions, machine, reference, ...
      metrics.csv          METRIC_COLUMNS (+ "predicted" with a real-system stage; each other trainer its own columns), one
                           line per episode
      greedy.csv           GREEDY_COLUMNS, one line per graph per periodic greedy evaluation (none in older runs)
      checkpoints/         last, <stage>, <stage>-best  (checkpoint_file names them)
      best/                placement.json + trace.json (best/<graph>/ each with several graphs)
      tensorboard/         optional
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

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

STAGE_NAMES = {"il": "Stage I: imitation", "sim": "Stage II: simulator RL", "real": "Stage III: real system"}
"""What each training stage is called in charts and captions."""

CHECKPOINT_SUFFIX = ".safetensors"
"""Policy checkpoints are safetensors files with a JSON header (:mod:`workbench.learn.checkpoint`); the old pickle ``.pt`` is refused."""
PICKLE_CHECKPOINT_SUFFIX = ".pt"
"""The old pickle checkpoints: a run holding one was written by an older workbench and is refused, never unpickled."""


def checkpoint_file(directory: str | os.PathLike, name: str) -> Path:
    """The checkpoint called ``name`` (``last``, a stage, ``<stage>-best``, a method) in ``directory``.

    The one place a checkpoint file is named: a new format changes :data:`CHECKPOINT_SUFFIX` only.
    """
    return Path(directory) / f"{name}{CHECKPOINT_SUFFIX}"


def checkpoint_name(path: str | os.PathLike) -> str:
    """The name :func:`checkpoint_file` gave ``path`` (``sim-best`` for ``checkpoints/sim-best.safetensors``)."""
    return Path(path).name.removesuffix(CHECKPOINT_SUFFIX)


ZERO_SHOT_FOLDER = "zero_shot"


def pretrained_checkpoint(graph: str, method: str, root: str | os.PathLike | None = None) -> Path:
    """Where a shipped policy of ``method`` for the graph named ``graph`` is (``datasets/pretrained/<graph>/<method>``)."""
    if root is None:
        from ..datasets import DATASETS_DIR

        root = DATASETS_DIR / "pretrained"
    return checkpoint_file(Path(root) / graph, method)


def zero_shot_checkpoint(root: str | os.PathLike | None = None) -> Path:
    """The shipped cross-graph policy (``datasets/pretrained/zero_shot/``): trained across the corpus, it places any graph
    at any device count; its ``meta.json`` names the graphs it was trained on."""
    if root is None:
        from ..datasets import DATASETS_DIR

        root = DATASETS_DIR / "pretrained"
    return checkpoint_file(Path(root) / ZERO_SHOT_FOLDER, "doppler_gate")


def shipped_training_runs(root: str | os.PathLike | None = None) -> list[Path]:
    """The shipped per-graph training runs under ``datasets/pretrained/`` (exports: folders with an ``export.json``).

    The other folders there are run directories too, of the cross-graph trainers (``zero_shot/``: a gate run;
    ``learned_search/``: a scorer run), not of ``workbench train``.
    """
    if root is None:
        from ..datasets import DATASETS_DIR

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
        self.export_path = self.path / "export.json"
        self.legacy_best_placement_path = self.path / "best_placement.json"
        """Where exports of the older layout kept their best placement (no trace); ``workbench train pretrained --migrate``."""

    def best_placement_path(self, subdir: str | None = None) -> Path:
        """``best/placement.json``, or ``best/<subdir>/placement.json`` (one graph of a run that trains several)."""
        return (self.best_dir / subdir if subdir else self.best_dir) / "placement.json"

    def best_trace_path(self, subdir: str | None = None) -> Path:
        """``best/trace.json`` beside :meth:`best_placement_path`."""
        return (self.best_dir / subdir if subdir else self.best_dir) / "trace.json"

    def checkpoint(self, name: str) -> Path:
        """The checkpoint called ``name`` in ``checkpoints/`` (:func:`checkpoint_file`)."""
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

    def usable_checkpoints(self, stages: Iterable[str]) -> list[Path]:
        """The weights to use after each of ``stages`` that has any (:meth:`selected_checkpoint`, in stage order), or
        ``[last]`` while there are none (a run in its first stage); ``[]`` without a checkpoint."""
        found = [path for path in map(self.selected_checkpoint, stages) if path is not None]
        return found or ([self.last_checkpoint] if self.last_checkpoint.is_file() else [])

    def checkpoints(self) -> tuple[Path, ...]:
        """Every checkpoint file in ``checkpoints/``, sorted by name."""
        return tuple(sorted(self.checkpoint_dir.glob(f"*{CHECKPOINT_SUFFIX}"))) if self.checkpoint_dir.is_dir() else ()
