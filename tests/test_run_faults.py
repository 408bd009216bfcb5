"""Damaged run directories are refused without a byte changed; a kill before any write of a run loses and repeats nothing.

Damages: every file of a run interrupted after episode 7 (checkpoint after
episode 5) is damaged one field at a time (``metrics.csv``, ``greedy.csv``,
``meta.json``, ``best/``, the checkpoints); each resume must be refused naming
the file and the line or field, and the directory must hash the same after.

Kills: the uninterrupted run's writes (every atomic replace and every
appended table line) are listed; for each, a run is killed just before it
(a simulated ``kill -9``: nothing is written from that moment, not even the
``interrupted`` status), then resumed. The result must equal the
uninterrupted run: the same metrics and greedy rows (none lost, none twice),
the same checkpoints (``last`` included: a stage checkpoint newer than
``last`` is handed over), the same best placement, ``finished`` in ``meta.json``.
A real ``kill -9`` is ``tests/test_checkpoints.py``'s.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

os.environ.setdefault("DGLBACKEND", "pytorch")

import workbench.runs.write as run_write
from tests.test_training import SMALL, SMALL_2, TINY, Crash, crash_at, tiny_config, tiny_load_policy, without_time
from workbench.runs import read_meta, read_rows
from workbench.training import TrainConfig, train
from workbench.training.checkpoint import read_training_state

DAMAGE_CONFIG = dict(graphs=(SMALL,), stages=("il", "sim"), episodes=(4, 4), checkpoint_every=3, greedy_every=2, search_samples=0)
"""Checkpoints after episodes 3, 4 (end of Stage I) and 6; greedy evaluations at 4, 6 and 8."""


def snapshot(folder: Path) -> dict[str, str]:
    """Every file below ``folder`` and the SHA-256 of its bytes (a created or deleted file shows too)."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    """Killed by an exception after logging episode 7: ``last`` after episode 6, greedy rows at 4 and 6."""
    out = tmp_path_factory.mktemp("faults") / "run"
    with pytest.raises(Crash):
        train(tiny_config(**DAMAGE_CONFIG), out, library=TINY, progress=False, callback=crash_at(7))
    assert read_training_state(out / "checkpoints" / "last.safetensors").episode == 6
    return out


# --- damages ------------------------------------------------------------------------------------------------------
Damage = Callable[[Path], None]


def set_field(name: str, line: int, column: str, value: str) -> Damage:
    """Set ``column`` of line ``line`` (1: the header) of the CSV file ``name``."""

    def damage(out: Path) -> None:
        lines = (out / name).read_text().splitlines()
        header = next(csv.reader([lines[0]]))
        fields = next(csv.reader([lines[line - 1]]))
        fields[header.index(column)] = value
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="").writerow(fields)
        lines[line - 1] = buffer.getvalue()
        (out / name).write_text("\n".join(lines) + "\n")

    return damage


def edit_lines(name: str, change: Callable[[list[str]], list[str]]) -> Damage:
    def damage(out: Path) -> None:
        (out / name).write_text("".join(change((out / name).read_text().splitlines(keepends=True))))

    return damage


def edit_json(name: str, change: Callable[[dict], object]) -> Damage:
    def damage(out: Path) -> None:
        data = json.loads((out / name).read_text())
        change(data)
        (out / name).write_text(json.dumps(data))

    return damage


def write(name: str, text: str) -> Damage:
    return lambda out: (out / name).write_text(text)


def delete(name: str) -> Damage:
    return lambda out: shutil.rmtree(out / name) if (out / name).is_dir() else (out / name).unlink()


def worse_best(out: Path) -> None:
    """A true placement (its makespan is what it simulates to) that is worse than the episodes logged: all on one device."""
    import workbench

    data = json.loads((out / "best" / "placement.json").read_text())
    data["assignment"] = [0] * len(data["assignment"])
    data["makespan"] = workbench.simulate(workbench.load_graph(SMALL), data["assignment"], 4).makespan
    data["stage"] = "search"
    (out / "best" / "placement.json").write_text(json.dumps(data))


def other_episode(out: Path) -> None:
    """The best placement names an episode that logged another makespan."""
    best = json.loads((out / "best" / "placement.json").read_text())
    rows = read_rows(out / "metrics.csv")
    best["episode"] = next(int(r["episode"]) for r in rows if not math.isclose(float(r["makespan"]), best["makespan"]))
    (out / "best" / "placement.json").write_text(json.dumps(best))


M, G, META, BEST = "metrics.csv", "greedy.csv", "meta.json", "best/placement.json"
IL, SIM = 3, 7  # metrics lines of episodes 1 (Stage I) and 5 (Stage II), both before the checkpoint
DAMAGES: dict[str, tuple[Damage, str]] = {
    # metrics.csv: form
    "metrics deleted": (delete(M), r"metrics\.csv: missing, but the checkpoint is at episode 6"),
    "metrics truncated": (edit_lines(M, lambda ls: ls[:5]), r"metrics\.csv: ends at episode 3 but the checkpoint is at episode 6"),
    "metrics row twice": (edit_lines(M, lambda ls: ls[:4] + ls[3:]), r"metrics\.csv line 5 field 'episode': episode 2 appears twice"),
    "metrics gap": (edit_lines(M, lambda ls: ls[:3] + ls[5:]), r"metrics\.csv line 4 field 'episode': episodes 2\.\.3 are missing"),
    "metrics stray quote": (edit_lines(M, lambda ls: [ls[0], '"' + ls[1], *ls[2:]]), r"metrics\.csv line 2: not a CSV row"),
    "metrics header typo": (
        edit_lines(M, lambda ls: [ls[0].replace("makespan", "makespn"), *ls[1:]]),
        r"metrics\.csv line 1: the header differs .* column 4 \('makespn' instead of 'makespan'\)",
    ),
    "metrics extra field": (edit_lines(M, lambda ls: [*ls[:2], ls[2].rstrip("\n") + ",1\n", *ls[3:]]), r"metrics\.csv line 3: 16 fields"),
    "episode a word": (set_field(M, IL, "episode", "one"), r"metrics\.csv line 3 field 'episode': 'one' is not a whole number"),
    "stage of another": (set_field(M, IL, "stage", "sim"), r"metrics\.csv line 3 field 'stage': episode 1 has stage 'sim'"),
    "graph renamed": (set_field(M, IL, "graph", "chain_mm_112nodes"), r"metrics\.csv line 3 field 'graph': episode 1 trains graph"),
    "oracle real in Stage II": (set_field(M, SIM, "oracle", "real"), r"metrics\.csv line 7 field 'oracle': 'real' is not an oracle"),
    # metrics.csv: numbers
    "makespan abc": (set_field(M, IL, "makespan", "abc"), r"metrics\.csv line 3 field 'makespan': 'abc' is not a number"),
    "makespan nan": (set_field(M, IL, "makespan", "nan"), r"metrics\.csv line 3 field 'makespan': 'nan' is not finite"),
    "makespan -1e30": (set_field(M, IL, "makespan", "-1e30"), r"metrics\.csv line 3 field 'makespan': -1e\+30 is below a lower bound"),
    "makespan 1.0": (set_field(M, SIM, "makespan", "1.0"), r"metrics\.csv line 7 field 'makespan': 1\.0 is below a lower bound"),
    "makespan empty": (set_field(M, IL, "makespan", ""), r"metrics\.csv line 3 field 'makespan': empty, but this stage logs it"),
    "reward abc": (set_field(M, SIM, "reward", "abc"), r"metrics\.csv line 7 field 'reward': 'abc' is not a number"),
    "reward -1e30": (set_field(M, SIM, "reward", "-1e30"), r"metrics\.csv line 7 field 'reward': -1e\+30 is outside"),
    "reward positive": (set_field(M, IL, "reward", "0.5"), r"metrics\.csv line 3 field 'reward': 0\.5 is outside"),
    "baseline empty in Stage II": (set_field(M, SIM, "baseline", ""), r"metrics\.csv line 7 field 'baseline': empty"),
    "loss nan": (set_field(M, IL, "loss", "nan"), r"metrics\.csv line 3 field 'loss': 'nan' is not finite"),
    "loss -inf": (set_field(M, SIM, "loss", "-inf"), r"metrics\.csv line 7 field 'loss': '-inf' is not finite"),
    "loss empty": (set_field(M, SIM, "loss_policy", ""), r"metrics\.csv line 7 field 'loss_policy': empty"),
    "imitation loss abc": (set_field(M, IL, "loss_imitation", "abc"), r"metrics\.csv line 3 field 'loss_imitation': 'abc' is not a number"),
    "lr -1e30": (set_field(M, IL, "lr", "-1e30"), r"metrics\.csv line 3 field 'lr': -1e\+30 is outside"),
    "lr 1e38": (set_field(M, SIM, "lr", "1e38"), r"metrics\.csv line 7 field 'lr': 1e\+38 is outside"),
    "epsilon 2": (set_field(M, IL, "epsilon", "2.0"), r"metrics\.csv line 3 field 'epsilon': 2\.0 is outside \[0\.0, 1\.0\]"),
    "agreement -1": (set_field(M, IL, "teacher_agreement", "-1"), r"metrics\.csv line 3 field 'teacher_agreement': -1\.0 is outside"),
    "seconds go back": (set_field(M, SIM, "seconds", "0.0"), r"metrics\.csv line 7 field 'seconds': 0\.0 is below the seconds of the row"),
    "seconds nan": (set_field(M, IL, "seconds", "nan"), r"metrics\.csv line 3 field 'seconds': 'nan' is not finite"),
    # greedy.csv (rows: Stage II's start at episode 4, then episode 6)
    "greedy deleted": (delete(G), r"greedy\.csv: missing, but 2 greedy evaluation\(s\) came before the checkpoint"),
    "greedy header": (edit_lines(G, lambda ls: ["stage,episode,graph,greedy\n", *ls[1:]]), r"greedy\.csv line 1: the header differs"),
    "greedy row lost": (edit_lines(G, lambda ls: [ls[0], ls[2]]), r"greedy\.csv line 2 field 'episode': 6 where .* has 4"),
    "greedy row twice": (edit_lines(G, lambda ls: [*ls, ls[-1]]), r"greedy\.csv line 4 field 'episode': 6 where .* has 8"),
    "greedy abc": (set_field(G, 2, "greedy", "abc"), r"greedy\.csv line 2 field 'greedy': 'abc' is not a number"),
    "greedy nan": (set_field(G, 3, "greedy", "nan"), r"greedy\.csv line 3 field 'greedy': 'nan' is not finite"),
    "greedy -1e30": (set_field(G, 2, "greedy", "-1e30"), r"greedy\.csv line 2 field 'greedy': -1e\+30 is below a lower bound"),
    "greedy empty": (set_field(G, 3, "greedy", ""), r"greedy\.csv line 3 field 'greedy': empty"),
    "greedy graph renamed": (set_field(G, 2, "graph", "ffnn"), r"greedy\.csv line 2 field 'graph': 'ffnn' where"),
    "greedy stage": (set_field(G, 3, "stage", "il"), r"greedy\.csv line 3 field 'stage': 'il' where"),
    "greedy seconds go back": (set_field(G, 3, "seconds", "0"), r"greedy\.csv line 3 field 'seconds': 0\.0 is below"),
    # meta.json
    "meta deleted": (delete(META), r"meta\.json: missing"),
    "meta not JSON": (write(META, '{"status": "interrupted",'), r"meta\.json is not valid JSON .*line 1 column"),
    "meta a list": (write(META, "[]"), r"meta\.json holds a JSON list"),
    "status finished": (
        edit_json(META, lambda m: m.update(status="finished")),
        r"meta\.json field 'status': 'finished' where .* 8",
    ),
    "status diverged": (edit_json(META, lambda m: m.update(status="diverged")), r"meta\.json field 'diverged_at': missing"),
    "status diverged, no error": (
        edit_json(META, lambda m: m.update(status="diverged", diverged_at=6, error=None)),
        r"meta\.json field 'error': None where",
    ),
    "status unknown": (edit_json(META, lambda m: m.update(status="paused")), r"meta\.json field 'status': 'paused'"),
    "reference deleted": (edit_json(META, lambda m: m.pop("reference")), r"meta\.json field 'reference'"),
    "reference NaN": (
        edit_json(META, lambda m: next(iter(m["reference"].values())).update(critical_path=math.nan)),
        r"meta\.json field 'reference'",
    ),
    "reference 1.0": (
        edit_json(META, lambda m: next(iter(m["reference"].values())).update(best_heuristic=1.0)),
        r"meta\.json field 'reference'.*lower bound",
    ),
    "run id deleted": (edit_json(META, lambda m: m.pop("run_id")), r"meta\.json field 'run_id'"),
    "graphs edited": (edit_json(META, lambda m: m.update(graphs=["ffnn"])), r"meta\.json field 'graphs'"),
    "devices edited": (edit_json(META, lambda m: m.update(devices=8)), r"meta\.json field 'devices'"),
    "episodes done ahead": (edit_json(META, lambda m: m.update(episodes_done=100)), r"meta\.json field 'episodes_done'"),
    "selection garbage": (edit_json(META, lambda m: m.update(greedy_selection_sim={"greedy": "x"})), r"field 'greedy_selection_sim'"),
    "selection of no stage": (edit_json(META, lambda m: m.update(greedy_selection_warp={})), r"field 'greedy_selection_warp'"),
    "error a number": (edit_json(META, lambda m: m.update(error=5)), r"meta\.json field 'error': 5"),
    # best/
    "best deleted": (delete("best"), r"best/placement\.json: missing, but metrics\.csv logs 6 episode"),
    "best makespan 1.0": (
        edit_json(BEST, lambda b: b.update(makespan=1.0)),
        r"placement\.json field 'makespan': 1\.0, but .* simulates",
    ),
    "best makespan a word": (edit_json(BEST, lambda b: b.update(makespan="fast")), r"best/placement\.json field 'makespan': 'fast'"),
    "best garbage assignment": (edit_json(BEST, lambda b: b.update(assignment=[99] * len(b["assignment"]))), r"best/placement\.json: .*99"),
    "best short assignment": (edit_json(BEST, lambda b: b.update(assignment=b["assignment"][:-1])), r"best/placement\.json: "),
    "best not JSON": (write(BEST, '{"makespan": '), r"best/placement\.json: not valid JSON"),
    "best of another graph": (edit_json(BEST, lambda b: b.update(graph_hash="0" * 64)), r"best/placement\.json is a placement of"),
    "best episode out of range": (edit_json(BEST, lambda b: b.update(episode=99)), r"best/placement\.json field 'episode': 99"),
    "best episode of another": (other_episode, r"best/placement\.json field 'episode': episode \d+ logged"),
    "best method": (edit_json(BEST, lambda b: b.update(method="gdp")), r"best/placement\.json field 'method': 'gdp'"),
    "best not the best": (worse_best, r"best/placement\.json field 'makespan': .* is worse than"),
    "trace deleted": (delete("best/trace.json"), r"best/trace\.json: missing"),
    "trace garbage": (write("best/trace.json", "[1, 2]"), r"best/trace\.json: not a trace"),
    # config.json and the checkpoints
    "config of another run": (edit_json("config.json", lambda c: c.update(seed=9)), r"holds a different run \(config differs in seed\)"),
    "config not JSON": (write("config.json", "{"), r"config\.json is not valid JSON"),
    "config grad_clip NaN": (
        edit_json("config.json", lambda c: c.update(grad_clip=math.nan)),
        r"config\.json: TrainConfig\.grad_clip must be a finite number, got nan",
    ),
    "last truncated": (
        lambda out: (out / "checkpoints" / "last.safetensors").write_bytes((out / "checkpoints" / "last.safetensors").read_bytes()[:100]),
        r"last\.safetensors is not a readable policy checkpoint",
    ),
    "last deleted": (delete("checkpoints/last.safetensors"), r"metrics\.csv line 8 field 'episode': episode 6 comes after the checkpoint"),
    "last of another episode": (
        lambda out: shutil.copy(out / "checkpoints" / "il.safetensors", out / "checkpoints" / "last.safetensors"),
        r"metrics\.csv line 8 field 'episode': episode 6 comes after the checkpoint at episode 6, which is not there",
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_run_is_refused_naming_the_file_and_field_and_nothing_changes(tmp_path, interrupted, damage):
    out = tmp_path / "run"
    shutil.copytree(interrupted, out)
    change, message = DAMAGES[damage]
    change(out)
    before = snapshot(out)
    with pytest.raises(ValueError, match=message) as refused:
        train(tiny_config(**DAMAGE_CONFIG), out, library=TINY, progress=False)
    assert "\n" not in str(refused.value), "one line"
    assert snapshot(out) == before, "a refused resume changes no byte"


def test_the_damages_cover_every_file():
    assert len(DAMAGES) >= 40
    for name in (M, G, META, BEST, "trace.json", "checkpoint"):
        assert any(name.replace(".", "\\.") in message for _, message in DAMAGES.values()), name


def test_the_undamaged_run_resumes_and_cuts_only_the_replayed_rows(tmp_path, interrupted):
    out = tmp_path / "run"
    shutil.copytree(interrupted, out)
    metrics, greedy = (out / M).read_bytes(), (out / G).read_bytes()
    result = train(tiny_config(**DAMAGE_CONFIG), out, library=TINY, progress=False)
    assert result.status == "finished" and result.episodes == 8
    assert (out / M).read_bytes().startswith(b"".join(metrics.splitlines(keepends=True)[:7])), "header and episodes 0..5 kept"
    assert (out / G).read_bytes().startswith(greedy), "both evaluations before the checkpoint kept byte for byte"
    assert [(r["stage"], int(r["episode"])) for r in read_rows(out / G)] == [("sim", 4), ("sim", 6), ("sim", 8)]


def test_a_run_on_two_graphs_resumes_exactly_and_checks_each_graphs_best(tmp_path):
    config = tiny_config(**{**DAMAGE_CONFIG, "graphs": (SMALL, SMALL_2), "episodes": (2, 6)})
    whole = train(config, tmp_path / "whole", library=TINY, progress=False).run_dir
    out = tmp_path / "run"
    with pytest.raises(Crash):
        train(config, out, library=TINY, progress=False, callback=crash_at(6))
    damaged = tmp_path / "damaged"
    shutil.copytree(out, damaged)
    second = next(p for p in (damaged / "best").iterdir() if p.is_dir() and p.name != Path(SMALL).stem)
    (second / "placement.json").unlink()
    before = snapshot(damaged)
    with pytest.raises(ValueError, match=rf"best/{second.name}/placement\.json: missing, but metrics\.csv logs"):
        train(config, damaged, library=TINY, progress=False)
    assert snapshot(damaged) == before
    train(config, out, library=TINY, progress=False)
    for table in (M, G):
        assert without_time(read_rows(out / table)) == without_time(read_rows(whole / table))
    names = read_meta(out / META)["graphs"]
    assert len(names) == 2 and [r["graph"] for r in read_rows(out / M)] == names * 4, "the graphs alternate"


# --- status is derived from the files --------------------------------------------------------------------------------
def test_a_finished_run_returns_at_once_and_a_status_without_its_files_is_refused(tmp_path, interrupted):
    out = tmp_path / "run"
    shutil.copytree(interrupted, out)
    train(tiny_config(**DAMAGE_CONFIG), out, library=TINY, progress=False)
    before = snapshot(out)
    assert train(tiny_config(**DAMAGE_CONFIG), out, library=TINY, progress=False).status == "finished"
    assert snapshot(out) == before, "rerunning a finished run writes nothing"
    meta = read_meta(out / META)
    (out / META).write_text(json.dumps({**meta, "evaluation": {}}))
    with pytest.raises(ValueError, match=r"meta\.json field 'evaluation'"):
        train(tiny_config(**DAMAGE_CONFIG), out, library=TINY, progress=False)


# --- divergence --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lr", [dict(il_lr=1e38), dict(rl_lr_start=1e38, rl_lr_end=1e38)])
def test_an_optimizer_overflow_ends_the_run_diverged_and_a_rerun_says_why(tmp_path, lr):
    config = tiny_config(**{**DAMAGE_CONFIG, "greedy_every": 0, **lr})
    result = train(config, tmp_path / "run", library=TINY, progress=False)
    meta = read_meta(tmp_path / "run" / META)
    assert result.status == "diverged" and meta["status"] == "diverged"
    assert "non-finite" in meta["error"] and "overflow" in meta["error"] and isinstance(meta["diverged_at"], int)
    before = snapshot(tmp_path / "run")
    assert train(config, tmp_path / "run", library=TINY, progress=False).status == "diverged"
    assert snapshot(tmp_path / "run") == before


@pytest.mark.parametrize("name", ["grad_clip", "il_lr", "rl_lr_end", "entropy_weight", "discount", "transfer_wait_weight"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_config_with_a_non_finite_number_is_refused_naming_the_field(name, value):
    with pytest.raises(ValueError, match=rf"^TrainConfig\.{name} must be a finite number, got {value}$"):
        tiny_config(**{name: value})
    with pytest.raises(ValueError, match=rf"TrainConfig\.{name} must be a finite number"):
        TrainConfig.from_dict({**json.loads(tiny_config().to_json()), name: value})


# --- a kill before any write --------------------------------------------------------------------------------------------
KILL_CONFIG = dict(graphs=(SMALL,), stages=("il", "sim"), episodes=(2, 3), checkpoint_every=2, greedy_every=2, search_samples=2)


class Killed(BaseException):
    """The simulated ``kill -9``: raised at the chosen write and at every write after it, so nothing more reaches the disk."""


class Writes:
    """Every write of a run: atomic replaces (``os.replace``) and appended table lines (``CsvLog.append``); ``kill_at``
    stops the process before that write."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, out: Path, kill_at: int | None = None) -> None:
        self.out, self.kill_at, self.log, self.dead = out, kill_at, [], False
        replace, append = os.replace, run_write.CsvLog.append

        def replacing(source, target):
            alive = not self.dead
            try:
                self._write(f"replace {Path(target).relative_to(out).as_posix()}")
            except Killed:
                if alive:  # the temporary file of the save it died in stays behind, as after a real kill
                    os.link(source, Path(source).with_name(f".tmp-killed-{Path(target).name}"))
                raise
            replace(source, target)

        def appending(log, rows):
            self._write(f"append {Path(log.path).name}")
            append(log, rows)

        monkeypatch.setattr(os, "replace", replacing)
        monkeypatch.setattr(run_write.CsvLog, "append", appending)

    def _write(self, what: str) -> None:
        if self.dead or len(self.log) == self.kill_at:
            self.dead = True
            raise Killed(what)
        self.log.append(what)


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("kills") / "whole"
    with pytest.MonkeyPatch.context() as monkeypatch:
        writes = Writes(monkeypatch, out)
        train(tiny_config(**KILL_CONFIG), out, library=TINY, progress=False)
    return out, writes.log


