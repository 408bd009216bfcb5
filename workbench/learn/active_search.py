"""Per-instance active search for a trained DOPPLER policy (EAS, Hottung et al., ICLR 2022).

The trained network is frozen and its encoders run once; only a per-op x
per-device table added to PLC's logits is adapted, on this one graph (the
EAS-Lay idea reduced to a bias table). The table starts at zero, so the
first policy is the trained one. Each step samples ``rollouts`` placements,
scores them in the simulator and takes one Adam step on

    REINFORCE with the rollouts' mean makespan as shared baseline
    + ``imitation_weight`` x (-log p of the best placement so far),

the imitation weight 0.013 being rl4co's EAS default. Every rollout is one
simulator evaluation, the greedy start included; the budget is honoured
exactly (the last step samples fewer rollouts when fewer are left), and the
result is the best placement seen, so it is never worse than the start.

``polish`` > 0 spends that fraction of the budget, after the adaptation, on
``local_search`` started from the best placement found: the policy steers a
search that sees exact costs (as REGAL and EAS's successors do), and the
evaluations still add up to the budget. A policy with random node features
is adapted under its greedy draw (draw 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..cluster import Devices
from ..graph import DataflowGraph
from ..placers import place
from ..placers.anytime import BestSoFar
from .choice import Chooser, Rollout
from .env import Guide, PlacementState
from .policy import LearnedPolicy

__all__ = ["ActiveSearchConfig", "SearchResult", "active_search"]


@dataclass(frozen=True)
class ActiveSearchConfig:
    """Settings of one active search.

    Attributes:
        budget: simulator evaluations in all, the greedy start included (>= 1).
        rollouts: placements sampled per step (K); they share the baseline.
        learning_rate: Adam's step size on the logit table.
        imitation_weight: weight of ``-log p`` of the best placement so far (lambda).
        polish: fraction of the budget left, after the adaptation, to ``local_search`` from the best placement (0: none).
    """

    budget: int = 2_000
    rollouts: int = 16
    learning_rate: float = 0.05
    imitation_weight: float = 0.013
    polish: float = 0.0

    def __post_init__(self) -> None:
        for name in ("budget", "rollouts"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if not self.imitation_weight >= 0:
            raise ValueError(f"imitation_weight must be >= 0, got {self.imitation_weight}")
        if not 0 <= self.polish < 1:
            raise ValueError(f"polish must be in [0, 1), got {self.polish}")


@dataclass(frozen=True)
class SearchResult:
    """What an active search found.

    Attributes:
        assignment: device per op of the best placement seen.
        order: the order its ops were placed in (None when the final local search found it).
        makespan: its simulated makespan.
        start_makespan: the trained policy's greedy makespan (the first evaluation).
        evaluations: simulator evaluations made (equals the budget).
        steps: gradient steps taken.
        found_at: the evaluation (1-based) that found the best placement (the last, when the final local search found it).
        anytime: ``[evaluation, best makespan so far]`` per improvement and at the last evaluation.
        polished: evaluations spent in the final local search.
    """

    assignment: np.ndarray
    order: np.ndarray | None
    makespan: float
    start_makespan: float
    evaluations: int
    steps: int
    found_at: int
    anytime: list[list[float]]
    polished: int = 0


def active_search(policy: LearnedPolicy, graph: DataflowGraph, devices: Devices, config: ActiveSearchConfig, seed: int = 0) -> SearchResult:
    """Adapt a PLC logit table to ``graph`` within ``config.budget`` evaluations; the best placement seen.

    ``policy`` must be a DOPPLER policy with a learned PLC; its weights are not changed.
    """
    from ..sim import Evaluator

    if not getattr(policy, "learn_place", False):
        raise ValueError(f"active search adapts PLC's logits: it needs a doppler policy with a learned PLC, not {policy.method!r}")
    evaluator = Evaluator(graph, devices)
    frozen = [p.requires_grad for p in policy.parameters()]
    policy.requires_grad_(False)
    try:
        with torch.no_grad():
            encoded = policy.encode(policy.inputs(graph, policy.feature_draws(None)))
        table = torch.zeros((graph.num_nodes, evaluator.devices), dtype=encoded.own.dtype, device=policy.device, requires_grad=True)
        encoded.plc_offset = table
        optimizer = torch.optim.Adam([table], lr=config.learning_rate)
        generator = torch.Generator(device=policy.device).manual_seed(seed)
        decisions = 2 * graph.num_nodes

        def play(mode: str, guide: Guide | None = None) -> Rollout:
            return policy.play(PlacementState(graph, devices, guide), Chooser(mode, 0.0, decisions, generator), guide is not None, encoded)

        with torch.no_grad():
            best = play("greedy")
        start = best_makespan = float(evaluator(best.assignment))
        found_at, steps, anytime = 1, 0, BestSoFar()
        anytime.add([start])
        adapt = config.budget - polish_budget(config)
        while evaluator.evaluations < adapt:
            batch = [play("sample") for _ in range(min(config.rollouts, adapt - evaluator.evaluations))]
            makespans = np.atleast_1d(evaluator(np.stack([r.assignment for r in batch])))
            anytime.add(makespans)
            winner = int(np.argmin(makespans))
            if makespans[winner] < best_makespan:
                best, best_makespan = batch[winner], float(makespans[winner])
                found_at = evaluator.evaluations - len(batch) + winner + 1
            if evaluator.evaluations >= adapt:
                break  # a step after the last evaluation could not be used
            relative = (makespans - makespans.mean()) / max(start, np.finfo(float).tiny)
            advantage = torch.as_tensor(relative, dtype=table.dtype, device=table.device)
            reinforce = (advantage * torch.stack([r.log_prob for r in batch])).mean()
            imitation = play("teacher", Guide(best.order, best.assignment)).imitation_loss
            optimizer.zero_grad()
            (reinforce + config.imitation_weight * imitation).backward()
            optimizer.step()
            steps += 1
    finally:
        for parameter, flag in zip(policy.parameters(), frozen, strict=True):
            parameter.requires_grad_(flag)
    assignment, order, polished = best.assignment, best.order, polish_budget(config)
    if polished:
        local = place(graph, "local_search", devices, seed=seed, budget=polished, start=assignment)
        for evaluation, makespan in local.details["anytime"]:
            anytime.add([makespan], evaluator.evaluations + int(evaluation))
        if local.makespan < best_makespan:
            assignment, order, best_makespan = local.assignment, None, local.makespan
            found_at = evaluator.evaluations + polished
    evaluations = evaluator.evaluations + polished
    return SearchResult(assignment, order, best_makespan, start, evaluations, steps, found_at, anytime.points, polished)


def polish_budget(config: ActiveSearchConfig) -> int:
    """Evaluations left to the final local search (none when the budget is too small to leave one to the adaptation)."""
    return min(int(config.budget * config.polish), config.budget - 1)
