"""``workbench bench NAME``: run a benchmark and print its table (or JSON)."""

from __future__ import annotations

from .common import print_json


def register(sub) -> None:
    from ..bench import BENCHMARKS

    parser = sub.add_parser("bench", help="run a speed benchmark: " + ", ".join(BENCHMARKS))
    parser.add_argument("name", choices=sorted(BENCHMARKS), metavar="NAME", help=", ".join(f"{k}: {v[1]}" for k, v in BENCHMARKS.items()))
    parser.add_argument("--quick", action="store_true", help="shorter timings (a smoke test)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)


def run(args) -> int:
    from ..bench import get_benchmark, machine

    result = get_benchmark(args.name)(quick=args.quick)
    result["machine"] = machine()
    if args.json:
        print_json(result)
    else:
        print(result["markdown"])
        m = result["machine"]
        print(f"\nmachine: {m['cpu']}, {m['cores']} cores, Python {m['python']}")
    return 0
