"""Compare's options form (``workbench.dashboard.pages.compare_options``): its fields come from the placers' declarations,
its values are checked by the core parser and the server's caps, and Compare, what-if and the highlight place each method
with them. The browser journey is at the end."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest
from dash import dcc

from workbench.dashboard import create_app
from workbench.dashboard.jobs import LaunchError, validate_arguments
from workbench.dashboard.pages import compare, whatif
from workbench.dashboard.pages.compare_options import checked_options, form_options, option_fields, state_arguments
from workbench.dashboard.work import run_placement

from .test_dashboard_browser import CHROMIUM, choose, finish, serve, settle
from .test_dashboard_summary import CHAIN, summary


def test_the_form_offers_each_declared_option_a_browser_can_set():
    assert [s.name for s in form_options("local_search")] == [
        "budget",
        "time_limit",
        "initial_temperature",
        "final_temperature",
        "max_batch",
        "starts",
        "loop",
    ]  # not progress (a terminal bar), not start (an array)
    assert [s.name for s in form_options("heft")] == ["ties"]
    assert form_options("round_robin") == []
    assert "checkpoint" in [s.name for s in form_options("learned_search")]  # its move scorer: chosen here


def test_a_learned_method_form_leaves_its_checkpoint_and_active_search_to_methods():
    pytest.importorskip("torch")
    names = [s.name for s in form_options("doppler")]
    assert "checkpoint" not in names and "search" not in names and {"samples", "budget", "polish"} <= set(names)


def test_the_fields_are_typed_and_hold_what_was_typed_before():
    fields = option_fields("local_search", {"local_search": {"budget": "50", "progress": "true"}})
    labels = [f.children[0].children for f in fields]
    assert labels[:2] == ["budget (int)", "time_limit (float or none)"]
    budget = fields[0].children[1]
    assert isinstance(budget, dcc.Input) and budget.value == "50" and budget.placeholder == "default: 20000"
    assert budget.id == {"type": "compare-option", "key": "budget"}
    assert option_fields("no_such_method", {}) == [] and option_fields(["x"], None) == []


def test_checked_options_parse_each_value_and_name_a_bad_one(context):
    given = {"local_search": {"budget": "50", "time_limit": "none"}, "heft": {"ties": "3"}}
    assert checked_options(context, given) == {"local_search": {"budget": 50, "time_limit": None}, "heft": {"ties": 3}}
    assert checked_options(context, {"local_search": {"budget": 50}}) == {"local_search": {"budget": 50}}  # as the state holds it
    assert checked_options(context, None) == {}
    refusals = {
        "option budget='lots' of method 'local_search': expected a whole number (int)": {"local_search": {"budget": "lots"}},
        "method 'heft' takes no option 'budget'; it takes: ties": {"heft": {"budget": "5"}},
        "--budget must be from 1 to 200,000": {"local_search": {"budget": "300000"}},  # the server's --max-budget
        "--time-limit must be more than 0 and at most 60 s": {"local_search": {"time_limit": "600"}},
        "files must be under datasets/ or runs/": {"learned_search": {"checkpoint": "/etc/passwd"}},
        "'no_such' is not an installed method": {"no_such": {"a": "1"}},
        "the method options must be {method: {option: value}}": {"heft": "ties=3"},
        "option 'progress' of method 'local_search' is not offered here": {"local_search": {"progress": "true"}},
    }
    for words, options in refusals.items():
        with pytest.raises(ValueError, match=re.escape(words)):
            checked_options(context, options)


def test_a_checkpoint_under_datasets_is_made_absolute(context):
    checked = checked_options(context, {"learned_search": {"checkpoint": "datasets/pretrained/learned_search/learned_search.safetensors"}})
    path = Path(checked["learned_search"]["checkpoint"])
    assert path.is_absolute() and path.is_file()


def test_compare_places_each_method_with_its_options_and_what_if_sees_the_same_placement(context):
    options = {"local_search": {"budget": "30"}, "heft": {"ties": "3"}}
    children, state = compare.compare_view(context, CHAIN, 4, ["heft", "local_search", "critical_path"], 0, 100, None, options)
    rows = {r["method"]: r for r in summary(children)}
    assert rows["local_search"]["_evaluations"] == 30 and rows["local_search"]["stop"] == "its budget of 30 evaluations"
    assert rows["heft"]["_evaluations"] == 3  # three tie orders, each one evaluation
    assert rows["critical_path"]["_evaluations"] == 0
    assert state is not None and state["options"] == options
    checked = whatif.checked_state(context, state)  # the browser sends it back; revalidated
    args = state_arguments(context, checked, state["methods"].index("local_search"))
    assert (args.budget, args.extra) == (30, ())
    assert run_placement(*args).evaluations == 30  # what-if and the highlight work on the placement the table shows
    assert state_arguments(context, checked, state["methods"].index("heft")).extra == (("ties", 3),)


def test_a_bad_option_is_the_message_and_nothing_is_placed(context):
    children, state = compare.compare_view(context, CHAIN, 4, ["local_search"], 0, 100, None, {"local_search": {"max_batch": "x"}})
    assert state is None and "option max_batch='x' of method 'local_search': expected a whole number (int)" in str(children)


def set_options_request(client, method: str, typed: dict[str, str], stored: dict) -> dict:
    """The form's callback as the browser calls it when a box changes: every field's value and id, the method, the store."""
    fields = [{"type": "compare-option", "key": key} for key in typed]
    body = {
        "output": "..compare-options.data...compare-options-message.children..",
        "outputs": [{"id": "compare-options", "property": "data"}, {"id": "compare-options-message", "property": "children"}],
        "inputs": [[{"id": i, "property": "value", "value": v} for i, v in zip(fields, typed.values(), strict=True)]],
        "state": [
            [{"id": i, "property": "id", "value": i} for i in fields],
            {"id": "compare-options-method", "property": "value", "value": method},
            {"id": "compare-options", "property": "data", "value": stored},
        ],
        "changedPropIds": ['{"key":"budget","type":"compare-option"}.value'],
    }
    reply = client.post("/_dash-update-component", json=body, headers={"Host": "localhost"})
    assert reply.status_code == 200
    return reply.get_json()["response"]


def test_the_form_callback_keeps_what_was_typed_per_method_and_names_a_bad_value(context):
    client = create_app(runs_dir=context.runs_dir).server.test_client()
    reply = set_options_request(client, "local_search", {"budget": "abc", "loop": ""}, {"heft": {"ties": "3"}})
    assert reply["compare-options"]["data"] == {"heft": {"ties": "3"}, "local_search": {"budget": "abc"}}  # an empty box: default
    assert "option budget='abc' of method 'local_search': expected a whole number (int)" in str(reply["compare-options-message"])
    reply = set_options_request(client, "local_search", {"budget": "25"}, {"heft": {"ties": "3"}})
    assert "set: heft ties=3; local_search budget=25" in str(reply["compare-options-message"])
    reply = set_options_request(client, "local_search", {"budget": ""}, {"local_search": {"budget": "25"}})
    assert reply["compare-options"]["data"] == {}
    assert "no option set: every method runs with its defaults" in str(reply["compare-options-message"])


# ------------------------------------------------------------------------------------------ in a browser
BUDGET_BOX = '#compare-options-fields input[id*="budget"]'
"""The form's budget box (a pattern-matching id is written into the page as its JSON)."""


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium at /usr/bin/chromium")
def test_setting_a_budget_in_the_form_shows_in_the_summary_table(tmp_path):
    from playwright.sync_api import sync_playwright

    from .test_dashboard_browser import ARGS

    (tmp_path / "runs").mkdir()
    with sync_playwright() as playwright, contextlib.contextmanager(serve)(runs_dir=tmp_path / "runs") as server:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(server + "/")
        page.wait_for_selector("text=device timelines", timeout=240_000)  # the first comparison loads torch in a child
        settle(page)
        choose(page, "compare-options-method", "local_search")
        page.fill(BUDGET_BOX, "abc")
        page.keyboard.press("Enter")
        page.wait_for_selector("text=option budget='abc' of method 'local_search': expected a whole number (int)", timeout=30_000)
        page.fill(BUDGET_BOX, "25")
        page.keyboard.press("Enter")
        page.wait_for_selector("text=set: local_search budget=25", timeout=30_000)
        choose(page, "compare-methods", "local_search — ")
        page.click("#compare-run")
        page.wait_for_selector('td[data-dash-column="stop"] >> text="its budget of 25 evaluations"', timeout=150_000)
        settle(page)
        assert page.locator('td[data-dash-column="evaluations"]', has_text="25").count() == 1
        finish(page, errors, tmp_path / "compare-options.png")
        browser.close()


def test_launch_checks_a_place_option_as_the_argument_of_its_name(context):
    scorer = "datasets/pretrained/learned_search/learned_search.safetensors"
    argv = validate_arguments(context, "place", {"graph": "chain_mm", "method": "learned_search", "option": f"checkpoint={scorer}"})
    assert argv[argv.index("--option") + 1] == f"checkpoint={context.in_datasets(scorer.removeprefix('datasets/'))}"
    refused = {
        "checkpoint=/etc/passwd": "files must be under datasets/ or runs/",
        "local_search:budget=999999999": "--budget must be from 1 to 200,000",
        "budget": "--option 'budget': expected KEY=VALUE",
    }
    for option, words in refused.items():
        with pytest.raises(LaunchError, match=re.escape(words)):
            validate_arguments(context, "place", {"graph": "chain_mm", "method": "local_search", "option": option})
