"""One run-directory layout for every trainer (issue 30): ``workbench train``, its corpus, gate and scorer modes and the
pretrained export each write a tiny run, the one reader (:func:`workbench.runs.read_run`) reads each, and the dashboard
lists each on Training and offers its weights on Compare (the browser half: ``test_run_writers_browser.py``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.test_corpus_training import FAST, TINY
from workbench.cli import main
from workbench.datasets import DATASETS_DIR
from workbench.runs import ZERO_SHOT_FOLDER, RunPaths, list_runs, read_rows, read_run, shipped_training_runs
from workbench.training.corpus_training import CorpusTrainConfig, train_on_corpus
from workbench.training.gate_training import GateTrainConfig, train_gate
from workbench.training.pretrained import export_policy, migrate_shipped

TRAIN = "sweep1/seed0"
"""``workbench train``'s run, two folders below the runs folder."""
EXPORTED = "pretrained/ffnn_192nodes"
"""Where the export of that run goes, in the test's datasets folder: the shipped policy of the graph it was trained on."""
SCORER_OPTIONS = ["--devices", "4", "--rounds", "1", "--trajectory-budget", "20", "--states-per-run", "2"]
SCORER_OPTIONS += ["--candidates-per-state", "16", "--epochs", "2", "--max-graphs", "1"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path]:
    """``(runs, datasets)``: a tiny run of each trainer in ``runs`` and the export of the ``workbench train`` run in a
    copy of the bundled graphs' datasets folder."""
    runs, datasets = tmp_path_factory.mktemp("runs"), tmp_path_factory.mktemp("datasets")
    for name in ("doppler-paper", "stg"):
        shutil.copytree(DATASETS_DIR / name, datasets / name)
    options = ["--stages", "il,sim", "--episodes", "2,2", "--no-progress", "--set", "search_samples=2"]
    assert main(["train", "ffnn", "--out", str(runs / TRAIN), *options]) == 0
    export_policy(runs / TRAIN, datasets / EXPORTED)
    train_on_corpus(runs / "corpus", CorpusTrainConfig(episodes=2, select_every=1, **FAST), corpus=TINY, command="corpus test")
    train_gate(runs / "gate", GateTrainConfig(devices=(2, 4), select_devices=(2, 4), steps=4, select_every=2), corpus=TINY)
    assert main(["train", "scorer", "--out", str(runs / "scorer"), *SCORER_OPTIONS]) == 0
    return runs, datasets


# the weights each trainer keeps, where its stage's kept weights go (checkpoints/<stage>-best) when it selects
KEPT = {
    TRAIN: ("il", "sim"),
    "corpus": ("il-best", "last"),
    "gate": ("gate-best",),
    "scorer": ("scorer",),
}
STAGES = {TRAIN: ["il", "sim"], "corpus": ["il"], "gate": ["gate"], "scorer": ["scorer"]}
METHODS = {TRAIN: "doppler", "corpus": "doppler", "gate": "doppler_plc_only", "scorer": "learned_search"}


def test_the_one_lister_finds_every_trainers_run_also_two_folders_deep(trained):
    runs, _ = trained
    assert sorted(run.name for run in list_runs(runs)) == sorted(KEPT)


@pytest.mark.parametrize("name", sorted(KEPT))
def test_every_trainer_writes_one_layout_that_the_one_reader_reads_whole(trained, name):
    runs, _ = trained
    run = read_run(runs / name)
    assert run.problems == () and run.status == "finished", run.problems
    assert run.meta is not None and run.config is not None
    assert run.meta["method"] == METHODS[name] and run.meta["stages"] == STAGES[name]
    assert run.meta["started"] <= run.meta["finished"] and run.meta["versions"]["workbench"] and run.meta["machine"]["cores"]
    assert run.meta["graphs"] and all(isinstance(graph, str) for graph in run.meta["graphs"])
    assert {path.name.removesuffix(".safetensors") for path in run.checkpoints} >= set(KEPT[name])
    assert len(run.metrics) == len(read_rows(runs / name / "metrics.csv")) > 0
    assert json.loads((runs / name / "config.json").read_text()) == run.config


