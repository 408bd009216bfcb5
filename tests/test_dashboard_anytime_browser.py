"""Compare's "makespan against evaluations" section in headless Chromium: a budget and seeds set in the form reach the chart."""

from __future__ import annotations

from tests.test_dashboard_browser import browser, finish, pytestmark, server, server_runs, settle

__all__ = ["browser", "pytestmark", "server", "server_runs"]  # fixtures and marks shared with the other browser tests

TRACES = """el => el._fullData.map(t => ({name: t.name, fill: t.fill || null, x: Array.from(t.x), y: Array.from(t.y)}))"""


def test_anytime_chart_draws_each_series_over_the_budget_and_seeds_set_in_the_form(server, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(server + "/")
    page.wait_for_selector("text=device timelines", timeout=150_000)  # Compare's own placements first: they hold the child slots
    settle(page)
    series = page.locator("#anytime-methods").inner_text()
    assert "local_search" in series and "doppler (pretrained) best of K samples" in series  # the defaults for FFNN on 4 devices
    page.fill("#anytime-budget", "12")
    page.fill("#anytime-seeds", "2")
    page.click("#anytime-run")
    page.wait_for_selector("text=best makespan against evaluations", timeout=150_000)
    settle(page)
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
