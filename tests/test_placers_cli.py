"""``workbench place --list`` and ``workbench compare``: tables, JSON, and one-line errors."""

from __future__ import annotations

import json

import pytest

from workbench.cli import main
from workbench.placers import placers


def test_place_list_prints_every_registered_method(capsys):
    assert main(["place", "--list"]) == 0
    out = capsys.readouterr().out
    for name, description in placers().items():
        assert f"{name} " in out and description in out


def test_place_without_a_graph_is_a_clear_error(capsys):
    assert main(["place"]) == 2
    assert "GRAPH is required" in capsys.readouterr().err


def test_place_local_search_json_reports_its_budget(capsys):
    assert main(["place", "ffnn", "--method", "local_search", "--budget", "300", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["details"]["evaluations"] == 300
    assert {"method", "assignment", "makespan", "lower_bound", "seconds"} <= set(data)


def test_a_search_reports_its_gain_over_its_start_and_has_a_default_clock(capsys, monkeypatch):
    from workbench.cli import compare as compare_command, place as place_command
    from workbench.placers import place

    given = {}

    def spy(graph, method, devices, seed, **options):
        given[method] = options
        return place(graph, method=method, devices=devices, seed=seed, **options)

    monkeypatch.setattr("workbench.placers.place", spy)
    assert main(["place", "chain_mm", "--method", "local_search", "--budget", "300", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert given["local_search"]["time_limit"] == place_command.SEARCH_TIME_LIMIT
    assert main(["place", "chain_mm", "--method", "local_search", "--budget", "300"]) == 0
    start, makespan = data["details"]["start_makespan"], data["makespan"]
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("search"))
    assert line == f"search       300 evaluations, {1 - makespan / start:.2%} shorter than {data['details']['start_method']} ({start:,.6g})"
    assert main(["place", "chain_mm", "--method", "heft"]) == 0  # a one-pass method: no clock passed, no search line
    assert "time_limit" not in given["heft"] and "search " not in capsys.readouterr().out
    for command in (place_command, compare_command):
        monkeypatch.setattr(command, "SEARCH_TIME_LIMIT", 1e-6)  # the default clock cuts a budget it cannot spend
    assert main(["place", "chain_mm", "--method", "local_search", "--budget", "100000"]) == 0
    assert "; stopped by the 1e-06 s clock (--time-limit)" in capsys.readouterr().out
    assert main(["place", "chain_mm", "--method", "local_search", "--time-limit", "-1"]) == 2
    assert "--time-limit must be > 0 seconds, got -1.0" in capsys.readouterr().err
    assert main(["compare", "chain_mm", "--methods", "heft,local_search", "--budget", "100000"]) == 0  # compare has the same clock
    assert given["local_search"]["time_limit"] == 1e-6 and "time_limit" not in given["heft"]


def test_place_learned_search_starts_from_a_given_policy(capsys):
    shipped = "datasets/pretrained/ffnn_192nodes/doppler.safetensors"
    assert main(["place", "ffnn", "--method", "learned_search", "--budget", "40", "--option", f"start_policy={shipped}", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["details"]["start_method"] == "start_policy" and data["details"]["evaluations"] == 40
    assert main(["place", "ffnn", "--method", "heft", "--option", f"start_policy={shipped}"]) == 2
    assert "method 'heft' takes no option 'start_policy'; it takes: ties" in capsys.readouterr().err


def test_compare_json_has_one_row_per_method_and_gaps_to_the_best_bound(capsys):
    assert main(["compare", "chain_mm", "--devices", "4", "--methods", "single,heft,local_search", "--budget", "300", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["method"] for r in data["rows"]] == ["single", "heft", "local_search"]
    for row in data["rows"]:
        assert row["gap"] == pytest.approx(row["makespan"] / data["best_lower_bound"] - 1)
        assert row["gap"] >= 0


def test_compare_table_lists_methods_and_passes_options_only_where_accepted(capsys):
    assert main(["compare", "ffnn", "--methods", "round_robin,cpsat", "--time-limit", "1"]) == 0
    out = capsys.readouterr().out
    assert "best lower bound" in out
    assert "round_robin" in out and "cpsat" in out and "%" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["compare", "ffnn", "--methods", "heft,bogus"], "unknown method(s) bogus; registered: single"),
        (["compare", "ffnn", "--methods", ","], "--methods is empty"),
        (["compare", "ffnn", "--methods", "heft,,local_search"], "--methods 'heft,,local_search' has an empty name"),
        (["compare", "ffnn", "--methods", "heft,"], "has an empty name"),
        (["import-model", "hf:gpt2", "--kwarg", "n_layer"], "--kwarg 'n_layer': expected KEY=VALUE"),
        (["generate", "ffnn", "--param", "oops"], "--param 'oops': expected KEY=VALUE"),
        (["compare", "ffnn", "--time-limit", "0"], "--time-limit must be > 0"),
        (["place", "ffnn", "--method", "nope"], "registered: single"),
        (["place", "ffnn", "--method", "heft", "--budget", "5"], "does not take option(s) budget"),
    ],
)
def test_bad_methods_and_options_are_one_line_errors(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_place_shows_a_proven_bound_beside_the_simple_one(capsys):
    # rand0060 on 2 processors: simple bound 157, CP-SAT proves 165.
    from workbench.datasets import stg_graphs

    path = str(stg_graphs()[60])
    assert main(["place", path, "--devices", "2", "--method", "cpsat", "--time-limit", "5"]) == 0
    out = capsys.readouterr().out
    bound = float(out.split("lower bound")[1].split()[0].replace(",", ""))
    assert 157 < bound <= 165 and "proven by cpsat; the simple bound is 157" in out