KILL_POINTS = 30


def test_the_kill_points_are_every_write_of_the_run(whole_run):
    _, log = whole_run
    assert len(log) == KILL_POINTS
    kinds = {what.split(" ", 1)[1].split("/")[0].removesuffix(".safetensors") for what in log}
    assert {"metrics.csv", "greedy.csv", "meta.json", "config.json", "best", "checkpoints"} <= kinds


def _same_weights(a: Path, b: Path) -> bool:
    first, second = tiny_load_policy(a), tiny_load_policy(b)
    return all(torch.equal(x, y) for x, y in zip(first.state_dict().values(), second.state_dict().values(), strict=True))


@pytest.mark.parametrize("kill_at", range(KILL_POINTS))
def test_a_kill_before_any_write_then_resume_loses_and_repeats_nothing(tmp_path, monkeypatch, whole_run, kill_at):
    whole, log = whole_run
    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        Writes(patch, out, kill_at)
        with pytest.raises(Killed):
            train(tiny_config(**KILL_CONFIG), out, library=TINY, progress=False)
    assert [p.name for p in out.rglob(".tmp-*")] or not log[kill_at].startswith("replace"), "a killed save leaves its temporary file"
    result = train(tiny_config(**KILL_CONFIG), out, library=TINY, progress=False)
    assert result.status == "finished" and result.episodes == 5 and not list(out.rglob(".tmp-*"))
    for table in (M, G):
        assert without_time(read_rows(out / table)) == without_time(read_rows(whole / table)), f"{table}: no row lost, none twice"
    names = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert names == sorted(p.name for p in (whole / "checkpoints").iterdir())
    for name in names:
        assert _same_weights(out / "checkpoints" / name, whole / "checkpoints" / name), name
    assert read_training_state(out / "checkpoints" / "last.safetensors").episode == 5, "last is the final checkpoint"
    meta, expected = read_meta(out / META), read_meta(whole / META)
    assert meta["status"] == "finished" and meta["episodes_done"] == 5 and meta["evaluation"] == expected["evaluation"]
    best, expected_best = (json.loads((d / BEST).read_text()) for d in (out, whole))
    assert best == expected_best


