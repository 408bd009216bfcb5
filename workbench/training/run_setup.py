"""Setting a training run up: its graphs and references, the run already in its directory, the first policy, and
the episode bar and stop request the loop runs under (:func:`~workbench.training.loop.train`)."""

from __future__ import annotations

import dataclasses
import shlex
import signal
import sys
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..graph import DataflowGraph
from ..learn.checkpoint import stale_temporaries
from ..placers import methods
from ..provenance import machine, now as _now, versions
from ..runs.validate import RunCheck, best_subdir, read_json_object
from .checkpoint import TrainingState, load_checkpoint
from .config import POLICY, TrainConfig, preset_policy
from .resume import ResumeError, ResumePoint, hand_over, read_json_file
from .rundir import RunDirectory

if TYPE_CHECKING:
    from tqdm import tqdm

__all__ = ["HEURISTICS", "load_graphs", "reference_makespans", "start_or_resume", "StopRequest"]


HEURISTICS = tuple(methods("heuristic") + methods("baseline"))
"""The registered heuristics and baselines the run's ``reference`` is compared with (on a tie the first wins)."""


def load_graphs(specs: tuple[str, ...]) -> dict[str, DataflowGraph]:
    """Name → graph for bundled names and graph files; names are made unique (``name#2``)."""
    from ..datasets import PAPER_GRAPHS, bundled_graph
    from ..formats import load_graph

    graphs: dict[str, DataflowGraph] = {}
    for spec in specs:
        if Path(spec).exists():
            graph = load_graph(spec)
            name = graph.name if graph.name != "graph" else Path(spec).stem
        else:
            try:
                graph = bundled_graph(spec)
            except KeyError:
                raise ValueError(f"{spec}: no such file, and no bundled graph of that name ({', '.join(PAPER_GRAPHS)})") from None
            name = graph.name
        unique, k = name, 2
        while unique in graphs:
            unique, k = f"{name}#{k}", k + 1
        graphs[unique] = graph
    return graphs


def reference_makespans(graphs: dict[str, DataflowGraph], devices: int) -> dict[str, dict[str, Any]]:
    """Per graph: critical_path's makespan and the best registered heuristic's (simulator)."""
    from ..placers import place

    out = {}
    for name, graph in graphs.items():
        results = {m: place(graph, m, devices).makespan for m in HEURISTICS}
        method = min(results, key=results.__getitem__)
        out[name] = {"critical_path": results["critical_path"], "best_heuristic": results[method], "best_heuristic_method": method}
    return out


def existing_run(run: RunDirectory, config: TrainConfig) -> dict[str, Any] | None:
    """The meta of the run already in ``run`` (same config), or None when the directory is new or empty."""
    existing = run.existing_config()
    if existing is None:
        if run.path.is_dir() and set(run.path.iterdir()) - set(stale_temporaries(run.path)):  # a kill in the first save leaves one
            raise ValueError(f"{run.path} is not empty and holds no config.json: not a run directory; choose another --out")
        return None
    if existing != config:
        ours, theirs = dataclasses.asdict(config), dataclasses.asdict(existing)
        differ = [k for k in ours if ours[k] != theirs[k]]
        raise ValueError(
            f"{run.path} holds a different run (config differs in {', '.join(differ)}); choose another --out or the same settings to resume"
        )
    if not run.meta_path.exists():
        return {}
    meta = read_json_file(run.meta_path, "the run's meta.json")
    if not isinstance(meta, dict):
        raise ResumeError(f"{run.meta_path} holds a JSON {type(meta).__name__}, not an object")
    return meta


def initial_policy(config: TrainConfig, library: Any, device: torch.device) -> Any:
    torch.manual_seed(config.seed)
    if config.init_checkpoint:
        policy, _ = load_checkpoint(library, config.init_checkpoint, map_location=device)
        return policy
    if config.policy is None and config.policy_preset == "default":
        return library.make_policy(config.method)
    return library.make_policy(config.method, config.policy_config())


