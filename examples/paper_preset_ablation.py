"""Toggle one setting at a time from the paper preset and train briefly (docs/paper-preset.md, "Measured effects").

    PYTHONPATH=. python examples/paper_preset_ablation.py GRAPH OUT [IL_CHECKPOINT]

GRAPH is a bundled graph name (``chain_mm_112nodes``).

Full runs (Stage I 200 + Stage II 200 episodes) for the policy switches;
Stage II alone (300 episodes, from IL_CHECKPOINT, the preset's Stage I
weights) for the training switches. Seed 0; each run is an ordinary,
resumable run directory under OUT. Prints one line per run: the greedy
makespan of the final weights and the mean makespan of the last 100
episodes (÷1e10).
"""

from __future__ import annotations

import dataclasses
import sys
import time
import types
from pathlib import Path

import numpy as np

from workbench import learn
from workbench.runs import read_rows
from workbench.training import TrainConfig, train

POLICY_TOGGLES = {
    "preset": {},
    "path sums in op order (bug fixed)": {"path_sum_order_bug": False},
    "inputs scaled by max, no per-step z-scores (ours)": {
        "zscore_graph_features": False,
        "zscore_device_features": False,
        "zscore_ready_inputs": False,
        "leaky_projections": False,
        "path_sum_order_bug": False,
    },
    "mean aggregation, edge width 8 (ours)": {"aggregator": "mean", "edge_hidden": 8},
}
TRAIN_TOGGLES = {
    "preset": {},
    "no discount (ours)": {"discount": 1.0},
    "running-mean baseline (ours)": {"baseline": "running_mean"},
    "entropy 1e-2 in Stage II (ours)": {"entropy_weight": 1e-2},
    "gradient clip 1.0 (ours)": {"grad_clip": 1.0},
    "learning rate decay applied (ours)": {"lr_decay_unread": False},
}


def library(changes: dict) -> types.SimpleNamespace:
    """``workbench.learn`` whose fresh policies use ``PolicyConfig.paper()`` with ``changes``."""

    def make_policy(method: str, config: object = None) -> learn.LearnedPolicy:
        return learn.make_policy(method, dataclasses.replace(learn.PolicyConfig.paper(method), **changes))

    return types.SimpleNamespace(make_policy=make_policy, load_policy=learn.load_policy)


def slug(label: str) -> str:
    """A run directory name for ``label`` (the same on every rerun, so reruns resume the right run)."""
    return "-".join("".join(c if c.isalnum() else " " for c in label.lower()).split())


def report(label: str, result, run: Path, graph: str) -> None:
    rows = read_rows(run / "metrics.csv")
    tail = np.mean([float(r["makespan"]) for r in rows[-100:]]) / 1e10
    print(f"{label:52} greedy {result.evaluation[graph]['greedy'] / 1e10:8.1f}   last 100 episodes {tail:8.1f}", flush=True)


def main(graph: str, out: str, il_checkpoint: str | None = None) -> None:
    name = Path(graph).stem
    for label, changes in POLICY_TOGGLES.items():
        config = TrainConfig.paper((graph,), episodes=(200, 200), device="cpu", policy_preset="default")  # the library builds the policy
        run = Path(out) / slug(label)
        report(label, train(config, run, library=library(changes), progress=False), run, name)
    if il_checkpoint:
        while not Path(il_checkpoint).exists():  # the preset's full run may still be in Stage I
            time.sleep(20)
        for label, changes in TRAIN_TOGGLES.items():
            config = TrainConfig.paper((graph,), stages=("sim",), episodes=(300,), init_checkpoint=il_checkpoint, device="cpu", **changes)
            run = Path(out) / f"stage-2-{slug(label)}"
            report(f"Stage II: {label}", train(config, run, progress=False), run, name)


if __name__ == "__main__":
    main(*sys.argv[1:])
