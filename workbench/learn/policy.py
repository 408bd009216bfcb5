"""What every learned placer shares: its config, the method registry, the base class, saving and loading.

A policy is a ``torch.nn.Module`` with one method, :meth:`LearnedPolicy.rollout`,
that places a whole graph and returns a :class:`~.choice.Rollout` (assignment,
order, differentiable log-probability and entropy, and optionally the
imitation loss against the critical-path teacher). Rollouts act without
gradients, step by step, then score all their decisions again in one
batched, differentiable pass (the encoders run once per episode; see
:mod:`.choice`).

:meth:`LearnedPolicy.save` and :func:`load_policy` keep the weights, the full
config, library versions, the feature layout and what the policy was trained
for in a ``.safetensors`` file with a JSON header (:mod:`.checkpoint`):
loading parses data only and never unpickles, so a checkpoint cannot run code.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from ..cluster import Devices, num_devices
from ..graph import DataflowGraph
from ..provenance import versions
from .checkpoint import CheckpointError, TrainedFor, read_checkpoint, weight_shapes, write_checkpoint
from .choice import MODES, Chooser, Rollout, check_mode
from .env import Guide, PlacementState
from .features import FEATURE_LAYOUT, random_node_features
from .nets import GraphTensors, graph_tensors
from .policy_config import INPUT_OPTIONS, POLICY_FIELDS, PolicyConfig, rule_pair
from .registry import POLICIES

__all__ = [
    "PolicyConfig",
    "POLICY_FIELDS",
    "rule_pair",
    "Rollout",
    "LearnedPolicy",
    "CheckpointError",
    "METHODS",
    "INPUT_OPTIONS",
    "MODES",
    "make_policy",
    "load_policy",
    "policy_weights",
    "read_checkpoint",
]

METHODS = POLICIES
"""Learned method -> ``(module, class, constructor keyword arguments)``: the policies :func:`~.registry.register_policy` registered."""
CANDIDATE_CHUNK = 16
"""Best-of-K placements drawn between two looks at the clock when a deadline is set."""


# ---------------------------------------------------------------------- policy
class LearnedPolicy(nn.Module, ABC):
    """A placement policy: ``rollout`` places a graph; ``save``/``load_policy`` persist it.

    ``trained_for`` (set by training, saved with the weights) names the graphs
    and device count the weights were trained for; ``checkpoint_extra`` holds
    the ``extra`` of the checkpoint the policy was loaded from.
    ``scores_devices_by_index`` is true for a network with one output per
    device index (GDP): loading refuses it for more devices than it was
    trained with, whose outputs never learned anything. The others score each
    device from its own features with one shared head, so they place on any
    device count.
    """

    scores_devices_by_index = False

    def __init__(self, config: PolicyConfig) -> None:
        super().__init__()
        self.config = config
        self.trained_for: TrainedFor | None = None
        self.checkpoint_extra: dict[str, Any] = {}

    @classmethod
    def for_config(cls, config: PolicyConfig) -> type[LearnedPolicy]:
        """The class that builds a policy of ``config``: this one, or a variant of it (:class:`~.paper.PaperDopplerPolicy`)."""
        return cls

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
        teacher_rule: str = "critical_path",
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
            teacher_rule: the teacher's device rule (``registry.TEACHERS``): ``critical_path`` or ``affinity``.
        """
        return self.rollouts(graph, devices, 1, mode, epsilon, generator, teacher, guide, teacher_rule)[0]

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
        teacher_rule: str = "critical_path",
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
        draws = self.feature_draws(generator)
        shared = None if self.config.random_features else self.encode(self.inputs(graph, draws))
        return [
            self.play(
                PlacementState(graph, devices, guide, teacher_rule),
                Chooser(mode, epsilon, self.decisions(graph), generator),
                teacher,
                shared if shared is not None else self.encode(self.inputs(graph, draws)),
            )
            for _ in range(int(count))
        ]

    def decisions(self, graph: DataflowGraph) -> int:
        """Choices an episode on ``graph`` makes (the :class:`~.choice.Chooser` draws their randomness up front): two per op."""
        return 2 * graph.num_nodes

    def feature_draws(self, generator: torch.Generator | None) -> torch.Generator:
        """Where random node features come from: ``generator``, or without one a generator seeded 0 (draw 0 is the greedy placement)."""
        return generator if generator is not None else torch.Generator(device=self.device).manual_seed(0)

    @property
    def reads_paths(self) -> bool:
        """Whether the networks read longest-path sums (:func:`~.nets.path_sum`): then :meth:`inputs` includes the paths."""
        return False

    def inputs(self, graph: DataflowGraph, draws: torch.Generator) -> GraphTensors:
        """The graph's input tensors, with ``random_features`` fresh noise columns from ``draws`` appended to the node features."""
        inputs = graph_tensors(graph, self.device, paths=self.reads_paths)
        if not self.config.random_features:
            return inputs
        noise = random_node_features(graph.num_nodes, self.config.random_features, draws).to(self.device)
        return dataclasses.replace(inputs, node=torch.cat([inputs.node, noise], dim=1))

    def candidates(self, graph: DataflowGraph, devices: Devices, count: int, seed: int = 0, deadline: float | None = None) -> list[Rollout]:
        """The ``count`` placements best-of-K inference chooses among, without gradients; the first is the greedy placement.

        With random node features the rest are greedy placements under
        further feature draws; otherwise they are samples from the policy.
        Both are fixed by ``seed``. With a ``deadline`` (a ``time.perf_counter()``
        value) they are drawn :data:`CANDIDATE_CHUNK` at a time until it passes:
        the first ones of the same sequence, at least the greedy placement.
        """
        with torch.no_grad():
            found = [self.rollout(graph, devices, mode="greedy")]
            if count > 1:
                random = bool(self.config.random_features)  # the greedy placement took draw 0 of a generator seeded 0: start past it
                generator = torch.Generator(device=self.device).manual_seed(seed + 1 if random else seed)
                mode = "greedy" if random else "sample"
                chunk = count - 1 if deadline is None else CANDIDATE_CHUNK
                while len(found) < count and (deadline is None or time.perf_counter() < deadline):
                    found += self.rollouts(graph, devices, min(chunk, count - len(found)), mode=mode, generator=generator)
        return found

    @abstractmethod
    def encode(self, inputs: GraphTensors) -> SimpleNamespace:
        """Everything an episode on this graph needs from the networks before the first step."""

    @abstractmethod
    def play(self, state: PlacementState, choose: Chooser, teacher: bool, encoded: SimpleNamespace) -> Rollout:
        """Run one episode from the empty ``state``; ``choose(probs, k, teacher_mask)`` makes decision ``k``."""

    def save(self, path: str | os.PathLike, extra: dict[str, Any] | None = None) -> None:
        """Write weights, config, versions, feature layout, ``trained_for`` and ``extra`` to ``path`` (``.safetensors``) atomically.

        ``extra`` (optimizer state, episode, ...) must be tensors and plain data.
        Non-finite weights are refused: a diverged policy is never saved.
        """
        bad = [name for name, value in self.state_dict().items() if value.is_floating_point() and not bool(torch.isfinite(value).all())]
        if bad:
            raise CheckpointError(f"refusing to save {os.fspath(path)}: {bad[0]} holds NaN or infinite values")
        header = {
            "method": self.method,
            "config": asdict(self.config),
            "feature_layout": FEATURE_LAYOUT,
            "versions": versions(("numpy", "torch", "dgl")),
        }
        write_checkpoint(path, self.state_dict(), header, extra, self.trained_for)


