"""Any-time records: the best makespan found so far against the simulator evaluations spent.

Every placer that spends evaluations (local_search, sampled or searched
learned policies) reports ``details["anytime"]``: a list of
``[evaluation, best makespan so far, CPU seconds]`` points, one per
improvement (the first evaluation included) and one at the last evaluation,
evaluations counted from 1 exactly as the placer counts its budget, CPU
seconds the process CPU time (every thread) the placer had used when that
evaluation's batch was scored (for local_search's compiled loop, at the end of
the stretch of evaluations it ran before returning to Python). Between two points the best so far is the
earlier point's (a step function); ``viz.anytime`` charts it against
evaluations or against CPU seconds, both measured in the same run.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

__all__ = ["BestSoFar"]


class BestSoFar:
    """Collects the improvement points of a search from the makespans of its evaluations, in evaluation order."""

    def __init__(self, began: float | None = None) -> None:
        """``began``: the :func:`time.process_time` at which the placer started (default: now)."""
        self.began = time.process_time() if began is None else float(began)
        self.best = float("inf")
        self.evaluations = 0
        self.cpu_seconds = 0.0
        self._points: list[list[float]] = []

    def add(self, makespans: Sequence[float] | np.ndarray, evaluations: int | None = None) -> None:
        """Record evaluations whose makespans are ``makespans`` (in order); ``evaluations`` is the count after them when
        the placer spent more than these (for example on evaluations that scored no candidate)."""
        values = np.atleast_1d(np.asarray(makespans, dtype=float))
        start = (self.evaluations if evaluations is None else int(evaluations) - values.size) + 1
        self.cpu_seconds = time.process_time() - self.began
        for index, makespan in enumerate(values):
            if makespan < self.best:
                self.best = float(makespan)
                self._points.append([start + index, self.best, self.cpu_seconds])
        self.evaluations = start - 1 + values.size

    def extend(self, evaluations: np.ndarray, makespans: np.ndarray, total: int) -> None:
        """Record improvements found by a compiled loop: ``makespans[i]`` is the best so far from evaluation
        ``evaluations[i]``, and ``total`` evaluations are counted after them; all are stamped with the CPU seconds now."""
        self.cpu_seconds = time.process_time() - self.began
        for evaluation, makespan in zip(evaluations.tolist(), makespans.tolist(), strict=True):
            if makespan < self.best:
                self.best = float(makespan)
                self._points.append([int(evaluation), self.best, self.cpu_seconds])
        self.evaluations = int(total)

    @property
    def points(self) -> list[list[float]]:
        """``[evaluation, best so far, CPU seconds]`` per improvement, and at the last evaluation (JSON-ready)."""
        if self._points and self._points[-1][0] != self.evaluations:
            return [*self._points, [self.evaluations, self.best, self.cpu_seconds]]
        return list(self._points)
