"""``workbench bench dashboard``: how fast the dashboard's charts build and draw as graphs grow.

For random layered DAGs of growing size: seconds to build each figure in
Python, its JSON size (what the browser receives), and, when Playwright and
Debian's chromium are present, the browser's time to draw it and to redraw
after a zoom (software rendering, ``--disable-gpu``).
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DRAW = """async (text) => { const f = JSON.parse(text); const t0 = performance.now();
  await Plotly.newPlot('chart', f.data, f.layout); const t1 = performance.now();
  await Plotly.relayout('chart', {'xaxis.range': [0, 10]}); const t2 = performance.now();
  Plotly.purge('chart'); return [t1 - t0, t2 - t1]; }"""


def random_dag(ops: int, seed: int = 0):
    """Each op depends on up to two of the 50 ops before it; uniform costs."""
    from ..graph import DataflowGraph

    rng = np.random.default_rng(seed)
    src, dst = [], []
    for v in range(1, ops):
        for back in rng.choice(min(v, 50), size=min(v, 2), replace=False):
            src.append(v - 1 - int(back))
            dst.append(v)
    return DataflowGraph(
        compute=rng.uniform(1, 10, ops), src=src, dst=dst, comm=rng.uniform(0, 5, len(src)), metadata={"name": f"random{ops}"}
    )


def _browser():
    if not os.path.exists(CHROMIUM):
        return None, None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None, None
    manager = sync_playwright().start()
    browser = manager.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    page = browser.new_page()
    import plotly

    page.set_content("<div id=chart></div>")
    page.add_script_tag(path=os.path.join(os.path.dirname(plotly.__file__), "package_data", "plotly.min.js"))
    page.evaluate(DRAW, '{"data": [{"y": [1, 2]}], "layout": {}}')  # warm up plotly.js
    return manager, page


def run(quick: bool = False, devices: int = 8) -> dict[str, Any]:
    from .. import viz as figures
    from ..sim import simulate

    sizes = (200, 1000) if quick else (200, 1000, 5000)
    manager, page = _browser()
    rows = []
    try:
        for ops in sizes:
            graph = random_dag(ops)
            assignment = np.arange(ops) % devices
            trace = simulate(graph, assignment, devices).trace
            builders = {
                "gantt": lambda graph=graph, trace=trace: figures.gantt_figure(graph, trace, devices=devices),
                "heatmap": lambda graph=graph, assignment=assignment: figures.placement_heatmap(graph, assignment, devices),
                "graph": lambda graph=graph: figures.graph_figure(graph),
            }
            for name, build in builders.items():
                began = time.perf_counter()
                figure = build()
                seconds = time.perf_counter() - began
                text = figure.to_json()
                draw_ms, zoom_ms = page.evaluate(DRAW, text) if page is not None else (None, None)
                rows.append(
                    {"ops": ops, "figure": name, "build_s": seconds, "json_mb": len(text) / 1e6, "draw_ms": draw_ms, "zoom_ms": zoom_ms}
                )
    finally:
        if manager is not None:
            manager.stop()

    def ms(value):
        return "–" if value is None else f"{value:,.0f}"

    header = "| ops | figure | build s | JSON MB | browser draw ms | zoom redraw ms |\n|---|---|---|---|---|---|\n"
    lines = [
        f"| {r['ops']:,} | {r['figure']} | {r['build_s']:.2f} | {r['json_mb']:.2f} | {ms(r['draw_ms'])} | {ms(r['zoom_ms'])} |"
        for r in rows
    ]
    return {"benchmark": "dashboard", "devices": devices, "rows": rows, "markdown": header + "\n".join(lines)}
