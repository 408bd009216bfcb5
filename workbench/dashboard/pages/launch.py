"""Launch: start a training run, a placement or a sweep as a background process; watch its progress, stop it.

The form is built from the chosen command's own argument parser, so it
follows the CLI; see :mod:`workbench.dashboard.jobs` for what may be started.
"""

from __future__ import annotations

import shlex

from dash import ALL, Input, Output, State, ctx, dcc, html, no_update

from ...datasets import PAPER_GRAPHS
from ...placers import placers as registered_placers
from ...runs import RunPaths, read_frame, try_read_json
from ..components import controls, field, message
from ..jobs import Argument, Job, LaunchError, command_arguments, launchable_commands

PATH = "/launch"
NAME = "Launch"
PAGE = "launch"
REFRESH_MS = 1000


def _graph_values(context) -> list[str]:
    names = [name for name in PAPER_GRAPHS]
    files = sorted(context.datasets_dir.glob("stg/*/*.stg"))
    return names + [f"datasets/{p.relative_to(context.datasets_dir).as_posix()}" for p in files]


def _config_values(context) -> list[str]:
    found = []
    for root_name, root in (("datasets", context.datasets_dir), ("runs", context.runs_dir)):
        for pattern in ("*.yaml", "*.yml", "*.json", "sweeps/*.yaml", "sweeps/*.yml", "sweeps/*.json"):
            found += [f"{root_name}/{p.relative_to(root).as_posix()}" for p in sorted(root.glob(pattern))]
    return found


def argument_input(context, argument: Argument):
    """The form field for one CLI argument."""
    field_id = {"type": "launch-arg", "dest": argument.dest}
    label = (argument.flag or argument.dest.upper()) + (" (required)" if argument.required else "")
    if argument.switch:
        control = dcc.Checklist(id=field_id, options=[{"label": f" {label}", "value": "on"}], value=[])
    elif argument.choices:
        control = dcc.Dropdown(id=field_id, options=list(argument.choices), value=argument.default, multi=argument.many)
    elif argument.dest in ("graph", "graphs"):
        control = dcc.Dropdown(
            id=field_id,
            options=_graph_values(context),
            value=[PAPER_GRAPHS[0]] if argument.many else PAPER_GRAPHS[0],
            multi=argument.many,
        )
    elif argument.dest == "method":
        control = dcc.Dropdown(id=field_id, options=list(registered_placers()), value=argument.default)
    elif argument.dest == "config":
        control = dcc.Dropdown(id=field_id, options=_config_values(context), placeholder="a sweep file under datasets/ or runs/")
    else:
        placeholder = (
            f"default {argument.default}"
            if argument.default is not None
            else ("run name (written under runs/)" if argument.dest == "out" else "")
        )
        control = dcc.Input(id=field_id, type="text", placeholder=placeholder, debounce=True)
    return field(label, control, note=argument.help)


def launch_form(context, command: str | None):
    if not command:
        return message("no launchable command in this workbench", "warning")
    try:
        arguments = command_arguments(command)
    except LaunchError as exc:
        return message(str(exc))
    return controls(*(argument_input(context, a) for a in arguments))


def limits_note(limits) -> str:
    """What this server allows a launched job (see ``python app.py --help``)."""
    return (
        f"This server allows at most {limits.max_devices} devices, a budget of {limits.max_budget:,} evaluations, "
        f"{limits.max_time_limit:g} s time limits and {limits.max_episodes:,} training episodes; "
        f"oracles {', '.join(limits.allow_oracles)}; engines on {', '.join(limits.allow_engine_hosts)}."
    )


def layout(context, jobs, **_query) -> html.Div:
    commands = launchable_commands()
    return html.Div(
        [
            html.H2("Launch a background job"),
            html.P(
                "Starts workbench's own command in a separate process; this page follows its progress. "
                "Files must lie under datasets/ or runs/."
            ),
            html.P(limits_note(context.limits), className="wb-note"),
            field("Command", dcc.Dropdown(id="launch-command", options=commands, value=commands[0] if commands else None, clearable=False)),
            html.Div(id="launch-form", children=launch_form(context, commands[0] if commands else None)),
            html.Button("Start", id="launch-start", className="wb-primary", style={"marginTop": "10px"}),
            html.Div(id="launch-message"),
            dcc.Interval(id="launch-tick", interval=REFRESH_MS),
            html.H3("Jobs"),
            html.Div(id="launch-jobs"),
        ]
    )


def _run_progress(job: Job) -> str | None:
    if job.out_dir is None:
        return None
    run = RunPaths(job.out_dir)
    status = try_read_json(run.meta_path).get("status") or ("?" if run.meta_path.exists() else "not started")
    episodes = len(read_frame(run.metrics_path))
    return f"run {job.out_dir.name}: {status}, {episodes:,} episodes logged (see the Training page)"


def job_view(job: Job) -> html.Div:
    fraction = job.progress()
    bar = (
        html.Progress(value=str(fraction), max="1", className="wb-progress")
        if fraction is not None
        else html.Progress(className="wb-progress")
    )
    run = _run_progress(job)
    return html.Div(
        className="wb-card",
        children=[
            html.Div([html.B(f"#{job.id} "), html.Code(shlex.join(["workbench", job.command, *job.argv]))]),
            html.Div(
                [
                    bar,
                    html.Span(f" {job.state}" + (f" · {fraction:.0%}" if fraction is not None else ""), className="wb-note"),
                    html.Button(
                        "Stop",
                        id={"type": "stop-job", "index": job.id},
                        className="wb-small",
                        disabled=job.returncode is not None,
                        style={"marginLeft": "12px"},
                    ),
                ]
            ),  # fmt: skip
            html.Div(run, className="wb-note") if run else None,
            html.Pre(job.log_tail(1500)[-1500:] or "(no output yet)", className="wb-log"),
        ],
    )


def register_callbacks(app, context, jobs) -> None:
    @app.callback(Output("launch-form", "children"), Input("launch-command", "value"), prevent_initial_call=True)
    def form(command):
        return launch_form(context, command)

    @app.callback(
        Output("launch-message", "children"),
        Input("launch-start", "n_clicks"),
        State("launch-command", "value"),
        State({"type": "launch-arg", "dest": ALL}, "value"),
        prevent_initial_call=True,
    )
    def start(_clicks, command, _values):
        values = {item["id"]["dest"]: item.get("value") for item in ctx.states_list[1]}
        try:
            job = jobs.start(command, values)
        except ValueError as exc:  # LaunchError, or a value no check foresaw: a message either way
            return message(str(exc))
        except OSError as exc:
            return message(f"could not start the process: {exc}")
        return message(f"started job #{job.id}", "info")

    @app.callback(Output("launch-jobs", "children"), Input("launch-tick", "n_intervals"), Input("launch-message", "children"))
    def show(_tick, _message):
        listed = jobs.jobs()
        return [job_view(job) for job in listed] if listed else html.P("No job started from this dashboard yet.", className="wb-note")

    @app.callback(
        Output("launch-message", "children", allow_duplicate=True),
        Input({"type": "stop-job", "index": ALL}, "n_clicks"),
        prevent_initial_call=True,
    )
    def stop(clicks):
        trigger = ctx.triggered_id
        if not trigger or not any(clicks):
            return no_update
        jobs.stop(int(trigger["index"]))
        return message(f"stopping job #{trigger['index']}", "info")
