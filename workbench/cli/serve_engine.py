"""``workbench serve-engine GRAPH ... --devices N``: the reference remote engine (see ``workbench/systems/remote/``)."""

from __future__ import annotations

import os
import sys

from ..extras import require_modules
from .common import add_executor_arguments, add_graph_argument, load_graph_argument, positive_int


def register(sub) -> None:
    parser = sub.add_parser("serve-engine", help="serve real measurements of placements over TCP (JSON lines)")
    add_graph_argument(parser)
    parser.add_argument("more_graphs", nargs="*", metavar="GRAPH", help="more graphs to serve")
    parser.add_argument("--devices", type=positive_int, default=4, help="workers of the local executor (default 4)")
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; anything else exposes the engine and needs --token)"
    )
    parser.add_argument("--port", type=int, default=7070, help="TCP port (default 7070; 0 picks a free one)")
    add_executor_arguments(parser, "worker", 0.2, "each graph")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs before each measurement (default 1)")
    parser.add_argument("--max-timeout", type=float, default=600.0, help="the longest timeout a request may ask for (default 600 s)")
    parser.add_argument(
        "--token", help="shared token every request must carry (default $WORKBENCH_ENGINE_TOKEN; required off loopback; not encryption)"
    )
    parser.add_argument(
        "--max-connections", type=positive_int, default=16, help="connections served at once; more get a busy reply (default 16)"
    )
    parser.add_argument(
        "--max-waiting", type=positive_int, default=64, help="requests waiting for the oracle; more get a busy reply (default 64)"
    )
    parser.add_argument("--simulate", action="store_true", help="answer with the simulator instead of running (for testing clients)")
    parser.set_defaults(func=run)


def run(args) -> int:
    from ..systems import LocalExecutor, SimulatorOracle, serve_engine
    from ..systems.executor import WaitKernels
    from ..systems.remote import TOKEN_VARIABLE, is_loopback
    from . import CliError

    if not 0 <= args.port < 65536:
        raise CliError(f"--port must be in 0..65535, got {args.port}")
    graphs = [load_graph_argument(g) for g in [args.graph, *args.more_graphs]]
    if args.simulate:
        oracle = SimulatorOracle(args.devices, args.time_scale or 1.0)
    else:
        require_modules("the local executor (serve-engine without --simulate)", "torch")
        kernels = WaitKernels() if args.emulate else None
        oracle = LocalExecutor(args.devices, args.device, args.time_scale, args.target_seconds, warmup=args.warmup, kernels=kernels)
    token = args.token or os.environ.get(TOKEN_VARIABLE) or None
    options = dict(token=token, max_connections=args.max_connections, max_waiting=args.max_waiting)
    try:
        server = serve_engine(graphs, oracle, args.host, args.port, args.max_timeout, **options)
    except OSError as exc:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if not is_loopback(args.host):
        print(
            f"warning: listening on {args.host}; anyone who can reach it and knows the token can run work on this machine, "
            "and the token travels unencrypted",
            file=sys.stderr,
        )
    names = ", ".join(server.graphs)
    print(f"serving {names} on {server.address} with {type(oracle).__name__} ({args.devices} devices); Ctrl-C stops", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        server.server_close()
    return 0
