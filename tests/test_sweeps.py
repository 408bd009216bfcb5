"""Sweeps: grid expansion, config errors, engines agree, resume, failed cells, Ray."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pandas as pd
import pytest

import workbench as wb
from workbench.cli import main
from workbench.placers.base import REGISTRY, Decision, Placer
from workbench.placers.registry import PlacerEntry
from workbench.sweeps import ConfigError, parse_config, read_results, sweep

SMALL = {"name": "t", "graphs": ["chain_mm"], "devices": [2, 3], "methods": ["critical_path", "round_robin"], "seeds": 2}


class ExplodingPlacer(Placer):
    """Raises for odd seeds: stands in for a method that fails on some cells."""

    def place(self, graph, devices, seed=0):
        if seed % 2:
            raise RuntimeError("boom on an odd seed")
        return Decision(np.zeros(graph.num_nodes, dtype=np.int64))


class CountingPlacer(Placer):
    """Counts its calls in ``log/calls.log`` (shared across processes) and places everything on device 0."""

    def __init__(self, log: str = "", checkpoint: str | None = None):
        self.log = log

    def place(self, graph, devices, seed=0):
        with open(f"{self.log}/calls.log", "a", encoding="utf-8") as handle:
            handle.write(f"{seed}\n")
        return Decision(np.zeros(graph.num_nodes, dtype=np.int64))


@pytest.fixture
def test_placers():
    REGISTRY["exploding"] = PlacerEntry(__name__, "ExplodingPlacer", "raises on odd seeds", "heuristic")
    REGISTRY["counting"] = PlacerEntry(__name__, "CountingPlacer", "counts calls", "heuristic")
    yield
    del REGISTRY["exploding"], REGISTRY["counting"]


def test_grid_expands_every_combination_with_option_lists():
    config = parse_config({**SMALL, "methods": ["critical_path", {"method": "random", "label": "rnd", "options": {}}], "seeds": [5, 7]})
    cells = config.cells()
    assert len(cells) == 1 * 2 * 2 * 2
    assert {(c.devices, c.label, c.seed) for c in cells} == {(d, m, s) for d in (2, 3) for m in ("critical_path", "rnd") for s in (5, 7)}
    assert len({c.key for c in cells}) == len(cells)


def test_option_values_are_parsed_as_workbench_place_parses_them():
    """YAML reads ``1e-3`` and ``"800"`` as text: the grid holds the numbers ``--option`` would give the placer."""
    method = {"method": "local_search", "options": {"budget": ["800", 900], "initial_temperature": "1e-3"}}
    cells = parse_config({**SMALL, "devices": 2, "seeds": 1, "methods": [method]}).cells()
    assert [dict(c.options)["budget"] for c in cells] == [800, 900]
    assert all(dict(c.options)["initial_temperature"] == 0.001 for c in cells)


def test_option_lists_expand(test_placers, tmp_path):
    config = parse_config({**SMALL, "devices": 2, "seeds": 1, "methods": [{"method": "counting", "options": {"log": ["a", "b", "c"]}}]})
    assert [dict(c.options)["log"] for c in config.cells()] == ["a", "b", "c"]
    assert config.cells()[0].parameters()["option.log"] == "a"


@pytest.mark.parametrize(
    "change, message",
    [
        ({"colour": "red"}, "unknown key(s) 'colour'"),
        ({"methods": ["heft_typo"]}, "unknown method 'heft_typo'"),
        ({"devices": [4, 0]}, "devices: must be positive integers"),
        ({"devices": "four"}, "devices: must be positive integers"),
        ({"graphs": ["no/such/graph.txt"]}, "'no/such/graph.txt' is neither a graph file"),
        ({"methods": [{"method": "critical_path", "options": {"budget": 5}}]}, "does not take option(s) budget"),
        ({"methods": [{"method": "local_search", "options": {"budget": [500, "lots"]}}]}, "option budget='lots' of method 'local_search'"),
        ({"methods": [{"method": "local_search", "options": {"budget": 2.5}}]}, "expected a whole number"),
        ({"seeds": 0}, "seeds"),
        ({"engine": "slurm"}, "engine: 'slurm'"),
    ],
)
def test_bad_configs_name_the_key_and_value(change, message):
    with pytest.raises(ConfigError) as info:
        parse_config({**SMALL, **change})
    assert message in str(info.value)


def test_cli_bad_config_is_one_line_exit_2(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("graphs: [chain_mm]\nmethods: [nope]\n")
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown method 'nope'" in err


def test_serial_and_local_pool_give_identical_results(tmp_path):
    config = {**SMALL, "graphs": ["chain_mm", "ffnn"], "methods": ["critical_path", "heft", "random"]}
    serial = sweep(config, engine="serial", out=tmp_path / "s.csv", progress=False)
    pooled = sweep(config, engine="local", workers=2, out=tmp_path / "p.csv", progress=False)
    assert len(serial) == 2 * 2 * 3 * 2 and (serial["status"] == "ok").all()
    key = ["graph", "devices", "method", "seed"]
    merged = serial.merge(pooled, on=key, suffixes=("_s", "_p"))
    assert len(merged) == len(serial)
    assert (merged["makespan_s"] == merged["makespan_p"]).all()
    on_disk = read_results(tmp_path / "p.csv")
    assert set(on_disk["cell"]) == set(pooled["cell"])


def test_resume_skips_finished_cells_and_reruns_failed_ones(test_placers, tmp_path):
    log = tmp_path / "calls.log"
    config = {**SMALL, "devices": 2, "seeds": 3, "methods": [{"method": "counting", "options": {"log": str(tmp_path)}}, "exploding"]}
    out = tmp_path / "r.csv"
    first = sweep(config, out=out, progress=False)
    assert log.read_text().split() == ["0", "1", "2"]
    assert list(first.query("method == 'exploding'")["status"]) == ["ok", "error", "ok"]
    again = sweep(config, out=out, progress=False)
    assert log.read_text().split() == ["0", "1", "2"], "finished cells must not run again"
    assert len(again) == 6
    bigger = {**config, "seeds": 4}
    sweep(bigger, out=out, progress=False)
    assert log.read_text().split() == ["0", "1", "2", "3"], "only the new seed runs"
    assert len(read_results(out)) == 8


def test_a_failing_cell_records_its_error_and_the_rest_finish(test_placers, tmp_path):
    config = {**SMALL, "seeds": [0, 1, 2, 3], "methods": ["exploding", "critical_path"]}
    for engine in ("serial", "local"):
        frame = sweep(config, engine=engine, workers=2, out=tmp_path / f"{engine}.csv", progress=False)
        failed = frame[frame["status"] == "error"]
        assert len(frame) == 16 and len(failed) == 4
        assert set(failed["seed"]) == {1, 3} and set(failed["method"]) == {"exploding"}
        assert failed["error"].str.contains("RuntimeError: boom on an odd seed").all()
        assert failed["makespan"].isna().all()
        ok = frame[frame["status"] == "ok"]
        assert (ok["makespan"] >= ok["lower_bound"]).all()


def test_table_is_tidy_and_matches_place(tmp_path):
    frame = sweep({**SMALL, "devices": 3, "seeds": 1, "methods": ["critical_path"]}, out=tmp_path / "t.csv", progress=False)
    row = frame.iloc[0]
    direct = wb.place(wb.bundled_graph("chain_mm"), "critical_path", devices=3, seed=0)
    assert row["makespan"] == pytest.approx(direct.makespan)
    assert row["lower_bound"] == pytest.approx(direct.lower_bound)
    assert row["nodes"] == wb.bundled_graph("chain_mm").num_nodes
    for column in ("graph", "devices", "method", "seed", "options", "makespan", "lower_bound", "seconds", "status", "error"):
        assert column in frame.columns
    assert not list(tmp_path.glob(".tmp-*")), "no temporary files left behind"


def test_cli_sweep_writes_the_table(tmp_path, capsys):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({**SMALL, "devices": 2, "seeds": 1, "out": str(tmp_path / "o.csv")}))
    assert main(["sweep", str(config), "--no-progress"]) == 0
    assert "2/2 cells ok" in capsys.readouterr().out
    assert len(pd.read_csv(tmp_path / "o.csv")) == 2


@pytest.mark.slow
def test_ray_engine_on_a_local_two_cpu_instance(tmp_path):
    ray = pytest.importorskip("ray")
    config = {**SMALL, "devices": 2, "methods": ["critical_path", "random"]}
    serial = sweep(config, out=tmp_path / "s.csv", progress=False)
    try:
        on_ray = sweep(config, engine="ray", workers=2, out=tmp_path / "r.csv", progress=False)
    except (ConnectionError, RuntimeError) as exc:  # pragma: no cover - only when Ray cannot start here
        pytest.skip(f"Ray did not start: {exc}")
    assert not ray.is_initialized(), "the sweep shuts down the Ray instance it started"
    assert (on_ray["status"] == "ok").all()
    assert list(on_ray.sort_values("cell")["makespan"]) == list(serial.sort_values("cell")["makespan"])


def test_generated_graphs_in_a_config(tmp_path):
    if not hasattr(wb, "generate"):
        pytest.skip("workbench.generate is not part of this installation")
    config = parse_config(
        {
            **SMALL,
            "devices": 2,
            "seeds": 1,
            "methods": ["critical_path"],
            "graphs": [{"generate": "layered", "layers": 3, "width": 4, "seed": 2}],
        }
    )
    assert config.graphs[0].label == "layered(layers=3,seed=2,width=4)"
    frame = sweep(config, out=tmp_path / "g.csv", progress=False)
    assert frame.iloc[0]["status"] == "ok"
    assert frame.iloc[0]["nodes"] == wb.generate("layered", layers=3, width=4, seed=2).num_nodes


def test_parquet_output_needs_pyarrow_and_says_so(tmp_path):
    if importlib.util.find_spec("pyarrow") is None:
        with pytest.raises(
            ValueError, match=r"Parquet needs pyarrow, which is not installed \(pip install 'doppler-workbench\[sweeps\]'\)"
        ):
            sweep({**SMALL, "devices": 2, "seeds": 1}, out=tmp_path / "r.parquet", progress=False)
    else:
        frame = sweep({**SMALL, "devices": 2, "seeds": 1}, out=tmp_path / "r.parquet", progress=False)
        assert len(read_results(tmp_path / "r.parquet")) == len(frame) == 2


def test_an_unreadable_results_file_is_not_overwritten(tmp_path):
    out = tmp_path / "r.csv"
    out.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a sweep results table"):
        sweep({**SMALL, "devices": 2, "seeds": 1}, out=out, progress=False)
    assert out.read_text() == "a,b\n1,2\n"


def test_a_changed_file_option_makes_its_cells_run_again(test_placers, tmp_path):
    log, checkpoint = tmp_path / "calls.log", tmp_path / "policy.pt"
    checkpoint.write_bytes(b"weights")
    config = {
        **SMALL,
        "devices": 2,
        "seeds": 1,
        "methods": [{"method": "counting", "options": {"log": str(tmp_path), "checkpoint": str(checkpoint)}}],
    }
    out = tmp_path / "r.csv"
    sweep(config, out=out, progress=False)
    sweep(config, out=out, progress=False)
    assert log.read_text().split() == ["0"], "unchanged file: skipped"
    checkpoint.write_bytes(b"retrained weights")
    sweep(config, out=out, progress=False)
    assert log.read_text().split() == ["0", "0"]


def test_cli_summary_keeps_option_grids_apart_and_says_where_the_table_is(tmp_path, capsys):
    out = tmp_path / "grid.csv"
    config = tmp_path / "c.json"
    grid = {"method": "local_search", "options": {"budget": [20, 200]}}
    config.write_text(json.dumps({**SMALL, "devices": 2, "seeds": 2, "methods": ["critical_path", grid], "out": str(out)}))
    assert main(["sweep", str(config), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert f"6/6 cells ok; results in {out}" in text
    lines = text.splitlines()
    header = next(line for line in lines if "mean" in line)
    assert "gap" in header.split() and "count" in header.split()
    assert sum('{"budget": 20}' in line for line in lines) == 1 and sum('{"budget": 200}' in line for line in lines) == 1
    frame = read_results(out)
    bound = frame["lower_bound"].max()
    for budget in (20, 200):
        mean = frame[frame["option.budget"] == budget]["makespan"].mean()
        row = next(line for line in lines if f'{{"budget": {budget}}}' in line)
        assert row.split()[-2] == "2" and row.split()[-1] == f"{mean / bound - 1:.1%}"  # count over seeds, then the gap


def test_a_resumed_sweep_says_how_many_cells_it_skipped(tmp_path, capsys):
    config = {**SMALL, "devices": 2, "seeds": 1}
    sweep(config, out=tmp_path / "r.csv", progress=False)
    sweep({**config, "seeds": 2}, out=tmp_path / "r.csv", progress=True)
    assert f"t: 2 of 4 cells already in {tmp_path / 'r.csv'}, skipped" in capsys.readouterr().err


class InterruptedPlacer(Placer):
    """Stands in for Ctrl-C during a cell."""

    def place(self, graph, devices, seed=0):
        raise KeyboardInterrupt


def test_an_interrupted_sweep_says_so_once_and_keeps_its_finished_cells(tmp_path, capsys):
    REGISTRY["interrupted"] = PlacerEntry(__name__, "InterruptedPlacer", "Ctrl-C", "heuristic")
    try:
        config = tmp_path / "c.json"
        config.write_text(
            json.dumps({**SMALL, "devices": 2, "seeds": 1, "methods": ["critical_path", "interrupted"], "out": str(tmp_path / "r.csv")})
        )
        assert main(["sweep", str(config)]) == 130
    finally:
        del REGISTRY["interrupted"]
    assert capsys.readouterr().err.count("interrupted") == 1
    assert len(read_results(tmp_path / "r.csv")) == 1
