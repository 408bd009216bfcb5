"""GDP (Zhou et al., "GDP: Generalized Device Placement for Dataflow Graphs", 2019).

GDP embeds the graph with a graph neural network, then runs attention over
the sequence of ops to place every op in one forward pass. Here the encoder
is the same MPNN as DOPPLER's; the ops in topological order, with sinusoidal
positions, go through a Transformer encoder (GDP used Transformer-XL with
segment recurrence to reach very long sequences; plain full attention covers
the graphs this workbench handles), and a linear layer gives each op logits
over ``max_devices`` devices, of which the first ``devices`` are used. Each
op's device is drawn independently; the rollout's log-probability is the sum
over ops. Its imitation target is the critical-path teacher's own placement
(every device where each op could start earliest in the teacher's schedule).

Independent per-op choices cannot coordinate: where ops are interchangeable
(four equal independent ops on two devices) the uniform policy is a saddle of
REINFORCE, and 200 episodes leave the sampled makespan at the uniform
policy's mean while DOPPLER's step-by-step PLC learns the split.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

from ..cluster import Devices
from ..graph import DataflowGraph
from .choice import Chooser, Decisions, Rollout, finish_rollout
from .doppler import encoder
from .env import Guide, PlacementState
from .nets import GraphTensors
from .policy import LearnedPolicy, PolicyConfig

__all__ = ["GDPPolicy"]


def positions(length: int, width: int, device: torch.device) -> torch.Tensor:
    """Sinusoidal position encodings ``(length, width)``."""
    position = torch.arange(length, dtype=torch.float32, device=device).unsqueeze(1)
    frequency = torch.exp(torch.arange(0, width, 2, dtype=torch.float32, device=device) * (-math.log(10000.0) / width))
    table = torch.zeros(length, width, device=device)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: width // 2])
    return table


def teacher_devices(graph: DataflowGraph, devices: Devices, guide: Guide | None = None) -> list[np.ndarray]:
    """Per op, the devices where the teacher could put it, following the teacher's own schedule (or the guide's)."""
    state = PlacementState(graph, devices, guide)
    tied: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * graph.num_nodes
    while not state.done:
        op = int(state.teacher_ops(state.ready_ops())[0])
        tied[op] = state.teacher_devices(op, state.schedule.earliest_starts(op))
        state.place(op, int(tied[op][0]))
    return tied


class GDPPolicy(LearnedPolicy):
    """Graph encoder + attention over the op sequence; every op placed in one pass."""

    scores_devices_by_index = True

    def __init__(self, config: PolicyConfig) -> None:
        super().__init__(config)
        w = config.width
        self.encoder = encoder(config)
        layer = nn.TransformerEncoderLayer(w, config.attention_heads, dim_feedforward=2 * w, dropout=0.0, batch_first=True)
        self.attention = nn.TransformerEncoder(layer, config.attention_layers, enable_nested_tensor=False)
        self.out = nn.Linear(w, config.max_devices)

    def encode(self, inputs: GraphTensors) -> SimpleNamespace:
        n, device = inputs.num_nodes, inputs.node.device
        order = inputs.topological_order
        sequence = self.encoder(inputs)[order] + positions(n, self.config.width, device)
        logits = self.out(self.attention(sequence.unsqueeze(0)).squeeze(0))  # row t: op order[t]
        return SimpleNamespace(logits=logits)

    def play(self, state: PlacementState, choose: Chooser, teacher: bool, encoded: SimpleNamespace) -> Rollout:
        graph = state.graph
        n, d, device = graph.num_nodes, state.num_devices, self.device
        if d > self.config.max_devices:
            raise ValueError(f"this GDP policy places on at most {self.config.max_devices} devices (max_devices), got {d}")
        order = graph.topological_order
        logits = encoded.logits[:, :d]
        probs = torch.softmax(logits.detach().double(), dim=-1).cpu().numpy()
        tied = teacher_devices(graph, state.schedule.cluster, state.guide) if teacher else None
        decisions = Decisions()
        all_devices = np.arange(d)
        assignment = np.zeros(n, dtype=np.int64)
        agree = 0
        for t, op in enumerate(order.tolist()):
            teacher_mask = None if tied is None else np.isin(all_devices, tied[op])
            assignment[op] = choose(probs[t], t, teacher_mask)
            decisions.add(all_devices, int(assignment[op]), teacher_mask)
            agree += bool(teacher_mask is not None and teacher_mask[assignment[op]])
        return finish_rollout(assignment, order, [decisions.terms(logits)], teacher, agree, device)
