"""``workbench bench runs``: how fast the one run reader (:mod:`workbench.runs`) reads a long training run.

A ``metrics.csv`` of 300,000 episodes (``--quick``: 30,000) is written through
:class:`~workbench.runs.CsvLog`, once with a bundled graph's name in every row
and once with a graph path holding a comma (a quoted field) in every row. Each
is read back (once untimed, then three times) by :func:`~workbench.runs.read_frame` (the frame the
dashboard and the notebooks chart), :func:`~workbench.runs.read_rows` (strings,
as the export and the benchmarks read them) and :func:`~workbench.runs.read_run`
(the whole run directory, as the Training page reads it); the medians of wall
and CPU seconds are reported.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..runs import METRIC_COLUMNS, CsvLog, RunPaths, RunWriter, read_frame, read_rows, read_run

GRAPHS = {"graph name": "chain_mm_112nodes", "graph path with a comma": "runs/a,b/graph.json"}
REPEATS = 3
READERS: dict[str, Callable[[Path], Any]] = {
    "read_frame": lambda folder: read_frame(RunPaths(folder).metrics_path),
    "read_rows": lambda folder: read_rows(RunPaths(folder).metrics_path),
    "read_run": lambda folder: read_run(folder).metrics,
}
"""Each reader of a run folder, giving its ``metrics.csv`` rows."""


def write_run(folder: Path, graph: str, episodes: int) -> None:
    """A finished-looking run directory whose ``metrics.csv`` holds ``episodes`` rows on ``graph``."""
    run = RunWriter(folder)
    folder.mkdir(parents=True)
    run.write_meta({"status": "finished", "method": "doppler", "graphs": [graph], "devices": 4, "stages": ["il", "sim"]})
    with CsvLog(run.metrics_path, METRIC_COLUMNS) as log:
        log.start()
        for first in range(0, episodes, 10_000):
            log.append(
                {
                    "stage": "il" if e < episodes // 3 else "sim",
                    "episode": e,
                    "graph": graph,
                    "makespan": 1e13 * (1 + 1 / (e + 1)),
                    "reward": -1.0 - 1 / (e + 1),
                    "loss": 0.5 / (e + 1),
                    "lr": 1e-4,
                    "seconds": 0.01 * e,
                    "oracle": "sim",
                }
                for e in range(first, min(first + 10_000, episodes))
            )


def _timed(read: Callable[[Path], Any], folder: Path, episodes: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``read(folder)`` over :data:`REPEATS` calls after one untimed call (imports, caches);
    each must give every row back."""
    read(folder)
    walls, cpus = [], []
    for _ in range(REPEATS):
        wall, cpu = time.perf_counter(), time.process_time()
        found = read(folder)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        if len(found) != episodes:
            raise RuntimeError(f"read {len(found)} rows of {episodes}")
    return statistics.median(walls), statistics.median(cpus)


def run(quick: bool = False) -> dict[str, Any]:
    """Time the readers on a written run of 300,000 episodes (30,000 with ``quick``)."""
    episodes = 30_000 if quick else 300_000
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for label, graph in GRAPHS.items():
            folder = Path(scratch) / label.replace(" ", "-")
            write_run(folder, graph, episodes)
            size = RunPaths(folder).metrics_path.stat().st_size / 1e6
            for reader, read in READERS.items():
                wall, cpu = _timed(read, folder, episodes)
                rows.append({"file": label, "reader": reader, "megabytes": size, "wall": wall, "cpu": cpu})
    lines = [
        f"metrics.csv of {episodes:,} episodes, median of {REPEATS} reads",
        "",
        "| file | reader | MB | wall s | CPU s |",
        "|---|---|---:|---:|---:|",
        *(f"| {r['file']} | {r['reader']} | {r['megabytes']:.1f} | {r['wall']:.2f} | {r['cpu']:.2f} |" for r in rows),
    ]
    return {"episodes": episodes, "rows": rows, "markdown": "\n".join(lines)}
