"""The dashboard's request-scoped work, run in child processes that are stopped when nobody waits any more.

A Compare placement or a graph generation runs in a child process (forked
from a fork server that has the workbench imported, so a child starts in
milliseconds). The request's thread waits for the answer and kills the child
within :data:`POLL` seconds when

- the browser went away (the request's socket was closed; werkzeug's server),
- a newer request of the same client for the same outputs replaced it (the
  client is its address; a second tab counts as the same client), or
- its deadline passed (the request's time limit plus :data:`GRACE`), or
- the deadline of the whole request passed (:func:`request_deadline`: Compare's
  placements, one after another, share one).

At most ``limits.max_concurrent`` children run at once, for all clients
together; a request that finds no free slot within :data:`SLOT_WAIT` seconds
is refused. A child may add at most ``limits.max_work_memory_mb`` of memory:
its data segment is capped (``RLIMIT_DATA``), and the resident memory of its
whole process tree is watched, so work that starts a browser (PNG export) is
held to the cap too. Each child leads its own process group; it is killed
with that group and every process it started (a browser in a session of its
own included), and every child is killed when the dashboard exits. :func:`run_bounded` runs a function under all of a
server's caps; everything a page computes beyond one simulation goes through it.

A child runs :data:`CHILD_NICENESS` steps nicer than the server, so a request
that needs no child (a what-if Move, a highlight) is answered first while
every slot is busy. The child stays in the server's session (a new process
group, not a new session), so where Linux schedules each session as a group
(autogroup) the children weigh against the server alone, not against other
users' work or the browser (Chromium starts a session of its own).

A child runs torch on one thread (:func:`_one_thread`): two children and the
server share the machine's cores, and on a loaded 2-core machine a best of
200 samples of the FFNN policy took 1.7 CPU s on one thread against 8–12 on
two. The fork server imports the learned placers when torch is installed, so
a learned method's child does not import torch again (about 10 s on a busy
2-core machine).
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import importlib.util
import itertools
import multiprocessing
import os
import pickle
import resource
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..formats import GraphFormatError, load_graph
from ..learn.registry import install_registration, registration
from ..placers import REGISTRY, place
from ..sim import simulate
from .context import DashboardContext
from .limits import LimitError

__all__ = [
    "Cancelled",
    "WorkRunner",
    "RUNNER",
    "run_bounded",
    "request_deadline",
    "stop_when",
    "NOT_RUN",
    "run_placement",
    "search_clock",
    "simulate_placement",
    "polish_placement",
    "check_generated",
    "check_upload",
]

POLL = 0.1
"""Seconds between checks of the client, the deadline and the child."""
GRACE = 15.0
"""Seconds a child may run past its request's time limit (start-up, a placer's last step)."""
SLOT_WAIT = 5.0
"""Seconds a request waits for a free slot before it is refused."""
CHILD_NICENESS = 10
"""How much nicer (lower in scheduling priority) a child runs than the server. With both slots spinning on a 2-core machine
at load 5-7, a what-if Move took a median 356-443 ms (max 0.67-3.0 s) with the children at the server's priority, 151-193
ms (max 219-622 ms) at +10 and 121-132 ms (max 163-271 ms) at +19, in three runs; +10 keeps a child level with the test
suite's nice-10 background load."""
NOT_RUN = "not run: request deadline"
"""What :class:`Cancelled` says for work not started because its request's deadline had passed."""
_IN_CHILD = False
_REQUEST_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("workbench_request_deadline", default=None)
_STOP_WHEN: contextvars.ContextVar[Callable[[], str | None] | None] = contextvars.ContextVar("workbench_stop_when", default=None)
PRELOAD = ["workbench", "workbench.placers", "workbench.sim", "workbench.generators", "workbench.dashboard.sources"]
LEARNED_PRELOAD = "workbench.learn.placers"
"""Preloaded too where torch is installed (a light install has no learned methods to start)."""


class Cancelled(RuntimeError):
    """The work was stopped: the client left, a newer request replaced it, or its deadline passed."""


@contextlib.contextmanager
def request_deadline(seconds: float) -> Iterator[float]:
    """Within the block, all the work this thread runs ends ``seconds`` from now: a child still running then is killed
    (:class:`Cancelled`, "the request's deadline passed"), and work not started by then raises :class:`Cancelled` with
    :data:`NOT_RUN` without starting. Yields the deadline (``time.monotonic()``); an enclosing one that ends earlier wins."""
    deadline = time.monotonic() + seconds
    outer = _REQUEST_DEADLINE.get()
    deadline = deadline if outer is None else min(deadline, outer)
    token = _REQUEST_DEADLINE.set(deadline)
    try:
        yield deadline
    finally:
        _REQUEST_DEADLINE.reset(token)


