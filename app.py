"""Start the Doppler workbench dashboard: ``python app.py [--host 127.0.0.1] [--port 8050] [--debug] [--max-budget N ...]``.

The caps on what a request may start (``--max-*``, ``--allow-*``, or the
``WORKBENCH_*`` variables) are listed by ``python app.py --help`` and in
docs/dashboard.md (Limits). Stopping the server (Ctrl-C, SIGTERM, SIGHUP)
ends the jobs it launched and removes its temporary folders.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

os.environ.setdefault("DGLBACKEND", "pytorch")


def _exit_on(signum: int, _frame) -> None:
    raise SystemExit(128 + signum)


def main() -> None:
    from workbench.dashboard.limits import LimitError, Limits

    parser = argparse.ArgumentParser(description="Serve the Doppler workbench dashboard.")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=8050)
    parser.add_argument("--debug", action="store_true", help="Dash debug mode (reloader, error overlay)")
    parser.add_argument(
        "--runs",
        metavar="DIR",
        help="the training runs folder (default $WORKBENCH_RUNS, else runs/ in the checkout, or in the current folder when installed)",
    )
    Limits.add_arguments(parser)
    args = parser.parse_args()
    try:
        limits = Limits.from_arguments(args)
    except LimitError as exc:
        parser.error(str(exc))

    from workbench.dashboard import create_app

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _exit_on)  # so the jobs and folders are cleaned up as on Ctrl-C
    app = create_app(runs_dir=args.runs, limits=limits, bound_host=args.host)
    print(f"Doppler workbench dashboard on http://{args.host}:{args.port}  (runs: {app.workbench_context.runs_dir})")
    if args.host in ("0.0.0.0", "::") and not limits.allow_hosts:
        print(
            "warning: bound to every interface, but only localhost names are accepted in the Host header; add --allow-hosts NAME",
            file=sys.stderr,
        )
    try:
        app.run(host=args.host, port=args.port, debug=args.debug)
    finally:
        app.workbench_jobs.shutdown()


if __name__ == "__main__":
    main()
