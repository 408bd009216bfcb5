"""A biased random-key style population search over assignments, its mutations drawn from a per-(op, device) table.

The search REGAL (Paliwal et al., "Reinforced Genetic Algorithm Learning for
Optimizing Computation Graphs", ICLR 2020) steers: a BRKGA (biased
random-key genetic algorithm; Gonçalves & Resende, J. Heuristics 2011)
whose per-op sampling distributions a learned model sets, so that the
search on an unseen graph converges in fewer evaluations. Here the
chromosome is the assignment itself. The population starts as the fair
start: every one-pass method's placement, one counted evaluation each
(:func:`~workbench.placers.best_constructive.constructive_starts`). Each
generation breeds ``offspring`` children, each from an elite parent (the
best ``elite`` fraction of the population), crossed over with probability
``crossover`` with another member (each op from the elite parent with
probability ``inherit``, BRKGA's biased crossover), then mutated: about
``mutations`` (op, device) pairs drawn from the proposal table (one row per
op, one column per device, summing to 1; uniform here, a learned model's in
the learned policies' ``learned_population`` module) set those ops' devices. Children
are simulated together through the batch evaluator, and the best
``population`` distinct assignments of parents and children survive
(a (mu + lambda) plus-selection). An assignment already simulated is never
simulated again: a child that repeats one is redrawn, and the search stops
early when it finds no unseen child. ``budget`` counts every simulated
assignment, the starts included; ``details["anytime"]`` holds the best
makespan so far against the evaluations spent (:mod:`workbench.placers.anytime`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from ..cluster import Devices, num_devices
from ..graph import DataflowGraph
from .anytime import BestSoFar
from .base import Decision, Placer
from .best_constructive import constructive_methods, constructive_starts
from .registry import PlacerError

if TYPE_CHECKING:
    from ..sim import Evaluator

__all__ = ["PopulationSearchPlacer", "uniform_table"]

REDRAWS = 16
"""How many times a child that repeats a simulated assignment is redrawn before the generation gives it up."""


def uniform_table(num_ops: int, devices: int) -> np.ndarray:
    """The proposal table that draws every (op, device) pair alike."""
    return np.full((num_ops, devices), 1.0 / max(num_ops * devices, 1))


class PopulationSearchPlacer(Placer):
    """A (mu + lambda) genetic search with BRKGA's elite-biased crossover and table-driven mutations (module docstring).

    Args:
        budget: simulator evaluations, the starts (one per one-pass method) included.
        population: the survivors kept each generation (mu).
        offspring: the children simulated together each generation (lambda).
        elite: the fraction of the population (at least one member) that parents every child.
        crossover: the probability that a child crosses its elite parent with another member.
        inherit: in a crossover, the probability that an op keeps the elite parent's device.
        mutations: the mean number of (op, device) pairs a child's mutation draws (at least one).
        starts: the one-pass methods of the first population: ``"all"`` (the fair start) or ``"literature"``.

    The defaults were chosen on the corpus's validation split at 4 and 8 devices, 200 and 500 evaluations
    (``python -m workbench.bench.population``): one mutated pair per child and no crossover were a little better there than
    1.5 pairs and crossover 0.2 or 0.5, and 8 survivors and 8 children than 16 and 16.
    """

    def __init__(
        self,
        budget: int = 2000,
        population: int = 8,
        offspring: int = 8,
        elite: float = 0.25,
        crossover: float = 0.0,
        inherit: float = 0.7,
        mutations: float = 1.0,
        starts: str = "all",
    ) -> None:
        needed = len(constructive_methods(starts))
        if int(budget) < needed:
            raise PlacerError(f"budget must be at least {needed} evaluations (one per starting assignment), got {budget}")
        if population < 1 or offspring < 1:
            raise PlacerError(f"population and offspring must be >= 1, got {population} and {offspring}")
        if not 0 < elite <= 1:
            raise PlacerError(f"elite must be in (0, 1], got {elite}")
        if not (0 <= crossover <= 1 and 0 <= inherit <= 1):
            raise PlacerError(f"crossover and inherit must be in [0, 1], got {crossover} and {inherit}")
        if not mutations >= 1:
            raise PlacerError(f"mutations must be >= 1, got {mutations}")
        self.budget = int(budget)
        self.population = int(population)
        self.offspring = int(offspring)
        self.elite = float(elite)
        self.crossover = float(crossover)
        self.inherit = float(inherit)
        self.mutations = float(mutations)
        self.starts = starts

    table_refresh: int = 0
    """Generations between remaking the table from the best member, when it changed (0: the best start's table throughout;
    a learned subclass may set it)."""

    def proposal_table(self, graph: DataflowGraph, devices: Devices, start: np.ndarray, evaluator: Evaluator) -> np.ndarray:
        """The (ops x devices) table the mutations draw from, summing to 1, made from the best start (and, every
        :attr:`table_refresh` generations, the best member); uniform here (a learned subclass may spend counted evaluations
        through ``evaluator`` to make it)."""
        return uniform_table(graph.num_nodes, num_devices(devices))

    def place(self, graph: DataflowGraph, devices: Devices, seed: int = 0) -> Decision:
        from ..sim import Evaluator

        began = time.process_time()
        rng = np.random.default_rng(seed)
        evaluator = Evaluator(graph, devices)
        names, starts = constructive_starts(graph, devices, self.starts)
        makespans = np.atleast_1d(evaluator(starts))
        anytime = BestSoFar(began)
        anytime.add(makespans)
        first = int(np.argmin(makespans))
        seen = {row.tobytes() for row in starts}
        members, spans = _survivors(starts, makespans, self.population)
        generations = tables = 0
        if graph.num_nodes and num_devices(devices) > 1 and evaluator.evaluations < self.budget:
            tabled = starts[first]
            cumulative = np.cumsum(self.proposal_table(graph, devices, tabled, evaluator).ravel())
            anytime.add(np.zeros(0), evaluator.evaluations)
            tables = 1
            while evaluator.evaluations < self.budget:
                if self.table_refresh and generations % self.table_refresh == 0 and not np.array_equal(members[0], tabled):
                    tabled = members[0]
                    cumulative = np.cumsum(self.proposal_table(graph, devices, tabled, evaluator).ravel())
                    anytime.add(np.zeros(0), evaluator.evaluations)
                    tables += 1
                    if evaluator.evaluations >= self.budget:
                        break
                count = min(self.offspring, self.budget - evaluator.evaluations)
                children = self._breed(members, count, cumulative, seen, rng)
                if not len(children):
                    break
                child_spans = np.atleast_1d(evaluator(children))
                anytime.add(child_spans, evaluator.evaluations)
                members, spans = _survivors(np.concatenate([members, children]), np.concatenate([spans, child_spans]), self.population)
                generations += 1
        return Decision(
            members[0].copy(),
            details={
                "evaluations": evaluator.evaluations,
                "start_method": names[first],
                "start_makespan": float(makespans[first]),
                "generations": generations,
                "tables": tables,
                "anytime": anytime.points,
            },
        )

    def _breed(self, members: np.ndarray, count: int, cumulative: np.ndarray, seen: set[bytes], rng: np.random.Generator) -> np.ndarray:
        """Up to ``count`` children never simulated before (``seen`` gains them); fewer when redraws run out."""
        n = members.shape[1]
        devices = cumulative.size // n
        elites = max(1, int(np.ceil(self.elite * len(members))))
        children: list[np.ndarray] = []
        for _ in range(count):
            for _ in range(REDRAWS):
                child = members[rng.integers(elites)].copy()
                if len(members) > 1 and rng.random() < self.crossover:
                    other = members[rng.integers(1, len(members))] if elites == 1 else members[rng.integers(len(members))]
                    child = np.where(rng.random(n) < self.inherit, child, other)
                pairs = np.searchsorted(cumulative, rng.random(1 + rng.poisson(self.mutations - 1)) * cumulative[-1], side="right")
                pairs = np.minimum(pairs, cumulative.size - 1)
                child[pairs // devices] = pairs % devices
                key = child.tobytes()
                if key not in seen:
                    seen.add(key)
                    children.append(child)
                    break
        return np.array(children, dtype=np.int64).reshape(len(children), n)


def _survivors(assignments: np.ndarray, makespans: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``size`` best distinct assignments, best first (a stable sort: on a tie the earlier one ranks first)."""
    kept: dict[bytes, int] = {}
    for index in np.argsort(makespans, kind="stable").tolist():
        kept.setdefault(assignments[index].tobytes(), index)
        if len(kept) == size:
            break
    rows = list(kept.values())
    return assignments[rows], makespans[rows]
