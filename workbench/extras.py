"""The optional extras (``pyproject.toml``'s ``[project.optional-dependencies]``): which one brings which module.

A command or method that needs a module of an extra that is not installed says so in one line that names the
extra and the command that installs it (:func:`needs_extra`); the CLI exits with status 2. Plain Python: the
core layers import this module.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

__all__ = [
    "PROJECT",
    "EXTRA_OF",
    "MissingExtra",
    "extra_of",
    "extras_of",
    "missing_modules",
    "needs_extra",
    "pip_install",
    "require_modules",
]

PROJECT = "doppler-workbench"
"""The distribution's name, as ``pip install`` spells it."""

EXTRA_OF: dict[str, str] = {
    "torch": "learn",
    "dgl": "learn",
    "safetensors": "learn",
    "torchdata": "learn",
    "gymnasium": "learn",
    "torchvision": "models",
    "transformers": "models",
    "timm": "models",
    "dash": "dashboard",
    "plotly": "dashboard",
    "kaleido": "dashboard",
    "ray": "sweeps",
    "pyarrow": "sweeps",
    "tensorboard": "tensorboard",
}
"""Top-level module → the extra that installs it (each module's distribution has the same name)."""


class MissingExtra(ModuleNotFoundError):
    """A module of an optional extra is not installed; the message names the extra."""


def extra_of(module: str | None) -> str | None:
    """The extra that installs the top-level module ``module``, or None (a submodule, or a module no extra brings)."""
    return EXTRA_OF.get(module or "")


def extras_of(modules: Iterable[str]) -> list[str]:
    """The extras that install ``modules``, sorted, each once."""
    return sorted({extra for extra in map(extra_of, modules) if extra})


def missing_modules(modules: Iterable[str]) -> list[str]:
    """Those of ``modules`` (top-level names) that are not installed."""
    return [name for name in modules if importlib.util.find_spec(name) is None]


def pip_install(*extras: str) -> str:
    """The command that installs ``extras``: ``pip install 'doppler-workbench[learn,dashboard]'``."""
    return f"pip install '{PROJECT}[{','.join(extras)}]'"


def require_modules(what: str, *modules: str) -> None:
    """Raise :class:`MissingExtra`, one line naming the extra to install, when one of ``modules`` (that ``what`` needs) is not installed."""
    missing = missing_modules(modules)
    if missing:
        raise MissingExtra(needs_extra(what, missing[0]), name=missing[0])


def needs_extra(what: str, module: str) -> str:
    """One line: ``what`` needs ``module``, and the ``pip install`` of the extra that brings it."""
    extra = extra_of(module)
    if extra is None:
        return f"{what} needs {module}, which is not installed"
    return f"{what} needs {module}, which is not installed; it comes with the {extra!r} extra: {pip_install(extra)}"