def test_each_run_records_the_command_that_made_it(trained):
    runs, _ = trained
    commands = {name: read_run(runs / name).meta["command"] for name in KEPT}
    assert commands[TRAIN].startswith("workbench train ffnn") and commands["corpus"] == "corpus test"
    assert commands["scorer"].split() == ["workbench", "train", "scorer", "--out", str(runs / "scorer"), *SCORER_OPTIONS]


def test_the_scorer_appends_a_row_per_epoch_and_the_gate_and_corpus_keep_their_tables(trained):
    runs, _ = trained
    assert [(row["episode"], row["epoch"]) for row in read_rows(runs / "scorer" / "metrics.csv")] == [("0", "0"), ("1", "1"), ("2", "2")]
    assert [row["step"] for row in read_rows(runs / "gate" / "selection.csv")] == ["0", "2", "4"]
    assert [row["episode"] for row in read_rows(runs / "gate" / "metrics.csv")] == ["0", "1", "2", "3", "4"]  # one per step
    assert [row["episode"] for row in read_rows(runs / "corpus" / "selection.csv")] == ["0", "1", "2"]
    assert read_run(runs / "gate").meta["stage"] == "rule gate on fresh heads"


def test_the_export_is_an_ordinary_run_directory_with_the_best_placements_trace(trained):
    runs, datasets = trained
    exported, source = read_run(datasets / EXPORTED), read_run(runs / TRAIN)
    assert exported.problems == () and exported.status == "finished"
    assert exported.meta == source.meta and exported.config == source.config
    assert exported.metrics.equals(source.metrics) and exported.greedy.equals(source.greedy)
    assert exported.best_placement == source.best_placement and exported.best_placement["graph"] == "ffnn_192nodes"
    assert exported.best_trace is not None and exported.best_trace.makespan == exported.best_placement["makespan"]
    assert exported.checkpoints == () and (datasets / EXPORTED / "doppler.safetensors").is_file()


def test_the_migration_turns_an_older_export_into_the_shipped_layout_and_then_writes_nothing(tmp_path):
    shipped = DATASETS_DIR / "pretrained"
    copy = tmp_path / "pretrained"
    shutil.copytree(shipped, copy)
    assert migrate_shipped(copy) == []  # the shipped folders are migrated already
    folder = RunPaths(copy / "chain_mm_112nodes")
    placement = json.loads((folder.best_dir / "placement.json").read_text())
    older = {key: placement[key] for key in ("graph", "devices", "assignment", "order", "makespan", "stage", "episode", "method")}
    shutil.rmtree(folder.best_dir)
    (folder.path / "best_placement.json").write_text(json.dumps(older))
    assert migrate_shipped(copy) == [folder.best_dir / "placement.json", folder.best_dir / "trace.json"]
    for name in ("placement.json", "trace.json"):
        assert (folder.best_dir / name).read_text() == (shipped / "chain_mm_112nodes" / "best" / name).read_text()
    assert not (folder.path / "best_placement.json").exists()


def test_every_shipped_folder_reads_through_the_one_reader_as_a_finished_run():
    shipped = sorted(path for path in (DATASETS_DIR / "pretrained").iterdir() if path.is_dir())
    assert [path.name for path in shipped] == sorted([*(p.name for p in shipped_training_runs()), ZERO_SHOT_FOLDER, "learned_search"])
    for folder in shipped:
        run = read_run(folder)
        missing = ("metrics.csv is missing (no episode logged yet)",) if folder.name == ZERO_SHOT_FOLDER else ()  # trained before
        assert run.problems == missing and run.status == "finished" and run.meta["stages"] and run.config, folder.name
    for folder in shipped_training_runs():
        run = read_run(folder)
        assert run.best_trace is not None and run.best_trace.makespan == run.best_placement["makespan"], folder.name
        assert run.best_placement["graph"] == folder.name == run.meta["graphs"][0]
