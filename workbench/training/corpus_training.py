"""One constructive policy for many graphs: distil search into it across the corpus's training split, at several device counts.

The multi-graph runs of :func:`workbench.training.train` imitate critical_path
in Stage I, so their policy can at best learn to be critical_path; across
unseen graphs it placed every one worse than critical_path. Here Stage I
imitates a stronger teacher: for every training graph of the corpus
(:mod:`workbench.corpus`) and every device count, local_search started from
the best heuristic (``teacher_budget`` simulator evaluations) finds a
placement, and the policy learns to replay it: ops in critical_path's order
(largest bottom level first), devices renamed in order of first use (the
devices are interchangeable, and a policy facing empty devices picks the
first), in the teacher's own states (behaviour cloning) or in the learner's
ε-greedy rollouts (DAgger, Ross, Gordon, Bagnell, AISTATS 2011). This is a distillation of search into a
one-pass policy, as GO (Zhou et al., NeurIPS 2020) and REGAL (Paliwal et al.,
ICLR 2020) train one policy across a family of graphs and apply it zero-shot.

Stage II across graphs (``objective="reinforce"``), usually from a Stage I
run's weights (``start_from``): REINFORCE over the training pairs, K samples
of one graph per update with their mean as the shared baseline (POMO, Kwon et
al., NeurIPS 2020), rewarded ``−makespan / critical_path's makespan`` on that
graph, so the advantage is the gain over critical_path relative to the
samples' mean and every graph's signal is on one scale
(:func:`workbench.training.reinforce.reinforce_update`). With
``select_every`` the greedy policy places the ``select_split`` graphs every
that many updates (and before the first), and ``checkpoints/<stage>-best.safetensors``
keeps the weights that beat critical_path on the most of them (the
zero-shot target's measure; ties broken by the mean makespan over critical_path's).

A run directory (:mod:`workbench.runs`) holds ``config.json``, ``meta.json``
(the method, graphs, device counts and stage: ``il`` imitates, ``sim`` is
reinforce on the simulator), ``teachers.json`` (the teacher placements,
written as they are found), ``metrics.csv`` (one row per episode) and
``checkpoints/last.safetensors`` (weights, optimizer state, episode), with
selection also ``selection.csv`` and ``checkpoints/<stage>-best.safetensors``;
the same command resumes it, and a larger ``--episodes`` extends it. :func:`evaluate_split` places a split's graphs
zero-shot, greedily and best of K, beside critical_path and the best heuristic.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import torch

from ..corpus import CorpusEntry, build, entries
from ..fileio import atomic_write_json, atomic_write_text
from ..graph import DataflowGraph
from ..learn.policy_config import PolicyConfig
from ..placers import methods
from ..provenance import machine
from ..runs import CsvLog, RunWriter, try_read_json
from ..runs.validate import CorpusPlan, check_corpus_run, damaged, read_json_object
from .checkpoint import non_finite_failure
from .config import (
    TrainConfig,
    config_from_arguments,
    device_counts,
    nest_policy,
    nested_from_dict,
    parse_trainer_arguments,
    trainer_parser,
)
from .corpus_evaluation import evaluate_split, greedy_score, summary
from .imitation import apply_gradient
from .oracle import SimulatorOracle
from .reinforce import reinforce_update

__all__ = ["CorpusTrainConfig", "teacher_guide", "train_on_corpus", "residual_policy", "greedy_score", "evaluate_split", "summary", "main"]

OBJECTIVES = ("imitation", "reinforce")
ROLLOUTS = ("teacher", "epsilon")
RESUMABLE = ("episodes", "checkpoint_every")
"""Settings a resumed run may change: how long it trains and how often it saves."""
METRICS = (  # the columns of metrics.csv: one row per episode
    "episode",
    "graph",
    "devices",
    "loss",
    "teacher_agreement",
    "makespan_over_teacher",
    "makespan_over_critical_path",
    "seconds",
)
SELECTION = ("episode", "wins", "mean_over_critical_path", "best")
"""The columns of ``selection.csv``: one row per greedy scoring of the held-out split."""
FLAT_POLICY_FIELDS = ("place_rule_weight", "place_rule", "place_rule_scale", "select_rule_weight")
"""Fields of the nested policy that were flat :class:`CorpusTrainConfig` fields before the nesting: an older ``config.json``
and the command line (``--place-rule-weight``) still name them so."""


@dataclass(frozen=True)
class CorpusTrainConfig:
    """One cross-graph distillation run (saved as the run's ``config.json``)."""

    objective: str = "imitation"
    """``imitation`` (Stage I: replay the search teacher) or ``reinforce`` (Stage II: REINFORCE against critical_path's makespan)."""
    start_from: str = ""
    """A checkpoint whose weights (not optimizer state) a new run starts from, e.g. a Stage I run's ``last.safetensors``; empty: fresh."""
    method: str = "doppler"
    """Learned method to train (``workbench.learn.make_policy`` name): doppler, placeto, gdp, ..."""
    devices: tuple[int, ...] = (2, 4, 8)
    """Device counts to train at; every training graph is paired with each of them that its manifest entry lists."""
    teacher_budget: int = 2000
    """Simulator evaluations of the local_search run that makes each teacher placement."""
    episodes: int = 1500
    """Episodes in all (``reinforce``: updates of ``rollouts_per_update`` samples each), cycling over the (graph, devices) pairs in a
    seeded shuffled order."""
    learning_rate: float = 1e-3
    """Adam's learning rate (constant)."""
    rollout: str = "teacher"
    """States to learn in: ``teacher`` (replay the teacher's placement: behaviour cloning, every target consistent with the state) or
    ``epsilon`` (the learner's own ε-greedy rollouts, DAgger: it also sees states off the teacher's path, where the teacher's device
    names may no longer fit the state).
    """
    epsilon: float = 0.2
    """``rollout="epsilon"``: probability of a uniform legal action in the learner's rollouts."""
    policy: PolicyConfig = PolicyConfig()
    """A fresh policy's architecture (:class:`~workbench.learn.PolicyConfig`, nested; its method is ``method``), e.g. residual
    rule heads: ``policy.place_rule_weight`` β > 0 adds −β × each device's delay under ``policy.place_rule`` (``earliest_start``,
    critical_path's, or ``affinity``, the affinity teacher's; ÷ the time of ``policy.place_rule_scale``) to PLC's logits, and
    ``policy.select_rule_weight`` α > 0 α × bottom level (÷ the largest) to SEL's, each head's last layer starting at zero, so the
    greedy placement starts as the rules' (with ``doppler_plc_only``, β alone does). ``--place-rule-weight``, ``--place-rule``,
    ``--place-rule-scale`` and ``--select-rule-weight`` (their names before the nesting) and ``--set policy.FIELD=VALUE`` set it."""
    rollouts_per_update: int = 8
    """``reinforce``: samples of one graph per update; their mean reward is the shared baseline."""
    select_every: int = 0
    """``reinforce``: place the ``select_split`` greedily every this many episodes (and before the first), keep the best; 0: never."""
    select_split: str = "validation"
    """Corpus split the selection places."""
    select_devices: tuple[int, ...] = ()
    """Device counts the selection places its split at (every one its manifest entry lists); empty: the training ``devices``."""
    entropy_weight: float = 1e-3
    """Entropy bonus weight."""
    grad_clip: float = 1.0
    """Gradient norm clip per update (0 disables)."""
    seed: int = 0
    """Seed of the initial weights, the episode order, the rollouts and the teacher searches."""
    checkpoint_every: int = 100
    """Write ``checkpoints/last.safetensors`` and ``metrics.csv`` every this many episodes (and at the end)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "devices", tuple(int(d) for d in self.devices))
        object.__setattr__(self, "select_devices", tuple(int(d) for d in self.select_devices))
        if self.method not in methods("learned"):
            raise ValueError(f"method must be a learned method ({', '.join(methods('learned'))}), got {self.method!r}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        if self.rollout not in ROLLOUTS:
            raise ValueError(f"rollout must be one of {', '.join(ROLLOUTS)}, got {self.rollout!r}")
        if not self.devices or min(self.devices) < 1:
            raise ValueError(f"devices must be one or more counts >= 1, got {self.devices}")
        if self.select_devices and min(self.select_devices) < 1:
            raise ValueError(f"select_devices must be counts >= 1 (or none: the training devices), got {self.select_devices}")
        object.__setattr__(self, "policy", nest_policy(type(self).__name__, self.policy, self.method))
        if (self.policy.place_rule_weight or self.policy.select_rule_weight) and self.start_from:
            raise ValueError("place_rule_weight and select_rule_weight build a fresh policy; a start_from policy keeps its own")
        if self.select_every < 0:
            raise ValueError(f"select_every must be >= 0, got {self.select_every}")
        for name in ("teacher_budget", "episodes", "checkpoint_every", "rollouts_per_update"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        check_numbers(self, {"learning_rate": (0.0, 1e3), "epsilon": (0.0, 1.0), "entropy_weight": (-1e6, 1e6), "grad_clip": (0.0, 1e12)})

    def policy_config(self) -> PolicyConfig:
        """The architecture of a fresh policy (``policy``)."""
        return self.policy

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "config") -> CorpusTrainConfig:
        """The config a ``config.json`` holds; one written before ``policy`` was nested (its :data:`FLAT_POLICY_FIELDS` flat)
        reads as the same config."""
        return nested_from_dict(cls, data, FLAT_POLICY_FIELDS, {}, source)


def check_numbers(config: Any, ranges: dict[str, tuple[float, float]]) -> None:
    """Each named number of ``config`` is finite and in its ``(low, high)`` range (a learning rate of 0 or NaN is refused:
    one that is not finite would end the run diverged, or with clipping silently off)."""
    for name, (low, high) in ranges.items():
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and low <= value <= high):
            raise ValueError(f"{type(config).__name__}.{name} must be a finite number in {low:g} .. {high:g}, got {value!r}")
        if name == "learning_rate" and value <= 0:
            raise ValueError(f"{type(config).__name__}.{name} must be above 0, got {value!r}")


def pair_key(entry: CorpusEntry, devices: int) -> str:
    return f"{entry.name}@{devices}"


def teacher_guide(graph: DataflowGraph, devices: int, assignment: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(order, assignment)`` to replay: ops by bottom level (critical_path's own op choice), devices renamed in order of first use.

    The order is only the order of the policy's decisions (the simulator runs
    each device's ops as their inputs arrive), so SEL imitates critical_path's
    consistent choice and PLC the teacher's devices.
    """
    from ..learn.features import static_features

    rank = np.empty(graph.num_nodes, dtype=np.int64)
    rank[np.asarray(graph.topological_order)] = np.arange(graph.num_nodes)
    order = np.lexsort((rank, -static_features(graph).bottom_level))
    first_use = list(dict.fromkeys(int(d) for d in np.asarray(assignment)[order]))
    rename = np.arange(devices)
    rename[first_use] = np.arange(len(first_use))
    return order, rename[np.asarray(assignment)]


def _teachers(out: Path, pairs: list[tuple[CorpusEntry, int]], graphs: dict[str, DataflowGraph], config: CorpusTrainConfig) -> dict:
    """The teacher placement of every pair, from ``teachers.json`` where it is there already (written after each new one)."""
    from ..placers import place

    path = out / "teachers.json"
    found: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    for entry, devices in pairs:
        key = pair_key(entry, devices)
        if key in found:
            continue
        graph = graphs[entry.name]
        began = time.perf_counter()
        searched = place(graph, "local_search", devices, seed=config.seed, budget=config.teacher_budget)
        found[key] = {
            "assignment": searched.assignment.tolist(),
            "makespan": searched.makespan,
            "critical_path": place(graph, "critical_path", devices).makespan,
            "seconds": time.perf_counter() - began,
        }
        atomic_write_json(path, found, indent=None)
    return found


def _plan(
    config: CorpusTrainConfig,
    pairs: list[tuple[CorpusEntry, int]],
    graphs: dict[str, DataflowGraph],
    critical: dict[str, float],
    held_out: list[tuple[str, DataflowGraph, int, float]],
) -> CorpusPlan:
    """What the run does episode by episode, for the check of its directory before it resumes."""
    from ..sim import lower_bound

    return CorpusPlan(
        imitation=config.objective == "imitation",
        episodes=config.episodes,
        checkpoint_every=config.checkpoint_every,
        select_every=config.select_every,
        pair_of=lambda episode: pair_key(*pairs[_pair_index(config.seed, len(pairs), episode)]),
        pairs={pair_key(e, d): (graphs[e.name], d, critical[pair_key(e, d)]) for e, d in pairs},
        floors={pair_key(e, d): lower_bound(graphs[e.name], d) / critical[pair_key(e, d)] for e, d in pairs},
        selection_floor=min((lower_bound(g, d) / c for _, g, d, c in held_out), default=0.0),
    )


def train_on_corpus(
    out: str | Path, config: CorpusTrainConfig, split: str = "train", corpus: list[CorpusEntry] | None = None, command: str = ""
) -> Path:
    """Train (or resume) the run in ``out`` on the ``split`` of ``corpus`` (default: the shipped manifest), ``command`` in
    its ``meta.json``; returns the checkpoint to use: ``<stage>-best`` when the run selects, else ``last``."""
    from ..learn import Guide
    from ..learn.checkpoint import TrainedFor
    from ..placers import place
    from ..progress import progress_bar
    from ..sim import Evaluator

    out = Path(out)
    run = RunWriter(out)
    chosen = entries(split, manifest=corpus)
    extra = {"split": split, "graphs": [e.name for e in chosen]}
    wanted = json.loads(json.dumps({**dataclasses.asdict(config), **extra}))
    if run.config_path.is_file():
        check_held_config(run.config_path, config, extra, RESUMABLE)
    graphs = {e.name: build(e) for e in chosen}
    pairs = [(e, d) for e in chosen for d in config.devices if d in e.devices]
    imitation = config.objective == "imitation"
    critical = {pair_key(e, d): place(graphs[e.name], "critical_path", d).makespan for e, d in pairs}
    stage = "il" if imitation else "sim"  # as CorpusPlan.stage names it
    last, best = run.last_checkpoint, run.best_checkpoint(stage)
    trained_for = TrainedFor.of(graphs.values(), max(config.devices))
    held_out = _selection_pairs(config, corpus) if config.select_every else []
    torch.manual_seed(config.seed)
    policy = checked_policy(last, trained_for) if last.is_file() else _fresh_policy(config)
    optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
    generator = torch.Generator().manual_seed(config.seed)
    first = _restore(last, policy, optimizer, generator) if last.is_file() else 0
    checked = check_corpus_run(
        out, _plan(config, pairs, graphs, critical, held_out), first
    )  # every file checked before anything in the run is written
    if checked.best_at is not None:
        checked_policy(best, trained_for)
    if checked.status == "diverged":
        kept = f"{last} keeps the last finite weights (episode {first})" if first else "no checkpoint was written before"
        raise RunDiverged(f"{out} {checked.reason}; {kept}. Nothing was changed; start a new run (a lower learning_rate?)")
    if checked.status == "finished":
        finished(run)
        return best if held_out else last
    run.start(wanted, {**{k: wanted[k] for k in ("method", "graphs", "devices", "seed", "split")}, "stages": [stage], "command": command})
    run.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    teachers = _teachers(out, pairs, graphs, config) if imitation else {}
    metrics, selection = CsvLog(run.metrics_path, METRICS), CsvLog(out / "selection.csv", SELECTION)
    metrics.start(keep=lambda row: int(row["episode"]) < first)  # the rows the checkpoint has seen
    selections: list[dict[str, Any]] = list(selection.start(keep=lambda row: int(row["episode"]) <= first))
    rows: list[dict[str, Any]] = []  # since the last checkpoint
    policy.trained_for = trained_for
    guides = {
        pair_key(e, d): Guide(*teacher_guide(graphs[e.name], d, np.asarray(teachers[pair_key(e, d)]["assignment"])))
        for e, d in (pairs if imitation else [])
    }
    evaluators = {pair_key(e, d): Evaluator(graphs[e.name], d) for e, d in pairs}
    if held_out and not selections:
        _select(policy, held_out, 0, selections, best, selection)
    saved = first
    bar = progress_bar(range(first, config.episodes), desc=f"corpus {config.objective}", unit="ep", initial=first, total=config.episodes)
    for episode in bar:
        entry, devices = pairs[_pair_index(config.seed, len(pairs), episode)]
        key, graph = pair_key(entry, devices), graphs[entry.name]
        began = time.perf_counter()
        row: dict[str, Any] = {"episode": episode, "graph": entry.name, "devices": devices}
        try:
            if imitation:
                rollout = policy.rollout(
                    graph, devices, mode=config.rollout, epsilon=config.epsilon, generator=generator, teacher=True, guide=guides[key]
                )
                loss = float(_imitation_step(policy, optimizer, rollout, config))
                makespans = [float(evaluators[key](rollout.assignment))]
                row.update(teacher_agreement=rollout.teacher_agreement, makespan_over_teacher=makespans[0] / teachers[key]["makespan"])
            else:
                steps = reinforce_update(
                    policy, optimizer, graph, SimulatorOracle(devices), critical[key], None, 0.0, _stage_two(config, key, devices),
                    generator, count=config.rollouts_per_update, shared_baseline=True,
                )  # fmt: skip
                loss, makespans = sum(step["loss"] for step in steps), [step["makespan"] for step in steps]
        except (RuntimeError, ValueError) as error:  # Adam overflowing float32, NaN logits in a rollout, ...
            problem = non_finite_failure(error, policy)
            if problem is None:
                raise
            rows.append({**row, "loss": math.nan, "seconds": time.perf_counter() - began})
            _diverge(run, metrics, rows, f"diverged in episode {episode} ({key}): {problem}", last, saved)
        row.update(loss=loss, makespan_over_critical_path=float(np.mean(makespans)) / critical[key], seconds=time.perf_counter() - began)
        rows.append(row)
        if not math.isfinite(loss):
            _diverge(run, metrics, rows, f"diverged in episode {episode} ({key}): the loss is {loss}", last, saved)
        done = episode + 1
        if held_out and done % config.select_every == 0:
            _select(policy, held_out, done, selections, best, selection)
        if done % config.checkpoint_every == 0 or done == config.episodes:
            with metrics:  # the rows first: a kill before the checkpoint leaves rows it replays, never a checkpoint without its rows
                metrics.append(rows)
                metrics.sync()
            policy.save(last, extra={"episode": done, "optimizer": optimizer.state_dict(), "torch_rng": generator.get_state()})
            rows, saved = [], done
    run.finish(episodes_done=config.episodes)
    return best if held_out else last


def finished(run: RunWriter) -> None:
    """A finished run's ``meta.json`` says so (a kill after the last checkpoint left it ``running``); else nothing is written."""
    if try_read_json(run.meta_path).get("status") != "finished" and run.meta_path.is_file():
        run.finish()


class RunDiverged(ValueError):
    """A corpus or gate run that met a non-finite loss or weights: its last row says so, and a rerun refuses it."""


def _pair_index(seed: int, count: int, episode: int) -> int:
    """Which of the run's ``count`` pairs ``episode`` trains: every pair once per epoch, in a seeded shuffled order."""
    epoch, index = divmod(episode, count)
    return int(np.random.default_rng([seed, epoch]).permutation(count)[index])


def check_held_config(path: Path, config: Any, extra: Mapping[str, Any] | None = None, resumable: tuple[str, ...] = ()) -> None:
    """The run's ``config.json`` holds ``config`` (and the ``extra`` settings beside it), but for the ``resumable`` settings, which
    must be whole numbers >= 1. Both are compared as ``type(config).from_dict`` reads them, so a file in an older form (the
    policy's fields flat, a setting added since absent: at its default) holds the same run; a file that is not a JSON object,
    or other settings, are refused."""
    extra = dict(extra or {})
    held = read_json_object(path)
    for name in resumable:
        if name in held and (type(held[name]) is not int or held[name] < 1):
            raise damaged(path, f"{str(held[name])[:40]} is not a whole number >= 1", field=name)
    found = type(config).from_dict({k: v for k, v in held.items() if k not in extra}, str(path))
    wanted, normal = (
        _flat_settings({**dataclasses.asdict(c), **e}) for c, e in ((config, extra), (found, {k: held[k] for k in extra if k in held}))
    )
    differ = sorted(k for k in wanted.keys() | normal.keys() if k.partition(".")[0] not in resumable and wanted.get(k) != normal.get(k))
    if differ:
        raise ValueError(f"{path.parent} holds a run with other settings ({', '.join(differ)}); choose another folder or the same settings")


def _flat_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` as JSON has them, the nested policy's as ``policy.FIELD`` (so a difference names the field)."""
    plain = json.loads(json.dumps(settings))
    policy = plain.pop("policy", None) or {}
    return plain | {f"policy.{name}": value for name, value in policy.items()}


def checked_policy(path: Path, trained_for: Any) -> Any:
    """The policy at ``path`` (its header and weights checked) when it was trained for ``trained_for`` (the run's)."""
    from ..learn import load_policy

    policy = load_policy(path)
    if policy.trained_for != trained_for:
        found = policy.trained_for.describe() if policy.trained_for is not None else "no graph (null)"
        raise damaged(path, f"trained for {found[:200]}, but this run trains {trained_for.describe()[:200]}", field="trained_for")
    return policy


def _fresh_policy(config: CorpusTrainConfig) -> Any:
    """The policy a new run starts from: ``start_from``'s weights, or fresh ones of ``policy`` (:func:`rule_started`)."""
    from ..learn import load_policy

    if config.start_from:
        policy = load_policy(config.start_from)
        if policy.method != config.method:
            raise ValueError(f"start_from {config.start_from} holds a {policy.method} policy, not {config.method}")
        return policy
    return rule_started(config.policy)


def _restore(last: Path, policy: Any, optimizer: torch.optim.Optimizer, generator: torch.Generator) -> int:
    """Restore Adam's state and the rollouts' generator from ``last``'s training state, each field checked; its episode."""
    extra = policy.checkpoint_extra
    episode, rng = extra.get("episode"), extra.get("torch_rng")
    if type(episode) is not int or episode < 1:
        raise damaged(last, f"{str(episode)[:40]} is not a count of episodes (a whole number >= 1)", field="episode")
    if not isinstance(rng, torch.Tensor) or rng.dtype != torch.uint8 or rng.shape != generator.get_state().shape:
        raise damaged(last, "not the state of a torch generator", field="torch_rng")
    try:
        optimizer.load_state_dict(extra["optimizer"])
    except (KeyError, TypeError, ValueError, IndexError, RuntimeError, AttributeError) as error:
        raise damaged(last, f"not Adam's state for this policy ({type(error).__name__}: {str(error)[:80]})", field="optimizer") from None
    generator.set_state(rng)
    return episode


def _diverge(run: RunWriter, metrics: CsvLog, rows: list[dict[str, Any]], reason: str, last: Path, saved: int) -> NoReturn:
    """End the run diverged: the rows since the checkpoint are logged, the last with its non-finite loss (a rerun finds
    it there and refuses), ``meta.json`` says so, and :class:`RunDiverged` says what and where."""
    with metrics:
        metrics.append(rows)
        metrics.sync()
    run.update_meta(status="diverged", diverged_at=int(rows[-1]["episode"]), error=reason)
    kept = f"{last} keeps the last finite weights (episode {saved})" if saved else "no checkpoint was written before"
    raise RunDiverged(f"{run.path} {reason}; {kept}")


def residual_policy(
    method: str,
    place_rule_weight: float,
    select_rule_weight: float = 0.0,
    place_rule_scale: str = "graph",
    place_rule: str = "earliest_start",
    select_rule: str = "bottom_level",
    gate_rules: tuple[str, ...] = (),
) -> Any:
    """A fresh doppler ``method`` on a teacher's rules (PLC adds −β × the device's delay, SEL α × bottom level), learned logits at zero.

    With β > 0 its greedy device choice is the rule's: critical_path's (the
    first device where the op starts earliest) or, with ``place_rule="affinity"``,
    the affinity teacher's; with α > 0 too (or ``doppler_plc_only``, whose SEL
    is the rule itself) its whole greedy placement is the rule's: critical_path's,
    or ``teacher_assignment(graph, devices, "affinity")``; with ``select_rule="earliest_start"`` and PLC on
    ``earliest_start``, the ``etf`` placer's. ``gate_rules`` adds a fresh gate between rule pairs (it picks the first).
    """
    return rule_started(
        PolicyConfig(
            method=method,
            place_rule_weight=place_rule_weight,
            place_rule=place_rule,
            place_rule_scale=place_rule_scale,
            select_rule_weight=select_rule_weight,
            select_rule=select_rule,
            gate_rules=gate_rules,
        )
    )


def rule_started(config: PolicyConfig) -> Any:
    """A fresh policy of ``config`` whose heads with a rule weight (``place_rule_weight``, ``select_rule_weight``) start with
    their learned logits at zero, so their greedy choices start as the rules' (:func:`residual_policy`)."""
    from ..learn import make_policy

    policy = make_policy(config.method, config)
    for weight, head in ((config.place_rule_weight, "plc_head"), (config.select_rule_weight, "sel_head")):
        if weight and hasattr(policy, head):
            torch.nn.init.zeros_(getattr(policy, head).layers[-1].weight)
            torch.nn.init.zeros_(getattr(policy, head).layers[-1].bias)
    return policy


def _imitation_step(policy: Any, optimizer: torch.optim.Optimizer, rollout: Any, config: CorpusTrainConfig) -> torch.Tensor:
    loss = rollout.imitation_loss - config.entropy_weight * rollout.entropy
    apply_gradient(policy, optimizer, loss, config.grad_clip)
    return loss.detach()


def _stage_two(config: CorpusTrainConfig, key: str, devices: int) -> TrainConfig:
    """The single-graph REINFORCE settings of one update: sampled rollouts, the shared (POMO) baseline."""
    return TrainConfig(
        graphs=(key,),
        devices=devices,
        method=config.method,
        rl_mode="sample",
        rollouts_per_update=config.rollouts_per_update,
        entropy_weight=config.entropy_weight,
        grad_clip=config.grad_clip,
    )


def _selection_pairs(config: CorpusTrainConfig, corpus: list[CorpusEntry] | None) -> list[tuple[str, DataflowGraph, int, float]]:
    """``(key, graph, devices, critical_path's makespan)`` of every ``select_split`` pair at the selection device counts."""
    from ..placers import place

    chosen = [(e, build(e)) for e in entries(config.select_split, manifest=corpus)]
    counts = config.select_devices or config.devices
    pairs = [(pair_key(e, d), g, d) for e, g in chosen for d in counts if d in e.devices]
    if not pairs:
        raise ValueError(f"select_split {config.select_split!r} has no graph at devices {counts}")
    return [(key, g, d, place(g, "critical_path", d).makespan) for key, g, d in pairs]


def _select(policy: Any, pairs: list, episode: int, selections: list[dict[str, Any]], best: Path, log: CsvLog) -> None:
    """Score the greedy policy on ``pairs``; save it as ``best`` when it wins more often (or as often, closer to critical_path);
    the score goes to ``selections`` and ``log`` (``selection.csv``)."""
    wins, mean = greedy_score(policy, pairs)
    record = max(((float(r["wins"]), -float(r["mean_over_critical_path"])) for r in selections), default=None)
    better = record is None or (wins, -mean) > record
    if better:
        policy.save(best)
    selections.append({"episode": episode, "wins": wins, "mean_over_critical_path": mean, "best": int(better)})
    with log:
        log.append(selections[-1:])


def train_from_arguments(
    parser: argparse.ArgumentParser, args: argparse.Namespace, config_class: type, train: Callable[..., Path], argv: Sequence[str] | None
) -> tuple[Any, Path]:
    """``train(args.out, config, command=...)`` on one thread with the config the options given as ``argv`` (default: the
    process's) give; a bad setting is the parser's error."""
    torch.set_num_threads(1)
    began = time.process_time()
    command = shlex.join([*parser.prog.split(), *(argv if argv is not None else sys.argv[1:])])
    try:
        config = config_from_arguments(args, config_class)
        path = train(args.out, config, command=command)
    except ValueError as error:
        parser.error(str(error))
    print(f"trained {path} ({time.process_time() - began:.0f} CPU s in this process; {machine()})")
    return config, path


def main(argv: Sequence[str] | None = None, prog: str = "workbench train corpus") -> None:
    """``workbench train corpus --out runs/corpus-doppler [--method gdp] [--evaluate test]``."""
    parsers = {"devices": device_counts, "select_devices": device_counts}
    parser = trainer_parser(prog, __doc__.splitlines()[0], CorpusTrainConfig, parsers, FLAT_POLICY_FIELDS)
    parser.add_argument("--evaluate", metavar="SPLIT", help="after training, place this split zero-shot and write eval-SPLIT.csv")
    parser.add_argument("--samples", type=int, default=16, help="K of the best-of-K evaluation")
    parser.add_argument(
        "--evaluate-devices",
        type=lambda text: tuple(int(v) for v in text.split(",")),
        help="device counts to evaluate at (default: --devices)",
    )
    args = parse_trainer_arguments(parser, argv, CorpusTrainConfig)
    config, last = train_from_arguments(parser, args, CorpusTrainConfig, train_on_corpus, argv)
    if args.evaluate:
        frame = evaluate_split(last, args.evaluate, args.evaluate_devices or config.devices, args.samples, config.seed)
        atomic_write_text(Path(args.out) / f"eval-{args.evaluate}.csv", frame.to_csv(index=False))
        print(frame.to_string())
        print(summary(frame).to_string())
