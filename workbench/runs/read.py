"""Reading run directories: one reader for ``metrics.csv`` and ``greedy.csv``, ``meta.json``, the best placement and the checkpoints.

A run may be missing files, be half written or be damaged. The readers never
raise on its contents: they return what they could read and add a sentence
per problem to a ``problems`` list. Both CSV files are read by one function
(``_read_table``), so every view of them, the rows as strings
(:func:`read_rows`: resume, the export, benchmarks) and the frame of numbers
(:func:`read_frame`: the dashboard, the notebooks), keeps and drops the same
lines:

- a last line without its newline (a run being written, or cut by a power
  loss) is ignored, silently: it is not damage;
- a line whose fields (CSV quoting honoured, so a graph path holding a comma is
  one field) do not match the header, or whose ``episode`` is not a whole
  number, is damaged: it is skipped and reported. Each line is parsed on its
  own, so a stray quote costs its own line, never the lines after it.

pandas is imported only by the functions that build frames.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import compress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .layout import TEXT_COLUMNS

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from ..sim import Trace


EPISODE = "episode"
DAMAGED_NAMED = 5
"""A problem names at most this many damaged line numbers."""


_QUOTED_FIELD = re.compile(rb',"[^"\n]*(?:""[^"\n]*)*"(?![^,\n])')
"""A whole quoted CSV field after the first on one line (``,"a,b"``; a quote inside is doubled): replaced by its comma
before the commas of a line are counted."""


def _sound_lines(data: bytes, width: int) -> tuple[np.ndarray, np.ndarray]:
    """``(sound, blank)``: which lines of ``data`` (whole lines, each ending in a newline) have ``width`` fields, and which
    are empty.

    Quoted fields are taken out before the commas are counted (with numpy, not
    line by line). A line that still holds a quote after that (a stray quote,
    or a quoted first field) is parsed on its own, so a stray quote costs its
    own line, never the lines after it.
    """
    import numpy as np

    quoted = b'"' in data
    stripped = np.frombuffer(_QUOTED_FIELD.sub(b",", data) if quoted else data, dtype=np.uint8)
    ends = np.flatnonzero(stripped == ord("\n"))
    commas = np.bincount(np.searchsorted(ends, np.flatnonzero(stripped == ord(","))), minlength=len(ends))
    blank = np.diff(ends, prepend=-1) == 1
    sound = (commas == width - 1) & ~blank
    if quoted:
        lines = data.split(b"\n")
        for index in np.unique(np.searchsorted(ends, np.flatnonzero(stripped == ord('"')))):
            sound[index] = len(next(csv.reader([lines[index].decode("utf-8", errors="replace")]), [])) == width
    return sound, blank


def _whole_episodes(frame: pd.DataFrame, reread: Callable[[], pd.DataFrame]) -> np.ndarray:
    """Which rows hold a whole episode number as written: digits only (``reread`` gives the column as written when
    pandas did not read it as integers)."""
    column = frame[EPISODE]
    if column.dtype.kind in "iu":
        return (column >= 0).to_numpy(dtype=bool)
    if column.dtype.kind != "O":
        column = reread()[EPISODE]
    return column.map(lambda value: isinstance(value, str) and value.isdigit()).to_numpy(dtype=bool)


def _read_table(path: str | os.PathLike, problems: list[str] | None, strings: bool) -> pd.DataFrame:
    """The one reader of ``metrics.csv`` and ``greedy.csv`` (see the module docstring): every field a string as written
    (``strings``), or the word columns as strings and the others as numbers."""
    import pandas as pd

    problems = problems if problems is not None else []
    path = Path(path)
    name = path.name
    if not path.is_file():
        problems.append(f"{name} is missing (no episode logged yet)")
        return pd.DataFrame()
    try:
        raw = path.read_bytes()
    except OSError as exc:
        problems.append(f"{name} is unreadable: {exc}")
        return pd.DataFrame()
    raw = raw[: raw.rfind(b"\n") + 1]  # a half-written last line is no damage: it is being written
    if not raw:
        problems.append(f"{name} has no complete line yet")
        return pd.DataFrame()
    return parse_table(raw, name, problems, strings)


def parse_table(raw: bytes, name: str, problems: list[str], strings: bool = False, first_line: int = 2) -> pd.DataFrame:
    """The rows of ``raw``, a table's header line then whole lines (each ending in a newline), read by the rules of the
    module docstring; ``first_line`` is the line number in the file of the first line after the header (a damaged line
    is named by it). Used on a whole table, and on the lines appended to one (:class:`~workbench.runs.TableFollower`)."""
    import numpy as np
    import pandas as pd

    head, _, data = raw.partition(b"\n")
    header = next(csv.reader([head.decode("utf-8", errors="replace")]), [])
    sound, blank = _sound_lines(data, len(header))
    if not (sound | blank).all():
        raw = b"\n".join([head, *compress(data.split(b"\n"), sound)]) + b"\n"
    words = [c for c in header if c in TEXT_COLUMNS]

    def parse(dtype: Any) -> pd.DataFrame:
        na = {"na_filter": False} if strings else {"na_values": [""]}
        return pd.read_csv(io.BytesIO(raw), dtype=dtype, keep_default_na=False, encoding_errors="replace", **na)

    frame = parse(object if strings else dict.fromkeys(words, object))
    damaged = np.flatnonzero(~sound & ~blank)
    if EPISODE in frame.columns:
        whole = _whole_episodes(frame, lambda: parse({**dict.fromkeys(words, object), EPISODE: object}))
        damaged = np.sort(np.concatenate([damaged, np.flatnonzero(sound)[~whole]]))
        frame = frame[whole].reset_index(drop=True)
        if not strings:
            frame[EPISODE] = frame[EPISODE].astype("int64")
    if len(damaged):
        numbers = ", ".join(str(n + first_line) for n in damaged[:DAMAGED_NAMED]) + (", …" if len(damaged) > DAMAGED_NAMED else "")
        rule = f"{len(header)} fields" + (" and a whole episode number" if EPISODE in header else "")
        problems.append(f"{name}: skipped {len(damaged)} damaged line(s) (line {numbers}): each line needs {rule}")
    for column in [] if strings else frame.columns:
        if column not in words and frame[column].dtype == object:
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame


def read_rows(path: str | os.PathLike, problems: list[str] | None = None) -> list[dict[str, str]]:
    """The sound rows of ``metrics.csv`` or ``greedy.csv``, every field a string exactly as written; ``[]`` when there are
    none. Problems (a missing file, damaged lines) are added to ``problems``."""
    frame = _read_table(path, problems, strings=True)
    columns = [str(c) for c in frame.columns]
    return [dict(zip(columns, values, strict=True)) for values in frame.to_numpy(dtype=object).tolist()]


def read_frame(path: str | os.PathLike, problems: list[str] | None = None) -> pd.DataFrame:
    """The sound rows of ``metrics.csv`` or ``greedy.csv`` as a frame, the same rows as :func:`read_rows`: the word
    columns (:data:`TEXT_COLUMNS`) as strings, ``episode`` as integers, every other column as numbers (an empty or
    unreadable field is NaN). Empty when there are no rows. Problems are added to ``problems``."""
    return _read_table(path, problems, strings=False)


def read_meta(path: str | os.PathLike) -> dict[str, Any]:
    """``meta.json`` as a dict (raises when it is missing or not JSON: for a run this process writes)."""
    data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    return data


def try_read_json(path: str | os.PathLike) -> dict[str, Any]:
    """A JSON object file (``meta.json``, ``config.json``, ...) as a dict; ``{}`` when it is missing, unreadable or not an object."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


