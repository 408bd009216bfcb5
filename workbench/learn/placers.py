"""Learned policies as registry placers: ``workbench.place(graph, method="doppler", checkpoint=PATH)``.

``samples=1`` places greedily; ``samples=K > 1`` samples K placements (seeded)
and keeps the one with the smallest simulated makespan. Without a
checkpoint a placer looks for ``datasets/pretrained/<graph name>/<method>.safetensors``. A checkpoint
trained for another graph or device count is refused unless it is cross-graph.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from ..cluster import Devices
from ..graph import DataflowGraph
from ..placers.base import Decision, Placer
from ..placers.registry import PlacerError
from .policy import LearnedPolicy, load_policy

__all__ = [
    "LearnedPlacer",
    "DopplerPlacer",
    "DopplerSelOnlyPlacer",
    "DopplerPlcOnlyPlacer",
    "PlacetoPlacer",
    "GDPPlacer",
    "JointPlacer",
    "pretrained_path",
]


def pretrained_path(graph: DataflowGraph, method: str) -> Path:
    """Where a bundled pretrained checkpoint of ``method`` for ``graph`` would be."""
    from ..rundir import pretrained_checkpoint

    return pretrained_checkpoint(graph.name, method)


class LearnedPlacer(Placer):
    """A trained policy's placement: greedy, or the best of ``samples`` sampled ones in the simulator."""

    method = ""

    def __init__(self, checkpoint: str | os.PathLike | None = None, samples: int = 1) -> None:
        if int(samples) < 1:
            raise PlacerError(f"samples must be >= 1, got {samples}")
        self.checkpoint = checkpoint
        self.samples = int(samples)

    def _policy(self, graph: DataflowGraph, devices: Devices) -> LearnedPolicy:
        path = Path(self.checkpoint) if self.checkpoint is not None else pretrained_path(graph, self.method)
        if self.checkpoint is None and not path.is_file():
            raise PlacerError(f"method {self.method!r} needs checkpoint=PATH: no pretrained checkpoint for graph {graph.name!r} at {path}")
        policy = load_policy(path, map_location="cuda" if torch.cuda.is_available() else "cpu", graph=graph, devices=devices)
        if policy.method != self.method:
            raise PlacerError(f"checkpoint {path} holds a {policy.method!r} policy, not {self.method!r}")
        return policy

    def place(self, graph: DataflowGraph, devices: Devices, seed: int = 0) -> Decision:
        from ..sim import Evaluator

        policy = self._policy(graph, devices)
        with torch.no_grad():
            if self.samples == 1:
                rollouts = [policy.rollout(graph, devices, mode="greedy")]
            else:
                generator = torch.Generator(device=policy.device).manual_seed(seed)
                rollouts = [policy.rollout(graph, devices, mode="sample", generator=generator) for _ in range(self.samples)]
        makespans = np.atleast_1d(Evaluator(graph, devices)(np.stack([r.assignment for r in rollouts])))
        best = int(np.argmin(makespans))
        details = {"checkpoint": str(self.checkpoint or pretrained_path(graph, self.method)), "samples": self.samples}
        if self.samples > 1:
            details["sampled_makespans"] = makespans.tolist()
        return Decision(rollouts[best].assignment, order=rollouts[best].order, details=details)


class DopplerPlacer(LearnedPlacer):
    """DOPPLER's SEL + PLC policy (Yao et al., ICLR 2026)."""

    method = "doppler"


class DopplerSelOnlyPlacer(LearnedPlacer):
    """Ablation: learned SEL, critical-path device choice."""

    method = "doppler_sel_only"


class DopplerPlcOnlyPlacer(LearnedPlacer):
    """Ablation: critical-path op choice, learned PLC."""

    method = "doppler_plc_only"


class PlacetoPlacer(LearnedPlacer):
    """Placeto (Addanki et al., NeurIPS 2019), as reimplemented in :mod:`workbench.learn.placeto`."""

    method = "placeto"


class GDPPlacer(LearnedPlacer):
    """GDP (Zhou et al., 2019), as reimplemented in :mod:`workbench.learn.gdp`."""

    method = "gdp"


class JointPlacer(LearnedPlacer):
    """One policy over (ready op, device) pairs (:mod:`workbench.learn.joint`)."""

    method = "joint"
