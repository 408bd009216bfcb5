"""Three-stage training: run directories, resume, determinism, checkpoints, the stages themselves.

The tests run against a tiny stand-in policy (a real torch module with the
docs/contracts.md rollout API: a linear SEL head on bottom level and compute, a
linear PLC head on earliest start), so they check the training machinery
fast and independently of the learned policies' architecture; the tests at
the end run the real ``workbench.learn`` policy when it is importable.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import types
from dataclasses import dataclass

import numpy as np
import pytest
import torch

os.environ.setdefault("DGLBACKEND", "pytorch")

import workbench
from workbench.datasets import STG_DIR
from workbench.learn.checkpoint import read_checkpoint, weight_shapes, write_checkpoint
from workbench.runs import GREEDY_COLUMNS, METRIC_COLUMNS, read_meta, read_rows
from workbench.schedule import PartialSchedule
from workbench.training import TrainConfig, train
from workbench.training.config import field_docs
from workbench.training.rundir import RunDirectory

CHAIN = "chain_mm_112nodes"


# --- a stand-in policy implementing the rollout API --------------------------------------------------
@dataclass(frozen=True)
class TinyConfig:
    hidden: int = 0


@dataclass
class Rollout:
    assignment: np.ndarray
    order: np.ndarray
    log_prob: torch.Tensor
    entropy: torch.Tensor
    imitation_loss: torch.Tensor | None
    teacher_agreement: float | None
    steps: int


def _spread(values: np.ndarray) -> np.ndarray:
    """``values`` rescaled to [0, 1] within the current candidates (1 = the largest)."""
    span = values.max() - values.min()
    return (values - values.min()) / span if span > 0 else np.zeros_like(values)


class TinyPolicy(torch.nn.Module):
    """Linear SEL on (bottom level, compute) per ready op, linear PLC on earliest start per device (rescaled among the candidates)."""

    def __init__(self) -> None:
        super().__init__()
        self.sel = torch.nn.Linear(2, 1)
        self.plc = torch.nn.Linear(1, 1)
        self.config = TinyConfig()

    def _choose(self, logits, mode, epsilon, generator, teacher_actions):
        dist = torch.distributions.Categorical(logits=logits)
        if mode == "greedy":
            action = int(torch.argmax(logits))
        elif mode == "epsilon" and float(torch.rand((), generator=generator)) < epsilon:
            action = int(torch.randint(len(logits), (), generator=generator))
        else:
            action = int(torch.multinomial(dist.probs, 1, generator=generator))
        imitation = None
        if teacher_actions is not None:
            imitation = -torch.log(dist.probs[teacher_actions].sum())
        return action, dist.log_prob(torch.tensor(action)), dist.entropy(), imitation

    def rollout(self, graph, devices, mode="sample", epsilon=0.0, generator=None, teacher=False):
        schedule = PartialSchedule(graph, devices)
        level = graph.bottom_level(with_comm=True)
        scale = float(level.max())
        log_prob, entropies, losses, agreed = 0.0, [], [], 0
        while not schedule.done:
            ready = np.array(schedule.ready_ops)
            features = torch.tensor(np.stack([_spread(level[ready]), graph.compute[ready] / scale], 1), dtype=torch.float32)
            best_ops = np.flatnonzero(level[ready] == level[ready].max()) if teacher else None
            i, lp_op, ent_op, il_op = self._choose(self.sel(features).squeeze(-1), mode, epsilon, generator, best_ops)
            op = int(ready[i])
            starts = schedule.earliest_starts(op)
            device_features = torch.tensor(_spread(starts)[:, None], dtype=torch.float32)
            best_devices = np.flatnonzero(starts == starts.min()) if teacher else None
            d, lp_dev, ent_dev, il_dev = self._choose(self.plc(device_features).squeeze(-1), mode, epsilon, generator, best_devices)
            schedule.place(op, d)
            log_prob = log_prob + lp_op + lp_dev
            entropies.append(ent_op + ent_dev)
            if teacher:
                losses.append(il_op + il_dev)
                agreed += int(i in best_ops and d in best_devices)
        steps = graph.num_nodes
        return Rollout(
            schedule.device.copy(),
            np.array(schedule.order),
            log_prob,
            torch.stack(entropies).mean(),
            torch.stack(losses).mean() if teacher else None,
            agreed / steps if teacher else None,
            steps,
        )

    def save(self, path, extra=None):
        write_checkpoint(path, self.state_dict(), {"method": "tiny"}, extra, getattr(self, "trained_for", None))


def tiny_load_policy(path, map_location=None):
    checkpoint = read_checkpoint(path)
    policy = TinyPolicy()
    policy.load_state_dict(checkpoint.weights)
    policy.trained_for, policy.checkpoint_extra = checkpoint.trained_for, checkpoint.extra
    return policy


def tiny_policy_weights(path):
    """The header check resume reads a checkpoint with: a tiny policy's weights, whatever the header."""
    return lambda header: weight_shapes(TinyPolicy)