@contextlib.contextmanager
def stop_when(should_stop: Callable[[], str | None]) -> Iterator[None]:
    """Within the block, work this thread runs is stopped when ``should_stop`` says why, instead of when its Flask request's
    client leaves: for work a job runs in a thread of its own, which no request waits for (Compare's placements)."""
    token = _STOP_WHEN.set(should_stop)
    try:
        yield
    finally:
        _STOP_WHEN.reset(token)


class WorkRunner:
    """Runs functions in killable child processes on behalf of HTTP requests (thread-safe)."""

    def __init__(self) -> None:
        self._context = multiprocessing.get_context("forkserver")
        learned = [LEARNED_PRELOAD] if importlib.util.find_spec("torch") is not None else []
        self._context.set_forkserver_preload(PRELOAD + learned)
        self._slots = threading.Condition()
        self._children: set[multiprocessing.process.BaseProcess] = set()
        self._latest: dict[Any, int] = {}
        self._cancelled: dict[Any, int] = {}
        self._warm_lock = threading.Lock()
        self._warm = False
        self._tokens = itertools.count(1)
        atexit.register(self.kill_all)

    def children(self) -> list[int]:
        """Process ids of the children running now."""
        with self._slots:
            return [child.pid for child in self._children if child.pid is not None]

    def run(
        self,
        function: Callable[..., Any],
        *args: Any,
        max_concurrent: int,
        seconds: float,
        memory_mb: int | None = None,
        cap_data: bool = True,
        should_stop: Callable[[], str | None] | None = None,
        slot_wait: float = SLOT_WAIT,
    ) -> Any:
        """``function(*args)`` in a child; raises :class:`Cancelled`, or the child's own exception.

        Args:
            max_concurrent: children allowed at once (this one included).
            seconds: the deadline, from when the child starts.
            memory_mb: memory the child may add to what it starts with (``None``: no cap): its data segment, and the
                resident memory of its process tree, polled.
            cap_data: cap the data segment; ``False`` for work that starts a browser (which reserves more than it uses),
                held to ``memory_mb`` by the poll alone.
            should_stop: says why to stop (or ``None`` to go on); default: that of the enclosing :func:`stop_when`,
                else the current Flask request's client left, was superseded or cancelled.
            slot_wait: seconds to wait for a free slot before the request is refused.
        """
        should_stop = _within_request_deadline(should_stop or _STOP_WHEN.get() or self._request_watch())
        self.warm()
        reason = should_stop()
        if reason:
            raise _not_started(reason)
        reader, writer = self._context.Pipe(duplex=False)
        # the fork server imported the registries before any run-time registration: the child gets this process's
        registrations = {name: registration(name) for name in REGISTRY}
        child = self._context.Process(
            target=_child_main, args=(writer, function, args, memory_mb if cap_data else None, registrations), daemon=True
        )
        try:
            self._take_slot(child, max_concurrent, should_stop, slot_wait)
            deadline = time.monotonic() + seconds
            child.start()
            writer.close()
            baseline = _tree_bytes(child.pid)
            while not reader.poll(POLL):
                reason = should_stop() or ("its deadline passed" if time.monotonic() > deadline else None)
                if reason:
                    raise Cancelled(f"stopped: {reason}")
                if memory_mb is not None and _tree_bytes(child.pid) - baseline > memory_mb << 20:
                    raise LimitError(_memory_message(memory_mb))
            try:
                ok, value = reader.recv()
            except EOFError:
                child.join(5)
                raise RuntimeError(f"the computation ended without an answer (exit code {child.exitcode})") from None
        finally:
            self._end(child)
            reader.close()
            writer.close()
        if not ok:
            raise value
        return value

    def warm(self) -> None:
        """Start the fork server and wait until it has imported :data:`PRELOAD` and a first child has compiled the numba
        kernels (once, :func:`_compile_kernels`): a child forks only after that, so no deadline pays for the imports (about
        10 s with torch on a busy 2-core machine) or for a compile."""
        with self._warm_lock:
            if not self._warm:
                child = self._context.Process(target=_compile_kernels, daemon=True)
                child.start()
                child.join()
                self._warm = True

    def cancel(self, client: str | None, output: str) -> bool:
        """Stop the work of ``client``'s latest request whose outputs include ``output`` (a component's ``id.property``);
        True when there was one. Its children are killed within :data:`POLL` s and it raises :class:`Cancelled`."""
        with self._slots:
            keys = [key for key in self._latest if key[0] == client and output in str(key[1])]
            for key in keys:
                self._cancelled[key] = self._latest[key]
        return bool(keys)

    def kill_all(self) -> None:
        with self._slots:
            children = list(self._children)
        for child in children:
            self._end(child)

    # ----------------------------------------------------------- internals
    def _take_slot(self, child, max_concurrent: int, should_stop: Callable[[], str | None], slot_wait: float) -> None:
        give_up = time.monotonic() + slot_wait
        with self._slots:
            while len(self._children) >= max_concurrent:
                reason = should_stop()
                if reason:
                    raise _not_started(reason)
                if time.monotonic() > give_up:
                    raise LimitError(
                        f"the server is busy: {len(self._children)} computations are running "
                        f"(at most {max_concurrent}, the server's --max-concurrent); try again"
                    )
                self._slots.wait(POLL)
            self._children.add(child)

    def _end(self, child) -> None:
        if child.pid is not None:  # started; not yet reaped, so its id is still its own
            started = _tree(child.pid)[1:]  # listed before the child dies: then they would belong to init
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)  # the child and its process group
            for pid in started:  # and what left the group (Kaleido starts its browser in a session of its own)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if child.is_alive():
                child.kill()
            child.join(5)
        with self._slots:
            self._children.discard(child)
            self._slots.notify_all()

    def _request_watch(self) -> Callable[[], str | None]:
        """A check for the current Flask request (none outside a request: nothing to watch)."""
        import flask

        if not flask.has_request_context():
            return lambda: None
        request = flask.request
        body = request.get_json(silent=True)
        key = (request.remote_addr, body.get("output") if isinstance(body, dict) else request.path)
        token = getattr(flask.g, "workbench_work_token", None)
        if token is None:
            token = flask.g.workbench_work_token = next(self._tokens)
            with self._slots:
                self._latest[key] = max(token, self._latest.get(key, 0))
        sock = request.environ.get("werkzeug.socket")

        def should_stop() -> str | None:
            if self._cancelled.get(key) == token:
                return "cancelled from the page"
            if self._latest.get(key, token) != token:
                return "a newer request replaced it"
            if sock is not None and _closed(sock):
                return "the client went away"
            return None

        return should_stop