@pytest.mark.parametrize(
    "status, field",
    [({"status": "finished"}, "status"), ({"status": "diverged", "diverged_at": 6, "error": None}, "error")],
)
def test_the_cli_refuses_an_edited_status_in_one_line_and_changes_nothing(tmp_path, monkeypatch, capsys, interrupted, status, field):
    import sys

    from workbench.cli import main

    monkeypatch.setitem(sys.modules, "workbench.learn", TINY)
    out = tmp_path / "run"
    shutil.copytree(interrupted, out)
    edit_json(META, lambda m: m.update(status))(out)
    before = snapshot(out)
    settings = ["checkpoint_every=3", "greedy_every=2", "search_samples=0", "device=cpu"]
    command = ["train", SMALL, "--out", str(out), "--stages", "il,sim", "--episodes", "4,4", "--no-progress"]
    assert main([*command, *(item for setting in settings for item in ("--set", setting))]) == 2
    captured = capsys.readouterr()
    assert f"meta.json field {field!r}" in captured.err and len(captured.err.strip().splitlines()) == 1
    assert "finished" not in captured.out and "diverged: None" not in captured.err
    assert snapshot(out) == before


# --- the corpus and gate trainers ---------------------------------------------------------------------------------------
CORPUS_CONFIG = dict(episodes=6, teacher_budget=40, checkpoint_every=2, devices=(2, 4), seed=3, select_every=2)
"""Checkpoints after episodes 2, 4 and 6; the held-out split scored at 0, 2, 4 and 6."""
GATE_CONFIG = dict(devices=(2, 4), select_devices=(2, 4), steps=60, select_every=20, learning_rate=0.05)


