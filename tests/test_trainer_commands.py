"""``workbench train corpus|gate|scorer|pretrained``: the other trainers behind the one command line, no ``python -m`` side doors."""

from __future__ import annotations

import dataclasses
import os
import pathlib

import pytest

os.environ.setdefault("DGLBACKEND", "pytorch")
pytest.importorskip("torch")

from workbench.cli import main  # noqa: E402
from workbench.cli.train import TRAINERS  # noqa: E402
from workbench.learn.policy_config import PolicyConfig  # noqa: E402
from workbench.training.corpus_training import CorpusTrainConfig  # noqa: E402
from workbench.training.gate_training import GateTrainConfig  # noqa: E402
from workbench.training.learned_search import ScorerTrainConfig  # noqa: E402

CONFIGS = {"corpus": CorpusTrainConfig, "gate": GateTrainConfig, "scorer": ScorerTrainConfig}
ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_train_help_names_every_trainer(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for name in TRAINERS:
        assert f"workbench train {name}" in out


@pytest.mark.parametrize("name", sorted(TRAINERS))
def test_each_trainer_has_its_own_help(name, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["train", name, "--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: workbench train {name} ")


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_fields_lists_every_config_field_with_its_meaning(name, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["train", name, "--fields"])
    assert exit_.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    fields = dataclasses.fields(CONFIGS[name])
    assert [line.split()[0] for line in lines if not line.startswith(" ")] == [f.name for f in fields]
    nested = [line.split()[0] for line in lines if line.startswith(" ")]  # the nested policy's fields, as --set names them
    assert nested == ([f"policy.{f.name}" for f in dataclasses.fields(PolicyConfig) if f.name != "method"] if name != "scorer" else [])
    assert all(len(line.split()) > 2 for line in lines)  # a default and a meaning after the name


def test_the_gates_fields_show_its_own_policy_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["train", "gate", "--fields"])
    lines = {line.split()[0]: line.split()[1] for line in capsys.readouterr().out.splitlines()}
    assert lines["policy.place_rule_weight"] == "50.0" and lines["policy.place_rule_scale"] == "'op'"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (  # the zero-shot README's reproduction command names the policy's fields as the flat options they were
            ["corpus", "--method", "doppler_plc_only", "--place-rule", "affinity", "--place-rule-weight", "50", "--place-rule-scale", "op"],
            {"place_rule": "affinity", "place_rule_weight": 50.0, "place_rule_scale": "op"},
        ),
        (["corpus", "--set", "policy.width=64", "--set", "policy.head_hidden=32,16"], {"width": 64, "head_hidden": (32, 16)}),
        (
            ["gate", "--gate-rules", "bottom_level/affinity,earliest_start/affinity"],
            {"gate_rules": ("bottom_level/affinity", "earliest_start/affinity")},
        ),
        (["gate", "--select-rule-weight", "5", "--set", "policy.select_rule_weight=7"], {"select_rule_weight": 7.0}),  # --set last
    ],
)
def test_the_flat_options_and_set_reach_the_nested_policy(tmp_path, monkeypatch, argv, expected):
    from workbench.training import corpus_training, gate_training

    given = []
    for module, train in ((corpus_training, "train_on_corpus"), (gate_training, "train_gate")):
        monkeypatch.setattr(module, train, lambda out, config, command="": given.append(config) or tmp_path / "last.safetensors")
    assert main(["train", argv[0], "--out", str(tmp_path), *argv[1:]]) in (0, None)
    (config,) = given
    default = CONFIGS[argv[0]](method=config.method).policy
    assert config.policy == dataclasses.replace(default, **expected)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_trainer_without_out_is_refused_in_one_line(name, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["train", name])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == f"workbench train {name}: error: give --out DIR (the run directory)\n"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["corpus", "--rollout", "greedy"], "rollout must be one of"),
        (["gate", "--method", "gdp"], "not of 'gdp'"),
        (["gate", "--set", "policy.width=wide"], "'wide' is not a valid int"),
        (["corpus", "--set", "width=64"], "policy fields are set as policy.width"),
        (["corpus", "--place-rule", "affinity"], "CorpusTrainConfig.policy: place_rule 'affinity' needs a place_rule_weight > 0"),
        (["scorer", "--rounds", "0"], "field 'rounds' is 0, outside 1 .. 100"),
        (["scorer", "--learning-rate", "nan"], "field 'learning_rate' is nan"),
        (["scorer", "--hidden", "100000"], "field 'hidden' is 100000"),
    ],
)
def test_a_bad_setting_is_refused_before_anything_is_written(tmp_path, capsys, argv, message):
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_:
        main(["train", argv[0], "--out", str(out), *argv[1:]])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"workbench train {argv[0]}: error: ") and message in err and err.count("\n") == 1
    assert not out.exists()


def test_no_trainer_keeps_a_python_m_side_door():
    for name, (module, _) in TRAINERS.items():
        source = (ROOT / (module.replace(".", "/") + ".py")).read_text()
        assert '__name__ == "__main__"' not in source, name
        assert "python -m" not in source, name
