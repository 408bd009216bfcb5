"""The Dash dashboard: ``create_app()`` builds it, ``python app.py`` serves it.

Pages (one module each in :mod:`workbench.dashboard.pages`): Compare (the
landing page), Graph, Training, Launch, and Measured vs simulated. The plain
figure builders in :mod:`workbench.dashboard.figures` are also meant for
notebooks.
"""

from .factory import create_app

__all__ = ["create_app"]