def corpus_run(out: Path, **changes) -> Path:
    from tests.test_corpus_training import TINY as CORPUS
    from workbench.training.corpus_training import CorpusTrainConfig, train_on_corpus

    return train_on_corpus(out, CorpusTrainConfig(**{**CORPUS_CONFIG, **changes}), corpus=CORPUS)


def gate_run(out: Path, **changes) -> Path:
    from tests.test_corpus_training import TINY as CORPUS
    from workbench.training.gate_training import GateTrainConfig, train_gate

    return train_gate(out, GateTrainConfig(**{**GATE_CONFIG, **changes}), corpus=CORPUS)


@pytest.fixture(scope="module")
def corpus_interrupted(tmp_path_factory):
    """Interrupted in episode 3: ``last`` after episode 2, metrics rows 0 and 1, scorings at 0 and 2, teachers of 3 pairs."""
    from workbench.training import corpus_training

    out = tmp_path_factory.mktemp("corpus") / "run"
    real, calls = corpus_training.apply_gradient, []

    def stop_in_the_fourth(*args):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        real(*args)

    corpus_training.apply_gradient = stop_in_the_fourth
    try:
        with pytest.raises(KeyboardInterrupt):
            corpus_run(out)
    finally:
        corpus_training.apply_gradient = real
    assert len(read_rows(out / M)) == 2 and len(read_rows(out / "selection.csv")) == 2
    return out


