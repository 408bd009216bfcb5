"""Train learned_search's move scorer across the corpus's training split, with a dense signal.

States are the placements local_search (and, from the second round on,
learned_search with the scorer trained so far, as in DAgger: Ross, Gordon and
Bagnell, AISTATS 2011) simulates for their traces on every training graph
and device count. For each sampled state, many candidate moves are simulated
(the simulator takes well under a millisecond), and the scorer learns to rank
them by their makespan decrease (as a fraction of the state's makespan) with a
listwise softmax loss (ListNet: Cao et al., ICML 2007): the target is
``softmax(decrease / reward_temperature)`` over the state's moves.

``workbench train scorer --out DIR`` writes a run directory
(:mod:`workbench.runs`): ``config.json``, ``meta.json`` (the command, the
machine, the training graphs; once finished the CPU seconds, states and
simulated moves), ``metrics.csv`` (one row per epoch, appended as it is
trained) and ``checkpoints/scorer.safetensors`` (named after its one stage, as every
run's stage weights are, so that the dashboard's Compare offers it).
"""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import torch

from .. import corpus
from ..cluster import MAX_DEVICES
from ..learn.fields import Field, check_config
from ..learn.learned_search import DEFAULT_SHARE, LearnedMoves, LearnedSearchPlacer, move_features
from ..learn.move_scorer import FEATURES, METHOD, SCORER_FIELDS, MoveScorer, ScorerConfig, save_scorer
from ..placers.local_search import CRITICAL_REFRESH, Moves
from ..runs import CsvLog, RunWriter
from ..sim import Evaluator, Trace
from .config import device_counts, parse_trainer_arguments, trainer_parser

__all__ = ["ScorerTrainConfig", "METRICS", "collect_states", "train_scorer", "main"]

STAGE = "scorer"
"""The scorer run's one stage, which names its checkpoint (``checkpoints/scorer.safetensors``)."""
QUALITY = ("top1_decrease", "random_decrease", "best_decrease")
"""What :func:`ranking_quality` measures on a set of states."""
QUALITY_COLUMNS = tuple(f"{split}_{k}" for split in ("train", "validation") for k in QUALITY)
METRICS = ("episode", "round", "epoch", "states", "loss", *QUALITY_COLUMNS, "cpu_seconds")
"""The columns of the scorer's ``metrics.csv``: one row per epoch (:func:`_row`); ``episode`` counts the epochs over the
rounds (0: before training), the whole number every run's ``metrics.csv`` orders its rows by."""


@dataclass(frozen=True)
class ScorerTrainConfig:
    """How the move scorer is trained."""

    devices: tuple[int, ...] = (2, 4, 8)
    """Device counts each training graph is used at."""
    rounds: int = 2
    """Data-collection rounds; round 1 follows local_search, later rounds learned_search with the scorer so far."""
    trajectory_budget: int = 200
    """Evaluations of each search whose observed placements are the states."""
    states_per_run: int = 8
    """States sampled from each search."""
    candidates_per_state: int = 768
    """Moves simulated per state (a uniform sample of all its moves)."""
    epochs: int = 30
    """Passes over the states per round."""
    batch_states: int = 32
    """States per gradient step."""
    learning_rate: float = 1e-3
    """Adam's step size."""
    reward_temperature: float = 0.01
    """The target ranking's softness, in fractions of the makespan."""
    transfer_weight: float = 0.0
    """The dense term: the target ranks moves by makespan decrease plus this weight times the decrease of the total transfer
    wait (each op's ready time minus its last input's end, summed), both as fractions of the state's makespan; 0: makespan only."""
    hidden: int = 64
    """The scorer's hidden width."""
    layers: int = 2
    """The scorer's hidden layers."""
    max_graphs: int = 0
    """Use only the first this many training graphs (0: all; small values for tests)."""
    seed: int = 0
    """Seeds the searches, the sampling and the initial weights."""

    def __post_init__(self) -> None:
        check_config(asdict(self), SCORER_TRAIN_FIELDS, "scorer training config")
        if not self.devices:
            raise ValueError("devices must be one or more device counts")


