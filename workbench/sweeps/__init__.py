"""Experiments at scale: sweeps over graphs × devices × methods × seeds, and the paper's comparison.

- :func:`sweep` runs a grid (serially, on a local process pool, or on Ray) into one results table;
  :func:`run_tasks` runs other independent work on the same engines.
- :mod:`workbench.sweeps.reproduce` rebuilds the paper's comparison (``workbench reproduce``).
"""

from .grid import Cell, ConfigError, SweepConfig, load_config, parse_config
from .results import ResultsTable, read_results
from .runners import run_cell, run_tasks, sweep

__all__ = [
    "sweep",
    "run_cell",
    "run_tasks",
    "SweepConfig",
    "Cell",
    "ConfigError",
    "load_config",
    "parse_config",
    "ResultsTable",
    "read_results",
]
