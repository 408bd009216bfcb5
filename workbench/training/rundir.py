"""The run directory of ``workbench train`` (``docs/contracts.md``, "Run directory"), written through :mod:`workbench.runs`.

Its tables are :class:`~workbench.runs.CsvLog`\\ s: ``metrics.csv`` with
:data:`~workbench.runs.METRIC_COLUMNS` (and ``predicted`` with a real stage),
``greedy.csv`` with :data:`~workbench.runs.GREEDY_COLUMNS`. They only ever grow
by whole, flushed lines, so a reader sees a consistent directory at every
instant; a half-written last line (power loss) is ignored by
:func:`~workbench.runs.read_rows` and dropped on resume.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..runs import GREEDY_COLUMNS, METRIC_COLUMNS, PREDICTED_COLUMN, CsvLog, RunWriter
from .config import TrainConfig

__all__ = ["RunDirectory", "MetricsWriter"]


class RunDirectory(RunWriter):
    """One training run's directory, for writing: config, meta, metrics, greedy evaluations, best placements (checkpoints:
    :mod:`.checkpoint`)."""

    def columns(self, config: TrainConfig) -> tuple[str, ...]:
        """The columns of ``metrics.csv`` for ``config``."""
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
        self.start(dataclasses.asdict(config), meta)
        CsvLog(self.metrics_path, self.columns(config)).start()
        CsvLog(self.greedy_path, GREEDY_COLUMNS).start()

    # --- greedy evaluations ---------------------------------------------------------------
    def append_greedy(self, stage: str, episode: int, seconds: float, makespans: Mapping[str, float]) -> None:
        """One whole, flushed ``greedy.csv`` line per graph of an evaluation (the file exists: :meth:`create`, :meth:`truncate_greedy`)."""
        rows = (
            {"stage": stage, "episode": episode, "graph": graph, "greedy": float(value), "seconds": round(seconds, 4)}
            for graph, value in makespans.items()
        )
        with CsvLog(self.greedy_path, GREEDY_COLUMNS) as log:
            log.append(rows)

    def truncate_greedy(self, keep_bytes: int | None) -> None:
        """Cut ``greedy.csv`` after its first ``keep_bytes`` bytes (resume: the evaluations the checkpoint comes after, as
        :func:`~workbench.runs.validate.check_greedy` found them), so every earlier byte stays; ``None``: the run has no
        ``greedy.csv`` and no evaluation was due in it yet, so it gets an empty one."""
        if keep_bytes is None:
            CsvLog(self.greedy_path, GREEDY_COLUMNS).start()
            return
        with open(self.greedy_path, "r+b") as handle:
            handle.truncate(keep_bytes)

    # --- metrics --------------------------------------------------------------------------
    def open_metrics(self, config: TrainConfig, first_episode: int = 0) -> MetricsWriter:
        """Append to ``metrics.csv`` (and to ``tensorboard/`` when the config asks, dropping its events from ``first_episode`` on)."""
        tensorboard = self.tensorboard_dir if config.tensorboard else None
        return MetricsWriter(self.metrics_path, self.columns(config), tensorboard, first_episode)


class MetricsWriter(CsvLog):
    """``metrics.csv``: one whole, flushed line per episode; optionally the numeric columns to TensorBoard too.

    TensorBoard scalars are tagged ``<graph>/<column>`` with the episode as
    step; on resume, events from ``first_episode`` on (episodes about to be
    replayed) are purged.
    """

    def __init__(self, path: Path, columns: Iterable[str], tensorboard: Path | None = None, first_episode: int = 0) -> None:
        super().__init__(path, columns)
        self._tensorboard = _summary_writer(tensorboard, first_episode) if tensorboard is not None else None

    def append_row(self, row: Mapping[str, Any]) -> None:
        """One episode's row (a column outside the header is a ``KeyError``)."""
        self.append([row])
        if self._tensorboard is not None:
            for column in self.columns:
                value = row.get(column)
                if isinstance(value, (int, float)) and column not in ("episode", "seconds"):
                    self._tensorboard.add_scalar(f"{row['graph']}/{column}", value, int(row["episode"]))

    def sync(self) -> None:
        super().sync()
        if self._tensorboard is not None:
            self._tensorboard.flush()

    def close(self) -> None:
        super().close()
        if self._tensorboard is not None:
            self._tensorboard.close()
            self._tensorboard = None

    def __enter__(self) -> MetricsWriter:
        return self


def _summary_writer(log_dir: Path, first_episode: int) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ValueError("TrainConfig.tensorboard needs the tensorboard package: pip install -e '.[tensorboard]'") from None
    return SummaryWriter(log_dir=str(log_dir), purge_step=first_episode or None)
