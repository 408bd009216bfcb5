"""``train(config, out)``: the three stages in one loop, writing a run directory as it goes.

Reads top to bottom: open (or resume) the run directory, build the policy,
then :func:`run_stage` for every stage: per episode roll out, update, log
one metrics row, keep the best placement and checkpoint now and then;
finally search the trained policy's placements. Stage I is
:mod:`.imitation`, Stages II and III are :mod:`.reinforce`.

Episodes count from 0 over the whole run and cycle through the graphs in
order. Every episode's sampling is seeded from ``(seed, episode)``, so a
resumed run repeats exactly what the uninterrupted run would have done.
The ``seconds`` column is training wall time since the run began, summed
over resumed sessions. Ctrl-C or SIGTERM stops after the current episode
with a checkpoint (a second Ctrl-C aborts at once); a hard kill loses the
episodes since the last checkpoint, which the next run replays.

A stage's checkpoint is written before ``last``, so a kill between the two
writes leaves the newer state in the stage checkpoint; the resumed run
starts from the newest of them and first copies it to ``last``. A resumed
run first checks every field of its files (:mod:`.resume`,
:mod:`workbench.runs.validate`) and refuses a damaged directory instead of
rewriting it. A non-finite loss or weight, or an update that fails on
non-finite values (Adam overflowing float32), stops the run with status
``diverged``; its checkpoints keep the last finite weights. The status
``finished`` is written last, after ``last`` and the final evaluation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..graph import DataflowGraph
from ..learn.checkpoint import TrainedFor
from ..runs.validate import best_subdir
from .checkpoint import GreedySelection, TrainingState, load_checkpoint, non_finite_failure, save_checkpoint, weights_are_finite
from .config import TrainConfig
from .imitation import imitation_episode
from .oracle import CostOracle, SimulatorOracle, as_oracle, makespan_of, oracle_from_spec, oracle_kind
from .reinforce import linear_schedule, make_scheduler, reinforce_update
from .resume import check_directory, hand_over, remove_stale_temporaries, resume_point
from .run_setup import (
    StopRequest,
    best_so_far,
    episode_bar,
    existing_run,
    load_graphs,
    reference_makespans,
    start_or_resume,
    torch_device,
)
from .rundir import MetricsWriter, RunDirectory
from .search import candidates, search

if TYPE_CHECKING:
    pass

__all__ = ["train", "run_stage", "TrainResult", "load_graphs", "reference_makespans"]


@dataclass(frozen=True)
class TrainResult:
    """What a call to :func:`train` ended with."""

    run_dir: Path
    status: str
    """``finished``, ``interrupted`` (stopped by a signal after a checkpoint) or ``diverged`` (a non-finite loss or weight)."""
    episodes: int
    """Episodes completed in the run so far."""
    evaluation: dict[str, Any]
    """Per graph (finished runs): greedy and best-of-K makespans of the trained policy, with the references."""


@dataclass
class Session:
    """What the stages of one call to :func:`train` share; ``episode``, ``seconds`` and ``best`` advance as it trains."""

    config: TrainConfig
    run: RunDirectory
    graphs: dict[str, DataflowGraph]
    library: Any
    policy: Any
    sim: SimulatorOracle
    real: Any
    metrics: MetricsWriter
    generator: torch.Generator
    stop: StopRequest
    bar: Any
    callback: Callable[[dict[str, Any]], None] | None
    run_id: str
    episode: int = 0
    seconds: float = 0.0
    best: dict[str, float] = dataclasses.field(default_factory=dict)
    saved_at: int | None = None
    """Episode of the newest ``last`` checkpoint this session wrote or resumed from."""


@dataclass
class StageState:
    """A stage's optimizer, LR schedule and per-graph running values (what :class:`TrainingState` saves)."""

    optimizer: torch.optim.Optimizer
    scheduler: Any
    references: dict[str, float]
    baselines: dict[str, float] = dataclasses.field(default_factory=dict)
    selection: GreedySelection = dataclasses.field(default_factory=GreedySelection)
    """The stage's best greedy weights so far (``greedy_every``)."""

    def snapshot(self, session: Session, stage: str) -> TrainingState:
        return TrainingState(
            episode=session.episode,
            stage=stage,
            seconds=session.seconds,
            optimizer=self.optimizer.state_dict(),
            scheduler=self.scheduler.state_dict() if self.scheduler is not None else None,
            baselines=dict(self.baselines),
            references=dict(self.references),
            selection=self.selection,
            torch_rng=torch.get_rng_state(),
            run_id=session.run_id,
        )


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

    Rerunning with the same config and ``out`` resumes from the newest
    checkpoint (or returns at once when the run already finished or diverged).

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
    run = RunDirectory(out)
    graphs = load_graphs(config.graphs)
    unseen = {name: g for name, g in load_graphs(config.eval_graphs).items() if name not in graphs}
    device = torch_device(config.device)
    torch.set_num_threads(config.threads)
    sim = SimulatorOracle(config.devices)
    real = as_oracle(oracle, config.devices) if oracle is not None else oracle_from_spec(config.oracle, config.devices)
    trained_for = TrainedFor.of(graphs.values(), config.devices)

    # --- 1. a new run, or the one already in `out` (every file checked before anything in it is touched) ---------------
    existing = existing_run(run, config)
    previous: dict[str, Any] = existing or {}  # the meta of the run already in `out`
    resume = resume_point(run, config, library, device, existing, trained_for) if existing is not None else None
    checked = check_directory(run, config, graphs, resume.state if resume else None) if existing is not None else None
    if checked is not None and checked.status in ("finished", "diverged"):
        if resume is not None:
            hand_over(run, resume)
        done = config.total_episodes if checked.status == "finished" else int(previous.get("episodes_done") or 0)
        return TrainResult(run.path, checked.status, done, previous.get("evaluation", {}))
    best = best_so_far(run, graphs) if checked is not None else {}
    if run.path.is_dir():
        remove_stale_temporaries(run.path, run.checkpoint_dir, run.best_dir, *[p for p in run.best_dir.glob("*") if p.is_dir()])
    policy, state, run_id = start_or_resume(run, config, graphs, library, device, existing, resume, checked, command)

    # --- 2. the stages, then 3. the trained policy (the best greedy weights when selected) on its graphs and unseen ones
    with _status_on_exit(run):
        policy.to(device)
        policy.trained_for = trained_for
        first = state.episode if state else 0
        session = Session(
            config,
            run,
            graphs,
            library,
            policy,
            sim,
            real,
            run.open_metrics(config, first_episode=first),
            torch.Generator(device=device),
            StopRequest(),
            episode_bar(config.total_episodes, first, progress),
            callback,
            run_id,
            episode=first,
            seconds=state.seconds if state else 0.0,
            best=best,
            saved_at=state.episode if state else None,
        )
        try:
            with session.stop:
                for stage, begin, end in config.stage_bounds():
                    if session.episode >= end:
                        continue
                    status = run_stage(session, stage, begin, end, state)
                    if status != "finished":
                        return TrainResult(run.path, status, session.episode, {})
                return _evaluate(session, device, unseen)
        finally:
            session.metrics.close()
            session.bar.close()


