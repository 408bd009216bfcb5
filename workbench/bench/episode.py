"""Learned-policy episode speed: inference (greedy rollout) and training (rollout + REINFORCE update) per graph.

A training episode here is what one step of Stage II does: a sampled
rollout, the simulator's makespan, the REINFORCE loss with a running
baseline, backward and an Adam step. The next column runs ``BATCH``
rollouts per update through ``policy.rollouts`` (one encoder pass for all),
the setting ``workbench bench training`` trains its ``doppler`` runs with
(its ``doppler-one-rollout`` variant checks that the quality holds). Times
are per episode on one CPU thread (``torch.set_num_threads(1)``), median over
repeats, as wall time and as the process's CPU time (less sensitive to other
load on the machine). For DOPPLER on the graphs compared with the paper's
code, the whole training loop is timed too (:func:`loop_episode_cpu`): CPU
seconds per episode inside :func:`workbench.training.train` at those
settings, its logging, checkpoints and greedy checks included.

With ``paper_code`` (``workbench bench episode --paper-code DIR``, a checkout of
github.com/xinyuyao/Doppler the user fetched), the paper's own Stage II
episode is timed on ChainMM and the full transformer layer in the same run
(:mod:`workbench.bench.paper_episode`, a process of its own, anomaly detection
off), once before and once after this workbench's methods on that graph, and
the speed-up columns are ratios of CPU seconds per episode. Without it the
paper's columns stay empty: no figure is carried over from another run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from .training import TUNED

BATCH = TUNED["rollouts_per_update"]
"""Rollouts per update in the batched training column (they share one encoder pass): ``bench training``'s tuned setting."""
LOOP_EPISODES = 100
"""Stage II episodes of the shorter of the two ``train()`` runs whose difference :func:`loop_episode_cpu` times (the longer: 3×)."""

PAPER_GRAPHS_TIMED = ("chain_mm_112nodes", "full_transformer_layer_261nodes")
"""The graphs whose episodes are compared with the paper's code (the issue's two: the smallest and the largest)."""


def _median_times(fn, repeats: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``fn()`` over ``repeats`` calls (after one warm-up call)."""
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return float(np.median(wall)), float(np.median(cpu))


def _blank(value: float | None, pattern: str) -> str:
    return "" if value is None else pattern.format(value)


def _ratio(paper: float | None, ours: float | None) -> float | None:
    return None if paper is None or ours is None else paper / ours


SPEEDUP_KEYS = ("training_cpu_s", f"training_cpu_s_per_episode_{BATCH}_per_update", "training_loop_cpu_s")
"""A row's own CPU seconds per episode (1 rollout per update, ``BATCH`` per update, inside ``train()``), each with a speed-up column."""


def edge_conv_speed(graph, repeats: int, width: int = 128, edge_hidden: int = 8) -> dict[str, float]:
    """Seconds per forward + backward of one message-passing step: DGL's ``NNConv.forward`` vs :class:`EdgeConv`."""
    import dgl
    import torch

    from ..learn.nets import EdgeConv, graph_tensors

    inputs = graph_tensors(graph, torch.device("cpu"))
    conv = EdgeConv(width, edge_hidden, "mean")
    feat = torch.randn(graph.num_nodes, width, requires_grad=True)
    edge = torch.randn(inputs.graph.num_edges(), edge_hidden)
    forwards = {
        "dgl_nnconv_s": lambda: dgl.nn.NNConv.forward(conv, inputs.graph, feat, edge),
        "edge_conv_s": lambda: conv(inputs.graph, feat, edge),
    }
    return {label: _median_times(partial(_backward, forward), repeats)[0] for label, forward in forwards.items()}


def _backward(forward: Callable[[], Any]) -> None:
    forward().sum().backward()


def _episode_times(
    policy: Any, graph: Any, devices: int, evaluate: Callable[[np.ndarray], float], scale: float, repeats: int
) -> dict[str, float]:
    """Median wall/CPU seconds of one greedy rollout, one training episode, and one update of ``BATCH`` episodes."""
    import torch

    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-4)
    generator = torch.Generator().manual_seed(0)
    baseline: float | None = None

    def infer() -> None:
        with torch.no_grad():
            policy.rollout(graph, devices, mode="greedy")

    def train(count: int = 1) -> None:
        nonlocal baseline
        loss = 0.0
        for r in policy.rollouts(graph, devices, count, generator=generator):
            makespan = evaluate(r.assignment)
            baseline = makespan if baseline is None else 0.9 * baseline + 0.1 * makespan
            loss = loss + (makespan - baseline) / scale * r.log_prob - 0.01 * r.entropy
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    infer_wall, infer_cpu = _median_times(infer, repeats)
    train_wall, train_cpu = _median_times(train, repeats)
    _, batch_cpu = _median_times(lambda: train(BATCH), repeats)
    return {"infer_wall": infer_wall, "infer_cpu": infer_cpu, "train_wall": train_wall, "train_cpu": train_cpu, "batch_cpu": batch_cpu}


