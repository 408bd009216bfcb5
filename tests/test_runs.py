"""The shared contracts below every layer: run directories (workbench.runs: layout, reader, lister), atomic writes, provenance."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench import fileio, provenance, runs


def test_readers_and_the_writer_import_without_torch():
    code = (
        "import sys\n"
        "import workbench.runs, workbench.fileio, workbench.provenance, workbench.training\n"
        "from workbench.training import RunDirectory\n"
        "import workbench.dashboard.context, workbench.runs.read\n"
        "workbench.provenance.machine(); workbench.provenance.versions()\n"
        "print(sorted(m for m in ('torch', 'dgl') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_runs_package_imports_without_pandas():
    """A checkpoint writer names its file through workbench.runs; that must not cost a pandas import."""
    code = "import sys, workbench.runs\nprint(sorted(m for m in ('pandas', 'torch') if m in sys.modules))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_checkpoint_names_come_from_one_function(tmp_path):
    run = runs.RunPaths(tmp_path)
    assert run.last_checkpoint == runs.checkpoint_file(tmp_path / "checkpoints", "last")
    assert run.best_checkpoint("sim") == runs.checkpoint_file(tmp_path / "checkpoints", "sim-best")
    assert runs.pretrained_checkpoint("ffnn", "doppler", tmp_path) == runs.checkpoint_file(tmp_path / "ffnn", "doppler")
    assert run.checkpoints() == () and run.selected_checkpoint("il") is None and run.stage_checkpoints(["il"]) == {}


def test_stage_checkpoints_in_stage_order_and_the_best_weights_win(tmp_path):
    run = runs.RunPaths(tmp_path)
    run.checkpoint_dir.mkdir()
    for name in ("sim", "last", "il", "sim-best"):
        run.checkpoint(name).write_bytes(b"w")
    assert list(run.stage_checkpoints(["il", "sim"])) == ["il", "sim", "sim-best"]
    assert run.selected_checkpoint("sim") == run.best_checkpoint("sim")
    assert run.selected_checkpoint("il") == run.stage_checkpoint("il")
    assert [p.name for p in run.checkpoints()] == sorted(runs.checkpoint_file("", n).name for n in ("sim", "last", "il", "sim-best"))


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
    assert runs.references(meta) == expected
    only = next(iter(expected.values())) if len(expected) == 1 else {}
    assert runs.reference(meta) == only


def test_shipped_pretrained_runs_have_a_reference_for_their_graph():
    from workbench.datasets import DATASETS_DIR

    metas = [run / "meta.json" for run in runs.shipped_training_runs(DATASETS_DIR / "pretrained")]
    assert metas
    for path in metas:
        assert runs.reference(runs.read_meta(path), path.parent.name)["critical_path"] > 0


def test_read_rows_drops_a_half_written_last_line(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text(",".join(runs.METRIC_COLUMNS) + "\n" + "il,0,g" + ",1" * 11 + ",sim\n" + "sim,1,g,2")
    rows = runs.read_rows(path)
    assert [r["episode"] for r in rows] == ["0"] and rows[0]["oracle"] == "sim"
    assert set(runs.VALUE_COLUMNS) | set(runs.TEXT_COLUMNS) | {"episode"} == set(runs.METRIC_COLUMNS)


def test_a_stray_quote_costs_only_its_own_row(tmp_path):
    path = tmp_path / "metrics.csv"
    row = "il,{},g" + ",1" * 11 + ",sim\n"
    rows = [row.format(episode) for episode in range(400)]
    rows[10] = rows[10].replace(",g,", ',"g,')  # one unbalanced quote
    path.write_text(",".join(runs.METRIC_COLUMNS) + "\n" + "".join(rows))
    problems: list[str] = []
    episodes = [r["episode"] for r in runs.read_rows(path, problems)]
    assert len(episodes) == 399 and "10" not in episodes and episodes[-1] == "399"
    assert problems == [
        f"metrics.csv: skipped 1 damaged line(s) (line 12): each line needs {len(runs.METRIC_COLUMNS)} fields and a whole episode number"
    ]


def test_try_read_json_never_raises(tmp_path):
    (tmp_path / "half.json").write_text('{"status": "runn')
    (tmp_path / "list.json").write_text("[1]")
    for name in ("half.json", "list.json", "none"):
        assert runs.try_read_json(tmp_path / name) == {}


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


def test_the_weights_to_use_are_each_stages_best_else_its_end_else_last(tmp_path):
    run = runs.RunPaths(tmp_path)
    assert run.usable_checkpoints(["il", "sim"]) == []
    run.checkpoint_dir.mkdir()
    run.checkpoint("last").write_bytes(b"w")
    assert run.usable_checkpoints(["il", "sim"]) == [run.last_checkpoint], "a run in its first stage offers its last weights"
    for name in ("il", "sim", "sim-best"):
        run.checkpoint(name).write_bytes(b"w")
    assert run.usable_checkpoints(["il", "sim"]) == [run.checkpoint("il"), run.checkpoint("sim-best")]
    assert [runs.checkpoint_name(p) for p in run.usable_checkpoints(["il", "sim"])] == ["il", "sim-best"]


COMMA = "runs/a,b/graph.json"
"""A graph path holding a comma: one quoted CSV field."""


def write_comma_run(folder: Path, episodes: int = 6) -> Path:
    """A run directory written by the training writer, every row on the graph :data:`COMMA`."""
    from workbench.training.config import TrainConfig
    from workbench.training.rundir import RunDirectory

    config = TrainConfig(graphs=(COMMA,), devices=2, stages=("il", "sim"), episodes=(episodes // 2, episodes - episodes // 2))
    run = RunDirectory(folder)
    run.create(config, {"status": "running", "method": "doppler", "graphs": [COMMA], "stages": ["il", "sim"]})
    with run.open_metrics(config) as metrics:
        for episode in range(episodes):
            stage = "il" if episode < episodes // 2 else "sim"
            losses = {"loss_imitation": 0.4} if stage == "il" else {"baseline": -1.0, "loss_policy": 0.4}
            logged = {"reward": -1.0, "loss": 0.5, "loss_entropy": 0.1, "lr": 1e-3, "oracle": "sim", "seconds": 0.5 * episode, **losses}
            metrics.append_row({"stage": stage, "episode": episode, "graph": COMMA, "makespan": 10.0 - episode, **logged})
    run.append_greedy("sim", episodes // 2, 1.0, {COMMA: 7.5})
    return folder


def test_a_graph_path_with_a_comma_reads_the_same_through_every_reader(tmp_path):
    from workbench.runs.validate import Progress, RunPlan, check_metrics

    folder = write_comma_run(tmp_path / "run")
    paths, problems = runs.RunPaths(folder), []
    rows = runs.read_rows(paths.metrics_path, problems)
    frame = runs.read_frame(paths.metrics_path, problems)
    run = runs.read_run(folder)
    assert not problems and not run.problems
    assert [r["graph"] for r in rows] == [COMMA] * 6 and [r["makespan"] for r in rows] == [repr(10.0 - e) for e in range(6)]
    for read in (frame, run.metrics):
        assert read["graph"].tolist() == [COMMA] * 6 and read["episode"].tolist() == list(range(6))
        assert read["makespan"].tolist() == [10.0 - e for e in range(6)] and read["stage"].tolist() == ["il"] * 3 + ["sim"] * 3
    assert runs.read_rows(paths.greedy_path)[0]["graph"] == COMMA and run.greedy["graph"].tolist() == [COMMA]
    curve = runs.greedy_evaluations(run, COMMA)
    assert curve[["episode", "makespan", "what"]].values.tolist() == [[3.0, 7.5, runs.GREEDY_PERIODIC]]
    stages, lr = (("il", 0, 3), ("sim", 3, 6)), {"il": (1e-3, 1e-3), "sim": (1e-3, 1e-3)}
    plan = RunPlan("doppler", 0, 2, (COMMA,), stages, 1, 0, 6, lr, tuple(runs.METRIC_COLUMNS), {COMMA: 1.0})
    assert check_metrics(paths.metrics_path, plan, Progress(6, "sim"))[0] == 6, "resume reads it too"


def test_runs_are_listed_down_to_max_depth_never_inside_a_run_newest_first(tmp_path):
    for relative in ("old", "sweep1/seed0", "sweep1/seed1", "a/b/c/d/e", "a/b/c/d/e2/too-deep", ".hidden/run", "_scratch/run"):
        (tmp_path / relative).mkdir(parents=True)
        (tmp_path / relative / "meta.json").write_text('{"status": "finished", "method": "doppler"}')
    (tmp_path / "sweep1" / "seed0" / "checkpoints" / "inner").mkdir(parents=True)  # inside a run: not a run of its own
    (tmp_path / "sweep1" / "seed0" / "checkpoints" / "inner" / "meta.json").write_text("{}")
    (tmp_path / "sweep1" / "seed1" / "meta.json").write_text("not json")
    os.utime(tmp_path / "old", (0, 0))
    listed = runs.list_runs(tmp_path)
    assert sorted(r.name for r in listed) == ["a/b/c/d/e", "old", "sweep1/seed0", "sweep1/seed1"]
    assert runs.MAX_DEPTH == 5 and listed[-1].name == "old", "newest first"
    by_name = {r.name: r for r in listed}
    assert (
        by_name["sweep1/seed0"].status == "finished" and by_name["sweep1/seed1"].meta == {} and by_name["sweep1/seed1"].status == "unknown"
    )
    assert runs.list_runs(tmp_path / "missing") == []


def test_a_300000_row_metrics_file_reads_whole_with_its_damaged_lines_reported(tmp_path):
    """The size the dashboard must still read fast (docs/contracts.md gives the figure); here only what is read is checked."""
    path = tmp_path / "metrics.csv"
    lines = [",".join(runs.METRIC_COLUMNS)]
    for episode in range(300_000):
        graph = f'"{COMMA}"' if episode % 3 == 0 else "chain_mm_112nodes"
        lines.append(f"{'il' if episode < 100_000 else 'sim'},{episode},{graph},{episode * 0.5},-1.5,,0.25,,,,,,1e-4,{episode},sim")
    lines[1000] = lines[1000].replace(f'"{COMMA}"', f'"{COMMA}')  # a stray quote
    lines[2000] += ",extra"
    path.write_text("\n".join(lines) + "\nsim,300000,chain")  # and a half-written last line
    problems: list[str] = []
    frame = runs.read_frame(path, problems)
    assert len(frame) == 299_998 and problems == [
        "metrics.csv: skipped 2 damaged line(s) (line 1001, 2001): each line needs 15 fields and a whole episode number"
    ]
    expected = [e for e in range(300_000) if e not in (999, 1999)]
    assert frame["episode"].tolist() == expected and frame["makespan"].sum() == sum(e * 0.5 for e in expected)
    assert (frame["graph"] == COMMA).sum() == sum(1 for e in expected if e % 3 == 0) and frame["stage"].value_counts()["il"] == 99_998
    assert frame["baseline"].isna().all() and (frame["lr"] == 1e-4).all()


def test_a_table_grows_by_whole_lines_and_a_resume_keeps_what_the_checkpoint_saw(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("episode,loss\n0,1.5\n1,1.25\n2,1.0\n3,0.5")  # an older header and a half-written last line
    log = runs.CsvLog(path, ("episode", "graph", "loss"))
    kept = log.start(keep=lambda row: int(row["episode"]) < 2)
    assert kept == [{"episode": "0", "graph": "", "loss": "1.5"}, {"episode": "1", "graph": "", "loss": "1.25"}]
    with log:
        log.append([{"episode": 2, "graph": COMMA, "loss": 0.1}])
        assert path.read_text().endswith('2,"runs/a,b/graph.json",0.1\n'), "appended at once, flushed, as one whole line"
        log.append([{"episode": 3, "graph": None, "loss": 1 / 3}])
        with pytest.raises(KeyError, match="outside the header"):
            log.append([{"episode": 4, "reward": 1.0}])
    rows = runs.read_rows(path)
    assert [r["episode"] for r in rows] == ["0", "1", "2", "3"] and rows[2]["graph"] == COMMA
    assert rows[3]["graph"] == "" and float(rows[3]["loss"]) == 1 / 3, "floats written with repr read back exactly"
    assert path.read_text().splitlines()[0] == "episode,graph,loss", "the declared columns are the header"
    runs.CsvLog(path, ("episode",)).start()
    assert path.read_text() == "episode\n"


def follow_log(path, episodes) -> None:
    with runs.CsvLog(path, runs.METRIC_COLUMNS) as log:
        log.append({"stage": "il", "episode": e, "graph": "g", "makespan": 10.0 - e, "oracle": "sim"} for e in episodes)


def test_a_followed_table_reads_only_appended_lines_and_whole_again_when_rewritten(tmp_path, monkeypatch):
    path = tmp_path / "metrics.csv"
    runs.CsvLog(path, runs.METRIC_COLUMNS).start()
    follow_log(path, range(5))
    table = runs.TableFollower(path)
    assert table.poll() == "reloaded" and table.frame["episode"].tolist() == list(range(5))
    assert table.poll() == "same"
    parsed: list[bytes] = []
    real_parse = runs.follow.parse_table
    monkeypatch.setattr(runs.follow, "parse_table", lambda raw, *args, **kw: parsed.append(raw) or real_parse(raw, *args, **kw))
    follow_log(path, range(5, 8))
    with open(path, "a") as handle:
        handle.write("il,8,g,2.0,,,,,")  # half written: not read yet
    assert table.poll() == "appended" and table.frame["episode"].tolist() == list(range(8))
    lines = path.read_bytes().splitlines(keepends=True)
    assert parsed == [lines[0] + b"".join(lines[6:9])], "the header and the three lines appended, nothing else"
    with open(path, "a") as handle:
        handle.write(",,,,,,sim\nil,9,g\n")  # line 11 is damaged; its number is the file's line number
    problems: list[str] = []
    whole = runs.read_frame(path, problems)
    assert table.poll() == "appended" and table.frame.equals(whole) and table.problems == problems
    assert problems == ["metrics.csv: skipped 1 damaged line(s) (line 11): each line needs 15 fields and a whole episode number"]
    generation = table.generation
    with open(path, "r+b") as handle:  # a resumed run cuts the table back to what its checkpoint saw, then appends again
        handle.truncate(len(b"".join(path.read_bytes().splitlines(keepends=True)[:4])))
    follow_log(path, [3, 4, 5, 6, 7, 8, 9, 10])
    assert table.poll() == "reloaded" and table.generation == generation + 1
    assert table.frame.equals(runs.read_frame(path)) and table.frame["episode"].tolist() == list(range(11))
    runs.CsvLog(path, runs.METRIC_COLUMNS).write([{"stage": "il", "episode": 0, "graph": "g", "makespan": 1.0}])  # a new file
    assert table.poll() == "reloaded" and table.frame["makespan"].tolist() == [1.0]
    path.unlink()
    assert table.poll() == "reloaded" and table.frame.empty and table.problems == ["metrics.csv is missing (no episode logged yet)"]
    assert table.poll() == "same"


def test_a_followed_run_reads_like_read_run_and_a_stopped_run_is_not_read_again(tmp_path, monkeypatch):
    folder = write_comma_run(tmp_path / "run")
    writer = runs.RunWriter(folder)
    writer.update_meta(status="running")
    follower = runs.RunFollower(folder)
    first = follower.poll()
    assert first.reloaded and first.other and first.generation == 1 and first.revision == 1
    assert follower.run.metrics.equals(runs.read_run(folder).metrics) and follower.run.problems == runs.read_run(folder).problems
    assert not follower.poll().any
    with runs.CsvLog(writer.metrics_path, runs.METRIC_COLUMNS) as log:
        log.append([{"stage": "sim", "episode": 6, "graph": COMMA, "makespan": 4.0}])
    change = follower.poll()
    assert (change.appended, change.reloaded, change.other, change.revision) == (1, False, False, 1)
    assert follower.run.metrics.equals(runs.read_run(folder).metrics)
    writer.update_meta(status="finished")
    assert follower.poll().other and follower.run.status == "finished"
    opened: list[object] = []
    monkeypatch.setattr(runs.follow, "open", lambda *args, **kw: opened.append(args) or open(*args, **kw), raising=False)
    assert not follower.poll().any and opened == [], "a finished run whose files did not change is not read at all"
    with runs.CsvLog(writer.metrics_path, runs.METRIC_COLUMNS) as log:  # a finished run still being copied in
        log.append([{"stage": "sim", "episode": 7, "graph": COMMA, "makespan": 3.0}])
    assert follower.poll().appended == 1 and len(follower.run.metrics) == 8
    followers = runs.RunFollowers(most=1)
    assert followers.poll(folder)[1].reloaded and not followers.poll(folder)[1].any
    followers.poll(tmp_path / "missing")
    run, change = followers.poll(folder)
    assert change.reloaded and len(run.metrics) == 8, "beyond `most` runs, the least recently polled is forgotten"
    assert followers.poll(tmp_path / "missing")[0].problems == ("missing is not a run directory",)
