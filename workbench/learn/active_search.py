"""Per-instance active search for a trained DOPPLER policy (EAS, Hottung et al., ICLR 2022).

The trained network is frozen and its encoders run once; only a per-op x
per-device table added to PLC's logits is adapted, on this one graph (the
EAS-Lay idea reduced to a bias table). The table starts at zero, so the
first policy is the trained one. Each step samples ``rollouts`` placements,
scores them in the simulator and takes one Adam step on

    REINFORCE with the rollouts' mean makespan as shared baseline
    + ``imitation_weight`` x (-log p of the best placement so far),

with Adam at ``learning_rate`` on the table. Every rollout is one simulator
evaluation, the greedy start included; the budget is honoured exactly (the
last step samples fewer rollouts when fewer are left), and the result is the
best placement seen, so it is never worse than the start.

``polish`` > 0 spends that fraction of the budget on ``local_search``
started from the best placement found, in ``rounds`` equal bursts
interleaved with the adaptation: the budget is cut into ``rounds`` rounds,
each adapts the table for its share of ``1 - polish`` of the budget and then
polishes the best placement so far for its share of ``polish``. A polished
placement that is better becomes the one imitated (in the order of the
rollout it came from), so the policy proposes, the search refines and the
policy learns from the refinement; ``rounds=1`` polishes once, at the end.
A burst gets at least :data:`MIN_BURST` evaluations (fewer rounds on a small
budget). The defaults give local search half of the budget in ten bursts and
weight the imitation 1.0 (rl4co's EAS default, 0.013, is for imitating its
own samples; here the target is the refined placement); ``polish=0`` is the
pure EAS, every evaluation a sample of the adapted policy.
The evaluations of both parts add up to the budget exactly; with a
``time_limit`` the search may stop earlier, after fewer. A policy with
random node features is adapted under its greedy draw (draw 0).
"""

from __future__ import annotations

import time
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

__all__ = ["ActiveSearchConfig", "SearchResult", "active_search", "MIN_BURST"]

MIN_BURST = 10
"""The fewest evaluations one local-search burst gets (a burst also re-evaluates its start)."""


