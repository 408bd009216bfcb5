"""Loaders: the paper's text format, STG, native JSON; every malformed file gives a GraphFormatError."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import workbench as wb
from workbench.datasets import DATASETS_DIR, stg_graphs
from workbench.formats import GraphFormatError

PAPER_SIZES = {
    "chain_mm_112nodes": (76, 80),
    "ffnn_192nodes": (180, 208),
    "transformer_block_215nodes": (182, 234),
    "full_transformer_layer_261nodes": (229, 284),
}

VALID_PAPER = "5\n0, 1,\n0, 0, 1\n1,2, 2\n10,40\n20,50\n30,60\n"


def test_paper_graphs_load_with_documented_sizes(paper_graphs):
    for name, (nodes, edges) in PAPER_SIZES.items():
        g = paper_graphs[name]
        assert (g.num_nodes, g.num_edges) == (nodes, edges)
        assert g.metadata["format"] == "doppler-paper"
        # every out-edge carries its producer's communication cost
        first = {}
        for s, c in zip(g.src.tolist(), g.comm.tolist(), strict=True):
            assert first.setdefault(s, c) == c


def test_paper_format_reads_every_run_of_digits(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text(VALID_PAPER)
    g = wb.load_graph(path)
    assert g.num_nodes == 3
    assert list(zip(g.src.tolist(), g.dst.tolist(), strict=True)) == [(0, 1), (0, 2), (1, 2)]
    assert g.compute.tolist() == [10, 20, 30]
    assert g.comm.tolist() == [40, 40, 50]


def test_stg_graphs_drop_dummy_tasks():
    path = DATASETS_DIR / "stg" / "50" / "rand0000.stg"
    g = wb.load_graph(path)
    assert g.num_nodes == 50
    assert g.longest_path() == 55  # the file's own "CP Length" comment
    assert g.total_comm == 0.0


def test_every_stg_graph_loads_and_respects_its_optimum():
    optimum = {}
    with open(DATASETS_DIR / "stg" / "optimal_makespans.csv") as handle:
        for row in csv.DictReader(handle):
            optimum[row["graph"], int(row["processors"])] = float(row["optimal_makespan"])
    paths = stg_graphs()
    assert len(paths) == 180
    for path in paths:
        g = wb.load_graph(path)
        for p in (2, 4, 8, 16):
            assert wb.lower_bound(g, p) <= optimum[f"50/{path.name}", p]


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


BAD_PAPER = {
    "empty": ("", None, "empty"),
    "binary": (b"\x00\x01\x02garbage", 1, "binary"),
    "not utf8": (b"5\n\xff\xfe\n", 2, "UTF-8"),
    "truncated header": ("5\n0, 1,\n", 2, "header lines"),
    "bad count": ("five\n0,\n0\n1\n1,1\n1,1\n", 1, "total node count"),
    "cycle": ("4\n0, 1,\n0, 1\n1, 0\n1,1\n1,1\n", 3, "cycle"),
    "unknown node": ("5\n0, 1,\n0, 0\n1, 7\n1,1\n1,1\n1,1\n", 4, "node 7"),
    "length mismatch": ("5\n0, 1,\n0, 0, 1\n1, 2\n1,1\n1,1\n1,1\n", 4, "3 edge sources"),
    "too few cost lines": ("5\n0, 1,\n0\n1\n1,1\n1,1\n", 7, "2 cost lines for 3 nodes"),
    "negative cost": ("4\n0, 1,\n0\n1\n1,-1\n1,1\n", 5, "finite number >= 0"),
    "non-numeric cost": ("4\n0, 1,\n0\n1\n1,x\n1,1\n", 5, "not a number"),
    "letters in ids": ("4\n0, 1,\n0, a\n1\n1,1\n1,1\n", 3, "unexpected character 'a'"),
    "no nodes": ("2\n0, 1,\n\n\n", 1, "no node"),
}


@pytest.mark.parametrize("case", sorted(BAD_PAPER))
def test_malformed_paper_files_name_file_and_line(tmp_path, case):
    content, line, message = BAD_PAPER[case]
    path = write(tmp_path, "bad.txt", content)
    with pytest.raises(GraphFormatError, match=message) as info:
        wb.load_graph(path)
    assert info.value.path == str(path)
    assert info.value.line == line
    assert str(path) in str(info.value)


STG_OK = "2\n0 0 0\n1 3 1 0\n2 4 1 1\n3 0 1 2\n"
BAD_STG = {
    "duplicate id": ("2\n0 0 0\n1 3 1 0\n1 4 1 1\n3 0 1 1\n", "duplicate task id 1"),
    "wrong count": ("2\n0 0 0\n1 3 1 0\n3 0 1 1\n", "3 task lines, expected 4"),
    "pred out of range": ("2\n0 0 0\n1 3 1 0\n2 4 1 9\n3 0 1 2\n", "predecessor 9"),
    "pred count": ("2\n0 0 0\n1 3 2 0\n2 4 1 1\n3 0 1 2\n", "declares 2 predecessors"),
    "negative cost": ("2\n0 0 0\n1 -3 1 0\n2 4 1 1\n3 0 1 2\n", "negative cost"),
    "text": ("2\n0 0 0\n1 x 1 0\n2 4 1 1\n3 0 1 2\n", "not an integer"),
    "cycle": ("2\n0 0 0\n1 3 2 0 2\n2 4 1 1\n3 0 1 2\n", "cycle"),
}


def test_minimal_stg_file(tmp_path):
    g = wb.load_graph(write(tmp_path, "ok.stg", STG_OK))
    assert g.compute.tolist() == [3, 4] and list(zip(g.src, g.dst, strict=True)) == [(0, 1)]


@pytest.mark.parametrize("case", sorted(BAD_STG))
def test_malformed_stg_files(tmp_path, case):
    content, message = BAD_STG[case]
    with pytest.raises(GraphFormatError, match=message):
        wb.load_graph(write(tmp_path, "bad.stg", content))


BAD_JSON = {
    "syntax": ('{"format": "workbench-graph",', "invalid JSON"),
    "not object": ("[1, 2]", "expected a JSON object"),
    "foreign": ('{"nodes": []}', "not a workbench graph"),
    "bad field": ('{"format": "workbench-graph", "compute": "x", "src": [], "dst": [], "comm": []}', "'compute' must be a list"),
    "non-number": ('{"format": "workbench-graph", "compute": [1, "a"], "src": [], "dst": [], "comm": []}', "non-number"),
    "bad edge": ('{"format": "workbench-graph", "compute": [1], "src": [0], "dst": [3], "comm": [1]}', "destination 3"),
    "length": ('{"format": "workbench-graph", "compute": [1, 1], "src": [0], "dst": [], "comm": [1]}', "edge destinations"),
}


@pytest.mark.parametrize("case", sorted(BAD_JSON))
def test_malformed_json_files(tmp_path, case):
    content, message = BAD_JSON[case]
    with pytest.raises(GraphFormatError, match=message):
        wb.load_graph(write(tmp_path, "bad.json", content))


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(GraphFormatError, match="no such file"):
        wb.load_graph(tmp_path / "nope.txt")
    with pytest.raises(GraphFormatError, match="directory"):
        wb.load_graph(tmp_path)


def test_format_is_sniffed_without_extension(tmp_path):
    assert wb.load_graph(write(tmp_path, "paper", VALID_PAPER)).num_nodes == 3
    assert wb.load_graph(write(tmp_path, "stg", STG_OK)).num_nodes == 2


def test_native_json_round_trip_keeps_everything(tmp_path, paper_graphs):
    g = paper_graphs["ffnn_192nodes"]
    path = tmp_path / "ffnn.json"
    wb.save_graph(g, path)
    back = wb.load_graph(path)
    assert back.same_as(g)
    assert back.metadata["format"] == "doppler-paper" and back.name == "ffnn_192nodes"
    assert json.loads(path.read_text())["format"] == "workbench-graph"
    assert not list(tmp_path.glob(".tmp-*"))
