"""The dashboard in headless Chromium: every page loads cleanly, Compare draws Gantt charts, Training draws a run.

Uses Debian's chromium through Playwright (never ``playwright install``).
Screenshots go to the test's tmp folder.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.test_dashboard import DIAMOND, write_calibration, write_run

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]

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
    write_run(runs, episodes=120)
    write_calibration(runs)
    return runs


@pytest.fixture(scope="module")
def server(server_runs):
    from werkzeug.serving import make_server

    from workbench.dashboard import create_app

    app = create_app(runs_dir=server_runs)
    port = free_port()
    httpd = make_server("127.0.0.1", port, app.server, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


def settle(page, seconds: float = 1.0) -> None:
    """Wait until Dash has no callback in flight, then a little longer."""
    page.wait_for_function("() => !document.querySelector('[data-dash-is-loading=\"true\"]')", timeout=60_000)
    time.sleep(seconds)


def visit(browser, url: str, ready: str):
    """Open ``url``, wait for the selector ``ready`` and for Dash to settle; returns the page and its console errors."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url)
    page.wait_for_selector(ready, timeout=60_000)
    settle(page)
    return page, errors


def finish(page, errors: list[str], screenshot: Path) -> None:
    """Save a screenshot, then require a clean console."""
    page.screenshot(path=str(screenshot), full_page=True)
    page.close()
    assert not errors, errors


def test_compare_page_draws_a_gantt_chart_per_method_and_compares_an_upload(server, browser, tmp_path):
    page, errors = visit(browser, server + "/", "text=critical_path: device timelines")
    titles = page.locator(".gtitle").all_text_contents()
    assert sum("device timelines" in t for t in titles) >= 2, titles
    assert any("makespan per method" in t for t in titles)
    bars = page.locator(".js-plotly-plot .barlayer .point").count()
    assert bars > 2 * 180  # FFNN's 180 ops, drawn once per method (plus the idle rows)
    page.locator(".js-plotly-plot .barlayer .point").nth(10).click(force=True)
    settle(page, 0.5)
    page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)
    upload = json.dumps(DIAMOND.to_dict()).encode()
    page.set_input_files("#compare-upload input[type=file]", files=[{"name": "diamond.json", "mimeType": "application/json", "buffer": upload}])
    page.wait_for_selector("text=uploaded diamond: 4 ops", timeout=30_000)
    settle(page)
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
    page.wait_for_selector("td:text-is('130')", timeout=15_000)  # the episode count updates without a reload
    finish(page, errors, tmp_path / "training.png")


def test_measured_page_shows_both_gantt_charts(server, browser, tmp_path):
    page, errors = visit(browser, server + "/measured", "text=measured (seconds)")
    assert page.locator("text=simulated (calibrated simulator, seconds)").count() == 1
    assert page.locator("text=before calibration: Spearman").count() == 1
    finish(page, errors, tmp_path / "measured.png")


def test_graph_page_shows_an_upload_error_and_downloads_csv(server, browser, tmp_path):
    page, errors = visit(browser, server + "/graph", "text=Statistics")
    assert page.locator(".wb-error").count() == 0
    page.set_input_files("#graph-upload input[type=file]", files=[{"name": "notes.txt", "mimeType": "text/plain", "buffer": b"hello\nworld\n"}])
    page.wait_for_selector(".wb-error", timeout=30_000)
    assert "notes.txt" in page.locator(".wb-error").inner_text()
    with page.expect_download() as download:
        page.locator("button", has_text="CSV").first.click()
    assert download.value.suggested_filename == "graph-graph.csv"
    finish(page, errors, tmp_path / "upload-error.png")


def test_launch_starts_a_background_job_and_shows_it_finish(server, browser, tmp_path):
    page, errors = visit(browser, server + "/launch", "text=Start")
    assert page.locator(".wb-error").count() == 0
    page.click("#launch-start")
    page.wait_for_selector("text=started job #1", timeout=10_000)
    page.wait_for_selector("text=finished", timeout=60_000)
    assert "makespan" in page.locator(".wb-log").first.inner_text()
    finish(page, errors, tmp_path / "launch.png")
