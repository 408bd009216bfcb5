"""Compare's "makespan against evaluations" section: its controls, and the callbacks that start, poll and cancel its job."""

from __future__ import annotations

from dash import Input, Output, State, ctx, dcc, html, no_update

from ..anytime import (
    DEFAULT_BUDGET,
    DEFAULT_SEEDS,
    MAX_SEEDS,
    anytime_charts,
    anytime_options,
    anytime_progress,
    default_series,
    find_job,
    start_anytime,
)
from ..components import controls, field, message
from ..polled import next_poll
from ..sources import load_graph_key
from .compare_choice import MAX_DEVICES, method_options, names, parse_devices
from .whatif import HIDDEN, SHOWN

__all__ = ["POLL_MS", "anytime_section", "anytime_step", "register_anytime_callbacks"]

POLL_MS = 1000
"""How often the page asks a running any-time job how far it got."""


def anytime_section() -> html.Div:
    """The "makespan against evaluations" controls and chart (same graph and devices as above)."""
    return html.Div(
        [
            html.H3("Makespan against evaluations and CPU time"),
            html.P(
                "The best makespan found so far against the simulator evaluations spent, and against the CPU seconds spent, both "
                "measured in the same runs, for searches and for learned policies (best of K samples, active search), mean and "
                "spread over seeds. Uses the graph and devices chosen above. The series run one after the other and each is "
                "drawn when it finishes; Cancel stops the rest."
            ),
            controls(
                field("Series", dcc.Dropdown(id="anytime-methods", options=[], value=[], multi=True), wide=True),
                field("Budget (evaluations)", dcc.Input(id="anytime-budget", type="number", min=1, step=1, value=DEFAULT_BUDGET)),
                field("Seeds", dcc.Input(id="anytime-seeds", type="number", min=1, max=MAX_SEEDS, step=1, value=DEFAULT_SEEDS)),
                html.Button("Draw", id="anytime-run", className="wb-primary"),
                html.Button("Cancel", id="anytime-cancel", style=HIDDEN, title="stop the runs still going; what is drawn stays"),
            ),
            html.Div(id="anytime-progress"),
            html.Div(id="anytime-results"),
            dcc.Store(id="anytime-job"),
            dcc.Interval(id="anytime-poll", interval=POLL_MS, disabled=True),
        ]
    )


def anytime_step(context, trigger: str | None, shown: dict | None, graph_key, devices, selected, budget, seeds) -> tuple:
    """``(job data, results, progress, poll disabled, Cancel style)`` after a Draw, a poll or a Cancel.

    A Draw takes the series on offer from the server (:func:`~workbench.dashboard.anytime.anytime_options`), never from
    the browser. The chart is rebuilt only when a series finished or failed since the page last drew (``shown["version"]``).
    """
    job = find_job(shown.get("id") if isinstance(shown, dict) else None)
    if trigger == "anytime-run":
        if job is not None:
            job.cancel()  # a new chart replaces this page's last one
        try:
            devices = parse_devices(devices)
        except (TypeError, ValueError):
            return None, [message(f"devices must be a whole number from 1 to {MAX_DEVICES}")], [], True, HIDDEN
        try:
            options = anytime_options(context, method_options(context, load_graph_key(context, graph_key), devices)) if graph_key else []
        except ValueError as exc:
            return None, [message(str(exc))], [], True, HIDDEN
        started = start_anytime(context, graph_key, devices, options, selected, budget, seeds)
        if isinstance(started, list):
            return None, started, [], True, HIDDEN
        job, shown = started, None
    elif job is None:
        return None, no_update, [message("this chart's runs are no longer known to the server; draw again", "warning")], True, HIDDEN
    elif trigger == "anytime-cancel":
        job.cancel()
    job.touch()
    running = job.state == "running"
    changed = shown is None or shown.get("version") != job.version
    results = anytime_charts(job) if changed else no_update
    return {"id": job.id, "version": job.version}, results, anytime_progress(job), not running, SHOWN if running else HIDDEN


def register_anytime_callbacks(app, context, page: str) -> None:
    """The section's callbacks: its series follow the page's graph (``{page}-graph-key``) and devices."""

    @app.callback(
        Output("anytime-methods", "options"),
        Output("anytime-methods", "value"),
        Input(f"{page}-graph-key", "data"),
        Input("compare-devices", "value"),
        State("anytime-methods", "value"),
    )
    def anytime_choices(graph_key, devices, selected):
        try:
            options = anytime_options(context, method_options(context, load_graph_key(context, graph_key), parse_devices(devices)))
        except (TypeError, ValueError):
            return [], []
        offered = {o["value"] for o in options}
        kept = [v for v in names(selected) if v in offered]
        return options, kept or default_series(options)

    @app.callback(
        Output("anytime-job", "data"),
        Output("anytime-results", "children"),
        Output("anytime-progress", "children"),
        Output("anytime-poll", "disabled"),
        Output("anytime-cancel", "style"),
        Output("anytime-poll", "max_intervals"),
        Input("anytime-run", "n_clicks"),
        Input("anytime-poll", "n_intervals"),
        Input("anytime-cancel", "n_clicks"),
        State(f"{page}-graph-key", "data"),
        State("compare-devices", "value"),
        State("anytime-methods", "value"),
        State("anytime-budget", "value"),
        State("anytime-seeds", "value"),
        State("anytime-job", "data"),
        prevent_initial_call=True,
    )
    def anytime(_clicks, polls, _cancel, graph_key, devices, selected, budget, seeds, shown):
        """Draw starts a job (stopping this page's last one), the timer shows how far it got, Cancel stops it (the timer
        ticks again only after this answer: :func:`~workbench.dashboard.polled.next_poll`)."""
        return *anytime_step(context, ctx.triggered_id, shown, graph_key, devices, selected, budget, seeds), next_poll(polls)
