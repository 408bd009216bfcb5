"""Compare's "makespan against evaluations" section: any-time curves of searches and sampled policies, over seeds.

A series is a search method (its ``details["anytime"]`` at the chosen budget),
or a learned checkpoint usable here, drawn as best of K samples (K = the
budget) and, for a policy with per-instance active search, as that search
within the budget. Each (series, seed) runs in a killable child process
(:mod:`workbench.dashboard.work`), under the server's caps: the budget at
most ``--max-budget`` (samples at most ``--max-count``), the time limit at
most ``--max-time-limit``, and at most :data:`MAX_SEEDS` seeds.

"Draw" starts an :class:`AnytimeJob` in the server and returns at once: the
series run one after the other (the seeds of one series side by side, as many
children as ``--max-concurrent`` allows), and the page polls the job: a
progress bar, the series still to come, and the chart, which grows by one
series each time a series' last seed ends. A series that fails is named in a
message and left out of the chart, its captions and its titles. Cancel kills
the running children at once and keeps what was drawn; a job whose page
stops polling for :data:`ABANDONED` seconds stops the same way.

"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from dash import html

from ..placers import methods, place, placer_options
from ..viz import anytime_figure, anytime_frame
from .choice import MethodChoice
from .components import figure_card, message
from .context import DashboardContext
from .learned import checkpoint_origin
from .limits import LimitError
from .polled import JobTable, PolledJob
from .sources import load_graph_key, parse_method
from .work import GRACE, run_bounded

__all__ = [
    "ABANDONED",
    "DEFAULT_BUDGET",
    "DEFAULT_SEEDS",
    "MAX_SEEDS",
    "MODES",
    "AnytimeJob",
    "anytime_options",
    "default_series",
    "anytime_record",
    "start_anytime",
    "find_job",
    "anytime_charts",
    "anytime_progress",
]

MAX_SEEDS = 10
"""The most seeds one chart averages (each seed is one more run per series)."""
DEFAULT_BUDGET, DEFAULT_SEEDS = 200, 3
"""The form's budget and seeds: every learned series (best of K, active search, zero-shot) finishes each seed within the
server's default 60 s cap on a 2-core machine with four busy processes beside it (``tests/test_dashboard_anytime.py``)."""
MODES = {"search": "", "samples": " best of K samples", "active": " active search"}
"""How a series spends its evaluations: a search's own budget, best of K sampled placements, per-instance active search."""
ABANDONED = 30.0
"""Seconds without a poll from its page after which a job stops (the tab was closed)."""
MAX_JOBS = 32
"""Jobs the server remembers; the oldest finished one is forgotten first."""


def _series(value: str) -> tuple[str, str]:
    """``(mode, method value)`` of a series value (a choice without a mode is a search)."""
    choice = MethodChoice.from_value(value)
    return choice.mode or "search", choice.with_mode("").to_value()


def anytime_options(context: DashboardContext, options: list[dict[str, str]]) -> list[dict[str, str]]:
    """The series on offer, from Compare's method options for this graph and device count: searches and learned checkpoints."""
    out = []
    for option in options:
        choice = MethodChoice.from_value(option["value"])
        if choice.active:
            continue  # Compare's own active-search entry: offered below as this checkpoint's "active" series
        accepted = placer_options(choice.method)
        if choice.method in methods("search") and "budget" in accepted:
            out.append({"label": choice.method, "value": choice.to_value()})
        elif choice.method in methods("learned"):
            origin = checkpoint_origin(context, choice.to_value())
            label = origin.short if origin else option["label"]
            if "samples" in accepted:
                out.append({"label": label + MODES["samples"], "value": choice.with_mode("samples").to_value()})
            if "search" in accepted:
                out.append({"label": label + MODES["active"], "value": choice.with_mode("active").to_value()})
            elif "budget" in accepted and "samples" not in accepted:
                out.append({"label": label, "value": choice.with_mode("search").to_value()})
    return out


