"""Background runs of workbench's own CLI commands, started from the Launch page.

Only ``[sys.executable, "-m", "workbench", COMMAND, ...]`` is ever started
(no shell), for a command in :data:`LAUNCHABLE` that this installation has,
with arguments that the command's own parser accepted first. Every path
argument must lie in the datasets or runs folder. Output goes to a log file
that the page reads for progress (tqdm's ``NN%|``); the server never waits on
a job.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .context import DashboardContext, PathError, resolve_inside

__all__ = ["LAUNCHABLE", "MAX_RUNNING", "Job", "JobManager", "LaunchError", "launchable_commands", "command_arguments", "validate_arguments"]

LAUNCHABLE = ("place", "train", "sweep", "calibrate")
"""Commands the Launch page may start, when the installed CLI has them; the first (a quick placement) is the default."""

MAX_RUNNING = 2
"""At most this many jobs run at once (they compete for the same cores)."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,79}")
_PERCENT = re.compile(r"(\d{1,3})%\|")
_COUNT = re.compile(r"\|\s*(\d+)/(\d+)\s*\[")


class LaunchError(ValueError):
    """A launch request refused: unknown command, bad argument, path outside the allowed folders."""


def launchable_commands() -> list[str]:
    """The commands in :data:`LAUNCHABLE` that ``workbench.cli.COMMANDS`` lists."""
    from workbench.cli import COMMANDS

    return [name for name in LAUNCHABLE if name in COMMANDS]


def _subparser(command: str):
    from workbench.cli import build_parser

    parser = build_parser()
    for action in parser._actions:  # argparse keeps subparsers here; no public accessor exists
        choices = getattr(action, "choices", None)
        if isinstance(choices, dict) and command in choices:
            return parser, choices[command]
    raise LaunchError(f"workbench has no command {command!r}")


@dataclass(frozen=True)
class Argument:
    """One argument of a CLI command, as the Launch form shows it."""

    dest: str
    flag: str | None  # None for positionals
    help: str
    default: object
    choices: tuple[str, ...] | None
    many: bool
    switch: bool
    required: bool


def command_arguments(command: str) -> list[Argument]:
    """The arguments of ``workbench COMMAND`` read from its own parser."""
    if command not in launchable_commands():
        raise LaunchError(f"{command!r} cannot be launched; launchable: {', '.join(launchable_commands())}")
    _, sub = _subparser(command)
    out = []
    for action in sub._actions:
        if action.dest in ("help", "json") or action.dest == "==SUPPRESS==":
            continue
        flag = max(action.option_strings, key=len) if action.option_strings else None
        switch = action.nargs == 0
        out.append(
            Argument(
                dest=action.dest,
                flag=flag,
                help=action.help or "",
                default=None if action.default in (None, False) else action.default,
                choices=tuple(map(str, action.choices)) if action.choices else None,
                many=action.nargs in ("+", "*"),
                switch=switch,
                required=flag is None or bool(action.required),
            )
        )
    return out


PATH_ARGUMENTS = {"graph", "graphs", "config", "checkpoint", "assignment", "init", "from_checkpoint", "resume"}
OUTPUT_ARGUMENTS = {"out", "output", "run_dir"}


def _check_value(ctx: DashboardContext, dest: str, value: str) -> str:
    """A path-like value resolved inside datasets/ or runs/ (bundled names pass as they are)."""
    if dest in OUTPUT_ARGUMENTS:
        value = value.removeprefix("runs/")
        if not _NAME.fullmatch(value):
            raise LaunchError(f"--{dest.replace('_', '-')}: a run name is letters, digits, '_', '-', '.' (got {value!r})")
        return str(resolve_inside(ctx.runs_dir, value))
    looks_like_path = "/" in value or "\\" in value or value.startswith(".") or dest in PATH_ARGUMENTS and Path(value).suffix
    if not looks_like_path:
        return value
    for root_name, root in (("datasets", ctx.datasets_dir), ("runs", ctx.runs_dir)):
        prefix = f"{root_name}/"
        if value.startswith(prefix):
            try:
                return str(resolve_inside(root, value[len(prefix) :]))
            except PathError as exc:
                raise LaunchError(str(exc)) from None
    raise LaunchError(f"{value!r}: files must be under datasets/ or runs/ (write them as datasets/... or runs/...)")


