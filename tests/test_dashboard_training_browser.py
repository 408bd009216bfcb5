"""The Training page at scale in headless Chromium, under a background load of 4 busy processes on the 2 cores.

20 runs of 10,000 episodes, one still growing, written through workbench.runs:
choosing them all draws them, a run that appears later is drawn when chosen,
three quick clicks draw exactly the three runs clicked, and the growing run's
curve follows its new episodes while all this happens. Every step waits on a
condition in the page; the time each draw took is printed (run with ``-s``),
not asserted (docs/dashboard.md gives the measured figures).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.test_dashboard_browser import browser, finish, pytestmark, serve, settle
from tests.test_dashboard_training import append_episodes, write_synthetic_run

__all__ = ["browser", "pytestmark"]  # the fixture and marks shared with the other browser tests

RUNS = 20
EPISODES = 10_000
CHART = """(el => el && el._fullData ? el._fullData.filter(t => t.mode === 'lines' && t.legendgroup === t.name).map(t => t.name) : null)"""
"""The run lines of a chart (a run's rolling mean is named as its legend group; its other traces and the keys are not)."""
MAKESPAN = "[...document.querySelectorAll('.js-plotly-plot')].find(g => ((g.layout || {}).title || {}).text?.startsWith('makespan per'))"


@pytest.fixture(scope="module")
def busy():
    """4 busy processes at the test's priority, as a user's would be, for the module's life: the load the issue asks the page to bear."""
    procs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(4)]
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def scale_runs(tmp_path_factory) -> Path:
    runs = tmp_path_factory.mktemp("scale") / "runs"
    for seed in range(RUNS - 1):
        write_synthetic_run(runs / f"run{seed:02d}", seed, EPISODES)
    time.sleep(0.05)
    write_synthetic_run(runs / "live", RUNS, EPISODES, status="running")  # the newest: drawn first
    return runs


@pytest.fixture(scope="module")
def scale_server(scale_runs, tmp_path_factory, busy):
    yield from serve(runs_dir=scale_runs, datasets_dir=tmp_path_factory.mktemp("no-datasets"))  # no shipped runs: the 20 only