def paper_episode_seconds(code: str | Path, graph: str, episodes: int, devices: int = 4) -> list[float]:
    """CPU seconds of each of ``episodes`` Stage II episodes of the paper's code on ``graph``, after one not counted (its
    first episode builds what later ones reuse), in a process of its own (:mod:`workbench.bench.paper_episode`)."""
    command = [sys.executable, "-m", "workbench.bench.paper_episode", str(Path(code).resolve()), graph, str(episodes + 1)]
    done = subprocess.run(
        [*command, "--devices", str(devices)],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    marked = [line for line in done.stdout.splitlines() if line.startswith("PAPER_EPISODE ")]
    if done.returncode or not marked:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the paper's code did not run on {graph}: {last}")
    result = json.loads(marked[-1].removeprefix("PAPER_EPISODE "))
    if result["anomaly_detection"]:
        raise RuntimeError("the paper's code ran with anomaly detection on")
    return [float(x) for x in result["cpu_s"][1:]]


def loop_episode_cpu(graph_name: str, devices: int, episodes: int = LOOP_EPISODES) -> float:
    """CPU seconds per Stage II episode of DOPPLER inside :func:`workbench.training.train` at ``bench training``'s tuned settings.

    Runs from scratch of ``episodes`` (once to warm up: imports, first
    calls), ``episodes`` again and ``3 × episodes``: the difference of the
    last two's CPU times over ``2 × episodes``, so what a run does once
    (building the policy and optimizer, the first greedy check) is not
    counted, and its logging, checkpoints and greedy checks every 200
    episodes are.
    """
    import tempfile

    from ..training import train
    from ..training.config import config_from_values

    seconds = []
    values = {"graphs": (graph_name,), "method": "doppler", "seed": 0, "device": "cpu", "devices": devices, **TUNED}
    with tempfile.TemporaryDirectory(prefix="bench-episode-") as root:
        for index, count in enumerate((episodes, episodes, 3 * episodes)):
            config = config_from_values({**values, "stages": ("sim",), "episodes": (count,)})
            began = time.process_time()
            result = train(config, Path(root) / f"run{index}", progress=False)
            seconds.append(time.process_time() - began)
            if result.status != "finished":
                raise RuntimeError(f"the timed training run on {graph_name} ended {result.status}")
    return (seconds[2] - seconds[1]) / (2 * episodes)


def run(quick: bool = False, devices: int = 4, paper_code: str | Path | None = None) -> dict[str, Any]:
    import torch

    from ..datasets import PAPER_GRAPHS, bundled_graph
    from ..learn import METHODS, make_policy
    from ..sim import Evaluator, lower_bound

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    repeats = 3 if quick else 10
    methods = ["doppler"] if quick else list(METHODS)
    rows = []
    try:
        for name in PAPER_GRAPHS:
            graph = bundled_graph(name)
            evaluate, scale = Evaluator(graph, devices), lower_bound(graph, devices)
            code = paper_code if name in PAPER_GRAPHS_TIMED else None
            before = [] if code is None else paper_episode_seconds(code, name, repeats, devices)
            measured = []
            for method in methods if name in PAPER_GRAPHS_TIMED else methods[:1]:
                torch.manual_seed(0)
                measured.append((method, _episode_times(make_policy(method), graph, devices, evaluate, scale, repeats)))
            loop = loop_episode_cpu(name, devices, LOOP_EPISODES // 10 if quick else LOOP_EPISODES) if name in PAPER_GRAPHS_TIMED else None
            after = [] if code is None else paper_episode_seconds(code, name, repeats, devices)
            paper = float(np.median(before + after)) if code is not None else None
            for method, t in measured:
                own = dict(zip(SPEEDUP_KEYS, (t["train_cpu"], t["batch_cpu"] / BATCH, loop if method == "doppler" else None), strict=True))
                rows.append(
                    {
                        "graph": name,
                        "ops": graph.num_nodes,
                        "method": method,
                        "inference_s": t["infer_wall"],
                        "inference_cpu_s": t["infer_cpu"],
                        "training_s": t["train_wall"],
                        **own,
                        "paper_training_s": paper,
                        **{f"speedup_vs_paper_{key}": _ratio(paper, value) for key, value in own.items()},
                    }
                )
        conv = edge_conv_speed(bundled_graph(PAPER_GRAPHS[-1]), repeats)
    finally:
        torch.set_num_threads(threads)
    header = (
        "| graph | ops | method | inference s (wall / CPU) | training episode s, 1 rollout per update (wall / CPU) | "
        f"CPU s per episode, {BATCH} rollouts per update | CPU s per episode in train(), {BATCH} per update | "
        "paper's code, training CPU s (anomaly detection off) | "
        f"speed-up (CPU): 1 per update / {BATCH} per update / in train() |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['graph']} | {r['ops']} | {r['method']} | {r['inference_s']:.3f} / {r['inference_cpu_s']:.3f} | "
        f"{r['training_s']:.3f} / {r['training_cpu_s']:.3f} | {r[f'training_cpu_s_per_episode_{BATCH}_per_update']:.4f} | "
        f"{_blank(r['training_loop_cpu_s'], '{:.4f}')} | {_blank(r['paper_training_s'], '{:.3f}')} | "
        + ("" if r["paper_training_s"] is None else " / ".join(_blank(r[f"speedup_vs_paper_{k}"], "{:.0f}×") or "–" for k in SPEEDUP_KEYS))
        + " |"
        for r in rows
    ]
    conv_line = (
        f"\n\nOne NNConv step, forward + backward, {PAPER_GRAPHS[-1]} (width 128): DGL's NNConv.forward "
        f"{conv['dgl_nnconv_s'] * 1e3:.1f} ms, EdgeConv {conv['edge_conv_s'] * 1e3:.1f} ms "
        f"({conv['dgl_nnconv_s'] / conv['edge_conv_s']:.0f}× faster)."
    )
    return {
        "benchmark": "episode",
        "devices": devices,
        "threads": 1,
        "repeats": repeats,
        "rows": rows,
        "edge_conv": conv,
        "paper_code": None if paper_code is None else str(paper_code),
        "markdown": header + "\n".join(lines) + conv_line,
    }
