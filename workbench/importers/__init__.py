"""Graphs from real models: :func:`from_torch` (torch.fx, torch.export fallback) and :func:`coarsen`.

``import workbench.importers`` does not import torch: :func:`from_torch` and
the torch module behind it load on first use.
"""

from __future__ import annotations

from typing import Any

from .coarsen import coarsen

__all__ = ["from_torch", "coarsen", "TraceError"]


def __getattr__(name: str) -> Any:
    if name in ("from_torch", "TraceError"):
        from . import torch_fx

        return getattr(torch_fx, name)
    raise AttributeError(f"module 'workbench.importers' has no attribute {name!r}")