_PASSED = "the request's deadline passed"


def _within_request_deadline(should_stop: Callable[[], str | None]) -> Callable[[], str | None]:
    """``should_stop``, which also says stop once the deadline of :func:`request_deadline` (if any) has passed."""
    deadline = _REQUEST_DEADLINE.get()
    if deadline is None:
        return should_stop
    return lambda: should_stop() or (_PASSED if time.monotonic() >= deadline else None)


def _not_started(reason: str) -> Cancelled:
    """The :class:`Cancelled` for work stopped before its child started (:data:`NOT_RUN` when its request's deadline passed)."""
    return Cancelled(NOT_RUN if reason == _PASSED else f"stopped: {reason}")


def _closed(sock: socket.socket) -> bool:
    """True when the peer closed the connection (readable, and a peek reads nothing)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:  # reset by the peer
        return True
    except ValueError:  # a socket that cannot be peeked (TLS) or is closed already: nothing to tell
        return False


def _tree(pid: int | None) -> list[int]:
    """Process ``pid`` and its descendants, whatever their process group or session (Linux ``/proc``)."""
    found: list[int] = []
    pending = [] if pid is None else [pid]
    while pending:
        current = pending.pop()
        if current in found:
            continue
        found.append(current)
        with contextlib.suppress(OSError, ValueError):
            for task in os.listdir(f"/proc/{current}/task"):
                pending += [int(c) for c in Path(f"/proc/{current}/task/{task}/children").read_text().split()]
    return found


def _tree_bytes(pid: int | None) -> int:
    """Resident memory of process ``pid`` and its descendants (0 where it cannot be read)."""
    total = 0
    for member in _tree(pid):
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int(Path(f"/proc/{member}/statm").read_text().split()[1]) * resource.getpagesize()
    return total


def _memory_message(memory_mb: int | None) -> str:
    return f"this needs more than {memory_mb} MiB of memory (the server's --max-work-memory-mb)"


def _child_main(writer, function: Callable[..., Any], args: tuple, memory_mb: int | None, registrations: dict[str, Any]) -> None:
    global _IN_CHILD
    _IN_CHILD = True  # the parent checked this request already; a child never starts children
    for name, entries in registrations.items():  # methods and policies registered in the server at run time
        install_registration(name, entries)
    _one_thread()
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)  # its own process group, so the parent kills what it starts with it
    with contextlib.suppress(OSError):
        os.nice(CHILD_NICENESS)  # the server's requests first; what the child starts inherits it
    if memory_mb is not None:
        _limit_memory(memory_mb)
    try:
        answer = (True, function(*args))
    except MemoryError:
        answer = (False, LimitError(_memory_message(memory_mb)))
    except Exception as exc:  # sent back to the request, which shows it
        answer = (False, exc if _round_trips(exc) else RuntimeError(str(exc)))
    try:
        writer.send(answer)
    except Exception as exc:  # a result that cannot be pickled
        writer.send((False, RuntimeError(f"{type(exc).__name__}: {exc}")))
    writer.close()


WARM_GRAPH = "chain_mm_112nodes"
"""The bundled graph the warm-up child places (small, with a shipped checkpoint)."""

WARM_PLACEMENTS = (("best_constructive", {}), ("local_search", {"budget": 20}), ("doppler", {}), ("learned_search", {"budget": 20}))
"""What the warm-up child places :data:`WARM_GRAPH` with (4 devices; doppler with the graph's shipped checkpoint): together
they call every numba kernel a Compare placement calls."""


def _compile_kernels() -> None:
    """The child that warms the fork server: it places :data:`WARM_GRAPH` once with each of :data:`WARM_PLACEMENTS`, so
    numba's cache on disk holds every compiled kernel and no placement's deadline pays for compiling one (about 40 s of a
    2-core machine the first time after an install, a few seconds after). A method that cannot run here (no torch) is
    skipped: its own request will say why."""
    from ..datasets import DATASETS_DIR, bundled_graph
    from ..runs import checkpoint_file

    _one_thread()
    with contextlib.suppress(OSError):
        os.nice(CHILD_NICENESS)
    graph = bundled_graph(WARM_GRAPH)
    shipped = str(checkpoint_file(DATASETS_DIR / "pretrained" / WARM_GRAPH, "doppler"))
    for method, options in WARM_PLACEMENTS:
        with contextlib.suppress(Exception):
            place(graph, method, devices=4, **({"checkpoint": shipped} if method == "doppler" else options))


def _one_thread() -> None:
    """torch on one thread in this child: set for a torch the fork server imported, and for one imported later."""
    os.environ["OMP_NUM_THREADS"] = "1"
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _round_trips(exc: Exception) -> bool:
    """True when the exception can be rebuilt from its pickle (one whose ``__init__`` takes other arguments cannot)."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return False
    return True


def _limit_memory(memory_mb: int) -> None:
    """Cap the child's data segment (heap and private writable mappings, ``RLIMIT_DATA``) at what it has now plus
    ``memory_mb`` (Linux; elsewhere no cap). Not the address space: torch's libraries reserve gigabytes they never use."""
    try:
        status = Path("/proc/self/status").read_text().splitlines()
        data = next(int(line.split()[1]) << 10 for line in status if line.startswith("VmData:"))
    except (OSError, StopIteration, ValueError):
        return
    size = data + (memory_mb << 20)
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (size if hard == resource.RLIM_INFINITY else min(size, hard), hard))


