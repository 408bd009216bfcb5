"""Argument helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from . import CliError


def add_graph_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph", metavar="GRAPH", help="a graph file (.txt, .stg, .json) or a bundled graph name such as ffnn")


def add_executor_arguments(parser: argparse.ArgumentParser, workers: str, target_seconds: float, scaled: str) -> None:
    """The local executor's options, shared by ``calibrate`` and ``serve-engine``: devices, emulation, time scale."""
    parser.add_argument(
        "--device", choices=("auto", "cpu", "cuda"), default="auto", help=f"{workers} devices (default auto: CUDA when present)"
    )
    parser.add_argument(
        "--emulate",
        action="store_true",
        help="emulated devices: each op and copy waits its modeled time (no CPU work; isolates the runtime)",
    )
    parser.add_argument(
        "--target-seconds",
        type=float,
        default=target_seconds,
        help=f"scale {scaled} so its lower bound lasts this long (default {target_seconds:g})",
    )
    parser.add_argument("--time-scale", type=float, help="seconds per graph unit (overrides --target-seconds)")


def load_graph_argument(value: str):
    """A graph from a file path, or from a bundled graph's name or prefix."""
    from ..datasets import PAPER_GRAPHS, bundled_graph
    from ..formats import load_graph

    if Path(value).exists():
        return load_graph(value)
    try:
        return bundled_graph(value)
    except KeyError:
        raise CliError(f"{value}: no such file, and no bundled graph of that name ({', '.join(PAPER_GRAPHS)})") from None


ENGINES = ("serial", "local", "ray")
"""The engines of ``sweep``, ``reproduce`` and ``bench learned`` (:data:`workbench.sweeps.runners.ENGINES`)."""


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def json_argument(text: str, what: str) -> Any:
    """Parse ``text`` as inline JSON, or read it from the file it names (strict, bounded: ``formats.parse_json``)."""
    return _json_source(text, what)[1]


def _json_source(text: str, what: str) -> tuple[str, Any]:
    """``(where it came from, value)`` of :func:`json_argument`: ``"the command line"`` or the file's path."""
    from ..formats import JSONInputError, parse_json, read_text_file

    stripped = text.strip()
    if stripped[:1] in "[{" or stripped.lstrip("-")[:1].isdigit():
        source, raw = "the command line", stripped
    else:
        path = Path(text)
        if not path.is_file():
            raise CliError(f"{what}: {text!r} is neither JSON nor a readable file")
        source, raw = str(path), read_text_file(path)
    try:
        return source, parse_json(raw)
    except JSONInputError as exc:
        where = f" (line {exc.line})" if exc.line is not None else ""
        raise CliError(f"{what} in {source} is not valid JSON: {exc}{where}") from None


DEFAULT_DEVICES = 4
# `place` and `compare` stop a search (a method with an evaluation budget) after this many seconds unless --time-limit
# says otherwise: a budget sized for a small graph can take hours on a large one; `place` says when the clock cut it.
SEARCH_TIME_LIMIT = 600.0
"""The device count of a command given neither ``--devices`` nor a placement file that names one."""


def placement_argument(text: str, what: str, graph, devices: int | None):
    """A placement given as inline JSON or a file: the placement file's form (docs/contracts.md) or a plain list of
    device ids, checked against ``graph`` and ``devices`` (``None``: the file's own, else :data:`DEFAULT_DEVICES`)."""
    from ..placers.placement_file import check_placement

    source, data = _json_source(text, what)
    if isinstance(data, list) and devices is None:
        devices = DEFAULT_DEVICES
    return check_placement(data, graph, devices, what if source == "the command line" else f"{what} {source}")


TRACE_FORMATS = ("trace-event", "workbench")


def add_trace_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trace",
        metavar="OUT.json",
        help="write the simulated trace: Chrome trace-event JSON (opens in ui.perfetto.dev), times in µs from the graph's unit",
    )
    parser.add_argument(
        "--trace-format", choices=TRACE_FORMATS, default="trace-event", help="trace-event (default) or the workbench's own Trace JSON"
    )


def write_trace(args: argparse.Namespace, graph, trace, title: str) -> None:
    """Write ``trace`` to ``args.trace`` (when given) in ``args.trace_format``."""
    from ..fileio import atomic_write_text
    from ..sim.trace_events import trace_events_json, trace_time_scale

    if not args.trace:
        return
    if args.trace_format == "workbench":
        trace.to_json(args.trace)
    else:
        atomic_write_text(args.trace, trace_events_json(trace, title=title, microseconds_per_unit=trace_time_scale(graph)))


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")
