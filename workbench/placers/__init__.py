"""Placement methods behind one interface; see :mod:`workbench.placers.base` and :mod:`workbench.placers.registry`.

``workbench.placers()`` lists the registered methods. Importing this
subpackage binds the name ``workbench.placers`` to the module itself, so the
module is made callable: calling it is calling :func:`placers`. The registry
is plain Python; the names of :mod:`.base` (numpy) load on first use.
"""

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from .registry import (
    KINDS,
    REGISTRY,
    PlacerEntry,
    PlacerError,
    get_placer,
    methods,
    placer_class,
    placer_options,
    placers,
    register_placer,
    require,
)

_BASE = ("Decision", "Placement", "Placer", "place", "load_placement")

if TYPE_CHECKING:  # loaded on first use by _CallableModule.__getattr__; named here for the type checker
    from .base import (
        Decision as Decision,
        Placement as Placement,
        Placer as Placer,
        load_placement as load_placement,
        place as place,
    )

__all__ = [
    "KINDS",
    "REGISTRY",
    "PlacerEntry",
    "PlacerError",
    "get_placer",
    "methods",
    "placer_class",
    "placer_options",
    "placers",
    "register_placer",
    "require",
    *_BASE,
]


class _CallableModule(types.ModuleType):
    def __call__(self) -> dict[str, str]:
        return placers()

    def __getattr__(self, name: str) -> Any:
        if name not in _BASE:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(".base", self.__name__), name)
        setattr(self, name, value)
        return value


sys.modules[__name__].__class__ = _CallableModule
