"""The placement environment: place a graph's ops one at a time, as DOPPLER's policies do.

:class:`PlacementState` is the bare state machine the policies' rollouts
drive (a running :class:`~workbench.schedule.PartialSchedule` plus the mask of
ready ops). :class:`PlacementEnv` wraps it in the Gymnasium API with a
pluggable makespan function (:data:`MakespanFn`) and the terminal reward.

One step places one op: the action is ``(op, device)`` with ``op`` ready (all
its predecessors placed). ``info["op_mask"]`` and ``info["device_mask"]`` say
which ops and devices are legal. When every op is placed the episode ends
with reward ``-(makespan - baseline) / scale``: the makespan from
``makespan_fn`` (the fast simulator unless another is given), ``baseline`` the running
mean of past episodes' makespans, ``scale`` the graph's lower bound (see
:class:`EnvConfig`). Earlier steps have reward 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..cluster import Devices
from ..graph import DataflowGraph
from ..schedule import PartialSchedule
from .features import affinity_delay, device_features, static_features
from .registry import TEACHERS

__all__ = ["EnvConfig", "PlacementEnv", "PlacementState", "Guide", "MakespanFn", "TEACHERS", "teacher_assignment"]


MakespanFn = Callable[[np.ndarray], float]
"""The env's terminal cost: ``assignment -> makespan`` for its one graph (a cost oracle of
:mod:`workbench.systems` answers for any graph; ``lambda a: makespan_of(oracle, graph, a)`` adapts one)."""


@dataclass(frozen=True)
class Guide:
    """A placement to imitate instead of the critical-path teacher: ops in ``order``, op ``i`` on ``assignment[i]``.

    As a teacher it picks, among the ready ops, the one earliest in ``order``
    (in a replay of ``order`` that is its next op), and for an op its device
    in ``assignment``. ``order`` must be a topological order of the graph.
    """

    order: np.ndarray
    assignment: np.ndarray
    rank: np.ndarray = field(init=False, repr=False, compare=False)  # op -> its position in ``order`` (__post_init__)

    def __post_init__(self) -> None:
        order = np.asarray(self.order, dtype=np.int64)
        assignment = np.asarray(self.assignment, dtype=np.int64)
        if order.ndim != 1 or assignment.shape != order.shape or not np.array_equal(np.sort(order), np.arange(order.size)):
            raise ValueError("a Guide needs an order that is a permutation of the ops and one device per op")
        object.__setattr__(self, "order", order)
        object.__setattr__(self, "assignment", assignment)
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        object.__setattr__(self, "rank", rank)


class PlacementState:
    """A partial placement: which ops are placed where, when they could run, which are ready.

    ``guide`` (a :class:`Guide`) replaces the critical-path teacher by a given placement; ``teacher`` names the
    teacher's device rule (:data:`TEACHERS`).
    """

    def __init__(self, graph: DataflowGraph, devices: Devices, guide: Guide | None = None, teacher: str = "critical_path") -> None:
        if guide is not None and guide.order.size != graph.num_nodes:
            raise ValueError(f"the guide places {guide.order.size} ops but the graph has {graph.num_nodes}")
        if teacher not in TEACHERS:
            raise ValueError(f"unknown teacher {teacher!r}; teachers: {', '.join(TEACHERS)}")
        self.graph = graph
        self.guide = guide
        self.teacher = teacher
        self.features = static_features(graph)
        self.schedule = PartialSchedule(graph, devices)
        self.num_devices = self.schedule.num_devices
        self.ready = graph.in_degree == 0

    @property
    def done(self) -> bool:
        return self.schedule.done

    def ready_ops(self) -> np.ndarray:
        """Ready op ids, ascending."""
        return self.ready.nonzero()[0]

    def device_features(self, op: int, earliest_start: np.ndarray | None = None) -> np.ndarray:
        """``(devices, len(DEVICE_FEATURES))`` features for placing ``op`` next."""
        return device_features(self.schedule, op, self.features.time_scale, earliest_start)

    def place(self, op: int, device: int, earliest_starts: np.ndarray | None = None) -> None:
        """Place a ready ``op`` on ``device``; raises ``ValueError`` on an illegal action.

        ``earliest_starts`` is ``schedule.earliest_starts(op)`` when the caller has it already.
        """
        if not (0 <= op < self.graph.num_nodes and self.ready[op]):
            raise ValueError(f"op {op} is not ready to place (placed already, unplaced inputs, or no such op)")
        self.schedule.place(op, device, earliest_starts)
        self.ready[op] = False
        self.ready[self.schedule.newly_ready] = True  # the schedule counts a successor's inputs, parallel edges included

    def teacher_ops(self, ready: np.ndarray) -> np.ndarray:
        """The ready ops the teacher could pick: all with the largest bottom level (the guide's: the first in its order)."""
        if self.guide is not None:
            return ready[np.argmin(self.guide.rank[ready])][None]
        level = self.features.bottom_level[ready]
        return ready[level == level.max()]

    def teacher_devices(self, op: int, earliest_start: np.ndarray) -> np.ndarray:
        """The devices the teacher could pick for ``op``: where it starts earliest (the guide's: its device; ``affinity``: TEACHERS)."""
        if self.guide is not None:
            return self.guide.assignment[op : op + 1]
        if self.teacher == "affinity":
            return np.flatnonzero(affinity_delay(self.schedule, op, earliest_start) == 0)
        return np.flatnonzero(earliest_start == earliest_start.min())


def teacher_assignment(graph: DataflowGraph, devices: Devices, teacher: str = "critical_path") -> np.ndarray:
    """The device per op that the imitation ``teacher`` (:data:`TEACHERS`) gives, following its own choices (smallest id on ties)."""
    state = PlacementState(graph, devices, teacher=teacher)
    while not state.done:
        op = int(state.teacher_ops(state.ready_ops())[0])
        state.place(op, int(state.teacher_devices(op, state.schedule.earliest_starts(op))[0]))
    return state.schedule.device.copy()


@dataclass(frozen=True)
class EnvConfig:
    """How :class:`PlacementEnv` turns a makespan into a reward.

    Attributes:
        baseline: ``"running_mean"`` subtracts the mean makespan of the
            episodes finished so far (none before the first), ``"none"``
            subtracts nothing.
        normalize: divide makespan and baseline by ``lower_bound(graph,
            devices)``, so rewards are comparable across graphs.
        discount: per-step discount applied to the terminal reward when the
            env reports ``info["returns"]`` (the return of every step).
    """

    baseline: str = "running_mean"
    normalize: bool = True
    discount: float = 1.0

    def __post_init__(self) -> None:
        if self.baseline not in ("running_mean", "none"):
            raise ValueError(f"baseline must be 'running_mean' or 'none', got {self.baseline!r}")
        if not 0.0 < self.discount <= 1.0:
            raise ValueError(f"discount must be in (0, 1], got {self.discount}")


class PlacementEnv(gym.Env):
    """Gymnasium env: each step places one ready op on one device.

    Observation: ``{"assignment": device per op (-1 = unplaced), "ready": 0/1
    per op}``. Action: ``(op, device)``; an illegal one raises ``ValueError``.
    ``info`` always holds ``op_mask`` and ``device_mask``; at the end also
    ``makespan``, ``baseline``, ``assignment``, ``order`` and ``returns``.
    ``env.state`` (a :class:`PlacementState`) gives the partial schedule and
    the device features of any ready op.

    Args:
        graph: the graph to place.
        devices: number of devices or a :class:`~workbench.Cluster`.
        makespan_fn: ``assignment -> makespan``; default the fast simulator
            (:class:`workbench.Evaluator`).
        config: reward settings (:class:`EnvConfig`).
    """

    metadata = {"render_modes": []}

    def __init__(
        self, graph: DataflowGraph, devices: Devices = 4, makespan_fn: MakespanFn | None = None, config: EnvConfig | None = None
    ) -> None:
        from ..sim import Evaluator, lower_bound

        self.graph = graph
        self.devices = devices
        self.config = config or EnvConfig()
        self.makespan_fn = makespan_fn or Evaluator(graph, devices)
        self.state = PlacementState(graph, devices)
        d = self.state.num_devices
        n = graph.num_nodes
        bound = lower_bound(graph, devices)
        self.scale = bound if (self.config.normalize and bound > 0) else 1.0
        self.observation_space = spaces.Dict(
            {"assignment": spaces.Box(-1, d - 1, shape=(n,), dtype=np.int64), "ready": spaces.MultiBinary(n)}
        )
        self.action_space = spaces.MultiDiscrete([max(n, 1), d])
        self.episodes = 0
        self.makespan_sum = 0.0

    @property
    def baseline(self) -> float:
        """The makespan subtracted from the next episode's reward."""
        if self.config.baseline == "none" or self.episodes == 0:
            return 0.0
        return self.makespan_sum / self.episodes

    def _observe(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        s = self.state
        obs = {"assignment": s.schedule.device.copy(), "ready": s.ready.astype(np.int8)}
        info = {"op_mask": s.ready.copy(), "device_mask": np.ones(s.num_devices, dtype=bool)}
        return obs, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        self.state = PlacementState(self.graph, self.devices)
        return self._observe()

    def step(self, action: Sequence[int] | np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        op, device = (int(a) for a in action)
        if not 0 <= device < self.state.num_devices:
            raise ValueError(f"device {device} outside 0..{self.state.num_devices - 1}")
        self.state.place(op, device)
        obs, info = self._observe()
        if not self.state.done:
            return obs, 0.0, False, False, info
        assignment = self.state.schedule.device.copy()
        makespan = float(self.makespan_fn(assignment))
        baseline = self.baseline
        reward = -(makespan - baseline) / self.scale
        self.episodes += 1
        self.makespan_sum += makespan
        steps = self.graph.num_nodes
        info.update(
            makespan=makespan,
            baseline=baseline,
            assignment=assignment,
            order=np.asarray(self.state.schedule.order, dtype=np.int64),
            returns=reward * self.config.discount ** np.arange(steps - 1, -1, -1, dtype=float),
        )
        return obs, reward, True, False, info