TINY = types.SimpleNamespace(
    make_policy=lambda method, config=None: TinyPolicy(),
    load_policy=tiny_load_policy,
    policy_weights=tiny_policy_weights,
    INPUT_OPTIONS=(),
)


def tiny_config(**changes) -> TrainConfig:
    base = dict(graphs=(CHAIN,), stages=("il", "sim"), episodes=(6, 6), checkpoint_every=3, search_samples=2, device="cpu")
    return TrainConfig(**{**base, **changes})


def without_time(rows):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "full"
    result = train(tiny_config(), out, library=TINY, progress=False)
    return out, result


# --- config ------------------------------------------------------------------------------------------
def test_config_fields_all_documented_and_json_round_trips():
    config = tiny_config(seed=3)
    docs = field_docs()
    assert set(docs) == {f for f in TrainConfig.__dataclass_fields__}
    assert all(len(doc) > 10 for doc in docs.values())
    assert TrainConfig.from_dict(json.loads(config.to_json())) == config


@pytest.mark.parametrize(
    "changes, fragment",
    [
        (dict(stages=("il", "warp")), "unknown stage 'warp'"),
        (dict(episodes=(5,)), "2 stage(s) need 2 episode count(s)"),
        (dict(method="magic"), "unknown method 'magic'"),
        (dict(rl_epsilon_start=1.5), "rl_epsilon_start must be in [0, 1]"),
        (dict(oracle="nonsense"), "TrainConfig.oracle"),
    ],
)
def test_config_rejects_bad_values_naming_the_field(changes, fragment):
    with pytest.raises(ValueError) as info:
        tiny_config(**changes)
    assert fragment in str(info.value)


# --- the run directory contract ------------------------------------------------------------------------
def test_run_directory_matches_the_contract(finished_run):
    out, result = finished_run
    config = tiny_config()
    assert result.status == "finished" and result.episodes == 12
    assert TrainConfig.from_dict(json.loads((out / "config.json").read_text())) == config
    with open(out / "metrics.csv") as handle:
        assert tuple(next(csv.reader(handle))) == METRIC_COLUMNS
    rows = read_rows(out / "metrics.csv")
    assert [int(r["episode"]) for r in rows] == list(range(12))
    assert [r["stage"] for r in rows] == ["il"] * 6 + ["sim"] * 6
    assert all(r["oracle"] == "sim" and r["graph"] == CHAIN for r in rows)
    il, sim = rows[:6], rows[6:]
    assert all(r["baseline"] == "" and r["loss_policy"] == "" and r["loss_imitation"] != "" for r in il)
    assert all(r["loss_imitation"] == "" and r["teacher_agreement"] == "" and r["baseline"] != "" for r in sim)
    # ε decays linearly to its end value; the optimizer's learning rate really decays to rl_lr_end
    assert [float(r["epsilon"]) for r in sim] == pytest.approx(np.linspace(0.2, 0.0, 6))
    assert [float(r["lr"]) for r in sim] == pytest.approx(np.linspace(1e-4, 1e-7, 6))
    assert np.all(np.diff([float(r["seconds"]) for r in rows]) > 0)
    meta = read_meta(out / "meta.json")
    assert {
        "status",
        "method",
        "graphs",
        "devices",
        "seed",
        "stages",
        "started",
        "updated",
        "versions",
        "machine",
        "command",
        "error",
        "reference",
    } <= set(meta)
    assert meta["status"] == "finished" and meta["error"] is None and meta["stages"] == ["il", "sim"]
    graph = workbench.bundled_graph(CHAIN)
    assert meta["reference"][graph.name]["critical_path"] == workbench.place(graph, "critical_path", 4).makespan
    best = json.loads((out / "best" / "placement.json").read_text())
    assert set(best) == {
        *("format", "version", "graph", "graph_hash", "nodes", "devices", "assignment"),  # the placement file's form
        *("order", "makespan", "stage", "episode", "method"),
    }
    assert workbench.simulate(graph, best["assignment"], 4).makespan == best["makespan"]
    assert workbench.load_placement(out / "best" / "placement.json", graph).makespan == best["makespan"]
    assert best["makespan"] <= min(float(r["makespan"]) for r in rows)
    trace = json.loads((out / "best" / "trace.json").read_text())
    assert trace
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["il.safetensors", "last.safetensors", "sim.safetensors"]
    assert not [p for p in out.rglob(".tmp-*")]


