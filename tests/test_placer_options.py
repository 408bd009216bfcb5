"""Placer options given as text (``workbench.placers.options``): each type read from the placer's declaration, the
refusals, ``--option`` on ``place`` and ``compare``, and place's dropped flags."""

from __future__ import annotations

import json
import re

import pytest

import workbench as wb
from workbench.cli import main
from workbench.placers.options import OptionError, declared_options, parse_value, resolve_options, split_option


def test_each_option_type_is_read_from_the_placer_declaration():
    local = declared_options("local_search")
    kinds = {name: (spec.type, spec.optional, spec.default) for name, spec in local.items()}
    assert kinds["budget"] == ("int", False, 20_000)
    assert kinds["time_limit"] == ("float", True, None)
    assert kinds["progress"] == ("bool", False, False)
    assert kinds["starts"] == ("str", False, "all")
    assert kinds["start"][0] is None  # an array: not given as text
    assert declared_options("heft")["ties"].type == "int|str"
    assert (declared_options("cpsat")["time_limit"].type, declared_options("cpsat")["time_limit"].optional) == ("float", False)
    scorer = declared_options("learned_search")  # its own options, then local_search's through **search
    assert (scorer["checkpoint"].type, scorer["start_policy"].type, scorer["budget"].type) == ("path", "path", "int")
    assert local["budget"].describe() == "budget (int, default 20000)"


@pytest.mark.parametrize(
    ("method", "key", "value", "expected"),
    [
        ("local_search", "budget", "300", 300),
        ("local_search", "budget", 300, 300),  # as JSON gives it back
        ("local_search", "initial_temperature", "1e-2", 0.01),
        ("local_search", "initial_temperature", 2, 2.0),
        ("local_search", "time_limit", "none", None),
        ("local_search", "time_limit", None, None),
        ("local_search", "time_limit", "2.5", 2.5),
        ("local_search", "progress", "true", True),
        ("local_search", "progress", "False", False),
        ("local_search", "progress", "1", True),
        ("local_search", "progress", "0", False),
        ("local_search", "progress", True, True),
        ("local_search", "starts", "literature", "literature"),
        ("local_search", "starts", "none", "none"),  # a str option that takes no None keeps the word
        ("learned_search", "checkpoint", "some/file.safetensors", "some/file.safetensors"),
        ("learned_search", "start_policy", "none", None),
        ("heft", "ties", "3", 3),
        ("heft", "ties", "random", "random"),
    ],
)
def test_a_value_is_parsed_as_its_declared_type(method, key, value, expected):
    parsed = parse_value(method, key, value)
    assert parsed == expected and type(parsed) is type(expected)


@pytest.mark.parametrize(
    ("method", "key", "value", "words"),
    [
        ("local_search", "budget", "abc", "option budget='abc' of method 'local_search': expected a whole number (int)"),
        ("local_search", "budget", "1.5", "expected a whole number (int)"),
        ("local_search", "budget", True, "expected a whole number (int)"),
        ("local_search", "budget", "none", "expected a whole number (int)"),
        ("local_search", "initial_temperature", "nan", "expected a finite number (float)"),
        ("local_search", "time_limit", "soon", "expected a finite number (float), or none"),
        ("local_search", "progress", "yes", "expected true, false, 1 or 0 (bool)"),
        ("local_search", "progress", 1, "expected true, false, 1 or 0 (bool)"),
        ("local_search", "starts", "", "expected text (str)"),
        ("local_search", "start", "[0, 1]", "option 'start' of method 'local_search' (np.ndarray | None) cannot be given as text"),
        ("heft", "budget", "10", "method 'heft' takes no option 'budget'; it takes: ties"),
        ("cpsat", "time_limit", "none", "expected a finite number (float)"),
    ],
)
def test_a_bad_value_or_key_is_one_line_naming_it(method, key, value, words):
    with pytest.raises(OptionError, match=re.escape(words)):
        parse_value(method, key, value)


def test_option_text_splits_into_method_key_and_value():
    assert split_option("budget=300") == (None, "budget", "300")
    assert split_option("local_search:time-limit=2") == ("local_search", "time_limit", "2")
    assert split_option("learned_search:checkpoint=C:/a=b.safetensors") == ("learned_search", "checkpoint", "C:/a=b.safetensors")
    for bad in ("budget", "=3", ":budget=3"):
        with pytest.raises(OptionError, match="expected KEY=VALUE, or METHOD:KEY=VALUE"):
            split_option(bad)


