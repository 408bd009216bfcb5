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
import re
from typing import Any

import flask
import numpy as np
from dash import ALL, Input, Output, State, ctx, dcc, html, no_update

import workbench as wb
from workbench.viz import diff_frame, diff_heatmap, find_ops, format_time, gantt_figure, message_figure, trace_critical_path

from ..components import field, figure_card, message
from ..sources import load_graph_key
from ..work import RUNNER, Cancelled, polish_placement, run_placement, simulate_placement

__all__ = ["editor", "parse_ops", "move_ops", "diff_view", "register_whatif_callbacks"]

PAGE = "compare"
SHOWN, HIDDEN = {"display": "inline-block"}, {"display": "none"}


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


def parse_ops(graph, text: str | None) -> list[int]:
    """Op ids from ``"3, 7-9, matmul"``: ids, inclusive ranges, or names (substring); raises ``ValueError`` saying what is wrong."""
    ops: list[int] = []
    for part in [p.strip() for p in (text or "").split(",") if p.strip()]:
        span = re.fullmatch(r"(\d+)\s*-\s*(\d+)", part)
        found = list(range(int(span[1]), int(span[2]) + 1)) if span else find_ops(graph, graph.num_nodes, part)
        if not found or max(found) >= graph.num_nodes:
            raise ValueError(f"no op matches {part!r} (ids run 0..{graph.num_nodes - 1})")
        ops += [o for o in found if o not in ops]
    if not ops:
        raise ValueError("name the ops to move")
    return ops


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
    args = (context, state["graph_key"], state["methods"][index], state["devices"], state["seed"], state["budget"], state["time_limit"])
    return run_placement(*args), simulate_placement(*args)


def diff_view(context, state: dict | None, a: Any, b: Any) -> tuple:
    """``(figure, summary)``: where placements ``a`` and ``b`` (method indexes) put each op, the moved ops, each critical path."""
    if not state or a is None or b is None:
        return message_figure("choose two placements"), ""
    from workbench.notebook import moved_ops

    graph = load_graph_key(context, state["graph_key"])
    (first, first_sim), (second, second_sim) = _placement(context, state, int(a)), _placement(context, state, int(b))
    paths = trace_critical_path(graph, first_sim.trace), trace_critical_path(graph, second_sim.trace)
    frame = diff_frame(graph, first.assignment, second.assignment, *paths)
    labels = state["labels"][int(a)], state["labels"][int(b)]
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
    result = wb.simulate(graph, assignment, state["devices"])
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
        graph = load_graph_key(context, state["graph_key"])
        placement, _ = _placement(context, state, int(base))
        current = np.asarray(edited["assignment"]) if edited and ctx.triggered_id != "whatif-base" else placement.assignment
        try:
            if ctx.triggered_id == "whatif-move":
                ops = parse_ops(graph, ops_text)
                return whatif_result(
                    context, state, move_ops(current, ops, device, state["devices"]), f"moved {len(ops)} op(s) to device {int(device)}"
                )
            if ctx.triggered_id == "whatif-polish":
                budget = state["budget"] or 2000
                polished = polish_placement(
                    context, state["graph_key"], state["devices"], state["seed"], budget, state.get("time_limit"), current.tolist()
                )
                return whatif_result(
                    context, state, polished.assignment, f"polished by local search ({budget:,} evaluations) from the edited placement"
                )
        except (ValueError, Cancelled) as exc:
            return no_update, no_update, message(f"polish did not finish: {exc}" if isinstance(exc, Cancelled) else str(exc))
        return whatif_result(context, state, current, f"starting from {state['labels'][int(base)]}")

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
        graph = load_graph_key(context, state["graph_key"])
        data = {"graph": graph.name, "devices": state["devices"], "assignment": edited["assignment"], "makespan": edited["makespan"]}
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