def test_rerunning_a_finished_run_returns_without_training(finished_run):
    out, _ = finished_run
    before = (out / "metrics.csv").read_text()
    result = train(tiny_config(), out, library=TINY, progress=False)
    assert result.status == "finished" and (out / "metrics.csv").read_text() == before


def test_a_different_config_in_the_same_directory_is_refused(finished_run):
    out, _ = finished_run
    with pytest.raises(ValueError, match="config differs in seed"):
        train(tiny_config(seed=9), out, library=TINY, progress=False)


def test_a_non_run_directory_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not a run directory"):
        train(tiny_config(), tmp_path, library=TINY, progress=False)


# --- interruption, resume, determinism ---------------------------------------------------------------
class Crash(KeyboardInterrupt):
    pass


def crash_at(episode):
    def callback(row):
        if row["episode"] == episode:
            raise Crash

    return callback


def test_resume_after_a_crash_continues_the_same_episodes_and_metrics(tmp_path, finished_run):
    out = tmp_path / "run"
    with pytest.raises(Crash):  # like a kill: episodes 6 and 7 are lost, the checkpoint after episode 5 is kept
        train(tiny_config(), out, library=TINY, progress=False, callback=crash_at(7))
    assert read_meta(out / "meta.json")["status"] == "interrupted"
    assert len(read_rows(out / "metrics.csv")) == 8
    result = train(tiny_config(), out, library=TINY, progress=False)
    assert result.status == "finished" and result.episodes == 12
    resumed = read_rows(out / "metrics.csv")
    assert [int(r["episode"]) for r in resumed] == list(range(12))
    # the resumed run is exactly the uninterrupted one (deterministic on CPU)
    assert without_time(resumed) == without_time(read_rows(finished_run[0] / "metrics.csv"))


def test_sigterm_stops_after_the_episode_with_a_checkpoint_and_resumes(tmp_path, finished_run):
    import signal

    out = tmp_path / "run"
    handler_before = signal.getsignal(signal.SIGTERM)

    def terminate(row):
        if row["episode"] == 4:
            os.kill(os.getpid(), signal.SIGTERM)

    result = train(tiny_config(), out, library=TINY, progress=False, callback=terminate)
    assert result.status == "interrupted" and result.episodes == 5
    assert read_meta(out / "meta.json")["status"] == "interrupted"
    assert signal.getsignal(signal.SIGTERM) is handler_before, "the previous SIGTERM handler is restored"
    result = train(tiny_config(), out, library=TINY, progress=False)
    assert result.episodes == 12
    assert without_time(read_rows(out / "metrics.csv")) == without_time(read_rows(finished_run[0] / "metrics.csv"))


def test_another_seed_trains_differently(tmp_path, finished_run):
    rows = read_rows(train(tiny_config(seed=1, episodes=(3, 1)), tmp_path / "s1", library=TINY, progress=False).run_dir / "metrics.csv")
    reference = read_rows(finished_run[0] / "metrics.csv")[:3]
    assert [r["makespan"] for r in rows[:3]] != [r["makespan"] for r in reference] or [r["loss"] for r in rows[:3]] != [
        r["loss"] for r in reference
    ]


