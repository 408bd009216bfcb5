"""Simulate a placement: ``simulate(graph, assignment, devices)`` → makespan and trace.

The execution model is the DOPPLER paper's (asynchronous, work-conserving, one
op at a time per device, first come first served, communication only between
devices, no link contention), with optional priorities, heterogeneous
clusters and link contention. Two engines compute it: ``"simpy"`` (the
reference, every mode) and ``"fast"`` (compiled, every mode but contention);
they agree exactly wherever both apply.
"""

from __future__ import annotations

from .assignment import AssignmentError, check_assignment
from .bounds import lower_bound, optimality_gap
from .checks import validate
from .engine import ENGINES, PRIORITIES, Evaluator, Priority, simulate, simulate_many
from .trace import SimResult, Trace

__all__ = [
    "simulate",
    "simulate_many",
    "Evaluator",
    "lower_bound",
    "optimality_gap",
    "validate",
    "check_assignment",
    "AssignmentError",
    "SimResult",
    "Trace",
    "ENGINES",
    "PRIORITIES",
    "Priority",
]
