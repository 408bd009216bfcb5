"""learned_search against local_search at equal evaluations, on the corpus's test split and the paper's four graphs.

Every test graph of the corpus manifest (``datasets/corpus/``; the paper's
four graphs among them) at 4 and 8 devices; seeds 0–4; budgets of 200, 500
and 2,000 simulator evaluations, the starting heuristics included. Both
searches start from the best heuristic, which is reported too. Each cell
(graph, devices, method, seed, budget) is cached in ``runs/bench-learned/cells.json``
(rewritten atomically after each), so an interrupted run resumes where it
stopped. The table gives, per budget, the mean over graphs of
learned_search's mean makespan divided by local_search's (the issue-19
targets: at most 0.95, 0.97 and 1.00 at 200, 500 and 2,000), with wins and
losses, and the paper graphs' makespans (÷ 1e10).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..fileio import atomic_write_json

ROOT = Path("runs") / "bench-learned"
BUDGETS = (200, 500, 2000)
SEEDS = (0, 1, 2, 3, 4)
DEVICES = (4, 8)
LOCAL_SEARCH = "local_search"
LEARNED_SEARCH = "learned_search"
SEARCHES = (LOCAL_SEARCH, LEARNED_SEARCH)
BEST_HEURISTIC = "best_heuristic"
UNIT = 1e10


def _cells(quick: bool) -> list[tuple[str, int, str, int, int]]:
    """(graph, devices, method, seed, budget) of every cell: heuristics first, then by budget and seed (partial runs span all graphs)."""
    from .. import corpus

    tests = [e for e in corpus.entries("test") if e.family != "zoo"]
    if quick:
        tests = [e for e in tests if e.family == "paper"][:1] + [e for e in tests if e.family != "paper"][:1]
    budgets, seeds = ((200,), (0,)) if quick else (BUDGETS, SEEDS)
    cases = [(e.name, d) for e in tests for d in DEVICES if d in e.devices]
    first = [(g, d, BEST_HEURISTIC, 0, 0) for g, d in cases]
    return first + [(g, d, m, s, b) for b in budgets for s in seeds for g, d in cases for m in SEARCHES]


def _key(cell: tuple[str, int, str, int, int]) -> str:
    return "|".join(map(str, cell))


def _measure(graph: Any, devices: int, method: str, seed: int, budget: int) -> dict[str, float]:
    from ..placers import place
    from ..placers.local_search import start_methods
    from ..sim import simulate

    began = time.perf_counter()
    if method == BEST_HEURISTIC:
        makespan = min(simulate(graph, place(graph, m, devices=devices).assignment, devices).makespan for m in start_methods())
    else:
        placement = place(graph, method=method, devices=devices, budget=budget, seed=seed)
        makespan = simulate(graph, placement.assignment, devices).makespan
    return {"makespan": float(makespan), "seconds": time.perf_counter() - began}


def run(quick: bool = False, root: Path | None = None) -> dict[str, Any]:
    """Measure every cell not cached under ``root`` yet, then tabulate."""
    import tempfile

    from .. import corpus
    from ..progress import progress_bar

    root = Path(root or (tempfile.mkdtemp(prefix="bench-learned-") if quick else ROOT))
    path = root / "cells.json"
    cached: dict[str, dict[str, float]] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    cells = _cells(quick)
    entries = {e.name: e for e in corpus.entries("test")}
    graphs: dict[str, Any] = {}
    todo = [c for c in cells if _key(c) not in cached]
    for cell in progress_bar(todo, desc="bench learned", unit="cell"):
        name = cell[0]
        if name not in graphs:
            graphs[name] = corpus.build(entries[name])
        cached[_key(cell)] = _measure(graphs[name], *cell[1:])
        atomic_write_json(path, cached)
    results = {_key(c): cached[_key(c)] for c in cells}
    return {"benchmark": "learned", "quick": quick, "root": str(root), "cells": results, "markdown": _markdown(cells, results, entries)}


def _mean(results: dict[str, dict[str, float]], graph: str, devices: int, method: str, budget: int, seeds: list[int]) -> float:
    return float(np.mean([results[_key((graph, devices, method, s, budget))]["makespan"] for s in seeds]))


def _markdown(cells: list[tuple[str, int, str, int, int]], results: dict[str, dict[str, float]], entries: dict[str, Any]) -> str:
    cases = sorted({(c[0], c[1]) for c in cells})
    budgets = sorted({c[4] for c in cells if c[2] != BEST_HEURISTIC})
    seeds = sorted({c[3] for c in cells if c[2] != BEST_HEURISTIC})
    lines = [
        f"learned_search / local_search, mean makespan over seeds {seeds[0]}–{seeds[-1]}, then mean (and range) over graphs; "
        "wins / ties / losses count graphs",
        "",
        "| graphs | devices | " + " | ".join(f"{b} evaluations" for b in budgets) + " |",
        "|---|---|" + "---|" * len(budgets),
    ]
    for label, keep in (("test split", lambda e: e.family != "paper"), ("paper's four", lambda e: e.family == "paper")):
        for devices in DEVICES:
            chosen = [g for g, d in cases if d == devices and keep(entries[g])]
            if not chosen:
                continue
            row = []
            for b in budgets:
                ratios = np.array(
                    [_mean(results, g, devices, SEARCHES[1], b, seeds) / _mean(results, g, devices, SEARCHES[0], b, seeds) for g in chosen]
                )
                wins, losses = int(np.sum(ratios < 1 - 1e-9)), int(np.sum(ratios > 1 + 1e-9))
                row.append(f"{ratios.mean():.3f} ({ratios.min():.2f}–{ratios.max():.2f}; {wins}/{ratios.size - wins - losses}/{losses})")
            lines.append(f"| {label} ({len(chosen)}) | {devices} | " + " | ".join(row) + " |")
    lines += ["", "Paper graphs, makespan ÷ 1e10 (mean over seeds)", ""]
    header = ["graph", "devices", "best heuristic"] + [f"{m} {b}" for b in budgets for m in SEARCHES]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for g, d in cases:
        if entries[g].family != "paper":
            continue
        values = [results[_key((g, d, BEST_HEURISTIC, 0, 0))]["makespan"]]
        values += [_mean(results, g, d, m, b, seeds) for b in budgets for m in SEARCHES]
        lines.append(f"| {g} | {d} | " + " | ".join(f"{v / UNIT:.1f}" for v in values) + " |")
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

    def resolved(options: dict[str, Any]) -> dict[str, Any]:
        placer = LearnedSearchPlacer(budget=budget, **options)
        steering = {"share": placer.share, "temperature": placer.temperature, "refresh": placer.refresh_every}
        return options | steering | {"learned_start": placer.refresh_at_start, "screen": placer.screen}

    if split not in ("validation", "train"):
        raise ValueError(f"split must be 'validation' or 'train' (the test split is never tuned on), got {split!r}")
    path = Path(root or ROOT) / "validation.json"
    cached: dict[str, float] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    runs = {LOCAL_SEARCH: (LOCAL_SEARCH, {})} | {name: (LEARNED_SEARCH, options) for name, options in variants.items()}
    keys = {name: json.dumps(resolved(opts) if method == LEARNED_SEARCH else opts, sort_keys=True) for name, (method, opts) in runs.items()}
    means: dict[tuple[str, int, str], float] = {}
    for entry in (e for e in corpus.entries(split) if e.family != "zoo"):
        graph = corpus.build(entry)
        for devices in (d for d in DEVICES if d in entry.devices):
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
    lines = ["| variant | options | " + " | ".join(f"{d} devices" for d in DEVICES) + " |", "|---|---|" + "---|" * len(DEVICES)]
    for name in variants:
        ratios = [np.mean([means[g, d, name] / means[g, d, LOCAL_SEARCH] for g, dd, n in means if dd == d and n == name]) for d in DEVICES]
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
