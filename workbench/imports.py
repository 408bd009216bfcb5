"""Objects named on the command line or in configs as ``PACKAGE.MODULE:NAME``, and lazily imported package names."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["import_object", "lazy_exports"]


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


def lazy_exports(package: str, exports: Mapping[str, str], needs: str = "") -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` (PEP 562) that import ``name`` from module ``exports[name]`` on first use.

    Module names may be relative to ``package`` (``".loop"``). The value is
    kept on the package, so each name is imported once. ``needs`` names what
    the modules require (an extra), for a clearer ImportError.
    """
    module = sys.modules[package]

    def __getattr__(name: str) -> Any:
        source = exports.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            value = getattr(importlib.import_module(source, package), name)
        except ImportError as exc:
            if not needs:
                raise
            raise ImportError(f"{package}.{name} needs {needs}: {exc}") from exc
        setattr(module, name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(module)) | set(exports))

    return __getattr__, __dir__
