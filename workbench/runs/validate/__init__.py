"""Checking a run directory before it is resumed: every field of every file, against the run's plan and each other.

``workbench train`` resumes a run from its newest checkpoint. Before anything
is written, :func:`check_run` reads ``metrics.csv``, ``greedy.csv``,
``meta.json`` and ``best/`` and checks each field for its type and range and
the files against each other and against the :class:`RunPlan` (what the
run's config says each episode trains, and when it evaluates). A damaged
directory is refused with a :class:`RunDamaged` naming the file, the line
(CSV) and the field; nothing is changed. What it returns says where each
table is cut (:class:`RunCheck`): only the rows of episodes the checkpoint has
not seen (they are replayed) go, by truncation, so every earlier byte stays.

``status`` in ``meta.json`` is not trusted but checked against the files: a
run is ``finished`` only when its newest checkpoint is at the last episode
and ``meta.json`` holds the final evaluation, ``diverged`` only with the
episode and the reason. No torch: ``best/`` is checked with the placement
file reader and re-simulated (:mod:`workbench.placers`, :mod:`workbench.sim`,
imported when used).
"""

from .best import best_folder, best_subdir, check_best
from .common import STATUSES, RunDamaged, damaged, read_json_object
from .train_run import Progress, RunCheck, RunPlan, check_greedy, check_meta, check_metrics, check_run
from .trainers import GATE_SELECTION, GATE_STAGE, Column, CorpusPlan, GatePlan, TrainerCheck, check_corpus_run, check_gate_run, check_table

__all__ = [
    "RunDamaged",
    "RunPlan",
    "Progress",
    "RunCheck",
    "STATUSES",
    "check_run",
    "check_metrics",
    "check_greedy",
    "check_meta",
    "check_best",
    "best_folder",
    "best_subdir",
    "read_json_object",
    "damaged",
    "Column",
    "check_table",
    "CorpusPlan",
    "TrainerCheck",
    "check_corpus_run",
    "GatePlan",
    "check_gate_run",
    "GATE_SELECTION",
    "GATE_STAGE",
]
