"""The cost-oracle interface, the local executor and calibration (workbench.systems)."""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import workbench as wb
from workbench.cli import main
from workbench.systems import Measurement, MeasurementError, SimulatorOracle, calibrate, measure, spearman, trace_violations
from workbench.systems.executor import CalibratedKernels, LocalExecutor, WaitKernels

SMALL = dict(memory_budget=8 << 20, max_transfer_bytes=1 << 20)


def _workbench_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("workbench-")]


@pytest.fixture(scope="module")
def executor3() -> LocalExecutor:
    return LocalExecutor(3, device="cpu", target_seconds=0.03, warmup=0, kernels=CalibratedKernels(**SMALL))


# ------------------------------------------------------------------ oracle
def test_simulator_oracle_is_the_simulator_in_seconds():
    graph = wb.bundled_graph("chain_mm")
    assignment = np.arange(graph.num_nodes) % 4
    oracle = SimulatorOracle(4, time_scale=1e-12)
    result = oracle.measure(graph, assignment)
    expected = wb.simulate(graph, assignment, 4).makespan * 1e-12
    assert result.ok and result.seconds == pytest.approx(expected, rel=1e-12)
    assert result.trace.makespan == pytest.approx(expected, rel=1e-12)
    assert measure(graph, assignment, "sim", devices=4, time_scale=1e-12).seconds == pytest.approx(expected, rel=1e-12)
    slower = SimulatorOracle(4, time_scale=1e-12, op_overhead=1e-3).measure(graph, [0] * graph.num_nodes)
    alone = SimulatorOracle(4, time_scale=1e-12).measure(graph, [0] * graph.num_nodes)
    assert slower.seconds == pytest.approx(alone.seconds + graph.num_nodes * 1e-3, rel=1e-9)
    with pytest.raises(wb.AssignmentError):
        oracle.measure(graph, [4] * graph.num_nodes)
    with pytest.raises(ValueError):
        SimulatorOracle(4, time_scale=0.0)


@pytest.mark.parametrize("overhead", [0.0, 1e-3])
def test_simulator_oracle_makespan_is_measure_without_the_trace(overhead):
    graph, other = wb.bundled_graph("chain_mm"), wb.bundled_graph("ffnn")
    oracle = SimulatorOracle(wb.Cluster(speeds=[1.0, 2.0, 1.0, 0.5]), time_scale=1e-12, op_overhead=overhead, priority="blevel")
    for g in (graph, other, graph):  # the cached evaluator per graph must not leak between graphs
        assignment = np.arange(g.num_nodes) % 4
        assert oracle.makespan(g, assignment) == pytest.approx(oracle.measure(g, assignment).seconds, rel=1e-12)
    with pytest.raises(wb.AssignmentError):
        oracle.makespan(graph, [4] * graph.num_nodes)


def test_every_backend_is_the_one_cost_oracle_and_training_adapts_only_functions():
    from workbench.systems import CostOracle, FastCostOracle, RemoteEngine, makespan_of
    from workbench.systems.oracle import CallableOracle, as_oracle
    from workbench.training.oracle import oracle_kind

    graph = wb.bundled_graph("chain_mm")
    assignment = np.arange(graph.num_nodes) % 2
    sim = SimulatorOracle(2)
    for oracle in (sim, LocalExecutor(2, device="cpu"), RemoteEngine("127.0.0.1", 1, devices=2)):
        assert isinstance(oracle, CostOracle) and as_oracle(oracle, 2) is oracle
    assert isinstance(sim, FastCostOracle) and not isinstance(LocalExecutor(2), FastCostOracle)
    assert isinstance(as_oracle(None, 2), SimulatorOracle) and oracle_kind(sim) == "sim"

    calls = []
    wrapped = as_oracle(lambda g, a: calls.append(len(a)) or 3.5, 2)
    assert isinstance(wrapped, CallableOracle) and isinstance(wrapped, CostOracle) and oracle_kind(wrapped) == "real"
    assert makespan_of(wrapped, graph, assignment) == 3.5 and calls == [graph.num_nodes]
    assert makespan_of(sim, graph, assignment) == wb.simulate(graph, assignment, 2).makespan
    with pytest.raises(MeasurementError):  # a NaN from a plain function is a failed measurement, not a reward
        makespan_of(as_oracle(lambda g, a: float("nan"), 2), graph, assignment)
    with pytest.raises(TypeError, match="measure"):
        as_oracle(42, 2)