RUNNER = WorkRunner()
"""The process-wide runner the pages use."""


def run_bounded(
    ctx: DashboardContext,
    function: Callable[..., Any],
    *args: Any,
    seconds: float | None = None,
    cap_data: bool = True,
    should_stop: Callable[[], str | None] | None = None,
    slot_wait: float = SLOT_WAIT,
) -> Any:
    """``function(*args)`` in a killable child under all of the server's caps: one of ``max_concurrent`` slots, at most
    ``max_work_memory_mb`` more memory, stopped after ``seconds`` from its start (default ``max_time_limit`` plus
    :data:`GRACE`), or when ``should_stop`` says so (default: the client leaves, replaces or cancels the request)."""
    limits = ctx.limits
    return RUNNER.run(
        function,
        *args,
        max_concurrent=limits.max_concurrent,
        seconds=limits.max_time_limit + GRACE if seconds is None else seconds,
        memory_mb=limits.max_work_memory_mb,
        cap_data=cap_data,
        should_stop=should_stop,
        slot_wait=slot_wait,
    )


# ------------------------------------------------------------------ the work
@lru_cache(maxsize=128)
def run_placement(
    ctx: DashboardContext,
    graph_key: str,
    value: str,
    devices: int,
    seed: int = 0,
    budget: int | None = None,
    time_limit: float | None = None,
    extra: tuple[tuple[str, Any], ...] = (),
):
    """:func:`workbench.dashboard.sources.run_placement` in a killable child (results cached here).

    A search run without a time limit gets the server's ``max_time_limit`` as its clock (:func:`search_clock`), so it
    stops there with its best placement so far instead of being killed with nothing to show.
    """
    from . import sources

    clock = time_limit if time_limit is not None else search_clock(ctx, value)
    seconds = (clock or ctx.limits.max_time_limit) + GRACE
    return run_bounded(ctx, sources.run_placement, ctx, graph_key, value, devices, seed, budget, clock, extra, seconds=seconds)


