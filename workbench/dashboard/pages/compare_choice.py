"""Which methods Compare offers for a graph and device count, and how a selection carries over when they change."""

from __future__ import annotations

from typing import Any

from ...placers import methods as registered_methods
from ..choice import MethodChoice
from ..context import PathError
from ..learned import checkpoint_origin, selection_key, usable
from ..sources import method_choices, method_label

__all__ = [
    "MAX_DEVICES",
    "MAX_SELECTED",
    "carry_selection",
    "default_methods",
    "method_options",
    "names",
    "parse_devices",
    "restore_selection",
]

MAX_DEVICES = 64
"""The most devices Compare places on."""


def default_methods(options: list[dict[str, str]]) -> list[str]:
    """On first load: the first registered heuristic (the paper's teacher) and the fair baseline, the best of every one-pass
    method (plus a pretrained policy when there is one)."""
    values = [o["value"] for o in options]
    chosen = [m for m in [*registered_methods("heuristic")[:1], "best_constructive"] if m in values]
    choices = [MethodChoice.from_value(v) for v in values]
    chosen += [c.to_value() for c in choices if (c.method, c.root, c.mode) == ("doppler", "datasets", "")][:1]
    return chosen


def method_options(context, graph, devices: int) -> list[dict[str, str]]:
    """The methods that may place ``graph`` on ``devices``: every non-learned method, and checkpoints trained for it."""
    out = []
    for option in method_choices(context, graph.name):
        origin = checkpoint_origin(context, option["value"])
        if usable(origin, graph.name, devices):
            out.append({"label": origin.label(graph.name) if origin else option["label"], "value": option["value"]})
    return out


def carry_selection(context, selected: list[str] | None, options: list[dict[str, str]]) -> tuple[list[str], list[str]]:
    """``(kept, dropped)``: the selection mapped onto new options (a pretrained policy → this graph's pretrained policy);
    ``dropped`` names what has no counterpart."""
    kept, dropped = restore_selection(context, selected, None, options)
    return kept, [method_label(value) for value in dropped]


MAX_SELECTED = 200
"""Method values a request may carry as the selection or the pending list (more than any page offers)."""


def names(values: Any) -> list[str]:
    """The method values the browser sent: a list of at most :data:`MAX_SELECTED` strings (anything else is nothing)."""
    if not isinstance(values, list) or len(values) > MAX_SELECTED:
        return []
    return [value for value in values if isinstance(value, str)]


def restore_selection(
    context, selected: list[str] | None, pending: list[str] | None, options: list[dict[str, str]]
) -> tuple[list[str], list[str]]:
    """``(kept, dropped values)``: the selection, and what an earlier graph or device count could not offer
    (``pending``), mapped onto new options. The dropped values are kept pending by the page, so going 4 → 8 → 4
    devices brings the graph's own pretrained policy back."""
    by_key: dict[tuple[str, str], str] = {}
    for option in options:
        by_key.setdefault(selection_key(context, option["value"]), option["value"])
    kept, dropped = [], []
    for value in [*(selected or []), *(pending or [])]:
        try:
            key = selection_key(context, value)
        except (PathError, ValueError):
            key = None
        if key in by_key:
            if by_key[key] not in kept:
                kept.append(by_key[key])
        elif value not in dropped:
            dropped.append(value)
    return kept, dropped


def parse_devices(value: Any) -> int:
    """The device count the browser sent, from 1 to :data:`MAX_DEVICES` (TypeError or ValueError otherwise)."""
    try:
        devices = int(value)
    except OverflowError:  # infinity
        raise ValueError from None
    if not 1 <= devices <= MAX_DEVICES:
        raise ValueError
    return devices
