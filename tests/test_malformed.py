"""Malformed input gives one clean line and exit code 2, never a traceback, a hang or a silent guess.

The corpus in ``tests/data/malformed/`` (written by ``tests/data/make_corpus.py``)
holds one small file per defect, in every format; ``expected.json`` says what
each error must say and which line it must name. Cases that need the file
system (a FIFO, ``/dev/zero``, a file over the size cap) are made here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import workbench as wb
from workbench.cli import main
from workbench.cluster import MAX_DEVICES, Cluster
from workbench.formats import MAX_JSON_DEPTH, GraphFormatError, JSONInputError, parse_json, read_text_file
from workbench.graph import MAX_COST, MAX_EDGES, MAX_NODES, GraphError
from workbench.sim import optimality_gap

from .conftest import random_dags

DATA = Path(__file__).parent / "data"
CORPUS = DATA / "malformed"
EXPECTED = json.loads((CORPUS / "expected.json").read_text(encoding="utf-8"))
ROOT = Path(__file__).resolve().parent.parent


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """The CLI in-process, as ``python -m workbench`` runs it (``sys.exit(main())``)."""
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(code: int, err: str, *must_contain: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1 and err.endswith("\n"), err
    for text in must_contain:
        assert text in err, (text, err)


# ---------------------------------------------------------------- the corpus
def test_corpus_holds_every_file_it_lists_and_covers_every_format():
    files = {p.name for p in CORPUS.iterdir()} - {"expected.json"}
    assert files == set(EXPECTED)
    assert len(files) >= 60
    suffixes = {Path(name).suffix for name in files}
    assert {".txt", ".stg", ".json", ""} <= suffixes
    for suffix in (".txt", ".stg", ".json"):
        assert sum(name.endswith(suffix) for name in files) >= 15, suffix


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_info_refuses_each_malformed_file_in_one_line_naming_file_and_reason(capsys, name):
    path = CORPUS / name
    code, out, err = run_cli(capsys, "info", str(path))
    assert_one_line_error(code, err, f"workbench info: error: {path}", EXPECTED[name]["reason"])
    line = EXPECTED[name]["line"]
    if line is not None:
        assert f"{path}:{line}: " in err
    assert out == ""


@pytest.mark.parametrize("path", sorted((DATA / "bom").iterdir()), ids=lambda p: p.name)
def test_a_byte_order_mark_is_accepted_in_every_format(tmp_path, path):
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf")
    plain = tmp_path / path.name
    plain.write_bytes(data[3:])
    with_bom, without = wb.load_graph(path), wb.load_graph(plain)
    assert with_bom.num_nodes > 0 and with_bom.same_as(without)


def test_special_files_and_oversized_files_are_refused_by_the_command(tmp_path):
    """Through ``python -m workbench``: a FIFO must not hang, /dev/zero must not be read, a huge file not loaded."""
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as handle:  # sparse: no disk used
        handle.truncate(wb.graph.MAX_GRAPH_FILE_BYTES + 1)
    cases = [(fifo, "named pipe (FIFO), not a regular file"), (huge, "more than the 268,435,456 allowed")]
    if Path("/dev/zero").exists():
        cases.append((Path("/dev/zero"), "character device, not a regular file"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for path, reason in cases:
        done = subprocess.run(
            [sys.executable, "-m", "workbench", "info", str(path)], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path
        )
        assert_one_line_error(done.returncode, done.stderr, str(path), reason)


def test_errors_stay_on_one_line_whatever_the_file_name(tmp_path):
    odd = tmp_path / "two\nlines.txt"
    odd.write_text("garbage")
    with pytest.raises(GraphFormatError) as info:
        wb.load_graph(odd)
    assert "\n" not in str(info.value) and "two\\nlines.txt" in str(info.value)
    with pytest.raises(GraphFormatError, match="cannot read"):
        wb.load_graph("nul\x00byte.txt")


def test_the_read_limit_holds_for_a_file_whose_reported_size_is_wrong():
    status = Path("/proc/self/status")  # a regular file that reports size 0
    if not status.exists():
        pytest.skip("needs Linux /proc")
    assert status.stat().st_size == 0
    with pytest.raises(GraphFormatError, match="more than the 16 bytes allowed"):
        read_text_file(status, limit=16)


def test_deep_json_is_refused_by_simulate_assignment(capsys):
    deep = CORPUS / "json_deep_arrays.json"
    code, _, err = run_cli(capsys, "simulate", "chain_mm", "--assignment", str(deep))
    assert_one_line_error(code, err, str(deep), f"nested more than {MAX_JSON_DEPTH} levels")
    code, _, err = run_cli(capsys, "simulate", "chain_mm", "--assignment", "[" * 5000 + "]" * 5000)
    assert_one_line_error(code, err, "the command line", "nested more than")


def test_an_assignment_file_with_a_byte_order_mark_is_read(tmp_path, capsys):
    graph = wb.load_graph(DATA / "bom" / "paper.txt")
    path = tmp_path / "assignment.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps([0] * graph.num_nodes).encode())
    code, out, err = run_cli(capsys, "simulate", str(DATA / "bom" / "paper.txt"), "--assignment", str(path), "--json")
    assert code == 0, err
    assert json.loads(out)["makespan"] == wb.simulate(graph, [0] * graph.num_nodes, 4).makespan


def test_parse_json_refuses_what_json_loads_would_crash_on_or_guess():
    assert parse_json('{"a": [1, 2.5, "x"]}') == {"a": [1, 2.5, "x"]}
    assert parse_json("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is not None
    in_strings = ["[" * 100, '\\"{' * 100]  # brackets inside strings (escaped quotes too) do not nest
    assert parse_json(json.dumps(in_strings)) == in_strings
    for text, reason in [
        ("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), "nested more than"),
        ("[" * 100_000, "nested more than"),
        ("[NaN]", "NaN is not a JSON number"),
        ("[-Infinity]", "-Infinity is not a JSON number"),
        ('{"a": 1, "a": 2}', "duplicate key 'a'"),
        ("[" + "1" * 5000 + "]", "value has 5000 digits"),
        ("[1_000]", "Expecting"),
    ]:
        with pytest.raises(JSONInputError, match=reason):
            parse_json(text)


# ------------------------------------------------------------ crashes, caps
def test_zero_cost_graphs_place_and_report_a_gap():
    graph = wb.load_graph(DATA / "bom" / "graph.stg")  # any small graph, rebuilt with zero costs
    free = wb.DataflowGraph(np.zeros(graph.num_nodes), graph.src, graph.dst, graph.comm)
    assert wb.place(free, method="heft", devices=2).makespan == 0.0
    assert optimality_gap(0.0, 0.0) == 0.0
    assert optimality_gap(5.0, 0.0) is None  # no ratio to a zero bound
    assert optimality_gap(6.0, 4.0) == 0.5


def test_place_and_compare_on_an_all_zero_cost_graph(tmp_path, capsys):
    path = tmp_path / "zero.txt"
    path.write_text("3\n\n0, 1\n1, 2\n0,0\n0,0\n0,0\n")
    code, out, err = run_cli(capsys, "place", str(path), "--devices", "2", "--method", "heft")
    assert code == 0, err
    assert "gap 0.0%" in out
    path.write_text("3\n\n0, 1\n1, 2\n0,5\n0,5\n0,0\n")  # zero compute, positive communication
    code, out, err = run_cli(capsys, "compare", str(path), "--devices", "2", "--methods", "single,round_robin", "--json")
    assert code == 0, err
    rows = {row["method"]: row for row in json.loads(out)["rows"]}
    assert rows["single"]["gap"] == 0.0 and rows["round_robin"]["makespan"] > 0 and rows["round_robin"]["gap"] is None


def test_generate_refuses_an_oversized_graph_before_building_it(capsys, tmp_path):
    tracemalloc.start()
    try:
        with pytest.raises(GraphError, match="MAX_EDGES"):
            wb.generate("erdos_renyi", nodes=20_000, edge_prob=1.0)
        with pytest.raises(GraphError, match="MAX_NODES"):
            wb.generate("tree", branching=1, depth=10**9)
        with pytest.raises(GraphError, match="MAX_NODES"):
            wb.generate("chain_mm", parts=2000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2**20  # refused up front: the 200-million-edge list was never built
    out = tmp_path / "g.json"
    code, _, err = run_cli(capsys, "generate", "layered", "--param", "layers=2000000", "--out", str(out))
    assert_one_line_error(code, err, "MAX_NODES")
    assert not out.exists()


def test_every_graph_obeys_the_same_caps(tmp_path, monkeypatch):
    with pytest.raises(GraphError, match="MAX_NODES"):
        wb.DataflowGraph(np.zeros(MAX_NODES + 1), [], [], [])
    with pytest.raises(GraphError, match="MAX_EDGES"):
        wb.DataflowGraph(np.zeros(2), np.zeros(MAX_EDGES + 1), np.ones(MAX_EDGES + 1), np.zeros(MAX_EDGES + 1))
    with pytest.raises(GraphError, match="MAX_COST"):
        wb.DataflowGraph([MAX_COST * 2], [], [], [])
    assert wb.DataflowGraph([MAX_COST], [], [], []).compute[0] == MAX_COST
    graph = wb.load_graph(DATA / "bom" / "graph.json")
    monkeypatch.setattr(wb.formats.json_graph, "MAX_GRAPH_FILE_BYTES", 100)
    with pytest.raises(GraphError, match="more than the 100"):
        graph.save(tmp_path / "big.json")  # save refuses what load_graph would refuse
    monkeypatch.undo()
    deep: list = []
    for _ in range(MAX_JSON_DEPTH):
        deep = [deep]
    with pytest.raises(GraphError, match="nests more than 64"):
        graph.with_metadata(params=deep).save(tmp_path / "deep.json")
    with pytest.raises(GraphError, match="cannot be saved as JSON"):
        graph.with_metadata(ratio=float("nan")).save(tmp_path / "nan.json")
    assert not list(tmp_path.iterdir())


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**25), 10**25) | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=80,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(graph=random_dags(), metadata=st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=3))
def test_a_saved_graph_loads_back_or_is_refused_before_it_is_written(tmp_path, graph, metadata):
    path = tmp_path / "saved.json"
    path.unlink(missing_ok=True)
    graph = graph.with_metadata(**{"name": "g", **metadata})
    try:
        graph.save(path)
    except GraphError as exc:
        assert not path.exists() and "metadata" in str(exc)
    else:
        back = wb.load_graph(path)
        assert back.same_as(graph) and {**back.metadata, "path": None} == {**graph.metadata, "path": None}


def test_device_count_is_capped_with_a_clear_error_and_identical_clusters_stay_small(capsys):
    graph = wb.load_graph(DATA / "bom" / "graph.stg")
    with pytest.raises(ValueError, match="MAX_DEVICES"):
        wb.simulate(graph, [0] * graph.num_nodes, MAX_DEVICES + 1)
    code, _, err = run_cli(capsys, "place", "chain_mm", "--devices", "1000000", "--method", "round_robin")
    assert_one_line_error(code, err, "at most 1024")
    tracemalloc.start()
    cluster = Cluster.identical(MAX_DEVICES)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2**20  # one shared row, not MAX_DEVICES**2 floats
    assert cluster.is_identical and cluster == Cluster(
        cluster.speeds, np.ones((MAX_DEVICES, MAX_DEVICES)), np.zeros((MAX_DEVICES, MAX_DEVICES))
    )
    assert wb.simulate(graph, [0, MAX_DEVICES - 1], MAX_DEVICES).makespan == wb.simulate(graph, [0, 1], 2).makespan


# ----------------------------------------------------------------- fuzzing
VALID_FILES = {
    ".txt": (ROOT / "datasets" / "doppler-paper" / "chain_mm_112nodes.txt").read_bytes()[:1200],
    ".stg": (ROOT / "datasets" / "stg" / "50" / "rand0000.stg").read_bytes()[:900],
    ".json": (DATA / "bom" / "graph.json").read_bytes(),
}
NASTY = [
    b"\xef\xbb\xbf",
    b"1_000",
    "\u0663".encode(),
    "\u00b2".encode(),
    b"NaN",
    b"1e999",
    b"9" * 25,
    b"[" * 70,
    b"-",
    b".5",
    b"\r",
    b"#",
    b",",
    b"1.5",
]


@st.composite
def mutated_files(draw) -> tuple[bytes, str]:
    suffix = draw(st.sampled_from(sorted(VALID_FILES)))
    data = VALID_FILES[suffix]
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(data)))
        cut = draw(st.integers(0, 20))
        insert = draw(st.one_of(st.sampled_from(NASTY), st.binary(max_size=8)))
        data = data[:at] + insert + data[at + cut :]
    return data, draw(st.sampled_from([suffix, suffix, ""]))


def check_loads_or_refuses(path: Path) -> None:
    try:
        graph = wb.load_graph(path)
    except GraphFormatError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc)
    else:
        assert graph.num_nodes <= MAX_NODES and graph.num_edges <= MAX_EDGES
        assert np.all((graph.compute >= 0) & (graph.compute <= MAX_COST))
        assert np.all((graph.comm >= 0) & (graph.comm <= MAX_COST))
        assert np.isfinite(wb.lower_bound(graph, 2))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300), suffix=st.sampled_from([".txt", ".stg", ".json", ""]))
def test_any_bytes_give_a_graph_or_a_format_error(tmp_path, data, suffix):
    path = tmp_path / f"fuzz{suffix}"
    path.write_bytes(data)
    check_loads_or_refuses(path)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=mutated_files())
def test_mutated_valid_files_give_a_graph_or_a_format_error(tmp_path, case):
    data, suffix = case
    path = tmp_path / f"mutant{suffix}"
    path.write_bytes(data)
    check_loads_or_refuses(path)


GRAPH_KEYS = ["format", "version", "num_nodes", "compute", "src", "dst", "comm", "names", "op_types", "metadata", "extra"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(GRAPH_KEYS), value=JSON_VALUES, item=st.integers(0, 3))
def test_any_json_value_in_any_graph_field_gives_a_graph_or_a_format_error(tmp_path, key, value, item):
    data = json.loads(VALID_FILES[".json"].decode("utf-8-sig"))
    if isinstance(data.get(key), list) and item < len(data[key]):
        data[key][item] = value  # one bad entry in a valid list
    else:
        data[key] = value
    path = tmp_path / "field.json"
    path.write_text(json.dumps(data))
    check_loads_or_refuses(path)
