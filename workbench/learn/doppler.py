"""DOPPLER's dual policy: SEL picks the next ready op, PLC its device (Yao et al., ICLR 2026, Sec. 4).

Each head has its own MPNN encoder (shared with ``share_encoder=True``), run
once per episode. SEL scores every ready op from ``[projected node features
‖ embedding ‖ sum of embeddings along its longest path to an exit ‖ along its
longest path from an entry]``; PLC scores every device from ``[projected
device features ‖ projected node features of the op ‖ its embedding ‖ the sum
of embeddings of the ops already on the device]``; each MLP's softmax is the
head's distribution.

Everything SEL sees is fixed for the episode, so its logits are computed once.
PLC's first layer is linear, so its op and device-embedding-sum parts are
precomputed per op and only the device-feature part is evaluated per step.

With ``random_features`` the node features carry per-rollout noise columns;
with ``capacity_features`` PLC's device features add each device's load
against its balanced share and the end of its committed work (:mod:`.features`).

An ``encoded.plc_offset`` tensor ``(ops, devices)``, when set, is added to
PLC's logits (per-instance active search adapts only this table:
:mod:`.active_search`).

Ablations (``doppler_sel_only``, ``doppler_plc_only``): one head is replaced
by the critical-path teacher's rule (largest bottom level first;
earliest-start device) and only the other is learned.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

from .choice import Chooser, Decisions, Rollout, as_numpy, finish_rollout, softmax
from .env import PlacementState
from .features import CAPACITY_FEATURES, DEVICE_FEATURES, NODE_FEATURES, capacity_features
from .nets import Encoder, GraphTensors, ScoringHead, path_sum, sums_before
from .policy import LearnedPolicy, PolicyConfig

__all__ = ["DopplerPolicy", "encoder"]


def encoder(config: PolicyConfig) -> Encoder:
    """The MPNN encoder ``config`` describes."""
    return Encoder(config.width, config.message_passing_steps, config.edge_hidden, config.aggregator, node_inputs(config))


def node_inputs(config: PolicyConfig) -> int:
    """Columns of the node features: the static ones plus ``random_features`` noise columns."""
    return len(NODE_FEATURES) + config.random_features


def device_inputs(config: PolicyConfig) -> int:
    """Columns of PLC's device features: the dynamic ones plus, with ``capacity_features``, the capacity ones."""
    return len(DEVICE_FEATURES) + (len(CAPACITY_FEATURES) if config.capacity_features else 0)


