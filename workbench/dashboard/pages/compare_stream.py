"""Compare's placements as a job: the chosen methods are placed one after another in a thread of the server, and the page
polls it, so each method's card, summary row and bar appear as soon as that method is placed.

Pressing Compare (or changing the graph or devices) checks the request (:func:`check_request`) and starts a
:class:`CompareJob` (:func:`start_compare`), stopping the page's last one. Each method runs as before in a killable child
(:func:`~workbench.dashboard.work.run_placement`): same seed, budget, clocks, labels and stop reasons, and the whole
sequence within one share of ``--max-request-time`` (:func:`placing_time`), after which what is left is cut or not run.
The page's timer (:data:`POLL_MS`) asks the job how far it got (:func:`compare_progress`: "placed 2 of 5 methods; running
local_search (12 s)…") and redraws the results when a method ended since it last drew. Cancel kills the running child at
once and names the methods not run; a job whose page stops polling for :data:`ABANDONED` seconds stops the same way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from dash import html, no_update

from ...placers import methods as registered_methods
from ..components import message
from ..context import DashboardContext
from ..learned import checkpoint_origin, usable
from ..polled import JobTable, PolledJob
from ..sources import load_graph_key, parse_method
from ..summary import Stop, stop_reason
from ..work import NOT_RUN, Cancelled, request_deadline, run_placement, search_clock, simulate_placement, stop_when
from .compare_choice import MAX_DEVICES, parse_devices
from .compare_options import checked_options, placement_arguments
from .whatif import HIDDEN, MAX_SEED, SHOWN

__all__ = [
    "ABANDONED",
    "CANCELLED",
    "STOPPED",
    "POLL_MS",
    "CompareJob",
    "CompareRequest",
    "Entry",
    "JobView",
    "check_request",
    "compare_progress",
    "find_compare_job",
    "place_one",
    "placing_time",
    "start_compare",
    "stream_step",
]

POLL_MS = 1000
"""How often the page asks a running comparison how far it got."""
ABANDONED = 30.0
"""Seconds without a poll from its page after which a comparison stops (the tab was closed)."""
MAX_JOBS = 32
"""Comparisons the server remembers; the oldest finished one is forgotten first."""
DRAWING_RESERVE = 2.0
"""Seconds of ``--max-request-time`` kept for drawing a comparison's charts (or a tenth of it when that is more)."""
CANCELLED, STOPPED = "not run: cancelled", "stopped: cancelled"
"""What the summary table says for a method that Cancel kept from starting, and for the one it stopped."""


def placing_time(request_time: float) -> float:
    """The part of ``--max-request-time`` a comparison's placements may take: the charts are drawn in the rest (a
    tenth of it, at least :data:`DRAWING_RESERVE` seconds, at most half)."""
    return request_time - min(max(0.1 * request_time, DRAWING_RESERVE), 0.5 * request_time)


@dataclass(frozen=True, eq=False)
class CompareRequest:
    """A checked comparison: the graph, devices, methods (values, in order), seed, search budget and clock, and the
    options form's ``{method: {key: value}}`` (:func:`~.compare_options.checked_options`)."""

    graph_key: str
    graph: Any
    devices: int
    methods: tuple[str, ...]
    seed: int
    budget: int | None
    time_limit: float | None
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    sent_options: Any = None
    """The options as the browser sent them: the state keeps these, and the what-if editor checks them again."""


class Entry(NamedTuple):
    """One method's outcome: its label, and its placement, simulation and :class:`~workbench.dashboard.summary.Stop`; or
    ``None``, ``None`` and the sentence saying why it has none."""

    label: str
    placement: Any
    result: Any
    stop: Stop | str


class JobView(NamedTuple):
    """A comparison as it is at one instant (:meth:`CompareJob.view`): the progress line and the cards drawn from one view
    agree."""

    request: CompareRequest
    state: str  # "running", "finished" or "cancelled"
    version: int
    done: list[Entry]
    cut: list[tuple[str, str]]
    cancelled: list[tuple[str, str]]
    running: str  # the label of the method placing now ("" between two)
    seconds: float  # how long it has run


