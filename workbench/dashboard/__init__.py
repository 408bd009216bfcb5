"""The Dash dashboard: ``create_app()`` builds it, ``python app.py`` serves it.

Pages (one module each in :mod:`workbench.dashboard.pages`): Compare (the
landing page), Graph, Training, Launch, and Measured vs simulated. The
figures come from :mod:`workbench.viz`, which notebooks use without Dash.
``create_app`` is imported on first use, so importing this package does not
import Dash; the pages read runs through :mod:`workbench.runs`.
"""

from ..imports import lazy_exports

__all__ = ["create_app"]
__getattr__, __dir__ = lazy_exports(__name__, {"create_app": ".factory"}, needs="the dashboard extra (pip install -e '.[dashboard]')")