@pytest.fixture(scope="module")
def gate_finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("gate") / "run"
    gate_run(out)
    return out


def first_teacher(change: Callable[[dict], object]) -> Damage:
    return edit_json("teachers.json", lambda t: change(t[sorted(t)[0]]))


def policy_damage(name: str, change: Callable[[Any], None], extra: Callable[[dict], dict] | None = None) -> Damage:
    """Load the checkpoint ``name``, change the policy, save it back (a well-formed file, with its SHA-256)."""

    def damage(out: Path) -> None:
        from workbench.learn import load_policy

        policy = load_policy(out / name)
        change(policy)
        policy.save(out / name, extra=(extra or dict)(dict(policy.checkpoint_extra)))

    return damage


def other_graphs(policy: Any) -> None:
    import workbench as wb
    from workbench.learn import TrainedFor

    policy.trained_for = TrainedFor.of([wb.bundled_graph("chain_mm"), wb.bundled_graph("ffnn")], 4)


LAST, S = "checkpoints/last.safetensors", "selection.csv"
CBEST, GBEST = "checkpoints/il-best.safetensors", "checkpoints/gate-best.safetensors"  # the corpus (imitation) and gate runs' kept weights
CORPUS_DAMAGES: dict[str, tuple[Damage, str]] = {
    "metrics deleted": (delete(M), r"metrics\.csv: missing, but the checkpoint is at episode 2"),
    "metrics row lost": (edit_lines(M, lambda ls: ls[:2]), r"metrics\.csv: ends at episode 0 but the checkpoint is at episode 2"),
    "metrics row twice": (edit_lines(M, lambda ls: [*ls[:2], ls[1], *ls[2:]]), r"metrics\.csv line 3 field 'episode': 0 where episode 1"),
    "metrics loss nan": (set_field(M, 2, "loss", "nan"), r"metrics\.csv line 2 field 'loss': nan is not finite"),
    "metrics loss abc": (set_field(M, 3, "loss", "abc"), r"metrics\.csv line 3 field 'loss': 'abc' is not a number"),
    "metrics graph renamed": (set_field(M, 2, "graph", "layered-c"), r"metrics\.csv line 2 field 'graph': episode 0 trains layered-b@2"),
    "metrics devices 0": (set_field(M, 2, "devices", "0"), r"metrics\.csv line 2 field 'devices': 0 is outside"),
    "agreement 2": (set_field(M, 2, "teacher_agreement", "2"), r"metrics\.csv line 2 field 'teacher_agreement': 2\.0 is outside"),
    "agreement empty": (set_field(M, 3, "teacher_agreement", ""), r"metrics\.csv line 3 field 'teacher_agreement': empty"),
    "ratio -1e30": (
        set_field(M, 2, "makespan_over_critical_path", "-1e30"),
        r"line 2 field 'makespan_over_critical_path': -1e\+30 is outside",
    ),
    "ratio 1e-3": (
        set_field(M, 3, "makespan_over_critical_path", "0.001"),
        r"field 'makespan_over_critical_path': 0\.001 is below the lower",
    ),
    "seconds -1": (set_field(M, 2, "seconds", "-1"), r"metrics\.csv line 2 field 'seconds': -1\.0 is outside"),
    "teachers deleted": (delete("teachers.json"), r"teachers\.json: missing, but the checkpoint is at episode 2"),
    "teachers not JSON": (write("teachers.json", "{"), r"teachers\.json: unreadable or not JSON"),
    "teacher makespan 1.0": (first_teacher(lambda t: t.update(makespan=1.0)), r"teachers\.json field 'layered-a@2\.makespan': 1\.0, but"),
    "teacher garbage assignment": (
        first_teacher(lambda t: t.update(assignment=[99] * len(t["assignment"]))),
        r"teachers\.json field 'layered-a@2\.assignment': the assignment must hold devices 0\.\.1",
    ),
    "teacher lost": (edit_json("teachers.json", lambda t: t.pop("layered-b@2")), r"teachers\.json: lacks the teacher of layered-b@2"),
    "teacher of no pair": (edit_json("teachers.json", lambda t: t.update({"ffnn@8": {}})), r"teachers\.json field 'ffnn@8': not a pair"),
    "selection deleted": (delete(S), r"selection\.csv: holds 0 scoring\(s\), but 2 came before the checkpoint at episode 2"),
    "selection best flipped": (set_field(S, 2, "best", "0"), r"selection\.csv line 2 field 'best': 0 where the scores before make it 1"),
    "selection wins 2": (set_field(S, 3, "wins", "2"), r"selection\.csv line 3 field 'wins': 2\.0 is outside"),
    "selection episode 3": (set_field(S, 3, "episode", "3"), r"selection\.csv line 3 field 'episode': 3 where .* episode 2"),
    "best deleted": (delete(CBEST), r"best\.safetensors: missing, but selection\.csv keeps the weights of episode 2"),
    "best of other graphs": (policy_damage(CBEST, other_graphs), r"best\.safetensors field 'trained_for': trained for graphs 'chain_mm"),
    "last truncated": (
        lambda out: (out / LAST).write_bytes((out / LAST).read_bytes()[:100]),
        r"last\.safetensors is not a readable policy checkpoint",
    ),
    "last replaced by best": (lambda out: shutil.copy(out / CBEST, out / LAST), r"last\.safetensors field 'episode': None is not a count"),
    "last optimizer lost": (
        policy_damage(LAST, lambda p: None, lambda e: {**e, "optimizer": {"state": {}}}),
        r"last\.safetensors field 'optimizer': not Adam's state",
    ),
    "config not JSON": (write("config.json", "{"), r"config\.json: unreadable or not JSON"),
    "config of another run": (edit_json("config.json", lambda c: c.update(learning_rate=0.5)), r"other settings \(learning_rate\)"),
    "config episodes a word": (edit_json("config.json", lambda c: c.update(episodes="six")), r"config\.json field 'episodes': six is not"),
}
GATE_DAMAGES: dict[str, tuple[Damage, str]] = {
    "costs deleted": (delete("costs.csv"), r"costs\.csv: missing, but selection\.csv logs scorings"),
    "costs abc": (
        set_field("costs.csv", 2, "bottom_level/affinity", "abc"),
        r"costs\.csv line 2 field 'bottom_level/affinity': 'abc' is not",
    ),
    "costs nan": (
        set_field("costs.csv", 3, "earliest_start/earliest_start", "nan"),
        r"costs\.csv line 3 field 'earliest_start/earliest_start'",
    ),
    "costs 1e-9": (set_field("costs.csv", 4, "bottom_level/affinity", "1e-9"), r"costs\.csv line 4 field .* is below the lower bound"),
    "costs pair renamed": (set_field("costs.csv", 2, "pair", "layered-c@2"), r"costs\.csv line 2 field 'pair': 'layered-c@2' where"),
    "costs row lost": (edit_lines("costs.csv", lambda ls: ls[:-1]), r"costs\.csv: holds 4 row\(s\); the run places 5 pairs"),
    "selection header": (edit_lines(S, lambda ls: ["step,wins,mean,best,loss\n", *ls[1:]]), r"selection\.csv line 1: the header differs"),
    "selection wins 2": (set_field(S, 3, "wins", "2"), r"selection\.csv line 3 field 'wins': 2\.0 is outside"),
    "selection step 7": (set_field(S, 3, "step", "7"), r"selection\.csv line 3 field 'step': 7 where .* step 20"),
    "selection best flipped": (set_field(S, 2, "best", "0"), r"selection\.csv line 2 field 'best': 0 where the scores before make it 1"),
    "selection loss nan": (set_field(S, 3, "loss", "nan"), r"selection\.csv line 3 field 'loss': nan is not finite"),
    "selection loss -1": (set_field(S, 3, "loss", "-1"), r"selection\.csv line 3 field 'loss': -1\.0 is outside"),
    "selection mean empty": (
        set_field(S, 4, "mean_over_critical_path", ""),
        r"selection\.csv line 4 field 'mean_over_critical_path': empty",
    ),
    "selection row twice": (edit_lines(S, lambda ls: [*ls, ls[-1]]), r"selection\.csv line 6 field 'step': 60 where .* step 80"),
    "best deleted": (delete(GBEST), r"best\.safetensors: missing, but selection\.csv keeps the weights of step 0"),
    "best of another step": (
        policy_damage(GBEST, lambda p: None, lambda e: {**e, "step": 40}),
        r"best\.safetensors field 'step': 40 where",
    ),
    "best of other graphs": (policy_damage(GBEST, other_graphs), r"best\.safetensors field 'trained_for'"),
    "best truncated": (
        lambda out: (out / GBEST).write_bytes((out / GBEST).read_bytes()[:100]),
        r"best\.safetensors is not a readable policy checkpoint",
    ),
    "config not JSON": (write("config.json", "[1"), r"config\.json: unreadable or not JSON"),
    "config of another run": (edit_json("config.json", lambda c: c.update(seed=9)), r"holds a run with other settings \(seed\)"),
}


