"""The one frozen training configuration, saved as ``config.json`` in every run directory.

The defaults are the workbench's: REINFORCE with learning rate 1e-4 decaying
to 1e-7, ε-greedy exploration 0.2 decaying to 0, entropy weight 1e-2, an
exponential running-mean baseline, gradient clipping. :meth:`TrainConfig.paper`
reproduces the DOPPLER paper's public code (Yao et al., ICLR 2026,
github.com/xinyuyao/Doppler) instead; ``docs/paper-preset.md`` compares the two.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from itertools import pairwise
from typing import Any, ClassVar, Protocol, TypeVar

from ..commandline import OneLineParser
from ..learn.fields import check_config
from ..learn.policy_config import POLICY_FIELDS, PolicyConfig, without_retired
from ..learn.registry import TEACHERS
from ..placers import methods
from ..systems import oracle_spec_kind

__all__ = [
    "TrainConfig",
    "STAGES",
    "field_docs",
    "fields_table",
    "parse_overrides",
    "override_types",
    "config_from_values",
    "add_config_arguments",
    "trainer_parser",
    "config_from_arguments",
    "nest_policy",
    "replace_policy",
    "nested_from_dict",
    "parse_trainer_arguments",
    "device_counts",
]

STAGES = ("il", "sim", "real")


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides what a training run does; two runs with equal configs train identically on CPU."""

    graphs: tuple[str, ...]
    """Graphs to train on: bundled names (``ffnn``) or graph files; episodes cycle through them in this order."""
    devices: int = 4
    """Number of identical devices to place on."""
    method: str = "doppler"
    """Policy to train (``workbench.learn.make_policy`` name)."""
    stages: tuple[str, ...] = ("il", "sim")
    """Stages in order: ``il`` (imitate critical_path), ``sim`` (REINFORCE in the simulator),
    ``real`` (REINFORCE against the cost oracle).
    """
    episodes: tuple[int, ...] = (2000, 4000)
    """Episodes per stage, one number per entry of ``stages``."""
    seed: int = 0
    """Seed for the policy's initial weights and every sampled action."""
    init_checkpoint: str | None = None
    """Policy checkpoint to start from instead of fresh weights (for example a Stage II ``sim.safetensors``)."""
    il_lr: float = 1e-3
    """Stage I learning rate (constant)."""
    il_epsilon: float = 0.2
    """Stage I: probability of a uniform legal action in the learner's own rollouts, so it sees states off the teacher's path."""
    il_entropy_weight: float = 1e-2
    """Stage I entropy bonus weight."""
    rl_lr_start: float = 1e-4
    """Stages II/III learning rate at the first episode of the stage."""
    rl_lr_end: float = 1e-7
    """Stages II/III learning rate at the last episode (linear decay, applied by a torch LR scheduler)."""
    rl_epsilon_start: float = 0.2
    """Stages II/III ε at the first episode of the stage."""
    rl_epsilon_end: float = 0.0
    """Stages II/III ε at the last episode (linear decay)."""
    rl_mode: str = "epsilon"
    """Stages II/III rollouts: ``epsilon`` (the paper: the policy's most probable action, a uniform legal one with probability ε) or
    ``sample`` (sample from the policy; ε unused).
    """
    entropy_weight: float = 1e-2
    """Stages II/III entropy bonus weight."""
    greedy_every: int = 0
    """Stages II/III: at the stage start, every this many episodes and at the stage end, place every training graph greedily with the
    stage's oracle and keep the weights whose greedy placements are best (mean makespan ÷ reference) as
    ``checkpoints/<stage>-best.safetensors``; the final evaluation then uses them. 0: off (the final weights, as in the paper).
    """
    rollouts_per_update: int = 1
    """Stages II/III: rollouts of one graph per gradient step, each an episode (1: the paper; more: leave-one-out baselines instead of the
    running mean).
    """
    grad_clip: float = 1.0
    """Gradient norm clip per update (0 disables)."""
    oracle: str = "sim"
    """Cost oracle of the ``real`` stage (:func:`workbench.systems.make_oracle`): ``sim`` (the simulator), ``local`` (the local
    executor), ``HOST:PORT`` of a remote engine, or ``module:factory``, a callable taking ``devices=N`` and returning a cost oracle
    or a function ``f(graph, assignment) -> seconds``.
    """
    tensorboard: bool = False
    """Also log every metrics column to TensorBoard in ``<run>/tensorboard`` (needs ``pip install -e '.[tensorboard]'``)."""
    checkpoint_every: int = 50
    """Write ``checkpoints/last.safetensors`` every this many episodes (and at every stage end)."""
    eval_graphs: tuple[str, ...] = ()
    """Graphs never trained on, placed by the trained policy at the end (transfer), beside the training graphs."""
    search_samples: int = 16
    """Inference-time search after training: this many placements per graph beyond the greedy one (greedy ones under further
    random-feature draws when the policy has random node features, else samples), and keep the best (0 skips it).
    """
    transfer_wait_weight: float = 0.0
    """Stages II/III: dense return ``−(makespan + λ·transfer wait) / reference``, λ this weight at the stage's first episode, annealed
    linearly to 0 at its last; the transfer wait (simulator) sums, over ops, how long the last input took to arrive after the last
    producer finished. Moves that keep the makespan but cut waiting then score (FFNN's flat plateau). 0: off.
    """
    il_teacher: str = "critical_path"
    """Stage I's teacher device rule: ``critical_path`` (the earliest-start device, the paper) or ``affinity`` (the earliest finish
    plus the transfer time of the op's placed co-parents' bytes from other devices, so ops that meet at a consumer stay together;
    ``learn.registry.TEACHERS``, the registered ``affinity`` placer). The op order stays critical_path's (largest bottom level first).
    """
    selection_samples: int = 1
    """``greedy_every`` selection scores the weights by the placement that is reported: the best of this many (the greedy one, then
    greedy ones under further random-feature draws when the policy has random node features, else samples). 1: the greedy one.
    """
    device: str = "auto"
    """Torch device: ``auto`` (CUDA when present), ``cpu`` or ``cuda``."""
    threads: int = 1
    """Torch CPU threads. One rollout is a long chain of small ops, so one thread is fastest, by far on a busy machine."""
    # paper preset switches
    policy_preset: str = "default"
    """The architecture a fresh policy starts from: ``default`` (``PolicyConfig()``) or ``paper`` (``PolicyConfig.paper()``, the
    paper's code); ``policy`` changes it.
    """
    policy: PolicyConfig | None = None
    """A fresh policy's architecture (:class:`~workbench.learn.PolicyConfig`, nested; its method is ``method``); None: the
    ``policy_preset``'s. Set one field with ``--set policy.FIELD=VALUE`` (``policy.random_features=4``, ``policy.width=64``);
    ``policy_config()`` gives the architecture in use.
    """
    discount: float = 1.0
    """Stages II/III: γ of the returns. The reward comes at the last of an episode's n steps, so step t's log-probability is weighted
    by γ^(n−1−t) (the paper: 0.99, which weights a 200-op graph's first decision by 0.13).
    """
    baseline: str = "running_mean"
    """Stages II/III baseline with one rollout per update: ``running_mean`` (decay 0.9: ``b ← 0.9·b + 0.1·reward``, the first reward
    of a stage initialises it) or ``cumulative_mean`` (the paper: the
    mean reward of all the stage's episodes on the graph, the current one included, so the first episode's advantage is 0).
    """
    il_epsilon_decay: bool = False
    """Stage I: decay ε linearly from ``il_epsilon`` to 0 over the stage instead of keeping it constant (the paper: 1.0 → 0)."""
    lr_decay_unread: bool = False
    """Stages II/III: keep the learning rate at ``rl_lr_start``. The paper's code computes a linear decay to 0 but assigns it to an
    attribute Adam never reads (``optim.lr = ...``), so its learning rate is constant; this reproduces that.
    """

    def __post_init__(self) -> None:
        object.__setattr__(self, "graphs", tuple(str(g) for g in self.graphs))
        object.__setattr__(self, "eval_graphs", tuple(str(g) for g in self.eval_graphs))
        object.__setattr__(self, "stages", tuple(str(s) for s in self.stages))
        object.__setattr__(self, "episodes", tuple(int(e) for e in self.episodes))
        for item in fields(self):  # nan passes every comparison below (grad_clip=nan turned clipping off); inf passes "> 0"
            value = getattr(self, item.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"TrainConfig.{item.name} must be a finite number, got {value}")
        if not self.graphs:
            raise ValueError("TrainConfig.graphs: give at least one graph")
        if not self.stages:
            raise ValueError("TrainConfig.stages: give at least one stage")
        unknown = [s for s in self.stages if s not in STAGES]
        if unknown:
            raise ValueError(f"TrainConfig.stages: unknown stage {unknown[0]!r}; stages are {', '.join(STAGES)}")
        if len(set(self.stages)) != len(self.stages):
            raise ValueError(f"TrainConfig.stages: a stage appears twice in {','.join(self.stages)}")
        if len(self.episodes) != len(self.stages):
            raise ValueError(
                f"TrainConfig.episodes: {len(self.stages)} stage(s) need {len(self.stages)} episode count(s), got {len(self.episodes)}"
            )
        if any(e < 1 for e in self.episodes):
            raise ValueError(f"TrainConfig.episodes: every stage needs at least 1 episode, got {list(self.episodes)}")
        if self.method not in methods("learned"):  # read now: a policy registered after import trains too
            raise ValueError(f"TrainConfig.method: unknown method {self.method!r}; methods are {', '.join(methods('learned'))}")
        if self.devices < 1:
            raise ValueError(f"TrainConfig.devices must be >= 1, got {self.devices}")
        for name in ("il_lr", "rl_lr_start", "rl_lr_end"):
            if not getattr(self, name) > 0:
                raise ValueError(f"TrainConfig.{name} must be > 0, got {getattr(self, name)}")
        for name in ("il_epsilon", "rl_epsilon_start", "rl_epsilon_end"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"TrainConfig.{name} must be in [0, 1], got {getattr(self, name)}")
        for name in ("il_entropy_weight", "entropy_weight", "grad_clip", "search_samples"):
            if getattr(self, name) < 0:
                raise ValueError(f"TrainConfig.{name} must be >= 0, got {getattr(self, name)}")
        if self.greedy_every < 0:
            raise ValueError(f"TrainConfig.greedy_every must be >= 0, got {self.greedy_every}")
        if self.rollouts_per_update < 1:
            raise ValueError(f"TrainConfig.rollouts_per_update must be >= 1, got {self.rollouts_per_update}")
        if self.transfer_wait_weight < 0:
            raise ValueError(f"TrainConfig.transfer_wait_weight must be >= 0, got {self.transfer_wait_weight}")
        if self.il_teacher not in TEACHERS:
            raise ValueError(f"TrainConfig.il_teacher: use critical_path or affinity, got {self.il_teacher!r}")
        if self.il_teacher != "critical_path" and self.method == "gdp":
            raise ValueError("TrainConfig.il_teacher: gdp imitates critical_path only (it follows the teacher's own schedule)")
        if self.selection_samples < 1:
            raise ValueError(f"TrainConfig.selection_samples must be >= 1, got {self.selection_samples}")
        if self.threads < 1:
            raise ValueError(f"TrainConfig.threads must be >= 1, got {self.threads}")
        if self.checkpoint_every < 1:
            raise ValueError(f"TrainConfig.checkpoint_every must be >= 1, got {self.checkpoint_every}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"TrainConfig.device: use auto, cpu or cuda, got {self.device!r}")
        if self.rl_mode not in ("epsilon", "sample"):
            raise ValueError(f"TrainConfig.rl_mode: use epsilon or sample, got {self.rl_mode!r}")
        if self.policy_preset not in ("default", "paper"):
            raise ValueError(f"TrainConfig.policy_preset: use default or paper, got {self.policy_preset!r}")
        self._nest_policy()
        if not 0 < self.discount <= 1:
            raise ValueError(f"TrainConfig.discount must be in (0, 1], got {self.discount}")
        if self.baseline not in ("running_mean", "cumulative_mean"):
            raise ValueError(f"TrainConfig.baseline: use running_mean or cumulative_mean, got {self.baseline!r}")
        try:
            oracle_spec_kind(self.oracle)
        except ValueError as exc:
            raise ValueError(f"TrainConfig.oracle: {exc}") from None

    def _nest_policy(self) -> None:
        """``policy`` with this run's method, or None where it equals the preset's (so equal runs compare equal)."""
        if self.policy is not None:
            policy = nest_policy("TrainConfig", self.policy, self.method)
            object.__setattr__(self, "policy", None if policy == preset_policy(self.policy_preset, self.method) else policy)

    def policy_config(self) -> PolicyConfig:
        """The architecture of a fresh policy: ``policy``, or the ``policy_preset``'s for ``method``."""
        return self.policy if self.policy is not None else preset_policy(self.policy_preset, self.method)

    def with_policy(self, **changes: Any) -> TrainConfig:
        """This config with ``changes`` to the fields of its policy's architecture (``--set policy.FIELD=VALUE``)."""
        return replace_policy(self, **changes)

    @classmethod
    def paper(cls, graphs: tuple[str, ...], **changes: Any) -> TrainConfig:
        """Stages I and II as the paper's public code runs them (github.com/xinyuyao/Doppler), with ``changes`` on top.

        Values from ``config_files/run_doppler/imitation_learning.json`` (Stage I),
        ``rl_simulation_learning.json`` (Stage II), ``run_placement.py`` and
        ``scheduler/rl_agent.py``. Stage III (``rl_real_sys_learning.json``:
        4,000 episodes, the same settings as Stage II) needs a real system and is
        left out. The paper fixes ``torch.manual_seed(42)``; ``seed`` stays the caller's.
        """
        values: dict[str, Any] = dict(
            graphs=tuple(graphs),
            devices=4,  # *.json: "num_device": 4
            stages=("il", "sim"),  # imitation_learning.json "run_il", rl_simulation_learning.json "run_sim_rl"
            episodes=(2000, 2000),  # imitation_learning.json and rl_simulation_learning.json: "num_episode": 2000
            il_lr=1e-3,  # imitation_learning.json: "learning_rate": 0.001
            il_epsilon=1.0,  # imitation_learning.json: "node_epsilon": 1.0, "device_epsilon": 1.0
            il_epsilon_decay=True,  # run_placement.py: curr_*_epsilon -= epsilon / num_episode after every episode
            il_entropy_weight=1e-3,  # imitation_learning.json: "entropy_weight": 0.001
            rl_lr_start=1e-4,  # rl_simulation_learning.json: "learning_rate": 0.0001
            lr_decay_unread=True,  # rl_agent.py finish_episode: self.node_optim.lr = self.lr (Adam reads param_groups)
            rl_epsilon_start=0.2,  # rl_simulation_learning.json: "node_epsilon": 0.2, "device_epsilon": 0.2
            rl_epsilon_end=0.0,  # run_placement.py: decayed by epsilon / num_episode per episode
            rl_mode="epsilon",  # rl_agent.py node_selection/device_selection: argmax unless rand < epsilon
            entropy_weight=0.0,  # rl_simulation_learning.json: "entropy_weight": 0.0
            greedy_every=0,  # run_placement.py keeps the last weights
            rollouts_per_update=1,  # run_placement.py: one finish_episode per episode
            baseline="cumulative_mean",  # run_placement.py: running_time_sum / (episode_id + 1), after adding this cost
            discount=0.99,  # rl_agent.py finish_episode(gamma=0.99)
            grad_clip=0.0,  # rl_agent.py: backward() then step(), no clipping
            search_samples=0,  # the paper's code places greedily, without sampling at inference
            policy_preset="paper",  # rl_agent.py: Node_Policy, Device_Policy (PolicyConfig.paper)
        )
        values.update(changes)
        return cls(**values)

    @property
    def total_episodes(self) -> int:
        return sum(self.episodes)

    def stage_bounds(self) -> list[tuple[str, int, int]]:
        """``(stage, first episode, end episode)`` per stage; episodes count from 0 over the whole run."""
        bounds, first = [], 0
        for stage, count in zip(self.stages, self.episodes, strict=True):
            bounds.append((stage, first, first + count))
            first += count
        return bounds

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "config") -> TrainConfig:
        """The config a ``config.json`` holds. One written before ``policy`` was nested is read too: its flat policy inputs
        (``random_features``, ``affinity_features``) move into ``policy``, and a deleted switch at its old default is dropped
        (any other value of one is refused in one line: this workbench cannot train that run)."""
        return nested_from_dict(cls, data, FLAT_POLICY_FIELDS, RETIRED_FIELDS, source)

    def replace(self, **changes: Any) -> TrainConfig:
        return dataclasses.replace(self, **changes)


