"""A small convolutional network in the style of VGG (Simonyan and Zisserman, 2015): 3x3
convolutions, batch norm and ReLU in stages separated by max pooling, then global average
pooling and a linear classifier."""

from __future__ import annotations

import torch
from torch import nn


class SmallCNN(nn.Module):
    """``(batch, 3, size, size)`` images → ``(batch, classes)`` logits."""

    def __init__(self, channels: tuple[int, ...] = (32, 64, 128), classes: int = 10, batch: int = 8, size: int = 32) -> None:
        super().__init__()
        stages: list[nn.Module] = []
        width_in = 3
        for width in channels:
            stages += [nn.Conv2d(width_in, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2)]
            width_in = width
        self.features = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(width_in, classes)
        self.batch, self.size = batch, size

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(images)), 1))

    def example_inputs(self) -> tuple[torch.Tensor]:
        return (torch.randn(self.batch, 3, self.size, self.size),)


def small_cnn(classes: int = 10, batch: int = 8, size: int = 32) -> SmallCNN:
    """Three conv stages (32, 64, 128 channels); ``example_inputs()`` gives ``batch`` RGB images of ``size`` pixels."""
    return SmallCNN(classes=classes, batch=batch, size=size)
