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

Ablations (``doppler_sel_only``, ``doppler_plc_only``): one head is replaced
by the critical-path teacher's rule (largest bottom level first;
earliest-start device) and only the other is learned.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .env import PlacementState
from .features import DEVICE_FEATURES, NODE_FEATURES
from .nets import Encoder, GraphTensors, graph_tensors, mlp, numpy_mlp, path_sum
from .policy import Chooser, Decisions, LearnedPolicy, PolicyConfig, Rollout, combine, softmax

__all__ = ["DopplerPolicy"]


def encoder(config: PolicyConfig) -> Encoder:
    return Encoder(config.width, config.message_passing_steps, config.edge_hidden, config.aggregator)


class DopplerPolicy(LearnedPolicy):
    """SEL + PLC; ``select``/``place`` = ``"critical_path"`` replaces that head by the teacher's rule."""

    def __init__(self, config: PolicyConfig, select: str = "learned", place: str = "learned") -> None:
        super().__init__(config)
        for name, value in (("select", select), ("place", place)):
            if value not in ("learned", "critical_path"):
                raise ValueError(f"{name} must be 'learned' or 'critical_path', got {value!r}")
        self.learn_select = select == "learned"
        self.learn_place = place == "learned"
        w, sizes = config.width, [4 * config.width, *config.head_hidden, 1]
        if self.learn_select:
            self.sel_encoder = encoder(config)
            self.sel_node = nn.Linear(len(NODE_FEATURES), w)
            self.sel_head = mlp(sizes, config.negative_slope)
        if self.learn_place:
            if not (config.share_encoder and self.learn_select):
                self.plc_encoder = encoder(config)
            self.plc_node = nn.Linear(len(NODE_FEATURES), w)
            self.plc_device = nn.Linear(len(DEVICE_FEATURES), w)
            self.plc_head = mlp(sizes, config.negative_slope)

    # ------------------------------------------------------------ networks
    def select_logits(self, inputs: GraphTensors, embedding: torch.Tensor) -> torch.Tensor:
        """SEL's logit for every op ``(n,)``."""
        x = torch.cat([self.sel_node(inputs.node), embedding, path_sum(embedding, inputs.down_path), path_sum(embedding, inputs.up_path)], dim=1)
        return self.sel_head(x).squeeze(-1)

    def place_parts(self, inputs: GraphTensors, embedding: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """PLC's first layer split by input: per op its own part (bias included) and its device-sum part."""
        w = self.config.width
        first = self.plc_head[0]
        own = self.plc_node(inputs.node) @ first.weight[:, w : 2 * w].T + embedding @ first.weight[:, 2 * w : 3 * w].T + first.bias
        return own, embedding @ first.weight[:, 3 * w :].T

    def place_logits(self, device_feats: torch.Tensor, own: torch.Tensor, device_sum: torch.Tensor) -> torch.Tensor:
        """PLC's logits ``(..., devices)`` from device features ``(..., devices, F)`` and the precomputed parts."""
        first = self.plc_head[0]
        hidden = self.plc_device(device_feats) @ first.weight[:, : self.config.width].T + own.unsqueeze(-2) + device_sum
        return self.plc_head[1:](hidden).squeeze(-1)

    def numpy_place_logits(self):
        """:meth:`place_logits` as a numpy function ``(device features, own + device-sum part) -> logits``."""
        first, w = self.plc_head[0], self.config.width
        with torch.no_grad():
            device_weight = (first.weight[:, :w] @ self.plc_device.weight).T.cpu().double().numpy()
            device_bias = (first.weight[:, :w] @ self.plc_device.bias).cpu().double().numpy()
        rest = numpy_mlp(self.plc_head[1:])
        return lambda feats, parts: rest(feats @ device_weight + device_bias + parts)[:, 0]

    # ------------------------------------------------------------- rollout
    def play(self, state: PlacementState, choose: Chooser, teacher: bool) -> Rollout:
        graph = state.graph
        n, d, device = graph.num_nodes, state.num_devices, self.device
        inputs = graph_tensors(graph, device)
        if self.learn_select:
            sel_embedding = self.sel_encoder(inputs)
            sel_logits = self.select_logits(inputs, sel_embedding)
            sel_np = sel_logits.detach().cpu().double().numpy()
        if self.learn_place:
            plc_embedding = self.plc_encoder(inputs) if hasattr(self, "plc_encoder") else sel_embedding
            own, device_part = self.place_parts(inputs, plc_embedding)
            step_logits = self.numpy_place_logits()
            own_np, device_part_np = (x.detach().cpu().double().numpy() for x in (own, device_part))
            device_sum = np.zeros((d, own.shape[1]))
            feats = np.zeros((n, d, len(DEVICE_FEATURES)), dtype=np.float32)
        sel, plc = Decisions(), Decisions()
        devices_chosen = np.zeros(n, dtype=np.int64)
        agree = 0
        all_devices = np.arange(d)
        for t in range(n):
            ready = state.ready_ops()
            teacher_ops = state.teacher_ops(ready) if teacher or not self.learn_select else None
            if self.learn_select:
                pos = choose(softmax(sel_np[ready]), 2 * t)
                sel.add(ready, pos, None if teacher_ops is None else np.isin(ready, teacher_ops))
                op = int(ready[pos])
            else:
                op = int(teacher_ops[0])
            earliest = state.schedule.earliest_starts(op)
            teacher_devices = state.teacher_devices(earliest)
            if self.learn_place:
                feats[t] = state.device_features(op, earliest)
                target = choose(softmax(step_logits(feats[t], own_np[op] + device_sum)), 2 * t + 1)
                plc.add(all_devices, target, np.isin(all_devices, teacher_devices) if teacher else None)
                device_sum[target] += device_part_np[op]
            else:
                target = int(teacher_devices[0])
            if teacher:
                agree += bool(teacher_ops is not None and op in teacher_ops and target in teacher_devices)
            devices_chosen[t] = target
            state.place(op, target)
        heads = []
        if self.learn_select:
            heads.append(sel.terms(sel_logits))
        if self.learn_place:
            order = torch.as_tensor(state.schedule.order, dtype=torch.int64, device=device)
            placed = torch.zeros(n, d, own.shape[1], device=device)
            placed[torch.arange(n, device=device), torch.from_numpy(devices_chosen).to(device)] = device_part[order]
            before = torch.cumsum(placed, dim=0) - placed
            heads.append(plc.terms(self.place_logits(torch.from_numpy(feats).to(device), own[order], before)))
        log_prob, entropy, imitation = combine(heads, n, device)
        return Rollout(
            assignment=state.schedule.device.copy(),
            order=np.asarray(state.schedule.order, dtype=np.int64),
            log_prob=log_prob,
            entropy=entropy,
            imitation_loss=imitation if teacher else None,
            teacher_agreement=agree / max(n, 1) if teacher else None,
            steps=n,
        )
