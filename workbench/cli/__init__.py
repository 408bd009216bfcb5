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
from collections.abc import Sequence
from pathlib import Path

from ..commandline import OneLineParser
from ..extras import MissingExtra, extra_of, needs_extra

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
    """A usage error (bad arguments): printed as one line on stderr, exit status 2."""


DEBUG_HELP = "show the traceback of every error, user errors included"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="workbench", description="Place the ops of a dataflow graph on devices.")
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name.replace('-', '_')}").register(sub)
    for command in sub.choices.values():  # `workbench COMMAND ... --debug` works too
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    return parser


def _version() -> str:
    from .. import __version__

    return __version__


# A file the user named that cannot be read: a user error like a malformed one.
FILE_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


def is_user_error(exc: BaseException) -> bool:
    """Bad input rather than a bug: a usage error, an unreadable file, one of the workbench's own error
    types for bad input (the ``ValueError`` subclasses it defines: ``GraphFormatError``,
    ``AssignmentError``, ``PlacerError``, ``ConfigError``, ``CheckpointError``, ...), or a plain
    ``ValueError`` that workbench code raised itself with a message for the user. A ``ValueError``
    raised inside a library (numpy, torch, ...) and every other exception type is a bug and keeps its
    traceback."""
    if isinstance(exc, (CliError, *FILE_ERRORS)):
        return True
    if not isinstance(exc, ValueError):
        return False
    return type(exc).__module__.partition(".")[0] == _PACKAGE or _raised_in_workbench(exc)


_PACKAGE = __name__.partition(".")[0]
_PACKAGE_DIR = str(Path(__file__).resolve().parents[1])


def _raised_in_workbench(exc: BaseException) -> bool:
    """Whether the innermost frame of ``exc``'s traceback is workbench code (a deliberate ``raise``)."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return str(Path(tb.tb_frame.f_code.co_filename).resolve()).startswith(_PACKAGE_DIR)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command: exit status 0, 2 for a user error or a missing optional extra (one line on stderr, naming
    the extra to install) or 130 when interrupted.

    Any other exception (a bug) propagates with its traceback; ``--debug`` shows
    the traceback of user errors too.
    """
    from .train import trainer_arguments

    args = trainer_arguments(sys.argv[1:] if argv is None else argv) or build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # `workbench ... | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("workbench: interrupted", file=sys.stderr)
        return 130
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]  # a package of an extra, or a part of one
        if args.debug or extra_of(missing) is None:
            raise
        message = str(exc) if isinstance(exc, MissingExtra) else needs_extra("this command", missing)
        print(f"workbench {args.command}: error: {message}", file=sys.stderr)
        return 2
    except Exception as exc:
        if args.debug or not is_user_error(exc):
            raise
        print(f"workbench {args.command}: error: {exc}", file=sys.stderr)
        return 2
