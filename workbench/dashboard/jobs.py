"""Background runs of workbench's own CLI commands, started from the Launch page.

Only ``[sys.executable, "-m", "workbench", COMMAND, ...]`` is ever started
(no shell), for a command in :data:`LAUNCHABLE` that this installation has,
with arguments that the command's own parser accepted first. Every file
argument must be written ``datasets/...`` or ``runs/...`` (a graph may also
be a bundled graph's name); caps and allow-lists come from the server's
:class:`~workbench.dashboard.limits.Limits` (devices, budget, time limit,
episodes, oracle factories, engine hosts), also for ``--set FIELD=VALUE``.
A job runs in its own process group, in an empty private folder (so no bare
name can reach a file), and logs to a file in a private (0700) folder that
the page reads for progress (tqdm's ``NN%|``); the server never waits on a
job, and :meth:`JobManager.shutdown` ends every job with the dashboard.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .context import CHECKOUT, DashboardContext, PathError, resolve_inside
from .limits import LimitError

__all__ = [
    "LAUNCHABLE",
    "MAX_RUNNING",
    "Job",
    "JobManager",
    "LaunchError",
    "launchable_commands",
    "command_arguments",
    "validate_arguments",
]

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
    from ..cli import COMMANDS

    return [name for name in LAUNCHABLE if name in COMMANDS]


def _subparser(command: str):
    from ..cli import build_parser

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


GRAPH_ARGUMENTS = {"graph", "graphs", "more_graphs", "eval", "eval_graphs"}
"""Arguments naming graphs: ``datasets/...``, ``runs/...`` or a bundled graph's name."""
FILE_ARGUMENTS = {"config", "checkpoint", "init_checkpoint", "assignment", "init", "from_checkpoint", "resume", "start", "start_policy"}
"""Arguments naming other files: ``datasets/...`` or ``runs/...`` only."""
POSITIONAL_NAMES = {"graph", "graphs", "config"}
OUTPUT_ARGUMENTS = {"out", "output", "run_dir", "trace"}
SET_FIELDS = {
    "graphs": "graphs",
    "init_checkpoint": "init_checkpoint",
    "eval_graphs": "eval",
    "oracle": "oracle",
    "devices": "devices",
    "episodes": "episodes",
    "search_samples": "search_samples",
    "selection_samples": "selection_samples",
    "rollouts_per_update": "rollouts_per_update",
    "threads": "threads",
}
"""``--set FIELD=VALUE`` fields checked like the option of the same meaning (tuples item by item)."""
RANDOM_FEATURES_MAX = 256
"""The most noise columns ``--set policy.random_features`` may add: the policy config's own range
(``workbench.learn.policy.POLICY_FIELDS``, not imported here: it needs torch)."""


def _is_bundled_name(value: str) -> bool:
    """True for what ``workbench.bundled_graph`` accepts: a paper graph's name or a prefix naming one graph."""
    from ..datasets import PAPER_GRAPHS

    if not re.fullmatch(r"[A-Za-z0-9_]+", value):
        return False
    return value in PAPER_GRAPHS or sum(name.startswith(value) for name in PAPER_GRAPHS) == 1


def _check_value(ctx: DashboardContext, dest: str, value: str) -> str:
    """One argument value checked against the folders, caps and allow-lists; paths come back absolute."""
    flag = dest.upper() if dest in POSITIONAL_NAMES else "--" + dest.replace("_", "-")
    if dest in OUTPUT_ARGUMENTS:
        value = value.removeprefix("runs/")
        if not _NAME.fullmatch(value):
            raise LaunchError(f"{flag}: a run name is letters, digits, '_', '-', '.' (got {value!r})")
        try:
            return str(resolve_inside(ctx.runs_dir, value))
        except PathError as exc:  # a link in runs/ pointing elsewhere
            raise LaunchError(f"{flag} {value!r}: {exc}") from None
    if dest == "method" and value not in _registered_methods():
        raise LaunchError(f"{flag} {value!r} is not a method of this workbench (see workbench place --list)")
    if dest == "set":
        return _check_setting(ctx, value)
    if dest == "option":
        spec, sep, text = value.partition("=")
        if not sep:
            raise LaunchError(f"--option {value!r}: expected KEY=VALUE")
        return f"{spec}={check_option(ctx, spec.rpartition(':')[2].strip().replace('-', '_'), text.strip())}"
    try:
        ctx.limits.check_launch_value(dest, value)
    except LimitError as exc:
        raise LaunchError(str(exc)) from None
    named_file = dest in GRAPH_ARGUMENTS or dest in FILE_ARGUMENTS
    if not named_file and not ("/" in value or "\\" in value or value.startswith((".", "~"))):
        return value
    for root_name, root in (("datasets", ctx.datasets_dir), ("runs", ctx.runs_dir)):
        prefix = f"{root_name}/"
        if value.startswith(prefix):
            try:
                return str(resolve_inside(root, value[len(prefix) :]))
            except PathError as exc:
                raise LaunchError(str(exc)) from None
    if dest in GRAPH_ARGUMENTS and _is_bundled_name(value):
        return value
    what = "a bundled graph's name or a file" if dest in GRAPH_ARGUMENTS else "files"
    raise LaunchError(f"{flag} {value!r}: {what} must be under datasets/ or runs/ (write them as datasets/... or runs/...)")


