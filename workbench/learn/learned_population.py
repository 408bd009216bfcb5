"""Population search with a learned proposal table: REGAL's idea (Paliwal et al., ICLR 2020) on the shipped move scorer.

REGAL trains a graph network to set, per op, the distributions a genetic
search samples its mutations and crossovers from, so that the search
converges faster on graphs it never saw. :class:`LearnedPopulationPlacer`
is :class:`~workbench.placers.population.PopulationSearchPlacer` (same
breeding, selection, budget and counting) whose per-(op, device) mutation
table comes from a model trained across the corpus's training split: the
shipped learned_search move scorer (:mod:`workbench.learn.learned_search`),
which ranks moving one op to one device by the simulated makespan decrease
it predicts. Once per graph the best start's trace is simulated (one
counted evaluation), every single-op move of that placement is scored, and
the table is the softmax of the scores over all (op, device) pairs at
``temperature``, mixed with the uniform table by ``explore`` so that every
pair stays reachable. The scorer is used rather than the zero-shot policy's
placement head because it scores exactly the unit a mutation draws (an op
and a target device) on a complete placement, the state the population
search mutates.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from ..cluster import Devices, as_cluster, num_devices
from ..graph import DataflowGraph
from ..placers.local_search import Moves, critical_chain
from ..placers.population import PopulationSearchPlacer, uniform_table
from ..placers.registry import PlacerError
from .checkpoint import CheckpointError
from .learned_search import PRETRAINED_SCORER, MoveScorer, load_scorer, move_features

if TYPE_CHECKING:
    from ..sim import Evaluator

__all__ = ["LearnedPopulationPlacer", "scorer_table"]


def scorer_table(
    scorer: MoveScorer, graph: DataflowGraph, devices: Devices, assignment: np.ndarray, temperature: float, explore: float
) -> np.ndarray:
    """The proposal table of ``assignment``: softmax over every single-op move's score / ``temperature`` (an op's own device
    gets no mass), mixed with the uniform table by ``explore``; simulates ``assignment`` once (not counted here)."""
    from ..sim import simulate

    n, d = graph.num_nodes, num_devices(devices)
    trace = simulate(graph, assignment, as_cluster(devices)).trace
    moves = Moves(graph, devices, np.random.default_rng(0))  # its neighbour lists only; no proposal is drawn
    critical = critical_chain(graph, assignment, trace.ready, trace.start, trace.end)
    candidates = move_features(moves, assignment, trace, critical)
    single = ~candidates.grouped
    logits = np.full((n, d), -np.inf)
    logits[candidates.ops[single], candidates.targets[single]] = scorer.score(candidates.features[single]) / temperature
    weights = np.exp(logits - logits.max())
    return (1 - explore) * weights / weights.sum() + explore * uniform_table(n, d)


class LearnedPopulationPlacer(PopulationSearchPlacer):
    """Population search whose mutations are drawn from the move scorer's table of the best start (module docstring).

    Args:
        checkpoint: the scorer's checkpoint (default: the shipped one, ``datasets/pretrained/learned_search/``).
        temperature: softness of the table (lower: the mutations concentrate on the scorer's best moves).
        explore: the share of the uniform table mixed in, in [0, 1].
        refresh: generations between rescoring the best member, when it changed (each one more counted evaluation; 0:
            the best start's table throughout, as REGAL's once-per-graph distributions).
        search: population search's options (budget, population, ...), see
            :class:`~workbench.placers.population.PopulationSearchPlacer`; the table's trace is one more counted evaluation.

    The defaults were chosen on the corpus's validation split at 4 and 8 devices (``python -m workbench.bench.population``):
    temperature 0.2 against 0.05, 0.1 and 1; explore 0.5 against 0.05 and 0.2; a refresh every 8 generations against
    once and every 2.
    """

    def __init__(
        self, checkpoint: str | os.PathLike | None = None, temperature: float = 0.2, explore: float = 0.5, refresh: int = 8, **search: Any
    ) -> None:
        super().__init__(**search)
        if not temperature > 0:
            raise PlacerError(f"temperature must be > 0, got {temperature}")
        if refresh < 0:
            raise PlacerError(f"refresh must be >= 0 generations, got {refresh}")
        if not 0 <= explore <= 1:
            raise PlacerError(f"explore must be in [0, 1], got {explore}")
        try:
            self.scorer = load_scorer(PRETRAINED_SCORER if checkpoint is None else checkpoint)
        except CheckpointError as exc:
            raise PlacerError(str(exc)) from None
        self.temperature, self.explore, self.table_refresh = float(temperature), float(explore), int(refresh)

    def proposal_table(self, graph: DataflowGraph, devices: Devices, start: np.ndarray, evaluator: Evaluator) -> np.ndarray:
        evaluator.evaluations += 1  # the start's trace, which the scorer's features read
        return scorer_table(self.scorer, graph, devices, start, self.temperature, self.explore)
