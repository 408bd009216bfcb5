"""Objects named on the command line or in configs as ``PACKAGE.MODULE:NAME``."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["import_object"]


def import_object(spec: str) -> Any:
    """The object ``NAME`` of module ``PACKAGE.MODULE`` for ``spec = "PACKAGE.MODULE:NAME"``.

    Raises ``ValueError`` naming what is wrong: a malformed spec, a module
    that cannot be imported, or a missing name.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{spec!r}: expected PACKAGE.MODULE:NAME, e.g. workbench.models:gpt_decoder")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name!r}: {exc}") from None
    if not hasattr(module, attr):
        raise ValueError(f"module {module_name!r} has no attribute {attr!r}")
    return getattr(module, attr)
