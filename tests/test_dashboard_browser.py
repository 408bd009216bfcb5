"""The dashboard in headless Chromium: every page loads cleanly, Compare draws Gantt charts, Training draws a run.

Uses Debian's chromium through Playwright (never ``playwright install``).
Screenshots go to the test's tmp folder.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.test_dashboard import DIAMOND, add_real_stage, write_calibration, write_run

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium at /usr/bin/chromium"),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server_runs(tmp_path_factory) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    add_real_stage(write_run(runs / "three-stages", "seed0", episodes=60, trailing=""))
    time.sleep(0.05)
    write_run(runs, episodes=120)  # the newest run: selected first
    write_calibration(runs)
    return runs


def serve(**options):
    """A dashboard (``create_app(**options)``) served on a free local port in a thread: yields its address."""
    from werkzeug.serving import make_server

    from workbench.dashboard import create_app

    port = free_port()
    httpd = make_server("127.0.0.1", port, create_app(**options).server, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def server(server_runs):
    yield from serve(runs_dir=server_runs)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


WAIT_MS = 180_000
"""How long a wait for a condition may take: it returns as soon as the condition holds, so it is sized for a loaded 2-core
machine (a whole-suite run, CI), not an idle one."""


COMPARED = "#compare-progress >> text=/^done: placed/"
"""Compare's progress line once every chosen method has ended: the page's comparison is drawn whole."""


def compared(page, drawn: str) -> None:
    """Wait for the comparison whose results show ``drawn`` (a selector: a title or a header of that comparison, drawn with
    its first card) to end, each method's card streaming in meanwhile; then for Dash to settle."""
    page.wait_for_selector(drawn, timeout=WAIT_MS)
    page.wait_for_selector(COMPARED, timeout=WAIT_MS)
    settle(page)


def download(page, button: str):
    """Click the first button labelled ``button`` once Dash has settled (a click on a card still being redrawn is lost) and
    return the download it starts."""
    settle(page, 0.2)
    with page.expect_download(timeout=WAIT_MS) as started:
        page.locator("button", has_text=button).first.click()
    return started.value


def settle(page, seconds: float = 1.0) -> None:
    """Wait until Dash has no callback in flight, then a little longer."""
    page.wait_for_function("() => !document.querySelector('[data-dash-is-loading=\"true\"]')", timeout=WAIT_MS)
    time.sleep(seconds)


