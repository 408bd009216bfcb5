"""``workbench train GRAPH [GRAPH ...]``: train a placement policy through imitation, simulator RL and real-system RL."""

from __future__ import annotations

import argparse
import importlib
import shlex
import sys
from collections.abc import Sequence

from ..placers import methods
from . import CliError
from .common import positive_int

TRAINERS = {
    "corpus": ("workbench.training.corpus_training", "one policy across the corpus's training graphs (the zero-shot policies)"),
    "gate": ("workbench.training.gate_training", "the zero-shot gate: doppler_plc_only with a learned choice between device rules"),
    "scorer": ("workbench.training.learned_search", "learned_search's move scorer, from states of local searches"),
    "pretrained": ("workbench.training.pretrained", "the paper graphs' shipped policies: train, export, or print their table"),
}
"""``workbench train NAME ...``: the other trainers, each with its own ``--help`` (and ``--fields`` where it has a config)."""


def trainer_arguments(argv: Sequence[str]) -> argparse.Namespace | None:
    """The namespace that runs ``workbench train NAME ARGS`` for a trainer in :data:`TRAINERS`; ``None`` for any other command."""
    argv = list(argv)
    if len(argv) < 2 or argv[0] != "train" or argv[1] not in TRAINERS:
        return None
    name, rest = argv[1], [a for a in argv[2:] if a != "--debug"]

    def run_trainer(args: argparse.Namespace) -> int:
        module = importlib.import_module(TRAINERS[name][0])
        return int(module.main(rest, prog=f"workbench train {name}") or 0)

    return argparse.Namespace(command=f"train {name}", debug="--debug" in argv[2:], func=run_trainer)


def register(sub) -> None:
    modes = "\n".join(f"  workbench train {name:11} {text}" for name, (_, text) in TRAINERS.items())
    parser = sub.add_parser(
        "train",
        help="train a learned placer into a run directory (also: train corpus|gate|scorer|pretrained)",
        description="Train a placement policy; rerun the same command to resume an interrupted run.",
        epilog=f"other trainers (each with its own --help):\n{modes}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("graphs", nargs="*", metavar="GRAPH", help="bundled graph names or graph files; several train one policy on all")
    parser.add_argument("--devices", type=positive_int, default=4)
    parser.add_argument("--method", default="doppler", help=f"the policy to train: {', '.join(methods('learned'))} (default doppler)")
    parser.add_argument("--stages", help="comma-separated stages among il, sim, real (default il,sim)")
    parser.add_argument("--episodes", help="episodes per stage, comma-separated (default 2000,4000; 2000,2000 with --preset paper)")
    parser.add_argument(
        "--preset",
        choices=("default", "paper"),
        default="default",
        help="paper: TrainConfig.paper(), the paper's public code (docs/paper-preset.md); other options apply on top",
    )
    parser.add_argument("--out", metavar="DIR", help="the run directory (runs/NAME)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--init-checkpoint", metavar="PATH", help="start from this policy checkpoint")
    parser.add_argument(
        "--eval", nargs="+", default=[], metavar="GRAPH", help="graphs not trained on, placed by the trained policy at the end (transfer)"
    )
    parser.add_argument(
        "--oracle",
        default="sim",
        help="cost oracle of the real stage: sim, local (the local executor), HOST:PORT of a remote engine, or module:factory",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="any other TrainConfig field, e.g. --set rl_lr_start=3e-4, or policy.FIELD of the policy's architecture, e.g. "
        "--set policy.random_features=4 (repeatable; see --fields)",
    )
    parser.add_argument("--fields", action="store_true", help="list the TrainConfig fields with their defaults and meaning, then exit")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args) -> int:
    from ..runs import RunPaths, read_meta
    from ..training import TrainConfig, train
    from ..training.config import config_from_values, fields_table, parse_overrides

    if args.fields:
        print(fields_table(TrainConfig))
        return 0
    if not args.graphs or not args.out:
        raise CliError("give at least one GRAPH and --out DIR (the run directory)")
    values: dict = dict(
        graphs=tuple(args.graphs),
        devices=args.devices,
        method=args.method,
        seed=args.seed,
        init_checkpoint=args.init_checkpoint,
        oracle=args.oracle,
        eval_graphs=tuple(args.eval),
    )
    if args.stages is not None:
        values["stages"] = tuple(s.strip() for s in args.stages.split(",") if s.strip())
    if args.episodes is not None:
        try:
            values["episodes"] = tuple(int(e) for e in args.episodes.split(","))
        except ValueError:
            raise CliError(f"--episodes {args.episodes!r}: give whole numbers separated by commas, e.g. 2000,4000") from None
    try:
        values.update(parse_overrides(args.set))
    except ValueError as exc:
        raise CliError(str(exc)) from None
    try:
        config = config_from_values(values, args.preset)
    except ValueError as exc:  # TrainConfig checks every field
        raise CliError(str(exc)) from None
    command = shlex.join(["workbench", "train", *sys.argv[2:]]) if sys.argv[1:2] == ["train"] else None
    result = train(config, args.out, progress=not args.no_progress, command=command)
    if result.status == "interrupted":
        print(f"interrupted after {result.episodes} episodes; rerun the same command to resume", file=sys.stderr)
        return 130
    if result.status == "diverged":
        print(f"diverged: {read_meta(RunPaths(result.run_dir).meta_path).get('error')}", file=sys.stderr)
        return 1
    print(f"run          {result.run_dir} ({result.status}, {result.episodes} episodes)")
    for graph, found in result.evaluation.items():
        cp = found["critical_path"]
        label = graph if found["seen"] else f"{graph} (unseen)"
        print(
            f"{label:28} greedy {found['greedy']:,.6g} ({found['greedy'] / cp:.3f}× critical_path)  "
            f"best of {found['search_samples']} samples {found['search']:,.6g} ({found['search'] / cp:.3f}×)"
        )
    return 0