def constant_oracle(devices: int):
    """A ``module:factory`` oracle for the resolver test: a plain function, which the resolver wraps."""
    return lambda graph, assignment: 2.5


def test_one_resolver_builds_every_kind_of_oracle_for_training_and_the_cli(capsys):
    from workbench.systems import CallableOracle, RemoteEngine, make_oracle, oracle_spec_kind
    from workbench.training import TrainConfig
    from workbench.training.oracle import oracle_from_spec

    assert isinstance(oracle_from_spec("sim", 2), SimulatorOracle)
    assert isinstance(oracle_from_spec("local", 2), LocalExecutor)
    remote = oracle_from_spec("127.0.0.1:9", 2)
    assert isinstance(remote, RemoteEngine) and remote.address == "127.0.0.1:9" and remote.devices == 2
    wrapped = make_oracle("tests.test_systems:constant_oracle", 2)
    assert isinstance(wrapped, CallableOracle) and wrapped.measure(wb.bundled_graph("chain_mm"), [0]).seconds == 2.5
    for spec in ("sim", "local", "host:80", "pkg.mod:factory"):
        TrainConfig(("chain_mm",), oracle=spec)  # accepted by the config as by the resolver
    for spec in ("simulator", "host:", ":80", "module:"):
        with pytest.raises(ValueError, match="use 'sim', 'local', HOST:PORT of a remote engine, or module:factory"):
            oracle_spec_kind(spec)
        with pytest.raises(ValueError, match="TrainConfig.oracle"):
            TrainConfig(("chain_mm",), oracle=spec)
    with pytest.raises(ValueError, match="cannot import it"):
        make_oracle("tests.test_systems:no_such_factory", 2)
    assert main(["calibrate", "chain_mm", "--engine", "sim"]) == 2
    assert "--engine is HOST:PORT" in capsys.readouterr().err


def test_calibration_asks_every_oracle_for_traces():
    graph = wb.bundled_graph("ffnn")
    asked = []

    class Recording(SimulatorOracle):
        def measure(self, graph, assignment, repeats=1, timeout=60.0, trace=False):
            asked.append(trace)
            return super().measure(graph, assignment, repeats, timeout, trace)

    calibrate(graph, Recording(4, time_scale=1e-12), placements=4, repeats=1, progress=False)
    assert asked and all(asked)


def test_measurement_median_failure_and_json_round_trip():
    m = Measurement.from_samples([3.0, 1.0, 2.0], oracle="x")
    assert m.ok and m.seconds == 2.0 and m.samples == (3.0, 1.0, 2.0)
    failed = Measurement.from_samples([1.0], errors=["op 3 raised"])
    assert not failed.ok and math.isnan(failed.seconds) and failed.error == "op 3 raised"
    assert not Measurement.from_samples([]).ok
    back = Measurement.from_dict(failed.to_dict())
    assert math.isnan(back.seconds) and back.errors == failed.errors
    assert float(m) == 2.0  # usable as a reward
    with pytest.raises(MeasurementError, match="op 3 raised"):
        float(failed)  # never a silent number


def test_spearman_known_values():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ties get average ranks: x ranks (0.5, 0.5, 2, 3) against y ranks (0, 1, 2, 3)
    assert spearman([1, 1, 2, 3], [1, 2, 3, 4]) == pytest.approx(np.corrcoef([0.5, 0.5, 2, 3], [0, 1, 2, 3])[0, 1])
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-300, 300), min_size=3, max_size=20, unique=True), st.randoms(use_true_random=False))
def test_spearman_is_invariant_under_monotone_maps(values, rnd):
    x = np.array(values, dtype=float)
    y = np.array([rnd.randint(0, 1000) for _ in values], dtype=float)
    assert spearman(x, y) == pytest.approx(spearman(np.exp(x / 10), y * 3 + 1), nan_ok=True)
    assert spearman(x, y) == pytest.approx(-spearman(-x, y), nan_ok=True)