def test_a_half_written_metrics_line_is_ignored_and_dropped_on_resume(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(Crash):
        train(tiny_config(), out, library=TINY, progress=False, callback=crash_at(7))
    with open(out / "metrics.csv", "a") as handle:
        handle.write("sim,8,chain_mm_11")  # power loss mid-line
    assert len(read_rows(out / "metrics.csv")) == 8
    train(tiny_config(), out, library=TINY, progress=False)
    assert [int(r["episode"]) for r in read_rows(out / "metrics.csv")] == list(range(12))


# --- bad checkpoints ----------------------------------------------------------------------------------------
def test_a_corrupt_checkpoint_gives_a_clear_error(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(Crash):
        train(tiny_config(), out, library=TINY, progress=False, callback=crash_at(7))
    last = out / "checkpoints" / "last.safetensors"
    last.write_bytes(last.read_bytes()[:100])
    with pytest.raises(ValueError, match=r"last\.safetensors is not a readable policy checkpoint \(truncated or corrupt\?\)"):
        train(tiny_config(), out, library=TINY, progress=False)


def test_a_missing_init_checkpoint_gives_a_clear_error(tmp_path):
    missing = tmp_path / "nowhere.pt"
    with pytest.raises(FileNotFoundError, match="nowhere.pt does not exist"):
        train(tiny_config(init_checkpoint=str(missing)), tmp_path / "run", library=TINY, progress=False)
    assert not (tmp_path / "run").exists()


def test_a_bare_policy_file_is_not_a_training_checkpoint(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(Crash):
        train(tiny_config(), out, library=TINY, progress=False, callback=crash_at(7))
    TinyPolicy().save(out / "checkpoints" / "last.safetensors")
    with pytest.raises(ValueError, match="no training state"):
        train(tiny_config(), out, library=TINY, progress=False)


# --- the stages learn --------------------------------------------------------------------------------------
SMALL = str(STG_DIR / "50" / "rand0000.stg")
SMALL_2 = str(STG_DIR / "50" / "rand0001.stg")


def test_imitation_on_chainmm_reaches_the_teacher_makespan(tmp_path):
    result = train(
        tiny_config(stages=("il",), episodes=(12,), il_lr=0.2, il_epsilon=0.1, search_samples=0),
        tmp_path / "il",
        library=TINY,
        progress=False,
    )
    found = result.evaluation[CHAIN]
    assert found["greedy"] == found["critical_path"] == workbench.place(workbench.bundled_graph(CHAIN), "critical_path", 4).makespan
    agreement = [float(r["teacher_agreement"]) for r in read_rows(tmp_path / "il" / "metrics.csv")]
    assert np.mean(agreement[-3:]) > 2 * np.mean(agreement[:3])


def _mean_sampled_makespan(policy, graph, samples=8):
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        return np.mean(
            [workbench.simulate(graph, policy.rollout(graph, 4, generator=generator).assignment, 4).makespan for _ in range(samples)]
        )


def test_reinforce_improves_on_its_starting_checkpoint(tmp_path):
    torch.manual_seed(0)
    start = TinyPolicy()
    with torch.no_grad():
        start.plc.weight.fill_(3.0)  # prefers the device where the op starts latest: a poor start
    start.save(tmp_path / "start.safetensors")
    config = tiny_config(
        graphs=(SMALL,),
        stages=("sim",),
        episodes=(20,),
        init_checkpoint=str(tmp_path / "start.safetensors"),
        rl_lr_start=0.1,
        rl_lr_end=0.01,
        rl_mode="sample",
        search_samples=0,
        checkpoint_every=100,
    )
    train(config, tmp_path / "rl", library=TINY, progress=False)
    trained = tiny_load_policy(tmp_path / "rl" / "checkpoints" / "sim.safetensors")
    graph = workbench.load_graph(SMALL)
    assert float(trained.plc.weight) < 3.0
    assert _mean_sampled_makespan(trained, graph) < _mean_sampled_makespan(start, graph)


def test_the_real_stage_uses_the_given_oracle_and_logs_the_prediction(tmp_path):
    calls = []

    def doubled(graph, assignment):  # a "real system" twice as slow as the simulator
        calls.append(1)
        return 2 * workbench.simulate(graph, assignment, 4).makespan

    config = tiny_config(graphs=(SMALL,), stages=("il", "real"), episodes=(2, 3), search_samples=0)
    train(config, tmp_path / "run", oracle=doubled, library=TINY, progress=False)
    with open(tmp_path / "run" / "metrics.csv") as handle:
        assert tuple(next(csv.reader(handle))) == METRIC_COLUMNS + ("predicted",)
    rows = read_rows(tmp_path / "run" / "metrics.csv")
    real = [r for r in rows if r["stage"] == "real"]
    assert len(real) == 3 and len(calls) == 1 + 3  # one reference measurement, one per episode
    assert all(r["oracle"] == "real" and float(r["makespan"]) == 2 * float(r["predicted"]) for r in real)
    teacher = 2 * workbench.place(workbench.load_graph(SMALL), "critical_path", 4).makespan
    assert float(real[0]["reward"]) == pytest.approx(-float(real[0]["makespan"]) / teacher)
    assert all(r["predicted"] == "" for r in rows if r["stage"] == "il")


def test_the_real_stage_defaults_to_the_simulator(tmp_path):
    config = tiny_config(graphs=(SMALL,), stages=("real",), episodes=(2,), search_samples=0)
    train(config, tmp_path / "run", library=TINY, progress=False)
    rows = read_rows(tmp_path / "run" / "metrics.csv")
    assert all(r["oracle"] == "sim" and r["makespan"] == r["predicted"] for r in rows)


def test_multi_graph_training_cycles_graphs_and_keeps_a_best_placement_each(tmp_path):
    unseen = str(STG_DIR / "50" / "rand0002.stg")
    config = tiny_config(graphs=(SMALL, SMALL_2), episodes=(2, 2), search_samples=1, eval_graphs=(unseen,))
    result = train(config, tmp_path / "run", library=TINY, progress=False)
    names = ["rand0000", "rand0001"]
    transfer = result.evaluation["rand0002"]
    assert (
        transfer["seen"] is False and transfer["search"] <= transfer["greedy"] and transfer["best_heuristic"] <= transfer["critical_path"]
    )
    assert not (tmp_path / "run" / "best" / "rand0002").exists()
    assert [r["graph"] for r in read_rows(tmp_path / "run" / "metrics.csv")] == names * 2
    meta = read_meta(tmp_path / "run" / "meta.json")
    assert set(meta["reference"]) == set(names) == {n for n, e in result.evaluation.items() if e["seen"]}
    for name in names:
        best = json.loads((tmp_path / "run" / "best" / name / "placement.json").read_text())
        assert best["graph"] == name
        assert best["makespan"] <= result.evaluation[name]["search"]
    assert json.loads((tmp_path / "run" / "best" / "placement.json").read_text())["graph"] == names[0]


# --- the command line ----------------------------------------------------------------------------------------
def test_cli_trains_with_the_stand_in_policy_and_resumes(tmp_path, monkeypatch, capsys):
    from workbench.cli import main

    monkeypatch.setitem(sys.modules, "workbench.learn", TINY)
    argv = [
        "train",
        SMALL,
        "--devices",
        "3",
        "--stages",
        "il,sim",
        "--episodes",
        "2,2",
        "--out",
        str(tmp_path / "run"),
        "--seed",
        "4",
        "--set",
        "search_samples=2",
        "--set",
        "rl_mode=sample",
        "--no-progress",
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "finished, 4 episodes" in printed and "critical_path" in printed
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["devices"] == 3 and config["seed"] == 4 and config["rl_mode"] == "sample" and config["episodes"] == [2, 2]
    assert main(argv) == 0  # a finished run: nothing to do
    assert len(read_rows(tmp_path / "run" / "metrics.csv")) == 4


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--stages", "il,warp"], "unknown stage 'warp'"),
        (["--episodes", "5,x"], "--episodes '5,x'"),
        (["--set", "nonsense=1"], "--set 'nonsense=1'"),
        (["--set", "il_lr=fast"], "not a valid float"),
        (["--set", "tensorboard=maybe"], "not a valid bool"),
        (["--set", "grad_clip=nan"], "TrainConfig.grad_clip must be a finite number, got nan"),
        (["--set", "rl_lr_start=inf"], "TrainConfig.rl_lr_start must be a finite number, got inf"),
        (["--init-checkpoint", "/nowhere/x.pt"], "/nowhere/x.pt does not exist"),
    ],
)
def test_cli_bad_arguments_give_one_clear_line(tmp_path, monkeypatch, capsys, extra, fragment):
    from workbench.cli import main

    monkeypatch.setitem(sys.modules, "workbench.learn", TINY)
    assert main(["train", SMALL, "--out", str(tmp_path / "run"), "--no-progress", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert fragment in err and len(err.splitlines()) == 1


def test_export_ships_the_policy_with_the_run_records(finished_run, tmp_path):
    from workbench.training.pretrained import export_policy, summary_table

    target = export_policy(finished_run[0], tmp_path / "pretrained" / CHAIN, library=TINY)
    row = summary_table(tmp_path / "pretrained").splitlines()[-1]
    assert row.startswith(f"| {CHAIN} | 6+6 |") and "1700.1 |" in row
    assert target.name == "doppler.safetensors"
    extra = read_checkpoint(target).extra
    assert extra["run"]["evaluation"][CHAIN]["greedy"] > 0
    assert "optimizer" not in extra
    record = json.loads((target.parent / "export.json").read_text())
    assert set(record["greedy_by_stage"]) == {"il", "sim"}
    chosen = record["exported_from"].split("/")[-1].removesuffix(".safetensors")
    assert record["greedy_by_stage"][chosen][CHAIN] == min(v[CHAIN] for v in record["greedy_by_stage"].values())
    assert (target.parent / "metrics.csv").read_text() == (finished_run[0] / "metrics.csv").read_text()
    for name in ("placement.json", "trace.json"):  # an ordinary run directory, with the best placement's trace
        assert (target.parent / "best" / name).read_text() == (finished_run[0] / "best" / name).read_text()
    assert json.loads((target.parent / "best" / "placement.json").read_text())["graph"] == CHAIN
    assert not (target.parent / "checkpoints").exists()  # the training checkpoints stay behind
    assert torch.equal(
        tiny_load_policy(target).plc.weight, tiny_load_policy(finished_run[0] / "checkpoints" / f"{chosen}.safetensors").plc.weight
    )


# --- the real DOPPLER policy (workbench.learn) -----------------------------------------------------------
@pytest.mark.slow
def test_real_policy_imitation_on_chainmm_reaches_the_teacher_and_is_placeable(tmp_path):
    pytest.importorskip("dgl")
    learn = pytest.importorskip("workbench.learn")
    from workbench.training.pretrained import export_policy

    config = TrainConfig(graphs=(CHAIN,), stages=("il",), episodes=(10,), search_samples=0, device="cpu")
    result = train(config, tmp_path / "il", library=learn, progress=False)
    found = result.evaluation[CHAIN]
    assert found["greedy"] <= 1.001 * found["critical_path"]
    target = export_policy(tmp_path / "il", tmp_path / "pretrained" / CHAIN, library=learn)
    placed = workbench.place(workbench.bundled_graph(CHAIN), "doppler", 4, checkpoint=str(target))
    assert placed.makespan == found["greedy"]


@pytest.mark.slow
def test_real_policy_resume_repeats_the_uninterrupted_run(tmp_path):
    pytest.importorskip("dgl")
    learn = pytest.importorskip("workbench.learn")
    config = TrainConfig(graphs=(SMALL,), stages=("il", "sim"), episodes=(3, 3), checkpoint_every=2, search_samples=0, device="cpu")
    train(config, tmp_path / "whole", library=learn, progress=False)
    with pytest.raises(Crash):
        train(config, tmp_path / "resumed", library=learn, progress=False, callback=crash_at(4))
    train(config, tmp_path / "resumed", library=learn, progress=False)
    whole, resumed = (read_rows(tmp_path / name / "metrics.csv") for name in ("whole", "resumed"))
    assert len(resumed) == 6 and without_time(resumed) == without_time(whole)


@pytest.mark.slow
def test_grouped_updates_use_leave_one_out_baselines_and_resume_between_updates(tmp_path):
    pytest.importorskip("dgl")
    learn = pytest.importorskip("workbench.learn")
    # groups of 4, 4 and 2 episodes; checkpoints fall only between updates
    config = TrainConfig(
        graphs=(SMALL,),
        stages=("sim",),
        episodes=(10,),
        rollouts_per_update=4,
        rl_mode="sample",
        checkpoint_every=3,
        search_samples=0,
        device="cpu",
    )
    train(config, tmp_path / "whole", library=learn, progress=False)
    whole = read_rows(tmp_path / "whole" / "metrics.csv")
    for group in (whole[0:4], whole[4:8], whole[8:10]):
        rewards = np.array([float(r["reward"]) for r in group])
        expected = (rewards.sum() - rewards) / (len(rewards) - 1)
        np.testing.assert_allclose([float(r["baseline"]) for r in group], expected, rtol=1e-9)
        assert len({r["lr"] for r in group}) == 1, "one update, one learning rate"
    assert len({whole[0]["lr"], whole[4]["lr"], whole[8]["lr"]}) == 3, "the learning rate decays once per update"
    with pytest.raises(Crash):  # inside the second update: resume replays it from the checkpoint after the first
        train(config, tmp_path / "resumed", library=learn, progress=False, callback=crash_at(6))
    train(config, tmp_path / "resumed", library=learn, progress=False)
    assert without_time(read_rows(tmp_path / "resumed" / "metrics.csv")) == without_time(whole)


def test_tensorboard_mirrors_the_metrics_and_drops_replayed_episodes_on_resume(tmp_path):
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    out = tmp_path / "run"
    with pytest.raises(Crash):  # episodes 6 and 7 reach TensorBoard, then are replayed after the resume
        train(tiny_config(tensorboard=True), out, library=TINY, progress=False, callback=crash_at(7))
    train(tiny_config(tensorboard=True), out, library=TINY, progress=False)
    events = event_accumulator.EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    scalars = events.Scalars(f"{CHAIN}/makespan")
    rows = read_rows(out / "metrics.csv")
    assert [s.step for s in scalars] == list(range(12)), "one event per episode, none twice"
    np.testing.assert_allclose([s.value for s in scalars], [float(r["makespan"]) for r in rows], rtol=1e-6)
    assert {f"{CHAIN}/loss_imitation", f"{CHAIN}/lr", f"{CHAIN}/reward"} <= set(events.Tags()["scalars"])


def test_set_parses_every_field_type():
    from workbench.training.config import parse_overrides

    parsed = parse_overrides(
        ["tensorboard=false", "rollouts_per_update=8", "rl_lr_start=3e-4", "eval_graphs=ffnn,chain_mm", "init_checkpoint=none"]
    )
    assert parsed == {
        "tensorboard": False,
        "rollouts_per_update": 8,
        "rl_lr_start": 3e-4,
        "eval_graphs": ("ffnn", "chain_mm"),
        "init_checkpoint": None,
    }
    assert parse_overrides(["tensorboard=TRUE"]) == {"tensorboard": True}


def test_the_recorded_command_reproduces_the_config(tmp_path, monkeypatch):
    import shlex

    from workbench.cli import main

    monkeypatch.setitem(sys.modules, "workbench.learn", TINY)
    config = tiny_config(
        graphs=(SMALL,),
        stages=("sim",),
        episodes=(3,),
        rl_epsilon_start=0.1,
        rl_mode="sample",
        rl_lr_start=0.01,
        eval_graphs=(SMALL_2,),
        tensorboard=False,
        search_samples=0,
    )
    train(config, tmp_path / "a", library=TINY, progress=False)
    command = read_meta(tmp_path / "a" / "meta.json")["command"]
    argv = shlex.split(command)[1:]
    argv[argv.index("--out") + 1] = str(tmp_path / "b")
    assert main([*argv, "--no-progress"]) == 0
    assert RunDirectory(tmp_path / "b").existing_config() == config


def test_greedy_selection_keeps_the_best_greedy_weights_and_evaluates_them(tmp_path):
    # a poor start and a learning rate that overshoots: the final weights are not the best ones seen
    torch.manual_seed(0)
    start = TinyPolicy()
    start.save(tmp_path / "start.safetensors")
    config = tiny_config(
        graphs=(SMALL,),
        stages=("sim",),
        episodes=(24,),
        init_checkpoint=str(tmp_path / "start.safetensors"),
        rl_lr_start=0.5,
        rl_lr_end=0.5,
        rl_mode="sample",
        greedy_every=4,
        search_samples=0,
        checkpoint_every=5,
    )
    result = train(config, tmp_path / "run", library=TINY, progress=False)
    graph = workbench.load_graph(SMALL)
    run = RunDirectory(tmp_path / "run")
    selection = read_meta(run.meta_path)["greedy_selection_sim"]
    assert selection["evaluations"] == 7  # the starting weights, then episodes 4, 8, ..., 24
    logged = read_rows(run.greedy_path)  # every evaluation is logged, not only the kept one
    assert tuple(logged[0]) == GREEDY_COLUMNS
    assert [int(r["episode"]) for r in logged] == [0, 4, 8, 12, 16, 20, 24] and {r["stage"] for r in logged} == {"sim"}
    assert min(float(r["greedy"]) for r in logged) == selection["greedy"][graph.name]
    assert float(next(r["greedy"] for r in logged if int(r["episode"]) == selection["episode"])) == selection["greedy"][graph.name]
    best = tiny_load_policy(run.best_checkpoint("sim"))
    best_makespan = workbench.simulate(graph, best.rollout(graph, 4, mode="greedy").assignment, 4).makespan
    assert best_makespan == selection["greedy"][graph.name] == result.evaluation[graph.name]["greedy"]
    final = tiny_load_policy(run.stage_checkpoint("sim"))
    assert (
        selection["episode"] < 24
        and best_makespan < workbench.simulate(graph, final.rollout(graph, 4, mode="greedy").assignment, 4).makespan
    )
    with pytest.raises(Crash):  # the selection so far lives in the checkpoint: a resumed run ends with the same one
        train(config, tmp_path / "resumed", library=TINY, progress=False, callback=crash_at(13))
    train(config, tmp_path / "resumed", library=TINY, progress=False)
    assert read_meta(tmp_path / "resumed" / "meta.json")["greedy_selection_sim"] == selection
    assert without_time(read_rows(tmp_path / "resumed" / "greedy.csv")) == without_time(logged)  # nothing lost, nothing twice


@pytest.mark.parametrize("crash", [6, 7, 9])
def test_greedy_evaluations_survive_a_resume_at_and_after_a_stage_boundary(tmp_path, crash):
    config = tiny_config(greedy_every=2, rl_mode="sample")
    full = train(config, tmp_path / "full", library=TINY, progress=False).run_dir
    expected = without_time(read_rows(full / "greedy.csv"))
    assert [(r["stage"], int(r["episode"])) for r in expected] == [("sim", e) for e in (6, 8, 10, 12)]  # no greedy evaluation in Stage I
    with pytest.raises(Crash):
        train(config, tmp_path / "run", library=TINY, progress=False, callback=crash_at(crash))
    train(config, tmp_path / "run", library=TINY, progress=False)
    assert without_time(read_rows(tmp_path / "run" / "greedy.csv")) == expected


def test_a_missing_greedy_csv_is_started_afresh_only_when_no_evaluation_came_before_the_checkpoint(tmp_path):
    config = tiny_config(greedy_every=2)
    early, late = tmp_path / "early", tmp_path / "late"  # checkpoints after episode 3 (Stage I) and 9 (evaluated at 6 and 8)
    for out, crash in ((early, 4), (late, 9)):
        with pytest.raises(Crash):
            train(config, out, library=TINY, progress=False, callback=crash_at(crash))
        (out / "greedy.csv").unlink()
    train(config, early, library=TINY, progress=False)
    assert [int(r["episode"]) for r in read_rows(early / "greedy.csv")] == [6, 8, 10, 12]
    before = {p: p.read_bytes() for p in late.rglob("*") if p.is_file()}
    with pytest.raises(ValueError, match=r"greedy\.csv: missing, but 2 greedy evaluation\(s\) came before the checkpoint"):
        train(config, late, library=TINY, progress=False)
    assert {p: p.read_bytes() for p in late.rglob("*") if p.is_file()} == before
