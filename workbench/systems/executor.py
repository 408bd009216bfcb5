"""Run a placement for real: one worker per device, real tensor work per op, real copies between devices.

The execution model is the simulator's (the DOPPLER paper's asynchronous
runtime), carried out by threads instead of events:

- one worker thread per device: a CUDA device (its own stream) when
  ``torch.cuda.is_available()``, otherwise a CPU worker with its own intra-op
  thread count;
- work-conserving, first-come-first-served dispatch: an op joins its device's
  queue the moment its last input is in that device's memory, and a free
  worker takes the oldest queued op at once;
- an output needed on another device is copied there for real (a tensor copy
  into a buffer owned by the consumer's device) by a pool of transfer threads,
  without blocking either worker;
- warm-up runs, then ``repeats`` timed runs; the trace of the median run
  (ready/start/end per op, start/end per transfer, seconds from the run's
  start) comes back as a :class:`~workbench.Trace`.

What an op computes is pluggable: an :class:`~workbench.systems.kernels.OpKernels`
(``kernels.py``: calibrated matrix multiplications by default, or waits of
the modeled time; ``module_kernels.py``: a PyTorch module's own ops).

Failures end the measurement with an error, never a hang: an op that raises,
a worker thread that dies, or the timeout passing stops every worker (they
check between kernel chunks), and threads, buffers and CUDA memory are
released after every measurement. torch is imported only when a measurement
starts.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..graph import DataflowGraph
from ..sim import check_assignment, lower_bound
from ..sim.trace import Trace
from .kernels import CalibratedKernels, OpKernels, Stopped, WaitKernels, Worker, settle, torch_module
from .oracle import Measurement

__all__ = ["LocalExecutor", "Worker", "OpKernels", "CalibratedKernels", "WaitKernels", "Stopped"]


class _Run:
    """One execution of the graph: worker threads, transfer threads, and what they recorded."""

    def __init__(
        self, graph: DataflowGraph, assignment: np.ndarray, workers: Sequence[Worker], kernels: OpKernels, pool: ThreadPoolExecutor
    ) -> None:
        n = graph.num_nodes
        self.graph, self.assignment, self.workers, self.kernels, self.pool = graph, assignment, workers, kernels, pool
        self.remaining = graph.in_degree.copy()
        self.inputs: list[dict[int, Any]] = [{} for _ in range(n)]
        self.queues: list[deque[int]] = [deque() for _ in workers]
        self.lock = threading.Condition()
        self.stop = threading.Event()
        self.finished = threading.Event()
        self.errors: list[str] = []
        self.completed = 0
        self.ready, self.start, self.end = np.zeros(n), np.zeros(n), np.zeros(n)
        self.transfers: dict[int, tuple[float, float]] = {}
        self.origin = 0.0

    def _now(self) -> float:
        return time.perf_counter() - self.origin

    def _fail(self, message: str) -> None:
        with self.lock:
            if not self.stop.is_set():
                self.errors.append(message)
            self.stop.set()
            self.lock.notify_all()
        self.finished.set()

    def _arrive(self, op: int, edge: int, value: Any, when: float) -> None:
        with self.lock:
            self.inputs[op][edge] = value
            self.ready[op] = max(self.ready[op], when)
            self.remaining[op] -= 1
            if self.remaining[op] == 0:
                self.queues[self.assignment[op]].append(op)
                self.lock.notify_all()

    def _transfer(self, edge: int, value: Any) -> None:
        u, v = int(self.graph.src[edge]), int(self.graph.dst[edge])
        try:
            if self.stop.is_set():
                return
            began = self._now()
            received = self.kernels.send(edge, value, self.workers[self.assignment[u]], self.workers[self.assignment[v]])
            ended = self._now()
            self.transfers[edge] = (began, ended)
            self._arrive(v, edge, received, ended)
        except BaseException as exc:
            self._fail(f"transfer {u}->{v}: {type(exc).__name__}: {exc}")

    def _work(self, worker: Worker) -> None:
        torch = torch_module()
        graph, queue = self.graph, self.queues[worker.index]
        ptr, _, out_edge = graph.succ_csr
        try:
            torch.set_num_threads(worker.threads)
            if worker.stream is not None:
                torch.cuda.set_device(worker.device)
            while True:
                with self.lock:
                    while not queue and not self.stop.is_set():
                        self.lock.wait()
                    if self.stop.is_set():
                        return
                    op = queue.popleft()
                self.start[op] = self._now()
                try:
                    output = self.kernels.run(op, self.inputs[op], worker, self.stop)
                    worker.sync()
                except Stopped:
                    return
                except Exception as exc:
                    self._fail(f"op {op} ({graph.op_name(op)}) on device {worker.index}: {type(exc).__name__}: {exc}")
                    return
                self.end[op] = self._now()
                self.inputs[op] = {}
                for edge in out_edge[ptr[op] : ptr[op + 1]]:
                    v = int(graph.dst[edge])
                    if self.assignment[v] == worker.index:
                        self._arrive(v, int(edge), output, self.end[op])
                    else:
                        self.pool.submit(self._transfer, int(edge), output)
                with self.lock:
                    self.completed += 1
                    if self.completed == graph.num_nodes:
                        self.stop.set()
                        self.lock.notify_all()
                        self.finished.set()
        except BaseException as exc:
            self._fail(f"worker {worker.index} ({worker.name}) died: {type(exc).__name__}: {exc}")

    def execute(self, timeout: float) -> tuple[Trace | None, str | None]:
        """Run once within ``timeout`` seconds; returns the trace, or None and why it failed."""
        threads = [threading.Thread(target=self._work, args=(w,), name=f"workbench-device-{w.index}", daemon=True) for w in self.workers]
        for thread in threads:
            thread.start()
        with self.lock:
            self.origin = time.perf_counter()
            for op in np.flatnonzero(self.remaining == 0):
                self.queues[self.assignment[op]].append(int(op))
            self.lock.notify_all()
        if self.graph.num_nodes == 0:
            self.finished.set()
        if not self.finished.wait(timeout):
            self._fail(f"timed out after {timeout:.3g} s with {self.completed} of {self.graph.num_nodes} ops finished")
        with self.lock:
            self.stop.set()
            self.lock.notify_all()
        for thread in threads:
            thread.join(timeout=2.0)
        stuck = [t.name for t in threads if t.is_alive()]
        if stuck:
            self.errors.append(f"{', '.join(stuck)} did not stop within 2 s and were abandoned")
        if self.errors:
            return None, "; ".join(self.errors)
        return self._trace(), None

    def _trace(self) -> Trace:
        graph, a = self.graph, self.assignment
        edges = np.array(sorted(self.transfers), dtype=np.int64)
        times = np.array([self.transfers[e] for e in edges.tolist()], dtype=float).reshape(-1, 2)
        return Trace(
            device=a.copy(),
            ready=self.ready,
            start=self.start,
            end=self.end,
            transfer_src_op=graph.src[edges],
            transfer_dst_op=graph.dst[edges],
            transfer_src_device=a[graph.src[edges]],
            transfer_dst_device=a[graph.dst[edges]],
            transfer_start=times[:, 0],
            transfer_end=times[:, 1],
            op_names=graph.names,
        )


class LocalExecutor:
    """A cost oracle that runs the placement on this machine's devices.

    Args:
        devices: the number of workers (the devices an assignment may use).
        device: ``"auto"`` (CUDA when available, else CPU), ``"cpu"`` or
            ``"cuda"``. With fewer GPUs than workers, workers share GPUs
            round-robin, each on its own stream.
        time_scale: seconds per graph unit; ``None`` picks, per graph, the
            scale that makes the graph's lower bound on ``devices`` last
            ``target_seconds``.
        target_seconds: see ``time_scale``.
        threads_per_worker: intra-op threads of each CPU worker (default: the
            machine's cores divided among the workers, at least one).
        warmup: untimed runs before the timed ones.
        transfer_threads: at most this many copies at once (default: one
            thread per cross-device edge, up to 256, so that transfers never
            wait for each other, as in the simulator's model).
        kernels: what each op runs (default :class:`CalibratedKernels`).
    """

    def __init__(
        self,
        devices: int = 4,
        device: str = "auto",
        time_scale: float | None = None,
        target_seconds: float = 0.2,
        threads_per_worker: int | None = None,
        warmup: int = 1,
        transfer_threads: int | None = None,
        kernels: OpKernels | None = None,
    ) -> None:
        if isinstance(devices, bool) or not isinstance(devices, (int, np.integer)) or devices < 1:
            raise ValueError(f"devices must be an int >= 1, got {devices!r}")
        if device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
        if time_scale is not None and not (math.isfinite(time_scale) and time_scale > 0):
            raise ValueError(f"time_scale must be a finite number > 0, got {time_scale!r}")
        if not (math.isfinite(target_seconds) and target_seconds > 0):
            raise ValueError(f"target_seconds must be a finite number > 0, got {target_seconds!r}")
        if threads_per_worker is not None and threads_per_worker < 1:
            raise ValueError(f"threads_per_worker must be >= 1, got {threads_per_worker}")
        if warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {warmup}")
        if transfer_threads is not None and transfer_threads < 1:
            raise ValueError(f"transfer_threads must be >= 1, got {transfer_threads}")
        self.devices = int(devices)
        self.device = device
        self.time_scale = time_scale
        self.target_seconds = float(target_seconds)
        self.threads_per_worker = threads_per_worker or max(1, (os.cpu_count() or 1) // self.devices)
        self.warmup = int(warmup)
        self.transfer_threads = transfer_threads
        self.kernels = kernels or CalibratedKernels()
        self._workers: list[Worker] | None = None

    def scale_for(self, graph: DataflowGraph) -> float:
        """Seconds per graph unit used for ``graph``."""
        if self.time_scale is not None:
            return self.time_scale
        bound = lower_bound(graph, self.devices)
        return self.target_seconds / bound if bound > 0 else 1.0

    def workers(self) -> list[Worker]:
        """The workers, built on first use (this is where torch is imported)."""
        if self._workers is None:
            torch = torch_module()
            use_cuda = self.device == "cuda" or (self.device == "auto" and torch.cuda.is_available())
            if use_cuda and not torch.cuda.is_available():
                raise ValueError("device='cuda' but torch.cuda.is_available() is False")
            workers = []
            for i in range(self.devices):
                if use_cuda:
                    gpu = torch.device("cuda", i % torch.cuda.device_count())
                    workers.append(Worker(i, gpu, 1, torch.cuda.Stream(gpu), torch.cuda.Stream(gpu)))
                else:
                    workers.append(Worker(i, torch.device("cpu"), self.threads_per_worker))
            self._workers = workers
        return self._workers

    def measure(
        self, graph: DataflowGraph, assignment: Sequence[int] | np.ndarray, repeats: int = 3, timeout: float = 60.0, trace: bool = True
    ) -> Measurement:
        """Run ``warmup`` untimed and ``repeats`` timed executions of ``assignment``, all within ``timeout`` seconds.

        The median run's trace always comes back.
        """
        values = check_assignment(graph, assignment, self.devices)
        if isinstance(repeats, bool) or not isinstance(repeats, (int, np.integer)) or repeats < 1:
            raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
        if not (math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout!r}")
        deadline = time.monotonic() + timeout
        torch = torch_module()
        saved_threads = torch.get_num_threads()
        workers = self.workers()
        scale = self.scale_for(graph)
        cross = int(np.count_nonzero(values[graph.src] != values[graph.dst]))
        transfer_threads = self.transfer_threads or min(256, max(1, cross))
        samples: list[float] = []
        traces: list[Trace] = []
        errors: list[str] = []
        details: dict[str, Any] = {
            "time_scale": scale,
            "devices": [w.name for w in workers],
            "threads_per_worker": [w.threads for w in workers],
            "warmup": self.warmup,
            "repeats": int(repeats),
            "transfer_threads": transfer_threads,
        }
        pool = ThreadPoolExecutor(max_workers=transfer_threads, thread_name_prefix="workbench-transfer")
        try:
            details.update(self.kernels.setup(graph, values, workers, scale))
            settle(workers)
            for k in range(self.warmup + repeats):
                left = deadline - time.monotonic()
                label = "warm-up run" if k < self.warmup else f"run {k - self.warmup + 1} of {repeats}"
                if left <= 0:
                    errors.append(f"{label}: the {timeout:.3g} s timeout passed before it started")
                    break
                measured, error = _Run(graph, values, workers, self.kernels, pool).execute(left)
                if measured is None:
                    errors.append(f"{label}: {error}")
                    break
                if k >= self.warmup:
                    samples.append(measured.makespan)
                    traces.append(measured)
        except Exception as exc:
            errors.append(f"setup: {type(exc).__name__}: {exc}")
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            self.kernels.teardown()
            torch.set_num_threads(saved_threads)
            if any(w.stream is not None for w in workers):
                torch.cuda.empty_cache()
        return Measurement.from_samples(samples, traces, errors=errors, oracle="local", details=details)
