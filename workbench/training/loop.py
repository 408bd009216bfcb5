"""``train(config, out)``: the three stages in one loop, writing a run directory as it goes.

Reads top to bottom: open (or resume) the run directory, build the policy,
then for every stage and every episode roll out, update, log one metrics
row, keep the best placement and checkpoint now and then; finally search
the trained policy's placements. Stage I is :mod:`.imitation`, Stages II
and III are :mod:`.reinforce`.

Episodes count from 0 over the whole run and cycle through the graphs in
order. Every episode's sampling is seeded from ``(seed, episode)``, so a
resumed run repeats exactly what the uninterrupted run would have done.
The ``seconds`` column is training wall time since the run began, summed
over resumed sessions. Ctrl-C or SIGTERM stops after the current episode
with a checkpoint (a second Ctrl-C aborts at once); a hard kill loses the
episodes since the last checkpoint, which the next run replays.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import shlex
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from ..graph import DataflowGraph
from ..placers import methods
from ..provenance import machine, versions
from ..provenance import now as _now
from .checkpoint import load_checkpoint, save_checkpoint
from .config import TrainConfig
from .imitation import imitation_episode
from .oracle import SimulatorOracle, as_oracle, makespan_of, oracle_from_spec, oracle_kind
from .reinforce import linear_schedule, make_scheduler, reinforce_update
from .rundir import RunDirectory
from .search import policy_device, search

__all__ = ["train", "TrainResult", "load_graphs", "reference_makespans", "HEURISTICS"]

HEURISTICS = tuple(methods("heuristic") + methods("baseline"))
"""The registered heuristics and baselines the run's ``reference`` is compared with (on a tie the first wins)."""


@dataclass(frozen=True)
class TrainResult:
    """What a call to :func:`train` ended with."""

    run_dir: Path
    status: str
    """``finished`` or ``interrupted`` (stopped by a signal after a checkpoint)."""
    episodes: int
    """Episodes completed in the run so far."""
    evaluation: dict[str, Any]
    """Per graph (finished runs): greedy and best-of-K makespans of the trained policy, with the references."""


