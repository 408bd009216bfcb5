"""``workbench place GRAPH --method NAME``: place a graph and simulate the placement."""

from __future__ import annotations

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


def register(sub) -> None:
    parser = sub.add_parser("place", help="place a graph with one method and simulate it")
    parser.add_argument("--list", action="store_true", help="list the registered methods and exit")
    parser.add_argument("graph", metavar="GRAPH", nargs="?", help="a graph file (.txt, .stg, .json) or a bundled graph name such as ffnn")
    parser.add_argument("--devices", type=positive_int, help=f"number of identical devices (default: --start's, else {DEFAULT_DEVICES})")
    parser.add_argument("--method", default="critical_path", help="a registered method (see `workbench place --list`)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=positive_int, help="simulator evaluations (search methods)")
    parser.add_argument(
        "--time-limit",
        type=float,
        metavar="SECONDS",
        help=f"wall-time limit (search and exact methods; doppler's best of --samples; a search's default is {SEARCH_TIME_LIMIT:g} s)",
    )
    parser.add_argument("--checkpoint", help="checkpoint file (learned methods)")
    parser.add_argument("--samples", type=positive_int, help="learned methods: best of the greedy placement and SAMPLES-1 further ones")
    parser.add_argument(
        "--search", help="doppler: 'active' adapts the policy to this graph within --budget simulator evaluations (EAS active search)"
    )
    parser.add_argument(
        "--polish",
        type=float,
        metavar="FRACTION",
        help="active search: the share of --budget given to local_search from its best placement so far (0: pure EAS)",
    )
    parser.add_argument(
        "--start-policy",
        metavar="CHECKPOINT",
        help="learned_search: a constructive policy whose greedy placement joins the starting heuristics (one more evaluation)",
    )
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
    from ..sim import lower_bound, optimality_gap, simulate

    if args.list:
        methods, installed = placers(), registered(available=True)
        width = max(map(len, methods))
        for name, description in methods.items():
            missing = "" if name in installed else f" (not installed: {pip_install(*extras_of(REGISTRY[name].requires))})"
            print(f"{name:<{width}}  {description}{missing}")
        return 0
    if args.graph is None:
        raise CliError("GRAPH is required (or --list to see the methods)")
    given = {
        "budget": args.budget,
        "time_limit": args.time_limit,
        "checkpoint": args.checkpoint,
        "samples": args.samples,
        "search": args.search,
        "polish": args.polish,
        "start_policy": args.start_policy,
    }
    if args.time_limit is not None and not args.time_limit > 0:
        raise CliError(f"--time-limit must be > 0 seconds, got {args.time_limit}")
    options = {k: v for k, v in given.items() if v is not None}
    accepted = set(placer_options(args.method)) if args.method in REGISTRY else set()
    if {"budget", "time_limit"} <= accepted and args.time_limit is None:
        options["time_limit"] = SEARCH_TIME_LIMIT
    if "progress" in accepted and sys.stderr.isatty():
        options["progress"] = True  # a tqdm bar on the terminal; stdout stays clean for --json
    graph = load_graph_argument(args.graph)
    devices = args.devices or DEFAULT_DEVICES
    if args.start:
        if "start" not in placer_options(args.method):
            raise CliError(f"--start: method {args.method!r} takes no starting placement (local_search and learned_search do)")
        start = placement_argument(args.start, "--start", graph, args.devices)
        options["start"], devices = start.assignment, start.devices
    placement = place(graph, method=args.method, devices=devices, seed=args.seed, **options)
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
