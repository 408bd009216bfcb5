"""Checked JSON fields: each config or header field's type and range (torch-free), so that a model's size follows from
a checkpoint's header before any tensor is built, and every training config can say what it accepts."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Field", "check_config", "check_value", "check_keys", "shown"]


@dataclass(frozen=True)
class Field:
    """What one header or config field may hold: a JSON value of ``kind`` (a float field also takes an integer), in
    ``low .. high`` (numbers: NaN and infinities are outside every range) or one of ``choices`` (strings); with
    ``items`` > 0, a list of at most that many such values."""

    kind: type[Any]
    low: float = -math.inf
    high: float = math.inf
    choices: tuple[str, ...] = ()
    items: int = 0


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_keys(data: Any, keys: tuple[str, ...], where: str) -> None:
    if not isinstance(data, dict):
        raise ValueError(f"{where} must be a JSON object, got {shown(data)}")
    if set(data) != set(keys):
        odd = sorted(set(data) ^ set(keys))[0]
        raise ValueError(f"{where} {'lacks' if odd in keys else 'has the unknown field'} {odd!r}; it holds {', '.join(keys)}")


def check_value(value: Any, field: Field, what: str) -> Any:
    number = field.kind in (int, float)
    if not (type(value) is field.kind or (field.kind is float and type(value) is int)):
        kind = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}[field.kind]
        raise ValueError(f"{what} must be {kind}, got {shown(value)}")
    if number and not field.low <= value <= field.high:
        raise ValueError(f"{what} is {shown(value)}, outside {field.low:g} .. {field.high:g}")
    if field.choices and value not in field.choices:
        raise ValueError(f"{what} is {shown(value)}; it is one of {', '.join(field.choices)}")
    return float(value) if field.kind is float else value


def check_config(data: Any, fields: Mapping[str, Field], what: str = "config") -> dict[str, Any]:
    """``data`` checked against ``fields`` (no unknown field; each present one of its type and in its range), lists as
    tuples; ``ValueError`` names the first field that is wrong. Absent fields keep their defaults."""
    if not isinstance(data, dict):
        raise ValueError(f"{what} must be a JSON object, got {shown(data)}")
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ValueError(f"unknown {what} field {unknown[0]!r}; known: {', '.join(fields)}")
    checked: dict[str, Any] = {}
    for name, value in data.items():
        field, where = fields[name], f"{what} field {name!r}"
        if not field.items:
            checked[name] = check_value(value, field, where)
        elif not isinstance(value, (list, tuple)) or len(value) > field.items:
            raise ValueError(f"{where} must be a list of at most {field.items} values, got {shown(value)}")
        else:
            checked[name] = tuple(check_value(item, field, f"{where} item {i}") for i, item in enumerate(value))
    return checked