def refused_unchanged(source: Path, out: Path, damage: Damage, message: str, rerun: Callable[[Path], object]) -> None:
    """``damage`` a copy of ``source``: rerunning its trainer is refused in one line matching ``message``, and no byte changes."""
    shutil.copytree(source, out)
    damage(out)
    before = snapshot(out)
    with pytest.raises(ValueError, match=message) as refused:
        rerun(out)
    assert "\n" not in str(refused.value), "one line"
    assert snapshot(out) == before, "a refused resume changes no byte"


@pytest.mark.parametrize("damage", list(CORPUS_DAMAGES))
def test_a_damaged_corpus_run_is_refused_naming_the_file_and_nothing_changes(tmp_path, corpus_interrupted, damage):
    refused_unchanged(corpus_interrupted, tmp_path / "run", *CORPUS_DAMAGES[damage], corpus_run)


@pytest.mark.parametrize("damage", list(GATE_DAMAGES))
def test_a_damaged_gate_run_is_refused_naming_the_file_and_nothing_changes(tmp_path, gate_finished, damage):
    refused_unchanged(gate_finished, tmp_path / "run", *GATE_DAMAGES[damage], gate_run)


def test_the_trainer_damages_cover_every_file():
    assert len(CORPUS_DAMAGES) >= 10 and len(GATE_DAMAGES) >= 10
    for table, names in (
        (CORPUS_DAMAGES, (M, S, "teachers.json", "config.json", "last", "best")),
        (GATE_DAMAGES, ("costs.csv", S, "config.json", "best")),
    ):
        for name in names:
            assert any(name.replace(".", "\\.") in message for _, message in table.values()), name


