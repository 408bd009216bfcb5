"""The DOPPLER paper's own Stage II training episode, timed: ``python -m workbench.bench.paper_episode CODE GRAPH EPISODES``.

``CODE`` is a checkout of the paper's public code (github.com/xinyuyao/Doppler) that the user fetched; nothing of it is
vendored here. Each episode is its ``Run_placement.run_one_episode`` (the SEL and PLC rollout, the simulator's cost and
the policy-gradient update) with its own ``config_files/run_doppler/rl_simulation_learning.json`` on
``compute_graph/GRAPH.txt``, on one torch thread, with PyTorch's anomaly detection off: the code turns it on when its
agents are imported, which doubles its time, so the fair comparison (issue 32) is without it. Its logging-only imports
(wandb, python-dotenv, matplotlib) are stubbed; its model needs dgllife (and rdkit and scikit-learn, which dgllife
imports). Prints one JSON line: each episode's CPU seconds (``time.process_time``) and its cost. Run in a process of
its own: the code changes the working directory, torch's seed and global autograd state.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

CONFIG = "config_files/run_doppler/rl_simulation_learning.json"
EPSILON = 0.2
"""Exploration of both policies, the config's ``node_epsilon`` and ``device_epsilon`` at the start of training."""
STUBBED = ("wandb", "dotenv", "matplotlib", "matplotlib.pyplot")
MISSING_HINT = "the paper's code needs dgllife (and rdkit and scikit-learn, which dgllife imports): pip install dgllife rdkit scikit-learn"


def _stub_logging_modules() -> None:
    """Modules the paper's code imports only to log or plot: no-op stand-ins, so the timing is the episode's alone."""
    for name in STUBBED:
        module = types.ModuleType(name)
        module.__dict__.update(log=lambda *a, **k: None, define_metric=lambda *a, **k: None, load_dotenv=lambda *a, **k: None)
        sys.modules.setdefault(name, module)


def time_episodes(code: Path, graph: str, episodes: int, devices: int = 4) -> dict[str, Any]:
    """Run ``episodes`` of the paper's Stage II training on ``graph`` and return each one's CPU seconds and cost."""
    config_path, graph_path = code / CONFIG, code / "compute_graph" / f"{graph}.txt"
    for path in (config_path, graph_path):
        if not path.is_file():
            raise SystemExit(f"not the paper's code: {path} is missing (a checkout of github.com/xinyuyao/Doppler)")
    _stub_logging_modules()
    sys.path.insert(0, str(code))
    os.chdir(code)  # its graph and config paths are relative to its root
    import torch

    torch.set_num_threads(1)
    try:
        from run_placement import Run_placement
    except ModuleNotFoundError as exc:
        raise SystemExit(f"{exc}: {MISSING_HINT}") from None
    torch.autograd.set_detect_anomaly(False)  # its agents turned it on at import
    config = json.loads(config_path.read_text())
    log_path = tempfile.mkdtemp(prefix="paper-episode-")
    config.update(compute_graph_path=str(graph_path), log_path=log_path, use_wandb=False, num_episode=episodes, num_device=devices)
    run = Run_placement(argparse.Namespace(**config))
    seconds, costs = [], []
    total = torch.zeros(1)
    for episode in range(episodes):
        began = time.process_time()
        cost, _, _, total = run.run_one_episode(episode, copy.deepcopy(run.graph), EPSILON, EPSILON, total)
        seconds.append(time.process_time() - began)
        costs.append(float(cost))
    return {"graph": graph, "cpu_s": seconds, "costs": costs, "anomaly_detection": torch.is_anomaly_enabled()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("code", type=Path, help="a checkout of github.com/xinyuyao/Doppler")
    parser.add_argument("graph", help="a graph of its compute_graph/ folder, e.g. chain_mm_112nodes")
    parser.add_argument("episodes", type=int, help="training episodes to time")
    parser.add_argument("--devices", type=int, default=4, help="devices to place on (default: 4, the config's)")
    args = parser.parse_args(argv)
    result = time_episodes(args.code.resolve(), args.graph, args.episodes, args.devices)
    print("PAPER_EPISODE " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