def make_policy(method: str, config: PolicyConfig | None = None) -> LearnedPolicy:
    """A freshly initialised policy ``method`` (``config.method`` is set to ``method``)."""
    if method not in METHODS:
        raise ValueError(f"unknown learned method {method!r}; known: {', '.join(METHODS)}")
    config = dataclasses.replace(config, method=method) if config is not None else PolicyConfig(method=method)
    module, cls_name, kwargs = METHODS[method]
    return getattr(importlib.import_module(module), cls_name).for_config(config)(config, **kwargs)


def _layout_summary(layout: Any) -> str:
    if not isinstance(layout, dict):
        return repr(layout)
    return f"version {layout.get('version')}: " + "; ".join(
        f"{k} = {', '.join(map(str, layout.get(k) or []))}" for k in ("node", "edge", "device")
    )


def _checked_config(header: dict[str, Any], where: str) -> PolicyConfig:
    """The policy config a checkpoint's header holds, checked: method, feature layout, every field's type and range."""
    missing = [k for k in ("method", "config", "feature_layout") if k not in header]
    if missing:
        raise CheckpointError(f"{where} lacks {', '.join(missing)}")
    if header["method"] not in METHODS:
        raise CheckpointError(f"{where} holds a {header['method']!r} file, not a placement policy ({', '.join(METHODS)})")
    if header["feature_layout"] != FEATURE_LAYOUT:
        raise CheckpointError(
            f"{where} was made for another feature layout ({_layout_summary(header['feature_layout'])}); "
            f"this workbench uses {_layout_summary(FEATURE_LAYOUT)}. Retrain the policy with this version."
        )
    try:
        config = PolicyConfig.from_dict(header["config"])
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{where} has a bad policy config: {error}") from None
    if config.method != header["method"]:
        raise CheckpointError(f"{where} says method {header['method']!r} but its config says {config.method!r}")
    return config


