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

What an op computes is pluggable (:class:`OpKernels`). For cost-only graphs
(the paper's files, generated graphs) :class:`CalibratedKernels` runs a matrix
multiplication whose size is calibrated on each worker so that the op takes
``compute * time_scale`` seconds, and copies ``comm * time_scale`` seconds'
worth of bytes per cross-device edge (at the calibrated copy bandwidth,
within a memory budget). A graph imported from a PyTorch model can run the
module's own ops through a different :class:`OpKernels` (the hook: ``setup``,
``run``, ``send``, ``teardown``; see ``module_kernels.py``), and
:class:`WaitKernels` emulates devices whose ops take exactly their modeled
time, which isolates the runtime itself.

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
from abc import ABC, abstractmethod
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..graph import DataflowGraph
from ..sim import check_assignment, lower_bound
from ..sim.trace import Trace
from .oracle import Measurement

__all__ = ["LocalExecutor", "Worker", "OpKernels", "CalibratedKernels", "WaitKernels", "Stopped"]


class Stopped(Exception):
    """Raised inside a kernel when the run was stopped (another op failed, or the timeout passed)."""


@dataclass
class Worker:
    """One device of the executor.

    Attributes:
        index: the device id that assignments use.
        device: the torch device its tensors live on.
        threads: intra-op threads (CPU workers).
        stream: the CUDA stream its ops run on (None on CPU).
        copy_stream: the CUDA stream copies into this device run on (None on CPU).
    """

    index: int
    device: Any
    threads: int
    stream: Any = None
    copy_stream: Any = None

    @property
    def name(self) -> str:
        return f"{self.device}" if self.stream is None else f"{self.device} stream {self.index}"

    def sync(self, stream: Any = None) -> None:
        """Wait until this worker's queued GPU work is done (nothing to do on CPU)."""
        stream = stream or self.stream
        if stream is not None:
            stream.synchronize()


class OpKernels(ABC):
    """What the executor runs for each op, and how an output reaches another device.

    ``setup`` is called once per measurement (allocate, calibrate), ``run``
    for each op on its worker's thread, ``send`` for each cross-device edge on
    a transfer thread, ``teardown`` after the measurement even when it failed.
    Kernels call ``stop.is_set()`` between chunks of work and raise
    :class:`Stopped` when it is set.
    """

    @abstractmethod
    def setup(self, graph: DataflowGraph, assignment: np.ndarray, workers: Sequence[Worker], time_scale: float) -> dict[str, Any]:
        """Prepare one measurement; returns facts for ``Measurement.details``."""

    @abstractmethod
    def run(self, op: int, inputs: dict[int, Any], worker: Worker, stop: threading.Event) -> Any:
        """Run ``op`` on ``worker`` given its inputs (edge id → received value); returns its output."""

    @abstractmethod
    def send(self, edge: int, value: Any, source: Worker, target: Worker) -> Any:
        """Copy the producer's ``value`` for ``edge`` into ``target``'s memory; returns the copy."""

    @abstractmethod
    def teardown(self) -> None:
        """Release everything ``setup`` allocated."""


def _torch():
    import torch

    return torch


def _in_thread(fn, threads: int):
    """Run ``fn()`` on a fresh thread with ``threads`` intra-op threads (as a worker would) and return its result."""
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            _torch().set_num_threads(threads)
            box["value"] = fn()
        except BaseException as exc:  # re-raised below, on the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=body, name="workbench-calibrate", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


@dataclass(frozen=True)
class _Speed:
    seconds_per_row: float
    copy_bytes_per_second: float


