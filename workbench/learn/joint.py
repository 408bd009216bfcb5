"""A single joint policy over (ready op, device) pairs: the baseline for DOPPLER's two-policy split.

The reviewers of DOPPLER (Yao et al., ICLR 2026) asked what separating SEL
and PLC buys; this policy answers it with the same encoder and the same
inputs in one head. Each step it scores every pair of a ready op and a device
from ``[projected node features ‖ embedding ‖ downward path sum ‖ upward
path sum ‖ projected device features of the op on the device ‖ the sum of
embeddings of the ops on the device]`` and takes one softmax over all pairs.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

from .choice import Chooser, Decisions, Rollout, as_numpy, finish_rollout, softmax
from .doppler import encoder
from .env import PlacementState
from .features import DEVICE_FEATURES, NODE_FEATURES
from .nets import GraphTensors, ScoringHead, path_sum, sums_before
from .policy import LearnedPolicy, PolicyConfig

__all__ = ["JointPolicy"]


class JointPolicy(LearnedPolicy):
    """One softmax over every (ready op, device) pair."""

    reads_paths = True

    def __init__(self, config: PolicyConfig) -> None:
        super().__init__(config)
        w = config.width
        self.encoder = encoder(config)
        self.node = nn.Linear(len(NODE_FEATURES), w)
        self.device_proj = nn.Linear(len(DEVICE_FEATURES), w)
        segments = {"node": w, "embedding": w, "down": w, "up": w, "device": w, "device_sum": w}
        self.head = ScoringHead(segments, config.head_hidden, config.activation, config.negative_slope)

    def encode(self, inputs: GraphTensors) -> SimpleNamespace:
        head = self.head
        embedding = self.encoder(inputs)
        own = (
            head.part("node", self.node(inputs.node))
            + head.part("embedding", embedding)
            + head.part("down", path_sum(embedding, inputs.down_path))
            + head.part("up", path_sum(embedding, inputs.up_path))
            + head.bias
        )
        device_part = head.part("device_sum", embedding)
        device_weight, device_bias = head.numpy_projected_part("device", self.device_proj)
        return SimpleNamespace(
            own=own,
            device_part=device_part,
            own_np=as_numpy(own),
            device_part_np=as_numpy(device_part),
            device_weight=device_weight,
            device_bias=device_bias,
            finish=head.numpy_finish(),
        )

    def play(self, state: PlacementState, choose: Chooser, teacher: bool, encoded: SimpleNamespace) -> Rollout:
        e, head = encoded, self.head
        n, d, device = state.graph.num_nodes, state.num_devices, self.device
        device_sum = np.zeros((d, e.own.shape[1]))
        pair_feats: list[np.ndarray] = []  # per step: (ready, devices, F)
        pair_ops: list[np.ndarray] = []
        decisions = Decisions()
        devices_chosen = np.zeros(n, dtype=np.int64)
        agree, offset = 0, 0
        for t in range(n):
            ready = state.ready_ops()
            earliest = np.stack([state.schedule.earliest_starts(int(op)) for op in ready])
            feats = np.stack([state.device_features(int(op), e) for op, e in zip(ready, earliest, strict=True)])
            logits = e.finish(feats @ e.device_weight + e.device_bias + e.own_np[ready][:, None, :] + device_sum[None])
            teacher_pairs = None
            if teacher:
                devices_ok = np.stack(
                    [np.isin(np.arange(d), state.teacher_devices(int(op), row)) for op, row in zip(ready, earliest, strict=True)]
                )
                tied = np.isin(ready, state.teacher_ops(ready))[:, None] & devices_ok
                teacher_pairs = tied.reshape(-1)
            pick = choose(softmax(logits.reshape(-1)), t, teacher_pairs)
            op, target = int(ready[pick // d]), pick % d
            agree += bool(teacher_pairs is not None and teacher_pairs[pick])
            decisions.add(np.arange(offset, offset + ready.size * d), pick, teacher_pairs)
            offset += ready.size * d
            pair_feats.append(feats)
            pair_ops.append(ready)
            device_sum[target] += e.device_part_np[op]
            devices_chosen[t] = target
            state.place(op, target)
        order = torch.as_tensor(state.schedule.order, dtype=torch.int64, device=device)
        steps = torch.repeat_interleave(torch.arange(n, device=device), torch.as_tensor([r.size * d for r in pair_ops], device=device))
        ops = torch.as_tensor(np.repeat(np.concatenate(pair_ops), d), device=device)
        devices = torch.arange(d, device=device).repeat(offset // d)
        feats = torch.from_numpy(np.concatenate([f.reshape(-1, len(DEVICE_FEATURES)) for f in pair_feats])).to(device)
        before = sums_before(e.device_part[order], devices_chosen, d)
        scores = head.finish(head.part("device", self.device_proj(feats)) + e.own[ops] + before[steps, devices])
        heads = [decisions.terms(scores)]
        return finish_rollout(state.schedule.device, np.asarray(state.schedule.order), heads, teacher, agree, device)