def visit(browser, url: str, ready: str):
    """Open ``url``, wait for the selector ``ready`` and for Dash to settle; returns the page and its console errors."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url)
    page.wait_for_selector(ready, timeout=WAIT_MS)
    settle(page)
    return page, errors


def finish(page, errors: list[str], screenshot: Path, docs: bool = False) -> None:
    """Save a screenshot (a ``docs`` one also to ``$WORKBENCH_SCREENSHOTS``, see docs/dashboard.md), then require a clean console."""
    page.mouse.move(0, 0)  # no stale hover label in the picture
    page.screenshot(path=str(screenshot), full_page=True)
    if docs and os.environ.get("WORKBENCH_SCREENSHOTS"):
        folder = Path(os.environ["WORKBENCH_SCREENSHOTS"])
        folder.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(folder / screenshot.name), full_page=True)
    page.close()
    assert not errors, errors


def test_compare_page_draws_a_gantt_chart_per_method_and_compares_an_upload(server, browser, tmp_path):
    page, errors = visit(browser, server + "/", COMPARED)
    gantts_drawn(page, 2)
    titles = page.locator(".gtitle").all_text_contents()
    assert sum("device timelines" in t for t in titles) >= 2, titles
    assert any("makespan per method" in t for t in titles)
    bars = page.locator(".js-plotly-plot .barlayer .point").count()
    assert bars > 2 * 180  # FFNN's 180 ops, drawn once per method (plus the idle rows)
    page.locator(".js-plotly-plot .barlayer .point").nth(10).click(force=True)
    settle(page, 0.5)
    page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)
    upload = json.dumps(DIAMOND.to_dict()).encode()
    page.set_input_files(
        "#compare-upload input[type=file]", files=[{"name": "diamond.json", "mimeType": "application/json", "buffer": upload}]
    )
    compared(page, "text=uploaded diamond: 4 ops")
    assert page.locator(".js-plotly-plot .barlayer .point").count() >= 2 * 4
    finish(page, errors, tmp_path / "compare-upload.png")


def test_training_page_draws_the_run_curve_and_follows_new_episodes(server, server_runs, browser, tmp_path):
    page, errors = visit(browser, server + "/training", "text=makespan per episode")
    assert page.locator("text=Stage I: imitation").count() >= 1
    assert page.locator(".js-plotly-plot .scatterlayer .trace").count() >= 2
    assert page.locator("text=best makespan").count() >= 1
    metrics = Path(server_runs) / "demo" / "metrics.csv"
    text = metrics.read_text()
    metrics.write_text(text[: text.rfind("\n") + 1] + "".join(f"sim,{e},chain_mm_112nodes,1.6e13,,,,,,,,,,,sim\n" for e in range(120, 130)))
    page.wait_for_selector('td[data-dash-column="episodes"] >> text="130"', timeout=WAIT_MS)  # the count updates without a reload
    page.wait_for_function(  # and the curve reaches the new episodes (the half-written line was completed: 129 the last)
        "() => [...document.querySelectorAll('.js-plotly-plot')].some(g => (g._fullData || []).some(t => t.name === 'demo (raw)'"
        " && t.x[t.x.length - 1] === 129))",
        timeout=WAIT_MS,
    )
    finish(page, errors, tmp_path / "training.png")


def test_measured_page_shows_both_gantt_charts(server, browser, tmp_path):
    page, errors = visit(browser, server + "/measured", "text=measured (seconds)")
    assert page.locator("text=simulated (calibrated simulator, seconds)").count() == 1
    assert page.locator("text=before calibration: Spearman").count() == 1
    finish(page, errors, tmp_path / "measured.png")


def test_graph_page_shows_an_upload_error_and_downloads_csv(server, browser, tmp_path):
    page, errors = visit(browser, server + "/graph", "text=Statistics")
    assert page.locator(".wb-error").count() == 0
    page.set_input_files(
        "#graph-upload input[type=file]", files=[{"name": "notes.txt", "mimeType": "text/plain", "buffer": b"hello\nworld\n"}]
    )
    page.wait_for_selector(".wb-error", timeout=WAIT_MS)
    assert "notes.txt" in page.locator(".wb-error").inner_text()
    assert download(page, "CSV").suggested_filename == "graph-graph.csv"
    finish(page, errors, tmp_path / "upload-error.png", docs=True)


def test_launch_starts_a_background_job_and_shows_it_finish(server, browser, tmp_path):
    page, errors = visit(browser, server + "/launch", "text=Start")
    assert page.locator(".wb-error").count() == 0
    page.click("#launch-start")
    page.wait_for_selector("text=started job #1", timeout=WAIT_MS)
    page.wait_for_selector("text=finished", timeout=WAIT_MS)
    assert "makespan" in page.locator(".wb-log").first.inner_text()
    finish(page, errors, tmp_path / "launch.png", docs=True)


def choose(page, dropdown: str, option: str) -> None:
    """Pick ``option`` (its visible text) in the Dash dropdown ``#dropdown``."""
    page.click(f"#{dropdown}")
    page.get_by_role("option", name=option).click()
    page.keyboard.press("Escape")
    settle(page)


def choose_run(page, label: str) -> None:
    """Click the row of the run ``label`` in Training's run table (it is drawn, or taken away when it was)."""
    page.locator('td[data-dash-column="run"]', has_text=label).first.click()
    settle(page)


def gantt_titles(page) -> list[str]:
    return [t for t in page.locator(".gtitle").all_text_contents() if "device timelines" in t]


def gantts_drawn(page, count: int) -> None:
    """Wait until Plotly has drawn ``count`` Gantt charts: the comparison's answer arrives before Plotly (loaded on first
    use) draws its figures, by a second or more on a loaded machine (two CI runs read the titles too early)."""
    page.wait_for_function(
        f"() => [...document.querySelectorAll('.gtitle')].filter(t => t.textContent.includes('device timelines')).length >= {count}",
        timeout=WAIT_MS,
    )


def test_switching_graphs_keeps_the_methods_right_and_never_shows_another_graphs_checkpoint(server, browser, tmp_path):
    page, errors = visit(browser, server + "/", COMPARED)
    gantts_drawn(page, 3)  # the three default methods
    assert any(
        t.startswith("doppler (pretrained)") and "trained on ffnn_192nodes" in t and "ffnn_192nodes, 4 devices" in t
        for t in gantt_titles(page)
    ), (gantt_titles(page), page.locator("#compare-progress").inner_text())  # a method cut by its deadline says so there
    choose(page, "compare-bundled", "chain_mm_112nodes (DOPPLER paper)")
    compared(page, "text=chain_mm_112nodes, 4 devices")  # three placements in children, on a loaded 2-core machine
    gantts_drawn(page, 3)
    titles = gantt_titles(page)
    assert len(titles) == 3 and not any("ffnn" in t for t in titles), titles
    doppler = next(t for t in titles if t.startswith("doppler"))
    assert "trained on chain_mm_112nodes" in doppler and "1.2001e13" in doppler  # chain_mm's own checkpoint, not FFNN's 1.5e13
    assert "doppler (pretrained" in page.locator("#compare-methods").inner_text()
    page.fill("#compare-devices input, input#compare-devices", "8")
    page.keyboard.press("Enter")
    compared(page, "text=chain_mm_112nodes, 8 devices")
    assert not any(t.startswith("doppler") for t in gantt_titles(page))
    assert "no checkpoint trained for it): doppler (pretrained)" in page.locator(".wb-info").first.inner_text()
    finish(page, errors, tmp_path / "compare-switch.png", docs=True)