class CalibratedKernels(OpKernels):
    """Cost-only ops as calibrated matrix multiplications, edges as calibrated copies.

    Each worker holds a ``rows x width`` input block and a ``width x width``
    orthogonal weight. An op of compute cost ``c`` multiplies
    ``c * time_scale / seconds_per_row`` rows (in chunks of at most ``rows``,
    checking for a stop between chunks); ``seconds_per_row`` is measured once
    per device and thread count, as the fastest of several short batches (on
    a shared machine other processes only ever add time). An op first copies
    a few values of each input into its block and leaves a few of its results
    in its output, so the data really flows along the edges.

    An edge of communication cost ``m`` between devices moves
    ``m * time_scale * copy_bytes_per_second`` bytes (the measured copy
    bandwidth), at most ``max_transfer_bytes`` per edge; when all transfers
    together exceed ``memory_budget`` bytes every one is shrunk by the same
    factor (reported as ``transfer_fraction``).
    """

    def __init__(self, max_transfer_bytes: int = 8 << 20, memory_budget: int = 256 << 20) -> None:
        if max_transfer_bytes < 4 or memory_budget < 4:
            raise ValueError("max_transfer_bytes and memory_budget must be at least 4 bytes")
        self.max_transfer_bytes = int(max_transfer_bytes)
        self.memory_budget = int(memory_budget)
        self._speeds: dict[tuple[str, int], _Speed] = {}
        self._state: dict[str, Any] = {}

    @staticmethod
    def _shape(worker: Worker) -> tuple[int, int]:
        return (4096, 1024) if worker.device.type == "cuda" else (256, 256)

    def _workspace(self, worker: Worker) -> dict[str, Any]:
        torch = _torch()
        rows, width = self._shape(worker)
        generator = torch.Generator().manual_seed(worker.index)
        weight, _ = torch.linalg.qr(torch.randn(width, width, generator=generator))
        block = torch.rand(rows, width, generator=generator)
        return {"w": weight.to(worker.device), "x": block.to(worker.device), "y": torch.empty(rows, width, device=worker.device)}

    def _calibrate(self, worker: Worker) -> _Speed:
        key = (str(worker.device), worker.threads)
        if key in self._speeds:
            return self._speeds[key]
        torch = _torch()

        def measure() -> _Speed:
            space = self._workspace(worker)
            _settle([worker])
            rows = space["x"].shape[0]

            def per_call(fn, min_seconds: float) -> float:
                """The fastest of several short batches: other processes only ever add time."""
                fn()
                worker.sync()
                best, began, batches = math.inf, time.perf_counter(), 0
                while batches < 5 or time.perf_counter() - began < min_seconds:
                    start = time.perf_counter()
                    for _ in range(3):
                        fn()
                    worker.sync()
                    best = min(best, (time.perf_counter() - start) / 3)
                    batches += 1
                return best

            with _stream(worker):
                chunk = per_call(lambda: torch.mm(space["x"], space["w"], out=space["y"]), 0.05)
                source = torch.empty(1 << 21, device=worker.device)
                target = torch.empty_like(source)
                copy = per_call(lambda: target.copy_(source), 0.02)
            return _Speed(chunk / rows, source.numel() * source.element_size() / copy)

        self._speeds[key] = _in_thread(measure, worker.threads)
        return self._speeds[key]

    def setup(self, graph: DataflowGraph, assignment: np.ndarray, workers: Sequence[Worker], time_scale: float) -> dict[str, Any]:
        torch = _torch()
        speeds = [self._calibrate(w) for w in workers]
        rows = np.array([graph.compute[op] * time_scale / speeds[assignment[op]].seconds_per_row for op in range(graph.num_nodes)])
        cross = np.flatnonzero(assignment[graph.src] != assignment[graph.dst])
        bandwidth = np.array([min(speeds[assignment[graph.src[e]]].copy_bytes_per_second, speeds[assignment[graph.dst[e]]].copy_bytes_per_second) for e in cross])
        wanted = np.minimum(graph.comm[cross] * time_scale * bandwidth, self.max_transfer_bytes) if cross.size else np.zeros(0)
        fraction = min(1.0, self.memory_budget / wanted.sum()) if wanted.sum() > 0 else 1.0
        elements = np.maximum(1, (wanted * fraction / 4).astype(np.int64))
        out_elements = np.ones(graph.num_nodes, dtype=np.int64)
        np.maximum.at(out_elements, graph.src[cross], elements)
        self._state = {
            "rows": rows,
            "spaces": [self._workspace(w) for w in workers],
            "outputs": [torch.empty(int(k), device=workers[assignment[op]].device).fill_(1.0) for op, k in enumerate(out_elements)],
            "received": {int(e): torch.empty(int(k), device=workers[assignment[graph.dst[e]]].device) for e, k in zip(cross, elements)},
        }
        return {
            "kernel": "calibrated matmul",
            "seconds_per_row": [s.seconds_per_row for s in speeds],
            "copy_bytes_per_second": [s.copy_bytes_per_second for s in speeds],
            "transfer_bytes": int(elements.sum() * 4),
            "transfer_fraction": float(np.sum(elements * 4) / wanted.sum()) if wanted.sum() > 0 else 1.0,
            "transfers_capped": int(np.sum(graph.comm[cross] * time_scale * bandwidth > self.max_transfer_bytes)) if cross.size else 0,
        }

    def run(self, op: int, inputs: dict[int, Any], worker: Worker, stop: threading.Event) -> Any:
        torch = _torch()
        space = self._state["spaces"][worker.index]
        x, w, y = space["x"], space["w"], space["y"]
        width = x.shape[1]
        with _stream(worker):
            for value in inputs.values():
                k = min(width, value.numel())
                x[0, :k].copy_(value[:k])
            left = int(round(self._state["rows"][op]))
            while left > 0:
                if stop.is_set():
                    raise Stopped()
                m = min(left, x.shape[0])
                torch.mm(x[:m], w, out=y[:m])
                left -= m
            out = self._state["outputs"][op]
            k = min(width, out.numel())
            out[:k].copy_(y[0, :k])
        return out

    def send(self, edge: int, value: Any, source: Worker, target: Worker) -> Any:
        received = self._state["received"][edge]
        stream = target.copy_stream
        with _stream(target, stream):
            received.copy_(value[: received.numel()], non_blocking=stream is not None)
        target.sync(stream)
        return received

    def teardown(self) -> None:
        self._state = {}


