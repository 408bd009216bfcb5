"""Figures of sweeps and benchmarks are written by :func:`workbench.viz.write_figure` (PNG, else HTML; atomically either way)."""

from ..viz import write_figure

__all__ = ["write_figure"]
