"""Run a sweep's cells serially, on a local process pool, or on a Ray cluster.

Every engine calls the same :func:`run_cell` (one :func:`workbench.place`,
errors caught and recorded) and hands each finished row back to the driver,
which is the only writer of the results table; :func:`run_tasks` runs any other
independent work (``workbench bench learned``'s cells) on the same engines. Scheduling, retries of lost
workers and fault tolerance are the pool's or Ray's; there is no distribution
layer of our own.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

from ..graph import DataflowGraph
from ..learn.registry import Registration, install_registration, registration
from ..provenance import host, now
from .grid import Cell, SweepConfig, load_config, parse_config
from .results import ResultsTable

__all__ = ["sweep", "run_cell", "run_tasks", "ENGINES"]

MAX_ERROR_CHARS = 500


def run_cell(cell: Cell, graph: DataflowGraph | Mapping[str, Any], registration: Registration | None = None) -> dict[str, Any]:
    """Place ``graph`` (or its ``to_dict()`` form, as shipped to other processes) for one cell.

    ``registration``: the method's registry entries in the driver (:func:`workbench.learn.registry.registration`), so a
    placer or learned policy registered there at run time exists in a worker too. Never raises: a failure becomes
    ``status="error"`` with the error message.
    """
    from ..placers.base import place

    if not isinstance(graph, DataflowGraph):
        graph = DataflowGraph.from_dict(graph)
    if registration is not None:
        install_registration(cell.method, registration)
    row = {**cell.parameters(), "nodes": graph.num_nodes, "edges": graph.num_edges, "host": host()}
    began = time.perf_counter()
    try:
        placement = place(graph, method=cell.method, devices=cell.devices, seed=cell.seed, **dict(cell.options))
    except Exception as exc:  # a failed cell records its error and the sweep goes on
        message = f"{type(exc).__name__}: {exc}".replace("\n", " ")[:MAX_ERROR_CHARS]
        row.update(makespan=None, lower_bound=None, gap=None, seconds=time.perf_counter() - began, status="error", error=message)
        row.update(cpu_seconds=None, evaluations=None)
        row["traceback"] = traceback.format_exc(limit=-3)[-MAX_ERROR_CHARS:]
    else:
        row.update(
            makespan=placement.makespan,
            lower_bound=placement.lower_bound,
            gap=placement.makespan / placement.lower_bound - 1 if placement.lower_bound > 0 else None,
            seconds=placement.seconds,
            cpu_seconds=placement.cpu_seconds,
            evaluations=placement.evaluations,
            status="ok",
            error=None,
        )
    row["finished"] = now()
    return row


def _portable(tasks: list[Task]) -> list[Task]:
    """The tasks with each graph as a plain dict (graphs hold a mappingproxy, which does not pickle), one dict per graph."""
    plain: dict[int, dict[str, Any]] = {}
    for task in tasks:
        for arg in task:
            if isinstance(arg, DataflowGraph) and id(arg) not in plain:
                plain[id(arg)] = arg.to_dict()
    return [tuple(plain.get(id(arg), arg) if isinstance(arg, DataflowGraph) else arg for arg in task) for task in tasks]


Task = tuple[Any, ...]
Engine = Callable[[Callable[..., Any], list[Task], int | None, str | None, bool], Iterator[Any]]


def _serial(function: Callable[..., Any], tasks: list[Task], workers: int | None, address: str | None, progress: bool) -> Iterator[Any]:
    for task in tasks:
        yield function(*task)


def _one_thread_per_worker() -> None:
    # numerical libraries imported later in the worker (torch, BLAS) must not each grab every core
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(name, "1")


def _local(function: Callable[..., Any], tasks: list[Task], workers: int | None, address: str | None, progress: bool) -> Iterator[Any]:
    # spawn: safe with threads (numba, torch) in the driver; children inherit sys.path
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers or os.cpu_count(), mp_context=context, initializer=_one_thread_per_worker)
    pending = {pool.submit(function, *task) for task in _portable(tasks)}
    try:
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield future.result()
    finally:  # on an interrupt, drop queued cells instead of finishing them
        pool.shutdown(wait=True, cancel_futures=True)


def _ray(function: Callable[..., Any], tasks: list[Task], workers: int | None, address: str | None, progress: bool) -> Iterator[Any]:
    """Join the cluster at ``address``, or start a private local instance with ``workers`` CPUs (:mod:`.ray_engine`), now:
    a failure to connect is reported before any progress bar is drawn."""
    results = _ray_results(function, tasks, workers, address, progress)
    next(results)
    return results


def _ray_results(
    function: Callable[..., Any], tasks: list[Task], workers: int | None, address: str | None, progress: bool
) -> Iterator[Any]:
    from .ray_engine import connect

    with connect(address, workers, progress) as ray:
        yield None  # connected
        remote = ray.remote(max_retries=2)(function)
        portable = _portable(tasks)
        counts = Counter(id(arg) for task in portable for arg in task)
        refs: dict[int, Any] = {}  # an argument shared by several tasks (a graph) goes to the object store once
        pending = []
        for task in portable:
            args = []
            for arg in task:
                if counts[id(arg)] > 1 and id(arg) not in refs:
                    refs[id(arg)] = ray.put(arg)
                args.append(refs.get(id(arg), arg))
            pending.append(remote.remote(*args))
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                yield ray.get(done[0])
        finally:
            for ref in pending:
                ray.cancel(ref)


ENGINES: dict[str, Engine] = {"serial": _serial, "local": _local, "ray": _ray}


def run_tasks(
    function: Callable[..., Any],
    tasks: Iterable[Task],
    engine: str = "serial",
    workers: int | None = None,
    address: str | None = None,
    progress: bool = True,
) -> Iterator[Any]:
    """``function(*task)`` for every task on ``engine``, yielded as each finishes (in any order).

    ``function`` must be importable by name (a module-level function) for ``local`` and ``ray``;
    a :class:`DataflowGraph` argument reaches it as its ``to_dict()`` form there. ``workers``: processes
    (``local``) or the CPUs of a private Ray instance; ``address``: a Ray cluster to join instead.
    Stopping the iteration (an interrupt) cancels the tasks not finished.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine: {engine!r} is not one of {', '.join(ENGINES)}")
    return ENGINES[engine](function, list(tasks), workers, address, progress)


