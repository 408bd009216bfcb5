"""``workbench sweep CONFIG``: run a grid of placements into one results table (resumable)."""

from __future__ import annotations

from .common import ENGINES, positive_int


def register(sub) -> None:
    parser = sub.add_parser("sweep", help="run a grid of graphs × devices × methods × seeds (resumable)")
    parser.add_argument("config", metavar="CONFIG", help="a sweep config (.yaml, .yml or .json); see examples/sweeps/")
    parser.add_argument("--engine", choices=ENGINES, help="serial, a local process pool, or Ray (default: the config's, else serial)")
    parser.add_argument(
        "--address", help="a running Ray cluster to join (implies --engine ray), e.g. HOST:6379 from `ray start --head` (docs/sweeps.md)"
    )
    parser.add_argument(
        "--workers", "--num-cpus", type=positive_int, help="processes (local) or CPUs of a private Ray instance (default: all cores)"
    )
    parser.add_argument("--out", help="results table, .csv or .parquet (default: the config's out)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args) -> int:
    from ..sweeps import sweep

    frame = sweep(args.config, engine=args.engine, out=args.out, workers=args.workers, address=args.address, progress=not args.no_progress)
    ok = int((frame["status"] == "ok").sum()) if len(frame) else 0
    failed = frame[frame["status"] != "ok"] if len(frame) else frame
    print(f"{ok}/{len(frame)} cells ok; results in {frame.attrs['out']}")
    for _, row in failed.head(10).iterrows():
        print(f"  error in {row['graph']} devices={row['devices']} {row['label']} seed={row['seed']}: {row['error']}")
    summary = summarize(frame)
    if len(summary):
        print(summary.to_string(float_format=lambda v: f"{v:,.6g}", formatters={"gap": lambda v: f"{v:.1%}"}))
    return 0 if ok == len(frame) else 1


def summarize(frame):
    """Mean, std and count of the makespan over seeds, one row per graph, device count, method label and option set
    (a grid such as ``budget: [500, 5000]`` gives one row each), with the gap of the mean to the best lower bound."""
    ok = frame[frame["status"] == "ok"] if len(frame) else frame
    keys = ["graph", "devices", "label", "options"]
    if not len(ok):
        return ok
    stats = ok.groupby(keys, sort=False)["makespan"].agg(["mean", "std", "count"])
    bound = ok.groupby(["graph", "devices"])["lower_bound"].max()
    stats["gap"] = stats["mean"] / [bound[(graph, devices)] for graph, devices, _, _ in stats.index] - 1
    if (ok["options"] == "{}").all():  # no option grid: the column would only repeat "{}"
        stats = stats.droplevel("options")
    return stats
