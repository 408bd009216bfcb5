"""``workbench sweep CONFIG``: run a grid of placements into one results table (resumable)."""

from __future__ import annotations

from .common import positive_int


def register(sub) -> None:
    parser = sub.add_parser("sweep", help="run a grid of graphs × devices × methods × seeds (resumable)")
    parser.add_argument("config", metavar="CONFIG", help="a sweep config (.yaml, .yml or .json); see examples/sweeps/")
    parser.add_argument(
        "--engine", choices=("serial", "local", "ray"), help="serial, a local process pool, or Ray (default: the config's, else serial)"
    )
    parser.add_argument("--address", help="an existing Ray cluster to join (implies --engine ray), e.g. auto or HOST:6379")
    parser.add_argument("--workers", type=positive_int, help="processes (local) or CPUs of a private Ray instance (default: all cores)")
    parser.add_argument("--out", help="results table, .csv or .parquet (default: the config's out)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args) -> int:
    from ..sweeps import sweep

    frame = sweep(args.config, engine=args.engine, out=args.out, workers=args.workers, address=args.address, progress=not args.no_progress)
    ok = int((frame["status"] == "ok").sum()) if len(frame) else 0
    failed = frame[frame["status"] != "ok"] if len(frame) else frame
    print(f"{ok}/{len(frame)} cells ok")
    for _, row in failed.head(10).iterrows():
        print(f"  error in {row['graph']} devices={row['devices']} {row['label']} seed={row['seed']}: {row['error']}")
    if len(frame):
        summary = frame[frame["status"] == "ok"].groupby(["graph", "devices", "label"])["makespan"].agg(["mean", "std", "count"])
        if len(summary):
            print(summary.to_string(float_format=lambda v: f"{v:,.6g}"))
    return 0 if ok == len(frame) else 1
