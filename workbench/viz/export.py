"""Figures to files: PNG through Kaleido (Debian's chromium), HTML when PNG export is impossible."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

__all__ = ["to_png", "write_figure", "static_fallbacks"]


def _browser() -> None:
    """Point Kaleido (>= 1 looks at ``BROWSER_PATH``) at Debian's chromium unless another browser is set."""
    if not os.environ.get("BROWSER_PATH"):
        found = shutil.which("chromium") or shutil.which("chromium-browser")
        if found:
            os.environ["BROWSER_PATH"] = found


def to_png(figure: go.Figure | Mapping[str, Any], width: int = 1200, scale: float = 2.0) -> bytes:
    """The figure as PNG bytes (its title names what it shows: graph, devices, makespan)."""
    import plotly.io as pio

    _browser()
    fig = go.Figure(figure)
    height = fig.layout.height or 500
    return pio.to_image(fig, format="png", width=width, height=height, scale=scale)


def write_figure(figure: Any, path: str | Path, width: int | None = None, height: int | None = None) -> Path:
    """Write ``figure`` to ``path`` as PNG; if Kaleido or chromium fails, as ``.html``. Atomically either way."""
    from ..fileio import atomic_path

    path = Path(path)
    _browser()
    png = path.with_suffix(".png")
    try:
        with atomic_path(png) as tmp:
            figure.write_image(str(tmp), format="png", width=width, height=height)
        return png
    except Exception:  # Kaleido/chromium missing or broken: interactive HTML instead
        html = path.with_suffix(".html")
        with atomic_path(html) as tmp:
            figure.write_html(str(tmp), include_plotlyjs="cdn")
        return html


def static_fallbacks(width: int = 1000) -> bool:
    """Show every plotly figure as its interactive view plus a PNG, so an executed notebook renders on GitHub and nbviewer.

    JupyterLab draws the interactive view; viewers that run no JavaScript
    show the PNG. Starts one Kaleido chromium for the session (the first
    figure takes seconds, the next ones under a second). Returns ``False``
    and changes nothing when Kaleido or chromium is unavailable.
    """
    import plotly.io as pio

    _browser()
    try:
        import kaleido

        kaleido.start_sync_server(silence_warnings=True)
    except Exception:  # no Kaleido or no browser: interactive figures only
        return False
    pio.renderers["png"].width = width
    pio.renderers.default = "plotly_mimetype+png"
    return True
