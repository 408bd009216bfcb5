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

Only this package imports torch and DGL, on first use of a name above;
:mod:`workbench.learn.registry` (the registry lines) imports neither.
"""

from __future__ import annotations

import os

from ..imports import lazy_exports

os.environ.setdefault("DGLBACKEND", "pytorch")

# public name -> the submodule that defines it; loaded (with torch and DGL) on first use, so that
# importing workbench.learn.registry (the learned methods' registry lines) stays light
_EXPORTS = {
    "PlacementEnv": ".env",
    "PlacementState": ".env",
    "Guide": ".env",
    "EnvConfig": ".env",
    "FEATURE_LAYOUT": ".features",
    "METHODS": ".policy",
    "INPUT_OPTIONS": ".policy",
    "CheckpointError": ".policy",
    "LearnedPolicy": ".policy",
    "PolicyConfig": ".policy",
    "Rollout": ".policy",
    "load_policy": ".policy",
    "policy_weights": ".policy",
    "make_policy": ".policy",
    "read_checkpoint": ".policy",
    "TrainedFor": ".checkpoint",
}

__all__ = list(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, needs="torch and DGL (pip install 'doppler-workbench[learn]')")
