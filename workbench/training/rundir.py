"""Writing run directories (``docs/contracts.md``, "Run directory"); the paths, columns and readers are :mod:`workbench.runs`.

Every file is written atomically (temporary file, then rename), and
``metrics.csv`` only ever grows by whole, flushed lines, so a reader sees a
consistent directory at every instant; a half-written last line (power
loss) is ignored by :func:`~workbench.runs.read_rows` and dropped on resume.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..fileio import atomic_write_json, atomic_write_text
from ..provenance import now
from ..runs import GREEDY_COLUMNS, METRIC_COLUMNS, PREDICTED_COLUMN, RunPaths, read_meta, read_rows
from .config import TrainConfig

__all__ = ["RunDirectory", "MetricsWriter"]


def _format(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


class RunDirectory(RunPaths):
    """One run's directory, for writing: config, meta, metrics, best placements (checkpoints: :mod:`.checkpoint`)."""

    def columns(self, config: TrainConfig) -> tuple[str, ...]:
        return METRIC_COLUMNS + ((PREDICTED_COLUMN,) if "real" in config.stages else ())

    # --- creating and reopening -------------------------------------------------------
    def existing_config(self) -> TrainConfig | None:
        """The config of a run already in this directory, or None for a new one."""
        if not self.config_path.exists():
            return None
        try:
            data = json.loads(self.config_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{self.config_path} is not valid JSON ({exc.msg}); it is not a run directory this tool wrote") from None
        return TrainConfig.from_dict(data, source=str(self.config_path))

    def create(self, config: TrainConfig, meta: Mapping[str, Any]) -> None:
        """Start a fresh run: config, meta (status running), a metrics header and a greedy-evaluation header."""
        if self.path.exists() and not self.path.is_dir():
            raise ValueError(f"{self.path} exists and is not a directory")
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.config_path, config.to_json())
        self.write_meta(dict(meta))
        self.truncate_metrics(config, keep_before=0)
        _write_csv(self.greedy_path, GREEDY_COLUMNS, [])

    def truncate_metrics(self, config: TrainConfig, keep_before: int) -> None:
        """Rewrite ``metrics.csv`` with only the complete rows of episodes ``< keep_before`` (resume)."""
        rows = read_rows(self.metrics_path)
        _write_csv(self.metrics_path, self.columns(config), [r for r in rows if int(r["episode"]) < keep_before])

    # --- greedy evaluations ---------------------------------------------------------------
    def append_greedy(self, stage: str, episode: int, seconds: float, makespans: Mapping[str, float]) -> None:
        """One whole, flushed ``greedy.csv`` line per graph of an evaluation (the file exists: :meth:`create`, :meth:`truncate_greedy`)."""
        buffer = io.StringIO()
        rows = ([stage, episode, graph, _format(float(value)), _format(round(seconds, 4))] for graph, value in makespans.items())
        csv.writer(buffer, lineterminator="\n").writerows(rows)
        with open(self.greedy_path, "a", encoding="utf-8", newline="") as handle:
            handle.write(buffer.getvalue())

    def truncate_greedy(self, episode: int, stage: str) -> None:
        """Rewrite ``greedy.csv`` with the evaluations a checkpoint at ``episode`` of ``stage`` comes after (resume).

        Those are the earlier episodes' and ``episode``'s own in ``stage``; an
        evaluation at the start of the next stage is done again. A run written
        before ``greedy.csv`` existed gets an empty one.
        """
        rows = read_rows(self.greedy_path)
        kept = [r for r in rows if int(r["episode"]) < episode or (int(r["episode"]) == episode and r["stage"] == stage)]
        _write_csv(self.greedy_path, GREEDY_COLUMNS, kept)

    # --- meta -----------------------------------------------------------------------------
    def read_meta(self) -> dict[str, Any]:
        return read_meta(self.meta_path)

    def write_meta(self, meta: dict[str, Any]) -> None:
        meta["updated"] = now()
        atomic_write_json(self.meta_path, meta)

    def update_meta(self, **changes: Any) -> dict[str, Any]:
        meta = self.read_meta()
        meta.update(changes)
        self.write_meta(meta)
        return meta

    # --- metrics --------------------------------------------------------------------------
    def open_metrics(self, config: TrainConfig, first_episode: int = 0) -> MetricsWriter:
        """Append to ``metrics.csv`` (and to ``tensorboard/`` when the config asks, dropping its events from ``first_episode`` on)."""
        tensorboard = self.tensorboard_dir if config.tensorboard else None
        return MetricsWriter(self.metrics_path, self.columns(config), tensorboard, first_episode)

    # --- best placements --------------------------------------------------------------------
    def write_best(self, placement: Mapping[str, Any], trace_json: str, subdir: str | None = None) -> None:
        """``best/placement.json`` and ``best/trace.json`` (in ``best/<subdir>/`` when given)."""
        folder = self.best_dir / subdir if subdir else self.best_dir
        atomic_write_text(folder / "trace.json", trace_json)
        atomic_write_json(folder / "placement.json", dict(placement))


def _write_csv(path: Path, columns: tuple[str, ...], rows: Iterable[Mapping[str, str]]) -> None:
    """Replace ``path`` atomically by ``columns`` as the header and ``rows`` (missing fields empty)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([r.get(c, "") for c in columns] for r in rows)
    atomic_write_text(path, buffer.getvalue())


class MetricsWriter:
    """Appends one whole, flushed CSV line per episode; optionally the numeric columns to TensorBoard too.

    TensorBoard scalars are tagged ``<graph>/<column>`` with the episode as
    step; on resume, events from ``first_episode`` on (episodes about to be
    replayed) are purged.
    """

    def __init__(self, path: Path, columns: Iterable[str], tensorboard: Path | None = None, first_episode: int = 0) -> None:
        self.columns = tuple(columns)
        self._tensorboard = _summary_writer(tensorboard, first_episode) if tensorboard is not None else None
        self._handle = open(path, "a", encoding="utf-8", newline="")

    def append(self, row: Mapping[str, Any]) -> None:
        unknown = set(row) - set(self.columns)
        if unknown:
            raise KeyError(f"metrics row has columns outside the header: {sorted(unknown)}")
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerow([_format(row.get(c)) for c in self.columns])
        self._handle.write(buffer.getvalue())
        self._handle.flush()
        if self._tensorboard is not None:
            for column in self.columns:
                value = row.get(column)
                if isinstance(value, (int, float)) and column not in ("episode", "seconds"):
                    self._tensorboard.add_scalar(f"{row['graph']}/{column}", value, int(row["episode"]))

    def sync(self) -> None:
        self._handle.flush()
        os.fsync(self._handle.fileno())
        if self._tensorboard is not None:
            self._tensorboard.flush()

    def close(self) -> None:
        self._handle.close()
        if self._tensorboard is not None:
            self._tensorboard.close()

    def __enter__(self) -> MetricsWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _summary_writer(log_dir: Path, first_episode: int) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ValueError("TrainConfig.tensorboard needs the tensorboard package: pip install -e '.[tensorboard]'") from None
    return SummaryWriter(log_dir=str(log_dir), purge_step=first_episode or None)
