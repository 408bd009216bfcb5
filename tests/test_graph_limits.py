"""Loaders bound memory by the file, not by what it claims: a 100 MB file of each format in a child process, refused
or loaded, the streaming line reader, JSON's counts before parsing, and control characters in names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import workbench as wb
import workbench.formats as formats
from workbench.cli import main
from workbench.formats import GraphFormatError, read_lines
from workbench.graph import MAX_EDGES, MAX_NODES, printable

ROOT = Path(__file__).resolve().parent.parent
MB = 2**20
SIZE = 100 * MB


def write_stg(path: Path) -> str:
    """A million tasks, then task lines on to 100 MB: the reader must stop at the first line past the count."""
    with open(path, "w") as handle:
        handle.write(f"{MAX_NODES}\n0 0 0\n")
        task, written = 1, 0
        while written < SIZE:
            block = "".join(f"{t} 1 1 0\n" for t in range(task, task + 100_000))
            handle.write(block)
            task, written = task + 100_000, written + len(block)
    return f"{path}:{MAX_NODES + 4}: more task lines than the {MAX_NODES + 2} expected"


def write_paper(path: Path) -> str:
    """50 million edge sources on one line: refused once the count passes MAX_EDGES, before any id is stored."""
    path.write_text("10\n0,\n" + "0," * (SIZE // 2) + "\n1\n")
    return f"{path}:3: more than the {MAX_EDGES:,} edges a graph may hold"


def write_json(path: Path) -> str:
    """20 million floats in ``compute``: refused by the count of items, before json builds a float for each."""
    floats = "1.5, " * (SIZE // 5)
    path.write_text('{"format": "workbench-graph", "version": 1, "compute": [' + floats + '1], "src": [], "dst": [], "comm": []}')
    return "items a JSON input may hold"


def write_stg_that_loads(path: Path) -> str:
    """A valid STG file of two tasks whose first task line runs on with 100 MB of blanks."""
    path.write_text("2\n0 0 0\n1 3 1 0" + " " * SIZE + "\n2 4 1 1\n3 0 1 2\n")
    return "loaded 2 ops, 1 edges"


def write_paper_that_loads(path: Path) -> str:
    """A valid paper file whose first op has an op type of 100 MB."""
    path.write_text("3\n0,\n0\n1\n10,40," + "m" * SIZE + "\n20,50\n")
    return "loaded 2 ops, 1 edges"


def write_json_that_loads(path: Path) -> str:
    """A valid JSON graph named by a 100 MB string."""
    graph = {"format": "workbench-graph", "compute": [1, 2], "src": [0], "dst": [1], "comm": [3], "metadata": {"name": "n" * SIZE}}
    path.write_text(json.dumps(graph))
    return "loaded 2 ops, 1 edges"


# The child's own peak (VmHWM): ru_maxrss would also count the pytest process it was forked from.
PEAK = """
import re, sys
import workbench as wb
try:
    graph = wb.load_graph(sys.argv[1])
    print(f"loaded {graph.num_nodes} ops, {graph.num_edges} edges")
except wb.formats.GraphFormatError as exc:
    print(exc)
