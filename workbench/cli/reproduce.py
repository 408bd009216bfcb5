"""``workbench reproduce``: the paper's comparison in the simulator, written as a report section."""

from __future__ import annotations

from .common import ENGINES, positive_int


def register(sub) -> None:
    parser = sub.add_parser("reproduce", help="rerun the paper's comparison in the simulator and write the report")
    parser.add_argument("--quick", action="store_true", help="a few minutes: fewer seeds, smaller search budgets (CI smoke test)")
    parser.add_argument(
        "--out",
        help="markdown file whose '## Paper comparison' section is (re)written, raw results and figure in results/ beside it"
        " (default runs/reproduce/results.md; --out docs/results.md updates the repository's report)",
    )
    parser.add_argument("--seeds", type=positive_int, help="seeds per cell (default 5, quick 2)")
    parser.add_argument("--engine", choices=ENGINES, default="serial")
    parser.add_argument("--workers", type=positive_int)
    parser.add_argument("--graphs", nargs="+", metavar="GRAPH", help="only these paper graphs (names or prefixes)")
    parser.add_argument("--runs", default="runs", help="training run directories to take learned checkpoints from")
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(func=run)


def run(args) -> int:
    from ..extras import require_modules
    from ..sweeps.reproduce import DEFAULT_OUT, reproduce

    require_modules("workbench reproduce (its report's figure)", "plotly")

    report = reproduce(
        quick=args.quick,
        out=args.out or DEFAULT_OUT,
        seeds=args.seeds,
        engine=args.engine,
        workers=args.workers,
        graphs=args.graphs,
        runs=args.runs,
        progress=not args.no_progress,
    )
    for path in report["files"]:
        print(f"wrote {path}")
    return 0