RETIRED_FIELDS: dict[str, Any] = {
    "self_imitation_weight": 0.0,
    "baseline_decay": 0.9,
    "rollout_baseline": "leave_one_out",
    "capacity_features": False,
}
"""Switches deleted from :class:`TrainConfig` (``docs/results.md``, "Switches deleted"), with the value at which an older run's
``config.json`` still reads (and resumes) as before."""
POLICY = "policy."
"""The prefix of a nested policy field's name on the command line (``--set policy.width=64``)."""
FLAT_POLICY_FIELDS = ("random_features", "affinity_features")
"""Policy inputs an older ``config.json`` holds as flat TrainConfig fields; they now live in ``TrainConfig.policy``."""


class NestsPolicy(Protocol):
    """A trainer's config that nests a :class:`PolicyConfig` (``policy``) beside its own ``method``."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def method(self) -> str: ...

    def policy_config(self) -> PolicyConfig: ...


Nested = TypeVar("Nested", bound=NestsPolicy)


def nest_policy(owner: str, policy: Any, method: str) -> PolicyConfig:
    """``policy`` (a :class:`PolicyConfig`) with the run's ``method``; a bad one is refused naming ``owner.policy``."""
    if not isinstance(policy, PolicyConfig):
        raise ValueError(f"{owner}.policy must be a PolicyConfig, got {type(policy).__name__}")
    try:
        return dataclasses.replace(policy, method=method)
    except ValueError as exc:
        raise ValueError(f"{owner}.policy: {exc}") from None


