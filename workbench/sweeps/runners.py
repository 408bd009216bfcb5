"""Run a sweep's cells serially, on a local process pool, or on a Ray cluster.

Every engine calls the same :func:`run_cell` (one :func:`workbench.place`,
errors caught and recorded) and hands each finished row back to the driver,
which is the only writer of the results table. Scheduling, retries of lost
workers and fault tolerance are the pool's or Ray's; there is no distribution
layer of our own.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

from ..graph import DataflowGraph
from ..provenance import now
from .grid import Cell, SweepConfig, load_config, parse_config
from .results import ResultsTable

__all__ = ["sweep", "run_cell"]

MAX_ERROR_CHARS = 500


def run_cell(cell: Cell, graph: DataflowGraph | Mapping[str, Any], registry_entry: tuple[str, str, str] | None = None) -> dict[str, Any]:
    """Place ``graph`` (or its ``to_dict()`` form, as shipped to other processes) for one cell.

    Never raises: a failure becomes ``status="error"`` with the error message.
    """
    from ..placers.base import REGISTRY, place

    if not isinstance(graph, DataflowGraph):
        graph = DataflowGraph.from_dict(graph)
    if registry_entry is not None:  # placers registered at run time in the driver exist here too
        REGISTRY.setdefault(cell.method, registry_entry)
    row = {**cell.parameters(), "nodes": graph.num_nodes, "edges": graph.num_edges, "host": socket.gethostname()}
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


Task = tuple[Cell, DataflowGraph, Any]


def _portable(tasks: list[Task]) -> list[Task]:
    """The tasks with each graph as a plain dict (graphs hold a mappingproxy, which does not pickle)."""
    plain: dict[int, dict[str, Any]] = {}
    for _, graph, _ in tasks:
        if id(graph) not in plain:
            plain[id(graph)] = graph.to_dict()
    return [(cell, plain[id(graph)], entry) for cell, graph, entry in tasks]


def _serial(tasks: list[Task], workers: int | None, address: str | None) -> Iterator[dict[str, Any]]:
    for task in tasks:
        yield run_cell(*task)


def _one_thread_per_worker() -> None:
    # numerical libraries imported later in the worker (torch, BLAS) must not each grab every core
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(name, "1")


def _local(tasks: list[Task], workers: int | None, address: str | None) -> Iterator[dict[str, Any]]:
    # spawn: safe with threads (numba, torch) in the driver; children inherit sys.path
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers or os.cpu_count(), mp_context=context, initializer=_one_thread_per_worker)
    pending = {pool.submit(run_cell, *task) for task in _portable(tasks)}
    try:
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield future.result()
    finally:  # on an interrupt, drop queued cells instead of finishing them
        pool.shutdown(wait=True, cancel_futures=True)


def _ray(tasks: list[Task], workers: int | None, address: str | None) -> Iterator[dict[str, Any]]:
    """Join the cluster at ``address`` (whose workers must have this workbench installed), or start a
    private local instance with ``workers`` CPUs; shut down only an instance this call started."""
    try:
        import ray
    except ImportError:
        raise ValueError("engine 'ray' needs Ray: pip install 'doppler-workbench[sweeps]'") from None
    started = not ray.is_initialized()
    if started:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:  # a private local instance that imports this same workbench checkout
            package_root = str(Path(__file__).resolve().parents[2])
            ray.init(
                num_cpus=workers or os.cpu_count(),
                include_dashboard=False,
                log_to_driver=False,
                runtime_env={"env_vars": {"PYTHONPATH": package_root}},
            )
    try:
        remote = ray.remote(max_retries=2)(run_cell)
        graph_refs: dict[int, Any] = {}  # each graph goes to the object store once
        pending = []
        for cell, graph, entry in _portable(tasks):
            if id(graph) not in graph_refs:
                graph_refs[id(graph)] = ray.put(graph)
            pending.append(remote.remote(cell, graph_refs[id(graph)], entry))
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                yield ray.get(done[0])
        finally:
            for ref in pending:
                ray.cancel(ref)
    finally:
        if started:
            ray.shutdown()


ENGINES: dict[str, Callable[[list[Task], int | None, str | None], Iterable[dict[str, Any]]]] = {
    "serial": _serial,
    "local": _local,
    "ray": _ray,
}


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
    table = ResultsTable(out or config.out)
    cells = config.cells()
    finished = table.finished()
    todo = [cell for cell in cells if cell.key not in finished]
    if progress and len(todo) < len(cells):
        print(f"{config.name}: {len(cells) - len(todo)} of {len(cells)} cells already in {table.path}, skipped", file=sys.stderr)
    if todo:
        from ..placers.base import REGISTRY
        from ..progress import progress_bar

        graphs = {cell.graph.label: cell.graph for cell in todo}
        loaded = {label: spec.load() for label, spec in graphs.items()}
        tasks = [(cell, loaded[cell.graph.label], REGISTRY.get(cell.method)) for cell in todo]
        bar = progress_bar(total=len(cells), initial=len(cells) - len(todo), desc=config.name, unit="cell", disable=not progress)
        errors = 0
        try:
            for row in ENGINES[engine](tasks, workers or config.workers, address or config.address):
                table.add(row)
                errors += row["status"] != "ok"
                bar.set_postfix(errors=errors, refresh=False)
                bar.update()
        finally:
            bar.close()
    frame = table.frame([cell.key for cell in cells])
    frame.attrs["out"] = str(table.path)
    return frame
