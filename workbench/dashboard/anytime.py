"""Compare's "makespan against evaluations" section: any-time curves of searches and sampled policies, over seeds.

A series is a search method (its ``details["anytime"]`` at the chosen budget),
or a learned checkpoint usable here, drawn as best of K samples (K = the
budget) and, for a policy with per-instance active search, as that search
within the budget. Each (series, seed) runs in a killable child process
(:mod:`workbench.dashboard.work`), under the server's caps: the budget at
most ``--max-budget`` (samples at most ``--max-count``), the time limit at
most ``--max-time-limit``, and at most :data:`MAX_SEEDS` seeds.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import workbench as wb
from workbench.placers import methods, placer_options
from workbench.viz import anytime_figure, anytime_frame

from .components import figure_card, message
from .context import DashboardContext
from .learned import ACTIVE, checkpoint_origin
from .limits import LimitError
from .sources import load_graph_key, parse_method
from .work import GRACE, run_bounded

__all__ = ["MAX_SEEDS", "MODES", "anytime_options", "default_series", "anytime_record", "anytime_view"]

MAX_SEEDS = 10
"""The most seeds one chart averages (each seed is one more run per series)."""
MODES = {"search": "", "samples": " best of K samples", "active": " active search"}
"""How a series spends its evaluations: a search's own budget, best of K sampled placements, per-instance active search."""


def _series(value: str) -> tuple[str, str]:
    """``(mode, method value)`` of an option value ``mode|method value`` (a plain method value is a search)."""
    mode, bar, rest = value.partition("|")
    return (mode, rest) if bar and mode in MODES else ("search", value)


def anytime_options(context: DashboardContext, options: list[dict[str, str]]) -> list[dict[str, str]]:
    """The series on offer, from Compare's method options for this graph and device count: searches and learned checkpoints."""
    out = []
    for option in options:
        value = option["value"]
        if value.startswith(ACTIVE):
            continue  # Compare's own active-search entry: offered below as this checkpoint's "active" series
        method = value.partition("@")[0]
        accepted = placer_options(method)
        if method in methods("search") and "budget" in accepted:
            out.append({"label": method, "value": value})
        elif method in methods("learned"):
            origin = checkpoint_origin(context, value)
            label = origin.short if origin else option["label"]
            if "samples" in accepted:
                out.append({"label": label + MODES["samples"], "value": f"samples|{value}"})
            if "search" in accepted:
                out.append({"label": label + MODES["active"], "value": f"{ACTIVE}{value}"})
            elif "budget" in accepted and "samples" not in accepted:
                out.append({"label": label, "value": f"search|{value}"})
    return out


def default_series(options: list[dict[str, str]]) -> list[str]:
    """local_search (or the first search) and the first sampled policy."""
    values = [o["value"] for o in options]
    searches = [v for v in values if _series(v)[0] == "search" and "@" not in v]
    return ([v for v in searches if v == "local_search"] or searches)[:1] + [v for v in values if v.startswith("samples|")][:1]


def _record(context: DashboardContext, graph_key: str, value: str, devices: int, seed: int, budget: int, time_limit: float) -> list:
    """The ``[evaluation, best so far]`` points of one series and seed (runs in the child)."""
    mode, method_value = _series(value)
    method, options = parse_method(context, method_value)
    accepted = placer_options(method)
    if mode == "samples":
        options["samples"] = budget
    else:
        options["budget"] = budget
        if mode == "active":
            options["search"] = "active"
        if "time_limit" in accepted:
            options["time_limit"] = time_limit
    placement = wb.place(load_graph_key(context, graph_key), method=method, devices=devices, seed=seed, **options)
    if "anytime" not in placement.details:
        raise ValueError(f"{method} records no any-time curve")
    return list(placement.details["anytime"])


@lru_cache(maxsize=256)
def anytime_record(context: DashboardContext, graph_key: str, value: str, devices: int, seed: int, budget: int, time_limit: float) -> list:
    """:func:`_record` in a killable child process (cached)."""
    return run_bounded(context, _record, context, graph_key, value, devices, seed, budget, time_limit, seconds=time_limit + GRACE)


def anytime_view(
    context: DashboardContext,
    graph_key: str | None,
    devices: int,
    options: list[dict[str, str]],
    values: list[str] | None,
    budget: Any,
    seeds: Any,
) -> list:
    """The chart (and a message per failed series) for the chosen series, budget and number of seeds.

    ``options`` are the series on offer, computed by the server (:func:`anytime_options`), never the browser's list:
    a value not among them is refused.
    """
    if not graph_key or not values:
        return [message("choose one or more series", "warning")]
    offered = {o["value"] for o in options}
    if not isinstance(values, list) or not all(isinstance(v, str) and v in offered for v in values) or len(set(values)) < len(values):
        return [message("choose the series among those offered for this graph and device count")]
    try:
        budget, seeds = int(budget), int(seeds)
    except (TypeError, ValueError):
        return [message("the budget and the number of seeds must be whole numbers")]
    if not 1 <= seeds <= MAX_SEEDS:
        return [message(f"seeds must be from 1 to {MAX_SEEDS} (got {seeds})")]
    graph = load_graph_key(context, graph_key)
    try:
        budget, _ = context.limits.bound_compare(graph, devices, budget, None)
    except LimitError as exc:
        return [message(str(exc))]
    time_limit = context.limits.max_time_limit
    labels = {o["value"]: o["label"] for o in options}
    records, notes = {}, []
    for value in values:
        label = labels.get(value, value)
        if _series(value)[0] == "samples" and budget > context.limits.max_count:
            notes.append(message(f"{label}: K = {budget:,} samples is more than {context.limits.max_count:,} (the server's --max-count)"))
            continue
        try:
            records[label] = [anytime_record(context, graph_key, value, devices, seed, budget, time_limit) for seed in range(seeds)]
        except Exception as exc:  # one series failing must not take the chart down
            notes.append(message(f"{label} failed: {exc}"))
    if not records:
        return notes or [message("no series succeeded")]
    origin = next((checkpoint_origin(context, _series(v)[1]) for v in values if "@" in v), None)
    detail = f"; {origin.detail(graph.name)}" if origin else ""

    def title(axis: str) -> str:
        subtitle = f"budget {budget:,}, seeds 0–{seeds - 1}{detail}"
        return f"{graph.name} on {devices} devices: best makespan against {axis}<br><sup>{subtitle}</sup>"

    caption = (
        f"Mean best makespan so far over {seeds} seed(s), shaded min–max; each series ran once per seed with a budget of {budget:,} "
        "evaluations (K = the budget for sampled policies), every evaluation counted as the method counts it."
    )
    cpu_caption = (
        "The same runs against the process CPU seconds (every thread) each had spent when it found each improvement, on this "
        "machine and under its load at the time: a method that is better per evaluation can still be worse per second."
    )
    return [
        *notes,
        figure_card("compare", "anytime", anytime_figure(records, title("evaluations"), graph), anytime_frame(records), caption),
        figure_card(
            "compare",
            "anytime-cpu",
            anytime_figure(records, title("CPU seconds"), graph, x="cpu_seconds"),
            anytime_frame(records, x="cpu_seconds"),
            cpu_caption,
        ),
    ]