@dataclass(frozen=True)
class ActiveSearchConfig:
    """Settings of one active search.

    Attributes:
        budget: simulator evaluations in all, the greedy start included (>= 1).
        rollouts: placements sampled per step (K); they share the baseline.
        learning_rate: Adam's step size on the logit table.
        imitation_weight: weight of ``-log p`` of the best placement so far (lambda).
        polish: fraction of the budget given to ``local_search`` from the best placement so far (0: none).
        rounds: bursts the polishing is split into, interleaved with the adaptation (1: one burst at the end).
        time_limit: optional wall-time cap in seconds; the search stops at the first step or burst past it.
    """

    budget: int = 2_000
    rollouts: int = 16
    learning_rate: float = 0.05
    imitation_weight: float = 1.0
    polish: float = 0.5
    rounds: int = 10
    time_limit: float | None = None

    def __post_init__(self) -> None:
        for name in ("budget", "rollouts", "rounds"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if not self.imitation_weight >= 0:
            raise ValueError(f"imitation_weight must be >= 0, got {self.imitation_weight}")
        if self.time_limit is not None and not self.time_limit > 0:
            raise ValueError(f"time_limit must be > 0 seconds, got {self.time_limit}")
        if not 0 <= self.polish < 1:
            raise ValueError(f"polish must be in [0, 1), got {self.polish}")


@dataclass(frozen=True)
class SearchResult:
    """What an active search found.

    Attributes:
        assignment: device per op of the best placement seen.
        order: the order its ops were placed in (None when local search found it).
        makespan: its simulated makespan.
        start_makespan: the trained policy's greedy makespan (the first evaluation).
        evaluations: simulator evaluations made (the budget, unless the time limit stopped the search).
        steps: gradient steps taken.
        found_at: the evaluation (1-based) that found the best placement (a burst's last, when local search found it).
        anytime: ``[evaluation, best makespan so far, CPU seconds]`` per improvement and at the last evaluation.
        polished: evaluations spent in local search.
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


def active_search(
    policy: LearnedPolicy, graph: DataflowGraph, devices: Devices, config: ActiveSearchConfig, seed: int = 0, progress: bool = False
) -> SearchResult:
    """Adapt a PLC logit table to ``graph`` within ``config.budget`` evaluations; the best placement seen.

    ``policy`` must be a DOPPLER policy with a learned PLC; its weights are not changed. ``progress`` shows a bar of the
    evaluations spent, with the best makespan and its gain over the greedy start.
    """
    from ..progress import progress_bar
    from ..sim import Evaluator

    began, began_cpu = time.perf_counter(), time.process_time()

    def left() -> float:
        """Seconds left under the time limit (infinite without one)."""
        return np.inf if config.time_limit is None else config.time_limit - (time.perf_counter() - began)

    if not getattr(policy, "learn_place", False):
        raise ValueError(f"active search adapts PLC's logits: it needs a doppler policy with a learned PLC, not {policy.method!r}")
    evaluator = Evaluator(graph, devices)
    bar = progress_bar(total=config.budget, disable=not progress, unit="eval", desc="active search")
    frozen = [p.requires_grad for p in policy.parameters()]
    policy.requires_grad_(False)
    try:
        with torch.no_grad():
            encoded = policy.encode(policy.inputs(graph, policy.feature_draws(None)))
        table = torch.zeros((graph.num_nodes, evaluator.devices), dtype=encoded.own.dtype, device=policy.device, requires_grad=True)
        encoded.plc_offset = table
        optimizer = torch.optim.Adam([table], lr=config.learning_rate)
        generator = torch.Generator(device=policy.device).manual_seed(seed)
        decisions = policy.decisions(graph)

        def play(mode: str, guide: Guide | None = None) -> Rollout:
            return policy.play(PlacementState(graph, devices, guide), Chooser(mode, 0.0, decisions, generator), guide is not None, encoded)

        with torch.no_grad():
            best = play("greedy")
        start = best_makespan = float(evaluator(best.assignment))
        bar.update(1)
        order: np.ndarray | None
        assignment, order, guide_order = best.assignment, best.order, best.order
        found_at, steps, polished, anytime = 1, 0, 0, BestSoFar(began_cpu)
        anytime.add([start])
        total_polish = polish_budget(config)
        adapt = config.budget - total_polish
        rounds = max(1, min(config.rounds, total_polish // MIN_BURST))
        for round_ in range(1, rounds + 1):
            if left() <= 0:
                break
            while evaluator.evaluations < adapt * round_ // rounds and left() > 0:
                batch = [play("sample") for _ in range(min(config.rollouts, adapt * round_ // rounds - evaluator.evaluations))]
                makespans = np.atleast_1d(evaluator(np.stack([r.assignment for r in batch])))
                anytime.add(makespans, evaluator.evaluations + polished)
                bar.update(len(batch))
                winner = int(np.argmin(makespans))
                if makespans[winner] < best_makespan:
                    assignment, order, best_makespan = batch[winner].assignment, batch[winner].order, float(makespans[winner])
                    guide_order = order
                    found_at = evaluator.evaluations + polished - len(batch) + winner + 1
                if evaluator.evaluations >= adapt and round_ == rounds:
                    break  # a step after the last evaluation could not be used
                relative = (makespans - makespans.mean()) / max(start, np.finfo(float).tiny)
                advantage = torch.as_tensor(relative, dtype=table.dtype, device=table.device)
                reinforce = (advantage * torch.stack([r.log_prob for r in batch])).mean()
                imitation = play("teacher", Guide(guide_order, assignment)).imitation_loss
                assert imitation is not None  # a rollout played with a guide is a teacher rollout, which carries its imitation loss
                optimizer.zero_grad()
                (reinforce + config.imitation_weight * imitation).backward()
                optimizer.step()
                steps += 1
            burst = total_polish * round_ // rounds - polished
            if burst and left() > 0:
                limit = None if config.time_limit is None else left()
                local = place(graph, "local_search", devices, seed=seed * 1_000 + round_, budget=burst, time_limit=limit, start=assignment)
                for evaluation, makespan, *_ in local.details["anytime"]:
                    anytime.add([makespan], evaluator.evaluations + polished + int(evaluation))
                polished += int(local.details["evaluations"])
                bar.update(int(local.details["evaluations"]))
                if local.makespan < best_makespan:
                    assignment, order, best_makespan = local.assignment, None, local.makespan
                    found_at = evaluator.evaluations + polished
            bar.set_postfix(best=f"{best_makespan:.6g}", gain=f"{1 - best_makespan / start:.2%}" if start > 0 else "-")
    finally:
        bar.close()
        for parameter, flag in zip(policy.parameters(), frozen, strict=True):
            parameter.requires_grad_(flag)
    evaluations = evaluator.evaluations + polished
    return SearchResult(assignment, order, best_makespan, start, evaluations, steps, found_at, anytime.points, polished)


def polish_budget(config: ActiveSearchConfig) -> int:
    """Evaluations given to local search (at most all but the greedy start)."""
    return min(int(config.budget * config.polish), config.budget - 1)
