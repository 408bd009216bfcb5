"""Which graph and stage a learned method's checkpoint comes from, and where the dashboard may apply it.

A checkpoint trained on one graph is offered only for that graph and its
device count; a policy trained on several graphs (a cross-graph policy) is
offered for any graph on its device count, and its caption then says
"trained on X, placed on Y". The origin is read from the run directory the
checkpoint sits in (``meta.json``; a shipped pretrained folder is one), so
it does not depend on the checkpoint's file format. A value ``active|METHOD@REF``
(:data:`ACTIVE`) is the same checkpoint run as per-instance active search.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..datasets import PAPER_GRAPHS
from ..runs import STAGE_NAMES, checkpoint_name, try_read_json
from .context import DashboardContext

__all__ = ["ACTIVE", "Origin", "split_active", "checkpoint_origin", "usable", "selection_key", "pretrained_name"]

ACTIVE = "active|"
"""Prefix of a method value that runs the checkpoint's per-instance active search within the search budget."""

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
        text = f"trained on {graphs or 'unknown graphs'}, {self.stage}"
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


def split_active(value: str) -> tuple[bool, str]:
    """``(active search?, the method value without the prefix)`` of a method dropdown value."""
    active = value.startswith(ACTIVE)
    return active, value[len(ACTIVE) :] if active else value


def checkpoint_origin(ctx: DashboardContext, value: str) -> Origin | None:
    """The origin of a method dropdown value's checkpoint (``[active|]method@root:path``), ``None`` for a method without one."""
    active, value = split_active(value)
    method, _, ref = value.partition("@")
    root, _, relative = ref.partition(":")
    if root == "datasets":
        folder = ctx.in_datasets(relative).parent
        kind, run = "pretrained", folder.name
        exported = str(try_read_json(folder / "export.json").get("exported_from", ""))
        stage = _stage(checkpoint_name(exported)) if exported else str(try_read_json(folder / "meta.json").get("stage", "shipped weights"))
    elif root == "runs":
        checkpoint = ctx.in_runs(relative)
        folder = checkpoint.parent.parent
        kind, run = "run", folder.relative_to(ctx.runs_dir).as_posix()
        meta = try_read_json(folder / "meta.json")
        stages = meta.get("stages") if isinstance(meta.get("stages"), list) else []
        stage = (
            _stage(checkpoint_name(checkpoint))
            if checkpoint_name(checkpoint) != "last"
            else f"last weights, {' → '.join(STAGE_TITLES.get(s, s) for s in stages)}"
        )
    else:
        return None
    meta = try_read_json(folder / "meta.json")
    graphs = tuple(map(str, meta.get("graphs", []))) if isinstance(meta.get("graphs"), list) else ()
    if kind == "pretrained" and not graphs:
        graphs = (folder.name,)
    devices = meta.get("devices") if isinstance(meta.get("devices"), int) else None
    return Origin(method, kind, run, graphs, devices, stage, "active" if active else "")


def usable(origin: Origin | None, graph_name: str, devices: int) -> bool:
    """Whether a checkpoint may place ``graph_name`` on ``devices``: its own graph, or any graph for a cross-graph policy."""
    if origin is None:
        return True
    if origin.devices is not None and origin.devices != devices:
        return False
    return graph_name in origin.graphs or len(origin.graphs) > 1


def selection_key(ctx: DashboardContext, value: str) -> tuple[str, str]:
    """What a selected method means across graphs: ``(method, "pretrained" | run name | "")``."""
    origin = checkpoint_origin(ctx, value)
    if origin is None:
        return value, ""
    method = ACTIVE + origin.method if origin.search else origin.method
    return method, origin.run if origin.kind == "run" else pretrained_name(origin.run)
