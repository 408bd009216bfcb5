"""Calibrate the simulator against a real oracle, and measure the simulation-to-real gap.

``calibrate(graph, oracle, devices)`` measures many placements (every quick
heuristic, uniform random ones, random ones restricted to fewer devices, and
the critical-path placement with a growing share of ops moved at random), then
fits the simulator to what the measured traces show:

- per op and device: ``duration = seconds_per_unit[device] * (compute +
  overhead)`` (least squares over every op of every measured run, one line
  per device) gives the time scale (the median device), relative device
  speeds and the per-op overhead (in seconds on the median device);
- per cross-device transfer: ``duration = latency + seconds_per_comm_unit * comm``
  gives the link latency and bandwidth (one pair of numbers for every link:
  per-pair fits are too noisy on a handful of runs);
- a last factor (the median of measured over predicted makespans) absorbs
  what the simulator does not model (workers sharing CPU cores, dispatch).

It reports Spearman's rank correlation and the median relative error between
simulated and measured makespans before calibration (the nominal model: the
oracle's own time scale, identical devices, free dispatch) and after, plus
the rank correlation on held-out placements (fitted on the other half). The
paper never reported this gap. Measurements are appended to a journal file
so an interrupted calibration resumes where it stopped.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..cluster import Cluster, num_devices
from ..fileio import atomic_write_bytes, atomic_write_json, atomic_write_text
from ..graph import DataflowGraph
from ..sim.trace import Trace
from .oracle import CostOracle, Measurement, SimulatorOracle, spearman

__all__ = ["calibrate", "Calibration", "calibration_placements", "fit_simulator"]


def calibration_placements(graph: DataflowGraph, devices: int, count: int = 24, seed: int = 0) -> list[tuple[str, np.ndarray]]:
    """``count`` labelled placements spanning good to bad ones, the same for the same ``seed``."""
    from ..placers import methods
    from ..placers.base import place

    n = graph.num_nodes
    rng = np.random.default_rng(seed)
    chosen: list[tuple[str, np.ndarray]] = []
    for method in methods("baseline", "heuristic"):
        if len(chosen) < count:
            chosen.append((method, np.asarray(place(graph, method, devices, seed=seed).assignment)))
    base = dict(chosen).get("critical_path")
    if base is None:
        base = np.asarray(place(graph, "critical_path", devices, seed=seed).assignment)
    families = ["random", "perturbed"] + (["fewer_devices"] if devices > 2 else [])
    k = 0
    while len(chosen) < count:
        family = families[k % len(families)]
        if family == "random":
            chosen.append((f"random #{k}", rng.integers(0, devices, n)))
        elif family == "perturbed":
            share = (0.1, 0.25, 0.5)[(k // 3) % 3]
            moved = base.copy()
            pick = rng.random(n) < share
            moved[pick] = rng.integers(0, devices, int(pick.sum()))
            chosen.append((f"critical_path {int(share * 100)}% moved #{k}", moved))
        else:
            used = 2 + (k // 3) % (devices - 2)
            chosen.append((f"random on {used} devices #{k}", rng.integers(0, used, n)))
        k += 1
    return [(label, a.astype(np.int64)) for label, a in chosen[:count]]


def _least_squares(design: np.ndarray, target: np.ndarray) -> np.ndarray:
    solution, *_ = np.linalg.lstsq(design, target, rcond=None)
    return solution


def fit_simulator(
    graph: DataflowGraph, traces: Sequence[Trace], devices: int, nominal_scale: float
) -> tuple[SimulatorOracle, dict[str, Any]]:
    """Fit a :class:`SimulatorOracle` (before the final makespan factor) to measured traces."""
    device = np.concatenate([t.device for t in traces])
    compute = np.tile(graph.compute, len(traces))
    took = np.concatenate([t.end - t.start for t in traces])
    per_unit = np.full(devices, np.nan)
    overhead_units = np.full(devices, np.nan)
    for d in range(devices):
        mine = device == d
        if mine.sum() >= 2 and np.ptp(compute[mine]) > 0:
            intercept, slope = _least_squares(np.column_stack([np.ones(mine.sum()), compute[mine]]), took[mine])
            if slope > 0:
                per_unit[d], overhead_units[d] = slope, max(0.0, intercept) / slope
    known = np.isfinite(per_unit)
    if not known.any():
        raise ValueError("cannot fit op times: no device ran ops of different compute costs")
    per_unit[~known] = np.median(per_unit[known])
    scale = float(np.median(per_unit))
    overhead = float(np.median(overhead_units[known])) * scale
    speeds = tuple(float(scale / s) for s in per_unit)

    index = {(int(u), int(v)): e for e, (u, v) in enumerate(zip(graph.src.tolist(), graph.dst.tolist(), strict=False))}
    comm, moved = [], []
    for trace in traces:
        for u, v, began, ended in zip(trace.transfer_src_op, trace.transfer_dst_op, trace.transfer_start, trace.transfer_end, strict=False):
            comm.append(graph.comm[index[int(u), int(v)]])
            moved.append(ended - began)
    latency, per_comm = 0.0, scale
    if len(comm) >= 2 and np.ptp(comm) > 0:
        intercept, slope = _least_squares(np.column_stack([np.ones(len(comm)), comm]), np.asarray(moved))
        latency, per_comm = max(0.0, float(intercept)), float(slope) if slope > 0 else scale
    elif comm:
        latency = max(0.0, float(np.median(moved)))
    off = ~np.eye(devices, dtype=bool)
    cluster = Cluster(
        speeds=speeds,
        bandwidth=np.where(off, scale / per_comm, 1.0).tolist(),
        latency=np.where(off, latency / scale, 0.0).tolist(),
    )
    fit = {
        "op_overhead_seconds": overhead,
        "seconds_per_compute_unit": per_unit.tolist(),
        "link_latency_seconds": latency,
        "seconds_per_comm_unit": per_comm,
        "ops_fitted": int(took.size),
        "transfers_fitted": len(comm),
    }
    return SimulatorOracle(cluster, scale, overhead), fit


def _rescaled(oracle: SimulatorOracle, factor: float) -> SimulatorOracle:
    return SimulatorOracle(oracle.devices, oracle.time_scale * factor, oracle.op_overhead * factor, oracle.priority)


def _predict(oracle: SimulatorOracle, graph: DataflowGraph, assignments: Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
    return np.array([oracle.measure(graph, a).seconds for a in assignments])


def _fit_and_predict(
    graph: DataflowGraph, traces: list[Trace], devices: int, nominal_scale: float, measured: np.ndarray, assignments: np.ndarray
) -> tuple[SimulatorOracle, dict[str, Any]]:
    structural, fit = fit_simulator(graph, traces, devices, nominal_scale)
    factor = float(np.median(measured / _predict(structural, graph, assignments)))
    fit["makespan_factor"] = factor
    return _rescaled(structural, factor), fit


def _median_relative_error(predicted: np.ndarray, measured: np.ndarray) -> float:
    return float(np.median(np.abs(predicted - measured) / measured))


@dataclass(frozen=True)
class Calibration:
    """The outcome of :func:`calibrate`.

    Attributes:
        graph: the graph's name.
        devices: number of devices.
        labels: what each measured placement is.
        assignments: the placements, one row each.
        measured: measured makespan of each (seconds; NaN when it failed).
        before: the nominal simulator's prediction for each (seconds).
        after: the calibrated simulator's prediction for each (seconds).
        nominal: the simulator before calibration.
        fitted: the simulator after calibration.
        fit: the fitted parameters and how many ops/transfers they rest on.
        summary: Spearman and median relative error before/after, held-out Spearman.
        failures: the errors of placements whose measurement failed.
    """

    graph: str
    devices: int
    labels: list[str]
    assignments: np.ndarray
    measured: np.ndarray
    before: np.ndarray
    after: np.ndarray
    nominal: SimulatorOracle
    fitted: SimulatorOracle
    fit: dict[str, Any]
    summary: dict[str, Any]
    failures: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        def plain(values: np.ndarray) -> list:
            return [None if not math.isfinite(x) else float(x) for x in values]

        return {
            "graph": self.graph,
            "devices": self.devices,
            "summary": {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in self.summary.items()},
            "fit": self.fit,
            "nominal": self.nominal.to_dict(),
            "fitted": self.fitted.to_dict(),
            "placements": [
                {"label": label, "assignment": a.tolist(), "measured": m, "before": b, "after": f}
                for label, a, m, b, f in zip(
                    self.labels, self.assignments, plain(self.measured), plain(self.before), plain(self.after), strict=True
                )
            ],
            "failures": self.failures,
        }

    def figure(self) -> Any:
        """A plotly scatter of simulated against measured makespans (ms), before and after calibration."""
        from ..viz import calibration_scatter

        ok = np.isfinite(self.measured)
        series = {
            name: (predicted[ok] * 1e3, self.measured[ok] * 1e3)
            for name, predicted in (("before (nominal)", self.before), ("after (calibrated)", self.after))
        }
        labels = [label for label, good in zip(self.labels, ok, strict=False) if good]
        title = f"{self.graph} on {self.devices} devices: simulated vs measured makespan"
        return calibration_scatter(series, labels, title, x_title="simulated makespan (ms)", y_title="measured makespan (ms)", height=650)

    def save(self, directory: str | os.PathLike, png: bool = False) -> dict[str, str]:
        """Write ``calibration.json``, ``oracle.json`` (the fitted simulator), the figure as HTML and JSON, and a PNG on request."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        paths = {
            "report": out / "calibration.json",
            "oracle": out / "oracle.json",
            "html": out / "calibration.html",
            "figure": out / "calibration.figure.json",
        }
        atomic_write_json(paths["report"], self.to_dict())
        atomic_write_json(paths["oracle"], self.fitted.to_dict())
        fig = self.figure()
        atomic_write_text(paths["html"], fig.to_html(include_plotlyjs="cdn"))
        atomic_write_text(paths["figure"], fig.to_json())
        if png:
            from ..viz import to_png

            paths["png"] = out / "calibration.png"
            atomic_write_bytes(paths["png"], to_png(fig, width=900, height=650, scale=1.0))
        return {k: str(v) for k, v in paths.items()}


