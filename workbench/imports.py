"""Objects named on the command line or in configs as ``PACKAGE.MODULE:NAME``, and lazy package exports."""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping

__all__ = ["import_object", "lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any], needs: str = ""
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` (PEP 562) that import each public name on first use.

    ``exports`` maps a name to the module defining it (absolute, or relative to
    ``package``); a loaded name is cached in ``namespace`` (the package's
    globals). ``needs`` names what the modules require, for a clearer ImportError.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            value = getattr(importlib.import_module(module, package), name)
        except ImportError as exc:
            if not needs:
                raise
            raise ImportError(f"{package}.{name} needs {needs}: {exc}") from exc
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__


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
