"""The shared contracts below every layer: run-directory paths and readers, atomic writes, provenance."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from workbench import fileio, provenance, rundir


def test_readers_and_the_writer_import_without_torch():
    code = (
        "import sys\n"
        "import workbench.rundir, workbench.fileio, workbench.provenance, workbench.training\n"
        "from workbench.training import METRIC_COLUMNS, read_metrics, read_meta\n"
        "import workbench.dashboard.runs\n"
        "workbench.provenance.machine(); workbench.provenance.versions()\n"
        "print(sorted(m for m in ('torch', 'dgl') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_checkpoint_names_come_from_one_function(tmp_path):
    run = rundir.RunPaths(tmp_path)
    assert run.last_checkpoint == rundir.checkpoint_file(tmp_path / "checkpoints", "last")
    assert run.best_checkpoint("sim") == rundir.checkpoint_file(tmp_path / "checkpoints", "sim-best")
    assert rundir.pretrained_checkpoint("ffnn", "doppler", tmp_path) == rundir.checkpoint_file(tmp_path / "ffnn", "doppler")
    assert run.checkpoints() == () and run.selected_checkpoint("il") is None and run.stage_checkpoints(["il"]) == {}


def test_stage_checkpoints_in_stage_order_and_the_best_weights_win(tmp_path):
    run = rundir.RunPaths(tmp_path)
    run.checkpoint_dir.mkdir()
    for name in ("sim", "last", "il", "sim-best"):
        run.checkpoint(name).write_bytes(b"w")
    assert list(run.stage_checkpoints(["il", "sim"])) == ["il", "sim", "sim-best"]
    assert run.selected_checkpoint("sim") == run.best_checkpoint("sim")
    assert run.selected_checkpoint("il") == run.stage_checkpoint("il")
    assert [p.name for p in run.checkpoints()] == sorted(rundir.checkpoint_file("", n).name for n in ("sim", "last", "il", "sim-best"))


REF = {"critical_path": 10.0, "best_heuristic": 9.0, "best_heuristic_method": "heft"}
OTHER = {**REF, "critical_path": 3.0}


@pytest.mark.parametrize(
    "meta, expected",
    [
        ({"graphs": ["g"], "reference": {"g": REF}}, {"g": REF}),
        ({"graphs": ["g"], "reference": REF}, {"g": REF}),  # the flat form of runs written before the rule
        ({"graphs": ["a", "b"], "reference": {"a": REF, "b": OTHER}}, {"a": REF, "b": OTHER}),
        ({"graphs": ["a", "b"], "reference": REF}, {}),  # flat but ambiguous
        ({"graphs": ["g"]}, {}),
        (None, {}),
    ],
)
def test_references_are_keyed_per_graph_whatever_the_run_wrote(meta, expected):
    assert rundir.references(meta) == expected
    only = next(iter(expected.values())) if len(expected) == 1 else {}
    assert rundir.reference(meta) == only


def test_shipped_pretrained_runs_have_a_reference_for_their_graph():
    from workbench.datasets import DATASETS_DIR

    metas = [run / "meta.json" for run in rundir.shipped_training_runs(DATASETS_DIR / "pretrained")]
    assert metas
    for path in metas:
        assert rundir.reference(rundir.read_meta(path), path.parent.name)["critical_path"] > 0


def test_read_metrics_drops_a_half_written_last_line(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text(",".join(rundir.METRIC_COLUMNS) + "\n" + "il,0,g" + ",1" * 11 + ",sim\n" + "sim,1,g,2")
    rows = rundir.read_metrics(path)
    assert [r["episode"] for r in rows] == ["0"] and rows[0]["oracle"] == "sim"
    assert set(rundir.VALUE_COLUMNS) | set(rundir.TEXT_COLUMNS) | {"episode"} == set(rundir.METRIC_COLUMNS)


def test_a_stray_quote_costs_only_its_own_row(tmp_path):
    path = tmp_path / "metrics.csv"
    row = "il,{},g" + ",1" * 11 + ",sim\n"
    rows = [row.format(episode) for episode in range(400)]
    rows[10] = rows[10].replace(",g,", ',"g,')  # one unbalanced quote
    path.write_text(",".join(rundir.METRIC_COLUMNS) + "\n" + "".join(rows))
    episodes = [r["episode"] for r in rundir.read_metrics(path)]
    assert len(episodes) == 399 and "10" not in episodes and episodes[-1] == "399"


def test_try_read_meta_never_raises(tmp_path):
    (tmp_path / "half.json").write_text('{"status": "runn')
    (tmp_path / "list.json").write_text("[1]")
    for name in ("half.json", "list.json", "none"):
        assert rundir.try_read_meta(tmp_path / name) == {}


def test_an_interrupted_atomic_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "sub" / "meta.json"
    fileio.atomic_write_json(target, {"status": "running"})
    with pytest.raises(RuntimeError):
        with fileio.atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("power loss")
    assert json.loads(target.read_text()) == {"status": "running"}
    assert [p.name for p in target.parent.iterdir()] == ["meta.json"]
    fileio.atomic_write_text(target, "x")
    assert target.read_text() == "x"


def test_provenance_names_the_package_the_machine_and_the_time():
    found = provenance.versions()
    assert found["workbench"] and found["python"] and found["numpy"]
    assert {"cpu", "cores", "python", "system", "host", "cuda"} <= set(provenance.machine())
    assert provenance.now().endswith("+00:00")
