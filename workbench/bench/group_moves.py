"""Structured group moves (issue 28), against the fair local_search at equal evaluations and at equal CPU time.

Each variant (a method, local_search or learned_search, and its options, e.g. ``groups="connected+segment"``) and the
fair local_search (its defaults) place every graph of a split at each device count, seed and budget; the methods of one
(graph, devices, seed, budget) run one after the other in this process, so each comparison is measured on the same
machine state. Per variant: its makespan ÷ local_search's (equal evaluations), its best so far at the CPU seconds
local_search spent ÷ local_search's makespan (equal CPU, :func:`workbench.bench.learned.best_at`), and its CPU seconds ÷
local_search's; mean over seeds, then mean (min–max; wins/ties/losses) over graphs. Cells are cached in ``cache`` (JSON,
rewritten atomically after each), so an interrupted run resumes. Tune on ``validation`` (or ``train``); ``paper`` is the
test split's four paper graphs, for the report only.

``python -m workbench.bench.group_moves VARIANTS --split validation --devices 4 8 --seeds 5 --budgets 200 500 --cache FILE``
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..fileio import atomic_write_json
from .learned import LOCAL_SEARCH, _single_thread, _summary, best_at

__all__ = ["measure_variants"]


def _graphs(split: str) -> list[Any]:
    from .. import corpus

    if split == "paper":
        return [e for e in corpus.entries("test") if e.family == "paper"]
    if split not in ("validation", "train"):
        raise ValueError(f"split must be validation, train or paper (the test split is never tuned on), got {split!r}")
    return [e for e in corpus.entries(split) if e.family != "zoo"]


def measure_variants(
    variants: dict[str, tuple[str, dict[str, Any]]],
    split: str = "validation",
    devices: tuple[int, ...] = (4, 8),
    seeds: int = 5,
    budgets: tuple[int, ...] = (200, 500),
    cache: Path | None = None,
) -> str:
    """Measure each variant (name -> (method, options)) and the fair local_search on ``split``; the markdown tables."""
    from .. import corpus
    from ..placers import place

    _single_thread()
    cached: dict[str, dict[str, Any]] = json.loads(cache.read_text(encoding="utf-8")) if cache and cache.is_file() else {}
    runs = {LOCAL_SEARCH: (LOCAL_SEARCH, {})} | variants
    ratios: dict[tuple[str, int, int], list[np.ndarray]] = {}  # (variant, devices, budget) -> per graph [evals, cpu, cost]
    for entry in _graphs(split):
        graph = corpus.build(entry)
        for d in (d for d in devices if d in entry.devices):
            for budget in budgets:
                per_seed: dict[str, list[list[float]]] = {name: [] for name in variants}
                for seed in range(seeds):
                    results = {}
                    for name, (method, options) in runs.items():
                        key = "|".join([entry.name, str(d), method, json.dumps(options, sort_keys=True), str(seed), str(budget)])
                        if key not in cached:
                            placement = place(graph, method=method, devices=d, seed=seed, budget=budget, **options)
                            anytime = placement.details["anytime"]
                            cached[key] = {"makespan": float(placement.makespan), "cpu_seconds": placement.cpu_seconds, "anytime": anytime}
                            if placement.evaluations != budget:
                                raise RuntimeError(f"{name} spent {placement.evaluations} evaluations of {budget}")
                            if cache:
                                atomic_write_json(cache, cached)
                        results[name] = cached[key]
                    base = results[LOCAL_SEARCH]
                    for name in variants:
                        mine = results[name]
                        per_seed[name].append(
                            [
                                mine["makespan"] / base["makespan"],
                                best_at(mine["anytime"], base["cpu_seconds"]) / base["makespan"],
                                mine["cpu_seconds"] / max(base["cpu_seconds"], 1e-9),
                            ]
                        )
                for name in variants:
                    ratios.setdefault((name, d, budget), []).append(np.mean(per_seed[name], axis=0))
    lines = [
        f"{split}: each variant ÷ fair local_search, mean over seeds 0–{seeds - 1}, then mean (min–max; wins/ties/losses) over graphs",
        "",
        "| variant | devices | budget | equal evaluations | equal CPU | CPU cost |",
        "|---|---|---|---|---|---|",
    ]
    for (name, d, budget), rows in ratios.items():
        table = np.array(rows)
        lines.append(f"| {name} | {d} | {budget} | {_summary(table[:, 0])} | {_summary(table[:, 1])} | {table[:, 2].mean():.2f}× |")
    return "\n".join(lines)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Group-move variants against the fair local_search (measure_variants()).")
    parser.add_argument(
        "variants", help='JSON object: name -> [method, options], e.g. \'{"ls+seg": ["local_search", {"groups": "connected+segment"}]}\''
    )
    parser.add_argument("--split", default="validation", choices=("validation", "train", "paper"))
    parser.add_argument("--devices", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budgets", type=int, nargs="+", default=[200, 500])
    parser.add_argument("--cache", type=Path)
    args = parser.parse_args()
    began = time.process_time()
    chosen = {name: (method, dict(options)) for name, (method, options) in json.loads(args.variants).items()}
    print(measure_variants(chosen, args.split, tuple(args.devices), args.seeds, tuple(args.budgets), args.cache))
    print(f"\n{time.process_time() - began:.0f} CPU s")
