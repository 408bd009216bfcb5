"""Convert a policy checkpoint of the old pickle format (``.pt``) into a ``.safetensors`` one, once.

Unpickling can run code, so this asks for ``--trust-pickle-checkpoint``: use
it only on files you made yourself. TorchScript archives are refused even
then. ``--graph``/``--devices`` record what the policy was trained for (the
old format did not), so placing it on another graph is refused later; without
them the policy records no graph and is only for training from (placing it is
refused)::

    python -m workbench.learn.migrate runs/old/checkpoints/sim.pt --trust-pickle-checkpoint --graph chain_mm --devices 4
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ..datasets import bundled_graph
from ..formats import load_graph
from .checkpoint import CHECKPOINT_SUFFIX, CheckpointError, TrainedFor
from .policy import load_policy

__all__ = ["migrate", "main"]


def migrate(source: str | Path, target: str | Path, trained_for: TrainedFor | None = None) -> Path:
    """Read the trusted pickle checkpoint ``source`` and write it as ``target`` (weights, config and ``extra`` unchanged)."""
    policy = load_policy(source, allow_unsafe_pickle=True)
    policy.trained_for = trained_for
    policy.save(target, extra=policy.checkpoint_extra)
    return Path(target)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.learn.migrate", description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="the old .pt checkpoint")
    parser.add_argument("--out", help=f"the new checkpoint (default: SOURCE with the suffix {CHECKPOINT_SUFFIX})")
    parser.add_argument("--trust-pickle-checkpoint", action="store_true", help="I made this file myself: unpickling it may run code")
    parser.add_argument(
        "--graph", action="append", default=[], metavar="GRAPH", help="a graph it was trained on (bundled name or file; repeatable)"
    )
    parser.add_argument("--devices", type=int, help="the device count it was trained for (with --graph)")
    parser.add_argument("--cross-graph", action="store_true", help="declare the policy fit for any graph and device count")
    args = parser.parse_args(argv)
    if not args.trust_pickle_checkpoint:
        parser.error("reading a pickle checkpoint can run code: pass --trust-pickle-checkpoint if you made the file yourself")
    if bool(args.graph) != (args.devices is not None):
        parser.error("--graph and --devices go together")
    target = Path(args.out) if args.out else Path(args.source).with_suffix(CHECKPOINT_SUFFIX)
    try:
        graphs = [load_graph(g) if Path(g).exists() else bundled_graph(g) for g in args.graph]
        trained_for = TrainedFor.of(graphs, args.devices, args.cross_graph or None) if graphs else None
        migrate(args.source, target, trained_for)
    except (CheckpointError, ValueError, KeyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{args.source} -> {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