def _journal_key(round_: int, label: str, assignment: np.ndarray) -> str:
    return f"{round_}|{label}|{','.join(map(str, assignment.tolist()))}"


def _load_journal(path: Path | None) -> dict[str, Measurement]:
    done: dict[str, Measurement] = {}
    if path is None or not path.exists():
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
            measurement = Measurement.from_dict(entry["measurement"])
        except (ValueError, KeyError, TypeError):
            continue  # a half-written last line from an interrupted run
        if measurement.ok:  # failures are measured again
            done[entry["key"]] = measurement
    return done


def _measure_rounds(
    graph: DataflowGraph,
    oracle: CostOracle,
    chosen: list[tuple[str, np.ndarray]],
    repeats: int,
    timeout: float,
    journal: str | os.PathLike | None,
    progress: bool,
) -> list[list[Measurement]]:
    """Each chosen placement's ``repeats`` runs, measured in rounds; finished runs are journaled and read back on a rerun."""
    from ..progress import progress_bar

    journal_path = Path(journal) if journal is not None else None
    done = _load_journal(journal_path)
    rounds = [(r, label, a) for r in range(repeats) for label, a in chosen]
    for r, label, assignment in progress_bar(rounds, desc=f"calibrate {graph.name}", disable=not progress, unit="run"):
        key = _journal_key(r, label, assignment)
        if key not in done:
            done[key] = oracle.measure(graph, assignment, repeats=1, timeout=timeout, trace=True)
            if journal_path is not None:
                journal_path.parent.mkdir(parents=True, exist_ok=True)
                with journal_path.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps({"key": key, "measurement": done[key].to_dict()}) + "\n")
    return [[done[_journal_key(r, label, a)] for r in range(repeats)] for label, a in chosen]