SCORER_TRAIN_FIELDS = {
    "devices": Field(int, 1, MAX_DEVICES, items=16),
    "rounds": Field(int, 1, 100),
    "trajectory_budget": Field(int, 1, 1_000_000),
    "states_per_run": Field(int, 1, 10_000),
    "candidates_per_state": Field(int, 1, 100_000),
    "epochs": Field(int, 1, 10_000),
    "batch_states": Field(int, 1, 100_000),
    "learning_rate": Field(float, 1e-12, 1.0),
    "reward_temperature": Field(float, 1e-9, 1e3),
    "transfer_weight": Field(float, 0.0, 1e3),
    **SCORER_FIELDS,
    "max_graphs": Field(int, 0, 1_000_000),
    "seed": Field(int, 0, 2**63 - 1),
}
"""Each :class:`ScorerTrainConfig` field's type and range (NaN and infinities are outside every range), checked when it is made."""


@dataclass
class States:
    """Sampled states: ``features[s, k]`` of move ``k`` of state ``s`` (``mask`` marks real moves), its makespan decrease
    and its total transfer wait's decrease (fractions of the state's makespan)."""

    features: np.ndarray
    decrease: np.ndarray
    wait_decrease: np.ndarray
    mask: np.ndarray

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.features, self.decrease, self.wait_decrease, self.mask


class _RecordingMoves(LearnedMoves):
    """learned_search's moves that keep every placement they observe, with its trace and critical chain."""

    def __init__(self, *args: Any, history: list[tuple[np.ndarray, Trace, np.ndarray, Moves]]) -> None:
        super().__init__(*args)
        self.history = history

    def observe(self, assignment: np.ndarray, trace: Trace) -> None:
        self.history.append((assignment.copy(), trace, self.critical.copy(), self))
        super().observe(assignment, trace)


class _RecordingSearch(LearnedSearchPlacer):
    """learned_search (``share=0``: local_search's own moves only) that records the states it observes."""

    def __init__(self, scorer: MoveScorer, share: float, budget: int) -> None:
        # local_search's refresh and start, as when the shipped scorer was trained
        super().__init__(scorer, share=share, refresh=CRITICAL_REFRESH, learned_start=False, budget=budget)
        self.history: list[tuple[np.ndarray, Trace, np.ndarray, Moves]] = []

    def moves(self, graph: Any, devices: Any, rng: np.random.Generator) -> Moves:
        return _RecordingMoves(graph, devices, rng, self.scorer, self.share, self.temperature, history=self.history)


def split_entries(config: ScorerTrainConfig, split: str) -> list[corpus.CorpusEntry]:
    """The corpus graphs of ``split`` the scorer learns from: no paper or zoo graph, at most ``max_graphs`` (0: all)."""
    graphs = [e for e in corpus.entries(split) if e.family not in ("paper", "zoo")]
    return graphs[: config.max_graphs] if config.max_graphs else graphs


def collect_states(config: ScorerTrainConfig, split: str, scorer: MoveScorer, learned: bool, round_seed: int) -> tuple[States, int]:
    """States from every graph of ``split`` at each device count, and the number of moves simulated: along local_search's
    trajectories, or learned_search's with ``scorer`` when ``learned``."""
    rng = np.random.default_rng(round_seed)
    graphs = split_entries(config, split)
    features, decreases, wait_decreases = [], [], []
    simulated = 0
    for entry in graphs:
        graph = corpus.build(entry)
        for devices in (d for d in config.devices if d in entry.devices):
            seed = int(rng.integers(2**31))
            placer = _RecordingSearch(scorer, DEFAULT_SHARE if learned else 0.0, config.trajectory_budget)
            placer.place(graph, devices, seed)
            seen = placer.history
            if not seen:
                continue
            evaluator = Evaluator(graph, devices)
            for index in rng.choice(len(seen), size=min(config.states_per_run, len(seen)), replace=False):
                assignment, trace, critical, moves = seen[int(index)]
                candidates = move_features(moves, assignment, trace, critical)
                pick = rng.choice(len(candidates.targets), size=min(config.candidates_per_state, len(candidates.targets)), replace=False)
                ready, end = evaluator.times(np.array([candidates.apply(assignment, int(k)) for k in pick]))
                simulated += pick.size
                features.append(candidates.features[pick])
                decreases.append((trace.makespan - end.max(axis=1)) / trace.makespan)
                wait = transfer_wait(graph, trace.ready[None], trace.end[None])[0]
                wait_decreases.append((wait - transfer_wait(graph, ready, end)) / trace.makespan)
    return _padded(features, decreases, wait_decreases, config.candidates_per_state), simulated