print(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
"""


WRITERS = {
    "stg": write_stg,
    "paper": write_paper,
    "json": write_json,
    "stg_that_loads": write_stg_that_loads,
    "paper_that_loads": write_paper_that_loads,
    "json_that_loads": write_json_that_loads,
}


@pytest.mark.parametrize("case", list(WRITERS))
def test_a_100_mb_file_loads_or_is_refused_within_three_times_its_size_plus_200_mb(tmp_path, case):
    if not Path("/proc/self/status").exists():
        pytest.skip("needs Linux /proc")
    write = WRITERS[case]
    path = tmp_path / ("big" + {"stg": ".stg", "paper": ".txt", "json": ".json"}[case.split("_")[0]])
    reason = write(path)
    size = path.stat().st_size
    assert size >= SIZE
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", PEAK, str(path)], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    message, peak_kib = done.stdout.splitlines()
    assert reason in message
    assert int(peak_kib) * 1024 <= 3 * size + 200 * MB, f"peak RSS {int(peak_kib) // 1024} MiB for a {size // MB} MiB file"


# ------------------------------------------------------------- line reader
def editor_lines(data: bytes) -> list[str]:
    """What an editor shows: lines end at \\n, \\r\\n or \\r; one leading byte-order mark is not text."""
    text = data.decode("utf-8").removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    pieces=st.lists(st.sampled_from(["a", "12", " ", "\r", "\n", "\r\n", "é", "\u2028"]), min_size=1, max_size=40),
    chunk=st.integers(1, 8),
    bom=st.booleans(),
)
def test_the_line_reader_splits_as_an_editor_does_whatever_the_chunk_size(tmp_path, monkeypatch, pieces, chunk, bom):
    data = ("\ufeff" if bom else "").encode() + "x".join(pieces).encode()
    path = tmp_path / "lines.txt"
    path.write_bytes(data)
    monkeypatch.setattr(formats.files, "_CHUNK", chunk)
    expected = editor_lines(data)
    if not any(line.strip() for line in expected):
        with pytest.raises(GraphFormatError, match="file is empty"):
            list(read_lines(path))
    else:
        assert list(read_lines(path)) == list(enumerate(expected, start=1))


@pytest.mark.parametrize(
    "data, reason, line",
    [
        (b"1\r2\r\x003", "binary data", 3),
        (b"1\n2\r\n3 \xe9\n", "not UTF-8", 3),
        (b"\xef\xbb\xbf\xef\xbb\xbf1\n", "more than one byte-order mark", 1),
    ],
)
def test_the_line_reader_names_the_line_of_a_bad_byte_with_any_chunk_size(tmp_path, monkeypatch, data, reason, line):
    path = tmp_path / "bad.txt"
    path.write_bytes(data)
    for chunk in (1, 2, 3, 1 << 18):
        monkeypatch.setattr(formats.files, "_CHUNK", chunk)
        with pytest.raises(GraphFormatError, match=reason) as info:
            list(read_lines(path))
        assert info.value.line == line, chunk


def test_the_line_reader_reads_no_more_than_the_limit_whatever_size_the_file_reports():
    status = Path("/proc/self/status")  # a regular file that reports size 0
    if not status.exists():
        pytest.skip("needs Linux /proc")
    with pytest.raises(GraphFormatError, match="more than the 16 bytes allowed"):
        list(read_lines(status, limit=16))


# ---------------------------------------------------------------- JSON caps
def test_json_is_counted_before_it_is_parsed_and_strings_do_not_count_as_items(tmp_path, monkeypatch):
    monkeypatch.setitem(formats.MAX_JSON_COUNTS, "items", 12)
    path = tmp_path / "g.json"
    graph = wb.DataflowGraph.from_edges([1, 2], [(0, 1, 3)], names=("a,,,,,,,,,,b", "[{,,,,,,,,,,}]"), metadata={"name": "g"})
    graph.save(path)
    assert wb.load_graph(path).same_as(graph)  # 20 commas inside strings, 11 outside
    big = graph.with_metadata(flops=list(range(5)))
    big.save(path)
    with pytest.raises(GraphFormatError, match="more than the 12 items a JSON input may hold"):
        wb.load_graph(path)
    monkeypatch.setitem(formats.MAX_JSON_COUNTS, "strings", 3)
    with pytest.raises(GraphFormatError, match="more than the 3 strings"):
        wb.load_graph(path)


def test_a_numeric_field_over_its_cap_is_refused_before_it_is_copied(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"format": "workbench-graph", "compute": [0] * (MAX_NODES + 1), "src": [], "dst": [], "comm": []}))
    with pytest.raises(GraphFormatError, match="field 'compute' holds 1,000,001 items, more than the 1,000,000 ops"):
        wb.load_graph(path)


def test_json_numbers_come_back_exactly_in_every_field(tmp_path):
    path = tmp_path / "g.json"
    metadata = {"name": "g", "big": 10**30, "ratio": 0.1, "flags": [1, 2.5, -0.0, True, None], "nested": {"x": [[3]]}}
    graph = wb.DataflowGraph.from_edges([0.1, 2**40, 3], [(0, 1, 1e-300), (1, 2, 7)], metadata=metadata)
    graph.save(path)
    back = wb.load_graph(path)
    assert back.same_as(graph)
    assert {k: v for k, v in back.metadata.items() if k != "path"} == metadata
    assert type(back.metadata["big"]) is int and type(back.metadata["flags"][0]) is int
    assert back.compute.tolist() == [0.1, 2.0**40, 3.0] and back.comm.tolist() == [1e-300, 7.0]


# -------------------------------------------------------------- printing
def test_info_escapes_control_characters_from_the_file(tmp_path, capsys):
    path = tmp_path / "g.json"
    name = "\x1b[31mred\nsecond line\u202e"
    wb.DataflowGraph.from_edges([1, 2], [(0, 1)], metadata={"name": name, "format": "\x1b]0;title\x07"}).save(path)
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out
    assert "\\x1b[31mred\\nsecond line\\u202e" in out and "\\x1b]0;title\\x07" in out
    assert len(out.splitlines()) == 11  # one line per field
    assert printable("naïve name") == "naïve name"


def test_a_huge_stg_predecessor_list_is_refused_from_its_declared_count(tmp_path):
    path = tmp_path / "g.stg"
    path.write_text("2\n0 0 0\n1 3 1 " + "0 " * 1_000_000 + "\n2 4 1 1\n3 0 1 2\n")
    with pytest.raises(GraphFormatError, match="task 1 declares 1 predecessors but lists 1000000") as info:
        wb.load_graph(path)
    assert info.value.line == 3


def test_stg_and_paper_graphs_load_as_before_with_edges_in_task_order(tmp_path):
    path = tmp_path / "g.stg"
    path.write_text("3\n0 0 0\n3 1 2 1 2\n2 1 1 1\n1 1 1 0\n4 0 1 3\n")  # tasks out of order
    graph = wb.load_graph(path)
    assert list(zip(graph.src.tolist(), graph.dst.tolist(), strict=True)) == [(0, 1), (0, 2), (1, 2)]
    assert np.array_equal(graph.compute, [1, 1, 1])
