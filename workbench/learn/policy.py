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
from dataclasses import asdict, dataclass
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from ..cluster import MAX_DEVICES, Devices, num_devices
from ..graph import DataflowGraph
from ..provenance import versions
from .checkpoint import CheckpointError, TrainedFor, read_checkpoint, weight_shapes, write_checkpoint
from .choice import MODES, Chooser, Rollout, check_mode
from .env import Guide, PlacementState
from .features import FEATURE_LAYOUT, random_node_features
from .fields import Field, check_config
from .nets import ACTIVATIONS, GraphTensors, graph_tensors
from .registry import POLICIES

__all__ = [
    "PolicyConfig",
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
INPUT_OPTIONS = ("random_features", "capacity_features", "affinity_features")
"""``PolicyConfig`` fields that add inputs to the doppler policies; ``TrainConfig`` has a field of the same name for each."""
PLACE_RULE_SCALES = ("graph", "op")
"""What ``PolicyConfig.place_rule_weight`` divides a device's delay by: the graph's time scale, or the op's compute time."""
PLACE_RULES = ("earliest_start", "affinity")
"""The device rule PLC's residual term follows (``PolicyConfig.place_rule``): critical_path's or the affinity teacher's."""
SELECT_RULES = ("bottom_level", "earliest_start")
"""The op rule SEL's residual term follows (``PolicyConfig.select_rule``): critical_path's or ETF's."""


def rule_pair(text: str) -> tuple[str, str]:
    """``"select_rule/place_rule"`` (a ``PolicyConfig.gate_rules`` entry) as ``(select_rule, place_rule)``; bad names are refused."""
    select, _, place = str(text).partition("/")
    if select not in SELECT_RULES or place not in PLACE_RULES:
        raise ValueError(
            f"a gate rule is 'select_rule/place_rule' with select_rule in {', '.join(SELECT_RULES)} and place_rule in "
            f"{', '.join(PLACE_RULES)}, got {text!r}"
        )
    return select, place


@dataclass(frozen=True)
class PolicyConfig:
    """Architecture of a learned policy: the workbench's defaults; :meth:`paper` gives the paper's code.

    The defaults differ from the DOPPLER paper's public code (mean instead of
    sum aggregation, an edge network of width 8 instead of 128, inputs scaled
    by their maximum instead of z-scored); ``docs/paper-preset.md`` lists every
    difference, why, and its measured effect.

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
        zscore_graph_features: z-score node and edge features over the graph
            (the encoders' and PLC's input) instead of dividing by the maximum.
        zscore_device_features: DOPPLER's PLC z-scores the device features and
            the per-device sums of embeddings across devices at every step.
        zscore_ready_inputs: DOPPLER's SEL z-scores its inputs (node features,
            path sums of embeddings) over the ready ops at every step, so an
            op's score depends on which other ops are ready.
        leaky_projections: DOPPLER applies the heads' LeakyReLU to the
            encoders' output and to the node and device feature projections.
        critical_path_index_bug: where the critical-path rule selects the op
            (``doppler_plc_only``), take the first ready op instead of the one
            with the largest bottom level: the paper's ``cp_node_selection``
            indexes the ready list with a position among the tied-best ops.
        path_sum_order_bug: DOPPLER's SEL gives op ``i`` the path sums of op
            ``traversal_order[i]`` (:func:`~.features.traversal_order`): the
            paper's ``compute_level_embedding`` stacks them in its path dict's
            key order and indexes the stack by op id.
        random_features: DOPPLER: columns of uniform noise appended to every op's static features, drawn anew for every
            rollout from the rollout's generator (random node initialisation, Abboud et al., IJCAI 2021), so the encoder
            can tell identical components apart; greedy placements differ per draw, and best-of-K inference takes K draws.
            0: off.
        capacity_features: DOPPLER: add each device's assigned compute against its balanced share and the end of
            its committed work to PLC's device features (``features.CAPACITY_FEATURES``).
        place_rule_weight: DOPPLER: PLC's logits add −weight × each device's delay under ``place_rule`` (÷ the time of
            ``place_rule_scale``): a device rule, which the learned logits then correct (a residual head). 0: off.
        place_rule: DOPPLER: the device rule of ``place_rule_weight``: ``earliest_start`` (critical_path's: the delay is the
            op's earliest start there − the earliest of all devices) or ``affinity`` (the affinity teacher's,
            ``registry.TEACHERS``: its earliest finish plus the cheaper transfer per consumer whose co-parents are placed, −
            the cheapest, ``features.affinity_delay``).
        place_rule_scale: DOPPLER: the time ``place_rule_weight`` divides each device's delay (earliest start − the
            earliest of all devices) by: ``graph`` (the graph's time scale) or ``op`` (the op's own compute time, at least
            the graph's smallest positive one), so a learned correction can trade a delay that is small against the op
            itself but not one that is only small against the whole graph (a late 1 MB op queued behind others).
        select_rule_weight: DOPPLER: SEL's logits add weight × the score ``select_rule`` gives each ready op: the op rule, which
            the learned logits then correct. 0: off.
        select_rule: DOPPLER: the op rule of ``select_rule_weight`` (and, where SEL is not learned, the op choice itself):
            ``bottom_level`` (critical_path's: bottom level ÷ the graph's largest) or ``earliest_start`` (ETF's, Hwang et al.
            1989: per step, ½ · static level ÷ the largest for the ready ops whose earliest start over the devices is the
            earliest, and −1 − (earliest start − the earliest) ÷ the time scale for the others, so the greedy op is ETF's,
            ties to the larger static level, then the smaller id; ``features.earliest_start_scores``).
        gate_rules: DOPPLER: rule pairs ``"select_rule/place_rule"`` a learned per-graph gate chooses between; the chosen pair
            replaces ``select_rule`` and ``place_rule`` for the whole placement. The gate is one linear layer on the mean and
            max pool of the node embeddings (detached) and ``features.GRAPH_STATISTICS``; it starts at zero (the first pair)
            and trains on its own objective (``workbench.training.gate_training``); its choice is not part of a rollout's
            ``log_prob``. Empty: no gate.
        affinity_features: DOPPLER: add placement affinity to PLC's device features (``features.AFFINITY_FEATURES``):
            per device the bytes the op receives from its inputs there, the bytes its co-parents there (the other
            inputs of its consumers) send to those consumers, and the share of its weakly connected component's
            compute already there, so locality is visible for ops without placed inputs (FFNN's entry ops).
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
    # paper preset switches
    zscore_graph_features: bool = False
    zscore_device_features: bool = False
    zscore_ready_inputs: bool = False
    leaky_projections: bool = False
    critical_path_index_bug: bool = False
    path_sum_order_bug: bool = False
    # plateau options
    random_features: int = 0
    capacity_features: bool = False
    place_rule_weight: float = 0.0
    place_rule: str = "earliest_start"
    place_rule_scale: str = "graph"
    select_rule_weight: float = 0.0
    affinity_features: bool = False
    select_rule: str = "bottom_level"
    gate_rules: tuple[str, ...] = ()

    @classmethod
    def paper(cls, method: str = "doppler") -> PolicyConfig:
        """The architecture of the paper's public code (github.com/xinyuyao/Doppler, ``scheduler/rl_agent.py``).

        Both heads build ``MPNNGNN(node_out_feats=128, edge_hidden_feats=128,
        num_step_message_passing=6)`` (dgllife: NNConv with ``sum`` aggregation,
        then a GRU) and MLP heads ``4*128 -> 64 -> 1`` with ``LeakyReLU(0.1)``;
        every input passes through ``normalize_feat_state``.
        """
        return cls(
            method=method,
            width=128,  # rl_agent.py: MPNNGNN(node_out_feats=hidden1=128)
            message_passing_steps=6,  # rl_agent.py: num_step_message_passing=6
            aggregator="sum",  # dgllife MPNNGNN: NNConv(aggregator_type="sum")
            edge_hidden=128,  # rl_agent.py: edge_hidden_feats=hidden1=128
            share_encoder=False,  # rl_agent.py: Node_Policy and Device_Policy each build their own MPNNGNN
            head_hidden=(64,),  # rl_agent.py: Linear(hidden1 * 4, hidden2=64), Linear(hidden2, 1)
            negative_slope=0.1,  # rl_agent.py: m = nn.LeakyReLU(0.1)
            activation="leaky_relu",
            zscore_graph_features=True,  # rl_agent.py: normalize_feat_state(state), normalize_feat_state(g.edata["feat"])
            zscore_device_features=True,  # rl_agent.py: normalize_feat_state(device_feat_state), of device_sum_embedding
            zscore_ready_inputs=True,  # rl_agent.py: normalize_feat_state(state[legal_action]), of b/t_level_embedding[legal_action]
            leaky_projections=True,  # rl_agent.py: m(self.mpnn_layer.forward(...)), m(self.ffnn_layer1(...)), m(self.ffnn_layer2(...))
            critical_path_index_bug=True,  # rl_agent.py: cp_node_selection returns legal_nodes[chosen_index]
            path_sum_order_bug=True,  # rl_agent.py: compute_level_embedding stacks level_nodes_dict (cp_utils.py key order)
        )

    def __post_init__(self) -> None:
        object.__setattr__(self, "head_hidden", tuple(int(h) for h in self.head_hidden))
        object.__setattr__(self, "gate_rules", tuple(str(rule) for rule in self.gate_rules))
        if self.method not in METHODS:
            raise ValueError(f"unknown learned method {self.method!r}; known: {', '.join(METHODS)}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {self.activation!r}")
        if self.aggregator not in ("mean", "sum"):
            raise ValueError(f"aggregator must be mean or sum, got {self.aggregator!r}")
        check_config({f.name: getattr(self, f.name) for f in dataclasses.fields(self)}, POLICY_FIELDS, "policy config")
        if self.path_sum_order_bug and not self.zscore_ready_inputs:
            raise ValueError("path_sum_order_bug needs zscore_ready_inputs (the paper's per-step SEL inputs)")
        if any(getattr(self, name) for name in INPUT_OPTIONS) and METHODS[self.method][0] != "workbench.learn.doppler":
            raise ValueError(f"{', '.join(INPUT_OPTIONS)} are inputs of the doppler policies, not of {self.method!r}")
        for name in ("place_rule_weight", "select_rule_weight"):
            if getattr(self, name) and METHODS[self.method][0] != "workbench.learn.doppler":
                raise ValueError(f"{name} is an option of the doppler policies, not of {self.method!r}")
        if self.place_rule not in PLACE_RULES:
            raise ValueError(f"place_rule must be one of {', '.join(PLACE_RULES)}, got {self.place_rule!r}")
        if self.place_rule != PLACE_RULES[0] and not self.place_rule_weight:
            raise ValueError(f"place_rule {self.place_rule!r} needs a place_rule_weight > 0 (without it PLC follows no rule)")
        if self.select_rule not in SELECT_RULES:
            raise ValueError(f"select_rule must be one of {', '.join(SELECT_RULES)}, got {self.select_rule!r}")
        self._check_rules()
        if self.place_rule_scale not in PLACE_RULE_SCALES:
            raise ValueError(f"place_rule_scale must be one of {', '.join(PLACE_RULE_SCALES)}, got {self.place_rule_scale!r}")
        if self.select_rule_weight and self.zscore_ready_inputs:
            raise ValueError("select_rule_weight adds to SEL's episode-wide logits; zscore_ready_inputs computes them per step")
        if self.width % self.attention_heads:
            raise ValueError(f"width {self.width} must be divisible by attention_heads {self.attention_heads}")

    def _check_rules(self) -> None:
        """Every rule in use has its term: a learned SEL needs ``select_rule_weight``, PLC ``place_rule_weight``; a gate needs both."""
        module, _, heads = METHODS[self.method]
        learned_select = heads.get("select", "learned") == "learned"
        pairs = [rule_pair(rule) for rule in self.gate_rules]
        if pairs and (module != "workbench.learn.doppler" or heads.get("place", "learned") != "learned"):
            raise ValueError(f"gate_rules needs a doppler policy with a learned PLC, not {self.method!r}")
        if len(set(pairs)) != len(pairs) or len(pairs) == 1:
            raise ValueError(f"gate_rules must name two or more different rule pairs, got {', '.join(self.gate_rules)}")
        selects = {select for select, _ in pairs} | {self.select_rule}
        if learned_select and selects != {SELECT_RULES[0]} and not self.select_rule_weight:
            raise ValueError("select_rule 'earliest_start' needs a select_rule_weight > 0 (without it SEL follows no rule)")
        if pairs and not self.place_rule_weight:
            raise ValueError("gate_rules needs a place_rule_weight > 0 (without it PLC follows no rule)")

    @classmethod
    def from_dict(cls, data: Any) -> PolicyConfig:
        """A config from JSON (a checkpoint's header): each field's type and range checked (:data:`POLICY_FIELDS`) first."""
        return cls(**check_config(data, POLICY_FIELDS, "policy config"))


_WIDTH = Field(int, 1, 1024)
POLICY_FIELDS: dict[str, Field] = {
    "method": Field(str),
    "width": _WIDTH,
    "message_passing_steps": Field(int, 1, 32),
    "aggregator": Field(str),
    "edge_hidden": _WIDTH,
    "share_encoder": Field(bool),
    "head_hidden": Field(int, 1, 1024, items=16),
    "negative_slope": Field(float, 0.0, 1.0),
    "activation": Field(str),
    "attention_heads": Field(int, 1, 64),
    "attention_layers": Field(int, 1, 16),
    "max_devices": Field(int, 1, MAX_DEVICES),
    **{name: Field(bool) for name in ("zscore_graph_features", "zscore_device_features", "zscore_ready_inputs", "leaky_projections")},
    **{name: Field(bool) for name in ("critical_path_index_bug", "path_sum_order_bug", "capacity_features", "affinity_features")},
    "random_features": Field(int, 0, 256),
    "place_rule_weight": Field(float, 0.0, 1e6),
    "place_rule": Field(str),
    "place_rule_scale": Field(str),
    "select_rule_weight": Field(float, 0.0, 1e6),
    "select_rule": Field(str),
    "gate_rules": Field(str, items=16),
}
"""Every :class:`PolicyConfig` field's type and range, checked in its constructor and before a checkpoint's module is
built: sizes far above every shipped policy (width 128, 6 steps), so the model's size follows from the header.
Names (method, rules, ...) are checked against their lists by the constructor."""


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
    return getattr(importlib.import_module(module), cls_name)(config, **kwargs)


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