def default_series(options: list[dict[str, str]]) -> list[str]:
    """local_search (or the first search) and the first sampled policy."""
    choices = [MethodChoice.from_value(o["value"]) for o in options]
    searches = [c.to_value() for c in choices if not c.mode and not c.root]
    return ([v for v in searches if v == "local_search"] or searches)[:1] + [c.to_value() for c in choices if c.mode == "samples"][:1]


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
    if "time_limit" in accepted:  # a search, or best of K, stops at the clock with what it found by then
        options["time_limit"] = time_limit
    placement = place(load_graph_key(context, graph_key), method=method, devices=devices, seed=seed, **options)
    if "anytime" not in placement.details:
        raise ValueError(f"{method} records no any-time curve")
    return list(placement.details["anytime"])


_RECORDS: OrderedDict[tuple, list] = OrderedDict()
_RECORDS_LOCK = threading.Lock()
MAX_RECORDS = 256
"""(series, seed) records kept, so drawing the same chart again runs nothing."""


def anytime_record(
    context: DashboardContext,
    graph_key: str,
    value: str,
    devices: int,
    seed: int,
    budget: int,
    time_limit: float,
    should_stop: Callable[[], str | None] | None = None,
) -> list:
    """:func:`_record` in a killable child process, stopped when ``should_stop`` says why (cached)."""
    args = (context, graph_key, value, devices, seed, budget, time_limit)
    with _RECORDS_LOCK:
        if args in _RECORDS:
            _RECORDS.move_to_end(args)
            return _RECORDS[args]
    # a job waits for a free slot as long as it is wanted: Compare's own placements may hold them
    record = run_bounded(context, _record, *args, seconds=time_limit + GRACE, should_stop=should_stop, slot_wait=float("inf"))
    with _RECORDS_LOCK:
        _RECORDS[args] = record
        while len(_RECORDS) > MAX_RECORDS:
            _RECORDS.popitem(last=False)
    return record


class AnytimeJob(PolledJob):
    """One "Draw": its series run in order in the server, each drawn when its last seed ends (thread-safe)."""

    def __init__(
        self,
        context: DashboardContext,
        graph_key: str,
        devices: int,
        budget: int,
        seeds: int,
        series: list[tuple[str, str]],
        skipped: list[str],
    ) -> None:
        super().__init__(ABANDONED)
        self.context, self.graph_key, self.devices, self.budget, self.seeds = context, graph_key, devices, budget, seeds
        self.series = series  # (value, label), in the order they run
        self.skipped = skipped  # a sentence per series refused before running
        self.records: dict[str, list] = {}  # label -> one record per seed, finished series only
        self.values: dict[str, str] = {}  # label -> value of each drawn series
        self.failed: dict[str, str] = {}  # label -> why
        self.running = ""
        self.done_runs = 0
        self.version = 0  # bumped whenever what is drawn changes
        self._lock = threading.Lock()

    @property
    def total_runs(self) -> int:
        return len(self.series) * self.seeds

    def run(self) -> None:
        """Run every series (in a thread of its own); the seeds of one series side by side."""
        try:
            with ThreadPoolExecutor(max_workers=self.context.limits.max_concurrent) as pool:
                for value, label in self.series:
                    if self.should_stop():
                        break
                    self.running = label
                    self._run_series(pool, value, label)
        finally:  # whatever happened, the page learns the job ended
            with self._lock:
                self.running = ""
                self.state = "cancelled" if self._stop.is_set() else "finished"
                self.version += 1

    def _run_series(self, pool: ThreadPoolExecutor, value: str, label: str) -> None:
        """The seeds of one series side by side; the series is drawn, or named as failed, when the last one ends."""
        time_limit = self.context.limits.max_time_limit
        args = (self.context, self.graph_key, value, self.devices)
        futures = [pool.submit(anytime_record, *args, seed, self.budget, time_limit, self.should_stop) for seed in range(self.seeds)]
        error = None
        for future in as_completed(futures):
            exc = future.exception()
            error = error or exc
            with self._lock:
                self.done_runs += exc is None or not self._stop.is_set()  # a run cancelled half-way is not done
        with self._lock:
            if error is None:
                self.records[label] = [future.result() for future in futures]
                self.values[label] = value
            elif not self._stop.is_set():
                self.failed[label] = _why(error, time_limit)
            self.version += 1

    def snapshot(self) -> tuple[dict[str, list], dict[str, str], dict[str, str]]:
        """Copies of ``(records, values, failed)`` as they are now."""
        with self._lock:
            return dict(self.records), dict(self.values), dict(self.failed)


