"""What every learned placer shares: its config, its rollout record, action choice, checkpoints.

A policy is a ``torch.nn.Module`` with one method, :meth:`LearnedPolicy.rollout`,
that places a whole graph and returns a :class:`Rollout` (assignment, order,
differentiable log-probability and entropy, and optionally the imitation
loss against the critical-path teacher). Rollouts act without gradients,
step by step, then score all their decisions again in one batched,
differentiable pass (the encoders run once per episode).

Checkpoints (:meth:`LearnedPolicy.save`, :func:`load_policy`) hold the
weights, the full config, library versions and the feature layout; loading
uses ``torch.load(weights_only=True)`` so a checkpoint can never run code.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import platform
import tempfile
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from torch import nn

from ..cluster import Devices
from ..graph import DataflowGraph
from .env import Guide, PlacementState
from .features import FEATURE_LAYOUT
from .nets import ACTIVATIONS, GraphTensors, graph_tensors

__all__ = [
    "PolicyConfig",
    "Rollout",
    "LearnedPolicy",
    "CheckpointError",
    "METHODS",
    "MODES",
    "make_policy",
    "load_policy",
    "read_checkpoint",
]

CHECKPOINT_FORMAT = "workbench-policy"
CHECKPOINT_VERSION = 1
MODES = ("greedy", "sample", "epsilon", "teacher")

# method -> (module, class, constructor keyword arguments)
METHODS: dict[str, tuple[str, str, dict[str, str]]] = {
    "doppler": ("workbench.learn.doppler", "DopplerPolicy", {}),
    "doppler_sel_only": ("workbench.learn.doppler", "DopplerPolicy", {"place": "critical_path"}),
    "doppler_plc_only": ("workbench.learn.doppler", "DopplerPolicy", {"select": "critical_path"}),
    "placeto": ("workbench.learn.placeto", "PlacetoPolicy", {}),
    "gdp": ("workbench.learn.gdp", "GDPPolicy", {}),
    "joint": ("workbench.learn.joint", "JointPolicy", {}),
}


class CheckpointError(ValueError):
    """A policy checkpoint that cannot be loaded (missing, corrupt, unsafe, or made for another layout)."""


@dataclass(frozen=True)
class PolicyConfig:
    """Architecture of a learned policy (defaults: the DOPPLER paper's).

    Attributes:
        method: which policy (a key of ``METHODS``).
        width: embedding width of the encoder and of the feature projections.
        message_passing_steps: NNConv + GRU rounds of the encoder.
        aggregator: how NNConv combines incoming messages (``mean`` or ``sum``).
        edge_hidden: hidden size of the network mapping edge features to message matrices.
        share_encoder: one encoder for SEL and PLC instead of one each.
        head_hidden: hidden layer sizes of the scoring MLPs (input ``4 * width``, output 1).
        negative_slope: slope of the heads' LeakyReLU.
        activation: the heads' activation: ``leaky_relu``, ``relu`` or ``tanh``.
        attention_heads: GDP: heads of the attention over the op sequence.
        attention_layers: GDP: attention layers.
        max_devices: GDP: size of its per-op device output (graphs may use up to this many devices).
    """

    method: str = "doppler"
    width: int = 128
    message_passing_steps: int = 6
    aggregator: str = "mean"
    edge_hidden: int = 8
    share_encoder: bool = False
    head_hidden: tuple[int, ...] = (64,)
    negative_slope: float = 0.1
    activation: str = "leaky_relu"
    attention_heads: int = 4
    attention_layers: int = 2
    max_devices: int = 16

    def __post_init__(self) -> None:
        object.__setattr__(self, "head_hidden", tuple(int(h) for h in self.head_hidden))
        if self.method not in METHODS:
            raise ValueError(f"unknown learned method {self.method!r}; known: {', '.join(METHODS)}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {self.activation!r}")
        if self.aggregator not in ("mean", "sum"):
            raise ValueError(f"aggregator must be mean or sum, got {self.aggregator!r}")
        for name in ("width", "message_passing_steps", "edge_hidden", "attention_heads", "attention_layers", "max_devices"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.width % self.attention_heads:
            raise ValueError(f"width {self.width} must be divisible by attention_heads {self.attention_heads}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PolicyConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown policy config field(s): {', '.join(unknown)}")
        return cls(**data)


@dataclass(frozen=True)
class Rollout:
    """One episode of a policy on one graph.

    Attributes:
        assignment: device per op.
        order: ops in the order they were placed.
        log_prob: sum over steps of log pi of the actions taken (all learned heads), differentiable.
        entropy: mean over steps of the learned heads' summed entropies, differentiable.
        imitation_loss: with ``teacher=True``: mean over steps of ``-log`` of the
            probability the heads gave the teacher's tied-best actions.
        teacher_agreement: with ``teacher=True``: fraction of steps whose action
            the critical-path teacher could have taken.
        steps: decisions made (ops placed).
    """

    assignment: np.ndarray
    order: np.ndarray
    log_prob: torch.Tensor
    entropy: torch.Tensor
    imitation_loss: torch.Tensor | None
    teacher_agreement: float | None
    steps: int


# --------------------------------------------------------------- action choice
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
            return int(np.flatnonzero(teacher)[0])
        explore, which = self.draws[decision]
        if self.mode == "sample":
            cumulative = np.cumsum(probs)
            return min(int(np.searchsorted(cumulative, which * cumulative[-1], side="right")), probs.size - 1)
        if self.mode == "epsilon" and explore < self.epsilon:
            return min(int(which * probs.size), probs.size - 1)
        return int(np.argmax(probs))


def as_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A float64 numpy copy of ``tensor`` without gradient (for the step loop)."""
    return tensor.detach().cpu().double().numpy()


def softmax(logits: np.ndarray) -> np.ndarray:
    z = np.exp(logits - logits.max())
    return z / z.sum()


class Decisions:
    """One head's decisions over an episode: candidates per step, the chosen one, the teacher's."""

    def __init__(self) -> None:
        self.candidates: list[np.ndarray] = []
        self.chosen: list[int] = []
        self.teacher: list[np.ndarray] = []

    def add(self, candidates: np.ndarray, chosen: int, teacher: np.ndarray | None = None) -> None:
        """Record a step: ``chosen`` is a position in ``candidates``; ``teacher`` a bool mask over them."""
        self.candidates.append(candidates)
        self.chosen.append(chosen)
        if teacher is not None:
            self.teacher.append(teacher)

    def terms(self, scores: torch.Tensor) -> "HeadTerms":
        """:func:`head_terms` for these decisions; ``scores[i]`` is candidate id ``i``'s logit.

        ``scores`` is 1-D (one logit per candidate id, the same every step) or
        2-D (one row of logits per step).
        """
        steps, width = len(self.candidates), max((c.size for c in self.candidates), default=1)
        index = np.zeros((steps, width), dtype=np.int64)
        legal = np.zeros((steps, width), dtype=bool)
        teacher = np.zeros((steps, width), dtype=bool) if self.teacher else None
        for t, cands in enumerate(self.candidates):
            index[t, : cands.size] = cands
            legal[t, : cands.size] = True
            if teacher is not None:
                teacher[t, : cands.size] = self.teacher[t]
        device = scores.device
        index_t = torch.from_numpy(index).to(device)
        logits = scores[index_t] if scores.dim() == 1 else scores.gather(1, index_t)
        return head_terms(
            logits,
            torch.from_numpy(legal).to(device),
            torch.as_tensor(self.chosen, dtype=torch.int64, device=device),
            None if teacher is None else torch.from_numpy(teacher).to(device),
        )


@dataclass(frozen=True)
class HeadTerms:
    """A head's contribution to a rollout: summed log-prob, per-step entropy and imitation loss."""

    log_prob: torch.Tensor
    entropy: torch.Tensor
    imitation: torch.Tensor | None


def head_terms(logits: torch.Tensor, legal: torch.Tensor, chosen: torch.Tensor, teacher: torch.Tensor | None) -> HeadTerms:
    """Score ``(steps, candidates)`` logits restricted to ``legal``: chosen log-probs, entropies, teacher loss."""
    masked = logits.masked_fill(~legal, float("-inf"))
    logp = torch.log_softmax(masked, dim=-1)
    safe = logp.masked_fill(~legal, 0.0)
    entropy = -(safe.exp() * safe).sum(-1)
    chosen_logp = logp.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
    imitation = None if teacher is None else -torch.logsumexp(logp.masked_fill(~teacher, float("-inf")), dim=-1)
    return HeadTerms(chosen_logp.sum(), entropy, imitation)


def combine(heads: list[HeadTerms], steps: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Rollout totals from the learned heads: summed log-prob, mean entropy, mean imitation loss."""
    zero = torch.zeros((), device=device)
    log_prob = sum((h.log_prob for h in heads), zero)
    entropy = sum((h.entropy.sum() for h in heads), zero) / max(steps, 1)
    with_teacher = [h.imitation for h in heads if h.imitation is not None]
    imitation = sum((i.sum() for i in with_teacher), zero) / max(steps, 1) if with_teacher else None
    return log_prob, entropy, imitation


def finish_rollout(assignment: np.ndarray, order: np.ndarray, heads: list[HeadTerms], teacher: bool, agreed: int, device: torch.device) -> Rollout:
    """The :class:`Rollout` of an episode whose learned heads scored ``heads`` and agreed with the teacher ``agreed`` times."""
    steps = int(order.size)
    log_prob, entropy, imitation = combine(heads, steps, device)
    return Rollout(
        assignment=np.asarray(assignment, dtype=np.int64).copy(),
        order=np.asarray(order, dtype=np.int64),
        log_prob=log_prob,
        entropy=entropy,
        imitation_loss=imitation if teacher else None,
        teacher_agreement=agreed / max(steps, 1) if teacher else None,
        steps=steps,
    )


# ---------------------------------------------------------------------- policy
class LearnedPolicy(nn.Module, ABC):
    """A placement policy: ``rollout`` places a graph; ``save``/``load_policy`` persist it."""

    def __init__(self, config: PolicyConfig) -> None:
        super().__init__()
        self.config = config
        self.checkpoint_extra: dict[str, Any] = {}

    @property
    def method(self) -> str:
        return self.config.method

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def rollout(
        self,
        graph: DataflowGraph,
        devices: Devices,
        mode: str = "sample",
        epsilon: float = 0.0,
        generator: torch.Generator | None = None,
        teacher: bool = False,
        guide: Guide | None = None,
    ) -> Rollout:
        """Place every op of ``graph`` on ``devices``.

        Args:
            mode: ``"greedy"`` (most probable action), ``"sample"`` (from the
                policy), ``"epsilon"`` (greedy, but with probability
                ``epsilon`` a uniformly random legal action) or ``"teacher"``
                (the critical-path teacher's action, smallest id among ties:
                imitation on the teacher's own trajectory; implies ``teacher``).
            generator: a ``torch.Generator`` for reproducible draws (else torch's global RNG).
            teacher: also compute the imitation loss against the critical-path teacher.
            guide: a :class:`~workbench.learn.env.Guide` that replaces the
                critical-path teacher; with ``mode="teacher"`` the rollout
                replays it, and ``imitation_loss`` is its mean ``-log``
                probability per step (self-imitation).
        """
        return self.rollouts(graph, devices, 1, mode, epsilon, generator, teacher, guide)[0]

    def rollouts(
        self,
        graph: DataflowGraph,
        devices: Devices,
        count: int,
        mode: str = "sample",
        epsilon: float = 0.0,
        generator: torch.Generator | None = None,
        teacher: bool = False,
        guide: Guide | None = None,
    ) -> list[Rollout]:
        """``count`` episodes that share one encoder pass (cheaper than ``count`` calls of :meth:`rollout`).

        Their log-probabilities share the encoder's graph: add up their
        losses and call ``backward`` once. The first equals :meth:`rollout`
        with the same generator state.
        """
        if int(count) < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        check_mode(mode, epsilon)
        teacher = teacher or mode == "teacher"
        encoded = self.encode(graph_tensors(graph, self.device))
        return [
            self.play(PlacementState(graph, devices, guide), Chooser(mode, epsilon, 2 * graph.num_nodes, generator), teacher, encoded)
            for _ in range(int(count))
        ]

    @abstractmethod
    def encode(self, inputs: GraphTensors) -> SimpleNamespace:
        """Everything an episode on this graph needs from the networks before the first step."""

    @abstractmethod
    def play(self, state: PlacementState, choose: Chooser, teacher: bool, encoded: SimpleNamespace) -> Rollout:
        """Run one episode from the empty ``state``; ``choose(probs, k, teacher_mask)`` makes decision ``k``."""

    def save(self, path: str | os.PathLike, extra: dict[str, Any] | None = None) -> None:
        """Write weights, config, versions, feature layout and ``extra`` to ``path`` atomically.

        ``extra`` (optimizer state, episode, ...) must be tensors and plain data.
        """
        check_plain(extra or {})
        payload = {
            "format": CHECKPOINT_FORMAT,
            "format_version": CHECKPOINT_VERSION,
            "method": self.method,
            "config": asdict(self.config),
            "feature_layout": FEATURE_LAYOUT,
            "versions": versions(),
            "state_dict": {k: v.detach().cpu() for k, v in self.state_dict().items()},
            "extra": extra or {},
        }
        path = os.fspath(path)
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=os.path.basename(path))
        try:
            with os.fdopen(fd, "wb") as handle:
                torch.save(payload, handle)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


def versions() -> dict[str, str]:
    import dgl

    from .. import __version__

    found = {"workbench": __version__, "torch": torch.__version__, "dgl": dgl.__version__, "numpy": np.__version__, "python": platform.python_version()}
    return {k: str(v) for k, v in found.items()}


_PLAIN = (str, int, float, bool, type(None), torch.Tensor)


def check_plain(value: Any, where: str = "extra") -> None:
    """Raise ``ValueError`` unless ``value`` is tensors and plain data only (what ``weights_only`` loading accepts)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, (str, int)):
                raise ValueError(f"{where} has a key of type {type(key).__name__}; checkpoints take str or int keys")
            check_plain(item, f"{where}[{key!r}]")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            check_plain(item, f"{where}[{i}]")
    elif not isinstance(value, _PLAIN):
        raise ValueError(f"{where} is a {type(value).__name__}; checkpoints hold only tensors and plain data (convert numpy arrays with torch.as_tensor or .tolist())")


def make_policy(method: str, config: PolicyConfig | None = None) -> LearnedPolicy:
    """A freshly initialised policy ``method`` (``config.method`` is set to ``method``)."""
    if method not in METHODS:
        raise ValueError(f"unknown learned method {method!r}; known: {', '.join(METHODS)}")
    config = dataclasses.replace(config, method=method) if config is not None else PolicyConfig(method=method)
    module, cls_name, kwargs = METHODS[method]
    return getattr(importlib.import_module(module), cls_name)(config, **kwargs)


def read_checkpoint(path: str | os.PathLike, map_location: Any = None) -> dict[str, Any]:
    """The checked contents of a policy checkpoint; :class:`CheckpointError` says what is wrong."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise CheckpointError(f"policy checkpoint {path} does not exist")
    if map_location is None and not torch.cuda.is_available():
        map_location = "cpu"
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # torch.load raises many types on damaged files
        message = f"{type(error).__name__}: {' '.join(str(error).split())}"
        if any(sign in message for sign in ("Unsupported class", "unrecognized function", "Unsupported global")):
            reason = message[message.find("WeightsUnpickler error:"):] if "WeightsUnpickler error:" in message else message[:200]
            raise CheckpointError(f"refusing to load {path}: it holds objects other than tensors and plain data, and a checkpoint must never run code ({reason})") from None
        raise CheckpointError(f"{path} is not a readable policy checkpoint (truncated or corrupt?): {message[:200]}") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path} is not a workbench policy checkpoint (no format marker {CHECKPOINT_FORMAT!r})")
    if payload.get("format_version") != CHECKPOINT_VERSION:
        raise CheckpointError(f"{path} has checkpoint format version {payload.get('format_version')!r}; this workbench reads version {CHECKPOINT_VERSION}")
    missing = [k for k in ("method", "config", "feature_layout", "state_dict") if k not in payload]
    if missing:
        raise CheckpointError(f"{path} lacks {', '.join(missing)}")
    if payload["feature_layout"] != FEATURE_LAYOUT:
        raise CheckpointError(
            f"{path} was made for another feature layout ({_layout_summary(payload['feature_layout'])}); "
            f"this workbench uses {_layout_summary(FEATURE_LAYOUT)}. Retrain the policy with this version."
        )
    return payload


def _layout_summary(layout: Any) -> str:
    if not isinstance(layout, dict):
        return repr(layout)
    return f"version {layout.get('version')}: " + "; ".join(f"{k} = {', '.join(map(str, layout.get(k) or []))}" for k in ("node", "edge", "device"))


def load_policy(path: str | os.PathLike, map_location: Any = None) -> LearnedPolicy:
    """The policy saved at ``path`` (on CPU when there is no GPU, else where ``map_location`` says).

    ``policy.checkpoint_extra`` holds the ``extra`` dict given to :meth:`LearnedPolicy.save`.
    """
    payload = read_checkpoint(path, map_location)
    try:
        config = PolicyConfig.from_dict(dict(payload["config"]))
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{os.fspath(path)} has a bad policy config: {error}") from None
    if config.method != payload["method"]:
        raise CheckpointError(f"{os.fspath(path)} says method {payload['method']!r} but its config says {config.method!r}")
    policy = make_policy(config.method, config)
    try:
        policy.load_state_dict(payload["state_dict"])
    except (RuntimeError, TypeError, AttributeError) as error:
        detail = " ".join(str(error).split())[:300]
        raise CheckpointError(f"{os.fspath(path)} does not fit a {config.method} policy: {detail}") from None
    if map_location is not None:
        policy.to(map_location)
    policy.checkpoint_extra = dict(payload.get("extra") or {})
    return policy
