"""Where and with what a result was produced: the machine, package versions and the time.

Run directories, checkpoints, benchmarks and ``workbench reproduce`` record
these so every figure can be traced to its machine and software. Nothing here
imports torch: versions come from the installed packages' metadata, and the
GPU is named only when torch is already loaded.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import socket
import sys
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

__all__ = ["machine", "versions", "now", "host", "PACKAGES"]

PACKAGES = ("numpy", "pandas", "numba", "torch", "dgl", "ray", "plotly")
"""The packages whose versions decide the numbers (those installed are recorded)."""


def now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def host() -> str:
    """This machine's host name (a sweep's rows record it per cell)."""
    return socket.gethostname()


def versions(packages: Iterable[str] = PACKAGES) -> dict[str, str]:
    """``workbench``, ``python`` and each installed one of ``packages`` with its version."""
    from . import __version__

    found = {"workbench": __version__, "python": platform.python_version()}
    for package in packages:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            continue
    return found


def _cpu() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            cpu = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), cpu)
    except OSError:
        pass
    return cpu


def machine() -> dict[str, Any]:
    """What a result was measured on: CPU model, cores, Python, OS, host name and the GPU torch sees (when torch is loaded)."""
    torch = sys.modules.get("torch")
    cuda = torch.cuda.get_device_name(0) if torch is not None and torch.cuda.is_available() else None
    return {
        "cpu": _cpu(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "system": platform.platform(),
        "host": host(),
        "cuda": cuda,
    }
