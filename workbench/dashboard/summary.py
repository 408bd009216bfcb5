"""Compare's summary table: one row per method, first on the page, so the answer is read before any chart.

A row gives the makespan, its gap to the lower bound and its ratio to the
best makespan, the simulator evaluations the method spent, its wall and CPU
seconds, why it stopped (:func:`stop_reason`), and why its makespan is what
it is: its critical path split into compute, transfer and waiting
(:func:`workbench.viz.critical_path_split`). Numbers are shown in the CLI's
format (:func:`workbench.viz.format_number`); every column sorts by the
number behind it (:func:`sort_rows`), not by its text.
"""

from __future__ import annotations

import inspect
from typing import Any

from dash import dash_table

from ..placers import placer_class, placer_options
from ..viz import critical_path_split, format_number, format_time, method_color

__all__ = ["COLUMNS", "SORTABLE", "Stop", "plural", "stop_reason", "summary_rows", "summary_table", "sort_rows", "unplaced_row"]

COLUMNS = [
    ("method", "method"),
    ("makespan", "makespan"),
    ("gap", "gap to lower bound"),
    ("ratio", "× best"),
    ("evaluations", "evaluations"),
    ("seconds", "wall s"),
    ("cpu_seconds", "CPU s"),
    ("stop", "stopped by"),
    ("why", "why: critical path compute / transfer / waiting"),
]
"""``(row key, header)`` of each column, in order."""


class Stop:
    """Why a method stopped: its ``kind`` (``budget``, ``clock``, ``converged``, ``one pass``) and a sentence."""

    def __init__(self, kind: str, text: str) -> None:
        self.kind, self.text = kind, text

    def __repr__(self) -> str:
        return f"Stop({self.kind!r}, {self.text!r})"


def plural(count: int, noun: str) -> str:
    """``1 evaluation``, ``14,131 evaluations``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _default_budget(method: str) -> int | None:
    parameter = inspect.signature(placer_class(method)).parameters.get("budget")
    return parameter.default if parameter is not None and isinstance(parameter.default, int) else None


def stop_reason(
    method: str, placement: Any, budget: int | None, time_limit: float | None, searched: bool = True, capped: bool = False
) -> Stop:
    """Why ``placement`` (of registered ``method``, run with ``budget`` and ``time_limit``) stopped.

    A method without an evaluation budget (or a learned policy placing
    without its active search, ``searched=False``) ran one pass; one that spent its
    budget stopped there; one that spent less with a clock set and used that
    clock was cut by it (and the sentence says how much of the budget it
    spent; ``capped``: the clock was the server's cap, not one the user set);
    otherwise it ended by its own rule (converged).
    """
    evaluations = int(placement.evaluations)
    if "budget" not in placer_options(method) or not searched or not evaluations:
        return Stop("one pass", "one pass" if not evaluations else f"one pass ({plural(evaluations, 'evaluation')})")
    budget = budget if budget is not None else _default_budget(method)
    if budget is not None and evaluations >= budget:
        return Stop("budget", f"its budget of {budget:,} evaluations")
    of = f" of {budget:,}" if budget is not None else ""
    if time_limit is not None and placement.seconds >= 0.95 * time_limit:
        clock = f"the server's {time_limit:g} s cap (its --max-time-limit)" if capped else f"the {time_limit:g} s clock"
        return Stop("clock", f"{clock} after {evaluations:,}{of} evaluations")
    return Stop("converged", f"its own rule after {evaluations:,}{of} evaluations")


def summary_rows(results: list[tuple[str, Stop, Any, Any]], lower_bound: float, graph: Any) -> list[dict[str, Any]]:
    """One table row per ``(label, stop reason, placement, trace)``, best makespan first; each display value has a
    ``_<key>`` number to sort by."""
    best = min((placement.makespan for _, _, placement, _ in results), default=0.0)
    rows = []
    for label, stop, placement, trace in results:
        makespan = float(placement.makespan)
        gap = makespan / lower_bound - 1 if lower_bound else None
        ratio = makespan / best if best else None
        split = critical_path_split(graph, trace)
        total = sum(split.values()) or 1.0
        rows.append(
            {
                "method": label,
                "makespan": format_time(makespan, graph),
                "_makespan": makespan,
                "gap": "–" if gap is None else f"+{gap:.1%}",
                "_gap": gap,
                "ratio": "–" if ratio is None else f"{ratio:.3f}",
                "_ratio": ratio,
                "evaluations": f"{placement.evaluations:,}",
                "_evaluations": placement.evaluations,
                "seconds": format_number(round(placement.seconds, 3)),
                "_seconds": placement.seconds,
                "cpu_seconds": format_number(round(placement.cpu_seconds, 3)),
                "_cpu_seconds": placement.cpu_seconds,
                "stop": stop.text,
                "_stop": stop.kind,
                "why": " / ".join(f"{split[part] / total:.0%}" for part in ("compute", "transfer", "waiting")),
                "_why": split["compute"] / total,
                "color": method_color(label),
            }
        )
    return sort_rows(rows, [{"column_id": "makespan", "direction": "asc"}])


def unplaced_row(label: str, why: str) -> dict[str, Any]:
    """The row of a method that has no placement: ``why`` in the "stopped by" column, a dash elsewhere (sorted last)."""
    row: dict[str, Any] = {key: "–" for key, _ in COLUMNS}
    row.update({f"_{key}": None for key, _ in COLUMNS[1:]})
    row.update({"method": label, "stop": why, "_stop": why, "color": method_color(label)})
    return row


def sort_rows(rows: list[dict[str, Any]], sort_by: list[dict[str, str]] | None) -> list[dict[str, Any]]:
    """``rows`` sorted as a DataTable's ``sort_by`` asks, by each column's number (``_key``) where it has one."""
    out = list(rows)
    for rule in reversed(sort_by or []):
        key = rule["column_id"]
        number = f"_{key}" if any(f"_{key}" in row for row in out) else key

        def value(row: dict[str, Any], number: str = number) -> tuple[bool, Any]:
            item = row.get(number)
            return (item is None, item if item is not None else 0)

        out.sort(key=value, reverse=rule.get("direction") == "desc")
    return out


SORTABLE: dict[str, Any] = {"sort_action": "custom", "sort_mode": "single", "sort_by": [], "style_as_list_view": True}
"""A DataTable sorted by the server (:func:`sort_rows`: by each column's number), one column at a time, rows as a list."""


def summary_table(table_id: str, rows: list[dict[str, Any]]) -> dash_table.DataTable:
    """The sortable table: each method's name in its own color (the color its bar has)."""
    return dash_table.DataTable(
        id=table_id,
        columns=[{"id": key, "name": name} for key, name in COLUMNS],
        data=rows,
        **SORTABLE,
        style_table={"overflowX": "auto"},
        style_cell={
            "fontFamily": "inherit",
            "fontSize": "0.9em",
            "padding": "4px 8px",
            "textAlign": "right",
            "whiteSpace": "normal",
            "height": "auto",
            "maxWidth": "22em",
        },
        style_cell_conditional=[
            {"if": {"column_id": key}, "textAlign": "left"} for key in ("method", "stop", "why")
        ],  # text columns read from the left
        style_data_conditional=[
            {
                "if": {"filter_query": f"{{method}} = {_quoted(row['method'])}", "column_id": "method"},
                "boxShadow": f"inset 6px 0 0 {row['color']}",
                "paddingLeft": "14px",
            }
            for row in rows
        ],
        style_header={"fontWeight": "bold"},
        tooltip_header={"why": "the critical path's time: its ops running / its data in flight / waiting for a link, a device or an input"},
    )


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