def train(
    config: TrainConfig,
    out: str | Path,
    *,
    oracle: Any = None,
    library: Any = None,
    callback: Callable[[dict[str, Any]], None] | None = None,
    progress: bool = True,
    command: str | None = None,
) -> TrainResult:
    """Train ``config.method`` through ``config.stages``, writing the run directory ``out``.

    Rerunning with the same config and ``out`` resumes from ``checkpoints/last.pt``
    (or returns at once when the run already finished).

    Args:
        oracle: the Stage III cost oracle (an object with ``measure(graph, assignment)``
            or such a callable); default: built from ``config.oracle``.
        library: where policies come from (``make_policy``, ``load_policy``); default
            :mod:`workbench.learn`.
        callback: called with each episode's metrics row after it is written.
        progress: show a tqdm progress bar.
        command: the command line recorded in ``meta.json``.
    """
    if library is None:
        library = importlib.import_module("workbench.learn")  # torch + DGL load on first use of a name
    if config.self_imitation_weight > 0 and not hasattr(library, "Guide"):
        raise ValueError("TrainConfig.self_imitation_weight needs a policy library that replays placements (workbench.learn.Guide)")
    run = RunDirectory(out)
    graphs = load_graphs(config.graphs)
    unseen = {name: g for name, g in load_graphs(config.eval_graphs).items() if name not in graphs}
    device = _torch_device(config.device)
    torch.set_num_threads(config.threads)
    sim = SimulatorOracle(config.devices)
    real = as_oracle(oracle, config.devices) if oracle is not None else oracle_from_spec(config.oracle, config.devices)

    # --- 1. a new run, or the one already in `out` ---------------------------------------------------
    state: dict[str, Any] | None = None
    existing = _existing_run(run, config)
    if existing is not None and existing.get("status") == "finished":
        return TrainResult(run.path, "finished", config.total_episodes, existing.get("evaluation", {}))
    if existing is not None and run.last_checkpoint.exists():
        policy, state = load_checkpoint(library, run.last_checkpoint, map_location=device)
        if state is None:
            raise ValueError(f"{run.last_checkpoint} holds a policy but no training state; it was not written by `workbench train`")
        torch.set_rng_state(state["torch_rng"])
        run.truncate_metrics(config, keep_before=state["episode"])
        run.update_meta(status="running", error=None)
    else:
        policy = _initial_policy(config, library, device)
        meta = {
            "status": "running", "method": config.method, "graphs": list(graphs), "devices": config.devices,
            "seed": config.seed, "stages": list(config.stages), "started": _now(), "versions": versions(),
            "machine": machine(), "command": command or _command_line(config, run.path), "error": None,
            "reference": reference_makespans(graphs, config.devices),
        }  # fmt: skip
        if existing is not None:
            meta["started"] = existing.get("started", meta["started"])
        run.create(config, meta)
    policy.to(device)
    best = _best_so_far(run, graphs)
    episode = state["episode"] if state else 0
    elapsed = state["seconds"] if state else 0.0
    generator = torch.Generator(device=device)
    stop = _StopRequest()
    bar = _progress_bar(config.total_episodes, episode, progress)
    metrics = run.open_metrics(config, first_episode=episode)
    try:
        with stop:
            # --- 2. the stages -------------------------------------------------------------------------------
            for stage, first, end in config.stage_bounds():
                if episode >= end:
                    continue
                if stage == "il":
                    optimizer = torch.optim.Adam(policy.parameters(), lr=config.il_lr)
                    scheduler = None
                else:
                    optimizer = torch.optim.Adam(policy.parameters(), lr=config.rl_lr_start)
                    scheduler = make_scheduler(optimizer, config, end - first)
                oracle_now = real if stage == "real" else sim
                baselines: dict[str, float] = {}
                elites: dict[str, dict[str, Any]] = {}  # per graph, the stage's best placement so far (self-imitation)
                selection: dict[str, Any] = {"score": np.inf}  # the stage's best greedy weights so far (greedy_every)
                if state is not None and state["stage"] == stage and first < state["episode"] < end:
                    optimizer.load_state_dict(state["optimizer"])
                    if scheduler is not None:
                        scheduler.load_state_dict(state["scheduler"])
                    baselines, references = dict(state["baselines"]), dict(state["references"])
                    elites = dict(state.get("elites", {}))
                    selection = dict(state.get("selection", selection))
                else:
                    references = {name: makespan_of(oracle_now, g, _teacher_assignment(g, config.devices)) for name, g in graphs.items()}
                    if stage != "il" and config.greedy_every:  # the starting weights compete too: the stage never ends worse than it began
                        selection = _select_greedy(policy, graphs, config.devices, oracle_now, references, episode, selection, run.best_checkpoint(stage))

                # --- 3. the episodes (Stages II/III: `rollouts_per_update` of one graph per gradient step) -----------
                group = 1 if stage == "il" else config.rollouts_per_update
                names = list(graphs)
                while episode < end:
                    name = names[(first + (episode - first) // group) % len(names)]
                    graph = graphs[name]
                    generator.manual_seed(config.seed * 1_000_003 + episode)
                    lr = optimizer.param_groups[0]["lr"]
                    began = time.perf_counter()
                    if stage == "il":
                        steps = [imitation_episode(policy, optimizer, graph, config, generator)]
                        steps[0]["makespan"] = sim.makespan(graph, steps[0]["rollout"].assignment)
                        steps[0]["reward"] = -steps[0]["makespan"] / references[name]
                    else:
                        epsilon = linear_schedule(config.rl_epsilon_start, config.rl_epsilon_end, episode - first, end - first)
                        count = min(group, end - episode)
                        self_imitation = config.self_imitation_weight > 0
                        elite = _guide(library, elites.get(name)) if self_imitation else None
                        steps = reinforce_update(policy, optimizer, graph, oracle_now, references[name], baselines.get(name), epsilon, config, generator, count, elite)
                        baselines[name] = steps[-1]["new_baseline"]
                        if self_imitation:
                            _keep_elite(elites, name, steps)
                        scheduler.step()
                    seconds_each = (time.perf_counter() - began) / len(steps)
                    for step in steps:
                        elapsed += seconds_each
                        rollout = step.pop("rollout")
                        simulated = step["makespan"] if stage != "real" else sim.makespan(graph, rollout.assignment)
                        row = {
                            "stage": stage, "episode": episode, "graph": name, "makespan": step["makespan"],
                            "reward": step["reward"], "baseline": step.get("baseline"), "loss": step["loss"],
                            "loss_policy": step.get("loss_policy"), "loss_entropy": step["loss_entropy"],
                            "loss_imitation": step.get("loss_imitation"), "teacher_agreement": step.get("teacher_agreement"),
                            "epsilon": step["epsilon"], "lr": lr, "seconds": round(elapsed, 4),
                            "oracle": oracle_kind(oracle_now) if stage != "il" else "sim",
                        }  # fmt: skip
                        if "real" in config.stages:
                            row["predicted"] = simulated if stage == "real" else None
                        metrics.append(row)
                        if simulated < best.get(name, np.inf):
                            best[name] = simulated
                            _write_best(run, config, graphs, name, rollout.assignment, rollout.order, simulated, stage, episode)
                        episode += 1
                        bar.update(1)
                        bar.set_postfix(stage=stage, graph=name[:16], vs_cp=f"{step['makespan'] / references[name]:.3f}")
                        if callback is not None:
                            callback(row)

                    stage_done = episode == end
                    if stage != "il" and config.greedy_every and (stage_done or _crossed(episode, len(steps), config.greedy_every)):
                        selection = _select_greedy(policy, graphs, config.devices, oracle_now, references, episode, selection, run.best_checkpoint(stage))
                        run.update_meta(**{f"greedy_selection_{stage}": {k: v for k, v in selection.items() if k != "score"}})

                    # --- 4. checkpoints (only between updates, so a resumed run replays whole updates) ------------
                    if stage_done or stop.requested or _crossed(episode, len(steps), config.checkpoint_every):
                        metrics.sync()
                        training_state = {
                            "episode": episode, "stage": stage, "optimizer": optimizer.state_dict(),
                            "scheduler": scheduler.state_dict() if scheduler is not None else None,
                            "baselines": baselines, "references": references, "elites": elites, "selection": selection, "seconds": elapsed,
                            "torch_rng": torch.get_rng_state(),
                        }  # fmt: skip
                        save_checkpoint(policy, run.last_checkpoint, training_state)
                        if stage_done:
                            save_checkpoint(policy, run.stage_checkpoint(stage), training_state)
                        run.update_meta(episodes_done=episode)
                    if stop.requested:
                        run.update_meta(status="interrupted")
                        bar.write(f"stopped after episode {episode - 1}; rerun the same command to resume from {run.last_checkpoint}")
                        return TrainResult(run.path, "interrupted", episode, {})

            # --- 5. the trained policy (the best greedy weights when selected), greedy and best of K, on its graphs and unseen ones
            selected = [run.best_checkpoint(s) for s in config.stages if s != "il" and config.greedy_every]
            if selected and selected[-1].exists():
                policy, _ = load_checkpoint(library, selected[-1], map_location=device)
            evaluation = {}
            policy.eval()
            for name, graph in graphs.items():
                found = search(policy, graph, config.devices, config.search_samples, seed=config.seed)
                if found.best_makespan < best.get(name, np.inf):
                    best[name] = found.best_makespan
                    _write_best(run, config, graphs, name, found.best_assignment, found.best_order, found.best_makespan, "search", episode)
                evaluation[name] = {**_evaluation(found, graph, config.devices), "seen": True, "best_seen": best[name]}
            for name, graph in unseen.items():
                found = search(policy, graph, config.devices, config.search_samples, seed=config.seed)
                evaluation[name] = {**_evaluation(found, graph, config.devices), "seen": False, **reference_makespans({name: graph}, config.devices)[name]}
            run.update_meta(status="finished", evaluation=evaluation, finished=_now())
            return TrainResult(run.path, "finished", episode, evaluation)
    except KeyboardInterrupt:
        run.update_meta(status="interrupted")
        raise
    except BaseException as exc:
        run.update_meta(status="failed", error=f"{type(exc).__name__}: {exc}")
        raise
    finally:
        metrics.close()
        bar.close()


# --- helpers -------------------------------------------------------------------------------------------------
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
        method = min(results, key=results.get)
        out[name] = {"critical_path": results["critical_path"], "best_heuristic": results[method], "best_heuristic_method": method}
    return out


def _crossed(episode: int, steps: int, every: int) -> bool:
    """Whether the last ``steps`` episodes, ending before ``episode``, passed a multiple of ``every``."""
    return episode // every > (episode - steps) // every


def _select_greedy(policy, graphs, devices, oracle, references, episode, selection, path) -> dict[str, Any]:
    """Place every graph greedily; when the mean makespan ÷ reference beats ``selection``'s, save the weights to ``path``."""
    generator = torch.Generator(device=policy_device(policy)).manual_seed(0)
    with torch.no_grad():
        makespans = {name: makespan_of(oracle, g, policy.rollout(g, devices, mode="greedy", generator=generator).assignment) for name, g in graphs.items()}
    score = float(np.mean([makespans[name] / references[name] for name in graphs]))
    evaluations = selection.get("evaluations", 0) + len(graphs)
    if score < selection["score"]:
        save_checkpoint(policy, path, {"episode": episode, "greedy": makespans})
        return {"score": score, "episode": episode, "greedy": makespans, "evaluations": evaluations}
    return {**selection, "evaluations": evaluations}


def _keep_elite(elites: dict[str, dict[str, Any]], name: str, steps: list[dict[str, Any]]) -> None:
    """Remember the update's best rollout of graph ``name`` when it beats the stage's best so far (plain data, for checkpoints)."""
    best = min(steps, key=lambda step: step["makespan"])
    if best["makespan"] < elites.get(name, {}).get("makespan", np.inf):
        rollout = best["rollout"]
        elites[name] = {"makespan": best["makespan"], "order": rollout.order.tolist(), "assignment": rollout.assignment.tolist()}


def _guide(library: Any, elite: dict[str, Any] | None) -> Any:
    """The policy library's ``Guide`` replaying an elite placement (None before there is one)."""
    return None if elite is None else library.Guide(elite["order"], elite["assignment"])


def _teacher_assignment(graph: DataflowGraph, devices: int) -> np.ndarray:
    from ..placers.critical_path import CriticalPathPlacer

    return CriticalPathPlacer().place(graph, devices).assignment


def _evaluation(found: Any, graph: DataflowGraph, devices: int) -> dict[str, Any]:
    teacher = SimulatorOracle(devices).makespan(graph, _teacher_assignment(graph, devices))
    return {"greedy": found.greedy_makespan, "search": found.best_makespan, "search_samples": found.samples, "critical_path": teacher}


def _existing_run(run: RunDirectory, config: TrainConfig) -> dict[str, Any] | None:
    """The meta of the run already in ``run`` (same config), or None when the directory is new or empty."""
    existing = run.existing_config()
    if existing is None:
        if run.path.is_dir() and any(run.path.iterdir()):
            raise ValueError(f"{run.path} is not empty and holds no config.json: not a run directory; choose another --out")
        return None
    if existing != config:
        ours, theirs = dataclasses.asdict(config), dataclasses.asdict(existing)
        differ = [k for k in ours if ours[k] != theirs[k]]
        raise ValueError(f"{run.path} holds a different run (config differs in {', '.join(differ)}); choose another --out or the same settings to resume")
    return run.read_meta() if run.meta_path.exists() else {}


def _initial_policy(config: TrainConfig, library: Any, device: torch.device) -> Any:
    torch.manual_seed(config.seed)
    if config.init_checkpoint:
        policy, _ = load_checkpoint(library, config.init_checkpoint, map_location=device)
        return policy
    return library.make_policy(config.method)


def _best_so_far(run: RunDirectory, graphs: dict[str, DataflowGraph]) -> dict[str, float]:
    best = {}
    for name in graphs:
        path = _best_dir(run, graphs, name) / "placement.json"
        if path.exists():
            best[name] = float(json.loads(path.read_text(encoding="utf-8"))["makespan"])
    return best


def _best_dir(run: RunDirectory, graphs: dict[str, DataflowGraph], name: str) -> Path:
    return run.best_dir if len(graphs) == 1 else run.best_dir / name.replace("/", "_")


def _write_best(run, config, graphs, name, assignment, order, makespan, stage, episode) -> None:
    """``best/`` for one graph; with several graphs ``best/<graph>/`` each, and ``best/`` mirrors the first graph."""
    from ..sim import simulate

    assignment = np.asarray(assignment, dtype=np.int64)
    placement = {
        "graph": name, "devices": config.devices, "assignment": assignment.tolist(),
        "order": np.asarray(order, dtype=np.int64).tolist(), "makespan": float(makespan),
        "stage": stage, "episode": int(episode), "method": config.method,
    }  # fmt: skip
    trace = simulate(graphs[name], assignment, config.devices).trace.to_json()
    if len(graphs) > 1:
        run.write_best(placement, trace, subdir=_best_dir(run, graphs, name).name)
    if name == next(iter(graphs)):
        run.write_best(placement, trace)


def _torch_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("TrainConfig.device is 'cuda' but torch sees no CUDA device")
    return torch.device(name)


def _command_line(config: TrainConfig, out: Path) -> str:
    """The ``workbench train`` command that makes this run: the options, then ``--set`` for every other non-default field."""
    parts = ["workbench", "train", *config.graphs, "--devices", str(config.devices), "--method", config.method,
             "--stages", ",".join(config.stages), "--episodes", ",".join(map(str, config.episodes)),
             "--out", str(out), "--seed", str(config.seed)]  # fmt: skip
    if config.init_checkpoint:
        parts += ["--init-checkpoint", config.init_checkpoint]
    defaults = TrainConfig(graphs=config.graphs)
    covered = {"graphs", "devices", "method", "stages", "episodes", "seed", "init_checkpoint"}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name not in covered and value != getattr(defaults, f.name):
            text = ",".join(map(str, value)) if isinstance(value, tuple) else str(value).lower() if isinstance(value, bool) else str(value)
            parts += ["--set", f"{f.name}={text}"]
    return shlex.join(parts)


def _progress_bar(total: int, initial: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, disable=not enabled, unit="ep", dynamic_ncols=True, file=sys.stderr)


class _StopRequest:
    """SIGINT/SIGTERM ask the loop to stop after the current episode; a second SIGINT aborts at once."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True
        print(f"\n{signal.Signals(signum).name}: stopping after this episode (Ctrl-C again to abort now)", file=sys.stderr)

    def __enter__(self) -> "_StopRequest":
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
