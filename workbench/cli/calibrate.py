"""``workbench calibrate GRAPH --devices N``: measure placements for real, fit the simulator, report the gap."""

from __future__ import annotations

import os
from pathlib import Path

from ..extras import require_modules
from .common import add_executor_arguments, add_graph_argument, load_graph_argument, positive_int, print_json


def register(sub) -> None:
    parser = sub.add_parser("calibrate", help="fit the simulator to real measurements; Spearman before/after and a scatter plot")
    add_graph_argument(parser)
    parser.add_argument("--devices", type=positive_int, default=4, help="devices (local executor workers; default 4)")
    parser.add_argument("--placements", type=positive_int, default=24, help="placements to measure (default 24, at least 4)")
    parser.add_argument("--repeats", type=positive_int, default=3, help="timed runs per placement (default 3)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per placement (default 60)")
    parser.add_argument(
        "--statistic",
        choices=("median", "min"),
        default="median",
        help="per placement: median or minimum of its runs (min resists other load)",
    )
    parser.add_argument("--seed", type=int, default=0, help="which random placements (default 0)")
    parser.add_argument("--engine", metavar="HOST:PORT", help="measure on a remote engine instead of the local executor")
    add_executor_arguments(parser, "local executor", 0.1, "the graph")
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="output folder (default $WORKBENCH_RUNS or runs/, then calibrate-GRAPH-Nd); holds a journal to resume from",
    )
    parser.add_argument("--png", action="store_true", help="also write calibration.png (needs kaleido and Chromium)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(func=run)


def run(args) -> int:
    from ..systems import EngineError, calibrate, make_oracle, oracle_spec_kind
    from ..systems.executor import WaitKernels
    from . import CliError

    if not args.timeout > 0:
        raise CliError(f"--timeout must be > 0 seconds, got {args.timeout}")
    graph = load_graph_argument(args.graph)
    if args.engine:
        if oracle_spec_kind(args.engine) != "remote":
            raise CliError(f"--engine is HOST:PORT of a remote engine, got {args.engine!r}")
        oracle = make_oracle(args.engine, args.devices)
        try:
            hello = oracle.hello()
        except EngineError as exc:
            raise CliError(str(exc)) from None
        if hello["devices"] < args.devices:
            raise CliError(f"the engine at {args.engine} has {hello['devices']} devices, fewer than --devices {args.devices}")
    else:
        require_modules("the local executor (calibrate without --engine)", "torch")
        oracle = make_oracle(
            "local",
            args.devices,
            device=args.device,
            time_scale=args.time_scale,
            target_seconds=args.target_seconds,
            kernels=WaitKernels() if args.emulate else None,
        )
    out = Path(args.out) if args.out else Path(os.environ.get("WORKBENCH_RUNS") or "runs") / f"calibrate-{graph.name}-{args.devices}d"
    try:
        result = calibrate(
            graph,
            oracle,
            args.devices,
            args.placements,
            args.repeats,
            args.timeout,
            args.seed,
            journal=out / "measurements.jsonl",
            statistic=args.statistic,
        )
    except RuntimeError as exc:
        raise CliError(str(exc)) from None
    try:
        paths = result.save(out, png=args.png)
    except Exception as exc:  # PNG export depends on kaleido and a browser
        if not args.png:
            raise
        paths = result.save(out)
        print(f"warning: no PNG ({type(exc).__name__}: {exc}); wrote HTML and JSON")
    summary = {**result.summary, "fit": result.fit, "files": paths, "failures": result.failures}
    if args.json:
        print_json(summary)
        return 0
    s = result.summary
    print(
        f"{graph.name} on {args.devices} devices: {s['measured']} of {s['placements']} placements measured "
        f"({args.repeats} rounds, {s['statistic']} per placement)"
    )
    print(
        f"Spearman (simulated vs measured)  before {s['spearman_before']:.3f}  after {s['spearman_after']:.3f}  "
        f"held-out after {s['spearman_after_held_out']:.3f}"
    )
    print(f"median relative error             before {s['median_relative_error_before']:.1%}  after {s['median_relative_error_after']:.1%}")
    f = result.fit
    print(
        f"fit: op overhead {f['op_overhead_seconds'] * 1e6:.1f} us, link latency {f['link_latency_seconds'] * 1e6:.1f} us, "
        f"makespan factor {f['makespan_factor']:.3f}"
    )
    for failure in result.failures:
        print(f"failed: {failure}")
    for kind, path in paths.items():
        print(f"{kind:<8} {path}")
    return 0