def check_request(
    context: DashboardContext,
    graph_key: str | None,
    devices: Any,
    methods: list[str] | None,
    seed: Any,
    budget: Any,
    time_limit: Any,
    options: Any = None,
) -> CompareRequest | list:
    """The request, within the server's caps; or the messages saying what is wrong."""
    if not graph_key:
        return [message("choose a graph", "warning")]
    try:
        devices = parse_devices(devices)
    except (TypeError, ValueError):
        return [message(f"devices must be a whole number from 1 to {MAX_DEVICES}")]
    if not methods:
        return [message("choose one or more methods", "warning")]
    try:
        seed = int(seed or 0)
        budget = int(budget) if budget else None
        time_limit = float(time_limit) if time_limit else None
    except (TypeError, ValueError, OverflowError):
        return [message("the seed and the budget must be whole numbers, the time limit a number")]
    if not 0 <= seed <= MAX_SEED:
        return [message(f"the seed must be from 0 to {MAX_SEED:,} (got {seed:,})")]
    try:
        graph = load_graph_key(context, graph_key)  # a LimitError, or a graph that does not load, is a ValueError
        budget, time_limit = context.limits.bound_compare(graph, devices, budget, time_limit)
        chosen = checked_options(context, options)
    except ValueError as exc:
        return [message(str(exc))]
    return CompareRequest(graph_key, graph, devices, tuple(methods), seed, budget, time_limit, chosen, options or {})


def method_label(context: DashboardContext, request: CompareRequest, value: str) -> str:
    """The label of a method value on this graph (a checkpoint's says where it comes from); the value where it has none."""
    try:
        origin = checkpoint_origin(context, value)
    except ValueError:  # its checkpoint was removed or damaged since it was offered: place_one says so
        return value
    return origin.label(request.graph.name) if origin else value


def place_one(context: DashboardContext, request: CompareRequest, value: str) -> tuple[Entry, str | None]:
    """``(entry, summary text)`` of one method: the summary text says what the request's deadline did to a method it cut
    (``None`` otherwise). Any failure becomes the entry's sentence."""
    graph, devices = request.graph, request.devices
    try:
        origin = checkpoint_origin(context, value)
    except ValueError as exc:  # its checkpoint was removed or damaged since it was offered
        return Entry(value, None, None, str(exc)), None
    label = origin.label(graph.name) if origin else value
    if not usable(origin, graph.name, devices):
        return Entry(label, None, None, f"{label} was not trained for {graph.name} on {devices} devices; it is not applied here"), None
    try:
        args = placement_arguments(
            context, request.graph_key, value, devices, request.seed, request.budget, request.time_limit, request.options
        )
        placement, result = run_placement(*args), simulate_placement(*args)
    except Cancelled as exc:
        short, text = _cancelled(exc, context, args.time_limit)  # the clock this method ran on
        return Entry(label, None, None, f"{label} {text}"), short
    except Exception as exc:  # one method failing must not take the page down
        return Entry(label, None, None, f"{label} failed: {exc}"), None
    method, options = parse_method(context, value)
    clock = args.time_limit if args.time_limit is not None else search_clock(context, value)
    searched = method not in registered_methods("learned") or "search" in options
    stop = stop_reason(method, placement, args.budget, clock, searched=searched, capped=args.time_limit is None)
    return Entry(label, placement, result, stop), None


def _cancelled(exc: Cancelled, context: DashboardContext, time_limit: float | None) -> tuple[str | None, str]:
    """``(what the summary table says, or None where it says nothing, the card's sentence)`` for a placement that was
    stopped or not started, and what to change when a deadline (the server's cap, no clock set) passed."""
    text = str(exc)
    whole = f"the whole comparison may compute for {context.limits.max_request_time:g} s (the server's --max-request-time)"
    if text == NOT_RUN:
        return NOT_RUN, f"{NOT_RUN}: {whole}; choose fewer methods or set a time limit"
    if "request's deadline" in text:
        return "stopped: request deadline", f"did not finish: {whole}"
    if "deadline" in text and time_limit is None:
        return None, (
            f"did not finish: it ran past the {context.limits.max_time_limit:g} s this server allows a placement "
            "(its --max-time-limit); set a time limit or a smaller search budget"
        )
    return None, "did not finish: " + text.removeprefix("stopped: ")


