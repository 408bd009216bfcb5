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


@pytest.mark.parametrize("name", ["grad_clip", "il_lr", "rl_lr_end", "entropy_weight", "baseline_decay", "transfer_wait_weight"])
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
