"""Placement files round-trip: what `place`, `compare` and training runs write, `simulate`, `place --start` and the API read."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.cli import main
from workbench.datasets import DATASETS_DIR
from workbench.placers.placement_file import FORMAT, PlacementError, content_hash

SHIPPED_BEST = DATASETS_DIR / "pretrained" / "ffnn_192nodes" / "best" / "placement.json"
"""A training run's best placement (shipped)."""
OLDER_FORM = ("graph", "devices", "assignment", "order", "makespan", "stage", "episode", "method")
"""The keys of a best placement as runs wrote it before the placement form had a format, a version or a hash."""


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(capsys, *argv: str) -> str:
    code, _, err = run(capsys, *argv)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_place_json_then_simulate_the_file(tmp_path, capsys):
    code, out, _ = run(capsys, "place", "ffnn", "--devices", "4", "--method", "heft", "--json")
    assert code == 0
    path = tmp_path / "p.json"
    path.write_text(out)
    placed = json.loads(out)
    graph = wb.bundled_graph("ffnn")
    assert placed["format"] == FORMAT and placed["graph"] == graph.name and placed["graph_hash"] == content_hash(graph)
    assert placed["nodes"] == graph.num_nodes and placed["devices"] == 4
    code, out, err = run(capsys, "simulate", "ffnn", "--assignment", str(path), "--json")
    assert code == 0, err
    simulated = json.loads(out)
    assert simulated["makespan"] == placed["makespan"] == wb.place(graph, "heft", 4).makespan and simulated["devices"] == 4


def test_place_out_is_the_json_and_simulate_takes_its_device_count(tmp_path, capsys):
    path = tmp_path / "p8.json"
    code, out, _ = run(capsys, "place", "chain_mm", "--devices", "8", "--method", "critical_path", "--out", str(path))
    assert code == 0 and f"placement    {path}" in out
    written = json.loads(path.read_text())
    assert written["devices"] == 8 and written["method"] == "critical_path"
    code, out, _ = run(capsys, "simulate", "chain_mm", "--assignment", str(path), "--json")  # no --devices: the file's 8
    assert code == 0 and json.loads(out)["devices"] == 8 and json.loads(out)["makespan"] == written["makespan"]


def older_best(folder: Path) -> Path:
    """The shipped best placement in the older form (no format, version or hash), as a file in ``folder``."""
    best = json.loads(SHIPPED_BEST.read_text())
    older = folder / "best_placement.json"
    older.write_text(json.dumps({key: best[key] for key in OLDER_FORM}))
    return older


def test_a_runs_best_placement_is_accepted_by_simulate(capsys, tmp_path):
    best, older = json.loads(SHIPPED_BEST.read_text()), older_best(tmp_path)  # the older form is still read
    for path in (SHIPPED_BEST, older):
        code, out, err = run(capsys, "simulate", "ffnn", "--assignment", str(path), "--json")
        assert code == 0, err
        assert json.loads(out)["makespan"] == best["makespan"]


def test_a_placement_of_another_graph_or_device_count_is_refused(tmp_path, capsys):
    path = tmp_path / "p.json"
    assert run(capsys, "place", "ffnn", "--method", "heft", "--out", str(path))[0] == 0
    err = one_line_error(capsys, "simulate", "chain_mm", "--assignment", str(path))
    assert f"{path} is a placement of graph 'ffnn_192nodes', not of 'chain_mm_112nodes'" in err
    err = one_line_error(capsys, "simulate", "ffnn", "--devices", "8", "--assignment", str(path))
    assert f"{path} is a placement on 4 devices, not 8" in err
    err = one_line_error(capsys, "simulate", "chain_mm", "--assignment", str(older_best(tmp_path)))  # no hash: refused by name
    assert "a placement of graph 'ffnn_192nodes', not of 'chain_mm_112nodes'" in err
    err = one_line_error(capsys, "place", "chain_mm", "--method", "local_search", "--start", str(path))
    assert "--start" in err and "not of 'chain_mm_112nodes'" in err


def test_a_changed_graph_of_the_same_name_is_refused_by_its_hash(tmp_path):
    graph = wb.bundled_graph("chain_mm")
    record = wb.place(graph, "heft", 4).to_dict()
    changed = wb.DataflowGraph.from_edges(
        graph.compute * 2,
        list(zip(graph.src.tolist(), graph.dst.tolist(), graph.comm.tolist(), strict=True)),
        metadata={"name": graph.name},
    )
    assert changed.name == graph.name
    with pytest.raises(PlacementError, match="another version of it"):
        wb.Placement.from_dict(record, changed)


