"""Compare in headless Chromium: the any-time chart grows series by series with a progress bar and a Cancel button, and the
summary table shows what `workbench place` gives for the same methods, seed and budget."""

from __future__ import annotations

from pathlib import Path

import workbench as wb
from tests.test_dashboard_browser import WAIT_MS, browser, compared, finish, pytestmark, server, server_runs, settle
from workbench import viz

__all__ = ["browser", "pytestmark", "server", "server_runs"]  # fixtures and marks shared with the other browser tests

TRACES = """el => el._fullData.map(t => ({name: t.name, fill: t.fill || null, x: Array.from(t.x), y: Array.from(t.y)}))"""


def test_anytime_chart_draws_each_series_over_the_budget_and_seeds_set_in_the_form(server, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(server + "/")
    compared(page, "text=device timelines")  # Compare's own placements first: they hold the child slots
    series = page.locator("#anytime-methods").inner_text()
    assert "local_search" in series and "doppler (pretrained) best of K samples" in series  # the defaults for FFNN on 4 devices
    page.fill("#anytime-budget", "12")
    page.fill("#anytime-seeds", "2")
    page.click("#anytime-run")
    page.wait_for_selector("#anytime-progress progress", timeout=WAIT_MS)  # a progress bar while the series run
    assert page.locator("#anytime-cancel").is_visible()
    page.wait_for_selector("text=done: 2 series drawn from 4 runs", timeout=300_000)
    settle(page)
    assert not page.locator("#anytime-cancel").is_visible()
    chart = page.locator(".js-plotly-plot").filter(has_text="best makespan against evaluations")
    traces = chart.evaluate(TRACES)
    means = {t["name"]: t for t in traces if t["fill"] != "toself"}
    bands = [t for t in traces if t["fill"] == "toself"]
    assert set(means) == {"local_search (mean of 2 seeds)", "doppler (pretrained) best of K samples (mean of 2 seeds)"}, list(means)
    assert len(bands) == 2
    for mean in means.values():
        assert max(mean["x"]) == 12  # every seed spent exactly the budget set in the form
        assert all(a >= b for a, b in zip(mean["y"], mean["y"][1:], strict=False))  # best so far never rises
    assert chart.evaluate("el => el._fullLayout.xaxis.type") == "log"
    assert "over 2 seed(s)" in page.locator(".wb-caption", has_text="Mean best makespan").inner_text()
    by_cpu = page.locator(".js-plotly-plot").filter(has_text="best makespan against CPU seconds")  # the same runs, by CPU time
    assert by_cpu.evaluate("el => el._fullLayout.xaxis.title.text") == "CPU seconds (log scale)"
    cpu_means = {t["name"]: t for t in by_cpu.evaluate(TRACES) if t["fill"] != "toself"}
    assert set(cpu_means) == set(means) and all(0 < min(t["x"]) <= max(t["x"]) for t in cpu_means.values())
    finish(page, errors, tmp_path / "compare-anytime.png", docs=True)


def test_anytime_cancel_stops_the_runs_and_says_what_was_not_run(server, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(server + "/")
    compared(page, "text=device timelines")
    page.fill("#anytime-budget", "200000")  # local_search's 200,000 evaluations take far longer than this test waits
    page.fill("#anytime-seeds", "1")
    page.click("#anytime-run")
    page.wait_for_selector("#anytime-cancel:visible", timeout=WAIT_MS)
    page.click("#anytime-cancel")
    page.wait_for_selector("text=stopped after 0 of 1 runs: 0 series drawn; not run: local_search", timeout=WAIT_MS)
    assert "K = 200,000 samples is more than 1,000 (the server's --max-count)" in page.locator("#anytime-results").inner_text()
    assert not page.locator("#anytime-cancel").is_visible() and page.locator("#anytime-results .js-plotly-plot").count() == 0
    page.close()
    assert not errors, errors


def table_makespans(page) -> dict[str, str]:
    """The summary table's ``{method: makespan text}``."""
    rows = page.locator("#compare-summary tr").all()
    out = {}
    for row in rows[1:]:
        method = row.locator("td[data-dash-column=method]").inner_text().strip()
        out[method] = row.locator("td[data-dash-column=makespan]").inner_text().strip()
    return out


def test_compare_shows_what_workbench_place_gives_and_exports_a_png(server, browser, tmp_path):
    """The default methods (a heuristic, the fair baseline, the pretrained policy) and local_search at seed 3 with a budget of
    60, in the browser, against the CLI's own code path for the same options; then a chart downloads as PNG."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(server + "/")
    compared(page, "text=device timelines")
    page.click("#compare-methods")
    page.get_by_role("option", name="local_search", exact=False).first.click()
    page.keyboard.press("Escape")
    page.fill("#compare-seed", "3")
    page.fill("#compare-budget", "60")
    page.click("#compare-run")
    page.wait_for_selector("#compare-cancel:visible", timeout=WAIT_MS)  # Cancel while it places
    page.wait_for_selector("#compare-cancel", state="hidden", timeout=150_000)
    settle(page)
    shown = table_makespans(page)
    graph = wb.bundled_graph("ffnn")
    own = str(Path("datasets/pretrained/ffnn_192nodes/doppler.safetensors").resolve())
    expected = {
        "critical_path": wb.place(graph, "critical_path", 4, seed=3),
        "best_constructive": wb.place(graph, "best_constructive", 4, seed=3),
        "local_search": wb.place(graph, "local_search", 4, seed=3, budget=60),
        "doppler (pretrained": wb.place(graph, "doppler", 4, seed=3, checkpoint=own),
    }
    assert len(shown) == 4, shown
    for prefix, placement in expected.items():
        (label,) = [m for m in shown if m.startswith(prefix)]
        assert shown[label] == viz.format_time(placement.makespan, graph), label
    with page.expect_download(timeout=120_000) as download:
        page.locator(".wb-card", has_text="makespan per method").locator("button", has_text="PNG").click()
    assert Path(download.value.path()).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finish(page, errors, tmp_path / "compare-summary.png", docs=True)
