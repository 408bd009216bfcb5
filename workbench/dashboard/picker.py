"""The graph chooser shared by pages: a bundled graph, an uploaded file, or a generated graph.

``graph_picker(prefix, context)`` lays it out; ``register_graph_picker(app,
context, prefix)`` keeps the store ``<prefix>-graph-key`` holding the chosen
graph's key (see :mod:`workbench.dashboard.sources`) and shows what is wrong
with a bad upload or generator spec.
"""

from __future__ import annotations

import json
from typing import Any

from dash import Input, Output, State, dcc, html, no_update

from .components import message
from .context import DashboardContext
from .sources import (
    MAX_UPLOAD_BYTES,
    UploadError,
    generator_defaults,
    generator_kinds,
    graph_choices,
    graph_label,
    load_graph_key,
    save_upload,
)

__all__ = ["graph_picker", "register_graph_picker", "resolve_graph_key", "DEFAULT_GRAPH"]

DEFAULT_GRAPH = "bundled:doppler-paper/ffnn_192nodes.txt"


def graph_picker(prefix: str, context: DashboardContext, default: str = DEFAULT_GRAPH) -> html.Div:
    sources = [
        {"label": "bundled", "value": "bundled"},
        {"label": "uploaded", "value": "uploaded"},
        {"label": "generated", "value": "generated"},
    ]
    choices = graph_choices(context)
    values = {o["value"] for o in choices}
    return html.Div(
        className="wb-field wb-wide",
        children=[
            html.Label("Graph"),
            dcc.RadioItems(
                id=f"{prefix}-source", options=sources, value="bundled", inline=True, inputStyle={"marginRight": "4px", "marginLeft": "8px"}
            ),
            html.Div(
                id=f"{prefix}-bundled-box",
                children=dcc.Dropdown(
                    id=f"{prefix}-bundled",
                    options=choices,
                    value=default if default in values else (choices[0]["value"] if choices else None),
                    clearable=False,
                ),
            ),
            dcc.Upload(
                id=f"{prefix}-upload",
                className="wb-upload",
                max_size=MAX_UPLOAD_BYTES,
                children=html.Div(f"Drop or click to upload a graph (.txt, .stg, .json; at most {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB)"),
            ),
            html.Div(
                id=f"{prefix}-generated-box",
                style={"display": "none"},
                children=[
                    dcc.Dropdown(id=f"{prefix}-gen-kind", options=generator_kinds(), placeholder="generator family"),
                    dcc.Textarea(
                        id=f"{prefix}-gen-params",
                        placeholder="parameters as JSON",
                        style={"width": "100%", "height": "70px", "fontFamily": "monospace"},
                    ),
                    html.Button("Generate", id=f"{prefix}-gen-apply", className="wb-small"),
                ],
            ),
            dcc.Store(id=f"{prefix}-upload-key"),
            dcc.Store(id=f"{prefix}-graph-key"),
            html.Div(id=f"{prefix}-graph-message"),
        ],
    )


def resolve_graph_key(
    context: DashboardContext, source: str, bundled: str | None, upload_key: str | None, kind: str | None, params: str | None
) -> tuple[str | None, str | None]:
    """``(graph key, error)`` for the picker's fields; the key's graph has been loaded once."""
    if source == "uploaded":
        if not upload_key:
            return None, "upload a graph file"
        key = upload_key
    elif source == "generated":
        if not kind:
            return None, "choose a generator family, edit its parameters, then press Generate"
        try:
            parsed = json.loads(params) if params else {}
        except json.JSONDecodeError as exc:
            return None, f"generator parameters are not valid JSON: {exc.msg}"
        key = "generated:" + json.dumps({"kind": kind, "params": parsed}, sort_keys=True)
    else:
        if not bundled:
            return None, "choose a graph"
        key = bundled
    try:
        load_graph_key(context, key)
    except Exception as exc:  # any loader/generator failure is shown to the user, not raised
        return None, f"cannot load the graph: {exc}"
    return key, None


def chosen_message(context: DashboardContext, key: str) -> Any:
    """What replaces the picker's last hint ("choose a generator family…") once a generated graph is chosen: its size
    (``no_update`` for a file: an upload's own message stays)."""
    if not key.startswith("generated:"):
        return no_update
    graph = load_graph_key(context, key)
    return message(f"{graph_label(key)}: {graph.num_nodes:,} ops, {graph.num_edges:,} edges", "info")


def register_graph_picker(app, context: DashboardContext, prefix: str) -> None:
    @app.callback(
        Output(f"{prefix}-upload-key", "data"),
        Output(f"{prefix}-source", "value"),
        Output(f"{prefix}-graph-message", "children", allow_duplicate=True),
        Input(f"{prefix}-upload", "contents"),
        State(f"{prefix}-upload", "filename"),
        prevent_initial_call=True,
    )
    def uploaded(contents, filename):
        filename = filename if isinstance(filename, str) and filename else "upload"
        try:
            key = save_upload(context, filename, contents)
        except (UploadError, ValueError, RuntimeError) as exc:  # RuntimeError: the child was stopped (Cancelled) or failed
            return no_update, no_update, message(str(exc))
        return key, "uploaded", message(f"uploaded {filename}", "info")

    @app.callback(Output(f"{prefix}-bundled-box", "style"), Output(f"{prefix}-generated-box", "style"), Input(f"{prefix}-source", "value"))
    def show_source(source):
        return {"display": "block" if source == "bundled" else "none"}, {"display": "block" if source == "generated" else "none"}

    @app.callback(Output(f"{prefix}-gen-params", "value"), Input(f"{prefix}-gen-kind", "value"), prevent_initial_call=True)
    def defaults(kind):
        return json.dumps(generator_defaults(kind), indent=1)

    @app.callback(
        Output(f"{prefix}-graph-key", "data"),
        Output(f"{prefix}-graph-message", "children"),
        Input(f"{prefix}-source", "value"),
        Input(f"{prefix}-bundled", "value"),
        Input(f"{prefix}-upload-key", "data"),
        Input(f"{prefix}-gen-apply", "n_clicks"),
        State(f"{prefix}-gen-kind", "value"),
        State(f"{prefix}-gen-params", "value"),
    )
    def choose(source, bundled, upload_key, _generate, kind, params):
        key, error = resolve_graph_key(context, source, bundled, upload_key, kind, params)
        if error:
            return None, message(error, "warning" if error.startswith(("upload a graph", "choose a")) else "error")
        return key, chosen_message(context, key)
