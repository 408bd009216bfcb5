"""What every run-directory check shares: the refusal, the CSV line reader and the field parsers."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    pass


STATUSES = ("running", "interrupted", "failed", "finished", "diverged")
"""The values of ``meta.json``'s ``status``."""
LOSS_COLUMNS = ("loss", "loss_policy", "loss_entropy", "loss_imitation")
RATIO_LIMIT = 1e9
"""Rewards and baselines are minus a makespan over the teacher's (times a wait penalty): never beyond this."""
TOLERANCE = 1e-9
"""Relative slack of a float compared with a bound or with its re-simulated value."""


class RunDamaged(ValueError):
    """A run directory that cannot be resumed as it is: the message names the file, the line and the field."""


def damaged(path: Path, fault: str, line: int | None = None, field: str | None = None) -> RunDamaged:
    """The refusal of a damaged run: ``path``, the line (CSV) and field when known, what is wrong."""
    where = "".join([f" line {line}" if line is not None else "", f" field {field!r}" if field is not None else ""])
    return RunDamaged(f"{path}{where}: {fault}; refusing to resume (nothing was changed)")


# --- the CSV tables ------------------------------------------------------------------------------------------------
def table_lines(path: Path, columns: tuple[str, ...]) -> tuple[int, list[tuple[int, int, list[str]]]]:
    """The byte offset where the header ends, and ``(line number, byte offset of the line's end, fields)`` of every whole
    row after it; the header must equal ``columns``.

    A half-written last line (no newline) is left out: it is no damage.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise damaged(path, f"unreadable ({exc})") from None
    lines = data.split(b"\n")[:-1]
    if not lines:
        raise damaged(path, f"no header line; expected {','.join(columns)}", 1)
    header = line_fields(path, 1, lines[0])
    if tuple(header) != columns:
        at = next((i for i, (a, b) in enumerate(zip(header, columns, strict=False)) if a != b), min(len(header), len(columns)))
        found, wanted = (header[at] if at < len(header) else "(nothing)"), (columns[at] if at < len(columns) else "(nothing)")
        raise damaged(path, f"the header differs from the expected one at column {at + 1} ({found!r} instead of {wanted!r})", 1)
    rows, offset = [], len(lines[0]) + 1
    for number, line in enumerate(lines[1:], start=2):
        offset += len(line) + 1
        fields = line_fields(path, number, line)
        if len(fields) != len(columns):
            raise damaged(path, f"{len(fields)} fields where the header has {len(columns)}", number)
        rows.append((number, offset, fields))
    return len(lines[0]) + 1, rows


def line_fields(path: Path, number: int, line: bytes) -> list[str]:
    try:
        rows = list(csv.reader([line.decode("utf-8")], strict=True))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise damaged(path, f"not a CSV row ({exc})", number) from None
    return rows[0] if rows else []


def whole_number(path: Path, number: int, column: str, text: str) -> int:
    if not text.isdigit():
        raise damaged(path, f"{text!r} is not a whole number", number, column)
    return int(text)


def number_field(path: Path, number: int, column: str, text: str, required: bool) -> float | None:
    """The field as a float (``None`` when empty and not ``required``); a word, an empty required field or a non-finite
    value is refused."""
    if text == "":
        if required:
            raise damaged(path, "empty, but this stage logs it", number, column)
        return None
    try:
        value = float(text)
    except ValueError:
        raise damaged(path, f"{text!r} is not a number", number, column) from None
    if not math.isfinite(value):
        raise damaged(path, f"{text!r} is not finite", number, column)
    return value


def at_least(path: Path, number: int, column: str, value: float, low: float, what: str) -> None:
    if value < low - TOLERANCE * abs(low):
        raise damaged(path, f"{value!r} is below {what} ({low!r})", number, column)


def within(path: Path, number: int, column: str, value: float, low: float, high: float) -> None:
    if not low - TOLERANCE * abs(low) <= value <= high + TOLERANCE * abs(high):
        raise damaged(path, f"{value!r} is outside [{low!r}, {high!r}]", number, column)


def is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def close_to(a: float, b: float) -> bool:
    return abs(a - b) <= TOLERANCE * max(abs(a), abs(b))


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON object file of the run; one that is unreadable, not JSON or not an object is a :class:`RunDamaged` naming it."""
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise damaged(path, f"unreadable or not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise damaged(path, f"holds a JSON {type(data).__name__}, not an object")
    return data