def replace_policy(config: Nested, **changes: Any) -> Nested:
    """``config`` with ``changes`` to the fields of its nested policy (``policy.FIELD`` on a command line)."""
    if not changes:
        return config
    try:
        policy = dataclasses.replace(config.policy_config(), **changes)
    except ValueError as exc:
        raise ValueError(f"{type(config).__name__}.policy: {exc}") from None
    return dataclasses.replace(config, policy=policy)


def nested_from_dict(cls: type[Nested], data: Mapping[str, Any], flat: tuple[str, ...], retired: Mapping[str, Any], source: str) -> Nested:
    """The ``cls`` config a ``config.json`` (``source``) holds, nested or in its form before the nesting: the ``flat``
    policy fields it holds move into ``policy`` (on top of ``cls``'s default one), and a ``retired`` switch at its old
    default is dropped (any other value of one is refused). A bad field is refused in one line naming ``source``."""
    known = {f.name: f for f in fields(cls)}
    try:
        values = without_retired(dict(data), dict(retired), source)
        moved = {name: values.pop(name) for name in flat if name in values}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"unknown {cls.__name__} field(s) {', '.join(unknown)}")
        if values.get("policy") is not None:
            values["policy"] = PolicyConfig.from_dict({**values["policy"], "method": values.get("method", known["method"].default)})
        return replace_policy(cls(**values), **check_config(moved, POLICY_FIELDS, "policy config"))
    except (TypeError, ValueError) as exc:  # a field the constructor refuses: name the file too
        raise ValueError(exc if str(exc).startswith(source) else f"{source}: {exc}") from None


