"""Shared fixtures: small hand-made DAGs and a hypothesis strategy for random ones."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import strategies as st

import workbench as wb

os.environ.setdefault("DGLBACKEND", "pytorch")
os.environ["RAY_AUTH_MODE"] = "disabled"
"""Ray reads its authentication mode once per process: a private instance started with Ray's default (a token of its own)
would leave this process unable to own objects on the loopback test cluster, which runs without one (the worker node's
fetches were refused: OwnerDiedError). Every Ray instance of the suite listens on this machine only."""
ROOT = Path(__file__).resolve().parent.parent

SMALL_DAGS = {
    "single_op": ([5.0], []),
    "chain": ([3.0, 1.0, 4.0, 1.0], [(0, 1, 2.0), (1, 2, 2.0), (2, 3, 2.0)]),
    "fork": ([2.0, 3.0, 3.0, 3.0], [(0, 1, 1.0), (0, 2, 1.0), (0, 3, 1.0)]),
    "join": ([3.0, 3.0, 3.0, 2.0], [(0, 3, 1.0), (1, 3, 1.0), (2, 3, 1.0)]),
    "diamond": ([1.0, 4.0, 4.0, 1.0], [(0, 1, 2.0), (0, 2, 2.0), (1, 3, 2.0), (2, 3, 2.0)]),
    "independent": ([2.0, 7.0, 1.0, 8.0, 2.0], []),
}


def save_trained_for(policy, path, graphs, devices: int, cross_graph: bool | None = None) -> None:
    """Save ``policy`` as trained for ``graphs`` on ``devices`` (placing refuses a checkpoint that records no graph).

    The policy itself is left as it was."""
    from workbench.learn import TrainedFor

    before = policy.trained_for
    policy.trained_for = TrainedFor.of(graphs, devices, cross_graph)
    try:
        policy.save(path)
    finally:
        policy.trained_for = before


def small_dag(name: str) -> wb.DataflowGraph:
    compute, edges = SMALL_DAGS[name]
    return wb.DataflowGraph.from_edges(compute, edges, metadata={"name": name})


@pytest.fixture(params=sorted(SMALL_DAGS))
def small_graph(request) -> wb.DataflowGraph:
    return small_dag(request.param)


@pytest.fixture
def context(tmp_path):
    """A dashboard context whose runs and scratch folders live in ``tmp_path`` (imports dash only when used)."""
    from workbench.dashboard.context import DashboardContext

    (tmp_path / "runs").mkdir()
    context = DashboardContext.create(runs_dir=tmp_path / "runs", scratch_dir=tmp_path)
    yield context
    context.close()


@st.composite
def random_dags(draw, max_nodes: int = 14, integer_costs: bool = True, allow_zero: bool = True):
    """A random DAG: edges only from lower to higher ids (then relabelled), integer or float costs."""
    n = draw(st.integers(1, max_nodes))
    low = 0 if allow_zero else 1
    cost = st.integers(low, 20).map(float) if integer_costs else st.floats(low, 20.0, allow_nan=False)
    compute = draw(st.lists(cost, min_size=n, max_size=n))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=min(len(pairs), 3 * n))) if pairs else []
    comm = draw(st.lists(cost, min_size=len(chosen), max_size=len(chosen)))
    perm = draw(st.permutations(range(n)))
    edges = [(perm[i], perm[j], c) for (i, j), c in zip(chosen, comm, strict=True)]
    return wb.DataflowGraph.from_edges(compute, edges)


BURNERS_ENV = "WORKBENCH_TEST_BURNERS"
"""How many CPU-burning processes run beside every browser test: 0 unless set. Issue 29's journeys are checked under 4 on
2 cores: ``WORKBENCH_TEST_BURNERS=4 pytest -m browser``. They run at nice 10, the priority the dashboard gives its own
placements (so that its pages stay responsive): at the tests' own priority four burners would leave a placement under 3%
of a core."""


@pytest.fixture(scope="session")
def background_load():
    """Start :data:`BURNERS_ENV` busy processes once, for the browser tests of the session; stop them at its end."""
    text = os.environ.get(BURNERS_ENV, "0")
    if not text.isdigit() or int(text) > 64:
        raise pytest.UsageError(f"{BURNERS_ENV} must be a whole number from 0 to 64, got {text!r}")
    burners = [subprocess.Popen(["nice", "-n", "10", sys.executable, "-c", "while True: pass"]) for _ in range(int(text))]
    try:
        yield len(burners)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


@pytest.fixture(autouse=True)
def _browser_tests_under_load(request):
    """Every test marked ``browser`` runs with the session's :func:`background_load` (none by default)."""
    if request.node.get_closest_marker("browser") is not None:
        request.getfixturevalue("background_load")


@pytest.fixture(scope="session")
def paper_graphs() -> dict[str, wb.DataflowGraph]:
    return {name: wb.bundled_graph(name) for name in wb.PAPER_GRAPHS}


def assignments_for(graph: wb.DataflowGraph, devices: int, count: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, devices, size=(count, graph.num_nodes))


def tracked_tree(dest: Path) -> Path:
    """A copy of the checkout's files (tracked, and new ones git does not ignore): what a clean clone holds."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        if (ROOT / name).is_file():  # a tracked file deleted in the work tree is not part of the copy
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest
