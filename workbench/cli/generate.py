"""``workbench generate KIND --param k=v ... --out FILE``: build a graph from a generator family."""

from __future__ import annotations

import json

from . import CliError
from .common import print_json


def register(sub) -> None:
    parser = sub.add_parser("generate", help="generate a graph: the paper's workloads at any size, random DAGs")
    parser.add_argument("kind", nargs="?", metavar="KIND", help="generator family (see --list)")
    parser.add_argument(
        "--param", action="append", default=[], metavar="K=V", help="a parameter; values are JSON or plain strings (repeatable)"
    )
    parser.add_argument("--out", metavar="FILE", help="write the graph as JSON (else print a summary)")
    parser.add_argument("--list", action="store_true", help="list the families and their parameters")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)


def parse_params(items: list[str], option: str = "--param") -> dict:
    """``["a=1", "b=x"]`` → ``{"a": 1, "b": "x"}``: JSON values where they parse, strings otherwise; errors name ``option``."""
    params = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"{option} {item!r}: expected KEY=VALUE")
        try:
            params[key.strip()] = json.loads(text)
        except json.JSONDecodeError:
            params[key.strip()] = text
    return params


def run(args) -> int:
    from ..generators import GENERATORS, generate, generator_parameters

    if args.list:
        listing = {kind: {"description": GENERATORS[kind][2], "parameters": generator_parameters(kind)} for kind in GENERATORS}
        if args.json:
            print_json(listing)
        else:
            for kind, entry in listing.items():
                print(f"{kind:<18} {entry['description']}")
                print(" " * 19 + ", ".join(f"{k}={v}" for k, v in entry["parameters"].items()))
        return 0
    if args.kind is None:
        raise CliError(f"name a generator family: {', '.join(GENERATORS)}")
    try:
        graph = generate(args.kind, **parse_params(args.param))
    except ValueError as exc:  # the generator checks its family and every parameter
        raise CliError(str(exc)) from None
    save_and_report(graph, args)
    return 0


def save_and_report(graph, args, extra: str = "") -> None:
    """Write ``graph`` to ``args.out`` when given, then print a one-line summary (or JSON with ``args.json``)."""
    from .info import graph_summary

    summary = {**graph_summary(graph, 4), "time_unit": graph.metadata["time_unit"], "total_flops": graph.metadata.get("total_flops")}
    if args.out:
        graph.save(args.out)
        summary["out"] = args.out
    if args.json:
        print_json(summary)
    else:
        print(
            f"{graph.name}: {graph.num_nodes} nodes, {graph.num_edges} edges, depth {summary['depth']}, "
            f"total compute {graph.total_compute:.6g} {summary['time_unit']}{extra}" + (f" -> {args.out}" if args.out else "")
        )
