"""Train a DOPPLER policy's per-graph rule gate (``PolicyConfig.gate_rules``) across the corpus's training split.

No single rule pair wins everywhere: the affinity device rule with critical_path's op order beats
critical_path on the paper families but loses by 9–46% on dense random layered DAGs, where ETF (op and device
chosen together by earliest start; Hwang et al., SIAM J. Computing 1989) wins. The gate is one linear layer on
the pooled node embeddings and cheap graph statistics (:func:`workbench.learn.features.graph_statistics`) that
picks one pair per (graph, devices), as a per-instance algorithm selector (Rice 1976; Kotthoff, AI Magazine 2014).

With few arms the gate's objective needs no sampling: every training pair is placed greedily once per rule pair
(:meth:`~workbench.learn.doppler.DopplerPolicy.rule_policy`, the policy's own heads on that pair's rules), and
the gate minimises the exact expectation over its softmax of makespan ÷ critical_path's (REINFORCE over the same
choice would estimate this gradient with noise). The encoders stay as they are: the gate reads their embeddings
detached. Every ``select_every`` steps the gate's greedy choice is scored on the ``select_split`` pairs (strict
wins over critical_path, ties broken by the mean ratio) and ``checkpoints/gate-best.safetensors`` keeps the best.

A run directory (:mod:`workbench.runs`) holds ``config.json``, ``meta.json`` (:func:`gate_meta`), ``costs.csv`` (per
pair and rule pair, makespan ÷ critical_path's), ``metrics.csv`` (the loss per step), ``selection.csv`` and
``checkpoints/gate-best.safetensors``.
``workbench train gate --out DIR``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..corpus import CorpusEntry, build, entries
from ..learn.policy_config import PolicyConfig
from ..runs import STAGE_NAMES, CsvLog, RunWriter, checkpoint_name, read_rows
from ..runs.validate import GATE_SELECTION, GATE_STAGE, GatePlan, check_gate_run, damaged
from .config import device_counts, nest_policy, nested_from_dict, parse_trainer_arguments, trainer_parser
from .corpus_training import (
    RunDiverged,
    check_held_config,
    check_numbers,
    checked_policy,
    finished,
    pair_key,
    rule_started,
    train_from_arguments,
)

__all__ = ["GateTrainConfig", "gated_policy", "rule_costs", "train_gate", "main"]

SELECTION = tuple(GATE_SELECTION)
"""The columns of ``selection.csv``: each scoring of the gate and its training loss then (``runs.validate.GATE_SELECTION``)."""
METRICS = ("episode", "loss", "seconds")
"""The columns of ``metrics.csv``: one row per step (``episode``: the step, one full-batch update of the gate), the loss
before its update and the CPU seconds so far (written again from its header when an interrupted run trains again from
step 0)."""


GATE_POLICY = PolicyConfig(
    method="doppler_plc_only",
    place_rule_weight=50.0,
    place_rule_scale="op",
    select_rule_weight=50.0,
    gate_rules=("bottom_level/affinity", "earliest_start/earliest_start"),
)
"""A gate run's default policy: fresh residual heads (β = α = 50, PLC's delays ÷ the op's time) gated between the affinity
device rule with critical_path's op order and ETF's rules."""
FLAT_POLICY_FIELDS = ("gate_rules", "place_rule_weight", "place_rule_scale", "select_rule_weight")
"""Fields of the nested policy that were flat :class:`GateTrainConfig` fields before the nesting: an older ``config.json``
and the command line (``--gate-rules``) still name them so."""


@dataclass(frozen=True)
class GateTrainConfig:
    """One gate training run (saved as the run's ``config.json``)."""

    method: str = "doppler_plc_only"
    """A doppler policy with a learned PLC: ``doppler`` or ``doppler_plc_only`` (SEL is the pair's op rule itself); ignored with
    ``start_from``."""
    start_from: str = ""
    """A doppler checkpoint (without a gate) whose heads the rule pairs use, e.g. a Stage II run's; empty: fresh residual heads,
    learned logits at zero, so each pair places exactly as its rules."""
    policy: PolicyConfig = GATE_POLICY
    """The gated policy (:class:`~workbench.learn.PolicyConfig`, nested; its method is ``method``): ``policy.gate_rules``, the
    ``select_rule/place_rule`` pairs the gate chooses between (the first is a fresh gate's choice); fresh heads also take its
    ``place_rule_weight`` β, ``place_rule_scale`` and, with ``method="doppler"``, ``select_rule_weight`` α (``doppler_plc_only``
    builds its heads with α = 0); ``start_from`` keeps that checkpoint's own. ``--gate-rules``, ``--place-rule-weight``,
    ``--place-rule-scale`` and ``--select-rule-weight`` (their names before the nesting) and ``--set policy.FIELD=VALUE`` set it."""
    devices: tuple[int, ...] = (2, 4, 8)
    """Device counts of the training pairs (each training graph at every one its manifest entry lists)."""
    select_split: str = "validation"
    """Corpus split whose pairs choose the gate's weights."""
    select_devices: tuple[int, ...] = (2, 4, 8)
    """Device counts of the selection pairs."""
    steps: int = 2000
    """Full-batch Adam steps on the gate."""
    learning_rate: float = 1e-2
    """Adam's learning rate."""
    weight_decay: float = 1e-2
    """AdamW's decoupled weight decay on the gate."""
    select_every: int = 50
    """Score the gate on the selection pairs every this many steps (and before the first)."""
    seed: int = 0
    """Seed of the fresh encoders' weights (the gate starts at zero)."""

    def __post_init__(self) -> None:
        for name in ("devices", "select_devices"):
            object.__setattr__(self, name, tuple(int(value) for value in getattr(self, name)))
        # the policy's own checks refuse a method without a learned PLC, bad rule pairs, a weight of 0
        object.__setattr__(self, "policy", nest_policy(type(self).__name__, self.policy, self.method))
        for name in ("steps", "select_every"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.devices or not self.select_devices or min(self.devices + self.select_devices) < 1:
            raise ValueError("devices and select_devices must be one or more counts >= 1")
        check_numbers(self, {"learning_rate": (0.0, 1e3), "weight_decay": (0.0, 1e3)})

    def policy_config(self) -> PolicyConfig:
        """The gated policy's architecture (``policy``)."""
        return self.policy

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "config") -> GateTrainConfig:
        """The config a ``config.json`` holds; one written before ``policy`` was nested (its :data:`FLAT_POLICY_FIELDS` flat:
        the shipped ``datasets/pretrained/zero_shot/config.json``) reads as the same config."""
        return nested_from_dict(cls, data, FLAT_POLICY_FIELDS, {}, source)


def gated_policy(config: GateTrainConfig) -> Any:
    """The policy to train: fresh residual heads, or ``start_from``'s weights, with a fresh gate over ``policy.gate_rules``."""
    from ..learn import load_policy, make_policy

    if not config.start_from:
        torch.manual_seed(config.seed)
        select_weight = config.policy.select_rule_weight if config.method == "doppler" else 0.0
        return rule_started(dataclasses.replace(config.policy, select_rule_weight=select_weight))
    start = load_policy(config.start_from)
    if start.config.gate_rules or not hasattr(start, "rule_pairs"):
        raise ValueError(f"start_from {config.start_from} must hold a doppler policy without a gate, not {start.method!r}")
    policy = make_policy(start.method, dataclasses.replace(start.config, gate_rules=config.policy.gate_rules))
    missing, unexpected = policy.load_state_dict(start.state_dict(), strict=False)
    if unexpected or any(not key.startswith("gate_head.") for key in missing):
        raise ValueError(f"start_from {config.start_from} does not fit a gated {start.method} policy")
    return policy


def rule_costs(policy: Any, pairs: list[tuple[str, Any, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Per ``(key, graph, devices)`` pair: the gate's inputs, and each rule pair's greedy makespan ÷ critical_path's."""
    from ..placers import place
    from ..sim import simulate

    fixed = [policy.rule_policy(k) for k in range(len(policy.rule_pairs))]
    inputs, costs = [], []
    with torch.no_grad():
        for _, graph, devices in pairs:
            encoded = policy.encode(policy.inputs(graph, policy.feature_draws(None)))
            stats = policy.gate_input(encoded, graph, devices)
            critical = place(graph, "critical_path", devices).makespan
            inputs.append(stats.numpy())
            costs.append([simulate(graph, f.rollout(graph, devices, mode="greedy").assignment, devices).makespan / critical for f in fixed])
    return np.array(inputs), np.array(costs)


def _pairs(split: str, devices: tuple[int, ...], corpus: list[CorpusEntry] | None) -> list[tuple[str, Any, int]]:
    found = [(pair_key(e, d), g, d) for e, g in ((e, build(e)) for e in entries(split, manifest=corpus)) for d in devices if d in e.devices]
    if not found:
        raise ValueError(f"split {split!r} has no graph at devices {devices}")
    return found


def gate_meta(config: GateTrainConfig, method: str, corpus: list[CorpusEntry] | None = None, command: str = "") -> dict[str, Any]:
    """The gate run's record for ``meta.json`` (:meth:`~workbench.runs.RunWriter.start`): the gated policy's ``method``,
    the training split's graphs at ``config.devices``, its one stage (``gate``; ``stage`` says which heads it gates:
    ``Stage II heads`` from a corpus run's ``sim-best``) and ``command``."""
    graphs = list(dict.fromkeys(e.name for e in entries("train", manifest=corpus) if set(config.devices) & set(e.devices)))
    start = checkpoint_name(config.start_from).partition("-")[0]
    heads = f"{STAGE_NAMES[start].partition(':')[0]} heads" if start in STAGE_NAMES else config.start_from or "fresh heads"
    return {
        "method": method,
        "stage": f"rule gate on {heads}",
        "graphs": graphs,
        "devices": list(config.devices),
        "seed": config.seed,
        "stages": [GATE_STAGE],
        "split": "train",
        "start_from": config.start_from,
        "command": command,
    }


def train_gate(out: str | Path, config: GateTrainConfig, corpus: list[CorpusEntry] | None = None, command: str = "") -> Path:
    """Train the gate of ``config`` on the training split of ``corpus`` (default: the shipped manifest); returns the best
    checkpoint. ``command`` goes into ``meta.json``.

    A run already in ``out`` is checked first, every file (:func:`~workbench.runs.validate.check_gate_run`); a finished
    one is returned as it is, a diverged or damaged one refused with nothing changed, an interrupted one trained again
    from its start (the gate's training is deterministic), its costs first checked against the rule pairs' placements.
    """
    from ..learn.checkpoint import TrainedFor
    from ..placers import place
    from ..sim import lower_bound

    run = RunWriter(out)
    wanted = json.loads(json.dumps(dataclasses.asdict(config)))
    if run.config_path.is_file():
        check_held_config(run.config_path, config)
    train, held_out = _pairs("train", config.devices, corpus), _pairs(config.select_split, config.select_devices, corpus)
    graphs = {id(g): g for _, g, _ in train}  # a graph is one object at every device count (``_pairs``)
    trained_for = TrainedFor.of(graphs.values(), max(config.devices))
    plan = GatePlan(
        rules=config.policy.gate_rules,
        pairs=tuple(
            (split, key, lower_bound(g, d) / place(g, "critical_path", d).makespan)
            for split, pairs in (("train", train), (config.select_split, held_out))
            for key, g, d in pairs
        ),
        steps=config.steps,
        select_every=config.select_every,
    )
    checked = check_gate_run(run.path, plan)  # every file checked before anything in the run is written
    best = run.best_checkpoint(GATE_STAGE)
    if checked.best_at is not None:
        _check_best(best, checked.best_at, trained_for, config)
    if checked.status == "diverged":
        raise RunDiverged(f"{run.path} {checked.reason}; {best} keeps the best finite weights. Nothing was changed; start a new run")
    if checked.status == "finished":
        finished(run)
        return best
    policy = gated_policy(config)
    train_x, train_c = rule_costs(policy, train)
    held_x, held_c = rule_costs(policy, held_out)
    rows = [
        {"split": split, "pair": key, **{rule: float(c) for rule, c in zip(config.policy.gate_rules, cost, strict=True)}}
        for split, pairs, costs in (("train", train, train_c), (config.select_split, held_out, held_c))
        for (key, _, _), cost in zip(pairs, costs, strict=True)
    ]
    _check_costs_replaced(run.path / "costs.csv", rows, config.policy.gate_rules)
    run.start(wanted, gate_meta(config, policy.method, corpus, command))
    run.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    CsvLog(run.path / "costs.csv", ("split", "pair", *config.policy.gate_rules)).write(rows)
    gate = policy.gate_head
    optimizer = torch.optim.AdamW(gate.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    x, c, held = (torch.as_tensor(a, dtype=torch.float32) for a in (train_x, train_c, held_x))
    selections: list[dict[str, Any]] = []
    log, metrics = CsvLog(run.path / "selection.csv", SELECTION), CsvLog(run.metrics_path, METRICS)
    log.start()
    metrics.start()
    policy.trained_for = trained_for
    began = time.process_time()
    with log, metrics:
        for step in range(config.steps + 1):
            loss = (torch.softmax(gate(x), dim=1) * c).sum(1).mean()
            metrics.append([{"episode": step, "loss": float(loss), "seconds": time.process_time() - began}])
            if not math.isfinite(float(loss)):
                log.append([{"step": step, "best": 0, "loss": float(loss)}])
                run.update_meta(status="diverged", diverged_at=step, error=f"the loss is {float(loss)}")
                raise RunDiverged(f"{run.path} diverged at step {step}: the loss is {float(loss)}; {best} keeps the best finite weights")
            if step % config.select_every == 0:
                with torch.no_grad():
                    chosen = held_c[np.arange(len(held_c)), gate(held).argmax(1).numpy()]
                score = (float(np.mean(chosen < 1.0)), -float(chosen.mean()))
                better = not selections or score > max((r["wins"], -r["mean_over_critical_path"]) for r in selections)
                if better:
                    policy.save(best, extra={"step": step})
                selections.append(
                    {"step": step, "wins": score[0], "mean_over_critical_path": -score[1], "best": int(better), "loss": float(loss)}
                )
                log.append(selections[-1:])
            if step == config.steps:
                break
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    run.finish()
    return best


def _check_best(best: Path, step: int, trained_for: Any, config: GateTrainConfig) -> None:
    """``gate-best.safetensors`` holds the weights of ``step`` (the last scoring selection.csv keeps), for this run."""
    policy = checked_policy(best, trained_for)
    if policy.checkpoint_extra.get("step") != step:
        raise damaged(best, f"{str(policy.checkpoint_extra.get('step'))[:40]} where selection.csv keeps step {step}", field="step")
    if policy.config.gate_rules != config.policy.gate_rules:
        raise damaged(best, f"a gate over {', '.join(policy.config.gate_rules) or 'nothing'}, not this run's", field="gate_rules")


def _check_costs_replaced(path: Path, rows: list[dict[str, Any]], rules: tuple[str, ...]) -> None:
    """An interrupted run's ``costs.csv`` (checked in form) holds what its rule pairs place now: a cost that differs is damage."""
    if not path.is_file():
        return
    for number, (row, found) in enumerate(zip(rows, read_rows(path), strict=True), start=2):
        for rule in rules:
            if not math.isclose(float(found[rule]), row[rule], rel_tol=1e-9):
                raise damaged(path, f"{found[rule]}, but the rule pair places {row['pair']} at {row[rule]!r}", number, rule)


def main(argv: Sequence[str] | None = None, prog: str = "workbench train gate") -> None:
    """``workbench train gate --out runs/gate [--start-from CKPT]``."""
    parsers = {"devices": device_counts, "select_devices": device_counts}
    parser = trainer_parser(prog, __doc__.splitlines()[0], GateTrainConfig, parsers, FLAT_POLICY_FIELDS)
    train_from_arguments(parser, parse_trainer_arguments(parser, argv, GateTrainConfig), GateTrainConfig, train_gate, argv)
