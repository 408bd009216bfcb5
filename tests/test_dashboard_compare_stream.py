"""Compare's placements streamed as a job: each method's card, summary row and bar as soon as it is placed, a progress line,
Cancel that keeps what was placed and names what was not, and the same numbers as placing everything in one go."""

from __future__ import annotations

import json
import os
import threading

import pytest

from workbench.dashboard import work
from workbench.dashboard.pages import compare, compare_stream

from .test_dashboard_anytime import find, texts, wait_for

CHAIN = "bundled:doppler-paper/chain_mm_112nodes.txt"
FFNN = "bundled:doppler-paper/ffnn_192nodes.txt"


def request(context, methods: list[str], budget: int = 40, graph_key: str = CHAIN) -> compare_stream.CompareRequest:
    """A checked request with no time limit (a search spends its budget, as the CLI's)."""
    checked = compare_stream.check_request(context, graph_key, 4, methods, 0, budget, None)
    assert isinstance(checked, compare_stream.CompareRequest), checked
    return checked


def step(context, trigger: str, held: dict | None, drawn: dict | None = None) -> tuple:
    """The stream callback as the page calls it."""
    return compare_stream.stream_step(trigger, held, drawn, lambda view: compare.compare_results(context, view))


def summary(results) -> list[dict]:
    table = next(find(child, "compare-summary") for child in results if find(child, "compare-summary") is not None)
    return table.data


def cards(results) -> str:
    return json.dumps([child.to_plotly_json() if hasattr(child, "to_plotly_json") else child for child in results], default=str)


def test_the_first_poll_after_a_method_is_placed_draws_its_card_and_says_how_far_it_got(context, monkeypatch):
    gate = threading.Event()
    real = compare_stream.place_one

    def heft_waits(context, request, value):
        if value == "heft":
            assert gate.wait(120), "the test never saw the first method drawn alone"
        return real(context, request, value)

    monkeypatch.setattr(compare_stream, "place_one", heft_waits)
    job = compare_stream.start_compare(context, request(context, ["critical_path", "heft"]))
    held = {"id": job.id}
    assert wait_for(lambda: job.touch() or len(job.done) == 1, 120)
    results, state, drawn, progress, poll_off, cancel_style = step(context, "compare-poll", held)
    assert state is None and not poll_off and cancel_style == compare_stream.SHOWN  # still placing: no what-if state yet
    assert "placed 1 of 2 methods; running heft (" in texts(progress)
    shown = cards(results)
    assert "gantt/0" in shown and "gantt/1" not in shown and "critical_path: makespan" in shown
    assert [row["method"] for row in summary(results)] == ["critical_path"]
    assert "makespan per method" in shown  # the bar chart of what is placed so far
    again = step(context, "compare-poll", held, drawn)
    assert again[0] is compare_stream.no_update and again[1] is compare_stream.no_update  # nothing new: nothing redrawn
    gate.set()
    assert wait_for(lambda: job.touch() or job.state != "running", 120)
    results, state, drawn, progress, poll_off, cancel_style = step(context, "compare-poll", held, drawn)
    assert poll_off and cancel_style == compare_stream.HIDDEN and "done: placed 2 of 2 methods" in texts(progress)
    assert state["labels"] == ["critical_path", "heft"] and state["methods"] == ["critical_path", "heft"]
    assert "gantt/1" in cards(results) and "whatif-base" in cards(results)  # the editor comes with the final state


def test_the_streamed_comparison_gives_the_numbers_of_placing_everything_at_once(context):
    chosen = ["round_robin", "local_search", "critical_path"]
    at_once, state = compare.compare_view(context, CHAIN, 4, chosen, 0, 40, None)
    job = compare_stream.start_compare(context, request(context, chosen))
    assert wait_for(lambda: job.touch() or job.state != "running", 120)
    streamed, streamed_state = step(context, "compare-poll", {"id": job.id})[:2]
    columns = ("method", "makespan", "gap", "ratio", "evaluations", "stop", "why")
    assert [[row[c] for c in columns] for row in summary(streamed)] == [[row[c] for c in columns] for row in summary(at_once)]
    assert streamed_state == state


def test_cancel_kills_the_running_placement_keeps_the_placed_cards_and_names_the_methods_not_run(context):
    known = set(work.RUNNER.children())
    job = compare_stream.start_compare(context, request(context, ["critical_path", "local_search", "heft"], 200_000, FFNN))
    held = {"id": job.id}
    found: list[int] = []
    assert wait_for(lambda: job.touch() or found.extend(set(work.RUNNER.children()) - known) or found, 120), "no child started"
    assert wait_for(lambda: job.touch() or job.view().running == "local_search", 60)
    step(context, "compare-cancel", held)
    assert wait_for(lambda: job.state == "cancelled", 10)
    assert wait_for(lambda: not set(work.RUNNER.children()) & set(found), 5), "the placement outlived its cancel"
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left running
        os.kill(found[-1], 0)
    results, state, _drawn, progress, poll_off, cancel_style = step(context, "compare-poll", held)
    assert poll_off and cancel_style == compare_stream.HIDDEN
    assert "cancelled: placed 1 of 3 methods; stopped: local_search; not run: heft" in texts(progress)
    rows = {row["method"]: row["stop"] for row in summary(results)}
    assert rows["local_search"] == compare_stream.STOPPED and rows["heft"] == compare_stream.CANCELLED
    assert rows["critical_path"] != "–"
    shown = cards(results)
    assert "critical_path: makespan" in shown and "local_search did not finish: cancelled from the page" in shown
    assert "heft not run: cancelled" in shown
    assert state["labels"] == ["critical_path", "local_search", "heft"]  # the editor works on what was placed


def test_a_page_that_stops_polling_stops_its_comparison(context, monkeypatch):
    monkeypatch.setattr(compare_stream, "ABANDONED", 0.5)
    job = compare_stream.start_compare(context, request(context, ["local_search", "heft"], 200_000, FFNN))
    assert wait_for(lambda: job.state != "running", 30)  # nobody touches it
    assert job.state == "cancelled" and [label for label, _ in job.cancelled] == ["local_search", "heft"]


def test_a_refused_request_starts_nothing_and_clears_the_results(context):
    known = set(work.RUNNER.children())
    refused = compare_stream.check_request(context, CHAIN, 4, ["critical_path"], -1, None, None)
    assert isinstance(refused, list) and "the seed must be from 0" in texts(refused)
    results, state, _drawn, progress, poll_off, cancel_style = step(context, "compare-job", None)
    assert (results, state, progress, poll_off, cancel_style) == ([], None, [], True, compare_stream.HIDDEN)
    forgotten = step(context, "compare-poll", {"id": "not-a-job"})
    assert forgotten[4] and "no longer known to the server" in texts(forgotten[3])
    assert set(work.RUNNER.children()) == known
