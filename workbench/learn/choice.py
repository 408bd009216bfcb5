"""How a learned policy chooses and scores its actions: the choosers, per-head terms and the :class:`Rollout` record.

Rollouts act without gradients, step by step (:class:`Chooser` picks each
action from numpy probabilities, :class:`Decisions` records it), then score
all their decisions again in one batched, differentiable pass
(:meth:`Decisions.terms` → :func:`head_terms`); :func:`finish_rollout`
combines the heads into a :class:`Rollout`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from numba import njit

__all__ = [
    "MODES",
    "Rollout",
    "Chooser",
    "Decisions",
    "HeadTerms",
    "check_mode",
    "head_terms",
    "combine",
    "finish_rollout",
    "as_numpy",
    "softmax",
    "compiled_softmax",
]

MODES = ("greedy", "sample", "epsilon", "teacher")


@dataclass(frozen=True)
class Rollout:
    """One episode of a policy on one graph.

    Attributes:
        assignment: device per op.
        order: ops in the order they were placed.
        log_prob: sum over steps of log pi of the actions taken (all learned heads), differentiable; NaN when
            a policy played the episode without gradients and skipped scoring it (:func:`finish_rollout`).
        entropy: mean over steps of the learned heads' summed entropies, differentiable.
        imitation_loss: with ``teacher=True``: mean over steps of ``-log`` of the
            probability the heads gave the teacher's tied-best actions.
        teacher_agreement: with ``teacher=True``: fraction of steps whose action
            the critical-path teacher could have taken.
        steps: decisions made (ops placed).
        step_log_prob: per placement step, log pi of its actions (all learned
            heads; ``log_prob`` is its sum), differentiable, for discounted returns.
        rule: the ``select_rule/place_rule`` pair a DOPPLER rule gate chose (``PolicyConfig.gate_rules``); None without a gate.
    """

    assignment: np.ndarray
    order: np.ndarray
    log_prob: torch.Tensor
    entropy: torch.Tensor
    imitation_loss: torch.Tensor | None
    teacher_agreement: float | None
    steps: int
    # paper preset switches
    step_log_prob: torch.Tensor | None = None
    rule: str | None = None


def check_mode(mode: str, epsilon: float) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")


class Chooser:
    """Greedy, sampled, epsilon-greedy or teacher choices, reproducible from one ``torch.Generator``.

    All uniform draws of an episode (two per decision: explore?, which) are
    taken up front, so the step loop never calls into torch's RNG.
    """

    def __init__(self, mode: str, epsilon: float, decisions: int, generator: torch.Generator | None) -> None:
        check_mode(mode, epsilon)
        self.mode, self.epsilon = mode, epsilon
        device = generator.device if generator is not None else "cpu"
        self.draws = torch.rand((max(decisions, 1), 2), generator=generator, dtype=torch.float64, device=device).cpu().numpy()

    def __call__(self, probs: np.ndarray, decision: int, teacher: np.ndarray | None = None) -> int:
        """Index of the chosen candidate, given the candidates' probabilities (and the teacher's mask over them)."""
        if self.mode == "teacher":
            assert teacher is not None  # a teacher-mode chooser is only called with the teacher's mask
            return int(np.flatnonzero(teacher)[0])
        if self.mode == "greedy":
            return int(probs.argmax())
        explore, which = self.draws[decision]
        if self.mode == "sample":
            cumulative = np.cumsum(probs)
            return min(int(np.searchsorted(cumulative, which * cumulative[-1], side="right")), probs.size - 1)
        if explore < self.epsilon:  # epsilon mode
            return min(int(which * probs.size), probs.size - 1)
        return int(probs.argmax())


def as_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A float64 numpy copy of ``tensor`` without gradient (for the step loop)."""
    return tensor.detach().cpu().double().numpy()


def softmax(logits: np.ndarray) -> np.ndarray:
    """The probabilities the step loops choose from: :func:`compiled_softmax`, which the compiled loops call too."""
    return compiled_softmax(np.ascontiguousarray(logits, dtype=np.float64))


