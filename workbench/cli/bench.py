"""``workbench bench NAME``: run a benchmark and print its table (or JSON)."""

from __future__ import annotations

from . import CliError
from .common import ENGINES, positive_int, print_json


def register(sub) -> None:
    from ..bench import BENCHMARKS

    parser = sub.add_parser("bench", help="run a speed benchmark: " + ", ".join(BENCHMARKS))
    parser.add_argument("name", choices=sorted(BENCHMARKS), metavar="NAME", help=", ".join(f"{k}: {v[1]}" for k, v in BENCHMARKS.items()))
    parser.add_argument("--quick", action="store_true", help="shorter timings (a smoke test)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--engine", choices=ENGINES, help="learned only: run its cells serially (default), on a local process pool, or on Ray (resumable)"
    )
    parser.add_argument("--paper-code", metavar="DIR", help="episode only: a checkout of github.com/xinyuyao/Doppler to time side by side")
    parser.add_argument(
        "--variant", action="append", default=[], metavar="NAME", help="training only: train this variant (repeat for more; default: all)"
    )
    parser.add_argument(
        "--graph", action="append", default=[], metavar="NAME", help="training only: this paper graph alone (repeatable; default: all)"
    )
    parser.add_argument("--address", help="learned only: a running Ray cluster to join (implies --engine ray), e.g. HOST:6379")
    parser.add_argument(
        "--workers", "--num-cpus", type=positive_int, help="learned only: processes (local) or CPUs of a private Ray instance"
    )
    parser.set_defaults(func=run)


def run(args) -> int:
    from ..bench import get_benchmark, machine

    engine = args.engine or ("ray" if args.address else None)
    if args.name != "learned" and (engine or args.workers):
        raise CliError(f"--engine, --address and --workers are for bench learned; {args.name} measures in this process")
    if args.address and engine != "ray":
        raise CliError(f"--address joins a Ray cluster: it needs --engine ray, not {engine!r}")
    if args.paper_code and args.name != "episode":
        raise CliError(f"--paper-code is for bench episode, not {args.name}")
    if args.name != "training" and (args.variant or args.graph):
        raise CliError(f"--variant and --graph are for bench training, not {args.name}")
    options: dict = {"engine": engine or "serial", "workers": args.workers, "address": args.address} if args.name == "learned" else {}
    if args.variant or args.graph:
        options.update(variants=tuple(args.variant), graphs=tuple(args.graph))
    if args.paper_code:
        options["paper_code"] = args.paper_code
    result = get_benchmark(args.name)(quick=args.quick, **options)
    result["machine"] = machine()
    if args.json:
        print_json(result)
    else:
        print(result["markdown"])
        m = result["machine"]
        print(f"\nmachine: {m['cpu']}, {m['cores']} cores, Python {m['python']}")
    return 0
