"""Graphs from real models: :func:`from_torch` (torch.fx, HuggingFace's fx, torch.export fallback),
:func:`coarsen`, :func:`shard` (a partitioned block graph) and :func:`build_model` (``hf:``/``tv:`` specs).

``import workbench.importers`` does not import torch: :func:`from_torch`,
:func:`shard`, :func:`build_model` and the torch modules behind them load on
first use.
"""

from __future__ import annotations

from typing import Any

from .coarsen import coarsen

__all__ = ["from_torch", "coarsen", "TraceError", "shard", "build_model"]

_LAZY = {"from_torch": "torch_fx", "TraceError": "torch_fx", "shard": "sharding", "build_model": "specs"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'workbench.importers' has no attribute {name!r}")
