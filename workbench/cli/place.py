"""``workbench place GRAPH --method NAME``: place a graph and simulate the placement."""

from __future__ import annotations

import argparse
import sys

from ..extras import extras_of, pip_install
from . import CliError
from .common import (
    DEFAULT_DEVICES,
    SEARCH_TIME_LIMIT,
    add_trace_arguments,
    load_graph_argument,
    placement_argument,
    positive_int,
    print_json,
    write_trace,
)

DROPPED = {
    "--checkpoint": "checkpoint=FILE",
    "--samples": "samples=N",
    "--search": "search=active",
    "--polish": "polish=FRACTION",
    "--start-policy": "start_policy=CHECKPOINT",
}
"""The method-specific flags place had before ``--option``, and what to write instead."""


class Dropped(argparse.Action):
    """A flag of :data:`DROPPED`: refused with the ``--option`` that replaces it."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        parser.error(f"{option_string} was dropped: use --option {DROPPED[str(option_string)]}")


def register(sub) -> None:
    parser = sub.add_parser("place", help="place a graph with one method and simulate it")
    parser.add_argument(
        "--list", action="store_true", help="list the registered methods and exit; with --method, that method's options and their types"
    )
    parser.add_argument("graph", metavar="GRAPH", nargs="?", help="a graph file (.txt, .stg, .json) or a bundled graph name such as ffnn")
    parser.add_argument("--devices", type=positive_int, help=f"number of identical devices (default: --start's, else {DEFAULT_DEVICES})")
    parser.add_argument("--method", help="a registered method (see `workbench place --list`; default: critical_path)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=positive_int, help="simulator evaluations (search methods)")
    parser.add_argument(
        "--time-limit",
        type=float,
        metavar="SECONDS",
        help=f"wall-time limit (search and exact methods; a learned policy's samples; a search's default is {SEARCH_TIME_LIMIT:g} s)",
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any option of the method, e.g. checkpoint=FILE, samples=8, search=active (repeatable; typed by the method's own "
        "declaration, see `workbench place --list --method NAME`; it wins over --budget and --time-limit)",
    )
    for flag in DROPPED:
        parser.add_argument(flag, nargs="?", action=Dropped, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    parser.add_argument(
        "--start",
        metavar="FILE",
        help="search methods: start from this placement (the placement form of --out, a run's best/placement.json, or a JSON list)",
    )
    parser.add_argument("--out", metavar="FILE", help="write the placement as JSON (the form `simulate --assignment` and --start read)")
    add_trace_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the placement as JSON (the form --out writes)")
    parser.set_defaults(func=run)


def run(args) -> int:
    from ..fileio import atomic_write_json
    from ..placers import REGISTRY, methods as registered, place, placer_options, placers
    from ..placers.options import declared_options, resolve_options
    from ..sim import lower_bound, optimality_gap, simulate

    if args.list and args.method:
        for spec in declared_options(args.method).values():
            if spec.type:  # an option given otherwise (start: --start FILE) is not listed
                print(spec.describe())
        return 0
    method = args.method or "critical_path"
    if args.list:
        methods, installed = placers(), registered(available=True)
        width = max(map(len, methods))
        for name, description in methods.items():
            missing = "" if name in installed else f" (not installed: {pip_install(*extras_of(REGISTRY[name].requires))})"
            print(f"{name:<{width}}  {description}{missing}")
        return 0
    if args.graph is None:
        raise CliError("GRAPH is required (or --list to see the methods)")
    if args.time_limit is not None and not args.time_limit > 0:
        raise CliError(f"--time-limit must be > 0 seconds, got {args.time_limit}")
    options = {k: v for k, v in (("budget", args.budget), ("time_limit", args.time_limit)) if v is not None}
    options.update(resolve_options([method], args.option)[method])
    accepted = set(placer_options(method)) if method in REGISTRY else set()
    if {"budget", "time_limit"} <= accepted and "time_limit" not in options:
        options["time_limit"] = SEARCH_TIME_LIMIT
    if "progress" in accepted and sys.stderr.isatty():
        options["progress"] = True  # a tqdm bar on the terminal; stdout stays clean for --json
    graph = load_graph_argument(args.graph)
    devices = args.devices or DEFAULT_DEVICES
    if args.start:
        if "start" not in placer_options(method):
            raise CliError(f"--start: method {method!r} takes no starting placement (local_search and learned_search do)")
        start = placement_argument(args.start, "--start", graph, args.devices)
        options["start"], devices = start.assignment, start.devices
    placement = place(graph, method=method, devices=devices, seed=args.seed, **options)
    if args.out:
        atomic_write_json(args.out, placement.to_dict())
    if args.trace:
        write_trace(
            args, graph, simulate(graph, placement.assignment, devices).trace, f"{graph.name} on {devices} devices, {placement.method}"
        )
    if args.json:
        print_json(placement.to_dict())
        return 0
    print(f"method       {placement.method}")
    print(f"makespan     {placement.makespan:,.6g}")
    gap = optimality_gap(placement.makespan, placement.lower_bound)
    print(f"lower bound  {placement.lower_bound:,.6g}  (gap {'n/a' if gap is None else format(gap, '.1%')})")
    simple = lower_bound(graph, devices)
    if placement.lower_bound > simple:
        print(f"             proven by {placement.method}; the simple bound is {simple:,.6g}")
    if "start_makespan" in placement.details:
        print(f"search       {search_summary(placement, options.get('time_limit'))}")
    print(f"seconds      {placement.seconds:.3f}")
    print(f"assignment   {placement.assignment.tolist()}")
    for what, path in (("placement", args.out), ("trace", args.trace)):
        if path:
            print(f"{what:<12} {path}")
    return 0


def search_summary(placement, time_limit: float | None) -> str:
    """What a search gained over its start, in how many evaluations, and whether the clock stopped it."""
    start = float(placement.details["start_makespan"])
    gain = 1 - placement.makespan / start if start > 0 else 0.0
    where = placement.details.get("start_method") or "the policy's greedy placement"
    text = f"{placement.evaluations:,} evaluations, {gain:.2%} shorter than {where} ({start:,.6g})"
    if time_limit is not None and placement.seconds >= 0.95 * time_limit:
        text += f"; stopped by the {time_limit:g} s clock (--time-limit)"
    return text