def preset_policy(preset: str, method: str) -> PolicyConfig:
    """The architecture of ``TrainConfig.policy_preset`` ``preset`` for ``method``."""
    return PolicyConfig.paper(method) if preset == "paper" else PolicyConfig(method=method)


def device_counts(text: str) -> tuple[int, ...]:
    """A command line's comma-separated device counts (``2,4,8``)."""
    return tuple(int(v) for v in text.split(",") if v)


def add_config_arguments(
    parser: argparse.ArgumentParser, config_class: type, parsers: Mapping[str, Callable[[str], Any]], flat: tuple[str, ...] = ()
) -> None:
    """One ``--field-name`` option per field of the dataclass ``config_class``, parsed by ``parsers[field]`` or the default's type;
    a nested ``policy`` gets ``--set policy.FIELD=VALUE`` and one option per ``flat`` policy field (its name before the nesting)."""
    docs = field_docs(config_class)
    for f in fields(config_class):
        if f.name == "policy":
            add_policy_arguments(parser, flat)
            continue
        kind = parsers.get(f.name, type(f.default))
        parser.add_argument("--" + f.name.replace("_", "-"), type=kind, default=f.default, help=docs.get(f.name, f.name))


def add_policy_arguments(parser: argparse.ArgumentParser, flat: tuple[str, ...]) -> None:
    """``--set policy.FIELD=VALUE`` (repeatable) and ``--flat-name VALUE`` for each ``flat`` field of the nested policy."""
    docs, kinds = attribute_docs(PolicyConfig), policy_types()
    for name in flat:
        parser.add_argument(
            "--" + name.replace("_", "-"),
            dest=POLICY + name,
            metavar=name.upper(),
            type=value_parser(kinds[POLICY + name]),
            help=f"{POLICY}{name}: {docs[name]}",
        )
    parser.add_argument(
        "--set",
        dest="policy_set",
        metavar="policy.FIELD=VALUE",
        action="append",
        default=[],
        type=policy_setting,
        help="set one field of the nested policy (--fields lists them), e.g. --set policy.width=64; repeatable",
    )