class DopplerPolicy(LearnedPolicy):
    """SEL + PLC; ``select``/``place`` = ``"critical_path"`` replaces that head by the teacher's rule."""

    def __init__(self, config: PolicyConfig, select: str = "learned", place: str = "learned") -> None:
        super().__init__(config)
        for name, value in (("select", select), ("place", place)):
            if value not in ("learned", "critical_path"):
                raise ValueError(f"{name} must be 'learned' or 'critical_path', got {value!r}")
        self.learn_select = select == "learned"
        self.learn_place = place == "learned"
        w = config.width
        if self.learn_select:
            self.sel_encoder = encoder(config)
            self.sel_node = nn.Linear(node_inputs(config), w)
            self.sel_head = ScoringHead(
                {"node": w, "embedding": w, "down": w, "up": w}, config.head_hidden, config.activation, config.negative_slope
            )
        if self.learn_place:
            if not (config.share_encoder and self.learn_select):
                self.plc_encoder = encoder(config)
            self.plc_node = nn.Linear(node_inputs(config), w)
            self.plc_device = nn.Linear(device_inputs(config), w)
            self.plc_head = ScoringHead(
                {"device": w, "node": w, "embedding": w, "device_sum": w}, config.head_hidden, config.activation, config.negative_slope
            )

    # ------------------------------------------------------------ networks
    def select_logits(self, inputs: GraphTensors, embedding: torch.Tensor) -> torch.Tensor:
        """SEL's logit for every op ``(n,)``."""
        return self.sel_head(
            node=self.sel_node(inputs.node),
            embedding=embedding,
            down=path_sum(embedding, inputs.down_path),
            up=path_sum(embedding, inputs.up_path),
        )

    def place_parts(self, inputs: GraphTensors, embedding: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """PLC's first layer per op: its own part (bias included) and its contribution to its device's sum."""
        head = self.plc_head
        own = head.part("node", self.plc_node(inputs.node)) + head.part("embedding", embedding) + head.bias
        return own, head.part("device_sum", embedding)

    def place_logits(self, device_feats: torch.Tensor, own: torch.Tensor, device_sum: torch.Tensor) -> torch.Tensor:
        """PLC's logits ``(..., devices)`` from device features ``(..., devices, F)`` and the precomputed parts."""
        return self.plc_head.finish(self.plc_head.part("device", self.plc_device(device_feats)) + own.unsqueeze(-2) + device_sum)

    # ------------------------------------------------------------- rollout
    def encode(self, inputs: GraphTensors) -> SimpleNamespace:
        encoded = SimpleNamespace()
        if self.learn_select:
            sel_embedding = self.sel_encoder(inputs)
            encoded.sel_logits = self.select_logits(inputs, sel_embedding)
            encoded.sel_np = as_numpy(encoded.sel_logits)
        if self.learn_place:
            plc_embedding = self.plc_encoder(inputs) if hasattr(self, "plc_encoder") else sel_embedding
            encoded.own, encoded.device_part = self.place_parts(inputs, plc_embedding)
            encoded.own_np, encoded.device_part_np = as_numpy(encoded.own), as_numpy(encoded.device_part)
            encoded.device_weight, encoded.device_bias = self.plc_head.numpy_projected_part("device", self.plc_device)
            encoded.finish = self.plc_head.numpy_finish()
        return encoded

    def play(self, state: PlacementState, choose: Chooser, teacher: bool, encoded: SimpleNamespace) -> Rollout:
        e = encoded
        n, d, device = state.graph.num_nodes, state.num_devices, self.device
        if self.learn_place:
            device_sum = np.zeros((d, e.own.shape[1]))
            feats = np.zeros((n, d, device_inputs(self.config)), dtype=np.float32)
            base = len(DEVICE_FEATURES)
        sel, plc = Decisions(), Decisions()
        devices_chosen = np.zeros(n, dtype=np.int64)
        agree = 0
        all_devices = np.arange(d)
        offset = getattr(e, "plc_offset", None)
        offset_np = None if offset is None else as_numpy(offset)
        for t in range(n):
            ready = state.ready_ops()
            teacher_ops = state.teacher_ops(ready) if teacher or not self.learn_select else None
            if self.learn_select:
                sel_teacher = None if teacher_ops is None else np.isin(ready, teacher_ops)
                pos = choose(softmax(e.sel_np[ready]), 2 * t, sel_teacher)
                sel.add(ready, pos, sel_teacher)
                op = int(ready[pos])
            else:
                op = int(teacher_ops[0])
            earliest = state.schedule.earliest_starts(op)
            teacher_devices = state.teacher_devices(op, earliest)
            if self.learn_place:
                feats[t, :, :base] = state.device_features(op, earliest)
                if self.config.capacity_features:
                    feats[t, :, base:] = capacity_features(state.schedule, state.features.time_scale)
                plc_teacher = np.isin(all_devices, teacher_devices) if teacher else None
                logits = e.finish(feats[t] @ e.device_weight + e.device_bias + e.own_np[op] + device_sum)
                if offset is not None:
                    logits = logits + offset_np[op]
                target = choose(softmax(logits), 2 * t + 1, plc_teacher)
                plc.add(all_devices, target, plc_teacher)
                device_sum[target] += e.device_part_np[op]
            else:
                target = int(teacher_devices[0])
            if teacher:
                agree += bool(op in teacher_ops and target in teacher_devices)
            devices_chosen[t] = target
            state.place(op, target)
        heads = []
        if self.learn_select:
            heads.append(sel.terms(e.sel_logits))
        if self.learn_place:
            order = torch.as_tensor(state.schedule.order, dtype=torch.int64, device=device)
            before = sums_before(e.device_part[order], devices_chosen, d)
            logits = self.place_logits(torch.from_numpy(feats).to(device), e.own[order], before)
            heads.append(plc.terms(logits if offset is None else logits + offset[order]))
        return finish_rollout(state.schedule.device, np.asarray(state.schedule.order), heads, teacher, agree, device)
