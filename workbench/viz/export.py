"""Figures to files: PNG through Kaleido (Debian's chromium), HTML when PNG export is impossible."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import plotly.graph_objects as go

__all__ = ["to_png", "write_figure", "static_fallbacks", "static_fallbacks_on", "figure_bundle"]

T = TypeVar("T")


def _browser() -> None:
    """Point Kaleido (>= 1 looks at ``BROWSER_PATH``) at Debian's chromium unless another browser is set."""
    if not os.environ.get("BROWSER_PATH"):
        found = shutil.which("chromium") or shutil.which("chromium-browser")
        if found:
            os.environ["BROWSER_PATH"] = found


KALEIDO_TRIES = 3
"""Tries per image: Kaleido reloads its page after every image, and on a busy machine a render can find the page's script
not loaded yet (``kaleido_scopes is not defined``, a ``RuntimeError``); the next try finds it loaded."""


def _tried(render: Callable[[], T]) -> T:
    """``render()``, tried up to :data:`KALEIDO_TRIES` times while it raises ``RuntimeError``; the last error is raised."""
    for _ in range(KALEIDO_TRIES - 1):
        try:
            return render()
        except RuntimeError:
            pass
    return render()


def to_png(figure: go.Figure | Mapping[str, Any], width: int = 1200, scale: float = 2.0, height: int | None = None) -> bytes:
    """The figure as PNG bytes (its title names what it shows: graph, devices, makespan); ``height`` defaults to the
    figure's own, else 500."""
    import plotly.io as pio

    _browser()
    fig = go.Figure(figure)
    height = height or fig.layout.height or 500
    return _tried(lambda: pio.to_image(fig, format="png", width=width, height=height, scale=scale))


def write_figure(figure: Any, path: str | Path, width: int | None = None, height: int | None = None) -> Path:
    """Write ``figure`` to ``path`` as PNG; if Kaleido or chromium fails, as ``.html``. Atomically either way."""
    from ..fileio import atomic_path

    path = Path(path)
    _browser()
    png = path.with_suffix(".png")
    try:
        with atomic_path(png) as tmp:
            _tried(lambda: figure.write_image(str(tmp), format="png", width=width, height=height))
        return png
    except Exception:  # Kaleido/chromium missing or broken: interactive HTML instead
        html = path.with_suffix(".html")
        with atomic_path(html) as tmp:
            figure.write_html(str(tmp), include_plotlyjs="cdn")
        return html


PNG_RENDERER = "workbench_png"
"""The plotly renderer :func:`static_fallbacks` registers: plotly's PNG renderer, each image tried up to three times."""


def _png_renderer(width: int) -> Any:
    """plotly's PNG renderer, each figure tried up to :data:`KALEIDO_TRIES` times."""
    from plotly.io.base_renderers import PngRenderer

    class RetryingPng(PngRenderer):
        def to_mimebundle(self, fig_dict: Any) -> Any:
            return _tried(lambda: super(RetryingPng, self).to_mimebundle(fig_dict))

    return RetryingPng(width=width)


def static_fallbacks(width: int = 1000) -> bool:
    """Show every plotly figure as its interactive view plus a PNG, so an executed notebook renders on GitHub and nbviewer.

    JupyterLab draws the interactive view; viewers that run no JavaScript
    show the PNG. Starts one Kaleido chromium for the session and draws a
    first tiny figure on it (the slow start), so later figures take under a
    second. Plotly then passes no per-image options (a running server ignores
    them, with a warning under every figure). Returns ``False`` and changes
    nothing when Kaleido or chromium is unavailable.
    """
    import plotly.io as pio

    _browser()
    renderer = _png_renderer(width)
    headers = pio.defaults.headers
    try:
        import kaleido

        options = {"plotlyjs": pio.defaults.plotlyjs, "mathjax": pio.defaults.mathjax}
        kaleido.start_sync_server(**{k: v for k, v in options.items() if v}, silence_warnings=True)
        pio.defaults.headers = {}
        renderer.to_mimebundle(go.Figure().to_dict())
    except Exception:  # no Kaleido or no browser: interactive figures only
        pio.defaults.headers = headers
        return False
    pio.renderers[PNG_RENDERER] = renderer
    pio.renderers.default = f"plotly_mimetype+{PNG_RENDERER}"
    return True


def static_fallbacks_on() -> bool:
    """Whether :func:`static_fallbacks` is in effect: figures are shown with a PNG beside them."""
    import plotly.io as pio

    return PNG_RENDERER in str(pio.renderers.default).split("+")


def figure_bundle(figure: go.Figure) -> dict[str, Any]:
    """What a notebook shows for ``figure``: plotly's JSON (JupyterLab and Notebook 7 draw it) and, with
    :func:`static_fallbacks` on, a PNG for viewers without JavaScript."""
    import plotly.io as pio

    data = figure.to_dict()
    bundle = dict(pio.renderers["plotly_mimetype"].to_mimebundle(data))
    if static_fallbacks_on():
        bundle.update(pio.renderers[PNG_RENDERER].to_mimebundle(data))
    return bundle
