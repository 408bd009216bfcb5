"""Placement methods behind one interface; see :mod:`workbench.placers.base`.

``workbench.placers()`` lists the registered methods. Importing this
subpackage binds the name ``workbench.placers`` to the module itself, so the
module is made callable: calling it is calling :func:`placers`.
"""

import sys
import types

from .base import REGISTRY, Decision, Placement, Placer, get_placer, place, placers, register_placer

__all__ = ["REGISTRY", "Decision", "Placement", "Placer", "get_placer", "place", "placers", "register_placer"]


class _CallableModule(types.ModuleType):
    def __call__(self) -> dict[str, str]:
        return placers()


sys.modules[__name__].__class__ = _CallableModule
