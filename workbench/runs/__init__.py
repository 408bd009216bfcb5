"""Run directories (``docs/contracts.md``, "Run directory"): their layout, reading and listing, without torch.

Every trainer writes its run directory through it; the dashboard, the notebooks, resume,
``workbench reproduce``, the sweeps, the benchmarks and the pretrained export
read it through this package:

- :mod:`.layout`: paths, columns and checkpoint names (standard library only);
- :mod:`.read`: one reader for ``metrics.csv`` and ``greedy.csv`` (rows as
  strings or a frame, damaged lines skipped and reported), ``meta.json``,
  the best placement and the checkpoints (:func:`read_run`);
- :mod:`.follow`: the same reading done incrementally, for a page that polls
  growing runs (:class:`RunFollowers`: each poll reads only the appended lines);
- :mod:`.listing`: one rule for which folders are runs (:func:`list_runs`);
- :mod:`.validate`: every field of a run's files checked before a resume
  writes anything (:func:`~.validate.check_run`);
- :mod:`.greedy`: a run's greedy evaluations as one curve;
- :mod:`.write`: the one writer of every trainer's tables (:class:`CsvLog`:
  declared columns, whole appended lines, resume keeps the rows a checkpoint
  has seen) and JSON records (:class:`RunWriter`).

pandas is imported only when a frame is built.
"""

from .follow import SETTLED, RunChange, RunFollower, RunFollowers, TableFollower
from .greedy import GREEDY_PERIODIC, greedy_evaluations
from .layout import (
    CHECKPOINT_SUFFIX,
    GREEDY_COLUMNS,
    METRIC_COLUMNS,
    PICKLE_CHECKPOINT_SUFFIX,
    PREDICTED_COLUMN,
    STAGE_NAMES,
    TEXT_COLUMNS,
    VALUE_COLUMNS,
    ZERO_SHOT_FOLDER,
    RunPaths,
    checkpoint_file,
    checkpoint_name,
    pretrained_checkpoint,
    shipped_training_runs,
    zero_shot_checkpoint,
)
from .listing import MAX_DEPTH, RunSummary, is_run, list_runs
from .read import (
    Run,
    read_frame,
    read_meta,
    read_rows,
    read_run,
    reference,
    reference_lines,
    references,
    try_read_json,
)
from .write import CsvLog, RunWriter, format_value

__all__ = [
    "METRIC_COLUMNS",
    "PREDICTED_COLUMN",
    "TEXT_COLUMNS",
    "GREEDY_COLUMNS",
    "VALUE_COLUMNS",
    "STAGE_NAMES",
    "CHECKPOINT_SUFFIX",
    "PICKLE_CHECKPOINT_SUFFIX",
    "ZERO_SHOT_FOLDER",
    "RunPaths",
    "checkpoint_file",
    "checkpoint_name",
    "pretrained_checkpoint",
    "zero_shot_checkpoint",
    "shipped_training_runs",
    "Run",
    "read_rows",
    "read_frame",
    "read_meta",
    "try_read_json",
    "read_run",
    "references",
    "reference",
    "reference_lines",
    "SETTLED",
    "RunChange",
    "RunFollower",
    "RunFollowers",
    "TableFollower",
    "MAX_DEPTH",
    "RunSummary",
    "is_run",
    "list_runs",
    "GREEDY_PERIODIC",
    "greedy_evaluations",
    "CsvLog",
    "RunWriter",
    "format_value",
]
