"""Following run directories while they grow: each poll reads only what was appended since the last one.

A run's tables grow by whole lines (:class:`~workbench.runs.CsvLog`), except
that a resumed run cuts them back to what its checkpoint saw and
:meth:`~workbench.runs.CsvLog.write` replaces one (a new file). A
:class:`TableFollower` keeps the offset after the last whole line it read and
the bytes just before it; a poll reads from that offset on, and reads the whole
table again when the file is another one, shorter, or no longer holds those
bytes there. A :class:`RunFollower` follows one run directory: its tables,
``meta.json``, ``config.json`` and best placement (these are read again only
when their size or time stamp changes). A run whose ``meta.json`` says it has
stopped (:data:`SETTLED`) costs three ``stat`` calls per poll (``meta.json``
and both tables) and nothing is read until one of them changes (a run copied
in, whose ``meta.json`` came before its tables, is still read to its end). :class:`RunFollowers` keeps one
follower per folder for a server's pages.

The rows are the ones :func:`~workbench.runs.read_run` gives (it is a
follower's first poll); pandas is imported only when a poll runs.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .layout import RunPaths
from .read import EPISODE, Run, parse_table

if TYPE_CHECKING:
    import pandas as pd

    from ..sim import Trace

SETTLED = ("finished", "diverged", "failed", "interrupted")
"""Statuses of a run that no process is writing: its tables are not read again until ``meta.json`` changes."""
TAIL = 64
"""Bytes before a table's read offset that must be unchanged for the table to count as appended to, not rewritten."""


def _read_json(path: Path, problems: list[str], required: bool = True) -> dict[str, Any] | None:
    """A JSON object file, or ``None`` with the problem added (a missing file only when ``required``)."""
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