def validate_arguments(ctx: DashboardContext, command: str, values: dict[str, object]) -> list[str]:
    """The argv after ``workbench COMMAND`` for form ``values``; checked by the command's own parser.

    Raises :class:`LaunchError` naming the first bad value.
    """
    arguments = {a.dest: a for a in command_arguments(command)}
    unknown = sorted(set(values) - set(arguments))
    if unknown:
        raise LaunchError(f"unknown argument(s) for {command}: {', '.join(unknown)}")
    positional: list[str] = []
    options: list[str] = []
    for dest, argument in arguments.items():
        raw = values.get(dest)
        if argument.switch:
            if raw:
                options.append(argument.flag or "")
            continue
        items = [str(v).strip() for v in (raw if isinstance(raw, (list, tuple)) else [raw]) if v is not None and str(v).strip()]
        if not items:
            continue
        if not argument.many and len(items) > 1:
            raise LaunchError(f"{argument.flag or dest} takes one value")
        if argument.many and len(items) == 1:
            items = items[0].split()
        for item in items:
            if item.startswith("-") and not re.fullmatch(r"-\d+(\.\d+)?", item):
                raise LaunchError(f"{argument.flag or dest}: {item!r} looks like an option, not a value")
        items = [_check_value(ctx, dest, item) for item in items]
        if argument.flag is None:
            positional.extend(items)
        else:
            options.extend([argument.flag, *items])
    argv = positional + options
    parser, _ = _subparser(command)
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args([command, *argv])
    except SystemExit:
        text = stderr.getvalue().strip().splitlines()
        raise LaunchError(text[-1] if text else f"invalid arguments for {command}") from None
    return argv


@dataclass
class Job:
    """A started command: its argv, process, log file, and where its run directory is (if any)."""

    id: int
    command: str
    argv: list[str]
    process: subprocess.Popen
    log_path: Path
    started: float
    out_dir: Path | None = None
    stopped: bool = field(default=False)

    @property
    def returncode(self) -> int | None:
        return self.process.poll()

    @property
    def state(self) -> str:
        code = self.returncode
        if code is None:
            return "stopping" if self.stopped else "running"
        if self.stopped:
            return "stopped"
        return "finished" if code == 0 else f"failed (exit {code})"

    def log_tail(self, max_bytes: int = 4000) -> str:
        """The end of the output, with tqdm's carriage-return updates collapsed to their last state."""
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                size = handle.tell()
                handle.seek(max(0, size - max_bytes))
                text = handle.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(line.split("\r")[-1] for line in text.split("\n"))

    def progress(self) -> float | None:
        """Fraction done from the last tqdm bar in the output (``None`` when there is none)."""
        text = self.log_tail()
        count = _COUNT.findall(text)
        if count:
            done, total = map(int, count[-1])
            return min(1.0, done / total) if total else None
        percent = _PERCENT.findall(text)
        return min(100, int(percent[-1])) / 100 if percent else (1.0 if self.returncode == 0 else None)


class JobManager:
    """Starts, lists and stops background jobs; thread-safe, never blocks on a job."""

    def __init__(self, ctx: DashboardContext, max_running: int = MAX_RUNNING) -> None:
        self.ctx = ctx
        self.max_running = max_running
        self.log_dir = ctx.upload_dir.parent / f"{ctx.upload_dir.name}-jobs"
        self._jobs: dict[int, Job] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def start(self, command: str, values: dict[str, object]) -> Job:
        """Validate ``values`` and start ``workbench COMMAND`` in the background."""
        argv = validate_arguments(self.ctx, command, values)
        with self._lock:
            running = sum(1 for job in self._jobs.values() if job.returncode is None)
            if running >= self.max_running:
                raise LaunchError(f"{running} jobs are already running; stop one or wait (at most {self.max_running} at once)")
            job_id = next(self._ids)
            self.log_dir.mkdir(parents=True, exist_ok=True)
            log_path = self.log_dir / f"job-{job_id}.log"
            env = {**os.environ, "PYTHONUNBUFFERED": "1", "DGLBACKEND": "pytorch", "WORKBENCH_RUNS": str(self.ctx.runs_dir)}
            with open(log_path, "wb") as log:
                process = subprocess.Popen(
                    [sys.executable, "-m", "workbench", command, *argv],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=str(Path(__file__).resolve().parents[2]),
                    env=env,
                    start_new_session=True,
                )
            out = values.get("out")
            out_dir = Path(argv[argv.index("--out") + 1]) if out and "--out" in argv else None
            job = Job(job_id, command, argv, process, log_path, time.time(), out_dir)
            self._jobs[job_id] = job
            return job

    def jobs(self) -> list[Job]:
        with self._lock:
            return sorted(self._jobs.values(), key=lambda job: -job.id)

    def stop(self, job_id: int) -> None:
        """Ask a job to stop (SIGINT, so it can save and mark its run interrupted); SIGTERM if still alive after 10 s."""
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None or job.returncode is not None:
            return
        job.stopped = True
        job.process.send_signal(signal.SIGINT)

        def escalate() -> None:
            try:
                job.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                job.process.terminate()

        threading.Thread(target=escalate, daemon=True).start()

    def stop_all(self) -> None:
        for job in self.jobs():
            self.stop(job.id)
