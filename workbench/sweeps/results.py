"""The sweep results table: one tidy row per cell, rewritten atomically after every cell.

CSV by default; Parquet when the file name ends in ``.parquet`` and pyarrow (the
``sweeps`` extra) is installed. Each update writes a temporary file and renames it over the table,
so a reader (the dashboard, a notebook, a second sweep) never sees a
half-written table, and an interrupted sweep loses at most the cells in flight.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from ..fileio import atomic_path

__all__ = ["ResultsTable", "METRIC_COLUMNS", "read_results"]

PARAMETER_COLUMNS = ("graph", "nodes", "edges", "devices", "method", "label", "seed", "options")
METRIC_COLUMNS = ("makespan", "lower_bound", "gap", "seconds", "cpu_seconds", "evaluations", "status", "error", "finished", "host")


def read_results(path: str | Path) -> pd.DataFrame:
    """Read a results table written by a sweep (CSV or Parquet)."""
    path = Path(path)
    if path.suffix.lower() == ".parquet":
        return pd.read_parquet(path)
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


class ResultsTable:
    """The rows of one results file, keyed by cell; ``add`` replaces a cell's row and saves."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if self.path.suffix.lower() == ".parquet":
            if importlib.util.find_spec("pyarrow") is None:
                raise ValueError(
                    f"{self.path}: writing Parquet needs pyarrow, which is not installed"
                    " (pip install 'doppler-workbench[sweeps]'); use a .csv file"
                )
        self.rows: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            try:
                frame = read_results(self.path)
            except Exception as exc:  # any unreadable file is reported the same way
                raise ValueError(
                    f"{self.path}: existing results table cannot be read ({exc}); move it away or choose another --out"
                ) from None
            if "cell" not in frame.columns:
                raise ValueError(f"{self.path}: exists but is not a sweep results table (no 'cell' column)")
            self.rows = {str(row["cell"]): row for row in frame.to_dict("records")}

    def finished(self) -> set[str]:
        """Keys of the cells that completed without error."""
        return {key for key, row in self.rows.items() if row.get("status") == "ok"}

    def add(self, row: Mapping[str, Any]) -> None:
        self.rows[str(row["cell"])] = dict(row)
        self.save()

    def frame(self, keys: list[str] | None = None) -> pd.DataFrame:
        """The table (only ``keys``' rows, in that order, when given) with its columns in a fixed order."""
        rows = list(self.rows.values()) if keys is None else [self.rows[k] for k in keys if k in self.rows]
        frame = pd.DataFrame(rows)
        if frame.empty:
            return pd.DataFrame(columns=["cell", *PARAMETER_COLUMNS, *METRIC_COLUMNS])
        options = sorted(c for c in frame.columns if c.startswith("option."))
        fixed = ["cell", *PARAMETER_COLUMNS, *options, *METRIC_COLUMNS]
        others = [c for c in frame.columns if c not in fixed]
        return frame.reindex(columns=fixed + others)

    def save(self) -> None:
        frame = self.frame()
        with atomic_path(self.path) as tmp:
            if self.path.suffix.lower() == ".parquet":
                frame.to_parquet(tmp, index=False)
            else:
                frame.to_csv(tmp, index=False)
