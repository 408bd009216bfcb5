"""The app factory: one Dash app with Dash Pages, built per call so tests can make their own."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import dash
from dash import dcc, html

from .components import register_download_callback
from .context import DashboardContext
from .jobs import JobManager
from .limits import Limits
from .pages import PAGES
from .work import RUNNER

__all__ = ["create_app"]

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; background: #f6f7f9; color: #222; }
.wb-nav { display: flex; gap: 18px; align-items: baseline; padding: 10px 20px; background: #1f2a44; }
.wb-nav a { color: #dfe6f3; text-decoration: none; font-size: 15px; }
.wb-nav a:hover { color: white; text-decoration: underline; }
.wb-brand { color: white; font-weight: 600; font-size: 17px; margin-right: 12px; }
.wb-page { padding: 12px 20px 40px; }
.wb-controls { display: flex; flex-wrap: wrap; gap: 14px; align-items: flex-end;
               background: white; padding: 12px; border-radius: 6px; border: 1px solid #e1e4e8; }
.wb-field { display: flex; flex-direction: column; gap: 4px; font-size: 13px; min-width: 120px; }
.wb-field label { font-weight: 600; color: #444; }
.wb-wide { min-width: 340px; flex: 1; }
.wb-card { background: white; border: 1px solid #e1e4e8; border-radius: 6px; padding: 8px; margin-top: 12px; }
.wb-caption { font-weight: 600; margin: 2px 4px 0; }
.wb-downloads { display: flex; gap: 6px; align-items: center; padding: 0 4px; }
.wb-small { font-size: 12px; padding: 2px 10px; cursor: pointer; }
.wb-note { font-size: 12px; color: #666; }
.wb-message { padding: 8px 12px; border-radius: 4px; margin: 8px 0; font-size: 14px; }
.wb-error { background: #fdecea; border: 1px solid #f5c2c0; color: #8a1c17; }
.wb-warning { background: #fff6e0; border: 1px solid #f3d48b; color: #6b4e00; }
.wb-info { background: #e8f1fb; border: 1px solid #bcd4ef; color: #1d3f66; }
.wb-grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(560px, 1fr)); gap: 12px; }
.wb-table { border-collapse: collapse; font-size: 13px; background: white; }
.wb-table td, .wb-table th { border: 1px solid #e1e4e8; padding: 3px 8px; text-align: left; }
.wb-upload { border: 1px dashed #999; border-radius: 4px; padding: 8px; text-align: center;
             font-size: 13px; cursor: pointer; background: #fafafa; }
.wb-progress { width: 260px; height: 14px; }
.wb-log { background: #111; color: #ddd; font-size: 12px; padding: 6px; max-height: 160px; overflow: auto; white-space: pre-wrap; }
button.wb-primary { background: #1f6feb; color: white; border: none; border-radius: 4px;
                    padding: 7px 16px; font-size: 14px; cursor: pointer; }
"""

INDEX = (
    """<!DOCTYPE html>
<html>
<head>{%metas%}<title>{%title%}</title>{%favicon%}{%css%}<style>"""
    + STYLE
    + """</style></head>
<body>{%app_entry%}<footer>{%config%}{%scripts%}{%renderer%}</footer></body>
</html>"""
)


def create_app(
    runs_dir: str | os.PathLike | None = None,
    datasets_dir: str | os.PathLike | None = None,
    limits: Limits | None = None,
    bound_host: str | None = None,
) -> dash.Dash:
    """Build the dashboard.

    Args:
        runs_dir: training runs folder (default ``$WORKBENCH_RUNS`` or ``runs/``).
        datasets_dir: datasets folder (default the bundled ``datasets/``).
        limits: caps and allow-lists of requests (default ``Limits.from_env()``).
        bound_host: the address the server binds; the Host header may name it
            (besides localhost and ``limits.allow_hosts``), any other Host is
            answered with 400 (DNS rebinding).

    The page registry of Dash Pages is process-wide: the pages of the most
    recently built app are the ones served. Jobs started from the app and its
    upload folder end with the process (:meth:`JobManager.shutdown` at exit).
    """
    limits = limits if limits is not None else Limits.from_env()
    context = DashboardContext.create(runs_dir, datasets_dir, limits)
    jobs = JobManager(context)  # ends its jobs at exit
    app = dash.Dash(
        __name__,
        use_pages=True,
        pages_folder="",
        assets_folder=str(Path(__file__).parent / "no-assets"),
        suppress_callback_exceptions=True,
        title="Doppler workbench",
        index_string=INDEX,
        on_error=_refused,
    )
    app.server.config["MAX_CONTENT_LENGTH"] = 64 * 1024 * 1024
    _check_host_header(app.server, limits, bound_host)
    for order, page in enumerate(PAGES):
        dash.register_page(
            page.__name__,
            path=page.PATH,
            name=page.NAME,
            title=f"{page.NAME} · Doppler workbench",
            order=order,
            layout=_bind(page.layout, context, jobs),
        )
        page.register_callbacks(app, context, jobs)
    register_download_callback(app, context)
    app.layout = html.Div(
        [
            html.Nav(
                className="wb-nav",
                children=[html.Span("Doppler workbench", className="wb-brand")] + [dcc.Link(page.NAME, href=page.PATH) for page in PAGES],
            ),
            dcc.Store(id="selected-op", data=None),
            html.Div(id=SERVER_MESSAGE, className="wb-page"),
            html.Div(dash.page_container, className="wb-page"),
        ]
    )
    app.workbench_context = context
    threading.Thread(target=RUNNER.warm, name="warm-fork-server", daemon=True).start()  # the first Compare need not wait for it
    app.workbench_jobs = jobs
    return app


SERVER_MESSAGE = "server-message"
"""Where a request that no page check foresaw is answered (:func:`_refused`)."""


def _refused(error: Exception) -> None:
    """Dash's last resort for a callback that raised: the error as a message at the top of the page, the callback's
    outputs unchanged, never an HTTP 500 (the pages answer what they foresee themselves)."""
    from .components import message

    logging.getLogger(__name__).warning("a dashboard request was refused: %s: %s", type(error).__name__, error)
    dash.set_props(SERVER_MESSAGE, {"children": message(f"request refused: {error}")})


def _check_host_header(server, limits: Limits, bound_host: str | None) -> None:
    """Answer 400 to a request whose Host header names another site: a page there cannot reach this server by DNS rebinding."""
    import flask

    @server.before_request
    def refuse_foreign_host():
        if not limits.host_allowed(flask.request.headers.getlist("Host"), bound_host):
            return flask.Response(
                "400 Bad Request: this dashboard does not answer to that Host header (see --allow-hosts)\n",
                status=400,
                mimetype="text/plain",
            )
        return None


def _bind(layout, context: DashboardContext, jobs: JobManager):
    def page_layout(**query):
        return layout(context, jobs, **query)

    return page_layout
