"""Placeto (Addanki et al., "Placeto: Learning Generalizable Device Placement Algorithms", NeurIPS 2019).

Placeto visits the ops in a fixed order (here the topological order) and one
policy picks each op's device from graph embeddings that are recomputed as
placements change. Recomputing the whole MPNN after every placement would
cost a full encoder pass per op; here the MPNN runs once on the static
features, and each step refreshes only what the placement changes: the
current op's view of where its neighbours went (one placement-aware
message-passing round: per device, the sum of embeddings of the op's placed
neighbours there) and the per-device sums of embeddings of all placed ops.
Each device is scored from ``[projected node features ‖ embedding ‖
neighbours on the device ‖ all ops on the device]``.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

from .choice import Chooser, Decisions, Rollout, as_numpy, finish_rollout, softmax
from .doppler import encoder
from .env import PlacementState
from .features import NODE_FEATURES
from .nets import GraphTensors, ScoringHead, sums_before
from .policy import LearnedPolicy, PolicyConfig

__all__ = ["PlacetoPolicy"]


class PlacetoPolicy(LearnedPolicy):
    """Topological order; one device policy over placement-refreshed embeddings."""

    def __init__(self, config: PolicyConfig) -> None:
        super().__init__(config)
        w = config.width
        self.encoder = encoder(config)
        self.node = nn.Linear(len(NODE_FEATURES), w)
        self.head = ScoringHead(
            {"node": w, "embedding": w, "neighbours": w, "device_sum": w}, config.head_hidden, config.activation, config.negative_slope
        )

    def encode(self, inputs: GraphTensors) -> SimpleNamespace:
        head = self.head
        embedding = self.encoder(inputs)
        own = head.part("node", self.node(inputs.node)) + head.part("embedding", embedding) + head.bias
        neighbour_part, device_part = head.part("neighbours", embedding), head.part("device_sum", embedding)
        return SimpleNamespace(
            own=own,
            neighbour_part=neighbour_part,
            device_part=device_part,
            own_np=as_numpy(own),
            neighbour_np=as_numpy(neighbour_part),
            device_part_np=as_numpy(device_part),
            finish=head.numpy_finish(),
        )

    def play(self, state: PlacementState, choose: Chooser, teacher: bool, encoded: SimpleNamespace) -> Rollout:
        e, graph = encoded, state.graph
        n, d, device = graph.num_nodes, state.num_devices, self.device
        width = e.own.shape[1]
        device_sum = np.zeros((d, width))
        decisions = Decisions()
        all_devices = np.arange(d)
        order = graph.topological_order
        agree = 0
        for t, op in enumerate(order.tolist()):
            preds = graph.predecessors(op)  # in topological order every placed neighbour is a predecessor
            neighbours = np.zeros((d, width))
            np.add.at(neighbours, state.schedule.device[preds], e.neighbour_np[preds])
            teacher_mask = np.isin(all_devices, state.teacher_devices(op, state.schedule.earliest_starts(op))) if teacher else None
            target = choose(softmax(e.finish(e.own_np[op] + neighbours + device_sum)), t, teacher_mask)
            decisions.add(all_devices, target, teacher_mask)
            agree += bool(teacher_mask is not None and teacher_mask[target])
            device_sum[target] += e.device_part_np[op]
            state.place(op, target)
        assignment = state.schedule.device
        order_t = torch.as_tensor(np.array(order), device=device)
        ptr, pred, _ = graph.pred_csr
        step_of = np.empty(n, dtype=np.int64)
        step_of[order] = np.arange(n)
        pred_steps = np.repeat(step_of, np.diff(ptr))  # the step placing each edge's consumer (pred_csr rows)
        rows = torch.as_tensor(pred_steps * d + assignment[pred], device=device)
        step_neighbours = torch.zeros(n * d, width, device=device).index_add_(
            0, rows, e.neighbour_part[torch.as_tensor(pred, device=device)]
        )
        before = sums_before(e.device_part[order_t], assignment[order], d)
        scores = self.head.finish(e.own[order_t].unsqueeze(1) + step_neighbours.view(n, d, -1) + before)
        return finish_rollout(assignment, order, [decisions.terms(scores)], teacher, agree, device)
