"""Compare in headless Chromium under a CPU-burning load: the placements stream in, each method's card drawn as soon as it
is placed under a progress line, before the last method has finished."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.test_dashboard_anytime import busy_cpus
from tests.test_dashboard_anytime_browser import table_makespans
from tests.test_dashboard_browser import COMPARED, WAIT_MS, browser, compared, finish, pytestmark, server, server_runs, settle, visit

__all__ = ["browser", "busy_cpus", "pytestmark", "server", "server_runs"]  # fixtures and marks shared with the other tests

DRAWN = """() => ({
    progress: document.querySelector('#compare-progress').innerText,
    cards: [...document.querySelectorAll('.gtitle')].filter(t => t.textContent.includes('device timelines')).length,
})"""
"""The progress line and the number of Gantt cards drawn, read at one instant."""


def test_compare_draws_each_method_as_it_is_placed_under_load(server, browser, busy_cpus, tmp_path):
    """The default methods (critical_path, best_constructive, the pretrained doppler) and local_search, at a seed not placed
    yet, beside busy processes twice the cores: a card appears with "placed k of 4 methods; running …" while the rest still run."""
    page, errors = visit(browser, server + "/", COMPARED)
    page.click("#compare-methods")
    page.get_by_role("option", name="local_search", exact=False).first.click()
    page.keyboard.press("Escape")
    page.fill("#compare-seed", "11")  # nothing cached for this seed: every method is placed again
    settle(page, 0.2)
    began = time.monotonic()
    page.click("#compare-run")
    page.wait_for_selector("#compare-progress >> text=/placed [1-3] of 4 methods; running /", timeout=WAIT_MS)
    seen = page.evaluate(DRAWN)
    first = time.monotonic() - began
    placed = int(seen["progress"].split("placed ")[1].split(" of")[0])
    assert "running" in seen["progress"] and seen["cards"] == placed < 4, seen  # drawn before the last method finished
    assert page.locator("#compare-cancel").is_visible()
    screenshot = tmp_path / "compare-stream.png"
    page.screenshot(path=str(screenshot), full_page=True)
    if os.environ.get("WORKBENCH_SCREENSHOTS"):
        page.screenshot(path=str(Path(os.environ["WORKBENCH_SCREENSHOTS"]) / screenshot.name), full_page=True)
    compared(page, "text=device timelines")
    whole = time.monotonic() - began
    assert "done: placed 4 of 4 methods" in page.locator("#compare-progress").inner_text()
    assert page.evaluate(DRAWN)["cards"] == 4 and len(table_makespans(page)) == 4
    assert not page.locator("#compare-cancel").is_visible()
    assert all(burner.poll() is None for burner in busy_cpus)  # the load lasted
    print(f"\nafter {first:.1f} s: {seen['progress']!r} with {seen['cards']} card(s); all 4 drawn after {whole:.1f} s")
    finish(page, errors, tmp_path / "compare-stream-done.png")


def test_cancel_in_the_browser_keeps_the_placed_cards_and_names_the_stopped_method(server, browser, tmp_path):
    """local_search with 200,000 evaluations last: Cancel while it runs kills it, the three placed cards stay."""
    page, errors = visit(browser, server + "/", COMPARED)
    page.click("#compare-methods")
    page.get_by_role("option", name="local_search", exact=False).first.click()
    page.keyboard.press("Escape")
    page.fill("#compare-budget", "200000")
    settle(page, 0.2)
    page.click("#compare-run")
    page.wait_for_selector("#compare-progress >> text=/placed 3 of 4 methods; running local_search/", timeout=WAIT_MS)
    page.click("#compare-cancel")
    page.wait_for_selector("#compare-progress >> text=cancelled: placed 3 of 4 methods; stopped: local_search", timeout=WAIT_MS)
    settle(page)
    assert page.evaluate(DRAWN)["cards"] == 3 and not page.locator("#compare-cancel").is_visible()
    assert "local_search did not finish: cancelled from the page" in page.locator("#compare-results").inner_text()
    assert len(table_makespans(page)) == 4  # the stopped method keeps its row, saying so
    finish(page, errors, tmp_path / "compare-stream-cancelled.png")
