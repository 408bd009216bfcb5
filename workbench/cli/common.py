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
        return parse_json(raw)
    except JSONInputError as exc:
        where = f" (line {exc.line})" if exc.line is not None else ""
        raise CliError(f"{what} in {source} is not valid JSON: {exc}{where}") from None


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")
