"""Stages II and III: REINFORCE with a running-mean baseline against a cost oracle.

DOPPLER (Yao et al., ICLR 2026, Sec. 4.2–4.3): the reward is the negative
makespan of the finished placement; the gradient is ``−(R − b)·∇log π``
summed over the episode's steps, plus an entropy bonus; exploration is
ε-greedy with ε decaying linearly; the learning rate decays linearly
(here through a torch LR scheduler, so the optimizer really uses it; the
paper's code assigns an attribute the optimizer never reads). Stage II asks
the simulator, Stage III a real-system oracle, starting from Stage II's
weights.

Rewards are scaled per graph by a reference makespan (critical_path's, as
the oracle measures it) so that one learning rate suits graphs whose
makespans differ by orders of magnitude: ``R = −makespan / reference``.
"""

from __future__ import annotations

from typing import Any

import torch

from ..graph import DataflowGraph
from .config import TrainConfig
from .imitation import apply_gradient
from .oracle import makespan_of

__all__ = ["reinforce_episode", "linear_schedule", "make_scheduler"]


def linear_schedule(start: float, end: float, step: int, steps: int) -> float:
    """``start`` at step 0, ``end`` at step ``steps − 1``, linear in between."""
    if steps <= 1:
        return start
    if step >= steps - 1:
        return end
    value = start + (end - start) * step / (steps - 1)
    return min(max(value, min(start, end)), max(start, end))


def make_scheduler(optimizer: torch.optim.Optimizer, config: TrainConfig, steps: int) -> torch.optim.lr_scheduler.LRScheduler:
    """Linear decay from ``rl_lr_start`` to ``rl_lr_end`` over ``steps`` episodes (stepped once per episode)."""
    return torch.optim.lr_scheduler.LinearLR(
        optimizer, start_factor=1.0, end_factor=config.rl_lr_end / config.rl_lr_start, total_iters=max(steps - 1, 1)
    )


def reinforce_episode(
    policy: Any,
    optimizer: torch.optim.Optimizer,
    graph: DataflowGraph,
    oracle: Any,
    reference: float,
    baseline: float | None,
    epsilon: float,
    config: TrainConfig,
    generator: torch.Generator,
) -> dict[str, Any]:
    """One ε-greedy rollout, measured by ``oracle``, and one REINFORCE step; returns the metrics."""
    rollout = policy.rollout(graph, config.devices, mode=config.rl_mode, epsilon=epsilon, generator=generator)
    makespan = makespan_of(oracle, graph, rollout.assignment)
    reward = -makespan / reference
    if baseline is None:
        baseline = reward
    loss_policy = -(reward - baseline) * rollout.log_prob
    loss_entropy = -config.entropy_weight * rollout.entropy
    loss = loss_policy + loss_entropy
    apply_gradient(policy, optimizer, loss, config.grad_clip)
    return {
        "rollout": rollout,
        "makespan": makespan,
        "reward": reward,
        "baseline": baseline,
        "new_baseline": config.baseline_decay * baseline + (1 - config.baseline_decay) * reward,
        "epsilon": epsilon if config.rl_mode == "epsilon" else None,
        "loss": float(loss.detach()),
        "loss_policy": float(loss_policy.detach()),
        "loss_entropy": float(loss_entropy.detach()),
    }