@pytest.fixture
def growing(scale_runs):
    """Appends 5 episodes to the running run every half second while a test runs."""
    from workbench.runs import RunWriter

    stop, run = threading.Event(), RunWriter(scale_runs / "live")

    def grow() -> None:
        episode = EPISODES
        while not stop.wait(0.5):
            append_episodes(run, range(episode, episode + 5), RUNS)
            episode += 5

    thread = threading.Thread(target=grow, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join()


OVERLAPS = f"""() => {{
    const boxes = [...{MAKESPAN}.querySelectorAll('.annotation-text')].map(a => a.getBoundingClientRect());
    return boxes.reduce((n, a, i) => n + boxes.slice(0, i).filter(b =>
        a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom).length, 0);
}}"""
"""Pairs of the makespan chart's annotations (the stage labels) whose drawn boxes meet."""


def drawn(page) -> set[str]:
    names = page.evaluate(f"() => {CHART}({MAKESPAN})")
    return set(names or [])


def wait_drawn(page, labels: set[str], timeout_s: float = 240) -> float:
    """Seconds until the makespan chart shows a line for exactly ``labels`` (and the status line names as many runs)."""
    started = time.perf_counter()
    wanted = sorted(labels)
    script = f"""wanted => {{
        const names = {CHART}({MAKESPAN});
        if (!names) return false;
        const lines = [...new Set(names)].sort();
        const status = document.querySelector('#training-status')?.innerText || '';
        return JSON.stringify(lines) === JSON.stringify(wanted) && status.includes(`drawing ${{wanted.length}} run`);
    }}"""
    try:
        page.wait_for_function(script, arg=wanted, timeout=timeout_s * 1000, polling=50)
    except Exception:
        shown = sorted(drawn(page))
        raise AssertionError(f"wanted {wanted}; drawn {shown}; status {page.inner_text('#training-status')[:200]!r}") from None
    return time.perf_counter() - started


def cpu_meter(page):
    """A function giving ``(this process's CPU seconds: the server and the test, the page's main-thread task seconds)``,
    to print beside each wait: the wall time on a shared machine depends on the load, the CPU time much less."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable")

    def now() -> tuple[float, float]:
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        return time.process_time(), metrics["TaskDuration"]

    return now


def spent(meter, before: tuple[float, float]) -> str:
    after = meter()
    return f"(server {after[0] - before[0]:.2f} CPU s, page {after[1] - before[1]:.2f} s of tasks)"


def row(page, label: str):
    return page.locator('td[data-dash-column="run"]').filter(has_text=re.compile(f"^{re.escape(label)}$"))


def click_row(page, label: str) -> None:
    """Click the run's cell itself, not a point on the screen: the table refreshes every 2 s and a new run moves every row."""
    row(page, label).dispatch_event("click")


def test_twenty_long_runs_draw_and_a_new_run_draws_when_chosen_while_one_grows(scale_server, scale_runs, browser, growing, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": 1100})
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    started = time.perf_counter()
    page.goto(scale_server + "/training")
    page.wait_for_function(f"() => document.querySelectorAll('td[data-dash-column=\"run\"]').length === {RUNS}", timeout=120_000)
    wait_drawn(page, {"live"})
    opened = time.perf_counter() - started
    settle(page, 0.2)

    meter = cpu_meter(page)
    before = meter()
    page.click("#training-all")
    every = {f"run{seed:02d}" for seed in range(RUNS - 1)} | {"live"}
    all_runs = wait_drawn(page, every)
    all_cpu = spent(meter, before)
    settle(page, 0.2)

    write_synthetic_run(scale_runs / "added", 99, EPISODES)  # a run that appears while the page is open
    row(page, "added").wait_for(timeout=120_000)
    before = meter()
    click_row(page, "added")
    added = wait_drawn(page, every | {"added"})
    added_cpu = spent(meter, before)

    newest = f"{MAKESPAN}._fullData.find(t => t.name === 'live').x.at(-1)"  # its rolling mean: 21 runs draw no raw points
    before = page.evaluate(f"() => {newest}")
    # the running run's new episodes reach the chart by the timer, while all 21 runs are drawn
    page.wait_for_function(f"last => {newest} > last", arg=before, timeout=120_000)
    print(
        f"\nTraining page, {RUNS} runs x {EPISODES:,} episodes, 4 busy processes: page open and first run drawn {opened:.2f} s; "
        f"all {RUNS} drawn {all_runs:.2f} s after the click {all_cpu}; the added run drawn {added:.2f} s after its click {added_cpu}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    finish(page, errors, tmp_path / "training-scale.png")


def test_quick_clicks_draw_exactly_the_runs_clicked_while_the_timer_runs(scale_server, browser, growing, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": 1100})
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(scale_server + "/training")
    row(page, "run03").wait_for(timeout=120_000)
    page.wait_for_selector("text=drawing 1 run(s)", timeout=240_000)  # the newest run, first
    page.click("#training-none")
    for label in ("run03", "run07", "run11", "run07", "run15"):  # run07 twice: added, then taken away
        click_row(page, label)
    seconds = wait_drawn(page, {"run03", "run11", "run15"})
    time.sleep(2 * 2.0)  # two timer ticks later, still exactly those three
    assert drawn(page) == {"run03", "run11", "run15"}
    highlighted = page.evaluate(
        """() => [...document.querySelectorAll('td[data-dash-column="run"]')]
            .filter(td => getComputedStyle(td).fontWeight === '600').map(td => td.innerText).sort()"""
    )
    assert highlighted == ["run03", "run11", "run15"]
    print(f"\nthree runs drawn {seconds:.2f} s after five quick clicks")
    click_row(page, "live")
    wait_drawn(page, {"run03", "run11", "run15", "live"})
    settle(page, 0.5)
    legend = page.evaluate(f"() => [...{MAKESPAN}.querySelectorAll('.legend .traces')].map(t => t.textContent)")
    assert len(legend) == 4 + 1 + 2, legend  # the runs, one key for the greedy evaluations, the 2 reference lines once
    assert page.evaluate(OVERLAPS) == 0, "stage labels drawn over one another"
    page.evaluate("() => { document.querySelectorAll('#training-table *').forEach(e => { e.scrollTop = 0; }); window.scrollTo(0, 0); }")
    finish(page, errors, tmp_path / "training.png", docs=True)
