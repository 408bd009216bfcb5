"""Training placement policies in three stages (DOPPLER, Yao et al., ICLR 2026, Sec. 4).

Stage I imitates the critical_path teacher (:mod:`.imitation`), Stage II runs
REINFORCE against the simulator and Stage III against a real-system cost
oracle (:mod:`.reinforce`, :mod:`.oracle`). :func:`train` runs them from one
:class:`TrainConfig` and writes a run directory (:mod:`.rundir`; the contract
is :mod:`workbench.runs` and ``docs/contracts.md``) that survives
interruption and resumes from its last checkpoint.

The names below resolve on first use, so that importing this package (or a
torch-free piece of it) does not import torch.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from ..imports import lazy_exports

_EXPORTS = {
    "TrainConfig": ".config",
    "field_docs": ".config",
    "train": ".loop",
    "TrainResult": ".loop",
    "load_graphs": ".loop",
    "reference_makespans": ".loop",
    "CostOracle": "workbench.systems.oracle",
    "SimulatorOracle": "workbench.systems.oracle",
    "as_oracle": ".oracle",
    "RunDirectory": ".rundir",
    "search": ".search",
    "SearchResult": ".search",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


class _Package(types.ModuleType):
    """Keeps ``workbench.training.search`` the function: importing the submodule ``.search`` rebinds the name to the module otherwise."""

    def __setattr__(self, name: str, value: Any) -> None:
        if not (isinstance(value, types.ModuleType) and name in _EXPORTS):
            super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
