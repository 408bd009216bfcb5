"""Reading graph files within bounds: regular files only, size-capped, UTF-8 with at most one BOM, read a line at a time."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from ..graph import MAX_GRAPH_FILE_BYTES, DataflowGraph, GraphError, check_graph_size


class GraphFormatError(ValueError):
    """A graph file that cannot be read; names the file, the line and the problem."""

    def __init__(self, path: str | os.PathLike, message: str, line: int | None = None) -> None:
        self.path = os.fspath(path)
        self.line = line
        self.reason = message
        shown = self.path if self.path.isprintable() else ascii(self.path)
        where = f"{shown}:{line}" if line is not None else shown
        super().__init__(f"{where}: {message}")


_FILE_KINDS = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}
_BOM = b"\xef\xbb\xbf"
_CHUNK = 1 << 18


@contextmanager
def _open_graph_file(path: Path, limit: int) -> Iterator[BinaryIO]:
    """``path`` opened for reading when it is a regular file that reports at most ``limit`` bytes (never blocks on a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise GraphFormatError(path, "no such file") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise GraphFormatError(path, f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise GraphFormatError(path, "is a directory, not a graph file")
        if not stat.S_ISREG(info.st_mode):
            kind = _FILE_KINDS.get(stat.S_IFMT(info.st_mode), "a special file")
            raise GraphFormatError(path, f"is {kind}, not a regular file")
        if info.st_size > limit:
            raise GraphFormatError(path, f"file is {info.st_size:,} bytes, more than the {limit:,} allowed")
        with open(fd, "rb", closefd=False) as handle:
            yield handle
    except OSError as exc:
        raise GraphFormatError(path, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _without_bom(path: Path, data: bytes) -> bytes:
    """``data`` without its byte-order mark; a second one is refused (it is no part of any format)."""
    data = data.removeprefix(_BOM)
    if data.startswith(_BOM):
        raise GraphFormatError(path, "more than one byte-order mark at the start of the file", 1)
    return data


def read_text_file(path: str | os.PathLike, limit: int = MAX_GRAPH_FILE_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes, without its byte-order mark.

    Never blocks on a FIFO and never reads more than ``limit + 1`` bytes, even
    from a file whose reported size is wrong; raises :class:`GraphFormatError`.
    """
    path = Path(path)
    with _open_graph_file(path, limit) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise GraphFormatError(path, f"file is more than the {limit:,} bytes allowed")
    if b"\x00" in data:
        raise GraphFormatError(path, "binary data (NUL byte), not a text file", _line_of(data, data.index(b"\x00")))
    try:
        text = _without_bom(path, data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GraphFormatError(path, f"not UTF-8 text (bad byte at offset {exc.start})", _line_of(data, exc.start)) from None
    del data
    if not text.strip():
        raise GraphFormatError(path, "file is empty")
    return text


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def read_lines(path: str | os.PathLike, limit: int = MAX_GRAPH_FILE_BYTES) -> Generator[tuple[int, str], None, None]:
    """``(line number, text)`` for each line of a UTF-8 text file, read a chunk at a time.

    The same checks as :func:`read_text_file` (a regular file of at most ``limit``
    bytes, one optional byte-order mark, no NUL byte, UTF-8), made as the lines
    are read, so memory holds one line, never the file. Lines end at ``\\n``,
    ``\\r\\n`` or ``\\r`` (numbers match an editor's); the text excludes the
    line end. Once the last line is read, a file without any non-blank text is
    refused as empty.
    """
    path = Path(path)
    with _open_graph_file(path, limit) as handle:
        lineno, total, blank = 0, 0, True
        partial: list[bytes] = []  # the pieces of a line that spans chunks
        carry = b""  # a trailing \r, which may start a \r\n
        while True:
            first = total == 0
            chunk = handle.read(max(_CHUNK, 2 * len(_BOM)) if first else _CHUNK)  # the first holds any byte-order marks whole
            total += len(chunk)
            if total > limit:
                raise GraphFormatError(path, f"file is more than the {limit:,} bytes allowed")
            if first:
                chunk = _without_bom(path, chunk)
            if not chunk:
                break
            chunk = (carry + chunk).replace(b"\r\n", b"\n")
            carry = b"\r" if chunk.endswith(b"\r") else b""
            chunk = chunk[: len(chunk) - len(carry)].replace(b"\r", b"\n")
            if b"\x00" in chunk:
                raise GraphFormatError(path, "binary data (NUL byte), not a text file", lineno + _line_of(chunk, chunk.index(b"\x00")))
            *complete, rest = chunk.split(b"\n")
            for piece in complete:
                if partial:
                    partial.append(piece)
                    piece = b"".join(partial)
                    partial.clear()
                lineno += 1
                text = _decoded(path, piece, lineno)
                blank = blank and not text.strip()
                yield lineno, text
            if rest:
                partial.append(rest)
        if partial or carry:
            lineno += 1
            text = _decoded(path, b"".join(partial), lineno)
            blank = blank and not text.strip()
            yield lineno, text
    if blank:
        raise GraphFormatError(path, "file is empty")


def _decoded(path: Path, line: bytes, lineno: int) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GraphFormatError(path, f"not UTF-8 text (bad byte at offset {exc.start} of the line)", lineno) from None


def build_graph(path: Path, line_of: Callable[[GraphError], int | None], **kwargs: Any) -> DataflowGraph:
    try:
        return DataflowGraph(**kwargs)
    except GraphError as exc:
        raise GraphFormatError(path, str(exc), line_of(exc)) from None


def check_size(path: Path, line: int | None, nodes: int, edges: int = 0) -> None:
    try:
        check_graph_size(nodes, edges)
    except GraphError as exc:
        raise GraphFormatError(path, str(exc), line) from None


COUNT = re.compile(r"[0-9]{1,18}")
"""A count line: 1-18 decimal digits (no sign, no separators)."""
