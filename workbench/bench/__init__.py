"""Benchmarks behind ``workbench bench NAME``: speed figures live here, not in timed tests.

Each benchmark is a module with ``run(quick: bool) -> dict`` returning JSON-ready
results (including a ``"markdown"`` table) and registered in ``BENCHMARKS``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from ..provenance import machine

__all__ = ["BENCHMARKS", "get_benchmark", "machine"]

BENCHMARKS: dict[str, tuple[str, str]] = {
    "sim": ("workbench.bench.sim", "fast vs SimPy engine per evaluation, and batch throughput, on the paper graphs"),
    "dashboard": ("workbench.bench.charts", "dashboard charts: build time, JSON size and browser draw time as graphs grow"),
    "generators": (
        "workbench.bench.generators",
        "generated paper families vs the bundled graphs; import speed of a GPT with thousands of ops",
    ),
    "placers": ("workbench.bench.placers", "every placement method on the paper graphs (makespan, seconds) and its gap to the STG optima"),
    "episode": (
        "workbench.bench.episode",
        "learned policies: inference and training-episode (rollout + REINFORCE update) seconds per paper graph",
    ),
    "systems": (
        "workbench.bench.systems",
        "real-system backend: executor overhead per op, runtime fidelity vs the simulator, kernel sizing, remote round trips",
    ),
    "training": (
        "workbench.bench.training",
        "training quality: Doppler, Placeto and GDP (3 seeds each) after Stages I+II at the paper's budget "
        "vs heuristics and local search (resumable, hours)",
    ),
    "learned": (
        "workbench.bench.learned",
        "learned_search vs local_search at 200/500/2,000 evaluations on the corpus's test split and the paper graphs (resumable)",
    ),
    "runs": (
        "workbench.bench.runs",
        "the run reader (workbench.runs) on a 300,000-episode metrics.csv: frame, rows and whole run, plain and quoted graph paths",
    ),
    "search": (
        "workbench.bench.search",
        "local_search's compiled loop vs its Python loop, alternated in one run: evaluations per CPU second, same trajectory",
    ),
    "lsearch": (
        "workbench.bench.lsearch",
        "learned_search's CPU seconds at 10,000 ops and budget 1,000 (focus all vs auto) and per evaluation on the paper graphs",
    ),
    "ties": (
        "workbench.bench.ties",
        "how much ties matter: each list-scheduling heuristic under id, ready and random tie orders, and ties=K",
    ),
    "zeroshot": (
        "workbench.bench.zeroshot",
        "the shipped zero-shot policy's CPU seconds and peak memory at 20,000 and 100,000 ops, each in a fresh process",
    ),
    "scale": (
        "workbench.bench.scale",
        "time and peak memory against graph size (100 to 10,000 ops) for the simulator, heuristics, local search and policy inference; "
        "heuristics' CPU growth from 10,000 to 100,000 ops",
    ),
}


def get_benchmark(name: str) -> Callable[..., dict[str, Any]]:
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
    return importlib.import_module(BENCHMARKS[name][0]).run