def policy_setting(text: str) -> tuple[str, Any]:
    """One ``--set policy.FIELD=VALUE`` of a trainer: ``(FIELD, value)``, the value parsed with the field's type."""
    try:
        ((name, value),) = parse_overrides([text], policy_types(), flat=()).items()
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return name.removeprefix(POLICY), value


def value_parser(kind: str) -> Callable[[str], Any]:
    """A command-line parser of values of the field type ``kind`` (``"float"``, ``"tuple[str, ...]"``), named after it."""

    def parse(text: str) -> Any:
        return _parse_value(text, kind)

    parse.__name__ = kind
    return parse


def config_from_arguments(args: argparse.Namespace, config_class: type) -> Any:
    """The ``config_class`` config of a trainer's parsed options: one per field, and the ``policy.FIELD`` ones (a flat option,
    ``--set``) applied to its nested policy."""
    names = [f.name for f in fields(config_class)]
    config = config_class(**{name: getattr(args, name) for name in names if name != "policy"})
    if "policy" not in names:
        return config
    changes = {name.removeprefix(POLICY): value for name, value in vars(args).items() if name.startswith(POLICY) and value is not None}
    return replace_policy(config, **{**changes, **dict(args.policy_set)})


def trainer_parser(
    prog: str, description: str, config_class: type, parsers: Mapping[str, Callable[[str], Any]], flat: tuple[str, ...] = ()
) -> argparse.ArgumentParser:
    """A trainer's command line (``workbench train corpus`` ...): ``--out``, ``--fields`` and one option per config field
    (:func:`add_config_arguments`)."""
    parser = OneLineParser(prog=prog, description=description)
    parser.add_argument("--out", metavar="DIR", help="the run directory (created, or resumed when it holds this run)")
    parser.add_argument("--fields", action="store_true", help=f"list the {config_class.__name__} fields with their defaults, then exit")
    add_config_arguments(parser, config_class, parsers, flat)
    return parser


