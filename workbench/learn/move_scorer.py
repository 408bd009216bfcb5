"""The move scorer of learned_search: a small MLP from a candidate move's features to a score, its checkpoints, and the
fast scoring function one search uses (:meth:`MoveScorer.scoring`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .checkpoint import CheckpointError, read_checkpoint, weight_shapes, write_checkpoint
from .fields import Field, check_config

__all__ = ["METHOD", "FEATURES", "ScorerConfig", "MoveScorer", "SCORE_BLOCK_ROWS", "SCORER_FIELDS", "save_scorer", "load_scorer"]

METHOD = "learned_search"
FEATURES = (
    "compute",  # the moved ops' compute / makespan
    "start",  # the op's start / makespan
    "end",  # its end / makespan
    "slack",  # makespan - end - longest path after it, / makespan
    "transfer_wait",  # time its last input spent in transfer (ready - latest input end), / makespan
    "device_wait",  # time it waited for its device (start - ready), / makespan
    "critical",  # 1 when the op is on the critical chain
    "source_load",  # compute on its device / balanced share
    "target_load",  # compute on the target device / balanced share
    "target_finish",  # last end on the target device / makespan
    "comm_to_target",  # communication with ops on the target (saved by the move), / makespan
    "comm_to_source",  # communication with other ops on its own device (added by the move), / makespan
    "comm_total",  # all its communication / makespan
    "source_critical",  # share of the critical chain's compute on its own device
    "target_critical",  # share of the critical chain's compute on the target
    "group",  # 1 for a group move
    "group_size",  # ops moved / GROUP_LIMIT
    "inverse_devices",  # 1 / device count
)


@dataclass(frozen=True)
class ScorerConfig:
    """The move scorer's shape.

    Attributes:
        hidden: width of each hidden layer.
        layers: number of hidden layers.
    """

    hidden: int = 64
    layers: int = 2


class MoveScorer(nn.Module):
    """An MLP from one candidate move's features to a score (higher: more likely to lower the makespan)."""

    def __init__(self, config: ScorerConfig = ScorerConfig()) -> None:
        super().__init__()
        self.config = config
        widths = [len(FEATURES)] + [config.hidden] * config.layers
        layers: list[nn.Module] = []
        for a, b in zip(widths[:-1], widths[1:], strict=True):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Linear(widths[-1], 1))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net(features).squeeze(-1)

    def score(self, features: np.ndarray) -> np.ndarray:
        """Scores of a 2-D feature array (:meth:`scoring`'s function with the current weights)."""
        return self.scoring()(features)

    def scoring(self) -> Callable[[np.ndarray], np.ndarray]:
        """A function from a 2-D feature array to its scores, :meth:`forward` with the weights as they are now, copied once
        (detached, row-major: the faster kernel) for the many calls of one search: float32 multiply-adds under inference
        mode, ReLU in place, float64 out. On one torch thread the rows go through in blocks of :data:`SCORE_BLOCK_ROWS`,
        whose activations stay in cache: on 63,000 rows (a refresh at 10,000 ops and 8 devices) of a loaded 2-core machine
        16 CPU ms against 21 for the whole array (and 64 for the whole array on two threads, where blocks are slower
        still); the same floats either way (a row's sums run in the same order)."""
        layers = [(m.weight.detach().t().contiguous(), m.bias.detach().clone()) for m in self.net if isinstance(m, nn.Linear)]

        @torch.inference_mode()
        def score(features: np.ndarray) -> np.ndarray:
            rows = torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32))
            block = SCORE_BLOCK_ROWS if torch.get_num_threads() == 1 else max(1, len(rows))
            scores = np.empty(len(rows))
            for start in range(0, len(rows), block):
                x = rows[start : start + block]
                for i, (weight, bias) in enumerate(layers):
                    x = torch.addmm(bias, x, weight)
                    if i < len(layers) - 1:
                        x.relu_()
                scores[start : start + len(x)] = x[:, 0].numpy()
            return scores

        return score


SCORE_BLOCK_ROWS = 512
"""Candidate moves scored at once on one torch thread by :meth:`MoveScorer.scoring` (a block's activations: 512 x 64
float32, 128 KiB)."""


def save_scorer(path: str | os.PathLike, scorer: MoveScorer, training: Mapping[str, Any]) -> Path:
    """Write ``scorer`` as a checkpoint (safetensors + JSON header) with how it was trained."""
    header = {"method": METHOD, "config": asdict(scorer.config), "feature_layout": {"features": list(FEATURES)}}
    return write_checkpoint(path, scorer.state_dict(), header, extra={"training": dict(training)})


SCORER_FIELDS = {"hidden": Field(int, 1, 1024), "layers": Field(int, 1, 16)}
"""Each :class:`ScorerConfig` field's type and range, checked before a scorer's module is built (the shipped one: 64, 2)."""


def _scorer_config(header: dict[str, Any], where: str) -> ScorerConfig:
    """The scorer config a checkpoint's header holds, checked: method, feature layout, each field's type and range."""
    if header.get("method") != METHOD:
        raise CheckpointError(f"{where} holds a {header.get('method')!r} policy, not a {METHOD} scorer")
    if header.get("feature_layout") != {"features": list(FEATURES)}:
        raise CheckpointError(f"{where} was trained on another feature layout than this version's {METHOD}")
    if "config" not in header:
        raise CheckpointError(f"{where} lacks its scorer config")
    try:
        return ScorerConfig(**check_config(header["config"], SCORER_FIELDS, "scorer config"))
    except ValueError as error:
        raise CheckpointError(f"{where} has a bad scorer config: {error}") from None


def load_scorer(path: str | os.PathLike) -> MoveScorer:
    """A scorer from a checkpoint written by :func:`save_scorer`; another method or feature layout, a bad config, or
    weights of another dtype or shape than the config implies are refused with a :class:`CheckpointError`."""
    where = os.fspath(path)
    checkpoint = read_checkpoint(path, weights=lambda header: weight_shapes(lambda: MoveScorer(_scorer_config(header, where))))
    scorer = MoveScorer(_scorer_config(checkpoint.header, where))
    scorer.load_state_dict(checkpoint.weights)
    return scorer.eval()
