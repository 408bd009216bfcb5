"""The argument parser every command line uses (``workbench ...`` and the trainers): errors are one line, exit status 2."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

__all__ = ["OneLineParser"]


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors print ``PROG: error: MESSAGE`` on one line, without the usage dump."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)
