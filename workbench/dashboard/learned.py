"""Which graph and stage a learned method's checkpoint comes from, and where the dashboard may apply it.

A checkpoint trained on one graph is offered only for that graph and its
device count; a cross-graph policy (its header's ``trained_for.cross_graph``)
is offered for any graph on any device count, as its placer accepts it, and
its caption then says "trained on X, placed on Y". The origin is read from
the checkpoint's own safetensors header (:func:`workbench.learn.header.read_header`,
no torch): the method and ``trained_for`` (graphs and devices) always, the
stage from ``extra`` where the writer kept it. A choice in the ``active``
mode (:class:`~workbench.dashboard.choice.MethodChoice`) is the same
checkpoint run as per-instance active search.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..datasets import PAPER_GRAPHS
from ..learn.header import CheckpointHeader, read_header
from ..placers import methods
from ..runs import STAGE_NAMES, RunPaths, checkpoint_name, try_read_json
from .choice import MethodChoice
from .context import DashboardContext

__all__ = ["Origin", "checkpoint_header", "checkpoint_origin", "usable", "selection_key", "pretrained_name"]

STAGE_TITLES = {stage: name.partition(":")[0] for stage, name in STAGE_NAMES.items()}
GRAPHS_NAMED = 3
"""A caption names at most this many training graphs (a cross-graph policy's: their count and the first ones)."""


@dataclass(frozen=True)
class Origin:
    """Where a checkpoint comes from: the graphs and device count it was trained on, and its stage."""

    method: str
    kind: str  # "pretrained" or "run"
    run: str
    graphs: tuple[str, ...]
    devices: int | None
    stage: str
    cross_graph: bool = False
    search: str = ""  # "active" for the checkpoint's active search

    @property
    def short(self) -> str:
        """``doppler (pretrained)``, ``doppler_plc_only (pretrained zero_shot)`` (a shipped cross-graph policy) or
        ``doppler (run NAME)``."""
        search = f" {self.search} search" if self.search else ""
        return f"{self.method}{search} ({'run ' + self.run if self.kind == 'run' else pretrained_name(self.run)})"

    def detail(self, placed_on: str | None = None) -> str:
        """``trained on chain_mm_112nodes, Stage II best greedy``, plus ``; placed on Y`` across graphs (more than
        :data:`GRAPHS_NAMED` graphs: their count and the first ones)."""
        named = ", ".join(self.graphs[:GRAPHS_NAMED]) + (", …" if len(self.graphs) > GRAPHS_NAMED else "")
        graphs = f"{len(self.graphs)} graphs ({named})" if len(self.graphs) > GRAPHS_NAMED else named
        text = f"trained on {graphs or 'graphs its header does not name'}, {self.stage}"
        return text + (f"; placed on {placed_on}" if placed_on is not None and placed_on not in self.graphs else "")

    def label(self, placed_on: str | None = None) -> str:
        """``doppler (pretrained, trained on chain_mm_112nodes, Stage II best greedy)``, plus ``; placed on Y`` across graphs."""
        return f"{self.short[:-1]}, {self.detail(placed_on)})"


def pretrained_name(folder: str) -> str:
    """``pretrained`` for a graph's shipped policy (its folder is named after the graph), ``pretrained FOLDER`` otherwise."""
    return "pretrained" if folder in PAPER_GRAPHS else f"pretrained {folder}"


def _stage(name: str) -> str:
    """``sim-best`` → ``Stage II best greedy``; ``last`` stays ``last weights``."""
    stage, _, best = name.partition("-")
    if stage in STAGE_TITLES:
        return STAGE_TITLES[stage] + (" best greedy" if best == "best" else "")
    return f"{name} weights"


def _changed(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_mtime_ns, info.st_size


@lru_cache(maxsize=256)
def _read_header(path: str, _stamp: tuple[int, int]) -> CheckpointHeader:
    return read_header(path)


def checkpoint_header(path: str | os.PathLike) -> CheckpointHeader:
    """The checked header of the checkpoint at ``path`` (cached while the file is unchanged); ``CheckpointError`` (a
    ``ValueError``) says what is wrong."""
    path = Path(path)
    try:
        changed = _changed(path)
    except OSError:
        changed = (0, 0)  # read_header says why
    return _read_header(str(path), changed)


def _origin_stage(choice: MethodChoice, path: Path, header: CheckpointHeader) -> str:
    """The stage of the weights: the run checkpoint an export was made from (``extra.exported_from``), else the stage the
    checkpoint's name gives (``sim-best``), else the stage a ``last`` checkpoint's training state was in (``extra.stage``).

    A shipped policy whose header records none of these (the zero-shot policy: the gate trainer keeps only its step)
    falls back to the ``stage`` its folder's ``meta.json`` names, else ``shipped weights``.
    """
    exported, stage, name = header.extra.get("exported_from"), header.extra.get("stage"), checkpoint_name(path)
    if isinstance(exported, str) and exported:
        return _stage(Path(exported).stem)  # the shipped exports name the run's sim-best.pt, from before safetensors
    if name.partition("-")[0] in STAGE_TITLES:
        return _stage(name)
    if isinstance(stage, str) and stage:
        return f"{name} weights, in {STAGE_TITLES.get(stage, stage)}"
    if choice.root == "datasets":
        return str(try_read_json(RunPaths(path.parent).meta_path).get("stage") or "shipped weights")
    return f"{name} weights"


def checkpoint_origin(ctx: DashboardContext, value: str) -> Origin | None:
    """The origin of a method dropdown value's checkpoint (:class:`~workbench.dashboard.choice.MethodChoice`), read from
    its header; ``None`` for a method without one. ``ValueError`` for a malformed value or an unreadable checkpoint."""
    choice = MethodChoice.from_value(value)
    path = choice.checkpoint_path(ctx)
    if path is None:
        return None
    header = checkpoint_header(path)
    trained = header.trained_for
    graphs = tuple(dict.fromkeys(g.name for g in trained.graphs)) if trained else ()
    # a move scorer (learned_search) records no training graphs and scores any graph's moves; a policy must record them
    cross_graph = bool(trained.cross_graph) if trained else (header.method or choice.method) not in methods("learned")
    devices = trained.devices if trained and not cross_graph else None
    kind = "pretrained" if choice.root == "datasets" else "run"
    stage = _origin_stage(choice, path, header)
    search = "active" if choice.active else ""
    return Origin(header.method or choice.method, kind, choice.source, graphs, devices, stage, cross_graph, search)


def usable(origin: Origin | None, graph_name: str, devices: int) -> bool:
    """Whether a checkpoint may place ``graph_name`` on ``devices``: its own graph on its device count, or any graph on any
    device count for a cross-graph policy (as :meth:`workbench.learn.header.TrainedFor.check` decides)."""
    if origin is None or origin.cross_graph:
        return True
    return origin.devices == devices and graph_name in origin.graphs


def selection_key(ctx: DashboardContext, value: str) -> tuple[str, str]:
    """What a selected method means across graphs: ``(method, "pretrained" | "pretrained FOLDER" | run checkpoint | "")``.

    A graph's own shipped policy stands for the next graph's; a run's checkpoint stands only for itself (each stage's
    weights of one run are different choices)."""
    origin = checkpoint_origin(ctx, value)
    if origin is None:
        return value, ""
    method = MethodChoice(origin.method, mode=origin.search).to_value()
    return method, MethodChoice.from_value(value).path if origin.kind == "run" else pretrained_name(origin.run)