def policy_weights(path: str | os.PathLike) -> Callable[[dict[str, Any]], dict[str, tuple[int, ...]]]:
    """The ``weights`` check of :func:`~.checkpoint.read_checkpoint` for a policy file at ``path``: its header's config is
    checked (method, feature layout, every field's type and range) before any tensor is read, and gives the weights' shapes."""
    where = os.fspath(path)

    def shapes(header: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        config = _checked_config(header, where)
        return weight_shapes(lambda: make_policy(config.method, config))

    return shapes


def load_policy(
    path: str | os.PathLike,
    map_location: Any = None,
    *,
    graph: DataflowGraph | None = None,
    devices: Devices | None = None,
    allow_unsafe_pickle: bool = False,
) -> LearnedPolicy:
    """The policy saved at ``path`` (on CPU, or where ``map_location`` says).

    With ``graph`` and ``devices``, a policy trained for another graph or
    device count is refused unless it is cross-graph. ``allow_unsafe_pickle``
    also reads the old pickle format: only for files you made yourself
    (:func:`~.checkpoint.read_checkpoint`). ``policy.checkpoint_extra`` holds
    the ``extra`` dict given to :meth:`LearnedPolicy.save`.
    """
    where = os.fspath(path)
    checkpoint = read_checkpoint(path, allow_unsafe_pickle=allow_unsafe_pickle, weights=policy_weights(path))
    config = _checked_config(checkpoint.header, where)
    if graph is not None:
        if checkpoint.trained_for is None:
            raise CheckpointError(
                f"{where} records no graph it was trained for (trained_for is null), so it cannot be checked against graph "
                f"{graph.name!r}; placing needs a policy trained for it or a cross-graph one"
            )
        checkpoint.trained_for.check(graph, devices if devices is not None else checkpoint.trained_for.devices, where)
    policy = make_policy(config.method, config)
    trained = checkpoint.trained_for
    if devices is not None and trained is not None and policy.scores_devices_by_index and num_devices(devices) > trained.devices:
        raise CheckpointError(
            f"{where} holds a {config.method} policy trained with {trained.devices} devices; it scores devices by index, "
            f"so it cannot place on {num_devices(devices)} (train it with that many)"
        )
    policy.load_state_dict(checkpoint.weights)  # read_checkpoint checked every name, dtype and shape against the config
    if map_location is not None:
        policy.to(map_location)
    policy.trained_for = checkpoint.trained_for
    policy.checkpoint_extra = dict(checkpoint.extra)
    return policy
