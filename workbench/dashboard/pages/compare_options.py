"""Compare's options form: any declared option of a method, as ``--option`` gives it on the command line.

Choose a method and the form lists its options (name, type, default), read
from the placer's own declaration (:func:`workbench.placers.options.declared_options`):
a true/false choice for a ``bool``, a text box for the rest. What is typed is
kept per method in the ``compare-options`` store as ``{method: {key: text}}``
(an empty box: the default) and checked at once by the core parser and the
server's caps; a bad value is named in a message under the form. Compare
checks the store again (the browser is never trusted) and hands each method
its options: a ``budget`` or ``time_limit`` set here replaces the page's for
that method, the rest go to the placer. A learned method's checkpoint and
active search are chosen in Methods, so the form does not offer them; nor a
terminal progress bar.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from dash import ALL, Input, Output, State, dcc, html, no_update

from ...placers import methods as registered_methods
from ...placers.options import OptionSpec, declared_options, parse_value
from ..components import controls, field, message
from ..jobs import check_option
from ..limits import LimitError
from ..sources import parse_method

__all__ = [
    "PlacementArgs",
    "checked_options",
    "form_options",
    "option_fields",
    "options_section",
    "placement_arguments",
    "register_options_callbacks",
    "state_arguments",
]

CHOSEN_IN_METHODS = ("checkpoint", "search")
"""A learned method's options that its Methods entry sets (which checkpoint, and whether to run its active search)."""
NOT_IN_FORM = ("progress",)
"""Options with nothing to show in a browser (a terminal progress bar)."""
MAX_TEXT = 1000
"""The longest value the form accepts."""


def form_options(method: str) -> list[OptionSpec]:
    """The options of ``method`` the form offers: those text can set, less :data:`NOT_IN_FORM` and a learned method's
    :data:`CHOSEN_IN_METHODS`."""
    chosen = CHOSEN_IN_METHODS if method in registered_methods("learned") else ()
    return [spec for spec in declared_options(method).values() if spec.type and spec.name not in (*NOT_IN_FORM, *chosen)]


def options_section() -> html.Div:
    """The form: a method to set options for, its option fields, the message, and the store Compare reads."""
    choices = [{"label": name, "value": name} for name in registered_methods(available=True)]
    return html.Div(
        [
            controls(
                field(
                    "Options of",
                    dcc.Dropdown(id="compare-options-method", options=choices, placeholder="a method"),
                    note="any option a method declares, as workbench place --option KEY=VALUE; empty: its default",
                ),
                html.Div(id="compare-options-fields", className="wb-controls"),
            ),
            html.Div(id="compare-options-message"),
            dcc.Store(id="compare-options", data={}),
        ]
    )


def _option_field(spec: OptionSpec, value: Any) -> html.Div:
    ident = {"type": "compare-option", "key": spec.name}
    kind = f"{spec.type}{' or none' if spec.optional else ''}"
    if spec.type == "bool":
        control: Any = dcc.Dropdown(
            id=ident, options=["true", "false"], value=value, placeholder=f"default: {spec.default}", style={"minWidth": "9em"}
        )
    else:
        control = dcc.Input(id=ident, type="text", value=value, placeholder=f"default: {spec.default}", debounce=True)
    return field(f"{spec.name} ({kind})", control)


def option_fields(method: Any, stored: Any) -> list:
    """One field per option of ``method`` (an installed method's name, else no field), holding what the store has for it."""
    if not isinstance(method, str) or method not in registered_methods(available=True):
        return []
    own = stored.get(method) if isinstance(stored, dict) else None
    own = own if isinstance(own, dict) else {}
    return [_option_field(spec, own.get(spec.name) if isinstance(own.get(spec.name), str) else None) for spec in form_options(method)]