@dataclass(frozen=True)
class Run:
    """Everything readable in one run directory (:func:`read_run`).

    Attributes:
        name: the directory's name.
        path: the directory.
        meta: ``meta.json`` or ``None``.
        config: ``config.json`` or ``None``.
        metrics: ``metrics.csv`` as a frame (:func:`read_frame`; empty when missing).
        greedy: ``greedy.csv`` (the periodic greedy evaluations) as a frame; empty when the run has none.
        best_placement: ``best/placement.json`` or ``None``.
        best_trace: ``best/trace.json`` or ``None``.
        checkpoints: the checkpoint files in ``checkpoints/``.
        problems: what is missing or wrong, one sentence each.
    """

    name: str
    path: Path
    meta: dict[str, Any] | None
    config: dict[str, Any] | None
    metrics: pd.DataFrame
    greedy: pd.DataFrame
    best_placement: dict[str, Any] | None
    best_trace: Trace | None
    checkpoints: tuple[Path, ...]
    problems: tuple[str, ...]

    @property
    def status(self) -> str:
        """``meta.json``'s status (``running``, ``finished``, ...), ``unknown`` without one."""
        return str(self.meta.get("status", "unknown")) if self.meta else "unknown"


def read_run(path: str | os.PathLike) -> Run:
    """Read one run directory; never raises for missing or damaged contents (they are in :attr:`Run.problems`).

    It is a :class:`~workbench.runs.RunFollower`'s first poll, so a page that follows a run sees the same rows and problems.
    """
    from .follow import RunFollower

    follower = RunFollower(path)
    follower.poll()
    return follower.run


def references(meta: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """``meta["reference"]`` keyed per graph: ``{graph: {"critical_path", "best_heuristic", "best_heuristic_method"}}``.

    Training writes it keyed per graph. Runs written before that (the shipped
    ones in ``datasets/pretrained/``) hold one graph's values flat; they are
    keyed by the run's only graph here. Anything else gives ``{}``.
    """
    ref = meta.get("reference") if meta is not None else None
    if meta is None or not isinstance(ref, Mapping):
        return {}
    if "critical_path" in ref and not isinstance(ref["critical_path"], Mapping):
        graphs = meta.get("graphs") or []
        return {str(graphs[0]): dict(ref)} if len(graphs) == 1 else {}
    return {str(graph): dict(values) for graph, values in ref.items() if isinstance(values, Mapping)}


def reference(meta: Mapping[str, Any] | None, graph: str | None = None) -> dict[str, Any]:
    """The references of ``graph`` (default: the run's only graph); ``{}`` when the run has none for it."""
    per_graph = references(meta)
    if graph is None:
        return next(iter(per_graph.values())) if len(per_graph) == 1 else {}
    return per_graph.get(graph, {})


def reference_lines(meta: Mapping[str, Any] | None, graph: str | None = None) -> dict[str, float]:
    """The teacher's and the best heuristic's makespans of ``graph`` (default: the run's only graph), labelled for a chart."""
    ref = reference(meta, graph)
    out: dict[str, float] = {}
    for key, label in (("critical_path", "teacher (critical_path)"), ("best_heuristic", "best heuristic")):
        value = ref.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            name = ref.get("best_heuristic_method") if key == "best_heuristic" else None
            out[f"{label} {name}" if name else label] = float(value)
    return out