def test_placement_dict_round_trip_and_plain_lists():
    graph = wb.bundled_graph("chain_mm")
    placed = wb.place(graph, "local_search", 4, budget=200)
    back = wb.Placement.from_dict(json.loads(json.dumps(placed.to_dict())))
    for name in ("method", "makespan", "lower_bound", "seconds", "devices", "graph", "graph_hash"):
        assert getattr(back, name) == getattr(placed, name), name
    assert np.array_equal(back.assignment, placed.assignment) and dict(back.details) == json.loads(json.dumps(dict(placed.details)))
    checked = wb.Placement.from_dict(placed.to_dict(), graph)  # checked against the graph and simulated on it
    assert checked.makespan == placed.makespan and checked.method == "local_search" and checked.devices == 4
    plain = wb.Placement.from_dict(placed.assignment.tolist(), graph, devices=4)
    assert plain.method == "given" and plain.makespan == placed.makespan and plain.graph_hash == placed.graph_hash
    with pytest.raises(PlacementError, match="give the device count"):
        wb.Placement.from_dict(placed.assignment.tolist(), graph)
    with pytest.raises(PlacementError, match="give the graph"):
        wb.Placement.from_dict(placed.assignment.tolist())
    with pytest.raises(PlacementError, match="op 0 is assigned to device 7, but devices are 0..3"):
        wb.Placement.from_dict([7] * graph.num_nodes, graph, devices=4)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"format": "doppler-graph"}, "format 'doppler-graph' is not a placement file"),
        ({"version": 99}, "version 99 is not one this workbench reads"),
        ({"assignment": None}, "has no 'assignment' list"),
        ({"nodes": 3}, "places 3 ops"),
        ({"devices": 0}, "'devices' is 0, not a device count"),
    ],
)
def test_load_placement_names_what_is_wrong(tmp_path, change, message):
    graph = wb.bundled_graph("chain_mm")
    path = tmp_path / "p.json"
    path.write_text(json.dumps({**wb.place(graph, "heft", 4).to_dict(), **change}))
    with pytest.raises(PlacementError, match=message) as info:
        wb.load_placement(path, graph)
    assert str(info.value).startswith(str(path))


def test_load_placement_refuses_broken_json_naming_the_file(tmp_path):
    path = tmp_path / "p.json"
    path.write_text('{"assignment": [0, 1,')
    with pytest.raises(PlacementError, match=rf"{path}: not valid JSON"):
        wb.load_placement(path, wb.bundled_graph("chain_mm"))
    with pytest.raises(PlacementError, match="no such file"):
        wb.load_placement(tmp_path / "missing.json", wb.bundled_graph("chain_mm"))


def test_place_start_resumes_a_search_from_a_file(tmp_path, capsys):
    path = tmp_path / "start.json"
    assert run(capsys, "place", "ffnn", "--devices", "3", "--method", "heft", "--out", str(path))[0] == 0
    code, out, err = run(capsys, "place", "ffnn", "--method", "local_search", "--budget", "50", "--start", str(path), "--json")
    assert code == 0, err
    searched = json.loads(out)
    assert searched["devices"] == 3 and searched["details"]["start_method"] == "given"  # the file's device count and assignment
    assert searched["makespan"] <= json.loads(path.read_text())["makespan"]
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps([0] * wb.bundled_graph("ffnn").num_nodes))
    code, out, _ = run(capsys, "place", "ffnn", "--method", "local_search", "--budget", "20", "--start", str(plain), "--json")
    assert code == 0 and json.loads(out)["devices"] == 4  # a plain list: the default device count
    err = one_line_error(capsys, "place", "ffnn", "--method", "heft", "--start", str(path))
    assert "--start: method 'heft' takes no starting placement" in err


def test_compare_json_rows_are_placement_files(tmp_path, capsys):
    code, out, _ = run(capsys, "compare", "chain_mm", "--devices", "3", "--methods", "round_robin,heft", "--json")
    assert code == 0
    rows = json.loads(out)["rows"]
    graph = wb.bundled_graph("chain_mm")
    for row in rows:
        assert wb.Placement.from_dict(row, graph).makespan == row["makespan"] == wb.place(graph, row["method"], 3).makespan
    path = tmp_path / "row.json"
    path.write_text(json.dumps(rows[1]))
    code, out, _ = run(capsys, "simulate", "chain_mm", "--assignment", str(path), "--json")
    assert code == 0 and json.loads(out)["makespan"] == rows[1]["makespan"]


def test_contracts_document_the_placement_form():
    text = (DATASETS_DIR.parent / "docs" / "contracts.md").read_text(encoding="utf-8")
    section = text[text.index("## Placement file") :]
    for key in ("format", "version", "graph", "graph_hash", "nodes", "devices", "assignment", "method", "makespan"):
        assert f"`{key}`" in section, key