def test_gantt_charts_share_the_time_axis_after_a_zoom(server, browser, tmp_path):
    page, errors = visit(browser, server + "/", COMPARED)
    gantts = "[...document.querySelectorAll('.js-plotly-plot')].filter(g => (g.layout.title.text || '').includes('device timelines'))"
    ranges = f"() => {gantts}.map(g => g._fullLayout.xaxis.range)"
    gantts_drawn(page, 2)
    before = page.evaluate(ranges)
    assert len(before) >= 2 and all(r == before[0] for r in before)  # one time scale from the start
    page.evaluate(
        f"() => Plotly.relayout({gantts}[0], {{'xaxis.range': [1e11, 3e11], 'xaxis2.range': [1e11, 3e11]}})"
    )  # what a drag-zoom sends
    page.wait_for_function(f"() => ({ranges})().every(r => Math.abs(r[0] - 1e11) < 1 && Math.abs(r[1] - 3e11) < 1)", timeout=WAIT_MS)
    events = json.loads(Path(download(page, "Trace JSON (Perfetto)").path()).read_text())["traceEvents"]
    assert sum(e.get("cat") == "op" for e in events) == 180  # FFNN's ops, one complete slice each
    finish(page, errors, tmp_path / "compare-zoom.png", docs=True)


def test_training_page_shows_the_shipped_runs_with_their_stages_and_best_placement(server, browser, tmp_path):
    page, errors = visit(browser, server + "/training", "text=makespan per episode")
    runs = page.locator('td[data-dash-column="run"]').all_text_contents()
    assert sum(r.startswith("pretrained ") for r in runs) == 4, runs
    page.click("#training-none")
    choose_run(page, "pretrained chain_mm_112nodes")
    page.wait_for_selector("text=pretrained chain_mm_112nodes: best placement, makespan 1.2001e13", timeout=120_000)
    assert page.locator("text=Stage II: simulator RL").count() >= 1
    page.wait_for_selector("text=greedy, kept Stage II weights", timeout=WAIT_MS)
    page.keyboard.press("Escape")
    finish(page, errors, tmp_path / "training-pretrained.png", docs=True)


def test_a_three_stage_run_draws_stage_three_on_its_own_axis_and_the_measured_chart(server, browser, tmp_path):
    page, errors = visit(browser, server + "/training", "text=makespan per episode")
    page.click("#training-none")
    choose_run(page, "three-stages/seed0")
    page.wait_for_selector("text=Stage III makespan (s, measured)", timeout=WAIT_MS)
    page.wait_for_selector("text=greedy evaluations (Stage III, s)", timeout=WAIT_MS)  # greedy.csv, beside the sampled makespans
    finish(page, errors, tmp_path / "training-three-stages.png", docs=True)
    page, errors = visit(browser, server + "/measured", "text=measured (seconds)")
    page.wait_for_selector("text=Stage III episodes: Spearman", timeout=WAIT_MS)
    finish(page, errors, tmp_path / "measured-real-stage.png", docs=True)


def test_whatif_move_shows_the_makespan_of_the_edited_assignment(server, browser, tmp_path):
    import numpy as np

    import workbench as wb

    page, errors = visit(browser, server + "/", "text=What if: move ops")
    page.wait_for_selector("#whatif-makespan", state="attached", timeout=WAIT_MS)
    page.fill("#whatif-ops", "5, 6")
    page.fill("#whatif-device", "3")
    page.click("#whatif-move")
    page.wait_for_selector("text=moved 2 op(s) to device 3", timeout=WAIT_MS)
    shown = float(page.locator("#whatif-makespan").text_content())
    graph = wb.bundled_graph("ffnn")
    edited = np.array(wb.place(graph, "critical_path", 4).assignment)  # the first method shown on first load
    edited[[5, 6]] = 3
    assert shown == wb.simulate(graph, edited, 4).makespan
    page.locator("#diff-summary").scroll_into_view_if_needed()
    assert "ops on another device id" in page.locator("#diff-summary").inner_text()
    finish(page, errors, tmp_path / "compare-whatif.png", docs=True)
