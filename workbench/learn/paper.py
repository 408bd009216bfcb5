"""The DOPPLER paper's public code as a variant of :class:`~.doppler.DopplerPolicy`, its two bugs included.

:meth:`~.policy_config.PolicyConfig.paper` turns on six switches, each of the paper's code
(github.com/xinyuyao/Doppler, ``scheduler/rl_agent.py``); ``docs/paper-preset.md`` compares them with ours.
A policy whose config turns any of them on is a :class:`PaperDopplerPolicy` (:meth:`DopplerPolicy.for_config`):
it overrides the main model's hooks, so the main model reads without them.

- ``zscore_graph_features``: the projections read node features z-scored over the graph (the encoder z-scores
  its own inputs, :class:`~.nets.Encoder`).
- ``leaky_projections``: a LeakyReLU after the encoders and the feature projections.
- ``zscore_ready_inputs``: SEL z-scores its inputs over the ready ops at every step, so its logits are computed
  per step: in numpy during the rollout, batched over the episode's steps afterwards.
- ``zscore_device_features``: PLC z-scores the device features and the per-device sums of embeddings across
  devices at every step (per step too, as does ``leaky_projections`` on the device projection).
- ``path_sum_order_bug``: SEL gives op ``i`` the path sums of op ``traversal_order[i]``
  (:func:`~.features.traversal_order`): ``compute_level_embedding`` stacks them in its path dict's key order
  and indexes the stack by op id.
- ``critical_path_index_bug``: where the critical-path rule selects the op (``doppler_plc_only``), the first
  ready op: ``cp_node_selection`` indexes the ready list with a position among the tied-best ops.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

from ..graph import DataflowGraph
from .choice import Decisions, as_numpy
from .doppler import DopplerPolicy
from .features import traversal_order
from .nets import GraphTensors, ScoringHead, numpy_zscore, path_sum, sums_before, zscore
from .policy_config import PolicyConfig

__all__ = ["PAPER_SWITCHES", "PaperDopplerPolicy", "paper_switches"]

PAPER_SWITCHES = (
    "zscore_graph_features",
    "zscore_device_features",
    "zscore_ready_inputs",
    "leaky_projections",
    "critical_path_index_bug",
    "path_sum_order_bug",
)
"""The :class:`~.policy_config.PolicyConfig` fields that make a doppler policy this variant (all on in ``paper()``)."""


def paper_switches(config: PolicyConfig) -> tuple[str, ...]:
    """The paper preset switches ``config`` turns on."""
    return tuple(name for name in PAPER_SWITCHES if getattr(config, name))


def numpy_weights(head: ScoringHead, segment: str, projection: nn.Linear | None = None) -> tuple[np.ndarray, ...]:
    """Float64 ``(first-layer slice,)`` of ``segment``, preceded by ``(weight, bias)`` of ``projection`` when given."""
    with torch.no_grad():
        first = (as_numpy(head.layers[0].weight[:, head.slices[segment]].T),)
        return first if projection is None else (as_numpy(projection.weight.T), as_numpy(projection.bias), *first)


class PaperDopplerPolicy(DopplerPolicy):
    """DOPPLER as the paper's code computes it: the switches of :data:`PAPER_SWITCHES` that its config turns on."""

    @property
    def per_step_select(self) -> bool:
        """SEL's logits depend on the ready set (``zscore_ready_inputs``), so they are computed per step."""
        return self.learn_select and self.config.zscore_ready_inputs

    @property
    def per_step_place(self) -> bool:
        """PLC's device inputs pass a nonlinearity before its first layer, so its device part is computed per step."""
        return self.learn_place and (self.config.zscore_device_features or self.config.leaky_projections)

    @property
    def first_ready(self) -> bool:
        return self.config.critical_path_index_bug

    def activate(self, x: torch.Tensor) -> torch.Tensor:
        """``leaky_projections``: the paper's LeakyReLU on encoder outputs and feature projections."""
        return nn.functional.leaky_relu(x, self.config.negative_slope) if self.config.leaky_projections else x

    def numpy_activate(self, x: np.ndarray) -> np.ndarray:
        return np.where(x > 0, x, self.config.negative_slope * x) if self.config.leaky_projections else x

    def node_input(self, inputs: GraphTensors) -> torch.Tensor:
        return zscore(inputs.node) if self.config.zscore_graph_features else inputs.node

    # ------------------------------------------------------------------ SEL
    def encode_select(self, inputs: GraphTensors, embedding: torch.Tensor, e: SimpleNamespace) -> None:
        """Per-step SEL: path sums z-scored over all ops (sample std, eps 1e-8, as the paper), numpy copies."""
        if not self.per_step_select:
            super().encode_select(inputs, embedding, e)
            return
        e.sel_node = inputs.node
        e.sel_own = self.sel_head.part("embedding", embedding) + self.sel_head.bias
        e.sel_down = zscore(path_sum(embedding, inputs.down_path), unbiased=True, eps=1e-8)
        e.sel_up = zscore(path_sum(embedding, inputs.up_path), unbiased=True, eps=1e-8)
        e.sel_node_np, e.sel_own_np = as_numpy(e.sel_node), as_numpy(e.sel_own)
        e.sel_down_np, e.sel_up_np = as_numpy(e.sel_down), as_numpy(e.sel_up)
        e.sel_weights = numpy_weights(self.sel_head, "node", self.sel_node)
        e.sel_down_weight, e.sel_up_weight = numpy_weights(self.sel_head, "down")[0], numpy_weights(self.sel_head, "up")[0]
        e.sel_finish = self.sel_head.numpy_finish()

    def select_paths(self, graph: DataflowGraph, e: SimpleNamespace) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """Per-step SEL's path sums, in the paper's path dict's key order with ``path_sum_order_bug``."""
        if not self.per_step_select:
            return None, None
        down, up = e.sel_down, e.sel_up
        if self.config.path_sum_order_bug:
            down_order = torch.as_tensor(traversal_order(graph, downward=True), device=self.device)
            down, up = down[down_order], up[torch.as_tensor(traversal_order(graph, downward=False), device=self.device)]
        return down, up

    def ready_scores(self, e: SimpleNamespace, ready: np.ndarray, down: np.ndarray | None, up: np.ndarray | None) -> np.ndarray:
        if not self.per_step_select:
            return super().ready_scores(e, ready, down, up)
        assert down is not None and up is not None  # select_paths gives them to a per-step SEL
        return self.numpy_ready_select_logits(e, ready, down, up)

    def numpy_ready_select_logits(self, e: SimpleNamespace, ready: np.ndarray, down: np.ndarray, up: np.ndarray) -> np.ndarray:
        """SEL's logits for the ``ready`` ops, its inputs z-scored over them (numpy, during the rollout)."""
        weight, bias, node_part = e.sel_weights
        node = self.numpy_activate(numpy_zscore(e.sel_node_np[ready]) @ weight + bias)
        first = node @ node_part + e.sel_own_np[ready] + numpy_zscore(down[ready]) @ e.sel_down_weight
        return e.sel_finish(first + numpy_zscore(up[ready]) @ e.sel_up_weight)

    def per_step_select_logits(
        self, e: SimpleNamespace, sel: Decisions, paths: tuple[torch.Tensor | None, torch.Tensor | None]
    ) -> torch.Tensor | None:
        if not self.per_step_select:
            return None
        down, up = paths
        assert down is not None and up is not None  # the path sums a per-step SEL reads, set by play
        index, legal, _ = sel.padded()
        index_t, legal_t = torch.from_numpy(index).to(self.device), torch.from_numpy(legal).to(self.device)
        return self.ready_select_logits(e, index_t, legal_t, down, up)

    def ready_select_logits(
        self, e: SimpleNamespace, index: torch.Tensor, legal: torch.Tensor, down: torch.Tensor, up: torch.Tensor
    ) -> torch.Tensor:
        """SEL's logits ``(steps, candidates)`` with its inputs z-scored over each step's ready ops (``legal``)."""
        head = self.sel_head
        node = self.activate(self.sel_node(zscore(e.sel_node[index], dim=1, mask=legal)))
        first = (
            head.part("node", node)
            + e.sel_own[index]
            + head.part("down", zscore(down[index], dim=1, mask=legal))
            + head.part("up", zscore(up[index], dim=1, mask=legal))
        )
        return head.finish(first)

    # ------------------------------------------------------------------ PLC
    def encode_place(self, inputs: GraphTensors, embedding: torch.Tensor, e: SimpleNamespace) -> None:
        """Per-step PLC: the op's own part, the device projection and, z-scored, the embeddings to sum per device."""
        if not self.per_step_place:
            super().encode_place(inputs, embedding, e)
            return
        head = self.plc_head
        e.own, device_part = self.place_parts(inputs, embedding)
        e.own_np = as_numpy(e.own)
        e.device_weights = numpy_weights(head, "device", self.plc_device)
        if self.config.zscore_device_features:
            e.plc_embedding, e.plc_embedding_np = embedding, as_numpy(embedding)
            e.sum_weight = numpy_weights(head, "device_sum")[0]
        else:
            e.device_part, e.device_part_np = device_part, as_numpy(device_part)
        e.finish = head.numpy_finish()

    def device_sum_rows(self, e: SimpleNamespace) -> np.ndarray:
        """``zscore_device_features``: the embeddings themselves (z-scored across devices at each step), else the main model's."""
        return e.plc_embedding_np if self.per_step_place and self.config.zscore_device_features else super().device_sum_rows(e)

    def step_place_logits(self, e: SimpleNamespace, feats: np.ndarray, device_sum: np.ndarray, op: int) -> np.ndarray:
        if not self.per_step_place:
            return super().step_place_logits(e, feats, device_sum, op)
        return e.finish(self.numpy_paper_place_first(e, feats.astype(np.float64), device_sum) + e.own_np[op])

    def numpy_paper_place_first(self, e: SimpleNamespace, feats: np.ndarray, sums: np.ndarray) -> np.ndarray:
        """PLC's first layer without the op's own part: device features and per-device sums (embeddings, or parts)."""
        weight, bias, device_part = e.device_weights
        if self.config.zscore_device_features:
            return self.numpy_activate(numpy_zscore(feats) @ weight + bias) @ device_part + numpy_zscore(sums) @ e.sum_weight
        return self.numpy_activate(feats @ weight + bias) @ device_part + sums

    def batched_place_logits(self, e: SimpleNamespace, feats: torch.Tensor, order: torch.Tensor, devices: np.ndarray) -> torch.Tensor:
        """PLC's logits ``(steps, devices)`` for the episode's steps, batched, with the per-step normalisations."""
        if not self.per_step_place:
            return super().batched_place_logits(e, feats, order, devices)
        head, d = self.plc_head, feats.shape[1]
        if self.config.zscore_device_features:
            feats = zscore(feats, dim=1)
            sums = head.part("device_sum", zscore(sums_before(e.plc_embedding[order], devices, d), dim=1))
        else:
            sums = sums_before(e.device_part[order], devices, d)
        return head.finish(head.part("device", self.activate(self.plc_device(feats))) + e.own[order].unsqueeze(-2) + sums)
