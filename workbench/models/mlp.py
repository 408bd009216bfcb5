"""A multilayer perceptron: Linear and ReLU layers, the classic feed-forward network."""

from __future__ import annotations

from itertools import pairwise

import torch
from torch import nn


class MLP(nn.Module):
    """``(batch, features)`` → ``(batch, classes)`` logits."""

    def __init__(self, features: int = 256, hidden: int = 512, layers: int = 3, classes: int = 10, batch: int = 32) -> None:
        super().__init__()
        widths = [features] + [hidden] * layers
        stack: list[nn.Module] = []
        for width_in, width_out in pairwise(widths):
            stack += [nn.Linear(width_in, width_out), nn.ReLU()]
        self.layers = nn.Sequential(*stack, nn.Linear(widths[-1], classes))
        self.features, self.batch = features, batch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)

    def example_inputs(self) -> tuple[torch.Tensor]:
        return (torch.randn(self.batch, self.features),)


def mlp(features: int = 256, hidden: int = 512, layers: int = 3, classes: int = 10, batch: int = 32) -> MLP:
    """An MLP with ``layers`` hidden layers; ``example_inputs()`` gives a ``batch x features`` tensor."""
    return MLP(features, hidden, layers, classes, batch)