def calibrate(
    graph: DataflowGraph,
    oracle: CostOracle,
    devices: int | None = None,
    placements: int = 24,
    repeats: int = 3,
    timeout: float = 60.0,
    seed: int = 0,
    nominal_scale: float | None = None,
    journal: str | os.PathLike | None = None,
    progress: bool = True,
    statistic: str = "median",
) -> Calibration:
    """Measure ``placements`` placements with ``oracle``, fit the simulator, and compare before and after.

    Args:
        graph: the graph to calibrate on.
        oracle: a real oracle that returns traces (the local executor, or a
            remote engine; the simulator is accepted for testing).
        devices: devices to place on (default: the oracle's).
        placements: how many placements to measure (at least 4).
        repeats: timed runs per placement, measured in rounds (every
            placement once, then again), so that a change in the machine's
            load hits all placements alike rather than a few.
        timeout: seconds per placement.
        seed: which random placements.
        nominal_scale: seconds per graph unit before calibration (default: the
            time scale the oracle reports, else the median measured/simulated ratio).
        journal: a JSON-lines file of finished measurements: appended to as
            they finish, and read first so an interrupted run resumes (failed
            measurements are tried again).
        progress: show a tqdm progress bar.
        statistic: ``"median"`` or ``"min"`` of each placement's runs
            (the minimum resists interference from other processes).
    """
    devices = devices or num_devices(oracle.devices)
    if statistic not in ("median", "min"):
        raise ValueError(f"statistic must be 'median' or 'min', got {statistic!r}")
    if placements < 4:
        raise ValueError(f"calibration needs at least 4 placements, got {placements}")
    chosen = calibration_placements(graph, devices, placements, seed)
    runs = _measure_rounds(graph, oracle, chosen, repeats, timeout, journal, progress)
    results = [
        Measurement.from_samples(
            [s for m in mine for s in m.samples],
            errors=[e for m in mine for e in m.errors],
            oracle=mine[0].oracle,
            details=dict(mine[0].details),
        )
        for mine in runs
    ]

    labels = [label for label, _ in chosen]
    assignments = np.array([a for _, a in chosen])
    typical = np.median if statistic == "median" else np.min
    measured = np.array([float(typical(m.samples)) if m.ok else math.nan for m in results])
    failures = [f"{label}: {m.error}" for label, m in zip(labels, results, strict=False) if not m.ok]
    ok = np.flatnonzero(np.isfinite(measured))
    if ok.size < 4:
        raise RuntimeError(f"only {ok.size} of {len(chosen)} measurements succeeded; first failure: {failures[0] if failures else 'none'}")
    traces = [m.trace for i in ok for m in runs[i] if m.trace is not None]
    if not traces:
        raise ValueError(f"the oracle {type(oracle).__name__} returned no traces; calibration fits op and transfer times from traces")

    unit = SimulatorOracle(devices, 1.0)
    simulated_units = _predict(unit, graph, assignments)
    if nominal_scale is None:
        reported = results[ok[0]].details.get("time_scale")
        nominal_scale = float(reported) if reported else float(np.median(measured[ok] / simulated_units[ok]))
    nominal = SimulatorOracle(devices, nominal_scale)
    before = simulated_units * nominal_scale

    fitted, fit = _fit_and_predict(graph, traces, devices, nominal_scale, measured[ok], assignments[ok])
    after = _predict(fitted, graph, assignments)

    half_a, half_b = ok[0::2], ok[1::2]
    held_out = math.nan
    traces_a = [m.trace for i in half_a for m in runs[i] if m.trace is not None]
    if half_b.size >= 2 and traces_a:
        partial, _ = _fit_and_predict(graph, traces_a, devices, nominal_scale, measured[half_a], assignments[half_a])
        held_out = spearman(_predict(partial, graph, assignments[half_b]), measured[half_b])

    summary = {
        "statistic": statistic,
        "placements": len(chosen),
        "measured": int(ok.size),
        "spearman_before": spearman(before[ok], measured[ok]),
        "spearman_after": spearman(after[ok], measured[ok]),
        "spearman_after_held_out": held_out,
        "median_relative_error_before": _median_relative_error(before[ok], measured[ok]),
        "median_relative_error_after": _median_relative_error(after[ok], measured[ok]),
    }
    return Calibration(graph.name, devices, labels, assignments, measured, before, after, nominal, fitted, fit, summary, failures)
