"""A learned policy's architecture, :class:`PolicyConfig`, and the ranges a checkpoint's header is checked against.

Torch-free, so a training config (:class:`workbench.training.TrainConfig`), which nests one, can be built, listed and
checked without importing torch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..cluster import MAX_DEVICES
from .fields import Field, check_config
from .registry import POLICIES

__all__ = ["PolicyConfig", "POLICY_FIELDS", "RETIRED_FIELDS", "INPUT_OPTIONS", "ACTIVATIONS", "rule_pair", "without_retired"]

METHODS = POLICIES
ACTIVATIONS = ("leaky_relu", "relu", "tanh")
"""The heads' activations (``PolicyConfig.activation``; :func:`~.nets.activation` builds them)."""
INPUT_OPTIONS = ("random_features", "affinity_features")
"""``PolicyConfig`` fields that add inputs to the doppler policies."""
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
        """A config from JSON (a checkpoint's header): each field's type and range checked (:data:`POLICY_FIELDS`) first.

        A field deleted since (:data:`RETIRED_FIELDS`) is dropped at its old default and refused otherwise.
        """
        if isinstance(data, dict):
            data = without_retired(data, RETIRED_FIELDS, "policy config")
        return cls(**check_config(data, POLICY_FIELDS, "policy config"))


RETIRED_FIELDS: dict[str, Any] = {"capacity_features": False}
"""Fields :class:`PolicyConfig` no longer has, with the default at which old files still load (``docs/results.md``,
"Switches deleted")."""


def without_retired(data: dict[str, Any], retired: dict[str, Any], what: str) -> dict[str, Any]:
    """``data`` without the ``retired`` fields it holds at their old default; one at any other value is refused in one line."""
    for name, default in retired.items():
        if name in data and data[name] != default:
            raise ValueError(
                f"{what} sets {name}={data[name]!r}, a switch this workbench no longer has (only {default!r} is readable; "
                f'docs/results.md, "Switches deleted")'
            )
    return {name: value for name, value in data.items() if name not in retired}


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
    **{name: Field(bool) for name in ("critical_path_index_bug", "path_sum_order_bug", "affinity_features")},
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