def check_option(ctx: DashboardContext, key: str, text: str) -> str:
    """A placer option's value (``place --option KEY=VALUE`` on Launch, Compare's options form) checked as the argument of
    the same name would be: within the caps (budget, time limit, counts), a file under datasets/ or runs/ (made absolute)."""
    return _check_value(ctx, key, text)


def _registered_methods() -> set[str]:
    from ..placers import placers

    return set(placers())


def _check_setting(ctx: DashboardContext, item: str) -> str:
    """``FIELD=VALUE`` of ``train --set``, its value checked as the matching option's would be."""
    name, sep, text = item.partition("=")
    name = name.strip().replace("-", "_")
    if not sep:
        raise LaunchError(f"--set {item!r}: expected FIELD=VALUE")
    from ..training.config import override_types

    if name not in override_types():
        raise LaunchError(f"--set {item!r}: {name!r} is not a TrainConfig field nor policy.FIELD (see workbench train --fields)")
    count = _whole_number(text) if name == "policy.random_features" else 0
    if count is None or not 0 <= count <= RANDOM_FEATURES_MAX:
        raise LaunchError(f"--set policy.random_features must be a whole number from 0 to {RANDOM_FEATURES_MAX} (got {text.strip()!r})")
    dest = SET_FIELDS.get(name)
    if dest is None:
        return f"{name}={text}"
    if dest in GRAPH_ARGUMENTS:
        parts = [part.strip() for part in text.split(",") if part.strip()]
        _check_count(ctx, f"--set {name}", len(parts))
        checked = ",".join(_check_value(ctx, dest, part) for part in parts)
    else:
        checked = _check_value(ctx, dest, text.strip())
    return f"{name}={checked}"


def _whole_number(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


def _check_count(ctx: DashboardContext, flag: str, count: int) -> None:
    try:
        ctx.limits.check_graph_count(flag, count)
    except LimitError as exc:
        raise LaunchError(str(exc)) from None


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
        if dest in GRAPH_ARGUMENTS:
            _check_count(ctx, argument.flag or dest.upper(), len(items))
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
    if command == "sweep" and "--out" not in argv:  # a config's own out is relative to the job's private folder, deleted with it
        argv += ["--out", str(resolve_inside(ctx.runs_dir, Path(positional[0]).stem + ".csv"))]
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
        self._log_dir: Path | None = None
        self._jobs: dict[int, Job] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        atexit.register(self.shutdown)

    @property
    def log_dir(self) -> Path:
        """The private (0700) folder of the jobs' logs and working folders, made on first use."""
        with self._lock:
            if self._log_dir is None:
                self._log_dir = Path(tempfile.mkdtemp(prefix="workbench-jobs-"))
            return self._log_dir

    def start(self, command: str, values: dict[str, object]) -> Job:
        """Validate ``values`` and start ``workbench COMMAND`` in the background."""
        argv = validate_arguments(self.ctx, command, values)
        log_dir = self.log_dir
        with self._lock:
            running = sum(1 for job in self._jobs.values() if job.returncode is None)
            if running >= self.max_running:
                raise LaunchError(f"{running} jobs are already running; stop one or wait (at most {self.max_running} at once)")
            job_id = next(self._ids)
            log_path = log_dir / f"job-{job_id}.log"
            workdir = log_dir / f"job-{job_id}"
            workdir.mkdir(mode=0o700)
            env = {
                **os.environ,
                "PYTHONUNBUFFERED": "1",
                "DGLBACKEND": "pytorch",
                "WORKBENCH_RUNS": str(self.ctx.runs_dir),
                # a checkout's package first (an installed one is found anyway)
                "PYTHONPATH": os.pathsep.join(filter(None, [CHECKOUT and str(CHECKOUT), os.environ.get("PYTHONPATH")])),
            }
            with open(os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as log:
                process = subprocess.Popen(
                    [sys.executable, "-m", "workbench", command, *argv],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=str(workdir),
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
        """Ask a job to stop: SIGINT to its process group (it saves and marks its run interrupted), SIGTERM if alive 10 s later."""
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None or job.returncode is not None:
            return
        job.stopped = True
        _signal_group(job.process, signal.SIGINT)

        def escalate() -> None:
            try:
                job.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _signal_group(job.process, signal.SIGTERM)

        threading.Thread(target=escalate, daemon=True).start()

    def stop_all(self) -> None:
        for job in self.jobs():
            self.stop(job.id)

    def shutdown(self, grace: float = 5.0) -> None:
        """End every job with the dashboard: SIGINT, then SIGKILL to each process group after ``grace`` s; remove the logs."""
        jobs = [job for job in self.jobs() if job.returncode is None]
        for job in jobs:
            job.stopped = True
            _signal_group(job.process, signal.SIGINT)
        deadline = time.monotonic() + grace
        for job in jobs:
            try:
                job.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for job in jobs:  # the group also holds what the job started (a sweep's worker pool)
            _signal_group(job.process, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                job.process.wait(timeout=5)
        with self._lock:
            log_dir, self._log_dir = self._log_dir, None
        if log_dir is not None:
            shutil.rmtree(log_dir, ignore_errors=True)


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    """Send ``signum`` to the process group a job leads (each job starts its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)
