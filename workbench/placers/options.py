"""Placer options given as text: ``--option [METHOD:]KEY=VALUE`` on the command line and Compare's options form.

A method's options are its placer's constructor parameters
(:func:`~workbench.placers.registry.placer_parameters`); each one's type comes
from its annotation, or from its default where it has none: ``int``,
``float``, ``bool`` (``true``, ``false``, ``1`` or ``0``), ``str`` or
``path`` (a file, kept as given), or ``int|str`` (a whole number where the
text reads as one, else the text: a heuristic's ``ties``). An option annotated ``... | None`` also
takes ``none``. An option of any other type (a starting assignment, a scorer
object) cannot be given as text. Every refusal is one line, an
:class:`OptionError` naming the method, the key and what it takes. Plain
Python, no torch: reading a learned method's options imports its placer,
which needs the ``learn`` extra (:func:`~workbench.placers.registry.require`
says so).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .registry import PlacerError, placer_parameters

__all__ = ["OptionError", "OptionSpec", "declared_options", "parse_value", "parse_options", "split_option", "resolve_options"]

TYPES = ("int", "float", "bool", "str", "path", "int|str")
"""The types an option given as text may have."""
_EXPECTED = {
    "int": "a whole number (int)",
    "float": "a finite number (float)",
    "bool": "true, false, 1 or 0 (bool)",
    "str": "text (str)",
    "path": "a file path (path)",
    "int|str": "a whole number or text (int | str)",
}
_TRUE, _FALSE = ("true", "1"), ("false", "0")


class OptionError(PlacerError):
    """An option a method does not take, or a value that is not of the option's type."""


@dataclass(frozen=True)
class OptionSpec:
    """One declared option of a method.

    Attributes:
        name: the constructor parameter's name.
        type: one of :data:`TYPES`, or ``None`` for an option that cannot be given as text.
        default: the constructor's default (``None`` where it has none).
        optional: the option also takes ``None`` (written ``none``).
        annotation: the parameter's annotation as written (``"float | None"``), for messages.
    """

    name: str
    type: str | None
    default: Any
    optional: bool
    annotation: str

    def describe(self) -> str:
        """``budget (int, default 20000)``: the option, its type and default, as listings and the form show it."""
        kind = self.type or f"{self.annotation or 'an object'}, not as text"
        return f"{self.name} ({kind}{' or none' if self.optional else ''}, default {self.default})"


def _type_of(annotation: str, default: Any) -> tuple[str | None, bool]:
    """``(type, optional)`` read from an annotation's text (``"str | os.PathLike | None"``), else from the default."""
    if not annotation:
        for name, cls in (("bool", bool), ("int", int), ("float", float), ("str", str)):
            if type(default) is cls:
                return name, False
        return None, default is None
    parts = {part.strip() for part in annotation.split("|")}
    optional = "None" in parts
    parts.discard("None")
    if any("PathLike" in part or part in ("Path", "pathlib.Path") for part in parts):
        return "path", optional
    for name, allowed in (("bool", {"bool"}), ("int", {"int"}), ("float", {"int", "float"}), ("str", {"str"}), ("int|str", {"int", "str"})):
        if parts and parts <= allowed:
            return name, optional
    return None, optional


def declared_options(method: str) -> dict[str, OptionSpec]:
    """Every option of registered ``method``, in constructor order, with the type it is parsed as."""
    specs = {}
    for parameter in placer_parameters(method):
        annotation = parameter.annotation
        text = "" if annotation is parameter.empty else annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
        default = None if parameter.default is parameter.empty else parameter.default
        kind, optional = _type_of(text, default)
        specs[parameter.name] = OptionSpec(parameter.name, kind, default, optional, text)
    return specs


def _settable(method: str) -> str:
    """The keys of ``method`` that text may set, for messages."""
    return ", ".join(name for name, spec in declared_options(method).items() if spec.type) or "none"


def _spec(method: str, key: str) -> OptionSpec:
    spec = declared_options(method).get(key)
    if spec is None:
        raise OptionError(f"method {method!r} takes no option {key!r}; it takes: {_settable(method)}")
    if spec.type is None:
        raise OptionError(f"option {key!r} of method {method!r} ({spec.annotation or 'an object'}) cannot be given as text")
    return spec


