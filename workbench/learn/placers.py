"""Learned policies as registry placers: ``workbench.place(graph, method="doppler", checkpoint=PATH)``.

``samples=1`` places greedily; ``samples=K > 1`` also makes K-1 further
placements (seeded: greedy ones under other random-feature draws when the
policy has random node features, else samples) and keeps the one of the K
with the smallest simulated makespan, so it is never worse than greedy. Without a
checkpoint a placer looks for ``datasets/pretrained/<graph name>/<method>.safetensors``. A checkpoint
trained for another graph or device count is refused unless it is cross-graph.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from ..cluster import Devices
from ..graph import DataflowGraph
from ..placers.anytime import BestSoFar
from ..placers.base import Decision, Placer
from ..placers.best_constructive import constructive_starts
from ..placers.registry import PlacerError
from .active_search import ActiveSearchConfig, active_search
from .policy import LearnedPolicy, load_policy

__all__ = [
    "LearnedPlacer",
    "DopplerPlacer",
    "pretrained_path",
    "SEARCHES",
]

# DopplerPlacer's ``search`` option: none (greedy / best of ``samples``) or per-instance active search
SEARCHES = ("none", "active")


def pretrained_path(graph: DataflowGraph, method: str) -> Path:
    """Where a bundled pretrained checkpoint of ``method`` for ``graph`` would be."""
    from ..runs import pretrained_checkpoint

    return pretrained_checkpoint(graph.name, method)


class LearnedPlacer(Placer):
    """A trained policy's placement: greedy, or the best in the simulator of greedy and ``samples - 1`` further ones.

    With ``guard``, every one-pass method's placement (:func:`~workbench.placers.best_constructive.constructive_starts`) is
    evaluated too, one counted evaluation each, and the best of all wins: never worse than ``best_constructive``, at the
    cost of the evaluations it spends. One class serves every learned method: the registry passes ``method``
    (:func:`~workbench.learn.registry.register_policy`).
    """

    def __init__(self, method: str, checkpoint: str | os.PathLike | None = None, samples: int = 1, guard: bool = False) -> None:
        self.method = method
        if int(samples) < 1:
            raise PlacerError(f"samples must be >= 1, got {samples}")
        self.checkpoint = checkpoint
        self.samples = int(samples)
        self.guard = bool(guard)

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

        began, started = time.process_time(), time.perf_counter()
        policy = self._policy(graph, devices)
        rollouts = policy.candidates(graph, devices, self.samples, seed, self._deadline(started))
        further = "draw" if policy.config.random_features else "sample"
        names = ["greedy"] + [f"{further} {k}" for k in range(1, len(rollouts))]
        assignments = np.stack([r.assignment for r in rollouts])
        if self.guard:
            rules, rule_assignments = constructive_starts(graph, devices)
            names += [f"guard {name}" for name in rules]
            assignments = np.concatenate([assignments, rule_assignments])
        makespans = np.atleast_1d(Evaluator(graph, devices)(assignments))
        best = int(np.argmin(makespans))  # the first minimum: greedy wins ties, then the policy's samples
        anytime = BestSoFar(began)
        anytime.add(makespans)
        details = {
            "checkpoint": str(self.checkpoint or pretrained_path(graph, self.method)),
            "samples": self.samples,
            "drawn": len(rollouts),
            "guard": self.guard,
            "evaluations": len(assignments),
            "winner": names[best],
            "anytime": anytime.points,
        }
        if len(assignments) > 1:
            details["makespans"] = makespans.tolist()
        order = rollouts[best].order if best < len(rollouts) else None
        return Decision(assignments[best], order=order, details=details)

    def _deadline(self, started: float) -> float | None:
        """When best of ``samples`` stops drawing (a ``time.perf_counter()`` value); ``None``: it draws them all."""
        return None


class DopplerPlacer(LearnedPlacer):
    """DOPPLER's SEL + PLC policy (Yao et al., ICLR 2026).

    ``search="active"`` adapts a per-op x per-device table on PLC's logits to
    this graph within ``budget`` simulator evaluations, starting from the greedy
    placement (EAS, Hottung et al., ICLR 2022; :mod:`workbench.learn.active_search`):
    ``rollouts`` per step, Adam at ``learning_rate``, imitation of the best so far
    weighted ``imitation_weight``; ``polish`` gives that fraction of the budget to
    ``local_search`` from the best placement so far, in ``rounds`` bursts interleaved
    with the adaptation; ``time_limit`` caps its wall time; ``progress`` shows a bar of the evaluations spent and the
    gain so far. Without it those eight options are unused; ``time_limit`` also caps best of ``samples``, which then
    keeps the best of those drawn by then (``details["drawn"]``, at least the greedy placement). It serves the doppler
    methods with a learned PLC (``doppler``, and ``doppler_plc_only``, whose zero-shot checkpoint gives an unseen graph
    per-instance search).
    """

    def __init__(
        self,
        method: str,
        checkpoint: str | os.PathLike | None = None,
        samples: int = 1,
        search: str = "none",
        budget: int = ActiveSearchConfig.budget,
        rollouts: int = ActiveSearchConfig.rollouts,
        learning_rate: float = ActiveSearchConfig.learning_rate,
        imitation_weight: float = ActiveSearchConfig.imitation_weight,
        polish: float = ActiveSearchConfig.polish,
        rounds: int = ActiveSearchConfig.rounds,
        time_limit: float | None = ActiveSearchConfig.time_limit,
        guard: bool = False,
        progress: bool = False,
    ) -> None:
        super().__init__(method, checkpoint, samples, guard)
        if search not in SEARCHES:
            raise PlacerError(f"search must be one of {', '.join(SEARCHES)}, got {search!r}")
        if search == "active" and self.samples > 1:
            raise PlacerError("samples and search='active' do not combine: active search's budget already counts every placement it tries")
        if search == "active" and self.guard:
            raise PlacerError("guard and search='active' do not combine: give active search's result to best_constructive's comparison")
        try:
            self.search_config = ActiveSearchConfig(
                int(budget),
                int(rollouts),
                float(learning_rate),
                float(imitation_weight),
                float(polish),
                int(rounds),
                None if time_limit is None else float(time_limit),
            )
        except ValueError as error:
            raise PlacerError(str(error)) from None
        self.search = search
        self.progress = progress

    def _deadline(self, started: float) -> float | None:
        limit = self.search_config.time_limit
        return None if limit is None else started + limit

    def place(self, graph: DataflowGraph, devices: Devices, seed: int = 0) -> Decision:
        if self.search == "none":
            return super().place(graph, devices, seed)
        found = active_search(self._policy(graph, devices), graph, devices, self.search_config, seed, progress=self.progress)
        details = {
            "checkpoint": str(self.checkpoint or pretrained_path(graph, self.method)),
            "search": self.search,
            "evaluations": found.evaluations,
            "steps": found.steps,
            "start_makespan": found.start_makespan,
            "found_at_evaluation": found.found_at,
            "anytime": found.anytime,
            "polished_evaluations": found.polished,
            **asdict(self.search_config),
        }
        return Decision(found.assignment, order=found.order, details=details)
