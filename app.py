"""Start the Doppler workbench dashboard: ``python app.py [--host 127.0.0.1] [--port 8050] [--debug]``."""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("DGLBACKEND", "pytorch")


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve the Doppler workbench dashboard.")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=8050)
    parser.add_argument("--debug", action="store_true", help="Dash debug mode (reloader, error overlay)")
    args = parser.parse_args()

    from workbench.dashboard import create_app

    app = create_app()
    print(f"Doppler workbench dashboard on http://{args.host}:{args.port}  (runs: {app.workbench_context.runs_dir})")
    try:
        app.run(host=args.host, port=args.port, debug=args.debug)
    finally:
        app.workbench_jobs.stop_all()


if __name__ == "__main__":
    main()