def parse_trainer_arguments(parser: argparse.ArgumentParser, argv: Sequence[str] | None, config_class: type) -> argparse.Namespace:
    """``parser``'s arguments; ``--fields`` prints the config's fields and exits 0, and ``--out`` is required otherwise."""
    args = parser.parse_args(argv)
    if args.fields:
        print(fields_table(config_class))
        raise SystemExit(0)
    if not args.out:
        parser.error("give --out DIR (the run directory)")
    return args


def fields_table(config_class: type) -> str:
    """One line per field of ``config_class``: name, default and meaning (what ``--fields`` prints)."""
    docs = field_docs(config_class)
    lines = []
    for f in fields(config_class):
        if isinstance(f.default, PolicyConfig):
            default = "PolicyConfig(...)"
        elif f.default is not dataclasses.MISSING:
            default = repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = repr(f.default_factory())
        else:
            default = "(required)"
        lines.append(f"{f.name:18} {default:14} {docs.get(f.name, '')}")
        if f.name == "policy":  # its fields, set as policy.FIELD, at the config's defaults
            policy, policy_docs = f.default if isinstance(f.default, PolicyConfig) else PolicyConfig(), attribute_docs(PolicyConfig)
            lines += [
                f"  {POLICY + p.name:30} {getattr(policy, p.name)!r:14} {policy_docs.get(p.name, '')}"
                for p in fields(PolicyConfig)
                if p.name != "method"
            ]
    return "\n".join(lines)


