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
With ``transfer_wait_weight`` λ > 0 the return is dense,
``R = −(makespan + λ·transfer wait) / reference`` (λ annealed to 0 by the
loop): on a plateau where no single move changes the makespan, moves that
cut the time ops wait for their inputs still score.

Beyond the paper, ``rollouts_per_update`` > 1 scores several rollouts of one
graph per gradient step with leave-one-out baselines: the rollouts share one
encoder pass (cheaper per episode) and the gradient is far less noisy (``shared_baseline``, which the
cross-graph trainer uses: the POMO baseline, the mean of all K).

The paper's code differs in ways :meth:`TrainConfig.paper` reproduces:
discounted returns (``discount``), a cumulative-mean baseline that includes
the current episode (``baseline="cumulative_mean"``), and a learning rate
that stays constant because its decay is never handed to Adam
(``lr_decay_unread``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..graph import DataflowGraph
from .config import TrainConfig
from .imitation import apply_gradient
from .oracle import makespan_of

BASELINE_DECAY = 0.9
"""The running-mean baseline's decay per reward, ``b ← 0.9·b + 0.1·reward`` (``TrainConfig.baseline="running_mean"``)."""

__all__ = ["reinforce_update", "linear_schedule", "make_scheduler", "discounted_log_prob", "transfer_wait"]


def transfer_wait(graph: DataflowGraph, assignment: np.ndarray, devices: int) -> float:
    """Summed over ops (simulator): how long after its last producer finished the op's last input arrived."""
    from ..sim import simulate

    trace = simulate(graph, assignment, devices).trace
    produced = np.zeros(graph.num_nodes)
    np.maximum.at(produced, graph.dst, trace.end[graph.src])
    has_inputs = graph.in_degree > 0
    return float(np.maximum(trace.ready - produced, 0.0)[has_inputs].sum())


def linear_schedule(start: float, end: float, step: int, steps: int) -> float:
    """``start`` at step 0, ``end`` at step ``steps − 1``, linear in between."""
    if steps <= 1:
        return start
    if step >= steps - 1:
        return end
    value = start + (end - start) * step / (steps - 1)
    return min(max(value, min(start, end)), max(start, end))


def make_scheduler(optimizer: torch.optim.Optimizer, config: TrainConfig, episodes: int) -> torch.optim.lr_scheduler.LRScheduler:
    """Linear decay from ``rl_lr_start`` to ``rl_lr_end`` over a stage of ``episodes`` (stepped once per update)."""
    updates = -(-episodes // config.rollouts_per_update)
    end_factor = 1.0 if config.lr_decay_unread else config.rl_lr_end / config.rl_lr_start  # paper preset switches
    return torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=1.0, end_factor=end_factor, total_iters=max(updates - 1, 1))


# paper preset switches
def discounted_log_prob(rollout: Any, discount: float) -> torch.Tensor:
    """``Σ_t γ^(n−1−t) log π_t``: the log-probability weighted by the discounted terminal reward's return at each step."""
    if discount == 1.0:
        return rollout.log_prob
    if rollout.step_log_prob is None:
        raise ValueError(f"discount {discount} needs per-step log-probabilities, which {type(rollout).__name__} lacks")
    steps = rollout.step_log_prob.shape[0]
    weights = discount ** torch.arange(steps - 1, -1, -1, dtype=rollout.step_log_prob.dtype, device=rollout.step_log_prob.device)
    return (weights * rollout.step_log_prob).sum()


def reinforce_update(
    policy: Any,
    optimizer: torch.optim.Optimizer,
    graph: DataflowGraph,
    oracle: Any,
    reference: float,
    baseline: float | None,
    epsilon: float,
    config: TrainConfig,
    generator: torch.Generator,
    count: int = 1,
    seen: int = 0,
    wait_weight: float = 0.0,
    shared_baseline: bool = False,
) -> list[dict[str, Any]]:
    """``count`` rollouts of ``graph``, measured by ``oracle``, and one REINFORCE step; one metrics dict per rollout.

    One rollout (the paper) uses the running-mean ``baseline``; several use
    leave-one-out baselines (each rollout's is the mean reward of the
    others), and the loss is the mean of theirs. Every dict carries the
    running mean after its reward as ``new_baseline`` (``b ← 0.9·b + 0.1·reward``).
    ``shared_baseline`` (POMO, Kwon et al. NeurIPS 2020): several rollouts share the mean of all their rewards, their own
    included, as the baseline: the leave-one-out direction, (K−1)/K the step.
    ``seen``: this stage's earlier episodes on ``graph`` (``baseline="cumulative_mean"``
    keeps the mean of their rewards in ``baseline``).
    ``wait_weight`` λ > 0 makes the return dense: ``−(makespan + λ·transfer wait) / reference``.
    """
    options = {"mode": config.rl_mode, "epsilon": epsilon, "generator": generator}
    if count == 1:
        rollouts = [policy.rollout(graph, config.devices, **options)]
    else:
        rollouts = policy.rollouts(graph, config.devices, count, **options)
    makespans = [makespan_of(oracle, graph, r.assignment) for r in rollouts]
    waits = [transfer_wait(graph, r.assignment, config.devices) if wait_weight > 0 else 0.0 for r in rollouts]
    rewards = [-(m + wait_weight * w) / reference for m, w in zip(makespans, waits, strict=True)]
    cumulative = None
    if count == 1 and config.baseline == "cumulative_mean":  # paper preset switches
        cumulative = rewards[0] if baseline is None or seen < 1 else (baseline * seen + rewards[0]) / (seen + 1)
        baselines = [cumulative]
    elif count == 1:
        baselines = [rewards[0] if baseline is None else baseline]
    elif shared_baseline:
        baselines = [sum(rewards) / count] * count
    else:
        baselines = [(sum(rewards) - r) / (count - 1) for r in rewards]
    running = rewards[0] if baseline is None else baseline
    steps, total = [], torch.zeros((), device=rollouts[0].log_prob.device)
    for rollout, makespan, reward, b in zip(rollouts, makespans, rewards, baselines, strict=True):
        loss_policy = -(reward - b) * discounted_log_prob(rollout, config.discount) / count
        loss_entropy = -config.entropy_weight * rollout.entropy / count
        total = total + loss_policy + loss_entropy
        running = cumulative if cumulative is not None else BASELINE_DECAY * running + (1 - BASELINE_DECAY) * reward
        steps.append(
            {
                "rollout": rollout,
                "makespan": makespan,
                "reward": reward,
                "baseline": b,
                "new_baseline": running,
                "epsilon": epsilon if config.rl_mode == "epsilon" else None,
                "loss": float((loss_policy + loss_entropy).detach()),
                "loss_policy": float(loss_policy.detach()),
                "loss_entropy": float(loss_entropy.detach()),
            }
        )
    apply_gradient(policy, optimizer, total, config.grad_clip)
    return steps
