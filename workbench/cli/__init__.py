"""The ``workbench`` command line: one module per subcommand, each a thin layer over the API.

To add a subcommand, write ``workbench/cli/NAME.py`` with a
``register(subparsers)`` function that adds its parser and sets
``func=run`` (``run(args) -> int``), then list the module in ``COMMANDS``.
Heavy imports (torch, dash, ...) belong inside ``run``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

COMMANDS = (
    "info",
    "simulate",
    "place",
    "compare",
    "bench",
    "generate",
    "import-model",
    "serve-engine",
    "calibrate",
    "sweep",
    "reproduce",
    "train",
)


class CliError(Exception):
    """A user error: printed as one line on stderr, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="workbench", description="Place the ops of a dataflow graph on devices.")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name.replace('-', '_')}").register(sub)
    return parser


def _version() -> str:
    from .. import __version__

    return __version__


def user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean bad input rather than a bug."""
    from ..formats import GraphFormatError
    from ..graph import GraphError
    from ..sim import AssignmentError

    return (CliError, GraphFormatError, GraphError, AssignmentError, FileNotFoundError, KeyError, ValueError)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # `workbench ... | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("workbench: interrupted", file=sys.stderr)
        return 130
    except user_errors() as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"workbench {args.command}: error: {message}", file=sys.stderr)
        return 2
