"""Learned placement policies (torch + DGL): the placement env, DOPPLER's SEL/PLC, Placeto, GDP, a joint policy.

- :class:`PlacementEnv` — Gymnasium env placing one ready op per step.
- :func:`make_policy` / :func:`load_policy` — policies by method name
  (``doppler``, ``doppler_sel_only``, ``doppler_plc_only``, ``placeto``,
  ``gdp``, ``joint``); ``policy.rollout(graph, devices)`` → :class:`Rollout`;
  ``policy.rollouts(graph, devices, count)`` → several sharing one encoder pass;
  ``policy.save(path)`` (a ``.safetensors`` file with a JSON header that
  cannot run code, :mod:`workbench.learn.checkpoint`).
- Registry placers: ``workbench.place(graph, method="doppler", checkpoint=PATH)``.

On small graphs one torch thread (``torch.set_num_threads(1)``) is fastest;
extra threads only contend for tiny tensors.

Only this package imports torch and DGL.
"""

from __future__ import annotations

import os

os.environ.setdefault("DGLBACKEND", "pytorch")

from .env import EnvConfig, Guide, PlacementEnv, PlacementState  # noqa: E402
from .checkpoint import TrainedFor  # noqa: E402
from .features import FEATURE_LAYOUT  # noqa: E402
from .policy import (  # noqa: E402
    METHODS,
    CheckpointError,
    LearnedPolicy,
    PolicyConfig,
    Rollout,
    load_policy,
    make_policy,
    read_checkpoint,
)

__all__ = [
    "PlacementEnv",
    "PlacementState",
    "Guide",
    "EnvConfig",
    "FEATURE_LAYOUT",
    "METHODS",
    "CheckpointError",
    "LearnedPolicy",
    "PolicyConfig",
    "Rollout",
    "load_policy",
    "make_policy",
    "read_checkpoint",
    "TrainedFor",
]