def sweep(
    config: SweepConfig | Mapping[str, Any] | str | Path,
    engine: str | None = None,
    out: str | Path | None = None,
    workers: int | None = None,
    address: str | None = None,
    progress: bool = True,
):
    """Run every unfinished cell of ``config`` and return its rows as a pandas DataFrame.

    ``config`` is a YAML/JSON file, a mapping, or a :class:`SweepConfig`; the
    arguments override its ``engine``, ``out``, ``workers`` and ``address``.
    Cells already in the results table with ``status == "ok"`` are skipped (with
    ``progress``, a line on stderr says how many); failed cells are run again.
    The frame's ``attrs["out"]`` is the results table's path.
    """
    if isinstance(config, (str, Path)):
        config = load_config(config)
    elif not isinstance(config, SweepConfig):
        config = parse_config(config)
    engine = engine or ("ray" if address else config.engine)
    if engine not in ENGINES:
        raise ValueError(f"engine: {engine!r} is not one of {', '.join(ENGINES)}")
    if address and engine != "ray":
        raise ValueError(f"--address joins a Ray cluster: it needs --engine ray, not {engine!r}")
    table = ResultsTable(out or config.out)
    cells = config.cells()
    finished = table.finished()
    todo = [cell for cell in cells if cell.key not in finished]
    if progress and len(todo) < len(cells):
        print(f"{config.name}: {len(cells) - len(todo)} of {len(cells)} cells already in {table.path}, skipped", file=sys.stderr)
    if todo:
        from ..progress import progress_bar

        graphs = {cell.graph.label: cell.graph for cell in todo}
        loaded = {label: spec.load() for label, spec in graphs.items()}
        tasks = [(cell, loaded[cell.graph.label], registration(cell.method)) for cell in todo]
        rows = run_tasks(run_cell, tasks, engine, workers or config.workers, address or config.address, progress)
        bar = progress_bar(total=len(cells), initial=len(cells) - len(todo), desc=config.name, unit="cell", disable=not progress)
        errors = 0
        try:
            for row in rows:
                table.add(row)
                errors += row["status"] != "ok"
                bar.set_postfix(errors=errors, refresh=False)
                bar.update()
        finally:
            bar.close()
    frame = table.frame([cell.key for cell in cells])
    frame.attrs["out"] = str(table.path)
    return frame