def attribute_docs(config_class: type) -> dict[str, str]:
    """Field name → its entry in the ``Attributes:`` section of ``config_class``'s docstring (:class:`PolicyConfig`'s)."""
    docs: dict[str, str] = {}
    text = inspect.getdoc(config_class) or ""
    name = None
    for line in text.partition("Attributes:")[2].splitlines():
        head, sep, rest = line.strip().partition(":")
        if line.startswith("    ") and not line.startswith("        ") and sep and head.isidentifier():
            name, docs[head] = head, rest.strip()
        elif name is not None and line.strip():
            docs[name] += " " + line.strip()
    return docs


def field_docs(config_class: type | None = None) -> dict[str, str]:
    """Field name → its docstring (the string literal under each field of ``config_class``, default :class:`TrainConfig`)."""
    tree = ast.parse(inspect.getsource(config_class or TrainConfig))
    body = next(node.body for node in tree.body if isinstance(node, ast.ClassDef))
    docs = {}
    for node, after in pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
        ):
            docs[node.target.id] = " ".join(str(after.value.value).split())
    return docs


def override_types() -> dict[str, str]:
    """What ``--set`` may name, with its type: every TrainConfig field but ``policy``, and ``policy.FIELD`` for each
    field of the nested :class:`~workbench.learn.PolicyConfig` but its method (``--method``)."""
    return {f.name: str(f.type) for f in fields(TrainConfig) if f.name != "policy"} | policy_types()


def policy_types() -> dict[str, str]:
    """``policy.FIELD`` → its type, for each field of :class:`~workbench.learn.PolicyConfig` but its method."""
    return {f"{POLICY}{f.name}": str(f.type) for f in fields(PolicyConfig) if f.name != "method"}


def parse_overrides(items: list[str], types: Mapping[str, str] | None = None, flat: tuple[str, ...] = FLAT_POLICY_FIELDS) -> dict[str, Any]:
    """``FIELD=VALUE`` strings (``--set``) parsed with each field's type (``types``, default :func:`override_types`); tuples are
    comma-separated.

    ``policy.FIELD`` keys stay dotted: :func:`config_from_values` applies them to the nested policy. The policy inputs that
    were flat TrainConfig fields before the nesting (``flat``, :data:`FLAT_POLICY_FIELDS`) are still read under their old names,
    so a command recorded then (a shipped run's ``meta.json``) reproduces its run.
    """
    types = override_types() if types is None else types
    out: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip().replace("-", "_")
        name = POLICY + name if name in flat else name
        if not sep or name not in types:
            hint = f"; policy fields are set as policy.{name}" if f"{POLICY}{name}" in types else ""
            raise ValueError(f"--set {item!r}: expected FIELD=VALUE with FIELD among {', '.join(types)}{hint}")
        kind = types[name]
        try:
            out[name] = _parse_value(text.strip(), kind)
        except ValueError:
            raise ValueError(f"--set {item!r}: {text!r} is not a valid {kind}") from None
    return out


def config_from_values(values: Mapping[str, Any], preset: str = "default") -> TrainConfig:
    """A :class:`TrainConfig` (``preset="paper"``: :meth:`TrainConfig.paper`) from field values, ``policy.FIELD`` keys applied
    to its nested policy."""
    own = {name: value for name, value in values.items() if not name.startswith(POLICY)}
    changes = {name.removeprefix(POLICY): value for name, value in values.items() if name.startswith(POLICY)}
    config = TrainConfig.paper(**own) if preset == "paper" else TrainConfig(**own)
    return config.with_policy(**changes)


def _parse_value(text: str, kind: str) -> Any:
    if kind.startswith("tuple"):
        return tuple(int(x) if "int" in kind else x for x in text.split(","))
    if kind == "bool":
        words = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False, "off": False}
        if text.lower() not in words:
            raise ValueError(text)
        return words[text.lower()]
    if kind == "int":
        return int(text)
    if kind == "float":
        return float(text)
    if "None" in kind and text.lower() in ("", "none"):
        return None
    return text
