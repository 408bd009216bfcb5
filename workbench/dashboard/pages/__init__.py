"""The dashboard's pages, one module each, in navigation order.

Each module has ``PATH``, ``NAME``, ``layout(context, jobs, **query)`` and
``register_callbacks(app, context, jobs)``; the app factory registers them
with Dash Pages.
"""

from . import compare, graph, launch, measured, training

PAGES = (compare, graph, training, launch, measured)
