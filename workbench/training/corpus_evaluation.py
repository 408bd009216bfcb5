"""Scoring a corpus-trained policy: greedy wins over critical_path on held-out pairs (the run's selection), and a
whole split placed zero-shot with best-of-K samples (``workbench train corpus --evaluate SPLIT``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..corpus import CorpusEntry, build, entries
from ..graph import DataflowGraph
from ..placers import methods

__all__ = ["greedy_score", "evaluate_split", "summary"]


def greedy_score(policy: Any, pairs: list[tuple[str, DataflowGraph, int, float]]) -> tuple[float, float]:
    """The greedy policy's share of ``pairs`` where it beats critical_path strictly, and its mean makespan over critical_path's."""
    from ..sim import simulate

    with torch.no_grad():
        ratios = np.array([simulate(g, policy.rollout(g, d, mode="greedy").assignment, d).makespan / c for _, g, d, c in pairs])
    return float(np.mean(ratios < 1.0)), float(ratios.mean())


def evaluate_split(
    checkpoint: str | Path,
    split: str = "test",
    devices: tuple[int, ...] = (2, 4, 8),
    samples: int = 16,
    seed: int = 0,
    corpus: list[CorpusEntry] | None = None,
) -> Any:  # a pandas DataFrame (pandas has no type information)
    """Zero-shot placements of every graph of ``split`` at each device count: a pandas frame, one row per (graph, devices).

    Columns: critical_path's makespan, the best heuristic's, the policy's greedy
    one and the best of greedy + ``samples - 1`` samples (seeded), each
    also over critical_path's, the greedy placement's inference seconds and, for a policy with a rule gate, the
    rule pair it chose (``greedy_rule``; empty without a gate).
    """
    import pandas as pd

    from ..learn import load_policy
    from ..placers import place
    from ..sim import Evaluator

    policy = load_policy(checkpoint)
    rows = []
    for entry in entries(split, manifest=corpus):
        graph = build(entry)
        for count in devices:
            if count not in entry.devices:
                continue
            heuristics = {m: place(graph, m, count).makespan for m in methods("heuristic")}
            began = time.perf_counter()
            with torch.no_grad():
                greedy = policy.rollout(graph, count, mode="greedy")
                seconds = time.perf_counter() - began
                generator = torch.Generator().manual_seed(seed)
                sampled = policy.rollouts(graph, count, samples - 1, mode="sample", generator=generator) if samples > 1 else []
            makespans = np.atleast_1d(Evaluator(graph, count)(np.stack([r.assignment for r in [greedy, *sampled]])))
            critical = heuristics["critical_path"]
            best = min(heuristics, key=heuristics.__getitem__)
            rows.append(
                {
                    "graph": entry.name,
                    "family": entry.family,
                    "nodes": graph.num_nodes,
                    "devices": count,
                    "critical_path": critical,
                    "best_heuristic": best,
                    "best_heuristic_makespan": heuristics[best],
                    "greedy": float(makespans[0]),
                    f"best_of_{samples}": float(makespans.min()),
                    "greedy_over_critical_path": float(makespans[0]) / critical,
                    f"best_of_{samples}_over_critical_path": float(makespans.min()) / critical,
                    "best_heuristic_over_critical_path": heuristics[best] / critical,
                    "greedy_seconds": seconds,
                    "greedy_rule": greedy.rule or "",
                }
            )
    return pd.DataFrame(rows)


def summary(frame: Any) -> Any:  # pandas DataFrames
    """Per device count: mean makespan ÷ critical_path's (greedy, best of K, best heuristic) and the share of graphs the policy wins."""
    best_of = next(c for c in frame.columns if c.startswith("best_of_") and not c.endswith("critical_path"))
    wins = frame.assign(greedy_wins=frame["greedy"] < frame["critical_path"], best_of_wins=frame[best_of] < frame["critical_path"])
    columns = [
        "greedy_over_critical_path",
        f"{best_of}_over_critical_path",
        "best_heuristic_over_critical_path",
        "greedy_wins",
        "best_of_wins",
    ]
    table = wins.groupby("devices")[columns].mean()
    table.insert(0, "graphs", wins.groupby("devices").size())
    return table.round(3)