def _rows(path: Path) -> list[dict[str, str]]:
    return [{k: v for k, v in row.items() if k != "seconds"} for row in read_rows(path)]


def _same_policy(a: Path, b: Path) -> bool:
    from workbench.learn.checkpoint import read_checkpoint

    first, second = read_checkpoint(a).weights, read_checkpoint(b).weights
    return first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


def test_a_corpus_run_killed_after_its_rows_but_before_its_checkpoint_replays_them_exactly(tmp_path, corpus_interrupted):
    whole = corpus_run(tmp_path / "whole").parent.parent
    out = tmp_path / "run"
    shutil.copytree(corpus_interrupted, out)
    with open(out / M, "a") as handle:  # the rows of episodes 2 and 3 were flushed, then the kill came before last at 4
        handle.writelines((whole / M).read_text().splitlines(keepends=True)[3:5])
    assert corpus_run(out) == out / CBEST
    assert _rows(out / M) == _rows(whole / M) and [int(r["episode"]) for r in read_rows(out / M)] == list(range(6))
    assert read_rows(out / S) == read_rows(whole / S)
    assert _same_policy(out / LAST, whole / LAST) and _same_policy(out / CBEST, whole / CBEST)
    before = snapshot(out)
    assert corpus_run(out) == out / CBEST
    assert snapshot(out) == before, "rerunning a finished run writes nothing"
    (out / LAST).unlink()  # rows more than a checkpoint's worth past the newest checkpoint: not a kill's leftovers
    before = snapshot(out)
    with pytest.raises(ValueError, match=r"metrics\.csv line 4 field 'episode': episode 2 is more than checkpoint_every \(2\) past"):
        corpus_run(out)
    assert snapshot(out) == before


