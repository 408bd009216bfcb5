"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Every writer goes through :func:`atomic_path`: the content is written to a
temporary file beside the target (same directory, so the rename never crosses
file systems) and renamed over it; on any error the temporary file is removed
and the target is left as it was. The file gets the mode a plain ``open`` would
give it (``0o666`` less the umask: readable by the group and others under the
usual umask 022, so a shared run folder stays shared), or keeps the mode of the
file it replaces; ``mkstemp``'s own ``0o600`` never survives.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["atomic_path", "atomic_write_text", "atomic_write_bytes", "atomic_write_json"]


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; renamed over ``path`` when the block ends without error.

    For writers that want a file name (``DataFrame.to_parquet``,
    ``figure.write_image``, ``torch.save``). Missing parent directories are made.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=target.name)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, _mode_for(target))
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _mode_for(target: Path) -> int:
    """The permission bits of an existing ``target``, else ``0o666`` less the process's umask."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask, read without changing it where Linux shows it (``/proc/self/status``), else set and restored."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, data: Any, indent: int | None = 2) -> None:
    """Write ``data`` as JSON (plus a final newline when indented) to ``path`` atomically."""
    atomic_write_text(path, json.dumps(data, indent=indent) + ("\n" if indent is not None else ""))