class WaitKernels(OpKernels):
    """Emulated devices: each op and each copy just waits its modeled time (``cost * time_scale``).

    No CPU work, so many workers run truly in parallel even on a small or
    busy machine. What remains is the executor itself (threads, queues,
    wake-ups): measuring with these kernels shows how closely the runtime
    follows the simulator's model and what it costs per op.
    """

    def setup(self, graph: DataflowGraph, assignment: np.ndarray, workers: Sequence[Worker], time_scale: float) -> dict[str, Any]:
        self.op_seconds, self.edge_seconds = graph.compute * time_scale, graph.comm * time_scale
        return {"kernel": "wait"}

    def run(self, op: int, inputs: dict[int, Any], worker: Worker, stop: threading.Event) -> Any:
        if stop.wait(self.op_seconds[op]):
            raise Stopped()
        return op

    def send(self, edge: int, value: Any, source: Worker, target: Worker) -> Any:
        time.sleep(self.edge_seconds[edge])
        return value

    def teardown(self) -> None:
        pass


def _settle(workers: Sequence[Worker]) -> None:
    """Wait for work queued on the GPUs' default streams (allocations, fills) before worker streams use it."""
    for device in {w.device for w in workers if w.stream is not None}:
        _torch().cuda.synchronize(device)


class _stream:
    """``torch.cuda.stream(worker's stream)`` on CUDA workers, nothing on CPU."""

    def __init__(self, worker: Worker, stream: Any = None) -> None:
        self.stream = stream or worker.stream
        self.context = None

    def __enter__(self):
        if self.stream is not None:
            self.context = _torch().cuda.stream(self.stream)
            self.context.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.context is not None:
            self.context.__exit__(*exc)


class _Run:
    """One execution of the graph: worker threads, transfer threads, and what they recorded."""

    def __init__(self, graph: DataflowGraph, assignment: np.ndarray, workers: Sequence[Worker], kernels: OpKernels, pool: ThreadPoolExecutor) -> None:
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
        torch = _torch()
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
            torch = _torch()
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

    def measure(self, graph: DataflowGraph, assignment: Sequence[int] | np.ndarray, repeats: int = 3, timeout: float = 60.0) -> Measurement:
        """Run ``warmup`` untimed and ``repeats`` timed executions of ``assignment``, all within ``timeout`` seconds."""
        values = check_assignment(graph, assignment, self.devices)
        if isinstance(repeats, bool) or not isinstance(repeats, (int, np.integer)) or repeats < 1:
            raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
        if not (math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout!r}")
        deadline = time.monotonic() + timeout
        torch = _torch()
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
            _settle(workers)
            for k in range(self.warmup + repeats):
                left = deadline - time.monotonic()
                label = "warm-up run" if k < self.warmup else f"run {k - self.warmup + 1} of {repeats}"
                if left <= 0:
                    errors.append(f"{label}: the {timeout:.3g} s timeout passed before it started")
                    break
                trace, error = _Run(graph, values, workers, self.kernels, pool).execute(left)
                if error is not None:
                    errors.append(f"{label}: {error}")
                    break
                if k >= self.warmup:
                    samples.append(trace.makespan)
                    traces.append(trace)
        except Exception as exc:
            errors.append(f"setup: {type(exc).__name__}: {exc}")
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            self.kernels.teardown()
            torch.set_num_threads(saved_threads)
            if any(w.stream is not None for w in workers):
                torch.cuda.empty_cache()
        return Measurement.from_samples(samples, traces, errors=errors, oracle="local", details=details)