def search_clock(ctx: DashboardContext, value: str) -> float | None:
    """The server's ``max_time_limit`` for a method value that searches within a budget and takes a clock (local_search,
    learned_search, a checkpoint's active search); ``None`` for any other method, which runs as the CLI runs it."""
    from ..placers import methods, placer_options
    from .sources import parse_method

    method, options = parse_method(ctx, value)
    accepted = placer_options(method)
    searches = method not in methods("learned") or "search" in options
    return ctx.limits.max_time_limit if searches and {"budget", "time_limit"} <= set(accepted) else None


@lru_cache(maxsize=128)
def simulate_placement(
    ctx: DashboardContext,
    graph_key: str,
    value: str,
    devices: int,
    seed: int = 0,
    budget: int | None = None,
    time_limit: float | None = None,
    extra: tuple[tuple[str, Any], ...] = (),
):
    """The simulator's :class:`workbench.SimResult` for :func:`run_placement`'s assignment."""
    from .sources import load_graph_key

    placement = run_placement(ctx, graph_key, value, devices, seed, budget, time_limit, extra)
    return simulate(load_graph_key(ctx, graph_key), placement.assignment, devices)


def polish_placement(
    ctx: DashboardContext,
    graph_key: str,
    devices: int,
    seed: int,
    budget: int,
    time_limit: float | None,
    start: list[int],
):
    """What-if's polish: local search from ``start`` within ``budget`` (and ``time_limit``), in a killable child stopped
    after the request's time limit or the server's ``max_time_limit`` (plus :data:`GRACE`)."""
    seconds = (time_limit or ctx.limits.max_time_limit) + GRACE
    return run_bounded(ctx, _polish, ctx, graph_key, devices, seed, budget, time_limit, start, seconds=seconds)


def _polish(ctx: DashboardContext, graph_key: str, devices: int, seed: int, budget: int, time_limit: float | None, start: list[int]) -> Any:
    from .sources import load_graph_key

    options: dict[str, Any] = {"budget": budget, "start": start}
    if time_limit is not None:
        options["time_limit"] = time_limit
    return place(load_graph_key(ctx, graph_key), method="local_search", devices=devices, seed=seed, **options)


@lru_cache(maxsize=64)
def check_generated(ctx: DashboardContext, spec_text: str) -> None:
    """Generate the graph of a ``generated:`` key once in a child under the memory cap; refuse it beyond the size caps."""
    if _IN_CHILD:
        return
    nodes, edges = run_bounded(ctx, _generated_size, spec_text, seconds=ctx.limits.max_time_limit)
    ctx.limits.check_graph_size(nodes, edges, "the generated graph")


def _generated_size(spec_text: str) -> tuple[int, int]:
    from .sources import _generated

    graph = _generated(spec_text)
    return graph.num_nodes, graph.num_edges


def check_upload(ctx: DashboardContext, path: Path, what: str) -> None:
    """Load an uploaded graph file once in a child under the caps; refuse it beyond the graph size caps.

    Raises ``GraphFormatError`` (naming ``what``) for a file that is not a graph, :class:`LimitError` beyond a cap.
    """
    size = _upload_size(str(path)) if _IN_CHILD else run_bounded(ctx, _upload_size, str(path), seconds=ctx.limits.max_time_limit)
    if isinstance(size[0], str):
        raise GraphFormatError(what, size[0], size[1])
    ctx.limits.check_graph_size(size[0], size[1], what)


def _upload_size(path: str) -> tuple[Any, Any]:
    """``(ops, edges)`` of a graph file, or ``(reason, line)`` of the :class:`~workbench.GraphFormatError` it raises
    (which does not survive pickling)."""
    try:
        graph = load_graph(path)
    except GraphFormatError as exc:
        return exc.reason, exc.line
    return graph.num_nodes, graph.num_edges
