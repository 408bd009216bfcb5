"""Learned placement against the fair baseline, at equal evaluations and at equal CPU time, measured in one run.

The fair baseline is local_search from the best of every one-pass method
(the literature heuristics, this workbench's rules such as ``affinity``, the
baselines; one counted evaluation each, :mod:`workbench.placers.best_constructive`),
and ``best_constructive`` itself is reported. Graphs: the corpus's test split
(generated graphs), the paper's four graphs, and the corpus's large split
(1,500–20,000 ops); devices 4, 8 and 16 (the large split: 8 and 16).

Per graph and device count, once: ``best_constructive`` and ``zero_shot``
(the shipped zero-shot gate policy's greedy placement: one pass, one
counted evaluation). Per seed (0–4) and budget (200, 500 and 2,000 evaluations, the
starts included): ``local_search``, ``learned_search`` (the shipped move
scorer) and ``learned_search+zs`` (the same, with the zero-shot policy's
placement as one more start). The methods of one (graph, devices, seed,
budget) run one after the other, so every comparison is measured in the same
run on the same machine state. Each cell records the makespan, wall and
process CPU seconds, the evaluations counted and the any-time curve
(``[evaluation, best so far, CPU seconds]``), cached in
``runs/bench-learned/fair.json`` (rewritten atomically after each), so an
interrupted run resumes where it stopped. ``engine="local"`` or ``"ray"``
(``workbench bench learned --engine ... --address ...``, docs/sweeps.md) measures
the cells concurrently on a process pool, a private Ray instance or a Ray cluster,
with the same makespans and evaluations.

Tables: each learned method ÷ fair local_search at equal evaluations (mean
over seeds, then mean, range and wins / ties / losses over graphs); at equal
CPU time (each learned search's best so far at the CPU seconds local_search
spent on its whole budget, ÷ local_search's makespan, per seed); the CPU
cost ratio; and the zero-shot policy ÷ best_constructive.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..fileio import atomic_write_json
from ..runs import zero_shot_checkpoint

ROOT = Path("runs") / "bench-learned"
CACHE = "fair.json"
BUDGETS = (200, 500, 2000)
SEEDS = (0, 1, 2, 3, 4)
SPLIT_DEVICES = {"test": (4, 8, 16), "paper": (4, 8, 16), "large": (8, 16)}
"""The graph sets measured, each at its device counts: the corpus test split's generated graphs, the paper's four, the large split."""
LOCAL_SEARCH = "local_search"
BEST_CONSTRUCTIVE = "best_constructive"
ZERO_SHOT = "zero_shot"
LEARNED = ("learned_search", "learned_search+zs")
SEARCHES = (LOCAL_SEARCH, *LEARNED)
ONE_PASS = (BEST_CONSTRUCTIVE, ZERO_SHOT)
CPU_BUDGET = 500
"""The budget whose local_search CPU seconds set the equal-CPU comparison."""
UNIT = 1e10


class Cell(NamedTuple):
    """One measurement: a method on one graph at one device count, seed and budget (0 for the one-pass methods)."""

    split: str
    graph: str
    devices: int
    method: str
    seed: int
    budget: int

    @property
    def key(self) -> str:
        return "|".join(map(str, self[1:]))


def _graph_sets(quick: bool, splits: Iterable[str]) -> dict[str, list[Any]]:
    """The corpus entries of each split measured (``paper``: the test split's paper family)."""
    from .. import corpus

    test = [e for e in corpus.entries("test") if e.family != "zoo"]
    sets = {
        "test": [e for e in test if e.family != "paper"],
        "paper": [e for e in test if e.family == "paper"],
        "large": corpus.entries("large"),
    }
    if quick:
        sets = {"test": sets["test"][:1], "paper": sets["paper"][:1], "large": []}
    return {name: sets[name] for name in splits}


def cells(
    quick: bool = False, splits: Iterable[str] = tuple(SPLIT_DEVICES), budgets: Iterable[int] = BUDGETS, seeds: Iterable[int] = SEEDS
) -> list[Cell]:
    """Every cell, in the order measured: split by split, the one-pass methods first, then by budget and seed (a partial run
    spans every graph of a split), the searches of one (graph, devices, seed, budget) together."""
    budgets, seeds = ((200,), (0,)) if quick else (tuple(budgets), tuple(seeds))
    out: list[Cell] = []
    for split, entries in _graph_sets(quick, splits).items():
        devices = (4,) if quick else SPLIT_DEVICES[split]
        cases = [(e.name, d) for e in entries for d in devices]
        out += [Cell(split, g, d, m, 0, 0) for g, d in cases for m in ONE_PASS]
        out += [Cell(split, g, d, m, s, b) for b in budgets for s in seeds for g, d in cases for m in SEARCHES]
    return out


def measure(graph: Any, cell: Cell) -> dict[str, Any]:
    """Place ``graph`` as ``cell`` says; makespan, wall and CPU seconds, evaluations and the any-time curve."""
    from ..placers import place

    options: dict[str, Any] = {}
    method = cell.method
    if method == ZERO_SHOT:
        method, options = "doppler_plc_only", {"checkpoint": zero_shot_checkpoint()}
    elif method in SEARCHES:
        options = {"budget": cell.budget}
        if method == "learned_search+zs":
            method, options["start_policy"] = "learned_search", zero_shot_checkpoint()
    began = time.perf_counter()
    placement = place(graph, method=method, devices=cell.devices, seed=cell.seed, **options)
    return {
        "makespan": float(placement.makespan),
        "seconds": time.perf_counter() - began,
        "cpu_seconds": placement.cpu_seconds,
        "evaluations": placement.evaluations,
        "anytime": placement.details.get("anytime", []),
    }


def measure_task(graph: Any, cell: Cell) -> tuple[str, dict[str, Any]]:
    """One cell as an engine's task (:func:`workbench.sweeps.run_tasks`): the graph may come as its ``to_dict()`` form; torch on
    one thread in the process that measures."""
    from ..graph import DataflowGraph

    _single_thread()
    return cell.key, measure(graph if isinstance(graph, DataflowGraph) else DataflowGraph.from_dict(graph), cell)


def run(
    quick: bool = False,
    root: Path | None = None,
    splits: Iterable[str] = tuple(SPLIT_DEVICES),
    engine: str = "serial",
    workers: int | None = None,
    address: str | None = None,
) -> dict[str, Any]:
    """Measure every cell not cached under ``root`` yet, then tabulate.

    ``engine``: ``serial`` (default: one process, one thread, so that CPU seconds then mean one core and the methods of
    one comparison run back to back), ``local`` (a pool of ``workers`` processes) or ``ray`` (a private instance with
    ``workers`` CPUs, or the cluster at ``address``); cells run concurrently there, each on one thread, and each is cached
    as it finishes, so an interrupted run resumes on any engine. Makespans and evaluations do not depend on the engine.
    """
    import sys
    import tempfile

    from .. import corpus
    from ..progress import progress_bar
    from ..sweeps import run_tasks

    _single_thread()
    root = Path(root or (tempfile.mkdtemp(prefix="bench-learned-") if quick else ROOT))
    path = root / CACHE
    cached: dict[str, dict[str, Any]] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    chosen = cells(quick, splits)
    entries = {e.name: e for e in corpus.entries()}
    todo = [c for c in chosen if c.key not in cached]
    if len(todo) < len(chosen):
        print(f"bench learned: {len(chosen) - len(todo)} of {len(chosen)} cells already in {path}, skipped", file=sys.stderr)
    graphs = {name: corpus.build(entries[name]) for name in dict.fromkeys(c.graph for c in todo)}
    tasks = [(graphs[c.graph], c) for c in todo]
    for key, result in progress_bar(
        run_tasks(measure_task, tasks, engine, workers, address), total=len(todo), desc="bench learned", unit="cell"
    ):
        cached[key] = result
        atomic_write_json(path, cached)
    results = {c.key: cached[c.key] for c in chosen}
    return {"benchmark": "learned", "quick": quick, "root": str(root), "cells": results, "markdown": markdown(chosen, results)}


def report(
    root: Path | None = None, splits: Iterable[str] = tuple(SPLIT_DEVICES), budgets: Iterable[int] = BUDGETS, seeds: Iterable[int] = SEEDS
) -> str:
    """The tables of the cells cached under ``root`` so far, for the (graph, devices) pairs whose every cell at ``budgets``
    and ``seeds`` is measured (a run still going, or stopped, tabulated without measuring anything)."""
    path = Path(root or ROOT) / CACHE
    cached: dict[str, dict[str, Any]] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    chosen = cells(False, splits, budgets, seeds)
    missing = {(c.graph, c.devices) for c in chosen if c.key not in cached}
    chosen = [c for c in chosen if (c.graph, c.devices) not in missing]
    if not chosen:
        return "no (graph, devices) pair is measured at every chosen budget and seed yet"
    return markdown(chosen, {c.key: cached[c.key] for c in chosen})


def _single_thread() -> None:
    """Torch on one thread, so that CPU seconds and wall seconds tell the same story on a shared machine."""
    try:
        import torch
    except ImportError:  # pragma: no cover - the learn extra is required by the learned methods anyway
        return
    torch.set_num_threads(1)


def best_at(anytime: list[list[float]], cpu_seconds: float) -> float:
    """The best makespan an any-time curve had reached by ``cpu_seconds`` (its first point when it had none yet: the
    starts' evaluation is where every search begins)."""
    points = np.asarray(anytime, dtype=float).reshape(len(anytime), -1)
    reached = points[points[:, 2] <= cpu_seconds]
    return float(reached[-1, 1] if reached.size else points[0, 1])


def search_rate(anytime: list[list[float]]) -> float:
    """Evaluations per CPU second between a search's first any-time point (its starts scored) and its last."""
    first, last = anytime[0], anytime[-1]
    return (last[0] - first[0]) / max(last[2] - first[2], 1e-9)


class Table:
    """The cached results grouped for the tables: per split and devices, the graphs measured."""

    def __init__(self, chosen: list[Cell], results: dict[str, dict[str, Any]]) -> None:
        self.results = results
        self.cases: dict[tuple[str, int], list[str]] = {}
        for c in chosen:
            graphs = self.cases.setdefault((c.split, c.devices), [])
            if c.graph not in graphs:
                graphs.append(c.graph)
        self.budgets = sorted({c.budget for c in chosen if c.budget})
        self.seeds = sorted({c.seed for c in chosen if c.budget})

    def value(self, graph: str, devices: int, method: str, seed: int = 0, budget: int = 0, field: str = "makespan") -> Any:
        return self.results[Cell("", graph, devices, method, seed, budget).key][field]

    def per_graph(self, graphs: list[str], per_seed: Callable[[str, int], float]) -> np.ndarray:
        """``per_seed(graph, seed)`` averaged over the seeds, one value per graph."""
        return np.array([np.mean([per_seed(g, s) for s in self.seeds]) for g in graphs])


def _summary(ratios: np.ndarray) -> str:
    wins, losses = int(np.sum(ratios < 1 - 1e-9)), int(np.sum(ratios > 1 + 1e-9))
    return f"{ratios.mean():.3f} ({ratios.min():.2f}–{ratios.max():.2f}; {wins}/{ratios.size - wins - losses}/{losses})"


def markdown(chosen: list[Cell], results: dict[str, dict[str, Any]]) -> str:
    """The tables of the module docstring."""
    t = Table(chosen, results)
    lines: list[str] = []
    if t.budgets:  # the searches (none when only the one-pass methods were asked for)
        seeds = f"seeds {t.seeds[0]}–{t.seeds[-1]}" if len(t.seeds) > 1 else f"seed {t.seeds[0]}"
        lines += [
            f"Each learned search ÷ fair local_search (from the best one-pass method) at equal evaluations; mean over {seeds}, then "
            "mean (min–max; wins/ties/losses) over graphs. best_constructive ÷ local_search for scale.",
            "",
            "| graphs | devices | method | " + " | ".join(f"{b} evaluations" for b in t.budgets) + " |",
            "|---|---|---|" + "---|" * len(t.budgets),
        ]
        for (split, devices), graphs in t.cases.items():
            for method in (*LEARNED, BEST_CONSTRUCTIVE):
                row = []
                for b in t.budgets:

                    def ratio(g: str, seed: int, d: int = devices, m: str = method, b: int = b) -> float:
                        mine = t.value(g, d, m) if m == BEST_CONSTRUCTIVE else t.value(g, d, m, seed, b)
                        return mine / t.value(g, d, LOCAL_SEARCH, seed, b)

                    row.append(_summary(t.per_graph(graphs, ratio)))
                lines.append(f"| {split} ({len(graphs)}) | {devices} | {method} | " + " | ".join(row) + " |")
    if CPU_BUDGET in t.budgets:
        lines += [
            "",
            f"Equal CPU time: each learned search's best so far at the CPU seconds fair local_search spent on {CPU_BUDGET} evaluations "
            f"(its whole run), ÷ local_search's makespan; and its CPU seconds ÷ local_search's, both at {CPU_BUDGET} evaluations",
            "",
            "| graphs | devices | method | makespan at equal CPU | CPU cost |",
            "|---|---|---|---|---|",
        ]
        for (split, devices), graphs in t.cases.items():
            for method in LEARNED:

                def at_cpu(g: str, seed: int, d: int = devices, m: str = method) -> float:
                    limit = t.value(g, d, LOCAL_SEARCH, seed, CPU_BUDGET, "cpu_seconds")
                    reached = best_at(t.value(g, d, m, seed, CPU_BUDGET, "anytime"), limit)
                    return reached / t.value(g, d, LOCAL_SEARCH, seed, CPU_BUDGET)

                def cost(g: str, seed: int, d: int = devices, m: str = method) -> float:
                    return t.value(g, d, m, seed, CPU_BUDGET, "cpu_seconds") / t.value(g, d, LOCAL_SEARCH, seed, CPU_BUDGET, "cpu_seconds")

                costs = t.per_graph(graphs, cost)
                lines.append(
                    f"| {split} ({len(graphs)}) | {devices} | {method} | {_summary(t.per_graph(graphs, at_cpu))} | {costs.mean():.2f}× |"
                )
    if t.budgets:
        from .. import corpus

        nodes = {e.name: e.nodes for e in corpus.entries()}
        budget = max(t.budgets)
        lines += [
            "",
            f"local_search's speed: evaluations per CPU second after its starts were built and scored, at {budget} evaluations "
            "(median over graphs and seeds; min–max)",
            "",
            "| graphs | devices | ops (median) | evaluations / CPU s |",
            "|---|---|---|---|",
        ]
        for (split, devices), graphs in t.cases.items():
            rates = np.array([search_rate(t.value(g, devices, LOCAL_SEARCH, s, budget, "anytime")) for g in graphs for s in t.seeds])
            ops = int(np.median([nodes[g] for g in graphs]))
            lines.append(
                f"| {split} ({len(graphs)}) | {devices} | {ops:,} | {np.median(rates):,.0f} ({rates.min():,.0f}–{rates.max():,.0f}) |"
            )
    lines += [
        *([""] if lines else []),
        "Zero-shot (one pass, one evaluation) ÷ best_constructive (one evaluation per one-pass method); guarded: the better of the "
        "two (zero_shot with guard=True); the most CPU seconds of each",
        "",
        "| graphs | devices | zero_shot ÷ best_constructive | worst cell | guarded ÷ best_constructive | zero_shot CPU s "
        "| best_constructive CPU s |",
        "|---|---|---|---|---|---|---|",
    ]
    for (split, devices), graphs in t.cases.items():
        ratios = np.array([t.value(g, devices, ZERO_SHOT) / t.value(g, devices, BEST_CONSTRUCTIVE) for g in graphs])
        zero_shot_cpu = max(t.value(g, devices, ZERO_SHOT, field="cpu_seconds") for g in graphs)
        constructive_cpu = max(t.value(g, devices, BEST_CONSTRUCTIVE, field="cpu_seconds") for g in graphs)
        worst = f"{ratios.max():.3f} ({graphs[int(np.argmax(ratios))]})"
        guarded = _summary(np.minimum(ratios, 1.0))
        cpu = f"{zero_shot_cpu:.2f} | {constructive_cpu:.2f}"
        lines.append(f"| {split} ({len(graphs)}) | {devices} | {_summary(ratios)} | {worst} | {guarded} | {cpu} |")
    return "\n".join(lines)


def validate(variants: dict[str, dict[str, Any]], budget: int, seeds: int = 5, root: Path | None = None, split: str = "validation") -> str:
    """learned_search's options tuned on the corpus's validation split (or the training split), never the test split.

    Each variant (a name and learned_search's options) and local_search place every
    graph of ``split`` at 4 and 8 devices with seeds ``0 .. seeds-1`` at ``budget``
    evaluations; cells are cached in ``root/validation.json`` under the variant's
    options completed with learned_search's defaults (a later change of defaults
    does not reuse them). Returns a markdown table of each variant's makespan ÷
    local_search's, mean over seeds then graphs.
    """
    from .. import corpus
    from ..learn.learned_search import LearnedSearchPlacer
    from ..placers import place
    from ..sim import simulate

    devices_measured = (4, 8)

    def resolved(options: dict[str, Any]) -> dict[str, Any]:
        placer = LearnedSearchPlacer(budget=budget, **options)
        steering = {"share": placer.share, "temperature": placer.temperature, "refresh": placer.refresh_every}
        return options | steering | {"learned_start": placer.refresh_at_start, "screen": placer.screen, "starts": placer.starts}

    if split not in ("validation", "train"):
        raise ValueError(f"split must be 'validation' or 'train' (the test split is never tuned on), got {split!r}")
    path = Path(root or ROOT) / "validation.json"
    cached: dict[str, float] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    runs = {LOCAL_SEARCH: (LOCAL_SEARCH, {"starts": "all"})} | {name: ("learned_search", options) for name, options in variants.items()}
    keys = {name: json.dumps(resolved(opts) if method != LOCAL_SEARCH else opts, sort_keys=True) for name, (method, opts) in runs.items()}
    means: dict[tuple[str, int, str], float] = {}
    for entry in (e for e in corpus.entries(split) if e.family != "zoo"):
        graph = corpus.build(entry)
        for devices in (d for d in devices_measured if d in entry.devices):
            for name, (method, options) in runs.items():
                spans = []
                for seed in range(seeds):
                    key = "|".join([entry.name, str(devices), method, keys[name], str(seed), str(budget)])
                    if key not in cached:
                        placement = place(graph, method=method, devices=devices, budget=budget, seed=seed, **options)
                        cached[key] = float(simulate(graph, placement.assignment, devices).makespan)
                        atomic_write_json(path, cached)
                    spans.append(cached[key])
                means[entry.name, devices, name] = float(np.mean(spans))
    header = "| variant | options | " + " | ".join(f"{d} devices" for d in devices_measured) + " |"
    lines = [header, "|---|---|" + "---|" * len(devices_measured)]
    for name in variants:
        ratios = [
            np.mean([means[g, d, name] / means[g, d, LOCAL_SEARCH] for g, dd, n in means if dd == d and n == name])
            for d in devices_measured
        ]
        lines.append(f"| {name} | {json.dumps(variants[name], sort_keys=True)} | " + " | ".join(f"{r:.3f}" for r in ratios) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Tune learned_search's options on the validation split (validate()).")
    parser.add_argument(
        "variants", help='JSON object: variant name -> learned_search options, e.g. \'{"default": {}, "r4": {"refresh": 4}}\''
    )
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--split", default="validation", choices=("validation", "train"))
    args = parser.parse_args()
    print(validate(json.loads(args.variants), args.budget, args.seeds, split=args.split))
