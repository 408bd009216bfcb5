"""A toy learned policy, the smallest a user could add: one learned score per device, ops placed in topological order.

It follows the "Add a learned policy" recipe of docs/architecture.md: this module, then one line,
``register_policy("toy", "tests.toys.toy_policy", "ToyPolicy", "...")``.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

from workbench.learn.choice import Chooser, Decisions, Rollout, finish_rollout
from workbench.learn.env import PlacementState
from workbench.learn.gdp import teacher_devices
from workbench.learn.nets import GraphTensors
from workbench.learn.policy import LearnedPolicy, PolicyConfig


class ToyPolicy(LearnedPolicy):
    """Every op drawn from one softmax over the devices' learned scores."""

    scores_devices_by_index = True

    def __init__(self, config: PolicyConfig) -> None:
        super().__init__(config)
        self.device_scores = nn.Parameter(torch.zeros(config.max_devices))

    def encode(self, inputs: GraphTensors) -> SimpleNamespace:
        return SimpleNamespace()

    def play(self, state: PlacementState, choose: Chooser, teacher: bool, encoded: SimpleNamespace) -> Rollout:
        graph, d = state.graph, state.num_devices
        logits = self.device_scores[:d].expand(graph.num_nodes, d)
        probs = torch.softmax(self.device_scores[:d].detach().double(), 0).cpu().numpy()
        tied = teacher_devices(graph, state.schedule.cluster, state.guide) if teacher else None
        decisions, assignment, agree, all_devices = Decisions(), np.zeros(graph.num_nodes, dtype=np.int64), 0, np.arange(d)
        order = graph.topological_order
        for t, op in enumerate(order.tolist()):
            mask = None if tied is None else np.isin(all_devices, tied[op])
            assignment[op] = choose(probs, t, mask)
            decisions.add(all_devices, int(assignment[op]), mask)
            agree += bool(teacher and mask[assignment[op]])
        return finish_rollout(assignment, order, [decisions.terms(logits)], teacher, agree, self.device)
