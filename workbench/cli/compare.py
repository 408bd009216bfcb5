"""``workbench compare GRAPH --devices N``: several placement methods side by side on one graph."""

from __future__ import annotations

import sys

from ..extras import extras_of, pip_install
from ..placers import methods as registered
from . import CliError
from .common import SEARCH_TIME_LIMIT, add_graph_argument, load_graph_argument, positive_int, print_json

DEFAULT_KINDS = ("baseline", "heuristic", "rule", "search")
"""The kinds of method compared by default: all but random, exact (slow) and learned (need checkpoints)."""


def register(sub) -> None:
    parser = sub.add_parser("compare", help="compare placement methods on one graph")
    add_graph_argument(parser)
    parser.add_argument("--devices", type=positive_int, default=4)
    parser.add_argument(
        "--methods",
        help=f"comma-separated registered methods (default, those installed: {','.join(registered(*DEFAULT_KINDS, available=True))})",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=positive_int, help="simulator evaluations for search methods")
    parser.add_argument(
        "--time-limit",
        type=float,
        metavar="SECONDS",
        help=f"wall-time limit for search and exact methods (a search's default is {SEARCH_TIME_LIMIT:g} s)",
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="[METHOD:]KEY=VALUE",
        help="an option of one method (METHOD:KEY=VALUE), or of every chosen method that takes KEY (KEY=VALUE); repeatable, "
        "typed by each method's declaration (`workbench place --list --method NAME`); it wins over --budget and --time-limit",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)


def parse_methods(text: str | None) -> list[str]:
    """The method list of ``--methods``; unknown names get an error listing the registered ones, and a method whose
    optional extra is not installed one naming the extra. Without ``--methods``: the default kinds' methods that
    are installed, with one line on stderr naming those left out and the extra that brings them."""
    from ..placers import REGISTRY, require

    if text is None:
        available = registered(*DEFAULT_KINDS, available=True)
        left_out = [m for m in registered(*DEFAULT_KINDS) if m not in available]
        if left_out:
            extras = extras_of(module for m in left_out for module in REGISTRY[m].requires)
            print(f"workbench compare: left out {', '.join(left_out)}, not installed ({pip_install(*extras)} brings them)", file=sys.stderr)
        return available
    methods = [m.strip() for m in text.split(",")]
    if not any(methods):
        raise CliError("--methods is empty; give comma-separated names")
    if not all(methods):
        raise CliError(f"--methods {text!r} has an empty name; give comma-separated names with nothing between two commas")
    unknown = [m for m in methods if m not in REGISTRY]
    if unknown:
        raise CliError(f"unknown method(s) {', '.join(unknown)}; registered: {', '.join(REGISTRY)}")
    for method in methods:
        require(method)
    return list(dict.fromkeys(methods))


def run(args) -> int:
    from ..placers import place, placer_options
    from ..placers.options import resolve_options
    from ..sim import optimality_gap

    methods = parse_methods(args.methods)
    graph = load_graph_argument(args.graph)
    if args.time_limit is not None and not args.time_limit > 0:
        raise CliError(f"--time-limit must be > 0 seconds, got {args.time_limit}")
    given = resolve_options(methods, args.option)
    placements = []
    for method in methods:
        accepted = placer_options(method)
        clock = SEARCH_TIME_LIMIT if args.time_limit is None and "budget" in accepted else args.time_limit  # place's default
        options = {k: v for k, v in (("budget", args.budget), ("time_limit", clock)) if v is not None and k in accepted}
        options.update(given[method])
        placements.append(place(graph, method=method, devices=args.devices, seed=args.seed, **options))
    bound = max(p.lower_bound for p in placements)
    rows = [{**p.to_dict(), "gap": optimality_gap(p.makespan, bound)} for p in placements]  # each row a placement file's form
    if args.json:
        print_json({"graph": graph.name, "devices": args.devices, "best_lower_bound": bound, "rows": rows})
        return 0
    width = max(len("method"), *(len(r["method"]) for r in rows))
    print(f"{graph.name} on {args.devices} devices; best lower bound {bound:,.6g}")
    print(f"{'method':<{width}}  {'makespan':>14}  {'gap':>7}  {'evaluations':>11}  {'seconds':>8}  {'CPU s':>8}")
    for r in rows:
        gap = "n/a" if r["gap"] is None else format(r["gap"], ".1%")
        times = f"{r['seconds']:>8.3f}  {r['cpu_seconds']:>8.3f}"
        print(f"{r['method']:<{width}}  {r['makespan']:>14,.6g}  {gap:>7}  {r['evaluations']:>11,}  {times}")
    return 0