def checked_options(context, given: Any) -> dict[str, dict[str, Any]]:
    """``{method: {key: value}}`` from what the browser sent (text as typed, or values as JSON gives them back): each
    method installed, each key an option the form offers, each value parsed by the core parser
    (:func:`workbench.placers.options.parse_value`) and within the server's caps, a file under datasets/ or runs/
    (made absolute). Raises ``ValueError`` naming the method and option."""
    if given is None or given == {}:
        return {}
    if not isinstance(given, dict) or not all(isinstance(values, dict) for values in given.values()):
        raise LimitError("the method options must be {method: {option: value}}")
    installed = registered_methods(available=True)
    checked: dict[str, dict[str, Any]] = {}
    for method, values in given.items():
        if method not in installed:
            raise LimitError(f"method options: {method!r} is not an installed method")
        offered = {spec.name: spec for spec in form_options(method)}
        own = checked[method] = {}
        for key, value in values.items():
            if key not in offered:
                parse_value(method, key, value)  # an undeclared key: the parser's message, listing the method's options
                where = "is chosen in Methods" if key in CHOSEN_IN_METHODS else "is not offered here"
                raise LimitError(f"option {key!r} of method {method!r} {where}")
            if isinstance(value, str) and len(value) > MAX_TEXT:
                raise LimitError(f"option {key} of method {method!r}: at most {MAX_TEXT} characters")
            parsed = parse_value(method, key, value)
            if parsed is not None:
                text = check_option(context, key, str(parsed).lower() if isinstance(parsed, bool) else str(parsed))
                parsed = text if offered[key].type == "path" else parsed
            own[key] = parsed
    return checked


class PlacementArgs(NamedTuple):
    """The arguments of :func:`workbench.dashboard.work.run_placement` (and ``simulate_placement``) for one Compare method."""

    context: Any
    graph_key: str
    value: str
    devices: int
    seed: int
    budget: int | None
    time_limit: float | None
    extra: tuple[tuple[str, Any], ...]


def placement_arguments(
    context, graph_key: str, value: str, devices: int, seed: int, budget: int | None, time_limit: float | None, options: dict
) -> PlacementArgs:
    """What Compare places method ``value`` with: a ``budget`` or ``time_limit`` of its method in ``options`` (checked,
    :func:`checked_options`) replaces the page's, its other options ride along as sorted pairs (hashable: placements are cached)."""
    method, _ = parse_method(context, value)
    own = dict(options.get(method, {}))
    budget, time_limit = own.pop("budget", budget), own.pop("time_limit", time_limit)
    return PlacementArgs(context, graph_key, value, devices, seed, budget, time_limit, tuple(sorted(own.items())))


def state_arguments(context, state: dict, index: int) -> PlacementArgs:
    """What Compare placed the ``index``-th method of a revalidated state with (``whatif.checked_state``)."""
    keys = ("graph_key", "devices", "seed", "budget", "time_limit")
    graph_key, devices, seed, budget, time_limit = (state[key] for key in keys)
    return placement_arguments(context, graph_key, state["methods"][index], devices, seed, budget, time_limit, state["options"])


def _summary(options: dict[str, dict[str, Any]]) -> str:
    """``set: local_search budget=50, loop=python; heft ties=3``."""
    parts = [f"{method} " + ", ".join(f"{key}={value}" for key, value in own.items()) for method, own in options.items() if own]
    return "set: " + "; ".join(parts) if parts else "no option set: every method runs with its defaults"


def register_options_callbacks(app, context) -> None:
    @app.callback(
        Output("compare-options-fields", "children"),
        Input("compare-options-method", "value"),
        State("compare-options", "data"),
    )
    def show_fields(method, stored):
        """The chosen method's fields, with what was typed for it before."""
        return option_fields(method, stored)

    @app.callback(
        Output("compare-options", "data"),
        Output("compare-options-message", "children"),
        Input({"type": "compare-option", "key": ALL}, "value"),
        State({"type": "compare-option", "key": ALL}, "id"),
        State("compare-options-method", "value"),
        State("compare-options", "data"),
        prevent_initial_call=True,
    )
    def set_options(values, ids, method, stored):
        """Keep what was typed for the method (an empty box: its default) and say what is set, or which value is wrong."""
        if not isinstance(method, str) or not isinstance(ids, list) or not isinstance(values, list) or len(ids) != len(values):
            return no_update, no_update
        typed = {i.get("key"): v for i, v in zip(ids, values, strict=True) if isinstance(i, dict) and isinstance(v, str) and v.strip()}
        stored = {m: o for m, o in (stored if isinstance(stored, dict) else {}).items() if m != method and o}
        if typed:
            stored[method] = typed
        try:
            return stored, message(_summary(checked_options(context, stored)), "info")
        except ValueError as exc:
            return stored, message(str(exc))