def _why(error: BaseException, time_limit: float) -> str:
    """A failed series' reason, saying which cap stopped it."""
    text = str(error)
    if "deadline" in text:
        return f"it ran past the {time_limit + GRACE:g} s this server allows one run (its --max-time-limit, plus {GRACE:g} s)"
    return text.removeprefix("stopped: ")


_JOBS: JobTable[AnytimeJob] = JobTable("anytime", MAX_JOBS)


def find_job(job_id: Any) -> AnytimeJob | None:
    """The job a page holds the id of (``None`` when the server does not know it)."""
    return _JOBS.find(job_id)


def start_anytime(
    context: DashboardContext,
    graph_key: str | None,
    devices: int,
    options: list[dict[str, str]],
    values: list[str] | None,
    budget: Any,
    seeds: Any,
) -> AnytimeJob | list:
    """Start a job for the chosen series, budget and number of seeds; or the messages saying why not.

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
    labels = {o["value"]: o["label"] for o in options}
    series, skipped = [], []
    for value in values:
        label = labels.get(value, value)
        if _series(value)[0] == "samples" and budget > context.limits.max_count:
            skipped.append(f"{label}: K = {budget:,} samples is more than {context.limits.max_count:,} (the server's --max-count)")
        else:
            series.append((value, label))
    return _JOBS.start(AnytimeJob(context, graph_key, devices, budget, seeds, series, skipped))


def anytime_progress(job: AnytimeJob) -> list:
    """The job's progress bar and a line saying what runs now, what is still to come, or how it ended."""
    done, total = job.done_runs, job.total_runs
    drawn = len(job.records)
    if job.state == "running":
        waiting = [label for _, label in job.series if label not in job.records and label not in job.failed and label != job.running]
        text = f"{done} of {total} runs done ({job.seeds} seed(s) per series); running {job.running or '…'}"
        if waiting:
            text += "; then " + ", ".join(waiting)
        return [html.Progress(value=str(done), max=str(total or 1), className="wb-progress"), html.Span(text, className="wb-note")]
    if job.state == "cancelled":
        left = [label for _, label in job.series if label not in job.records and label not in job.failed]
        text = f"stopped after {done} of {total} runs: {drawn} series drawn" + (f"; not run: {', '.join(left)}" if left else "")
        return [message(text, "warning")]
    return [html.Span(f"done: {drawn} series drawn from {total} runs", className="wb-note")]


def anytime_charts(job: AnytimeJob) -> list:
    """A message per failed or refused series, then the two charts of the series finished so far (none while none is)."""
    records, values, failed = job.snapshot()
    notes = [message(text) for text in job.skipped] + [message(f"{label} failed: {why}") for label, why in failed.items()]
    if not records:
        if job.state == "running":
            return notes
        return notes or [message("no series was drawn", "warning")]
    context = job.context
    graph = load_graph_key(context, job.graph_key)
    origins = [checkpoint_origin(context, _series(values[label])[1]) for label in records]  # drawn series only
    origin = next((o for o in origins if o is not None), None)
    detail = f"; {origin.detail(graph.name)}" if origin else ""
    budget, seeds = job.budget, job.seeds

    def title(axis: str) -> str:
        subtitle = f"budget {budget:,}, seeds 0–{seeds - 1}{detail}"
        return f"{graph.name} on {job.devices} devices: best makespan against {axis}<br><sup>{subtitle}</sup>"

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
