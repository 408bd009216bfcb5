"""Write a plotly figure as PNG (kaleido with Debian's Chromium), or as HTML when PNG export fails; atomically either way."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from ..fileio import atomic_path

__all__ = ["write_figure"]


def write_figure(figure: Any, path: str | Path) -> Path:
    """Write ``figure`` to ``path`` as PNG; if kaleido or Chromium fails, to the same name with ``.html``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not os.environ.get("BROWSER_PATH"):  # kaleido >= 1 looks here for a Chrome-like browser
        found = shutil.which("chromium") or shutil.which("chromium-browser")
        if found:
            os.environ["BROWSER_PATH"] = found
    png = path.with_suffix(".png")
    try:
        with atomic_path(png) as tmp:
            figure.write_image(str(tmp), format="png")
        return png
    except Exception:  # noqa: BLE001 - kaleido/Chromium missing or broken: interactive HTML instead
        html = path.with_suffix(".html")
        with atomic_path(html) as tmp:
            figure.write_html(str(tmp), include_plotlyjs="cdn")
        return html