# ----------------------------------------------------------------- executor
@pytest.mark.parametrize("name", wb.PAPER_GRAPHS)
def test_executor_runs_each_paper_graph_and_its_trace_obeys_the_model(name, executor3):
    graph = wb.bundled_graph(name)
    assignment = wb.place(graph, "random", 3, seed=1).assignment
    result = executor3.measure(graph, assignment, repeats=1, timeout=60)
    assert result.ok, result.errors
    trace = result.trace
    assert trace_violations(graph, assignment, trace, slack=1e-4) == []
    assert result.seconds == pytest.approx(trace.makespan) and result.seconds > 0
    assert np.all(trace.end > 0)
    cross = np.count_nonzero(assignment[graph.src] != assignment[graph.dst])
    assert trace.transfer_src_op.size == cross
    assert result.details["time_scale"] == pytest.approx(0.03 / wb.lower_bound(graph, 3))
    assert _workbench_threads() == []


def _most_ops_at_once(trace, devices=None) -> int:
    """The most ops (on ``devices`` when given) that run at one instant of ``trace``; an op ending as another starts does not overlap it."""
    from workbench.sim.trace_events import busy_steps

    mine = np.isin(trace.device, devices) if devices is not None else np.ones(trace.num_ops, bool)
    return int(busy_steps(np.asarray(trace.start, float)[mine], np.asarray(trace.end, float)[mine])[1].max())


def _overlapping_transfers(trace) -> int:
    """The most transfers in flight at one instant of ``trace``."""
    from workbench.sim.trace_events import busy_steps

    return int(busy_steps(np.asarray(trace.transfer_start, float), np.asarray(trace.transfer_end, float))[1].max(initial=0))


@pytest.mark.parametrize("method", ["round_robin", "critical_path", "random"])
def test_dispatch_reproduces_the_simulated_runtime_when_op_times_are_exact(method):
    """The mechanism, not a wall-clock ratio (a loaded machine stretches every wait): the measured trace obeys the model, and
    ops and copies overlap as much as in the simulation (serialized devices or queued copies would overlap less).
    The measured / simulated ratio is ``workbench bench systems``' fidelity table."""
    graph = wb.bundled_graph("chain_mm")
    executor = LocalExecutor(4, device="cpu", target_seconds=0.4, warmup=0, kernels=WaitKernels())
    assignment = wb.place(graph, method, 4).assignment
    real = executor.measure(graph, assignment, repeats=1, trace=True)
    simulated = wb.simulate(graph, assignment, 4).trace
    assert real.ok and trace_violations(graph, assignment, real.trace, slack=1e-4) == []
    assert _most_ops_at_once(simulated) >= 2 and _most_ops_at_once(real.trace) >= 2, "devices run ops at the same time"
    if _overlapping_transfers(simulated) >= 2:
        assert _overlapping_transfers(real.trace) >= 2, "copies run at the same time as each other"


def test_independent_ops_run_concurrently_on_their_workers():
    graph = wb.DataflowGraph.from_edges([1.0] * 4, [])
    executor = LocalExecutor(4, device="cpu", time_scale=0.05, warmup=0, kernels=WaitKernels())
    single = executor.measure(graph, [0, 0, 0, 0], repeats=1, trace=True)
    spread = executor.measure(graph, [0, 1, 2, 3], repeats=1, trace=True)
    assert single.ok and spread.ok
    assert _most_ops_at_once(single.trace) == 1, "one worker runs one op at a time"
    assert _most_ops_at_once(spread.trace) == 4, "four workers each run their op at once"


@pytest.mark.slow
def test_spread_placement_runs_real_tensor_work_on_both_devices_at_once():
    """Mechanism, not speed (the speedup is ``workbench bench systems``' parallel row): with real matmul kernels, the ops
    placed on device 0 and device 1 overlap in the measured trace, and the ops of one device never do."""
    graph = wb.DataflowGraph.from_edges([1.0] * 4, [])  # four independent heavy ops
    executor = LocalExecutor(2, device="cpu", time_scale=0.05, threads_per_worker=1, warmup=1)
    result = executor.measure(graph, [0, 1, 0, 1], repeats=1, trace=True)
    assert result.ok, result.errors
    trace = result.trace
    assert _most_ops_at_once(trace, [0]) == _most_ops_at_once(trace, [1]) == 1
    assert _most_ops_at_once(trace) == 2, (trace.start, trace.end, trace.device)


class _FailingKernels(CalibratedKernels):
    def __init__(self, fail_op: int, exc: BaseException) -> None:
        super().__init__(**SMALL)
        self.fail_op, self.exc = fail_op, exc

    def run(self, op, inputs, worker, stop):
        if op == self.fail_op:
            raise self.exc
        return super().run(op, inputs, worker, stop)


@pytest.mark.parametrize(
    "exc, words",
    [(RuntimeError("boom"), ["op 5", "RuntimeError: boom"]), (SystemExit(3), ["worker", "died"])],
    ids=["op raises", "worker dies"],
)
def test_a_failing_op_or_worker_ends_the_measurement_with_an_error(exc, words):
    graph = wb.bundled_graph("chain_mm")
    executor = LocalExecutor(2, device="cpu", target_seconds=0.02, warmup=0, kernels=_FailingKernels(5, exc))
    began = time.perf_counter()
    result = executor.measure(graph, np.arange(graph.num_nodes) % 2, repeats=2, timeout=20)
    assert time.perf_counter() - began < 10
    assert not result.ok and math.isnan(result.seconds)
    assert all(w in result.errors[0] for w in words), result.errors
    assert _workbench_threads() == []
    ok = LocalExecutor(2, device="cpu", target_seconds=0.02, warmup=0, kernels=CalibratedKernels(**SMALL))
    assert ok.measure(graph, np.arange(graph.num_nodes) % 2, repeats=1).ok  # the machine is usable again


def test_a_measurement_past_its_timeout_stops_promptly():
    graph = wb.DataflowGraph.from_edges([1.0, 1.0], [(0, 1)])
    executor = LocalExecutor(2, device="cpu", time_scale=30.0, warmup=0, kernels=CalibratedKernels(**SMALL))
    began = time.perf_counter()
    result = executor.measure(graph, [0, 1], repeats=1, timeout=0.5)
    assert time.perf_counter() - began < 5
    assert not result.ok and "timed out" in result.error
    assert _workbench_threads() == []


def test_executor_rejects_bad_requests_before_running(executor3):
    graph = wb.bundled_graph("chain_mm")
    with pytest.raises(wb.AssignmentError):
        executor3.measure(graph, [3] * graph.num_nodes)
    with pytest.raises(ValueError, match="repeats"):
        executor3.measure(graph, [0] * graph.num_nodes, repeats=0)
    with pytest.raises(ValueError, match="timeout"):
        executor3.measure(graph, [0] * graph.num_nodes, timeout=-1)
    with pytest.raises(ValueError, match="device"):
        LocalExecutor(2, device="tpu")


def test_workers_use_cuda_exactly_when_it_is_available():
    torch = pytest.importorskip("torch")
    workers = LocalExecutor(2).workers()
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert [w.device.type for w in workers] == [expected] * 2


def test_cuda_workers_run_a_paper_graph_and_release_their_memory():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    graph = wb.bundled_graph("ffnn")
    before = torch.cuda.memory_allocated()
    executor = LocalExecutor(4, device="cuda", target_seconds=0.05, warmup=1)
    assignment = wb.place(graph, "critical_path", 4).assignment
    result = executor.measure(graph, assignment, repeats=2)
    assert result.ok, result.errors
    assert result.details["devices"][0].startswith("cuda")
    assert trace_violations(graph, assignment, result.trace, slack=1e-4) == []
    assert torch.cuda.memory_allocated() == before


