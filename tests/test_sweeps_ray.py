"""The Ray engine on a busy machine: one-line start errors, cleanup by pid, a head-plus-worker cluster started with
``ray start`` (joined with ``--address``), resuming an interrupted sweep, ``bench learned`` on the engines, and a sweep
under a CPU-burning load.

Every wait is on a condition (a node joined, a row written, the load reached); the bounds are for a wedged system only.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from workbench.cli import main
from workbench.placers.base import REGISTRY, Decision, Placer
from workbench.placers.registry import PlacerEntry
from workbench.sweeps import ray_engine, read_results, sweep
from workbench.sweeps.ray_engine import LOAD_TOLERANT_ENV, stop_processes

ROOT = Path(__file__).resolve().parents[1]
SMALL = {"name": "t", "graphs": ["chain_mm"], "devices": 2, "methods": ["critical_path", "random"], "seeds": 2}
WEDGED = 600.0
"""Seconds after which a condition that never came true fails the test: a bound for a wedged system, not a speed."""


def wait_for(condition, what: str, timeout: float = WEDGED, every: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout:.0f} s")
        time.sleep(every)


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


class NodeRecordingPlacer(Placer):
    """Places everything on device 0 and appends the Ray node it ran on and the workbench it imported to ``log``; then
    holds its node's one CPU until a cell has logged from another node (at most 120 s), so that the
    queued cells must spill over to the other node however slowly it starts them on a busy machine."""

    def __init__(self, log: str = ""):
        self.log = log

    def place(self, graph, devices, seed=0):
        import ray

        import workbench

        node = ray.get_runtime_context().get_node_id()
        with open(self.log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"node": node, "workbench": workbench.__file__}) + "\n")
        try:
            wait_for(lambda: any(json.loads(line)["node"] != node for line in Path(self.log).read_text().split("\n")[:-1]), "", 120)
        except TimeoutError:
            pass  # the test's own assertion names what did not happen
        return Decision(np.zeros(graph.num_nodes, dtype=np.int64))


@pytest.fixture
def recording_placer():
    REGISTRY["node_recording"] = PlacerEntry(__name__, "NodeRecordingPlacer", "records its Ray node", "heuristic")
    yield
    del REGISTRY["node_recording"]


def test_an_unreachable_address_is_one_line_exit_2_at_once(tmp_path, capsys):
    pytest.importorskip("ray")
    (port,) = free_ports(1)  # closed again: nothing listens there
    config = tmp_path / "c.json"
    config.write_text(json.dumps({**SMALL, "out": str(tmp_path / "r.csv")}))
    began = time.monotonic()
    assert main(["sweep", str(config), "--address", f"127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"no Ray cluster answers at --address 127.0.0.1:{port}" in err and "ray start --head" in err
    assert time.monotonic() - began < WEDGED, "Ray's own retries (minutes) are not waited for"


def test_a_local_start_that_keeps_failing_is_retried_then_one_line_naming_the_settings(monkeypatch, tmp_path, capsys):
    ray = pytest.importorskip("ray")
    attempts = []

    def failing_init(**kwargs):
        attempts.append(kwargs["_temp_dir"])
        assert os.environ["RAY_agent_register_timeout_ms"] == LOAD_TOLERANT_ENV["RAY_agent_register_timeout_ms"]
        raise Exception("The current node timed out during startup. This could happen because ...\nmore lines")

    monkeypatch.setattr(ray, "init", failing_init)
    monkeypatch.delenv("RAY_agent_register_timeout_ms", raising=False)
    config = tmp_path / "c.json"
    config.write_text(json.dumps({**SMALL, "out": str(tmp_path / "r.csv")}))
    assert main(["sweep", str(config), "--engine", "ray", "--num-cpus", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(attempts) == ray_engine.START_ATTEMPTS and len(set(attempts)) == len(attempts), "each attempt in a fresh folder"
    assert not any(Path(folder).exists() for folder in attempts[:-1]), "only the last attempt's folder (its logs) is kept"
    shutil.rmtree(attempts[-1])
    assert "RAY_agent_register_timeout_ms" not in os.environ, "the environment is restored"
    assert sum("trying again" in line for line in err) == ray_engine.START_ATTEMPTS - 1
    final = err[-1]
    assert final.startswith("workbench sweep: error: Ray did not start a local instance with --num-cpus 2 in 3 attempts")
    assert "The current node timed out during startup" in final and "more lines" not in final
    assert "--address" in final and "--engine local" in final and final.endswith(f"Ray's logs: {attempts[-1]}")


def test_stop_processes_stops_the_processes_naming_a_folder_and_their_children_only(tmp_path):
    pytest.importorskip("psutil")
    marker = tmp_path / "node"
    script = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); time.sleep(600)"
    mine = subprocess.Popen([sys.executable, "-c", script, str(marker)])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", str(tmp_path / "other")])
    try:
        import psutil

        wait_for(lambda: len(psutil.Process(mine.pid).children()) == 1, "the child started")
        child = psutil.Process(mine.pid).children()[0]
        assert stop_processes(marker) == 2
        assert mine.wait(timeout=WEDGED) is not None
        wait_for(lambda: not child.is_running() or child.status() == psutil.STATUS_ZOMBIE, "the child stopped")
        assert other.poll() is None, "a process naming another folder keeps running"
    finally:
        other.kill()
        other.wait()


def fingerprint_in_child(pythonpath: str, cwd: Path) -> str:
    code = "from workbench.sweeps.ray_engine import code_fingerprint; print(code_fingerprint())"
    env = {**os.environ, "PYTHONPATH": pythonpath}
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def test_the_fingerprint_tells_this_workbench_from_one_with_a_changed_line(tmp_path):
    older = tmp_path / "older"
    shutil.copytree(ROOT / "workbench", older / "workbench", ignore=shutil.ignore_patterns("__pycache__", "data"))
    shutil.copytree(ROOT / "datasets", older / "datasets")
    mine = ray_engine.code_fingerprint()
    assert fingerprint_in_child(str(ROOT), tmp_path) == mine
    assert fingerprint_in_child(str(older), tmp_path) == mine, "the same sources and datasets elsewhere: the same workbench"
    with open(older / "workbench" / "__init__.py", "a", encoding="utf-8") as handle:
        handle.write("# an older release\n")
    assert fingerprint_in_child(str(older), tmp_path) != mine


def test_the_shipped_package_carries_its_datasets_like_an_installed_wheel(tmp_path):
    import workbench as wb

    staged = ray_engine._staged_package()
    try:
        assert staged.name == "workbench" and (staged / "data" / "doppler-paper").is_dir()
        assert not list(staged.rglob("__pycache__"))
        code = "import workbench as wb, workbench.datasets as d; print(d.DATASETS_DIR); print(wb.bundled_graph('ffnn').num_nodes)"
        env = {**os.environ, "PYTHONPATH": str(staged.parent)}
        env.pop("WORKBENCH_DATASETS", None)
        done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, check=True)
        folder, nodes = done.stdout.split()
        assert Path(folder).resolve() == (staged / "data").resolve() and int(nodes) == wb.bundled_graph("ffnn").num_nodes
        assert fingerprint_in_child(str(staged.parent), tmp_path) == ray_engine.code_fingerprint(), "shipped: the driver's workbench"
    finally:
        shutil.rmtree(staged.parent)


class LocalCluster:
    """A head and one worker node started with ``ray start`` (one CPU each, own temporary folders and ports), stopped by pid."""

    def __init__(self, worker_pythonpath: str) -> None:
        self.folders: list[str] = []
        self.port = free_ports(1)[0]
        self.address = f"127.0.0.1:{self.port}"
        # without authentication, like the whole suite (tests/conftest.py): a real cluster shares one RAY_AUTH_TOKEN (docs/sweeps.md)
        env = {**os.environ, **LOAD_TOLERANT_ENV, "RAY_USAGE_STATS_ENABLED": "0"}
        try:
            self._start(["--head", f"--port={self.port}", *self._port_options(head=True)], {**env, "PYTHONPATH": str(ROOT)})
            self._start([f"--address={self.address}", *self._port_options(head=False)], {**env, "PYTHONPATH": worker_pythonpath})
        except BaseException:
            self.stop()
            raise

    @staticmethod
    def _port_options(head: bool) -> list[str]:
        names = ["dashboard-agent-listen-port", "dashboard-agent-grpc-port", "runtime-env-agent-port", "metrics-export-port"]
        names += ["dashboard-port", "ray-client-server-port"] if head else []
        return [f"--{name}={port}" for name, port in zip(names, free_ports(len(names)), strict=True)]

    def _start(self, options: list[str], env: dict[str, str]) -> None:
        """``ray start`` (tried again, in a fresh folder, when a busy machine made it time out)."""
        for attempt in range(ray_engine.START_ATTEMPTS):
            folder = tempfile.mkdtemp(prefix="wb-ray-test-")
            self.folders.append(folder)
            command = [
                sys.executable,
                "-m",
                "ray.scripts.scripts",
                "start",
                "--num-cpus=1",
                f"--temp-dir={folder}",
                "--no-monitor",
                *options,
            ]
            command += ["--include-dashboard=false"] if "--head" in options else []  # a worker node refuses the option
            command += ["--disable-usage-stats"]
            # a session of its own: where the kernel shares the CPU per session (autogroup), the node gets a session's share
            done = subprocess.run(command, env=env, capture_output=True, text=True, start_new_session=True)
            if done.returncode == 0:
                return
            stop_processes(folder)
            shutil.rmtree(self.folders.pop(), ignore_errors=True)
            if attempt == ray_engine.START_ATTEMPTS - 1:
                raise RuntimeError(f"ray start {' '.join(options)} failed: {done.stderr[-2000:]}")

    def stop(self) -> None:
        for folder in self.folders:
            stop_processes(folder)
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster():
    """A head node importing this checkout and a worker node importing an "older" copy of the workbench (one line changed)."""
    ray = pytest.importorskip("ray")
    older = Path(tempfile.mkdtemp(prefix="wb-older-"))
    shutil.copytree(ROOT / "workbench", older / "workbench", ignore=shutil.ignore_patterns("__pycache__", "data"))
    with open(older / "workbench" / "__init__.py", "a", encoding="utf-8") as handle:
        handle.write("# an older release\n")
    nodes = LocalCluster(worker_pythonpath=os.pathsep.join([str(older), str(ROOT)]))
    try:
        ray.init(address=nodes.address, log_to_driver=False, logging_level="ERROR")
        try:
            wait_for(lambda: sum(n["Alive"] for n in ray.nodes()) == 2, "the worker node joining")
        finally:
            ray.shutdown()
        yield nodes
    finally:
        nodes.stop()
        shutil.rmtree(older, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.cluster
def test_a_sweep_runs_on_a_head_plus_worker_cluster_with_the_drivers_workbench_shipped(
    cluster, recording_placer, tmp_path, capsys, monkeypatch
):
    # Ray puts the driver's working directory first on every worker's path: from the checkout, the worker node would
    # import the checkout's workbench, as one machine's nodes do. From elsewhere it imports its own older copy.
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "nodes.log"
    config = {**SMALL, "seeds": 6, "methods": ["critical_path", {"method": "node_recording", "options": {"log": str(log)}}]}
    serial = sweep({**config, "methods": ["critical_path"]}, out=tmp_path / "s.csv", progress=False)
    on_cluster = sweep(config, address=cluster.address, out=tmp_path / "r.csv", progress=True)
    assert "1 of 2 Ray nodes import another workbench (or none): shipping this one" in capsys.readouterr().err
    assert (on_cluster["status"] == "ok").all() and len(on_cluster) == 12
    cp = on_cluster[on_cluster["method"] == "critical_path"].sort_values("seed")
    assert list(cp["makespan"]) == list(serial.sort_values("seed")["makespan"])
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len({r["node"] for r in records}) == 2, "cells ran on both nodes"
    shipped = {r["workbench"] for r in records}
    assert not any(path.startswith(tempfile.gettempdir() + os.sep + "wb-older-") for path in shipped), "no node ran the older copy"
    assert not any(path.startswith(str(ROOT)) for path in shipped), "every node imported the shipped package"


@pytest.mark.slow
@pytest.mark.cluster
def test_an_interrupted_ray_sweep_resumes_without_running_a_finished_cell_again(cluster, tmp_path, capsys):
    out = tmp_path / "r.csv"
    config = tmp_path / "c.json"
    grid = {"method": "local_search", "options": {"budget": 150_000}}  # seconds a cell: the interrupt lands mid-sweep
    config.write_text(json.dumps({**SMALL, "graphs": ["ffnn"], "seeds": 8, "methods": [grid], "out": str(out)}))
    command = [sys.executable, "-m", "workbench", "sweep", str(config), "--address", cluster.address, "--no-progress"]
    child = subprocess.Popen(command, env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: out.is_file() and len(read_results(out)) >= 2 or child.poll() is not None, "two cells finishing")
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=WEDGED)
    finally:
        child.kill()
    assert child.returncode == 130 and err.count("interrupted") == 1, err
    before = read_results(out)
    assert 2 <= len(before) < 8 and before["cell"].is_unique
    resumed = sweep(config, address=cluster.address, out=out, progress=True)
    assert f"t: {len(before)} of 8 cells already in {out}, skipped" in capsys.readouterr().err
    after = read_results(out)
    assert len(after) == 8 and after["cell"].is_unique and (resumed["status"] == "ok").all()
    kept = after.set_index("cell").loc[before["cell"], "finished"]
    assert list(kept) == list(before["finished"]), "a finished cell is not run again"


@pytest.mark.slow
@pytest.mark.cluster
def test_bench_learned_on_the_cluster_gives_the_local_engines_cells_and_resumes(cluster, tmp_path, capsys):
    pytest.importorskip("torch")
    from workbench.bench import learned

    local = learned.run(quick=True, root=tmp_path / "local", engine="local", workers=2)
    assert main(["bench", "learned", "--quick", "--json", "--address", cluster.address]) == 0
    on_ray = json.loads(capsys.readouterr().out)
    assert on_ray["cells"].keys() == local["cells"].keys() and len(local["cells"]) == 10
    for key, cell in local["cells"].items():
        theirs = on_ray["cells"][key]
        assert (theirs["makespan"], theirs["evaluations"]) == (cell["makespan"], cell["evaluations"]), key
        assert [point[:2] for point in theirs["anytime"]] == [point[:2] for point in cell["anytime"]], key
    cache = Path(on_ray["root"]) / learned.CACHE
    partial = json.loads(cache.read_text())
    dropped = sorted(partial)[:3]
    for key in dropped:
        del partial[key]
    cache.write_text(json.dumps(partial))
    again = learned.run(quick=True, root=Path(on_ray["root"]), engine="ray", address=cluster.address)
    assert "bench learned: 7 of 10 cells already in" in capsys.readouterr().err
    assert all(again["cells"][key]["makespan"] == local["cells"][key]["makespan"] for key in dropped)
    assert all(again["cells"][key] == on_ray["cells"][key] for key in partial), "cached cells are not measured again"


@pytest.mark.slow
def test_bench_learned_on_the_local_pool_gives_the_serial_cells_and_resumes(tmp_path, capsys):
    """The engine path of bench learned without Ray: cells measured in pool processes equal the serial ones."""
    pytest.importorskip("torch")
    from workbench.bench import learned

    serial = learned.run(quick=True, root=tmp_path / "serial")
    pooled = learned.run(quick=True, root=tmp_path / "pool", engine="local", workers=2)
    assert pooled["cells"].keys() == serial["cells"].keys()
    for key, cell in serial["cells"].items():
        theirs = pooled["cells"][key]
        assert (theirs["makespan"], theirs["evaluations"]) == (cell["makespan"], cell["evaluations"]), key
        assert [point[:2] for point in theirs["anytime"]] == [point[:2] for point in cell["anytime"]], key
    cache = tmp_path / "pool" / learned.CACHE
    partial = json.loads(cache.read_text())
    dropped = sorted(partial)[:3]
    for key in dropped:
        del partial[key]
    cache.write_text(json.dumps(partial))
    capsys.readouterr()
    again = learned.run(quick=True, root=tmp_path / "pool", engine="local", workers=2)
    assert f"bench learned: 7 of 10 cells already in {cache}, skipped" in capsys.readouterr().err
    assert all(again["cells"][key]["makespan"] == serial["cells"][key]["makespan"] for key in dropped)
    assert all(again["cells"][key] == pooled["cells"][key] for key in partial), "cached cells are not measured again"


@pytest.mark.slow
@pytest.mark.exclusive  # Ray 2.60's raylet waits a fixed 15 s for its agent, which a loaded 2-core machine shared with others misses
def test_a_ray_sweep_completes_at_load_average_8_on_2_cores(tmp_path):
    """Twelve ``nice`` busy loops on the two cores this test and its Ray instance are pinned to; once the load average
    reaches 8, a private Ray instance starts and the sweep completes with every cell ok."""
    ray = pytest.importorskip("ray")
    cores = sorted(os.sched_getaffinity(0))[:2]
    saved = os.sched_getaffinity(0)
    loops = []
    try:
        os.sched_setaffinity(0, cores)  # inherited by the loops and by every Ray process
        for _ in range(12):
            loops.append(subprocess.Popen(["nice", sys.executable, "-c", "while True: pass"]))
        wait_for(lambda: os.getloadavg()[0] >= 8, "a load average of 8", every=2.0)
        load_before = os.getloadavg()[0]
        frame = sweep({**SMALL, "seeds": 4}, engine="ray", workers=2, out=tmp_path / "r.csv", progress=False)
        load_after = os.getloadavg()[0]
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
        os.sched_setaffinity(0, saved)
    print(f"load average {load_before:.1f} before the sweep, {load_after:.1f} after, on cores {cores}")
    assert load_before >= 8 and len(frame) == 8 and (frame["status"] == "ok").all()
    assert not ray.is_initialized()
