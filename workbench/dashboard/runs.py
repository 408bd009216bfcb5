"""Read training run directories (:mod:`workbench.rundir`, ``docs/contracts.md``) without ever failing on bad state.

A run may be missing files, be half written, or be corrupt: :func:`read_run`
returns what it could read plus a list of ``problems`` in plain words, and
ignores a half-written last line of ``metrics.csv``.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..rundir import METRIC_COLUMNS, TEXT_COLUMNS, RunPaths, complete_lines, reference

__all__ = ["Run", "RunSummary", "list_runs", "read_run", "read_metrics", "references"]


@dataclass(frozen=True)
class RunSummary:
    """A run directory's name, path and ``meta.json`` (``None`` when missing or unreadable)."""

    name: str
    path: Path
    meta: dict[str, Any] | None

    @property
    def status(self) -> str:
        return str(self.meta.get("status", "unknown")) if self.meta else "unknown"


@dataclass(frozen=True)
class Run:
    """Everything readable in one run directory.

    Attributes:
        name: the directory's name.
        path: the directory.
        meta: ``meta.json`` or ``None``.
        config: ``config.json`` or ``None``.
        metrics: ``metrics.csv`` as a frame (empty when missing).
        best_placement: ``best/placement.json`` or ``None``.
        best_trace: ``best/trace.json`` as a :class:`workbench.Trace` or ``None``.
        checkpoints: checkpoint files found.
        problems: what is missing or wrong, one sentence each.
        greedy: ``greedy.csv`` (the periodic greedy evaluations) as a frame; empty when the run has none.
    """

    name: str
    path: Path
    meta: dict[str, Any] | None
    config: dict[str, Any] | None
    metrics: pd.DataFrame
    best_placement: dict[str, Any] | None
    best_trace: Any
    checkpoints: tuple[Path, ...]
    problems: tuple[str, ...] = field(default_factory=tuple)
    greedy: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def status(self) -> str:
        return str(self.meta.get("status", "unknown")) if self.meta else "unknown"


def _read_json(path: Path, problems: list[str], required: bool = True) -> dict[str, Any] | None:
    if not path.is_file():
        if required:
            problems.append(f"{path.name} is missing")
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        problems.append(f"{path.parent.name}/{path.name} is unreadable: {getattr(exc, 'msg', exc)}")
        return None
    if not isinstance(data, dict):
        problems.append(f"{path.name} does not hold a JSON object")
        return None
    return data


def list_runs(root: Path) -> list[RunSummary]:
    """Run directories under ``root`` (those with a ``meta.json`` or ``metrics.csv``), newest first."""
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        if path.name.startswith((".", "_")) or not path.is_dir():
            continue
        paths = RunPaths(path)
        if not (paths.meta_path.exists() or paths.metrics_path.exists()):
            continue
        meta = _read_json(paths.meta_path, [], required=False)
        found.append((path.stat().st_mtime, RunSummary(path.name, path, meta)))
    return [summary for _, summary in sorted(found, key=lambda item: -item[0])]


def _empty_metrics() -> pd.DataFrame:
    return pd.DataFrame(columns=list(METRIC_COLUMNS))


def read_metrics(path: Path, problems: list[str] | None = None) -> pd.DataFrame:
    """``metrics.csv`` (or ``greedy.csv``) as a frame for charts (the pandas view of :func:`workbench.rundir.read_metrics`).

    No half-written last line, numeric columns as floats, problems reported instead of raised.
    """
    problems = problems if problems is not None else []
    name = path.name
    if not path.is_file():
        problems.append(f"{name} is missing (no episode logged yet)")
        return _empty_metrics()
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        problems.append(f"{name} is unreadable: {exc}")
        return pd.DataFrame()
    text = complete_lines(text)
    if not text.strip():
        problems.append(f"{name} has no complete line yet")
        return _empty_metrics()
    header = text.split("\n", 1)[0].split(",")
    if "episode" not in header:
        problems.append(f"{name} has no 'episode' column in its header")
        return pd.DataFrame()
    # Metrics hold no quoted fields: with quoting off, a stray quote spoils only its own row (a
    # quoted field would otherwise run on over every later line), and the C parser stays fast.
    frame = pd.read_csv(io.StringIO(text), quoting=csv.QUOTE_NONE, on_bad_lines="skip", dtype={c: str for c in TEXT_COLUMNS})
    skipped = sum(1 for line in text.split("\n")[1:] if line.strip()) - len(frame)
    if skipped:
        problems.append(f"{name}: skipped {skipped} malformed line(s)")
    for column in frame.columns:
        if column not in TEXT_COLUMNS:
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    bad = frame["episode"].isna()
    if bad.any():
        problems.append(f"{name}: ignored {int(bad.sum())} row(s) without an episode number")
        frame = frame[~bad]
    return frame.reset_index(drop=True)


def read_run(path: Path) -> Run:
    """Read one run directory; never raises for missing or corrupt contents."""
    problems: list[str] = []
    if not path.is_dir():
        problems.append(f"{path.name} is not a run directory")
        return Run(path.name, path, None, None, pd.DataFrame(), None, None, (), tuple(problems))
    paths = RunPaths(path)
    meta = _read_json(paths.meta_path, problems)
    config = _read_json(paths.config_path, problems)
    metrics = read_metrics(paths.metrics_path, problems)
    best = _read_json(paths.best_dir / "placement.json", problems, required=False)
    trace = None
    trace_path = paths.best_dir / "trace.json"
    if trace_path.is_file():
        from workbench import Trace

        try:
            trace = Trace.from_json(trace_path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problems.append(f"best/trace.json is unreadable: {exc}")
    checkpoints = paths.checkpoints()
    if meta and meta.get("status") in ("failed", "diverged") and meta.get("error"):
        problems.append(f"the run failed: {meta['error']}")
    greedy = read_metrics(paths.greedy_path, problems) if paths.greedy_path.is_file() else pd.DataFrame()
    return Run(path.name, path, meta, config, metrics, best, trace, checkpoints, tuple(problems), greedy)


def references(meta: dict[str, Any] | None, graph: str | None = None) -> dict[str, float]:
    """The teacher's and the best heuristic's makespans of ``graph`` (default: the run's only graph), labelled for a chart."""
    ref = reference(meta, graph)
    out: dict[str, float] = {}
    for key, label in (("critical_path", "teacher (critical_path)"), ("best_heuristic", "best heuristic")):
        value = ref.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            name = ref.get("best_heuristic_method") if key == "best_heuristic" else None
            out[f"{label} {name}" if name else label] = float(value)
    return out
