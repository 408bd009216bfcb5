"""The command line: real subprocesses, exit codes, one-line errors."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import numpy as np
import pytest

import workbench as wb

from .conftest import assignments_for


def run_cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def assert_user_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_import_workbench_stays_light():
    code = (
        "import sys, workbench; workbench.load_graph; workbench.place; "
        "print(sorted(m for m in ('torch', 'dgl', 'dash', 'numba', 'simpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("name", wb.PAPER_GRAPHS)
def test_info_on_every_bundled_graph(name, paper_graphs):
    result = run_cli("info", name, "--json", "--devices", "8")
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    g = paper_graphs[name]
    assert info["nodes"] == g.num_nodes and info["edges"] == g.num_edges
    assert info["lower_bound"] == wb.lower_bound(g, 8)
    assert info["longest_path"] == g.longest_path()
    text = run_cli("info", f"datasets/doppler-paper/{name}.txt")
    assert text.returncode == 0 and "lower bound" in text.stdout


def test_info_refuses_a_malformed_file(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("4\n0, 1,\n0, 1\n1, 0\n1,1\n1,1\n")
    assert_user_error(run_cli("info", str(bad)), str(bad), ":3:", "cycle")
    assert_user_error(run_cli("info", "no_such_graph"), "no such file")
    assert_user_error(run_cli("info", "ffnn", "--devices", "0"), "must be >= 1")


def test_simulate_prints_the_reference_makespan(tmp_path):
    reference = json.loads(open("datasets/doppler-paper/reference_makespans.json").read())["graphs"]["ffnn_192nodes"]
    case = reference["cases"][5]
    trace_path = tmp_path / "t.json"
    result = run_cli(
        "simulate",
        "ffnn",
        "--devices",
        "4",
        "--assignment",
        json.dumps(case["assignment"]),
        "--json",
        "--trace",
        str(trace_path),
        "--trace-format",
        "workbench",
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["makespan"] == case["makespan"] and out["engine"] == "fast" and out["devices"] == 4
    assert wb.Trace.from_json(trace_path).makespan == case["makespan"]


def test_simulate_many_from_a_file(tmp_path, paper_graphs):
    g = paper_graphs["chain_mm_112nodes"]
    batch = assignments_for(g, 4, 5).tolist()
    path = tmp_path / "batch.json"
    path.write_text(json.dumps(batch))
    result = run_cli("simulate", "chain_mm", "--assignments", str(path))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == wb.simulate_many(g, batch, 4).tolist()


@pytest.mark.parametrize(
    "assignment, fragment",
    [
        ("[0, 1]", "2 entries but the graph has 76"),
        ("[" + ",".join(["9"] * 76) + "]", "device 9"),
        ("[" + ",".join(["-1"] * 76) + "]", "device -1"),
        ("[" + ",".join(["0.5"] * 76) + "]", "not an integer"),
        ("[0, 1", "not valid JSON"),
        ("nofile.json", "neither JSON nor a readable file"),
    ],
)
def test_simulate_bad_assignments(assignment, fragment):
    assert_user_error(run_cli("simulate", "chain_mm", "--assignment", assignment), fragment)


def test_simulate_bad_priority_order():
    order = json.dumps([0] * 76)
    assert_user_error(run_cli("simulate", "chain_mm", "--assignment", json.dumps([0] * 76), "--priority-order", order), "not a permutation")


def test_unknown_method_lists_the_registered_ones():
    assert_user_error(run_cli("place", "ffnn", "--method", "magic"), "unknown method 'magic'", "critical_path")


def test_placers_is_callable_after_its_subpackage_is_imported():
    importlib.import_module("workbench.placers.base")  # the import system binds workbench.placers to the subpackage

    assert wb.placers()["critical_path"]
    assert set(wb.placers()) >= {"single", "round_robin", "random", "critical_path"}


# ------------------------------------------------------------ user errors and bugs
def test_user_errors_are_the_workbenchs_own_error_types():
    from workbench.cli import CliError, is_user_error
    from workbench.placers import PlacerError
    from workbench.sweeps import ConfigError

    for error in (
        CliError("x"),
        wb.GraphFormatError("g.txt", "x"),
        wb.AssignmentError("x"),
        PlacerError("x"),
        ConfigError("x"),
        FileNotFoundError("x"),
    ):
        assert is_user_error(error), error
    for bug in (ValueError("x"), KeyError("x"), TypeError("x"), IndexError("x"), RuntimeError("x")):
        assert not is_user_error(bug), bug
    with pytest.raises(ValueError) as ours:  # a plain ValueError the workbench raises with a message
        wb.generate("no_such_family")
    assert is_user_error(ours.value)
    with pytest.raises(ValueError) as numpy_s:  # one raised inside a library is a bug
        np.zeros(-1)
    assert not is_user_error(numpy_s.value)


def test_a_plain_value_error_the_workbench_raises_is_one_line():
    result = run_cli("generate", "no_such_family", "--out", "x.json")
    assert_user_error(result, "unknown generator 'no_such_family'")


def test_an_internal_error_shows_its_traceback():
    code = (
        "import sys, workbench; from workbench.cli import main; "
        "workbench.register_placer('broken', 'workbench.placers.heft', 'NoSuchPlacer', 'a registry line naming no class'); "
        "sys.exit(main(['place', 'ffnn', '--method', 'broken']))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "Traceback" in result.stderr and "AttributeError" in result.stderr and "NoSuchPlacer" in result.stderr


def test_debug_shows_the_traceback_of_a_user_error_too():
    from workbench.cli import main
    from workbench.placers import PlacerError

    result = run_cli("--debug", "place", "ffnn", "--method", "magic")
    assert result.returncode == 1 and "Traceback" in result.stderr and "unknown method 'magic'" in result.stderr
    with pytest.raises(PlacerError, match="unknown method 'magic'"):
        main(["place", "ffnn", "--method", "magic", "--debug"])
    assert main(["place", "ffnn", "--method", "magic"]) == 2


def test_bench_sim_shows_progress_per_graph():
    """`bench sim` reports each paper graph as it finishes (a rate and ETA on stderr), not silence until the table."""
    result = run_cli("bench", "sim", "--quick")
    assert result.returncode == 0, result.stderr
    assert "bench sim: 100%" in result.stderr and f"{len(wb.PAPER_GRAPHS)}/{len(wb.PAPER_GRAPHS)}" in result.stderr
    assert "graph/s" in result.stderr or "s/graph" in result.stderr  # tqdm's rate
    assert all(name in result.stdout for name in wb.PAPER_GRAPHS)
