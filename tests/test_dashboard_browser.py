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

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium at /usr/bin/chromium"),
]


def write_fake_run(root: Path, name: str = "demo") -> Path:
    """A finished two-stage run per CONTRACTS.md section 2, with a half-written last metrics line."""
    import workbench as wb

    run = root / name
    (run / "best").mkdir(parents=True)
    graph = wb.bundled_graph("chain_mm")
    placement = wb.place(graph, "critical_path", 4)
    meta = {"status": "running", "method": "doppler", "graphs": [graph.name], "devices": 4, "seed": 0, "stages": ["il", "sim"],
            "started": "2026-01-01T00:00:00", "updated": "2026-01-01T00:01:00", "versions": {}, "machine": {}, "command": "workbench train chain_mm",
            "error": None, "reference": {"critical_path": placement.makespan, "best_heuristic": placement.makespan * 0.95, "best_heuristic_method": "heft"}}  # fmt: skip
    (run / "meta.json").write_text(json.dumps(meta))
    (run / "config.json").write_text(json.dumps({"method": "doppler"}))
    header = "stage,episode,graph,makespan,reward,baseline,loss,loss_policy,loss_entropy,loss_imitation,teacher_agreement,epsilon,lr,seconds,oracle\n"
    lines = [header]
    for episode in range(120):
        stage = "il" if episode < 50 else "sim"
        makespan = placement.makespan * (1.3 - 0.3 * episode / 120)
        lines.append(f"{stage},{episode},{graph.name},{makespan},{-makespan},,0.5,0.4,0.1,,0.8,0.1,1e-4,{episode * 0.1},sim\n")
    lines.append("sim,120,chain_mm_112nodes,12")  # half-written
    (run / "metrics.csv").write_text("".join(lines))
    result = wb.simulate(graph, placement.assignment, 4)
    result.trace.to_json(run / "best" / "trace.json")
    (run / "best" / "placement.json").write_text(json.dumps({"graph": graph.name, "devices": 4, "assignment": placement.assignment.tolist(),
                                                              "order": None, "makespan": placement.makespan, "stage": "sim", "episode": 99, "method": "doppler"}))  # fmt: skip
    return run


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from werkzeug.serving import make_server

    from workbench.dashboard import create_app

    runs = tmp_path_factory.mktemp("runs")
    write_fake_run(runs)
    app = create_app(runs_dir=runs)
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


def open_page(browser, url: str):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url)
    return page, errors


def settle(page, seconds: float = 1.0) -> None:
    """Wait until Dash has no callback in flight, then a little longer."""
    page.wait_for_function("() => !document.querySelector('[data-dash-is-loading=\"true\"]')", timeout=60_000)
    time.sleep(seconds)


def test_compare_page_draws_a_gantt_chart_per_method(server, browser, tmp_path):
    page, errors = open_page(browser, server + "/")
    page.wait_for_selector("text=critical_path: device timelines", timeout=60_000)
    settle(page)
    titles = page.locator(".gtitle").all_text_contents()
    assert sum("device timelines" in t for t in titles) >= 2, titles
    assert any("makespan per method" in t for t in titles)
    bars = page.locator(".js-plotly-plot .barlayer .point").count()
    assert bars > 2 * 180  # FFNN's 180 ops, drawn once per method (plus the idle rows)
    page.locator(".js-plotly-plot .barlayer .point").nth(10).click(force=True)
    settle(page, 0.5)
    page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)
    assert not errors, errors
    page.close()


def test_training_page_draws_the_run_curve(server, browser, tmp_path):
    page, errors = open_page(browser, server + "/training")
    page.wait_for_selector("text=makespan per episode", timeout=60_000)
    settle(page)
    assert page.locator("text=Stage I: imitation").count() >= 1
    assert page.locator(".js-plotly-plot .scatterlayer .trace").count() >= 2
    assert page.locator("text=best makespan").count() >= 1
    page.screenshot(path=str(tmp_path / "training.png"), full_page=True)
    assert not errors, errors
    page.close()


@pytest.mark.parametrize("path", ["/graph", "/launch", "/measured"])
def test_other_pages_load_without_console_errors(server, browser, tmp_path, path):
    page, errors = open_page(browser, server + path)
    page.wait_for_selector("h2", timeout=60_000)
    settle(page)
    assert page.locator(".wb-error").count() == 0, page.locator(".wb-error").all_inner_texts()
    page.screenshot(path=str(tmp_path / f"{path.strip('/')}.png"), full_page=True)
    assert not errors, errors
    page.close()
