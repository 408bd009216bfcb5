"""``workbench info GRAPH``: what a graph holds and its lower bound."""

from __future__ import annotations

from ..graph import printable
from .common import add_graph_argument, load_graph_argument, positive_int, print_json


def register(sub) -> None:
    parser = sub.add_parser("info", help="describe a graph: sizes, costs, longest path, lower bound")
    add_graph_argument(parser)
    parser.add_argument("--devices", type=positive_int, default=4, help="devices for the lower bound (default 4)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)


def graph_summary(graph, devices: int) -> dict:
    from ..sim import lower_bound

    return {
        "name": graph.name,
        "format": graph.metadata.get("format", "unknown"),
        "nodes": graph.num_nodes,
        "edges": graph.num_edges,
        "total_compute": graph.total_compute,
        "total_communication": graph.total_comm,
        "longest_path": graph.longest_path(with_comm=False),
        "longest_path_with_communication": graph.longest_path(with_comm=True),
        "depth": int(graph.depth.max(initial=-1)) + 1,
        "devices": devices,
        "lower_bound": lower_bound(graph, devices),
    }


def run(args) -> int:
    summary = graph_summary(load_graph_argument(args.graph), args.devices)
    if args.json:
        print_json(summary)
    else:
        width = max(map(len, summary))
        for key, value in summary.items():
            shown = f"{value:,.6g}" if isinstance(value, float) else printable(str(value))
            print(f"{key.replace('_', ' '):<{width}}  {shown}")
    return 0