def _best_placement(paths: RunPaths, problems: list[str]) -> tuple[dict[str, Any] | None, Trace | None]:
    """``best/placement.json`` and ``best/trace.json`` (a shipped export's too: :mod:`workbench.training.pretrained`)."""
    from ..sim import Trace

    best = _read_json(paths.best_placement_path(), problems, required=False)
    trace_path = paths.best_trace_path()
    if not trace_path.is_file():
        return best, None
    try:
        return best, Trace.from_json(trace_path)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        problems.append(f"best/trace.json is unreadable: {exc}")
        return best, None


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """``(inode, mtime ns, size)`` of ``path``, ``None`` when it is missing."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


class TableFollower:
    """One ``metrics.csv`` or ``greedy.csv``, read whole once, then only the whole lines appended since the last poll.

    Attributes:
        frame: every sound row so far (:func:`~workbench.runs.read_frame`'s frame).
        problems: what is missing or damaged, one sentence each.
        generation: counts the times the table was read whole (a rewrite or truncation); the rows of one generation only grow.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        import pandas as pd

        self.path = Path(path)
        self.frame: pd.DataFrame = pd.DataFrame()
        self.problems: list[str] = []
        self.generation = 0
        self._inode: int | None = None
        self._offset = 0
        self._tail = b""
        self._header = b""
        self._next_line = 2
        self._polled = False

    @property
    def exists(self) -> bool:
        """Whether the table was there at the last poll."""
        return self._inode is not None

    def poll(self) -> str:
        """Bring :attr:`frame` up to date: ``"same"``, ``"appended"`` (rows were added at its end) or ``"reloaded"``."""
        try:
            with open(self.path, "rb") as handle:
                inode, size = os.fstat(handle.fileno()).st_ino, os.fstat(handle.fileno()).st_size
                if self._polled and inode == self._inode and size >= self._offset and self._tail_holds(handle):
                    return self._append(handle) if size > self._offset else "same"
                return self._reload(handle, inode)
        except FileNotFoundError:
            return self._missing(f"{self.path.name} is missing (no episode logged yet)")
        except OSError as exc:
            return self._missing(f"{self.path.name} is unreadable: {exc}")

    def _tail_holds(self, handle: Any) -> bool:
        handle.seek(self._offset - len(self._tail))
        return bool(handle.read(len(self._tail)) == self._tail)

    def _missing(self, problem: str) -> str:
        import pandas as pd

        if self._polled and self._inode is None and self.problems == [problem]:
            return "same"
        self.frame, self.problems, self._inode, self._offset, self._tail, self._polled = pd.DataFrame(), [problem], None, 0, b"", True
        self.generation += 1
        return "reloaded"

    def _reload(self, handle: Any, inode: int) -> str:
        import pandas as pd

        handle.seek(0)
        raw = handle.read()
        raw = raw[: raw.rfind(b"\n") + 1]  # a half-written last line is no damage: it is being written
        self.problems = []
        self.frame = parse_table(raw, self.path.name, self.problems) if raw else pd.DataFrame()
        if not raw:
            self.problems.append(f"{self.path.name} has no complete line yet")
        self._header = raw.partition(b"\n")[0]
        self._inode, self._offset, self._tail, self._polled = inode, len(raw), raw[-TAIL:], True
        self._next_line = raw.count(b"\n") + 1
        self.generation += 1
        return "reloaded"

    def _append(self, handle: Any) -> str:
        import pandas as pd

        handle.seek(self._offset)
        data = handle.read()
        data = data[: data.rfind(b"\n") + 1]
        if not data:
            return "same"
        if not self._header:  # the header itself was being written at the last poll
            return self._reload(handle, os.fstat(handle.fileno()).st_ino)
        rows = parse_table(self._header + b"\n" + data, self.path.name, self.problems, first_line=self._next_line)
        self.frame = rows if self.frame.empty else pd.concat([self.frame, rows], ignore_index=True)
        self._offset += len(data)
        self._tail = (self._tail + data)[-TAIL:]
        self._next_line += data.count(b"\n")
        return "appended"


@dataclass(frozen=True)
class RunChange:
    """What one :meth:`RunFollower.poll` found: ``appended``, the ``metrics.csv`` rows added at its end (none when
    ``reloaded``: the table was read whole); ``other``: anything else changed (``greedy.csv``, ``meta.json``,
    ``config.json``, the best placement). ``generation`` and ``revision`` count, over the follower's life, the times
    ``metrics.csv`` was read whole and the polls that found another change: while both stay the same, the run's rows
    only grew and nothing else changed."""

    appended: int = 0
    reloaded: bool = False
    other: bool = False
    generation: int = 0
    revision: int = 0

    @property
    def any(self) -> bool:
        """Whether anything changed."""
        return bool(self.appended or self.reloaded or self.other)


class RunFollower:
    """One run directory, read incrementally (see the module docstring); :attr:`run` is what it holds now."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.paths = RunPaths(path)
        self.metrics = TableFollower(self.paths.metrics_path)
        self.greedy = TableFollower(self.paths.greedy_path)
        self._stamps: dict[str, Any] = {}
        self._meta: dict[str, Any] | None = None
        self._config: dict[str, Any] | None = None
        self._json_problems: list[str] = []
        self._best: tuple[dict[str, Any] | None, Trace | None] = (None, None)
        self._best_problems: list[str] = []
        self._checkpoints: tuple[Path, ...] = ()
        self._rows = 0
        self.revision = 0
        self._polled = False

    @property
    def settled(self) -> bool:
        """Whether ``meta.json`` says no process is writing the run (:data:`SETTLED`)."""
        return self._meta is not None and self._meta.get("status") in SETTLED

    def poll(self) -> RunChange:
        """Read what changed since the last poll (everything at the first)."""
        meta_stamp = _stamp(self.paths.meta_path)
        tables = (_stamp(self.paths.metrics_path), _stamp(self.paths.greedy_path))
        if self._polled and self.settled and meta_stamp == self._stamps.get("meta") and tables == self._stamps.get("tables"):
            return RunChange(generation=self.metrics.generation, revision=self.revision)
        self._polled = True
        self._stamps["tables"] = tables
        other = self._poll_json(meta_stamp)
        metrics = self.metrics.poll()
        other = self._poll_best() or other
        greedy = self.greedy.poll() if self.greedy.exists or self.paths.greedy_path.is_file() else "same"
        appended = 0 if metrics != "appended" else len(self.metrics.frame) - self._rows
        self._rows = len(self.metrics.frame)
        other = other or greedy != "same"
        self.revision += other
        return RunChange(appended, metrics == "reloaded", other, self.metrics.generation, self.revision)

    def _poll_json(self, meta_stamp: tuple[int, int, int] | None) -> bool:
        stamps = {"meta": meta_stamp, "config": _stamp(self.paths.config_path)}
        if all(self._stamps.get(key, False) == stamp for key, stamp in stamps.items()):
            return False
        self._json_problems = []
        self._meta = _read_json(self.paths.meta_path, self._json_problems)
        self._config = _read_json(self.paths.config_path, self._json_problems)
        self._checkpoints = self.paths.checkpoints()  # a trainer updates meta.json after each checkpoint it writes
        self._stamps.update(stamps)
        return True

    def _poll_best(self) -> bool:
        stamps = {"placement": _stamp(self.paths.best_placement_path()), "trace": _stamp(self.paths.best_trace_path())}
        if all(self._stamps.get(key, False) == stamp for key, stamp in stamps.items()):
            return False
        self._best_problems = []
        self._best = _best_placement(self.paths, self._best_problems)
        self._stamps.update(stamps)
        return True

    @property
    def run(self) -> Run:
        """The run as read so far (:func:`~workbench.runs.read_run`'s :class:`~workbench.runs.Run`)."""
        import pandas as pd

        paths = self.paths
        if not paths.path.is_dir():
            empty = pd.DataFrame()
            problem = f"{paths.path.name} is not a run directory"
            return Run(paths.path.name, paths.path, None, None, empty, empty, None, None, (), (problem,))
        problems = [*self._json_problems, *self.metrics.problems]
        metrics = self.metrics.frame
        if len(metrics.columns) and EPISODE not in metrics.columns:
            problems.append(f"{paths.metrics_path.name} has no {EPISODE!r} column in its header")
            metrics = pd.DataFrame()
        greedy = self.greedy.frame if self.greedy.exists else pd.DataFrame()
        problems += self.greedy.problems if self.greedy.exists else []
        problems += self._best_problems
        meta = self._meta
        if meta and meta.get("status") in ("failed", "diverged") and meta.get("error"):
            problems.append(f"the run failed: {meta['error']}")
        best, trace = self._best
        return Run(paths.path.name, paths.path, meta, self._config, metrics, greedy, best, trace, self._checkpoints, tuple(problems))


class RunFollowers:
    """One :class:`RunFollower` per run folder, safe to poll from several threads (a server's callbacks); the least
    recently polled are dropped beyond ``most``."""

    def __init__(self, most: int = 256) -> None:
        self.most = most
        self._followers: OrderedDict[Path, tuple[RunFollower, threading.Lock]] = OrderedDict()
        self._lock = threading.Lock()

    def poll(self, path: str | os.PathLike) -> tuple[Run, RunChange]:
        """The run in ``path`` as it is now, and what changed since this object last polled it (everything the first time)."""
        key = Path(path)
        with self._lock:
            if key not in self._followers:
                self._followers[key] = (RunFollower(key), threading.Lock())
            self._followers.move_to_end(key)
            follower, lock = self._followers[key]
            while len(self._followers) > self.most:
                self._followers.popitem(last=False)
        with lock:
            change = follower.poll()
            return follower.run, change
