"""Stage I: imitate the critical_path teacher (or ``il_teacher``'s rule) on the learner's own ε-greedy rollouts.

DOPPLER (Yao et al., ICLR 2026, Sec. 4.1): both heads are trained to pick
the teacher's choice in every state the learner visits (DAgger-style: the
states come from the learner's rollouts, not the teacher's); when several
actions tie for the teacher, probability on any of them counts. An entropy
bonus keeps the policy from collapsing before RL.
"""

from __future__ import annotations

from typing import Any

import torch

from ..graph import DataflowGraph
from .config import TrainConfig

__all__ = ["imitation_episode"]


def imitation_episode(
    policy: Any,
    optimizer: torch.optim.Optimizer,
    graph: DataflowGraph,
    config: TrainConfig,
    generator: torch.Generator,
    epsilon: float | None = None,
) -> dict[str, Any]:
    """One rollout and one gradient step on ``imitation loss − w·entropy``; returns the metrics.

    ``epsilon``: this episode's exploration (default ``config.il_epsilon``; ``il_epsilon_decay`` schedules it).
    """
    epsilon = config.il_epsilon if epsilon is None else epsilon
    rule = {} if config.il_teacher == "critical_path" else {"teacher_rule": config.il_teacher}  # policy libraries without teacher rules
    rollout = policy.rollout(graph, config.devices, mode="epsilon", epsilon=epsilon, generator=generator, teacher=True, **rule)
    if rollout.imitation_loss is None:
        raise RuntimeError(f"{type(policy).__name__}.rollout(teacher=True) returned no imitation_loss")
    loss_entropy = -config.il_entropy_weight * rollout.entropy
    loss = rollout.imitation_loss + loss_entropy
    apply_gradient(policy, optimizer, loss, config.grad_clip)
    return {
        "rollout": rollout,
        "epsilon": epsilon,
        "loss": float(loss.detach()),
        "loss_entropy": float(loss_entropy.detach()),
        "loss_imitation": float(rollout.imitation_loss.detach()),
        "teacher_agreement": rollout.teacher_agreement,
    }


def apply_gradient(policy: Any, optimizer: torch.optim.Optimizer, loss: torch.Tensor, clip: float) -> None:
    """Zero the gradients, backpropagate ``loss``, clip the norm (when ``clip`` > 0) and step."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if clip > 0:
        torch.nn.utils.clip_grad_norm_(policy.parameters(), clip)
    optimizer.step()
