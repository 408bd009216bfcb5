"""The compare panel in a real JupyterLab (headless Chromium): it draws, follows its controls, and draws again after
the page is reopened and after the kernel restarts, with no widget error in the browser console.

Uses Debian's chromium through Playwright (never ``playwright install``); the screenshot goes to the test's tmp folder.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from tests.test_dashboard_browser import ARGS, CHROMIUM, free_port

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium at /usr/bin/chromium"),
]

CHECKOUT = Path(__file__).resolve().parent.parent
PANEL = (
    "import workbench as wb\n"
    "from workbench.notebook import compare_panel\n"
    "compare_panel([wb.bundled_graph('chain_mm_112nodes')], devices=(4, 8), methods=['critical_path', 'heft', 'round_robin', 'etf'])"
)


@pytest.fixture()
def lab(tmp_path):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(PANEL)]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, tmp_path / "panel.ipynb")
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(CHECKOUT), os.environ.get("PYTHONPATH")])), DGLBACKEND="pytorch")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", f"--IdentityProvider.token={token}"]
        + [f"--ServerApp.root_dir={tmp_path}", "--ServerApp.open_browser=False"]
        + (["--allow-root"] if os.geteuid() == 0 else []),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    yield f"http://127.0.0.1:{port}/lab/tree/panel.ipynb?token={token}"
    server.terminate()
    server.wait(timeout=30)


def _charts(page, devices: int, timeout: float = 120) -> None:
    """Wait until the panel shows its two plotly charts and the Gantt charts have ``devices`` rows."""
    page.wait_for_function(
        """(devices) => {
            const plots = document.querySelectorAll('.jp-OutputArea-output .js-plotly-plot');
            if (plots.length !== 2) return false;
            const ticks = [...plots[1].querySelectorAll('.ytick text')].map(t => t.textContent);
            return ticks.some(t => t.startsWith(`dev ${devices - 1}`)) && !ticks.some(t => t.startsWith(`dev ${devices}`));
        }""",
        arg=devices,
        timeout=timeout * 1000,
    )


def _idle(page) -> None:
    """Wait until the status bar says the kernel is idle."""
    page.wait_for_function("() => document.querySelector('#jp-main-statusbar')?.innerText.includes('| Idle')", timeout=120_000)


def _run_cell(page) -> None:
    page.locator(".jp-Cell .cm-content").first.click()
    page.keyboard.press("Shift+Enter")


def test_the_panel_draws_and_redraws_in_jupyterlab(lab, tmp_path):
    from playwright.sync_api import sync_playwright

    console: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1800})
        page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
        for attempt in range(120):  # the server takes a few seconds to listen
            try:
                page.goto(lab, timeout=60_000)
                break
            except Exception:
                if attempt == 119:
                    raise
                time.sleep(1)
        page.wait_for_selector(".jp-Notebook .jp-Cell .cm-content", timeout=120_000)
        _idle(page)
        _run_cell(page)
        _charts(page, 4)
        page.get_by_role("button", name="8", exact=True).click()
        _charts(page, 8)  # the charts follow the device count, not only the table
        page.screenshot(path=str(tmp_path / "panel-8-devices.png"), full_page=True)

        page.keyboard.press("Control+s")
        page.wait_for_function("() => !document.querySelector('.jp-Document .jp-mod-dirty, .lm-TabBar-tab.jp-mod-dirty')", timeout=60_000)
        page.reload()  # saved and reopened, the kernel still running: the widgets come back from the kernel
        _charts(page, 8)
        page.get_by_role("button", name="4", exact=True).click()
        _charts(page, 4)

        page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").click()  # restart the kernel
        page.locator(".lm-Menu-itemLabel", has_text="Restart Kernel…").first.click()
        page.locator(".jp-Dialog-button.jp-mod-accept").click()
        _idle(page)
        _run_cell(page)
        _charts(page, 4)
        page.get_by_role("button", name="8", exact=True).click()
        _charts(page, 8)
        browser.close()
    failures = [line for line in console if "Failed to initialize" in line or "Error displaying widget" in line or "anywidget" in line]
    assert not failures, failures