class CompareJob(PolledJob):
    """One comparison: its methods placed in order (:meth:`run`, in a thread of its own or the caller's), each entry
    published as it ends (thread-safe)."""

    def __init__(self, context: DashboardContext, request: CompareRequest, abandoned: float | None = None) -> None:
        """``abandoned``: seconds without :meth:`touch` after which it stops (``None``: never, for a caller that waits)."""
        super().__init__(abandoned)
        self.context, self.request = context, request
        self.done: list[Entry] = []  # one per method ended, in the order of request.methods
        self.cut: list[tuple[str, str]] = []  # (label, summary text) of the methods the request's deadline cut
        self.cancelled: list[tuple[str, str]] = []  # (label, CANCELLED or STOPPED) of the methods Cancel kept from starting or stopped
        self.running = ""  # the label of the method placing now
        self.since = 0.0  # when it started (time.monotonic())
        self.version = 0  # bumped whenever what is drawn changes
        self._lock = threading.Lock()

    def run(self) -> None:
        """Place every method in order, the whole sequence within the request's share of ``--max-request-time``."""
        try:
            with request_deadline(placing_time(self.context.limits.max_request_time)), stop_when(self.should_stop):
                for value in self.request.methods:
                    if self.should_stop():
                        label = method_label(self.context, self.request, value)
                        self._publish(Entry(label, None, None, f"{label} {CANCELLED}"), None, CANCELLED)
                        continue
                    with self._lock:
                        self.running, self.since = method_label(self.context, self.request, value), time.monotonic()
                    entry, short = place_one(self.context, self.request, value)
                    self._publish(entry, short, STOPPED if self._stop.is_set() and entry.placement is None else None)
        finally:  # whatever happened, the page learns the job ended
            with self._lock:
                self.running = ""
                self.state = "cancelled" if self._stop.is_set() else "finished"
                self.version += 1

    def _publish(self, entry: Entry, short: str | None, cancelled: str | None) -> None:
        with self._lock:
            self.done.append(entry)
            if short:
                self.cut.append((entry.label, short))
            if cancelled:
                self.cancelled.append((entry.label, cancelled))
            self.version += 1

    def view(self) -> JobView:
        """The job as it is now."""
        with self._lock:
            seconds = time.monotonic() - self.since if self.running else 0.0
            lists = list(self.done), list(self.cut), list(self.cancelled)
            return JobView(self.request, self.state, self.version, *lists, self.running, seconds)


_JOBS: JobTable[CompareJob] = JobTable("compare", MAX_JOBS)


def find_compare_job(job_id: Any) -> CompareJob | None:
    """The job a page holds the id of (``None`` when the server does not know it)."""
    return _JOBS.find(job_id)


def start_compare(context: DashboardContext, request: CompareRequest) -> CompareJob:
    """Start placing ``request``'s methods in a thread of the server; the page polls the job it returns."""
    return _JOBS.start(CompareJob(context, request, abandoned=ABANDONED))


def compare_progress(view: JobView) -> list:
    """A progress bar and "placed 2 of 5 methods; running local_search (12 s)…" while the job runs; how it ended after."""
    state, done, cut, cancelled = view.state, view.done, view.cut, view.cancelled
    total = len(view.request.methods)
    placed = sum(entry.placement is not None for entry in done)
    unplaced = {label for label, _ in cut + cancelled}
    failed = [entry.label for entry in done if entry.placement is None and entry.label not in unplaced]
    text = f"placed {placed} of {total} method{'' if total == 1 else 's'}"
    text += f"; failed: {', '.join(failed)}" if failed else ""
    if state == "running":
        text += f"; running {view.running} ({view.seconds:.0f} s)…" if view.running else "…"
        return [html.Progress(value=str(len(done)), max=str(total), className="wb-progress"), html.Span(text, className="wb-note")]
    text += f"; cut by the request's deadline: {', '.join(label for label, _ in cut)}" if cut else ""
    if state == "cancelled":
        for short, heading in ((STOPPED, "stopped"), (CANCELLED, "not run")):
            named = [label for label, why in cancelled if why == short]
            text += f"; {heading}: {', '.join(named)}" if named else ""
        return [message(f"cancelled: {text}", "warning")]
    return [html.Span(f"done: {text}", className="wb-note")]


def stream_step(trigger: str | None, held: Any, drawn: Any, draw: Callable[[JobView], tuple[list, dict | None]]) -> tuple:
    """``(results, state, drawn version, progress, poll disabled, Cancel style)`` after a new job, a poll or a Cancel.

    ``held`` is the page's job store (``{"id": ...}``, or ``None`` when the request was refused); ``drawn`` the version of
    the job it last drew. The results are redrawn (``draw``) only when a method ended since; the state the what-if editor
    and the highlight need is given once the job has ended, ``None`` before.
    """
    job = find_compare_job(held.get("id") if isinstance(held, dict) else None)
    if job is None:
        if isinstance(held, dict):
            note = [message("this comparison is no longer known to the server; press Compare", "warning")]
            return no_update, None, None, note, True, HIDDEN
        return [], None, None, [], True, HIDDEN  # refused: the page's notes say why
    if trigger == "compare-cancel":
        job.cancel()
    job.touch()
    view = job.view()  # one instant for the cards and the progress line
    running = view.state == "running"
    unchanged = isinstance(drawn, dict) and drawn.get("id") == job.id and drawn.get("version") == view.version
    results, state = (no_update, no_update) if unchanged else draw(view)
    return results, state, {"id": job.id, "version": view.version}, compare_progress(view), not running, SHOWN if running else HIDDEN