def best_so_far(run: RunDirectory, graphs: dict[str, DataflowGraph]) -> dict[str, float]:
    """The makespan of each graph's ``best/placement.json`` (checked by :func:`.resume.check_directory`)."""
    best = {}
    for name in graphs:
        path = run.best_placement_path(best_subdir(tuple(graphs), name))
        if path.exists():
            best[name] = float(read_json_object(path)["makespan"])
    return best


def torch_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("TrainConfig.device is 'cuda' but torch sees no CUDA device")
    return torch.device(name)


def command_line(config: TrainConfig, out: Path) -> str:
    """The ``workbench train`` command that makes this run: the options, then ``--set`` for every other non-default field."""
    parts = [
        "workbench",
        "train",
        *config.graphs,
        "--devices",
        str(config.devices),
        "--method",
        config.method,
        "--stages",
        ",".join(config.stages),
        "--episodes",
        ",".join(map(str, config.episodes)),
        "--out",
        str(out),
        "--seed",
        str(config.seed),
    ]
    if config.init_checkpoint:
        parts += ["--init-checkpoint", config.init_checkpoint]
    defaults = TrainConfig(graphs=config.graphs)
    covered = {"graphs", "devices", "method", "stages", "episodes", "seed", "init_checkpoint", "policy"}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name not in covered and value != getattr(defaults, f.name):
            parts += ["--set", f"{f.name}={_option_text(value)}"]
    policy, preset = config.policy_config(), preset_policy(config.policy_preset, config.method)
    for f in dataclasses.fields(policy):
        if getattr(policy, f.name) != getattr(preset, f.name):
            parts += ["--set", f"{POLICY}{f.name}={_option_text(getattr(policy, f.name))}"]
    return shlex.join(parts)


def _option_text(value: Any) -> str:
    """A field's value as ``--set`` reads it back: tuples comma-separated, booleans lower case."""
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value).lower() if isinstance(value, bool) else str(value)


def episode_bar(total: int, initial: int, enabled: bool) -> tqdm:
    from ..progress import progress_bar

    return progress_bar(total=total, initial=initial, disable=not enabled, unit="ep", dynamic_ncols=True, file=sys.stderr)


class StopRequest:
    """SIGINT/SIGTERM ask the loop to stop after the current episode; a second SIGINT aborts at once."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True
        print(f"\n{signal.Signals(signum).name}: stopping after this episode (Ctrl-C again to abort now)", file=sys.stderr)

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def start_or_resume(
    run: RunDirectory,
    config: TrainConfig,
    graphs: dict[str, DataflowGraph],
    library: Any,
    device: torch.device,
    existing: dict[str, Any] | None,
    resume: ResumePoint | None,
    checked: RunCheck | None,
    command: str | None,
) -> tuple[Any, TrainingState | None, str]:
    """The policy, the training state (``None``: a new run) and the run id: the checked run resumed (its tables cut to
    the checkpoint), or a new run directory created with its ``meta.json``."""
    if resume is not None and checked is not None:
        policy, state = resume.policy, resume.state
        torch.set_rng_state(state.torch_rng)
        hand_over(run, resume)
        with open(run.metrics_path, "r+b") as handle:  # drop only the rows the resumed run replays
            handle.truncate(checked.metrics_keep)
        run.truncate_greedy(checked.greedy_keep)
        run_id = (existing or {}).get("run_id") or state.run_id or uuid.uuid4().hex
        run.update_meta(status="running", error=None, run_id=run_id)
    else:
        state, run_id = None, uuid.uuid4().hex
        policy = initial_policy(config, library, device)
        meta = {
            "status": "running",
            "method": config.method,
            "graphs": list(graphs),
            "devices": config.devices,
            "seed": config.seed,
            "stages": list(config.stages),
            "started": _now(),
            "versions": versions(),
            "machine": machine(),
            "command": command or command_line(config, run.path),
            "error": None,
            "reference": reference_makespans(graphs, config.devices),
            "run_id": run_id,
        }
        if existing is not None:
            meta["started"] = existing.get("started", meta["started"])
        run.create(config, meta)
    return policy, state, run_id
