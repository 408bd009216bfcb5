"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Every writer goes through :func:`atomic_path`: the content is written to a
temporary file beside the target (same directory, so the rename never crosses
file systems) and renamed over it; on any error the temporary file is removed
and the target is left as it was.
"""

from __future__ import annotations

import json
import os
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
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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