def test_a_plain_key_goes_to_every_chosen_method_that_takes_it_and_a_method_own_value_wins():
    resolved = resolve_options(["heft", "local_search", "cpsat"], ["time_limit=5", "local_search:time_limit=none", "ties=2"])
    assert resolved == {"heft": {"ties": 2}, "local_search": {"time_limit": None}, "cpsat": {"time_limit": 5.0}}
    assert resolve_options(["heft"], []) == {"heft": {}}


@pytest.mark.parametrize(
    ("texts", "words"),
    [
        (["budget=5"], "no method chosen takes option 'budget' (heft takes ties; round_robin takes none)"),
        (["cpsat:workers=2"], "option 'cpsat:workers=2': method 'cpsat' is not among the methods chosen (heft, round_robin)"),
        (["heft:budget=5"], "method 'heft' takes no option 'budget'; it takes: ties"),
        (["ties=2", "ties=3"], "option 'ties' is given twice"),
        (["heft:ties=2", "heft:ties=3"], "option 'ties' of method 'heft' is given twice"),
        (["heft:ties=x y"], None),  # any text is a valid int|str
    ],
)
def test_resolving_refuses_what_no_chosen_method_takes(texts, words):
    if words is None:
        assert resolve_options(["heft", "round_robin"], texts)["heft"] == {"ties": "x y"}
        return
    with pytest.raises(OptionError) as caught:
        resolve_options(["heft", "round_robin"], texts)
    assert str(caught.value) == words


def test_one_method_gets_its_own_message_listing_its_keys():
    with pytest.raises(OptionError, match=r"^method 'cpsat' takes no option 'budget'; it takes: time_limit, workers$"):
        resolve_options(["cpsat"], ["budget=3"])


# ------------------------------------------------------------------------------------------ command line
def test_place_option_checkpoint_places_as_the_api_does(capsys):
    pytest.importorskip("torch")
    checkpoint = "datasets/pretrained/chain_mm_112nodes/doppler.safetensors"
    argv = ["place", "chain_mm", "--method", "doppler", "--option", f"checkpoint={checkpoint}", "--option", "samples=3", "--json"]
    assert main(argv) == 0
    placed = json.loads(capsys.readouterr().out)
    api = wb.place(wb.bundled_graph("chain_mm"), "doppler", devices=4, checkpoint=checkpoint, samples=3)
    assert placed["assignment"] == api.assignment.tolist() and placed["makespan"] == api.makespan
    assert placed["details"]["checkpoint"] == checkpoint and placed["details"]["evaluations"] == 3


def test_place_option_wins_over_budget_and_sets_no_clock_when_told(capsys):
    argv = ["place", "chain_mm", "--method", "local_search", "--budget", "100", "--option", "budget=30"]
    assert main([*argv, "--option", "time_limit=none", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["evaluations"] == 30
    assert main(["place", "chain_mm", "--method", "local_search", "--option", "budget=many"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "workbench place: error: option budget='many' of method 'local_search': expected a whole number (int)"


def test_compare_takes_options_per_method_and_for_all(capsys):
    argv = ["compare", "chain_mm", "--methods", "heft,local_search", "--budget", "100", "--json"]
    assert main([*argv, "--option", "local_search:budget=40", "--option", "ties=3"]) == 0
    rows = {r["method"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert rows["local_search"]["evaluations"] == 40  # its own budget, not --budget's 100
    assert rows["heft"]["evaluations"] == 3 and "tie_order" in rows["heft"]["details"]  # three tie orders tried
    assert main([*argv, "--option", "workers=2"]) == 2
    assert "no method chosen takes option 'workers'" in capsys.readouterr().err


def test_place_help_lists_no_dropped_flag_and_a_dropped_flag_says_what_replaces_it(capsys):
    with pytest.raises(SystemExit):
        main(["place", "--help"])
    help_text = capsys.readouterr().out
    assert "--option KEY=VALUE" in help_text
    for flag in ("--checkpoint", "--samples", "--search", "--polish", "--start-policy"):
        assert flag not in help_text, flag
    with pytest.raises(SystemExit) as caught:
        main(["place", "chain_mm", "--method", "doppler", "--start-policy", "x.safetensors"])
    assert caught.value.code == 2
    assert "--start-policy was dropped: use --option start_policy=CHECKPOINT" in capsys.readouterr().err


def test_place_list_with_a_method_lists_its_typed_options(capsys):
    assert main(["place", "--list", "--method", "cpsat"]) == 0
    assert capsys.readouterr().out.splitlines() == ["time_limit (float, default 10.0)", "workers (int, default 8)"]