def parse_value(method: str, key: str, value: object) -> Any:
    """Option ``key`` of ``method`` from text (``"20000"``, ``"true"``, ``"none"``) or from a value already of its type
    (as JSON gives it back); :class:`OptionError` names the method, key, value and the type expected."""
    spec = _spec(method, key)
    text = value.strip() if isinstance(value, str) else None
    if spec.optional and (value is None or (text is not None and text.lower() == "none")):
        return None
    parsed = _from_text(spec.type, text) if text is not None else _checked(spec.type, value)
    if parsed is None:
        expected = _EXPECTED[str(spec.type)] + (", or none" if spec.optional else "")
        raise OptionError(f"option {key}={value!r} of method {method!r}: expected {expected}")
    return parsed


def _from_text(kind: str | None, text: str) -> Any:
    """``text`` read as ``kind``, or ``None`` where it is not one."""
    if kind == "bool":
        return True if text.lower() in _TRUE else False if text.lower() in _FALSE else None
    if kind in ("int", "float", "int|str"):
        try:
            number = float(text) if kind == "float" else int(text)
        except ValueError:
            return (text or None) if kind == "int|str" else None
        return number if math.isfinite(number) else None
    return text or None  # str and path: non-empty text, kept as given


def _checked(kind: str | None, value: object) -> Any:
    """``value`` (not text: a number or a bool, as JSON gives it back) where it is of type ``kind``, else ``None``."""
    if kind == "bool" or isinstance(value, bool):
        return value if kind == "bool" and isinstance(value, bool) else None
    if kind in ("int", "int|str") and isinstance(value, int):
        return value
    if kind == "float" and isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def parse_options(method: str, given: Mapping[str, object]) -> dict[str, Any]:
    """``{key: value}`` of ``method`` with each value parsed (:func:`parse_value`); the first bad one is refused."""
    return {key: parse_value(method, key, value) for key, value in given.items()}


def split_option(text: str) -> tuple[str | None, str, str]:
    """``(method or None, key, value)`` of ``METHOD:KEY=VALUE`` or ``KEY=VALUE`` (a ``-`` in the key reads as ``_``)."""
    spec, sep, value = text.partition("=")
    method, colon, key = spec.rpartition(":")
    key = key.strip().replace("-", "_")
    if not sep or not key or (colon and not method.strip()):
        raise OptionError(f"option {text!r}: expected KEY=VALUE, or METHOD:KEY=VALUE for one method")
    return (method.strip() if colon else None), key, value


def resolve_options(methods: Sequence[str], texts: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{method: {key: value}}`` for the chosen ``methods`` from ``--option`` texts.

    ``METHOD:KEY=VALUE`` sets one method's option (the method must be chosen); ``KEY=VALUE`` sets it for every chosen
    method that declares ``KEY``, and is refused when none does. A method's own value wins over one for all; the
    same key twice at the same level is refused.
    """
    chosen = list(dict.fromkeys(methods))
    everyone: dict[str, str] = {}
    own: dict[tuple[str, str], str] = {}
    for text in texts:
        method, key, value = split_option(text)
        if method is not None and method not in chosen:
            raise OptionError(f"option {text!r}: method {method!r} is not among the methods chosen ({', '.join(chosen)})")
        if key in everyone if method is None else (method, key) in own:
            raise OptionError(f"option {key!r}{'' if method is None else f' of method {method!r}'} is given twice")
        if method is None:
            everyone[key] = value
        else:
            own[method, key] = value
    resolved: dict[str, dict[str, Any]] = {method: {} for method in chosen}
    for key, value in everyone.items():
        takers = [method for method in chosen if key in declared_options(method)]
        if not takers:
            if len(chosen) == 1:
                _spec(chosen[0], key)  # one method: its own message, listing its keys
            taken = "; ".join(f"{method} takes {_settable(method)}" for method in chosen)
            raise OptionError(f"no method chosen takes option {key!r} ({taken})")
        for method in takers:
            resolved[method][key] = parse_value(method, key, value)
    for (method, key), value in own.items():
        resolved[method][key] = parse_value(method, key, value)
    return resolved