@contextlib.contextmanager
def _status_on_exit(run: RunDirectory) -> Iterator[None]:
    """Mark the run ``interrupted`` (Ctrl-C) or ``failed`` (any other exception, recorded as its error) when the body raises."""
    try:
        yield
    except KeyboardInterrupt:
        run.update_meta(status="interrupted")
        raise
    except BaseException as exc:
        run.update_meta(status="failed", error=f"{type(exc).__name__}: {exc}")
        raise


def run_stage(session: Session, stage: str, first: int, end: int, resume: TrainingState | None = None) -> str:
    """Train ``stage`` (episodes ``first .. end - 1``) from ``session.episode``; ``resume`` restores a stage checkpointed midway.

    Returns ``finished`` (the stage ran to its end), ``interrupted`` (a
    signal; checkpoint written) or ``diverged`` (a non-finite loss or
    weight; nothing written after the last finite checkpoint).
    """
    config, run, policy, graphs = session.config, session.run, session.policy, session.graphs
    oracle = session.real if stage == "real" else session.sim
    state = _stage_state(session, stage, first, end, oracle, resume)
    group = 1 if stage == "il" else config.rollouts_per_update
    names = list(graphs)
    while session.episode < end:
        episode = session.episode
        name = names[(first + (episode - first) // group) % len(names)]
        session.generator.manual_seed(config.seed * 1_000_003 + episode)
        lr = state.optimizer.param_groups[0]["lr"]
        began = time.perf_counter()
        try:
            steps = _update(session, state, stage, first, end, name, oracle)
        except (RuntimeError, ValueError) as exc:  # Adam overflowing float32 (lr=1e38), NaN logits in a rollout, ...
            problem = non_finite_failure(exc, policy)
            if problem is None:
                raise
            return _diverge(session, stage, episode, name, problem)
        _log_episodes(session, stage, name, oracle, steps, lr, (time.perf_counter() - began) / len(steps), state.references[name])
        problem = _divergence(steps, policy)
        if problem:
            return _diverge(session, stage, episode, name, problem)

        stage_done = session.episode == end
        if stage != "il" and config.greedy_every and (stage_done or _crossed(session.episode, len(steps), config.greedy_every)):
            state.selection = _select_greedy(session, stage, oracle, state.references, state.selection)
            run.update_meta(**{f"greedy_selection_{stage}": state.selection.to_meta()})

        # --- checkpoints (only between updates, so a resumed run replays whole updates; the stage's before `last`) ----
        if stage_done or session.stop.requested or _crossed(session.episode, len(steps), config.checkpoint_every):
            session.metrics.sync()
            snapshot = state.snapshot(session, stage)
            if stage_done:
                save_checkpoint(policy, run.stage_checkpoint(stage), snapshot)
            save_checkpoint(policy, run.last_checkpoint, snapshot)
            session.saved_at = session.episode
            run.update_meta(episodes_done=session.episode)
        if session.stop.requested:
            run.update_meta(status="interrupted")
            session.bar.write(f"stopped after episode {session.episode - 1}; rerun the same command to resume from {run.last_checkpoint}")
            return "interrupted"
    return "finished"


def _update(session: Session, state: StageState, stage: str, first: int, end: int, name: str, oracle: Any) -> list[dict[str, Any]]:
    """One update of ``stage`` on graph ``name`` from ``session.episode``: its rollouts' metrics (with the rollouts)."""
    config, policy, graph, episode = session.config, session.policy, session.graphs[name], session.episode
    if stage == "il":
        epsilon = linear_schedule(config.il_epsilon, 0.0, episode - first, end - first) if config.il_epsilon_decay else None
        steps = [imitation_episode(policy, state.optimizer, graph, config, session.generator, epsilon)]
        steps[0]["makespan"] = session.sim.makespan(graph, steps[0]["rollout"].assignment)
        steps[0]["reward"] = -steps[0]["makespan"] / state.references[name]
        return steps
    group = config.rollouts_per_update
    steps = reinforce_update(
        policy,
        state.optimizer,
        graph,
        oracle,
        state.references[name],
        state.baselines.get(name),
        linear_schedule(config.rl_epsilon_start, config.rl_epsilon_end, episode - first, end - first),
        config,
        session.generator,
        min(group, end - episode),
        seen=(episode - first) // (group * len(session.graphs)),
        wait_weight=linear_schedule(config.transfer_wait_weight, 0.0, episode - first, end - first),
    )
    state.baselines[name] = steps[-1]["new_baseline"]
    state.scheduler.step()
    return steps


def _diverge(session: Session, stage: str, episode: int, name: str, problem: str) -> str:
    """End the run ``diverged`` in ``episode``: ``meta.json`` says what and where; the checkpoints keep the last finite weights."""
    kept = (
        f"{session.run.last_checkpoint.name} keeps the last finite weights (episode {session.saved_at})"
        if session.saved_at
        else "no checkpoint was written before"
    )
    session.run.update_meta(
        status="diverged", error=f"diverged in episode {episode} (stage {stage}, graph {name}): {problem}; {kept}", diverged_at=episode
    )
    session.bar.write(f"diverged in episode {episode}: {problem}; stopped ({kept})")
    return "diverged"


def _stage_state(session: Session, stage: str, first: int, end: int, oracle: Any, resume: TrainingState | None) -> StageState:
    """A fresh optimizer (and LR schedule) for ``stage``, restored from ``resume`` when it was checkpointed inside the stage."""
    config, policy = session.config, session.policy
    if stage == "il":
        optimizer, scheduler = torch.optim.Adam(policy.parameters(), lr=config.il_lr), None
    else:
        optimizer = torch.optim.Adam(policy.parameters(), lr=config.rl_lr_start)
        scheduler = make_scheduler(optimizer, config, end - first)
    if resume is not None and resume.stage == stage and first < resume.episode < end:
        optimizer.load_state_dict(resume.optimizer)
        if scheduler is not None:
            assert resume.scheduler is not None  # checkpointed inside this stage, whose scheduler it saved
            scheduler.load_state_dict(resume.scheduler)
        return StageState(optimizer, scheduler, dict(resume.references), dict(resume.baselines), resume.selection)
    references = {name: makespan_of(oracle, g, _teacher_assignment(g, config.devices)) for name, g in session.graphs.items()}
    state = StageState(optimizer, scheduler, references)
    if stage != "il" and config.greedy_every:  # the starting weights compete too: the stage never ends worse than it began
        state.selection = _select_greedy(session, stage, oracle, references, state.selection)
    return state


def _log_episodes(
    session: Session, stage: str, name: str, oracle: Any, steps: list[dict[str, Any]], lr: float, seconds_each: float, reference: float
) -> None:
    """One metrics row per rollout of the update; keep the best placement; advance the episode count."""
    config, graph = session.config, session.graphs[name]
    for step in steps:
        session.seconds += seconds_each
        rollout = step.pop("rollout")
        simulated = step["makespan"] if stage != "real" else session.sim.makespan(graph, rollout.assignment)
        row = {
            "stage": stage,
            "episode": session.episode,
            "graph": name,
            "makespan": step["makespan"],
            "reward": step["reward"],
            "baseline": step.get("baseline"),
            "loss": step["loss"],
            "loss_policy": step.get("loss_policy"),
            "loss_entropy": step["loss_entropy"],
            "loss_imitation": step.get("loss_imitation"),
            "teacher_agreement": step.get("teacher_agreement"),
            "epsilon": step["epsilon"],
            "lr": lr,
            "seconds": round(session.seconds, 4),
            "oracle": oracle_kind(oracle) if stage != "il" else "sim",
        }
        if "real" in config.stages:
            row["predicted"] = simulated if stage == "real" else None
        session.metrics.append_row(row)
        if simulated < session.best.get(name, np.inf):
            session.best[name] = simulated
            _write_best(session.run, config, session.graphs, name, rollout.assignment, rollout.order, simulated, stage, session.episode)
        session.episode += 1
        session.bar.update(1)
        session.bar.set_postfix(stage=stage, graph=name[:16], vs_cp=f"{step['makespan'] / reference:.3f}")
        if session.callback is not None:
            session.callback(row)


def _divergence(steps: list[dict[str, Any]], policy: Any) -> str | None:
    """What went non-finite in the last update (its loss, or the weights after it), or None."""
    losses = [step["loss"] for step in steps]
    if not all(math.isfinite(loss) for loss in losses):
        return f"the loss is {next(loss for loss in losses if not math.isfinite(loss))}"
    if not weights_are_finite(policy):
        return "the weights hold NaN or infinite values"
    return None


def _evaluate(session: Session, device: torch.device, unseen: dict[str, DataflowGraph]) -> TrainResult:
    """Greedy and best-of-K placements of the trained policy (the best greedy weights when selected), seen and unseen graphs."""
    config, run, policy, best = session.config, session.run, session.policy, session.best
    selected = [run.best_checkpoint(s) for s in config.stages if s != "il" and config.greedy_every]
    if selected and selected[-1].exists():
        policy, _ = load_checkpoint(session.library, selected[-1], map_location=device)
    evaluation = {}
    policy.eval()
    for name, graph in session.graphs.items():
        found = search(policy, graph, config.devices, config.search_samples, seed=config.seed)
        if found.best_makespan < best.get(name, np.inf):
            best[name] = found.best_makespan
            _write_best(
                run, config, session.graphs, name, found.best_assignment, found.best_order, found.best_makespan, "search", session.episode
            )
        evaluation[name] = {**_evaluation(found, graph, config.devices), "seen": True, "best_seen": best[name]}
    for name, graph in unseen.items():
        found = search(policy, graph, config.devices, config.search_samples, seed=config.seed)
        evaluation[name] = {
            **_evaluation(found, graph, config.devices),
            "seen": False,
            **reference_makespans({name: graph}, config.devices)[name],
        }
    run.finish(episodes_done=session.episode, evaluation=evaluation)
    return TrainResult(run.path, "finished", session.episode, evaluation)


# --- helpers -------------------------------------------------------------------------------------------------


def _crossed(episode: int, steps: int, every: int) -> bool:
    """Whether the last ``steps`` episodes, ending before ``episode``, passed a multiple of ``every``."""
    return episode // every > (episode - steps) // every


def _select_greedy(
    session: Session, stage: str, oracle: CostOracle, references: Mapping[str, float], selection: GreedySelection
) -> GreedySelection:
    """Score the reported placement (best of ``selection_samples`` candidates, the greedy one first) of every graph and log
    it (``greedy.csv``); when the mean makespan ÷ reference beats ``selection``'s, keep the weights.

    The kept weights are the stage's ``<stage>-best`` checkpoint.
    """
    policy, graphs, episode, config = session.policy, session.graphs, session.episode, session.config
    makespans = {
        name: min(makespan_of(oracle, g, r.assignment) for r in candidates(policy, g, config.devices, config.selection_samples))
        for name, g in graphs.items()
    }
    session.run.append_greedy(stage, episode, session.seconds, makespans)
    score = float(np.mean([makespans[name] / references[name] for name in graphs]))
    evaluations = selection.evaluations + len(graphs) * config.selection_samples
    if score < selection.score:
        save_checkpoint(policy, session.run.best_checkpoint(stage), {"episode": episode, "greedy": makespans})
        return GreedySelection(score, episode, makespans, evaluations)
    return dataclasses.replace(selection, evaluations=evaluations)


def _teacher_assignment(graph: DataflowGraph, devices: int) -> np.ndarray:
    from ..placers.critical_path import CriticalPathPlacer

    return CriticalPathPlacer().place(graph, devices).assignment


def _evaluation(found: Any, graph: DataflowGraph, devices: int) -> dict[str, Any]:
    teacher = SimulatorOracle(devices).makespan(graph, _teacher_assignment(graph, devices))
    return {"greedy": found.greedy_makespan, "search": found.best_makespan, "search_samples": found.samples, "critical_path": teacher}


def _write_best(
    run: RunDirectory,
    config: TrainConfig,
    graphs: Mapping[str, DataflowGraph],
    name: str,
    assignment: np.ndarray,
    order: np.ndarray | Sequence[int],
    makespan: float,
    stage: str,
    episode: int,
) -> None:
    """``best/`` for one graph; with several graphs ``best/<graph>/`` each, and ``best/`` mirrors the first graph."""
    from ..placers.placement_file import placement_record
    from ..sim import simulate

    assignment = np.asarray(assignment, dtype=np.int64)
    placement = placement_record(
        graphs[name],
        assignment,
        config.devices,
        graph=name,
        method=config.method,
        makespan=float(makespan),
        order=np.asarray(order, dtype=np.int64).tolist(),
        stage=stage,
        episode=int(episode),
    )
    trace = simulate(graphs[name], assignment, config.devices).trace.to_json()
    if len(graphs) > 1:
        run.write_best(placement, trace, subdir=best_subdir(tuple(graphs), name))
    if name == next(iter(graphs)):
        run.write_best(placement, trace)