@njit(cache=True)
def compiled_softmax(logits: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """``exp(logits − max) / sum``, one compiled function for the Python and the compiled step loops alike: numba's ``exp``
    and numpy's ``exp`` can differ in the last bit, which decides between candidates whose logits differ in the last bit."""
    z = np.exp(logits - logits.max())
    return z / _numpy_sum(z)


@njit(cache=True)
def _numpy_sum(values: np.ndarray) -> float:  # pragma: no cover - compiled
    """``values.sum()`` in numpy's order: blocks of 8,192 (its buffer) in turn, each summed by :func:`_pairwise_sum`."""
    total = 0.0
    for lo in range(0, values.size, 8192):
        total += _pairwise_sum(values[lo : lo + 8192])
    return total


@njit(cache=True)
def _pairwise_sum(values: np.ndarray) -> float:  # pragma: no cover - compiled
    """numpy's pairwise sum: eight running sums up to 128 values, halves (multiples of 8) beyond."""
    n = values.size
    if n > 128:
        half = n // 2
        half -= half % 8
        return _pairwise_sum(values[:half]) + _pairwise_sum(values[half:])
    if n < 8:
        total = 0.0
        for i in range(n):
            total += values[i]
        return total
    partial = values[:8].copy()
    i = 8
    while i < n - n % 8:
        for j in range(8):
            partial[j] += values[i + j]
        i += 8
    total = ((partial[0] + partial[1]) + (partial[2] + partial[3])) + ((partial[4] + partial[5]) + (partial[6] + partial[7]))
    while i < n:
        total += values[i]
        i += 1
    return total


class Decisions:
    """One head's decisions over an episode: candidates per step, the chosen one, the teacher's."""

    def __init__(self) -> None:
        self.candidates: list[np.ndarray] = []
        self.chosen: list[int] = []
        self.teacher: list[np.ndarray] = []
        self._padded: tuple[np.ndarray, np.ndarray, np.ndarray | None] | None = None

    @classmethod
    def from_steps(cls, pointer: np.ndarray, candidates: np.ndarray, chosen: np.ndarray) -> Decisions:
        """Decisions without a teacher from flat arrays: step ``t``'s candidates are ``candidates[pointer[t]:pointer[t + 1]]``,
        its choice the position ``chosen[t]`` among them."""
        decisions = cls()
        counts = np.diff(pointer)
        steps, width = counts.size, int(counts.max(initial=1))
        rows = np.repeat(np.arange(steps), counts)
        columns = np.arange(candidates.size) - np.repeat(pointer[:-1], counts)
        index, legal = np.zeros((steps, width), dtype=np.int64), np.zeros((steps, width), dtype=bool)
        index[rows, columns], legal[rows, columns] = candidates, True
        bounds = pointer.tolist()
        decisions.candidates = [candidates[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
        decisions.chosen = chosen.tolist()
        decisions._padded = (index, legal, None)
        return decisions

    def add(self, candidates: np.ndarray, chosen: int, teacher: np.ndarray | None = None) -> None:
        """Record a step: ``chosen`` is a position in ``candidates``; ``teacher`` a bool mask over them."""
        self.candidates.append(candidates)
        self.chosen.append(chosen)
        if teacher is not None:
            self.teacher.append(teacher)
        self._padded = None

    def terms(self, scores: torch.Tensor) -> HeadTerms:
        """:func:`head_terms` for these decisions; ``scores[i]`` is candidate id ``i``'s logit.

        ``scores`` is 1-D (one logit per candidate id, the same every step) or
        2-D (one row of logits per step).
        """
        index, legal, teacher = self.padded()
        index_t = torch.from_numpy(index).to(scores.device)
        return self.terms_at(scores[index_t] if scores.dim() == 1 else scores.gather(1, index_t))

    def padded(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``(steps, widest step)`` arrays: candidate ids, which entries are candidates, the teacher's (or None)."""
        if self._padded is not None:
            return self._padded
        steps, width = len(self.candidates), max((c.size for c in self.candidates), default=1)
        index = np.zeros((steps, width), dtype=np.int64)
        legal = np.zeros((steps, width), dtype=bool)
        teacher = np.zeros((steps, width), dtype=bool) if self.teacher else None
        for t, cands in enumerate(self.candidates):
            index[t, : cands.size] = cands
            legal[t, : cands.size] = True
            if teacher is not None:
                teacher[t, : cands.size] = self.teacher[t]
        self._padded = (index, legal, teacher)
        return self._padded

    def terms_at(self, logits: torch.Tensor) -> HeadTerms:
        """:func:`head_terms` for logits laid out as :meth:`padded`'s ``(steps, widest step)`` arrays."""
        _, legal, teacher = self.padded()
        device = logits.device
        return head_terms(
            logits,
            torch.from_numpy(legal).to(device),
            torch.as_tensor(self.chosen, dtype=torch.int64, device=device),
            None if teacher is None else torch.from_numpy(teacher).to(device),
        )


@dataclass(frozen=True)
class HeadTerms:
    """A head's contribution to a rollout: per-step log-prob of the chosen action, entropy and imitation loss."""

    step_log_prob: torch.Tensor
    entropy: torch.Tensor
    imitation: torch.Tensor | None

    @property
    def log_prob(self) -> torch.Tensor:
        return self.step_log_prob.sum()


def head_terms(logits: torch.Tensor, legal: torch.Tensor, chosen: torch.Tensor, teacher: torch.Tensor | None) -> HeadTerms:
    """Score ``(steps, candidates)`` logits restricted to ``legal``: chosen log-probs, entropies, teacher loss."""
    masked = logits.masked_fill(~legal, float("-inf"))
    logp = torch.log_softmax(masked, dim=-1)
    safe = logp.masked_fill(~legal | torch.isneginf(logp), 0.0)  # 0 log 0 = 0: a legal action can underflow to probability 0
    entropy = -(safe.exp() * safe).sum(-1)
    chosen_logp = logp.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
    imitation = None if teacher is None else -torch.logsumexp(logp.masked_fill(~teacher, float("-inf")), dim=-1)
    return HeadTerms(chosen_logp, entropy, imitation)


def combine(heads: list[HeadTerms], steps: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Rollout totals from the learned heads: per-step log-prob (summed over heads), mean entropy, mean imitation loss."""
    zero = torch.zeros((), device=device)
    log_prob = sum((h.step_log_prob for h in heads), torch.zeros(steps, device=device))
    entropy = sum((h.entropy.sum() for h in heads), zero) / max(steps, 1)
    with_teacher = [h.imitation for h in heads if h.imitation is not None]
    imitation = sum((i.sum() for i in with_teacher), zero) / max(steps, 1) if with_teacher else None
    return log_prob, entropy, imitation


def finish_rollout(
    assignment: np.ndarray,
    order: np.ndarray,
    heads: list[HeadTerms],
    teacher: bool,
    agreed: int,
    device: torch.device,
    scored: bool = True,
) -> Rollout:
    """The :class:`Rollout` of an episode whose learned heads scored ``heads`` and agreed with the teacher ``agreed`` times.

    ``scored=False``: the policy skipped scoring its decisions (an episode
    played without gradients, for its placement only); log-probabilities and
    entropy are then NaN, so that no caller mistakes them for real values.
    """
    steps = int(order.size)
    step_log_prob, entropy, imitation = combine(heads, steps, device)
    if not scored:
        step_log_prob, entropy = torch.full((steps,), float("nan"), device=device), torch.tensor(float("nan"), device=device)
    return Rollout(
        assignment=np.asarray(assignment, dtype=np.int64).copy(),
        order=np.asarray(order, dtype=np.int64),
        log_prob=step_log_prob.sum(),
        step_log_prob=step_log_prob,
        entropy=entropy,
        imitation_loss=imitation if teacher else None,
        teacher_agreement=agreed / max(steps, 1) if teacher else None,
        steps=steps,
    )
