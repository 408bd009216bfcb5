"""Work a page starts in a thread of the server and then polls: Compare's placements and its any-time chart.

A :class:`PolledJob` stops when its page cancels it or stops polling for its ``abandoned`` seconds (the tab was closed);
a :class:`JobTable` remembers the jobs by id, so that each poll finds its page's job, and forgets the oldest finished
ones first.
"""

from __future__ import annotations

import itertools
import secrets
import threading
import time
from collections import OrderedDict
from typing import Any, Generic, TypeVar

__all__ = ["CANCELLED_FROM_PAGE", "PolledJob", "JobTable", "next_poll"]

CANCELLED_FROM_PAGE = "cancelled from the page"
"""What :meth:`PolledJob.should_stop` says once the job was cancelled or abandoned."""


def next_poll(polls: Any) -> int:
    """A poll timer's ``max_intervals`` in a poll's answer: one tick more than it has fired, so the timer waits for each
    answer before it ticks again. Dash drops a callback still executing when the same callback is asked for again: with
    a free-running timer, a page whose every answer took longer than the interval (a loaded machine drawing many cards)
    would never update. ``polls`` is the timer's ``n_intervals`` as the browser sent it (anything else counts as 0)."""
    fired = polls if isinstance(polls, int) and not isinstance(polls, bool) and 0 <= polls < 2**53 else 0
    return fired + 1


class PolledJob:
    """A job its page polls (thread-safe): :meth:`touch` on each poll, :meth:`cancel` on Cancel, and :meth:`run` in a thread
    of its own, which sets :attr:`state` from ``running`` to how it ended."""

    def __init__(self, abandoned: float | None) -> None:
        """``abandoned``: seconds without :meth:`touch` after which it stops (``None``: never, for a caller that waits)."""
        self.id = secrets.token_hex(8)
        self.abandoned = abandoned
        self.state = "running"
        self.seen = time.monotonic()
        self._stop = threading.Event()

    def run(self) -> None:
        """The work; subclasses define it."""
        raise NotImplementedError

    def touch(self) -> None:
        """The page asked about this job (it is still wanted)."""
        self.seen = time.monotonic()

    def cancel(self) -> None:
        """Stop now: running children are killed within a tenth of a second; what is done stays."""
        self._stop.set()

    def should_stop(self) -> str | None:
        """Why to stop (it was cancelled, or its page stopped polling), or ``None`` to go on."""
        if not self._stop.is_set() and self.abandoned is not None and time.monotonic() - self.seen > self.abandoned:
            self._stop.set()  # nobody is waiting for it
        return CANCELLED_FROM_PAGE if self._stop.is_set() else None


Job = TypeVar("Job", bound=PolledJob)


class JobTable(Generic[Job]):
    """The jobs of one kind the server remembers, at most ``keep`` of them (thread-safe)."""

    def __init__(self, name: str, keep: int) -> None:
        self.name, self.keep = name, keep
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()
        self._threads = itertools.count(1)

    def find(self, job_id: Any) -> Job | None:
        """The job a page holds the id of (``None`` when the server does not know it)."""
        with self._lock:
            return self._jobs.get(job_id) if isinstance(job_id, str) else None

    def start(self, job: Job) -> Job:
        """Remember ``job`` (forgetting the oldest finished ones beyond ``keep``) and run it in a thread of its own."""
        with self._lock:
            self._jobs[job.id] = job
            for old_id in [i for i, old in self._jobs.items() if old.state != "running"][: max(0, len(self._jobs) - self.keep)]:
                del self._jobs[old_id]
        threading.Thread(target=job.run, name=f"{self.name}-{next(self._threads)}", daemon=True).start()
        return job