def test_import_workbench_systems_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, workbench, workbench.systems; workbench.SimulatorOracle; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------- calibration
def test_calibration_recovers_a_known_system_exactly():
    graph = wb.bundled_graph("ffnn")
    d = 4
    truth = SimulatorOracle(
        wb.Cluster(speeds=(1.0, 2.0, 1.0, 0.5), bandwidth=np.full((d, d), 3.0).tolist(), latency=np.full((d, d), 1e9).tolist()),
        time_scale=1e-12,
        op_overhead=2e-3,
    )
    result = calibrate(graph, truth, d, placements=10, nominal_scale=1e-12, progress=False)
    assert result.fit["op_overhead_seconds"] == pytest.approx(2e-3, rel=1e-6)
    speeds = np.array(result.fitted.cluster.speeds)
    assert speeds / speeds[0] == pytest.approx([1.0, 2.0, 1.0, 0.5], rel=1e-6)
    assert result.fit["link_latency_seconds"] == pytest.approx(1e-3, rel=1e-6)
    assert result.after == pytest.approx(result.measured, rel=1e-9)
    assert result.summary["spearman_after"] == pytest.approx(1.0)
    assert result.summary["spearman_before"] < 0.9  # the nominal model ignores overhead, speeds and latency


def test_calibration_on_the_executor_writes_report_and_figure_and_resumes(tmp_path):
    graph = wb.bundled_graph("chain_mm")
    executor = LocalExecutor(2, device="cpu", target_seconds=0.02, warmup=0, kernels=CalibratedKernels(**SMALL))
    journal = tmp_path / "measurements.jsonl"
    result = calibrate(graph, executor, placements=5, repeats=1, journal=journal, progress=False)
    assert result.summary["measured"] == 5 and len(journal.read_text().splitlines()) == 5
    assert np.all(np.isfinite(result.measured)) and np.all(result.after > 0)
    # the fitted simulator is scaled to the measurements: its median ratio to them is 1
    assert np.median(result.measured / result.after) == pytest.approx(1.0, rel=1e-6)
    paths = result.save(tmp_path)
    import json

    report = json.loads(open(paths["report"]).read())
    assert len(report["placements"]) == 5 and report["fit"]["ops_fitted"] == 5 * graph.num_nodes
    assert "plotly" in open(paths["html"]).read().lower()
    SimulatorOracle.from_dict(json.loads(open(paths["oracle"]).read())).measure(graph, [0] * graph.num_nodes)

    class Refuses:
        devices = 2

        def measure(self, *args, **kwargs):
            raise AssertionError("a resumed calibration must not measure again")

    again = calibrate(graph, Refuses(), placements=5, repeats=1, journal=journal, progress=False)
    assert np.array_equal(again.measured, result.measured)


# ------------------------------------------------------- torch module ops
def _fx_graph(module):
    """A DataflowGraph with one op per fx call node (the shape an fx importer gives)."""
    ops = [n for n in module.graph.nodes if n.op in ("call_module", "call_function", "call_method")]
    index = {n: i for i, n in enumerate(ops)}
    edges = [(index[m], index[n]) for n in ops for m in n.all_input_nodes if m in index]
    return wb.DataflowGraph.from_edges([1.0] * len(ops), edges, comm=1.0, names=[n.name for n in ops])


def test_module_kernels_run_the_models_own_ops_across_devices():
    torch = pytest.importorskip("torch")
    from workbench.systems import ModuleKernels

    class TwoBranches(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b, self.c = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16), torch.nn.Linear(16, 4)

        def forward(self, x):
            return self.c(torch.relu(self.a(x)) + torch.tanh(self.b(x))).sum(dim=0)

    torch.manual_seed(0)
    module = torch.fx.symbolic_trace(TwoBranches())
    x = torch.randn(8, 16)
    graph = _fx_graph(module)
    kernels = ModuleKernels(module, [x])
    assignment = np.arange(graph.num_nodes) % 2
    result = LocalExecutor(2, device="cpu", time_scale=1e-3, warmup=0, kernels=kernels).measure(graph, assignment, repeats=1)
    assert result.ok, result.errors
    assert trace_violations(graph, assignment, result.trace, slack=1e-4) == []
    assert result.trace.transfer_src_op.size == np.count_nonzero(assignment[graph.src] != assignment[graph.dst]) > 0
    assert torch.allclose(kernels.result(), module(x), atol=1e-6)

    broken = ModuleKernels(module, [x], op_nodes=[["no_such_node"]] * graph.num_nodes)
    failed = LocalExecutor(2, device="cpu", warmup=0, kernels=broken).measure(graph, assignment, repeats=1)
    assert not failed.ok and "no_such_node" in failed.error