def transfer_wait(graph: Any, ready: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per row of ``ready`` / ``end`` (op times of one schedule each): the summed time ops waited for an input in transfer."""
    latest_input = np.zeros_like(end)
    np.maximum.at(latest_input.T, graph.dst, end[:, graph.src].T)
    return np.maximum(ready - latest_input, 0.0).sum(axis=1)


def _padded(features: list[np.ndarray], decreases: list[np.ndarray], wait_decreases: list[np.ndarray], width: int) -> States:
    s = len(features)
    moves = np.zeros((s, width), np.float32)
    out = States(np.zeros((s, width, len(FEATURES)), np.float32), moves.copy(), moves.copy(), np.zeros((s, width), bool))
    for i, (x, r, w) in enumerate(zip(features, decreases, wait_decreases, strict=True)):
        out.features[i, : len(r)], out.decrease[i, : len(r)], out.wait_decrease[i, : len(r)], out.mask[i, : len(r)] = x, r, w, True
    return out


def _merge(a: States | None, b: States) -> States:
    if a is None:
        return b
    return States(*(np.concatenate([x, y]) for x, y in zip(a.arrays(), b.arrays(), strict=True)))


def listwise_loss(scores: torch.Tensor, decrease: torch.Tensor, mask: torch.Tensor, temperature: float) -> torch.Tensor:
    """Cross-entropy between ``softmax(decrease / temperature)`` and ``softmax(scores)`` over each state's real moves."""
    neg = torch.finfo(scores.dtype).min
    target = torch.softmax((decrease / temperature).masked_fill(~mask, neg), dim=-1)
    return -(target * torch.log_softmax(scores.masked_fill(~mask, neg), dim=-1).masked_fill(~mask, 0.0)).sum(-1).mean()


@torch.no_grad()
def ranking_quality(scorer: MoveScorer, states: States) -> dict[str, float]:
    """Mean makespan decrease of the scorer's top move, of a random move and of the best move, per state."""
    scores = scorer(torch.as_tensor(states.features)).masked_fill(~torch.as_tensor(states.mask), -torch.inf).numpy()
    top = states.decrease[np.arange(len(scores)), scores.argmax(axis=1)]
    mean = (states.decrease * states.mask).sum(axis=1) / np.maximum(states.mask.sum(axis=1), 1)
    best = np.where(states.mask, states.decrease, -np.inf).max(axis=1)
    return dict(zip(QUALITY, (float(top.mean()), float(mean.mean()), float(best.mean())), strict=True))


def _loss(scorer: MoveScorer, tensors: list[torch.Tensor], config: ScorerTrainConfig) -> torch.Tensor:
    features, decrease, wait_decrease, mask = tensors
    return listwise_loss(scorer(features), decrease + config.transfer_weight * wait_decrease, mask, config.reward_temperature)


def _row(
    scorer: MoveScorer, data: States, validation: States, round_: int, epoch: int, loss: Any, began: float, epochs: int
) -> dict[str, Any]:
    """One metrics row: the loss, and the ranking quality on the training and the validation states (``epochs`` per round)."""
    row = {"episode": (round_ - 1) * epochs + epoch, "round": round_, "epoch": epoch, "states": len(data.decrease), "loss": float(loss)}
    row.update({f"train_{k}": v for k, v in ranking_quality(scorer, data).items()})
    row.update({f"validation_{k}": v for k, v in ranking_quality(scorer, validation).items()})
    row["cpu_seconds"] = time.process_time() - began
    return row


def train_scorer(
    config: ScorerTrainConfig, log: Any = None, on_row: Callable[[dict[str, Any]], None] | None = None
) -> tuple[MoveScorer, list[dict[str, Any]], dict[str, Any]]:
    """Collect states and fit the scorer, round by round; returns it, one metrics row per epoch and the costs. Each row
    is also printed to ``log`` and given to ``on_row`` (``metrics.csv``) as soon as it is measured."""
    torch.manual_seed(config.seed)
    scorer = MoveScorer(ScorerConfig(config.hidden, config.layers))
    optimizer = torch.optim.Adam(scorer.parameters(), lr=config.learning_rate)
    rng = np.random.default_rng(config.seed)
    began = time.process_time()
    validation, simulated = collect_states(config, "validation", scorer, False, config.seed + 1000)
    rows: list[dict[str, Any]] = []
    data: States | None = None
    for round_ in range(1, config.rounds + 1):
        states, count = collect_states(config, "train", scorer, round_ > 1, config.seed + round_)
        data, simulated = _merge(data, states), simulated + count
        tensors = [torch.as_tensor(x) for x in data.arrays()]
        if round_ == 1:
            with torch.no_grad():
                rows.append(_row(scorer, data, validation, 1, 0, _loss(scorer, tensors, config), began, config.epochs))
            if on_row is not None:
                on_row(rows[-1])
        for epoch in range(1, config.epochs + 1):
            order = rng.permutation(len(data.decrease))
            losses = []
            scorer.train()
            for lo in range(0, order.size, config.batch_states):
                batch = torch.as_tensor(order[lo : lo + config.batch_states])
                loss = _loss(scorer, [t[batch] for t in tensors], config)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(float(loss))
            scorer.eval()
            rows.append(_row(scorer, data, validation, round_, epoch, float(np.mean(losses)), began, config.epochs))
            if on_row is not None:
                on_row(rows[-1])
            if log is not None:
                print(", ".join(f"{k}={v:.5g}" if isinstance(v, float) else f"{k}={v}" for k, v in rows[-1].items()), file=log, flush=True)
    costs = {"cpu_seconds": time.process_time() - began, "states": len(data.decrease) if data else 0, "simulated_moves": simulated}
    return scorer, rows, costs


def main(argv: Sequence[str] | None = None, prog: str = "workbench train scorer") -> int:
    """``workbench train scorer --out DIR``: the run directory DIR (config, meta, metrics and the scorer's checkpoint)."""
    parser = trainer_parser(prog, __doc__.splitlines()[0], ScorerTrainConfig, {"devices": device_counts})
    args = parse_trainer_arguments(parser, argv, ScorerTrainConfig)
    torch.set_num_threads(1)
    try:
        config = ScorerTrainConfig(**{f.name: getattr(args, f.name) for f in fields(ScorerTrainConfig)})
    except ValueError as error:
        parser.error(str(error))
    command = shlex.join([*prog.split(), *(argv if argv is not None else sys.argv[1:])])
    run = RunWriter(args.out)
    run.start(asdict(config), scorer_meta(config, command))
    with CsvLog(run.metrics_path, METRICS) as metrics:
        metrics.start()
        scorer, _, costs = train_scorer(config, log=sys.stderr, on_row=lambda row: metrics.append([row]))
    run.checkpoint_dir.mkdir(exist_ok=True)
    save_scorer(run.stage_checkpoint(STAGE), scorer, {"config": asdict(config), **costs})
    run.finish(**costs)
    return 0


def scorer_meta(config: ScorerTrainConfig, command: str) -> dict[str, Any]:
    """The scorer run's record for ``meta.json`` (:meth:`~workbench.runs.RunWriter.start`): the method, the training
    graphs and device counts, its one stage (``scorer``) and ``command``."""
    graphs = [e.name for e in split_entries(config, "train")]
    return {
        "method": METHOD,
        "graphs": graphs,
        "devices": list(config.devices),
        "seed": config.seed,
        "stages": [STAGE],
        "command": command,
    }
