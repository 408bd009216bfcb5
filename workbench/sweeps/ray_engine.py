"""Connect to Ray for the ``ray`` engine: start a private local instance that tolerates a busy machine, or join a cluster.

A private instance runs in its own temporary folder with Ray's agent and worker
registration timeouts raised (:data:`LOAD_TOLERANT_ENV`; a value already in the
environment wins). Ray 2.x's raylet still gives its dashboard agent a fixed 15 s
to come up, which a machine at several times its core count in load can miss, so a
start that fails is cleaned up (every process of that folder, by pid) and tried
again, :data:`START_ATTEMPTS` times in all. When Ray cannot start, or the cluster
at ``address`` cannot be reached, :class:`RayStartError` says so in one line,
naming the setting to change.

Workers import the driver's workbench: a private instance puts the package's
parent folder on their ``PYTHONPATH``; on a joined cluster each node is asked
which workbench it imports, and only when one differs (or has none) is the
driver's package, with its datasets, shipped as a Ray ``py_modules`` runtime
environment.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["RayStartError", "LOAD_TOLERANT_ENV", "START_ATTEMPTS", "connect", "stop_processes", "code_fingerprint"]

LOAD_TOLERANT_ENV = {
    "RAY_agent_register_timeout_ms": "300000",  # agents (runtime env, dashboard) register: 30 s by default
    "RAY_worker_register_timeout_seconds": "600",  # a worker process connects back: 60 s by default
}
"""Ray settings (``RAY_<name>`` environment variables, read by every Ray process as it starts) that a private instance
starts with unless the environment sets them; export the same before ``ray start`` on a busy cluster."""
START_ATTEMPTS = 3
REACH_SECONDS = 10.0


class RayStartError(ValueError):
    """Ray could not start, or the cluster named by ``--address`` could not be joined; the message says which setting to change."""


@contextlib.contextmanager
def connect(address: str | None, num_cpus: int | None, progress: bool = True) -> Iterator[Any]:
    """Ray, connected to the cluster at ``address`` (default: ``$RAY_ADDRESS``) or to a new private local instance with
    ``num_cpus`` CPUs (default: all cores); yields ``ray``. When a joined cluster's nodes import another workbench (or
    none), the driver joins again with this one shipped as the job's runtime environment (Ray uploads a local package
    only for a whole job, never for one task).

    On exit the driver disconnects, and a private instance is stopped; a joined cluster keeps running.
    """
    try:
        import ray
    except ImportError:
        raise ValueError("engine 'ray' needs Ray: pip install 'doppler-workbench[sweeps]'") from None
    if ray.is_initialized():  # the caller's own connection: use it as it is
        with _runtime_env_for(ray, progress) as runtime_env:
            if runtime_env is not None:
                raise RayStartError(
                    "the Ray cluster this process joined imports another workbench (or none) on some nodes, and Ray ships a "
                    "local package only with ray.init(runtime_env=...): let the workbench join it (--address) instead"
                )
            yield ray
        return
    address = address or os.environ.get("RAY_ADDRESS")  # Ray's own convention: ray.init() would join it too
    if address:
        _join(ray, address)
        try:
            with _runtime_env_for(ray, progress) as runtime_env:
                if runtime_env is not None:  # join again, shipping this workbench for the whole job
                    ray.shutdown()
                    _join(ray, address, runtime_env)
                yield ray
        finally:
            ray.shutdown()
        return
    temp_dir = _start_private(ray, num_cpus or os.cpu_count() or 1, progress)
    try:
        yield ray
    finally:
        ray.shutdown()
        stop_processes(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _join(ray: Any, address: str, runtime_env: dict[str, Any] | None = None) -> None:
    if "://" not in address and address != "auto":
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=REACH_SECONDS).close()
        except (OSError, ValueError) as exc:
            reason = exc.strerror or str(exc) if isinstance(exc, OSError) else f"{port!r} is not a port"
            raise RayStartError(
                f"no Ray cluster answers at --address {address} ({reason}); start one with `ray start --head --port=PORT` "
                "and pass HOST:PORT, or leave --address out for a private local instance"
            ) from None
    try:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR", runtime_env=runtime_env)
    except Exception as exc:  # Ray raises ConnectionError, RuntimeError or a bare Exception here
        with contextlib.suppress(Exception):
            ray.shutdown()
        raise RayStartError(f"could not join the Ray cluster at --address {address}: {_first_line(exc)}") from None


def _start_private(ray: Any, num_cpus: int, progress: bool) -> str:
    """Start a private instance in a new temporary folder (returned), retrying a start that failed."""
    package_root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    reason, temp_dir = "", ""
    for attempt in range(1, START_ATTEMPTS + 1):
        temp_dir = tempfile.mkdtemp(prefix="wb-ray-")  # short: Ray's socket paths live under it
        try:
            with _environment({**LOAD_TOLERANT_ENV, **_present(LOAD_TOLERANT_ENV), "PYTHONPATH": path}):
                ray.init(
                    num_cpus=num_cpus,
                    include_dashboard=False,
                    log_to_driver=False,
                    logging_level="ERROR",
                    _temp_dir=temp_dir,
                )
            return temp_dir
        except Exception as exc:  # a start that timed out (or crashed) leaves processes behind: stop them by pid
            with contextlib.suppress(Exception):
                ray.shutdown()
            stop_processes(temp_dir)
            reason = _first_line(exc)
        if attempt < START_ATTEMPTS:  # the last attempt's folder stays: its logs say what went wrong
            shutil.rmtree(temp_dir, ignore_errors=True)
            if progress:
                print(f"Ray did not start (attempt {attempt} of {START_ATTEMPTS}: {reason}); trying again", file=sys.stderr)
    raise RayStartError(
        f"Ray did not start a local instance with --num-cpus {num_cpus} in {START_ATTEMPTS} attempts ({reason}); "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores: retry when the machine is less busy, lower --num-cpus, "
        f"join a running cluster with --address (docs/sweeps.md), or use --engine local; Ray's logs: {temp_dir}"
    )


def _present(names: dict[str, str]) -> dict[str, str]:
    return {name: os.environ[name] for name in names if name in os.environ}


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``os.environ`` updated with ``values`` (inherited by the processes Ray starts), restored afterwards."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else 'no message'}"


def stop_processes(temp_dir: str | os.PathLike[str], grace: float = 10.0) -> int:
    """Stop every process whose command line names ``temp_dir`` (one Ray node's processes), and their children, by pid:
    SIGTERM, then SIGKILL for those still alive after ``grace`` seconds. Returns how many were found.

    ``ray stop`` would stop every Ray process of the machine, other users' included.
    """
    import psutil  # a dependency of Ray

    marker = str(temp_dir)
    found: dict[int, Any] = {}
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if any(marker in part for part in proc.info["cmdline"] or ()):
                for member in (proc, *proc.children(recursive=True)):
                    found[member.pid] = member
    for proc in found.values():
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGTERM)
    _, alive = psutil.wait_procs(list(found.values()), timeout=grace)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(alive, timeout=grace)
    return len(found)


def _fingerprint_function() -> Callable[[], str | None]:
    """:func:`code_fingerprint`, built inside a function so that Ray ships it by value to a node that may lack the workbench."""

    def code_fingerprint() -> str | None:
        """A hash of the importable workbench's Python sources and of its datasets' file names and sizes (None: no
        workbench; ``"broken"``: one that does not import)."""
        import hashlib
        import importlib.util
        from pathlib import Path

        spec = importlib.util.find_spec("workbench")
        if spec is None or spec.origin is None:
            return None
        try:  # by name, not a relative import: this function runs by value on a node, against its own installation
            datasets_dir = importlib.import_module("workbench.datasets").DATASETS_DIR
        except Exception:  # an old or broken installation differs from the driver's whatever the reason
            return "broken"
        root = Path(spec.origin).parent
        digest = hashlib.sha256()
        for path in sorted(root.rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
        for path in sorted(p for p in datasets_dir.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            digest.update(f"{path.relative_to(datasets_dir)}\0{path.stat().st_size}\0".encode())
        return digest.hexdigest()

    return code_fingerprint


code_fingerprint = _fingerprint_function()


@contextlib.contextmanager
def _runtime_env_for(ray: Any, progress: bool) -> Iterator[dict[str, Any] | None]:
    """None when every node with CPUs imports the driver's workbench; else a ``py_modules`` runtime environment that ships it
    (a staged copy, when the datasets lie outside the package, removed on exit)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    mine = code_fingerprint()
    nodes = [node["NodeID"] for node in ray.nodes() if node.get("Alive") and node.get("Resources", {}).get("CPU")]
    probe = ray.remote(num_cpus=0, max_retries=2)(code_fingerprint)
    theirs = ray.get([probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote() for node in nodes])
    if all(fingerprint == mine for fingerprint in theirs):
        yield None
        return
    if progress:
        differ = sum(fingerprint != mine for fingerprint in theirs)
        print(f"{differ} of {len(nodes)} Ray nodes import another workbench (or none): shipping this one", file=sys.stderr)
    package = Path(__file__).resolve().parents[1]
    staged = _staged_package()
    try:
        yield {"py_modules": [str(staged)], "excludes": ["__pycache__"]}
    finally:
        if staged != package:
            shutil.rmtree(staged.parent, ignore_errors=True)


def _staged_package() -> Path:
    """The workbench package folder as an installed wheel lays it out (datasets in ``data/``): the package itself when it
    is one, else a copy with the datasets, in a new temporary folder."""
    from ..datasets import DATASETS_DIR

    package = Path(__file__).resolve().parents[1]
    if DATASETS_DIR.resolve() == package / "data":
        return package
    target = Path(tempfile.mkdtemp(prefix="wb-ship-")) / "workbench"
    shutil.copytree(package, target, ignore=shutil.ignore_patterns("__pycache__", ".*", "data"))
    shutil.copytree(DATASETS_DIR, target / "data", ignore=shutil.ignore_patterns("__pycache__", ".*"))
    return target
