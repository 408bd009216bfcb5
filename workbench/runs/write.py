"""Writing run directories: the one writer of every trainer's CSV tables, ``config.json``, ``meta.json`` and best placement.

Every trainer (``workbench train``, its ``corpus``, ``gate`` and ``scorer``
modes, and the pretrained export) writes its run through this module. Each
declares its config as a dict and the record of its run (``method``,
``graphs``, ``devices``, ``stages``, ``command``); :meth:`RunWriter.start`
writes both and marks the run ``running`` (keeping ``started`` of a run it
resumes), :meth:`RunWriter.finish` marks it ``finished``. Each trainer also
declares the columns of its tables (``metrics.csv`` of ``workbench train``:
:data:`~workbench.runs.METRIC_COLUMNS`; the corpus, gate and scorer trainers
their own) and writes them through :class:`CsvLog`: a table grows only by
whole, flushed lines, so a reader (:func:`~workbench.runs.read_rows`) sees a
consistent file at every instant, and a resumed run keeps the rows its
checkpoint has seen (:meth:`CsvLog.start`) before it appends again. Every
other file is replaced atomically (:mod:`workbench.fileio`); checkpoints are
named by :meth:`~workbench.runs.RunPaths.checkpoint`.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from ..fileio import atomic_write_json, atomic_write_text
from ..provenance import machine, now, versions
from .layout import RunPaths
from .read import read_meta, read_rows, try_read_json


def format_value(value: Any) -> str:
    """A field as written: empty for ``None``, ``repr`` for a float (it reads back exactly), ``str`` otherwise."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


class CsvLog:
    """One CSV table of a run: a header of the declared ``columns``, then rows appended as whole, flushed lines.

    Use it as a context manager (or call :meth:`close`) when appending: the file
    stays open between :meth:`append` calls.
    """

    def __init__(self, path: str | os.PathLike, columns: Iterable[str]) -> None:
        self.path = os.fspath(path)
        self.columns = tuple(columns)
        self._handle: IO[str] | None = None

    def _text(self, rows: Iterable[Mapping[str, Any]], header: bool = False) -> str:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        if header:
            writer.writerow(self.columns)
        for row in rows:
            unknown = set(row) - set(self.columns)
            if unknown:
                raise KeyError(f"{os.path.basename(self.path)} row has columns outside the header: {sorted(unknown)}")
            writer.writerow([format_value(row.get(column)) for column in self.columns])
        return buffer.getvalue()

    def write(self, rows: Iterable[Mapping[str, Any]] = ()) -> None:
        """Replace the table atomically by the header and ``rows`` (a missing column is empty)."""
        self.close()
        atomic_write_text(self.path, self._text(rows, header=True))

    def start(self, keep: Callable[[dict[str, str]], bool] | None = None) -> list[dict[str, str]]:
        """Begin the table: the header, then (resuming) the sound rows already there for which ``keep`` is true, each
        given the declared columns (one the file lacks is empty). Returns the rows kept."""
        kept = [row for row in read_rows(self.path) if keep(row)] if keep is not None else []
        rows = [{column: row.get(column, "") for column in self.columns} for row in kept]
        self.write(rows)
        return rows

    def append(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Append ``rows`` (after :meth:`start` or :meth:`write`) as whole lines in one flushed write; a column outside
        the header is a ``KeyError``."""
        text = self._text(rows)
        if self._handle is None:
            self._handle = open(self.path, "a", encoding="utf-8", newline="")
        self._handle.write(text)
        self._handle.flush()

    def sync(self) -> None:
        """Force the appended lines to disk (a checkpoint refers to them)."""
        if self._handle is not None:
            self._handle.flush()
            os.fsync(self._handle.fileno())

    def close(self) -> None:
        """Close the file (appending again reopens it)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __enter__(self) -> CsvLog:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()


class RunWriter(RunPaths):
    """One run directory, for writing its JSON records and best placements (its tables: :class:`CsvLog`)."""

    def start(self, config: Mapping[str, Any], meta: Mapping[str, Any]) -> dict[str, Any]:
        """Begin (or resume) the run: the folder, ``config.json`` and ``meta.json`` with status ``running``.

        ``meta`` is the trainer's record of the run (``method``, ``graphs``, ``devices``, ``stages``, ``command``, ...);
        ``started``, ``versions`` and ``machine`` are added where it gives none, and a resumed run keeps its ``started``.
        Returns the record written.
        """
        if self.path.exists() and not self.path.is_dir():
            raise ValueError(f"{self.path} exists and is not a directory")
        self.path.mkdir(parents=True, exist_ok=True)
        self.write_config(config)
        held = try_read_json(self.meta_path)
        record = {"started": held.get("started") or now(), "versions": versions(), "machine": machine(), **meta, "status": "running"}
        self.write_meta(record)
        return record

    def finish(self, **changes: Any) -> dict[str, Any]:
        """``meta.json`` with status ``finished``, ``finished`` set to now and ``changes``; returns the new record."""
        return self.update_meta(status="finished", finished=now(), **changes)

    def write_config(self, config: Mapping[str, Any]) -> None:
        """``config.json``: the trainer's config as a dict, replaced atomically."""
        atomic_write_json(self.config_path, dict(config))

    def read_meta(self) -> dict[str, Any]:
        """``meta.json`` (raises when it is missing or not JSON: this run writes it)."""
        return read_meta(self.meta_path)

    def write_meta(self, meta: dict[str, Any]) -> None:
        """``meta.json``, replaced atomically, with ``updated`` set to now."""
        meta["updated"] = now()
        atomic_write_json(self.meta_path, meta)

    def update_meta(self, **changes: Any) -> dict[str, Any]:
        """``meta.json`` with ``changes``; returns the new record."""
        meta = self.read_meta()
        meta.update(changes)
        self.write_meta(meta)
        return meta

    def write_best(self, placement: Mapping[str, Any], trace_json: str, subdir: str | None = None) -> None:
        """``best/placement.json`` and ``best/trace.json`` (in ``best/<subdir>/`` when given)."""
        atomic_write_text(self.best_trace_path(subdir), trace_json)
        atomic_write_json(self.best_placement_path(subdir), dict(placement))

    def copy_records(self, source: RunPaths) -> list[Path]:
        """Copy ``source``'s records here, each file atomically: ``config.json``, ``meta.json``, ``metrics.csv``,
        ``greedy.csv`` (where it has one: runs trained before it existed have none) and ``best/`` (placement and trace);
        never its checkpoints. A pretrained export is such a copy (:mod:`workbench.training.pretrained`). Returns the
        files written."""
        pairs = [
            (source.config_path, self.config_path),
            (source.meta_path, self.meta_path),
            (source.metrics_path, self.metrics_path),
            (source.greedy_path, self.greedy_path),
            (source.best_placement_path(), self.best_placement_path()),
            (source.best_trace_path(), self.best_trace_path()),
        ]
        written = []
        for origin, copy in pairs:
            if origin.is_file() or origin != source.greedy_path:
                atomic_write_text(copy, origin.read_text(encoding="utf-8"))
                written.append(copy)
        return written

    def write_export(self, record: Mapping[str, Any]) -> None:
        """``export.json``: what a pretrained export was made from (each stage's greedy makespans, the stage shipped)."""
        atomic_write_json(self.export_path, dict(record))
