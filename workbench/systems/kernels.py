"""What the local executor runs for each op: the kernel interface and the two cost-only kernels.

:class:`OpKernels` is the hook (``setup``, ``run``, ``send``, ``teardown``)
between the runtime (:mod:`.executor`) and the work an op does.
:class:`CalibratedKernels` runs, for a cost-only graph (the paper's files,
generated graphs), a matrix multiplication whose size is calibrated on each
worker so that the op takes ``compute * time_scale`` seconds, and copies
``comm * time_scale`` seconds' worth of bytes per cross-device edge (at the
calibrated copy bandwidth, within a memory budget). :class:`WaitKernels`
emulates devices whose ops take exactly their modeled time, which isolates
the runtime itself. A graph imported from a PyTorch model runs the module's
own ops through :class:`~workbench.systems.module_kernels.ModuleKernels`.

Kernels check ``stop`` between chunks of work and raise :class:`Stopped`,
so a failed or timed-out run ends promptly. torch is imported only when a
measurement starts.
"""

from __future__ import annotations

import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..graph import DataflowGraph

__all__ = ["Worker", "OpKernels", "CalibratedKernels", "WaitKernels", "Stopped", "on_stream", "settle", "torch_module"]


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


def torch_module() -> Any:
    """torch, imported on first use."""
    import torch

    return torch


def _in_thread(fn: Callable[[], Any], threads: int) -> Any:
    """Run ``fn()`` on a fresh thread with ``threads`` intra-op threads (as a worker would) and return its result."""
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            torch_module().set_num_threads(threads)
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
        torch = torch_module()
        rows, width = self._shape(worker)
        generator = torch.Generator().manual_seed(worker.index)
        weight, _ = torch.linalg.qr(torch.randn(width, width, generator=generator))
        block = torch.rand(rows, width, generator=generator)
        return {"w": weight.to(worker.device), "x": block.to(worker.device), "y": torch.empty(rows, width, device=worker.device)}

    def _calibrate(self, worker: Worker) -> _Speed:
        key = (str(worker.device), worker.threads)
        if key in self._speeds:
            return self._speeds[key]
        torch = torch_module()

        def measure() -> _Speed:
            space = self._workspace(worker)
            settle([worker])
            rows = space["x"].shape[0]

            def per_call(fn: Callable[[], Any], min_seconds: float) -> float:
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

            with on_stream(worker):
                chunk = per_call(lambda: torch.mm(space["x"], space["w"], out=space["y"]), 0.05)
                source = torch.empty(1 << 21, device=worker.device)
                target = torch.empty_like(source)
                copy = per_call(lambda: target.copy_(source), 0.02)
            return _Speed(chunk / rows, source.numel() * source.element_size() / copy)

        self._speeds[key] = _in_thread(measure, worker.threads)
        return self._speeds[key]

    def setup(self, graph: DataflowGraph, assignment: np.ndarray, workers: Sequence[Worker], time_scale: float) -> dict[str, Any]:
        torch = torch_module()
        speeds = [self._calibrate(w) for w in workers]
        rows = np.array([graph.compute[op] * time_scale / speeds[assignment[op]].seconds_per_row for op in range(graph.num_nodes)])
        cross = np.flatnonzero(assignment[graph.src] != assignment[graph.dst])
        bandwidth = np.array(
            [
                min(speeds[assignment[graph.src[e]]].copy_bytes_per_second, speeds[assignment[graph.dst[e]]].copy_bytes_per_second)
                for e in cross
            ]
        )
        wanted = np.minimum(graph.comm[cross] * time_scale * bandwidth, self.max_transfer_bytes) if cross.size else np.zeros(0)
        fraction = min(1.0, self.memory_budget / wanted.sum()) if wanted.sum() > 0 else 1.0
        elements = np.maximum(1, (wanted * fraction / 4).astype(np.int64))
        out_elements = np.ones(graph.num_nodes, dtype=np.int64)
        np.maximum.at(out_elements, graph.src[cross], elements)
        self._state = {
            "rows": rows,
            "spaces": [self._workspace(w) for w in workers],
            "outputs": [torch.empty(int(k), device=workers[assignment[op]].device).fill_(1.0) for op, k in enumerate(out_elements)],
            "received": {
                int(e): torch.empty(int(k), device=workers[assignment[graph.dst[e]]].device) for e, k in zip(cross, elements, strict=True)
            },
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
        torch = torch_module()
        space = self._state["spaces"][worker.index]
        x, w, y = space["x"], space["w"], space["y"]
        width = x.shape[1]
        with on_stream(worker):
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
        with on_stream(target, stream):
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


def settle(workers: Sequence[Worker]) -> None:
    """Wait for work queued on the GPUs' default streams (allocations, fills) before worker streams use it."""
    for device in {w.device for w in workers if w.stream is not None}:
        torch_module().cuda.synchronize(device)


class on_stream:
    """``torch.cuda.stream(worker's stream)`` on CUDA workers, nothing on CPU."""

    def __init__(self, worker: Worker, stream: Any = None) -> None:
        self.stream = stream or worker.stream
        self.context: Any = None

    def __enter__(self) -> on_stream:
        if self.stream is not None:
            self.context = torch_module().cuda.stream(self.stream)
            self.context.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.context is not None:
            self.context.__exit__(*exc)
