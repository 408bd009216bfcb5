"""``workbench simulate GRAPH --assignment A``: makespan and trace of a placement."""

from __future__ import annotations

from . import CliError
from .common import (
    DEFAULT_DEVICES,
    add_graph_argument,
    add_trace_arguments,
    json_argument,
    load_graph_argument,
    placement_argument,
    positive_int,
    print_json,
    write_trace,
)


def register(sub) -> None:
    parser = sub.add_parser("simulate", help="simulate one placement (or many) of a graph")
    add_graph_argument(parser)
    parser.add_argument(
        "--devices", type=positive_int, help=f"number of identical devices (default: the placement file's, else {DEFAULT_DEVICES})"
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--assignment",
        help="a placement: a JSON list of device ids, or a file in the placement form (`place --out`, a run's best/placement.json)",
    )
    which.add_argument("--assignments", help="a JSON file holding a list of assignments; prints their makespans")
    parser.add_argument("--engine", choices=("fast", "simpy"), default="fast")
    parser.add_argument("--priority", choices=("fifo", "blevel"), default="fifo", help="device queue order (default fifo, the paper's)")
    parser.add_argument("--priority-order", metavar="ORDER", help="a JSON list of every op, highest priority first (overrides --priority)")
    add_trace_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)


def run(args) -> int:
    from ..sim import check_assignment, lower_bound, simulate, simulate_many

    graph = load_graph_argument(args.graph)
    priority = args.priority
    if args.priority_order:
        priority = json_argument(args.priority_order, "--priority-order")
        if not isinstance(priority, list):
            raise CliError("--priority-order must be a JSON list of op ids")
    if args.assignments:
        devices = args.devices or DEFAULT_DEVICES
        batch = json_argument(args.assignments, "--assignments")
        if not isinstance(batch, list) or not all(isinstance(a, list) for a in batch):
            raise CliError("--assignments must hold a JSON list of assignments (lists of device ids)")
        for i, assignment in enumerate(batch):
            try:
                check_assignment(graph, assignment, devices)
            except ValueError as exc:
                raise CliError(f"assignment {i}: {exc}") from None
        makespans = simulate_many(graph, batch, devices, priority) if batch else []
        print_json([float(x) for x in makespans])
        return 0
    placement = placement_argument(args.assignment, "--assignment", graph, args.devices)
    result = simulate(graph, placement.assignment, placement.devices, engine=args.engine, priority=priority)
    write_trace(args, graph, result.trace, f"{graph.name} on {placement.devices} devices")
    summary = {
        "graph": graph.name,
        "makespan": result.makespan,
        "lower_bound": lower_bound(graph, placement.devices),
        "engine": result.engine,
        "devices": result.devices,
        "priority": result.priority,
    }
    if args.json:
        print_json(summary)
    else:
        for key, value in summary.items():
            print(f"{key:<12} {value:,.6g}" if isinstance(value, float) else f"{key:<12} {value}")
        if args.trace:
            print(f"{'trace':<12} {args.trace} ({args.trace_format})")
    return 0