def test_a_corpus_run_whose_loss_goes_non_finite_ends_diverged_and_a_rerun_refuses_it(tmp_path, monkeypatch):
    from workbench.training import corpus_training

    real, calls = corpus_training._imitation_step, []

    def nan_in_the_fourth(*args):
        calls.append(1)
        return real(*args) * (math.nan if len(calls) == 4 else 1.0)

    monkeypatch.setattr(corpus_training, "_imitation_step", nan_in_the_fourth)
    out = tmp_path / "run"
    diverged = r"diverged in episode 3 \(layered-a@2\): the loss is nan"
    with pytest.raises(corpus_training.RunDiverged, match=rf"{diverged}; .*last\.safetensors keeps the last finite weights \(episode 2\)"):
        corpus_run(out)
    monkeypatch.setattr(corpus_training, "_imitation_step", real)
    rows = read_rows(out / M)
    assert [int(r["episode"]) for r in rows] == [0, 1, 2, 3] and rows[-1]["loss"] == "nan", "the diverged row is logged"
    before = snapshot(out)
    with pytest.raises(corpus_training.RunDiverged, match=rf"{diverged}.*Nothing was changed"):
        corpus_run(out)
    assert snapshot(out) == before


def test_a_gate_run_whose_weights_go_non_finite_ends_diverged_and_a_rerun_refuses_it(tmp_path, monkeypatch):
    from workbench.training import gate_training

    class Overflowing(torch.optim.AdamW):
        def step(self, closure=None):
            for group in self.param_groups:
                for weight in group["params"]:
                    weight.data.fill_(math.inf)

    monkeypatch.setattr(gate_training.torch.optim, "AdamW", Overflowing)
    out = tmp_path / "run"
    with pytest.raises(gate_training.RunDiverged, match="diverged at step 1: the loss is nan"):
        gate_run(out)
    assert read_rows(out / S)[-1] == {"step": "1", "wins": "", "mean_over_critical_path": "", "best": "0", "loss": "nan"}
    before = snapshot(out)
    with pytest.raises(gate_training.RunDiverged, match="diverged at step 1: the loss is nan.*Nothing was changed"):
        gate_run(out)
    assert snapshot(out) == before


def test_a_finished_gate_run_returns_at_once_and_an_interrupted_one_trains_again_after_its_costs_are_checked(tmp_path, gate_finished):
    out = tmp_path / "run"
    shutil.copytree(gate_finished, out)
    before = snapshot(out)
    assert gate_run(out) == out / GBEST and snapshot(out) == before
    edit_lines(S, lambda ls: ls[:3])(out)  # killed after the scoring at step 20
    assert gate_run(out) == out / GBEST
    assert _rows(out / S) == _rows(gate_finished / S) and _same_policy(out / GBEST, gate_finished / GBEST)
    edit_lines(S, lambda ls: ls[:3])(out)
    set_field("costs.csv", 2, "bottom_level/affinity", "1.5")(out)  # well formed, but not what the rule pair places
    before = snapshot(out)
    with pytest.raises(ValueError, match=r"costs\.csv line 2 field 'bottom_level/affinity': 1\.5, but the rule pair places"):
        gate_run(out)
    assert snapshot(out) == before


@pytest.mark.parametrize("value", [math.nan, math.inf, 0.0])
def test_a_trainer_config_with_a_non_finite_or_zero_learning_rate_is_refused(value):
    from workbench.training.corpus_training import CorpusTrainConfig
    from workbench.training.gate_training import GateTrainConfig

    with pytest.raises(ValueError, match=r"CorpusTrainConfig\.learning_rate must be"):
        CorpusTrainConfig(learning_rate=value)
    with pytest.raises(ValueError, match=r"GateTrainConfig\.learning_rate must be"):
        GateTrainConfig(learning_rate=value)
    with pytest.raises(ValueError, match=r"CorpusTrainConfig\.grad_clip must be a finite number"):
        CorpusTrainConfig(grad_clip=math.nan)
