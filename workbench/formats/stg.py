"""The Standard Task Graph Set format (Kasahara lab): one task per line, dummy entry and exit tasks checked then dropped."""

from __future__ import annotations

import re
from array import array
from contextlib import closing
from pathlib import Path

import numpy as np

from ..graph import MAX_COST, DataflowGraph
from .files import COUNT, GraphFormatError, build_graph, check_size, read_lines

_INTEGER = re.compile(r"-?[0-9]+")
_WORD = re.compile(r"\S+")


def _stg_numbers(path: Path, lineno: int, fields: list[str]) -> list[int]:
    bad = next((x for x in fields if not _INTEGER.fullmatch(x)), None)
    if bad is not None:
        raise GraphFormatError(path, f"{bad[:40]!r} is not an integer (plain ASCII digits)", lineno)
    long = next((x for x in fields if len(x) > 30), None)
    if long is not None:
        raise GraphFormatError(path, f"number {long[:20]}... has {len(long)} digits, too large", lineno)
    return [int(x) for x in fields]


def _stg_count(path: Path, lineno: int, stripped: str) -> int:
    """The task count of an STG file's first line; at least one task, at most :data:`MAX_NODES`."""
    if len(stripped.split(None, 1)) != 1 or not COUNT.fullmatch(stripped):
        raise GraphFormatError(path, f"the first line must be the task count, got {stripped[:40]!r}", lineno)
    n = int(stripped)
    if n == 0:
        raise GraphFormatError(path, "0 tasks: no task to schedule", lineno)
    check_size(path, lineno, n)
    return n


def _stg_task(path: Path, lineno: int, stripped: str, n: int) -> tuple[int, int, list[int]]:
    """``(task, cost, predecessors)`` of one task line of an STG file of ``n`` tasks, each checked."""
    fields = stripped.split(None, 3)
    numbers = _stg_numbers(path, lineno, fields[:3])
    if len(numbers) < 3:
        raise GraphFormatError(path, "a task line needs 'id cost num_predecessors [predecessors...]'", lineno)
    task, task_cost, count = numbers
    if not 0 <= task <= n + 1:
        raise GraphFormatError(path, f"task id {task} outside 0..{n + 1}", lineno)
    if task_cost < 0:
        raise GraphFormatError(path, f"negative cost {task_cost} for task {task}", lineno)
    if task_cost > MAX_COST:
        raise GraphFormatError(path, f"cost {task_cost} of task {task} is more than the {MAX_COST:g} allowed", lineno)
    if count > n + 1:
        raise GraphFormatError(path, f"task {task} declares {count} predecessors, more than the {n + 1} other tasks", lineno)
    limit = max(count, 0)
    listed = fields[3].split(None, limit) if len(fields) == 4 else []  # at most count + 1 pieces, whatever the line holds
    if len(listed) != count:
        shown = len(listed) if len(listed) <= limit else limit + _WORD.subn("", listed[-1])[1]
        raise GraphFormatError(path, f"task {task} declares {count} predecessors but lists {shown}", lineno)
    pred = _stg_numbers(path, lineno, listed)
    bad = [p for p in pred if not 0 <= p <= n + 1]
    if bad:
        raise GraphFormatError(path, f"predecessor {bad[0]} of task {task} outside 0..{n + 1}", lineno)
    if task == 0 and pred:
        raise GraphFormatError(path, f"the dummy entry task 0 lists predecessor {pred[0]}; it must have none", lineno)
    if n + 1 in pred:
        raise GraphFormatError(path, f"task {task} lists the dummy exit task {n + 1} as a predecessor; no task may follow it", lineno)
    return task, task_cost, pred


def read_stg(path: Path) -> DataflowGraph:
    """The Standard Task Graph Set format, read a line at a time; the dummy entry and exit tasks are checked, then dropped.

    Task 0 (the entry) may have no predecessor and task ``n + 1`` (the exit) may
    precede no task, so no cycle or self-loop can pass through them.
    """
    n = 0
    first_line = last_line = tasks = 0
    cost = seen = np.zeros(0)
    src, dst = array("q"), array("q")
    with closing(read_lines(path)) as lines:
        for lineno, text in lines:
            stripped = text.strip()
            if not stripped:
                continue
            if stripped.startswith("#"):
                break
            if not first_line:
                n, first_line = _stg_count(path, lineno, stripped), lineno
                cost, seen = np.zeros(n + 2), np.zeros(n + 2, dtype=np.int64)
                continue
            tasks, last_line = tasks + 1, lineno
            if tasks > n + 2:
                raise GraphFormatError(path, f"more task lines than the {n + 2} expected ({n} tasks plus dummy entry and exit)", lineno)
            task, task_cost, pred = _stg_task(path, lineno, stripped, n)
            if seen[task]:
                raise GraphFormatError(path, f"duplicate task id {task} (first on line {seen[task]})", lineno)
            seen[task], cost[task] = lineno, task_cost
            if 1 <= task <= n:
                real = [p - 1 for p in pred if p >= 1]
                src.extend(real)
                dst.extend([task - 1] * len(real))
                check_size(path, lineno, n, len(src))
    if not first_line:
        raise GraphFormatError(path, "no task count line", 1)
    if tasks != n + 2:
        raise GraphFormatError(path, f"{tasks} task lines, expected {n + 2} ({n} tasks plus dummy entry and exit)", last_line or first_line)
    for t in (0, n + 1):
        if cost[t] != 0:
            raise GraphFormatError(path, f"dummy task {t} must have cost 0, has {cost[t]:g}", int(seen[t]))
    order = np.argsort(np.frombuffer(dst, dtype=np.int64), kind="stable")  # by task, each task's predecessors in file order
    edges = np.frombuffer(src, dtype=np.int64)[order], np.frombuffer(dst, dtype=np.int64)[order]
    del order, src, dst  # the reader's buffers go before the graph makes its own copies
    return build_graph(
        path,
        lambda error: int(seen[error.op + 1]) if error.op is not None else None,
        compute=cost[1 : n + 1],
        src=edges[0],
        dst=edges[1],
        comm=np.zeros(edges[0].size),
        names=tuple(f"t{t}" for t in range(1, n + 1)),
        metadata={"format": "stg", "name": path.stem},
    )
