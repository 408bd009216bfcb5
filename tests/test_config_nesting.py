"""TrainConfig nests the policy's architecture (``TrainConfig.policy``); older run directories and checkpoints still read.

``--set policy.FIELD=VALUE`` sets one field of the nested :class:`PolicyConfig`; a ``config.json`` written before the
nesting (flat ``random_features`` / ``affinity_features``, the deleted switches at their defaults) reads as the same
config, so its run resumes; one that set a deleted switch is refused in one line.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
from dataclasses import fields
from pathlib import Path

import pytest
import torch

from workbench.learn.checkpoint import CheckpointError
from workbench.learn.features import FEATURE_LAYOUT
from workbench.learn.policy import _checked_config
from workbench.learn.policy_config import PolicyConfig
from workbench.runs import read_meta, read_rows
from workbench.training import TrainConfig, train
from workbench.training.config import config_from_values, fields_table, override_types, parse_overrides, replace_policy
from workbench.training.rundir import RunDirectory

from .test_training import SMALL, TINY, Crash, crash_at, tiny_config, without_time

SHIPPED = ("chain_mm_112nodes", "ffnn_192nodes", "full_transformer_layer_261nodes", "transformer_block_215nodes")
LEGACY = {  # what a config.json written before the nesting held besides today's fields
    "random_features": 2,
    "capacity_features": False,
    "affinity_features": False,
    "self_imitation_weight": 0.0,
    "baseline_decay": 0.9,
    "rollout_baseline": "leave_one_out",
}


def legacy_json(config: TrainConfig) -> dict:
    """``config`` as a config.json of the workbench before the nesting wrote it: the policy inputs flat, no ``policy``."""
    data = json.loads(config.to_json())
    del data["policy"]
    return {**data, **LEGACY, "random_features": config.policy_config().random_features}


def test_a_nested_policy_round_trips_and_one_equal_to_the_preset_is_stored_as_none():
    config = tiny_config(policy=PolicyConfig(random_features=3, width=64))
    written = json.loads(config.to_json())
    assert written["policy"]["random_features"] == 3 and written["policy"]["width"] == 64
    assert TrainConfig.from_dict(written) == config
    assert tiny_config(policy=PolicyConfig()).policy is None  # equal runs compare equal, so they resume each other
    paper = TrainConfig.paper(("ffnn",), policy=PolicyConfig.paper())
    assert paper.policy is None and paper.policy_config() == PolicyConfig.paper()
    assert tiny_config(method="placeto").policy_config().method == "placeto"  # the nested policy's method is the run's


def test_set_reaches_every_policy_field_and_applies_on_top_of_the_preset():
    assert {f"policy.{f.name}" for f in fields(PolicyConfig) if f.name != "method"} <= set(override_types())
    values = parse_overrides(["policy.random_features=4", "policy.head_hidden=32,16", "policy.affinity_features=true", "seed=2"])
    assert values == {"policy.random_features": 4, "policy.head_hidden": (32, 16), "policy.affinity_features": True, "seed": 2}
    config = config_from_values({"graphs": ("ffnn",), **values}, preset="paper")
    assert config.policy_config() == PolicyConfig(
        **{**PolicyConfig.paper().__dict__, "random_features": 4, "head_hidden": (32, 16), "affinity_features": True}
    )
    assert config.seed == 2 and config.discount == 0.99  # the paper's training settings stay
    with pytest.raises(ValueError, match=r"policy fields are set as policy\.width$"):
        parse_overrides(["width=64"])
    legacy = parse_overrides(["random_features=4", "affinity_features=true"])  # the flat names a recorded command may hold
    assert legacy == {"policy.random_features": 4, "policy.affinity_features": True}
    with pytest.raises(ValueError, match="TrainConfig.policy: .*inputs of the doppler policies"):
        config_from_values({"graphs": ("ffnn",), "method": "gdp", "policy.random_features": 2})
    assert "  policy.random_features" in fields_table(TrainConfig)


def test_a_config_json_written_before_the_nesting_reads_as_the_same_config():
    config = tiny_config(policy=PolicyConfig(random_features=2))
    assert TrainConfig.from_dict(legacy_json(config)) == config
    paper = TrainConfig.paper(("ffnn",))  # the old initial policy: the paper's architecture, then the flat inputs
    assert TrainConfig.from_dict({**legacy_json(paper), "random_features": 3}).policy_config() == PolicyConfig(
        **{**PolicyConfig.paper().__dict__, "random_features": 3}
    )


DELETED = [("self_imitation_weight", 1.0), ("baseline_decay", 0.5), ("rollout_baseline", "shared"), ("capacity_features", True)]


@pytest.mark.parametrize(("name", "value"), DELETED)
def test_a_config_json_that_set_a_deleted_switch_is_refused_in_one_line(tmp_path, name, value):
    run = tmp_path / "old"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({**legacy_json(tiny_config()), name: value}))
    with pytest.raises(ValueError) as error:
        RunDirectory(run).existing_config()
    message = str(error.value)
    assert "\n" not in message and str(run / "config.json") in message
    assert f"{name}={value!r}, a switch this workbench no longer has" in message


def test_a_run_written_before_the_nesting_resumes(tmp_path):
    config = tiny_config(policy=PolicyConfig(random_features=2))
    whole = train(config, tmp_path / "whole", library=TINY, progress=False)
    with pytest.raises(Crash):
        train(config, tmp_path / "old", library=TINY, progress=False, callback=crash_at(4))
    (tmp_path / "old" / "config.json").write_text(json.dumps(legacy_json(config)))  # as the older workbench wrote it
    resumed = train(config, tmp_path / "old", library=TINY, progress=False)
    assert resumed.status == whole.status == "finished" and resumed.episodes == whole.episodes
    assert without_time(read_rows(tmp_path / "old" / "metrics.csv")) == without_time(read_rows(tmp_path / "whole" / "metrics.csv"))


def test_the_recorded_command_carries_the_preset_and_the_policy_fields(tmp_path, monkeypatch):
    from workbench.cli import main

    monkeypatch.setitem(sys.modules, "workbench.learn", TINY)
    config = tiny_config(graphs=(SMALL,), stages=("sim",), episodes=(2,), search_samples=0, policy_preset="paper")
    config = config.with_policy(random_features=2, head_hidden=(16, 8))
    train(config, tmp_path / "a", library=TINY, progress=False)
    argv = shlex.split(read_meta(tmp_path / "a" / "meta.json")["command"])[1:]
    assert "policy.random_features=2" in argv and "policy.head_hidden=16,8" in argv and "policy.aggregator=sum" not in argv
    argv[argv.index("--out") + 1] = str(tmp_path / "b")
    assert main([*argv, "--no-progress"]) == 0
    assert RunDirectory(tmp_path / "b").existing_config() == config


def test_a_checkpoint_header_with_a_deleted_policy_switch_loads_at_its_default_only():
    assert PolicyConfig.from_dict({"method": "doppler", "capacity_features": False}) == PolicyConfig()
    with pytest.raises(ValueError, match=r"capacity_features=True, a switch this workbench no longer has"):
        PolicyConfig.from_dict({"method": "doppler", "capacity_features": True})
    header = {"method": "doppler", "config": {"method": "doppler", "capacity_features": True}, "feature_layout": FEATURE_LAYOUT}
    with pytest.raises(CheckpointError, match="p.safetensors has a bad policy config: policy config sets capacity_features=True"):
        _checked_config(header, "p.safetensors")


@pytest.mark.parametrize("graph", SHIPPED)
def test_a_shipped_runs_recorded_command_still_gives_its_config(graph):
    """``meta.json``'s command (``--set affinity_features=true`` in FFNN's, written before the nesting) reproduces the run."""
    folder = Path(__file__).resolve().parents[1] / "datasets" / "pretrained" / graph
    argv = shlex.split(read_meta(folder / "meta.json")["command"])[2:]
    values, sets, i = {"graphs": ()}, [], 0
    options = {"--devices": ("devices", int), "--method": ("method", str), "--seed": ("seed", int)}
    lists = {"--stages": ("stages", str), "--episodes": ("episodes", int)}
    while i < len(argv):
        if argv[i] == "--set":
            sets.append(argv[i + 1])
        elif argv[i] in options or argv[i] in lists:
            name, kind = options.get(argv[i]) or lists[argv[i]]
            values[name] = kind(argv[i + 1]) if argv[i] in options else tuple(kind(v) for v in argv[i + 1].split(","))
        elif argv[i] != "--out":
            values["graphs"] += (argv[i],)
            i -= 1
        i += 2
    config = config_from_values({**values, **parse_overrides(sets)})
    assert config == TrainConfig.from_dict(json.loads((folder / "config.json").read_text()))


def flat_form(path: Path, flat: tuple[str, ...]) -> None:
    """Rewrite the corpus or gate run's ``config.json`` at ``path`` as the workbench wrote it before the nesting: the policy's
    ``flat`` fields at the top level, no ``policy``."""
    data = json.loads(path.read_text())
    policy = data.pop("policy")
    path.write_text(json.dumps({**data, **{name: policy[name] for name in flat}}))


def test_a_corpus_run_written_before_the_nesting_resumes_as_the_run_it_was(tmp_path):
    from workbench.learn import load_policy
    from workbench.training import corpus_training
    from workbench.training.corpus_training import CorpusTrainConfig, train_on_corpus

    from .test_corpus_training import FAST, TINY

    policy = PolicyConfig(method="doppler_plc_only", place_rule="affinity", place_rule_weight=50.0, place_rule_scale="op")
    config = CorpusTrainConfig(method="doppler_plc_only", policy=policy, objective="reinforce", episodes=1, rollouts_per_update=2, **FAST)
    longer = dataclasses.replace(config, episodes=2)
    straight = train_on_corpus(tmp_path / "straight", longer, corpus=TINY)
    train_on_corpus(tmp_path / "old", config, corpus=TINY)
    flat_form(tmp_path / "old" / "config.json", corpus_training.FLAT_POLICY_FIELDS)
    assert "policy" not in json.loads((tmp_path / "old" / "config.json").read_text())
    resumed = train_on_corpus(tmp_path / "old", longer, corpus=TINY)  # the same run: extended, not refused
    a, b = load_policy(straight), load_policy(resumed)
    assert b.checkpoint_extra["episode"] == 2 and b.config == policy
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))
    with pytest.raises(ValueError, match=r"holds a run with other settings \(policy\.place_rule_scale\)"):
        train_on_corpus(tmp_path / "old", replace_policy(longer, place_rule_scale="graph"), corpus=TINY)


def test_a_gate_run_written_before_the_nesting_is_the_same_run_and_the_shipped_one_reads(tmp_path):
    from workbench.runs import zero_shot_checkpoint
    from workbench.training import gate_training
    from workbench.training.corpus_training import check_held_config
    from workbench.training.gate_training import GATE_POLICY, GateTrainConfig, train_gate

    from .test_corpus_training import TINY

    config = GateTrainConfig(devices=(2, 4), select_devices=(2, 4), steps=4, select_every=2)
    best = train_gate(tmp_path / "gate", config, corpus=TINY)
    flat_form(tmp_path / "gate" / "config.json", gate_training.FLAT_POLICY_FIELDS)
    assert train_gate(tmp_path / "gate", config, corpus=TINY) == best  # finished: returned as it is, not refused
    with pytest.raises(ValueError, match=r"holds a run with other settings \(policy\.place_rule_weight\)"):
        train_gate(tmp_path / "gate", replace_policy(config, place_rule_weight=20.0), corpus=TINY)
    shipped = zero_shot_checkpoint().parent / "config.json"
    held = json.loads(shipped.read_text())
    assert "policy" not in held and held["place_rule_weight"] == 50.0  # the shipped file keeps its flat form
    config = GateTrainConfig.from_dict(held)
    assert config == GateTrainConfig(start_from=held["start_from"]) and config.policy == GATE_POLICY
    check_held_config(shipped, config)  # what a resume of it compares: the same run
