"""A constructive policy distilled from long fair-start searches (issue 28's route), measured against the fair baselines.

Two measurements on a corpus split at its manifest's device counts, every method of a cell run back to back in one
process (so the ratios compare figures of the same machine state):

- :func:`one_pass`: each policy's greedy placement (one pass, one counted evaluation) ÷ ``best_constructive`` (the best
  of every one-pass method, :mod:`workbench.placers.best_constructive`), and the better of two policies' placements
  (two counted evaluations), with the CPU seconds of each;
- :func:`as_start`: local_search from the fair start plus a policy's greedy placement as one more counted start ÷ the
  fair local_search (the same seed and budget), at equal evaluations.

:func:`summary` gives a ratio column's mean, worst cell and wins / ties / losses over the cells. The policies are
checkpoints of :func:`workbench.learn.load_policy`, e.g. one trained by ``workbench train corpus --objective imitation
--teacher-budget 20000`` (behaviour cloning of local_search at 20,000 evaluations, :mod:`workbench.training.corpus_training`).
``python -m workbench.bench.distill NAME=CHECKPOINT ... --split validation`` prints both tables.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..cluster import Devices
from ..graph import DataflowGraph
from ..placers.local_search import LocalSearchPlacer

RULE_PAIR = "affinity|etf"
"""The two-evaluation reference without learning: the better of the affinity rule's and ETF's placements (issue 28)."""
TIE = 1e-9
"""Relative difference below which two makespans tie."""


class LocalSearchWithStart(LocalSearchPlacer):
    """local_search from the fair start with ``extra`` (an assignment, e.g. a policy's placement) as one more counted start.

    Args:
        extra: the assignment added to the one-pass methods' starts.
        **options: :class:`~workbench.placers.local_search.LocalSearchPlacer`'s options (``budget``, ...).
    """

    def __init__(self, extra: np.ndarray, **options: Any) -> None:
        super().__init__(**options)
        self.extra = np.asarray(extra, dtype=np.int64)

    def extra_start_count(self) -> int:
        return 1

    def extra_starts(self, graph: DataflowGraph, devices: Devices) -> dict[str, np.ndarray]:
        return {"policy": self.extra}


def split_pairs(split: str, devices: Iterable[int] | None = None) -> list[tuple[str, DataflowGraph, int]]:
    """``(graph name, graph, devices)`` of every entry of the corpus ``split`` at each device count its manifest lists
    (of ``devices`` only, when given)."""
    from .. import corpus

    wanted = None if devices is None else set(devices)
    pairs = []
    for entry in corpus.entries(split):
        graph = corpus.build(entry)
        pairs += [(entry.name, graph, d) for d in entry.devices if wanted is None or d in wanted]
    return pairs


def _greedy(checkpoint: str | Path, graph: DataflowGraph, devices: int) -> tuple[np.ndarray, float, float]:
    """A policy's greedy placement of ``graph``: its assignment, makespan and process CPU seconds (loading included)."""
    from ..learn import load_policy
    from ..sim import Evaluator

    began = time.process_time()
    assignment = load_policy(checkpoint, graph=graph, devices=devices).rollout(graph, devices, mode="greedy").assignment
    makespan = float(Evaluator(graph, devices)(assignment))
    return np.asarray(assignment), makespan, time.process_time() - began


def _best_rule_pair(checkpoint: str | Path, graph: DataflowGraph, devices: int) -> tuple[float, float]:
    """A gated policy's heads on each of its rule pairs (``DopplerPolicy.rule_policy``), the best greedy placement kept (one
    counted evaluation per pair, instead of the gate's choice): its makespan and process CPU seconds."""
    from ..learn import load_policy
    from ..sim import Evaluator

    began = time.process_time()
    policy = load_policy(checkpoint, graph=graph, devices=devices)
    placements = [policy.rule_policy(k).rollout(graph, devices, mode="greedy").assignment for k in range(len(policy.rule_pairs))]
    makespan = float(np.min(Evaluator(graph, devices)(np.stack(placements))))
    return makespan, time.process_time() - began


def one_pass(policies: Mapping[str, str | Path], pairs: list[tuple[str, DataflowGraph, int]]) -> list[dict[str, Any]]:
    """Per pair: ``best_constructive``'s makespan and CPU seconds, each policy's greedy makespan ÷ it (``NAME``) and CPU
    seconds (``NAME cpu_s``, after a warm-up); the better of the affinity rule and ETF (:data:`RULE_PAIR`); for a gated
    policy (``gate_rules``) the best of its heads on each rule pair (``NAME pairs``, one counted evaluation per pair); for
    two policies the better of both (``A|B``, two counted evaluations); each ÷ best_constructive."""
    from ..learn import load_policy
    from ..placers import place

    for checkpoint in policies.values():  # warm-up: numba's and torch's first calls compile or load their caches
        _greedy(checkpoint, *pairs[0][1:])
    gated = {policy: bool(load_policy(checkpoint).config.gate_rules) for policy, checkpoint in policies.items()}
    rows = []
    for name, graph, devices in pairs:
        began = time.process_time()
        floor = place(graph, "best_constructive", devices).makespan
        row: dict[str, Any] = {"graph": name, "devices": devices, "best_constructive": floor}
        row["best_constructive cpu_s"] = time.process_time() - began
        began = time.process_time()
        row[RULE_PAIR] = min(place(graph, rule, devices).makespan for rule in RULE_PAIR.split("|")) / floor
        row[f"{RULE_PAIR} cpu_s"] = time.process_time() - began
        for policy, checkpoint in policies.items():
            _, makespan, cpu = _greedy(checkpoint, graph, devices)
            row[policy], row[f"{policy} cpu_s"] = makespan / floor, cpu
            if gated[policy]:
                paired, cpu = _best_rule_pair(checkpoint, graph, devices)
                row[f"{policy} pairs"], row[f"{policy} pairs cpu_s"] = paired / floor, cpu
        if len(policies) == 2:
            first, second = policies
            row[f"{first}|{second}"] = min(row[first], row[second])
        rows.append(row)
    return rows


def as_start(
    checkpoint: str | Path,
    pairs: list[tuple[str, DataflowGraph, int]],
    budgets: Iterable[int] = (200, 500),
    seeds: Iterable[int] = (0, 1, 2),
) -> list[dict[str, Any]]:
    """Per pair, budget and seed: fair local_search's makespan and local_search with the policy's greedy placement as one
    more counted start, ÷ it (``with_policy``), both at ``budget`` evaluations, run back to back."""
    from ..placers import place
    from ..sim import Evaluator

    rows = []
    for name, graph, devices in pairs:
        start, _, rollout_cpu = _greedy(checkpoint, graph, devices)
        for budget in budgets:
            for seed in seeds:
                fair = place(graph, "local_search", devices, seed=seed, budget=budget)
                began = time.process_time()
                decision = LocalSearchWithStart(start, budget=budget).place(graph, devices, seed=seed)
                cpu = time.process_time() - began + rollout_cpu
                makespan = float(Evaluator(graph, devices)(decision.assignment))
                rows.append(
                    {
                        "graph": name,
                        "devices": devices,
                        "budget": budget,
                        "seed": seed,
                        "local_search": fair.makespan,
                        "with_policy": makespan / fair.makespan,
                        "evaluations": decision.details["evaluations"],
                        "start_method": decision.details["start_method"],
                        "cpu_ratio": cpu / max(fair.cpu_seconds, 1e-9),
                    }
                )
    return rows


def summary(rows: list[dict[str, Any]], column: str) -> dict[str, Any]:
    """A ratio ``column``'s mean, worst (largest) cell and the cells below / at / above 1 (wins, ties, losses)."""
    ratios = np.array([float(r[column]) for r in rows])
    worst = int(np.argmax(ratios))
    return {
        "mean": float(ratios.mean()),
        "worst": float(ratios[worst]),
        "worst_cell": f"{rows[worst]['graph']}@{rows[worst]['devices']}",
        "wins": int((ratios < 1 - TIE).sum()),
        "ties": int((np.abs(ratios - 1) <= TIE).sum()),
        "losses": int((ratios > 1 + TIE).sum()),
    }


def _per_graph(rows: list[dict[str, Any]], column: str) -> list[dict[str, Any]]:
    """``column``'s mean over the seeds of each (graph, devices, budget)."""
    groups: dict[tuple[str, int, int], list[float]] = {}
    for r in rows:
        groups.setdefault((r["graph"], r["devices"], r["budget"]), []).append(float(r[column]))
    return [{"graph": g, "devices": d, "budget": b, column: float(np.mean(v))} for (g, d, b), v in groups.items()]


def markdown(one: list[dict[str, Any]], policies: Iterable[str], start: list[dict[str, Any]] | None = None) -> str:
    """The tables: each one-pass column ÷ best_constructive per device count and over all, and (``start``) each budget's
    local_search with the policy as a start ÷ fair local_search (mean over seeds per cell, then over cells)."""
    named = set(policies) | {f"{p} pairs" for p in policies} | {RULE_PAIR}
    columns = [c for c in one[0] if c in named or ("|" in c and not c.endswith("cpu_s"))]
    lines = ["| method | devices | mean ÷ best_constructive | worst cell | wins/ties/losses | most CPU s |", "|---|---|---|---|---|---|"]
    for column in columns:
        for devices in [*sorted({r["devices"] for r in one}), "all"]:
            chosen = [r for r in one if devices == "all" or r["devices"] == devices]
            s = summary(chosen, column)
            cpu = max(r.get(f"{column} cpu_s", float("nan")) for r in chosen)
            lines.append(
                f"| {column} | {devices} | {s['mean']:.3f} | {s['worst']:.3f} ({s['worst_cell']}) | "
                f"{s['wins']}/{s['ties']}/{s['losses']} | {cpu:.2f} |"
            )
    if start:
        lines += ["", "| budget | devices | local_search + policy start ÷ fair local_search | worst cell | wins/ties/losses |"]
        lines.append("|---|---|---|---|---|")
        cells = _per_graph(start, "with_policy")
        for budget in sorted({r["budget"] for r in cells}):
            for devices in [*sorted({r["devices"] for r in cells}), "all"]:
                chosen = [r for r in cells if r["budget"] == budget and (devices == "all" or r["devices"] == devices)]
                s = summary(chosen, "with_policy")
                worst = f"{s['worst']:.3f} ({s['worst_cell']})"
                lines.append(f"| {budget} | {devices} | {s['mean']:.3f} | {worst} | {s['wins']}/{s['ties']}/{s['losses']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """``python -m workbench.bench.distill NAME=CHECKPOINT ... [--split validation] [--start NAME] [--json OUT]``."""
    import argparse

    import torch

    from ..fileio import atomic_write_json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policies", nargs="+", help="NAME=CHECKPOINT: a policy's checkpoint file")
    parser.add_argument("--split", default="validation", help="the corpus split measured (tune on validation, never on test)")
    parser.add_argument("--devices", type=lambda text: [int(v) for v in text.split(",")], help="only these device counts")
    parser.add_argument("--start", metavar="NAME", help="also measure policy NAME as one more start of local_search")
    parser.add_argument("--budgets", type=lambda text: [int(v) for v in text.split(",")], default=[200, 500])
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 of the searches")
    parser.add_argument("--json", type=Path, help="write the rows here too")
    args = parser.parse_args(argv)
    policies = dict(item.split("=", 1) for item in args.policies)
    if args.start is not None and args.start not in policies:
        parser.error(f"--start {args.start} names no policy given ({', '.join(policies)})")
    torch.set_num_threads(1)
    pairs = split_pairs(args.split, args.devices)
    one = one_pass(policies, pairs)
    start = as_start(policies[args.start], pairs, args.budgets, range(args.seeds)) if args.start else None
    if args.json:
        atomic_write_json(args.json, {"split": args.split, "policies": policies, "one_pass": one, "as_start": start})
    print(markdown(one, policies, start))


if __name__ == "__main__":
    main()
