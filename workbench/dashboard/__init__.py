"""The Dash dashboard: ``create_app()`` builds it, ``python app.py`` serves it.

Pages (one module each in :mod:`workbench.dashboard.pages`): Compare (the
landing page), Graph, Training, Launch, and Measured vs simulated. The
figures come from :mod:`workbench.viz`, which notebooks use without Dash.
"""

from .factory import create_app

__all__ = ["create_app"]
