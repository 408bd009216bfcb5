"""Compare's diff of two placements and what-if editing (parts of the Compare page, not a page of their own).

Diff: where two methods put each op, the ops that moved, and each
placement's critical path. What-if: start from one method's placement, move
ops (typed, clicked or box-selected in a chart) to another device, and see
the new timeline and makespan at once (one simulation); polish the edited
placement with local search from that start (in a killable child process,
stopped at the Compare time limit or the server's ``--max-time-limit``);
download it as JSON.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import flask
import numpy as np
from dash import ALL, Input, Output, State, ctx, dcc, html, no_update

from ...sim import simulate
from ...viz import diff_frame, diff_heatmap, find_ops, format_time, gantt_figure, message_figure, trace_critical_path
from ..components import field, figure_card, message
from ..learned import checkpoint_origin, usable
from ..limits import LimitError
from ..sources import load_graph_key, parse_method
from ..work import RUNNER, Cancelled, polish_placement, run_placement, simulate_placement
from .compare_options import checked_options, state_arguments

__all__ = [
    "editor",
    "parse_ops",
    "move_ops",
    "diff_view",
    "checked_state",
    "checked_index",
    "checked_assignment",
    "register_whatif_callbacks",
]

PAGE = "compare"
SHOWN, HIDDEN = {"display": "inline-block"}, {"display": "none"}
MAX_OPS_TEXT = 10_000
"""Characters of the ops box a Move reads (a range ``a-b`` is one part, however many ops it names)."""
MAX_NAME_QUERIES = 16
"""Names a Move looks up (each one reads every op's name)."""
MAX_SEED = 2**32 - 1


def _whole(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise LimitError(f"{what} must be a whole number from {low:,} to {high:,} (got {value!r})")
    return value


def _integer(value: Any, what: str) -> int:
    """A whole number (its range is checked against the caps after)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise LimitError(f"{what} must be a whole number (got {value!r})")
    return value


def _finite(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise LimitError(f"{what} must be a finite number (got {value!r})")
    return float(value)


def checked_state(context, state: Any) -> dict:
    """Compare's state store as the browser sent it back, rebuilt from what the server's caps allow (never trusted).

    The graph key names a graph within the size caps; devices, budget and time limit are within the server's
    ``--max-*`` (:meth:`~workbench.dashboard.limits.Limits.bound_compare`); every method is a distinct value that
    :func:`~workbench.dashboard.sources.parse_method` accepts (a checkpoint inside datasets/ or runs/) and that may
    place this graph; one label per method. Raises ``ValueError`` (a :class:`LimitError` beyond a cap) saying what
    is wrong.
    """
    if not isinstance(state, dict):
        raise LimitError("no comparison to work on; press Compare")
    graph_key = state.get("graph_key")
    if not isinstance(graph_key, str):
        raise LimitError(f"not a graph key: {graph_key!r}")
    graph = load_graph_key(context, graph_key)
    devices = _integer(state.get("devices"), "devices")
    budget = state.get("budget")
    time_limit = state.get("time_limit")
    budget = None if budget is None else _integer(budget, "the search budget")
    time_limit = None if time_limit is None else _finite(time_limit, "the time limit")
    budget, time_limit = context.limits.bound_compare(graph, devices, budget, time_limit)
    methods, labels = state.get("methods"), state.get("labels")
    if not isinstance(methods, list) or not methods or not all(isinstance(m, str) for m in methods) or len(set(methods)) < len(methods):
        raise LimitError("the comparison's methods must be a list of distinct method names")
    if not isinstance(labels, list) or len(labels) != len(methods) or not all(isinstance(label, str) for label in labels):
        raise LimitError("the comparison needs one label per method")
    for value in methods:
        parse_method(context, value)
        if not usable(checkpoint_origin(context, value), graph.name, devices):
            raise LimitError(f"{value} was not trained for {graph.name} on {devices} devices")
    x_max = state.get("x_max")
    return {
        "graph_key": graph_key,
        "devices": devices,
        "methods": methods,
        "labels": labels,
        "seed": _whole(state.get("seed"), "the seed", 0, MAX_SEED),
        "budget": budget,
        "time_limit": time_limit,
        "options": checked_options(context, state.get("options")),
        "x_max": None if x_max is None else max(0.0, _finite(x_max, "the time axis")),
    }


def checked_index(value: Any, state: dict, what: str) -> int:
    """A method index (a dropdown's value) within the comparison's methods."""
    return _whole(value, what, 0, len(state["methods"]) - 1)


def checked_assignment(edited: Any, graph, devices: int) -> np.ndarray:
    """The edited assignment the browser holds: one device in ``0..devices-1`` per op of ``graph``."""
    values = edited.get("assignment") if isinstance(edited, dict) else None
    if not isinstance(values, list) or len(values) != graph.num_nodes or not all(type(d) is int and 0 <= d < devices for d in values):
        raise LimitError(f"the edited placement must give each of the {graph.num_nodes:,} ops a device in 0..{devices - 1}")
    return np.asarray(values, dtype=np.int64)


def editor(labels: list[tuple[int, str]], devices: int) -> html.Div:
    """The diff and what-if controls for a comparison; ``labels``: ``(method index, label)`` of the methods that succeeded."""
    options = [{"label": label, "value": index} for index, label in labels]
    first, second = (options + options)[0]["value"], (options + options)[1 if len(options) > 1 else 0]["value"]
    return html.Div(
        className="wb-card",
        children=[
            html.H3("Diff of two placements"),
            html.Div(
                className="wb-controls",
                children=[
                    field("A", dcc.Dropdown(id="diff-a", options=options, value=first, clearable=False), wide=True),
                    field("B", dcc.Dropdown(id="diff-b", options=options, value=second, clearable=False), wide=True),
                ],
            ),
            html.Div(id="diff-summary"),
            figure_card(PAGE, "diff", message_figure("choose two placements"), None),
            html.H3("What if: move ops, see the makespan"),
            html.Div(
                className="wb-controls",
                children=[
                    field("Start from", dcc.Dropdown(id="whatif-base", options=options, value=first, clearable=False), wide=True),
                    field(
                        "Ops (ids, ranges a-b or a name; click or box-select in a chart)",
                        dcc.Input(id="whatif-ops", type="text", placeholder="e.g. 3, 7-9"),
                    ),
                    field("To device", dcc.Input(id="whatif-device", type="number", min=0, max=devices - 1, step=1, value=0)),
                    html.Button("Move", id="whatif-move", className="wb-primary"),
                    html.Button("Polish with local search", id="whatif-polish", className="wb-small"),
                    html.Button("Cancel", id="whatif-cancel", className="wb-small", style=HIDDEN, title="stop the polish"),
                    html.Button("Download JSON", id="whatif-download-button", className="wb-small"),
                    dcc.Download(id="whatif-download"),
                ],
            ),
            dcc.Store(id="whatif-assignment"),
            html.Div(id="whatif-summary"),
            figure_card(PAGE, "whatif", message_figure("move ops to see the edited timeline"), None),
        ],
    )


def parse_ops(graph, text: Any) -> list[int]:
    """Op ids from ``"3, 7-9, matmul"``: ids, inclusive ranges, or names (substring); raises ``ValueError`` saying what is wrong.

    Bounded before any op list is built: at most :data:`MAX_OPS_TEXT` characters and :data:`MAX_NAME_QUERIES` names,
    and a range is checked against the graph's ops first.
    """
    text = "" if text is None else text
    if not isinstance(text, str) or len(text) > MAX_OPS_TEXT:
        raise ValueError(f"name the ops to move in at most {MAX_OPS_TEXT:,} characters")
    parts = [p.strip() for p in text.split(",") if p.strip()]
    spans = [re.fullmatch(r"(\d+)\s*-\s*(\d+)", part) for part in parts]
    if sum(span is None and not part.isdigit() for part, span in zip(parts, spans, strict=True)) > MAX_NAME_QUERIES:
        raise ValueError(f"name at most {MAX_NAME_QUERIES} ops by name in one move (ids and ranges a-b are not counted)")
    ops: dict[int, None] = {}
    for part, span in zip(parts, spans, strict=True):
        if span:
            first, last = (int(span[i]) if len(span[i]) < 10 else graph.num_nodes for i in (1, 2))
            if first > last or last >= graph.num_nodes:
                raise ValueError(f"no op matches {part!r} (ids run 0..{graph.num_nodes - 1})")
            found: Any = range(first, last + 1)
        else:
            found = find_ops(graph, graph.num_nodes, part) if len(part) < 10 or not part.isdigit() else []
            if not found:
                raise ValueError(f"no op matches {part!r} (ids run 0..{graph.num_nodes - 1})")
        ops.update(dict.fromkeys(found))
    if not ops:
        raise ValueError("name the ops to move")
    return list(ops)


def move_ops(assignment: Any, ops: list[int], device: Any, devices: int) -> np.ndarray:
    """``assignment`` with ``ops`` on ``device``; raises ``ValueError`` for a device outside ``0..devices-1``."""
    try:
        device = int(device)
    except (TypeError, ValueError):
        raise ValueError(f"the target device must be a whole number in 0..{devices - 1}") from None
    if not 0 <= device < devices:
        raise ValueError(f"the target device must lie in 0..{devices - 1}, got {device}")
    edited = np.array(assignment, dtype=np.int64)
    edited[ops] = device
    return edited


def _placement(context, state: dict, index: int):
    args = state_arguments(context, state, index)
    return run_placement(*args), simulate_placement(*args)


def diff_view(context, state: Any, a: Any, b: Any) -> tuple:
    """``(figure, summary)``: where placements ``a`` and ``b`` (method indexes) put each op, the moved ops, each critical path.

    The state is revalidated (:func:`checked_state`); what it or the indexes get wrong is the summary's message.
    """
    if not state or a is None or b is None:
        return message_figure("choose two placements"), ""
    from ...notebook import moved_ops

    try:
        state = checked_state(context, state)
        a, b = checked_index(a, state, "A"), checked_index(b, state, "B")
        graph = load_graph_key(context, state["graph_key"])
        (first, first_sim), (second, second_sim) = _placement(context, state, a), _placement(context, state, b)
    except (ValueError, Cancelled) as exc:
        return message_figure("no diff"), message(str(exc))
    paths = trace_critical_path(graph, first_sim.trace), trace_critical_path(graph, second_sim.trace)
    frame = diff_frame(graph, first.assignment, second.assignment, *paths)
    labels = state["labels"][a], state["labels"][b]
    renamed = moved_ops(first.assignment, second.assignment, state["devices"])
    summary = (
        f"{int(frame['moved'].sum())} of {graph.num_nodes} ops on another device id ({renamed} after renaming devices to match best); "
        f"critical path: A {len(paths[0])} ops, B {len(paths[1])} ops, {len(set(paths[0]) & set(paths[1]))} shared. "
        f"Makespan A {format_time(first.makespan, graph)}, B {format_time(second.makespan, graph)}."
    )
    title = f"A = {labels[0]} vs B = {labels[1]}<br><sup>{graph.name}, {state['devices']} devices</sup>"
    return diff_heatmap(graph, frame, state["devices"], ("A: " + labels[0][:40], "B: " + labels[1][:40]), title=title), message(
        summary, "info"
    )


def whatif_result(context, state: dict, assignment: np.ndarray, note: str) -> tuple:
    """``(store data, figure, summary)`` for an edited assignment: one simulation."""
    graph = load_graph_key(context, state["graph_key"])
    result = simulate(graph, assignment, state["devices"])
    figure = gantt_figure(
        graph,
        result.trace,
        title=f"edited placement<br><sup>{graph.name}, {state['devices']} devices, makespan {format_time(result.makespan, graph)}</sup>",
        devices=state["devices"],
        x_max=max(state.get("x_max") or 0.0, result.makespan * 1.01),
        critical_path=True,
    )
    summary = html.Div(
        [
            html.Span(f"{note}: makespan "),
            html.B(format_time(result.makespan, graph)),
            html.Span(repr(float(result.makespan)), id="whatif-makespan", hidden=True),
        ]
    )
    return {"assignment": [int(d) for d in assignment], "makespan": float(result.makespan)}, figure, summary


def edit_view(context, state: Any, base: Any, trigger: Any, ops_text: Any, device: Any, edited: Any) -> tuple:
    """``(store data, figure, summary)`` of a what-if action: start from method ``base``, move ops, or polish.

    Everything the browser holds (the comparison's state, the edited assignment) is revalidated first; raises
    ``ValueError`` or :class:`Cancelled` saying what is wrong.
    """
    state = checked_state(context, state)
    index = checked_index(base, state, "the placement to start from")
    graph = load_graph_key(context, state["graph_key"])
    placement, _ = _placement(context, state, index)
    current = checked_assignment(edited, graph, state["devices"]) if edited and trigger != "whatif-base" else placement.assignment
    devices = state["devices"]
    if trigger == "whatif-move":
        ops = parse_ops(graph, ops_text)
        return whatif_result(context, state, move_ops(current, ops, device, devices), f"moved {len(ops)} op(s) to device {int(device)}")
    if trigger == "whatif-polish":
        budget = state["budget"] or 2000
        polished = polish_placement(context, state["graph_key"], devices, state["seed"], budget, state["time_limit"], current.tolist())
        note = f"polished by local search ({budget:,} evaluations) from the edited placement"
        return whatif_result(context, state, polished.assignment, note)
    return whatif_result(context, state, current, f"starting from {state['labels'][index]}")


def register_whatif_callbacks(app, context) -> None:
    @app.callback(
        Output({"type": "figure", "page": PAGE, "index": "diff"}, "figure"),
        Output("diff-summary", "children"),
        Input("diff-a", "value"),
        Input("diff-b", "value"),
        State("compare-state", "data"),
    )
    def diff(a, b, state):
        return diff_view(context, state, a, b)

    @app.callback(
        Output("whatif-assignment", "data"),
        Output({"type": "figure", "page": PAGE, "index": "whatif"}, "figure"),
        Output("whatif-summary", "children"),
        Input("whatif-base", "value"),
        Input("whatif-move", "n_clicks"),
        Input("whatif-polish", "n_clicks"),
        State("whatif-ops", "value"),
        State("whatif-device", "value"),
        State("whatif-assignment", "data"),
        State("compare-state", "data"),
        running=[(Output("whatif-cancel", "style"), SHOWN, HIDDEN)],
    )
    def edit(base, _move, _polish, ops_text, device, edited, state):
        if not state or base is None:
            return no_update, no_update, ""
        try:
            return edit_view(context, state, base, ctx.triggered_id, ops_text, device, edited)
        except Cancelled as exc:
            return no_update, no_update, message(f"polish did not finish: {exc}")
        except ValueError as exc:
            return no_update, no_update, message(str(exc))

    @app.callback(Input("whatif-cancel", "n_clicks"), prevent_initial_call=True)
    def cancel(_clicks):
        """Stop this browser's polish: its child is killed, the summary says so."""
        RUNNER.cancel(flask.request.remote_addr, "whatif-summary.children")

    @app.callback(
        Output("whatif-download", "data"),
        Input("whatif-download-button", "n_clicks"),
        State("whatif-assignment", "data"),
        State("compare-state", "data"),
        prevent_initial_call=True,
    )
    def download(_clicks, edited, state):
        if not edited or not state:
            return no_update
        try:
            state = checked_state(context, state)
            graph = load_graph_key(context, state["graph_key"])
            assignment = checked_assignment(edited, graph, state["devices"])
        except ValueError:
            return no_update
        makespan = float(simulate(graph, assignment, state["devices"]).makespan)
        data = {"graph": graph.name, "devices": state["devices"], "assignment": assignment.tolist(), "makespan": makespan}
        return dcc.send_string(json.dumps(data, indent=1), f"{graph.name}-{state['devices']}dev-edited.json")

    @app.callback(
        Output("whatif-ops", "value"),
        Input("selected-op", "data"),
        Input({"type": "figure", "page": PAGE, "index": ALL}, "selectedData"),
        prevent_initial_call=True,
    )
    def pick(op, _selections):
        if ctx.triggered_id == "selected-op":
            return str(op) if op is not None else no_update
        points = (ctx.triggered[0]["value"] or {}).get("points", []) if ctx.triggered else []
        ops = sorted(
            {
                int(p["customdata"][0])
                for p in points
                if isinstance(p.get("customdata"), list) and p["customdata"] and p["customdata"][0] is not None
            }
        )
        return ", ".join(map(str, ops)) if ops else no_update
