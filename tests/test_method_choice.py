"""MethodChoice: the one text form of a dashboard method choice, ``[mode|]method[@root:path]``."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, strategies as st

from workbench.dashboard.choice import MODES, ROOTS, MethodChoice
from workbench.dashboard.context import PathError

METHOD = st.from_regex(r"[A-Za-z0-9_.+-]+", fullmatch=True)
CHECKPOINT = st.one_of(st.just(("", "")), st.tuples(st.sampled_from(ROOTS), st.text(min_size=1)))
CHOICES = st.builds(
    lambda method, checkpoint, mode: MethodChoice(method, *checkpoint, mode), METHOD, CHECKPOINT, st.sampled_from(("", *MODES))
)


@given(CHOICES)
def test_a_choice_survives_its_text_form(choice):
    assert MethodChoice.from_value(choice.to_value()) == choice


@given(st.text())
def test_any_text_is_a_choice_written_back_unchanged_or_refused_by_name(value):
    try:
        choice = MethodChoice.from_value(value)
    except ValueError as error:
        assert repr(value)[:197] in str(error)  # the value, cut to 200 characters
    else:
        assert choice.to_value() == value


RUN, SHIPPED = "sweep1/seed0/checkpoints/sim-best.safetensors", "pretrained/ffnn_192nodes/doppler.safetensors"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("heft", MethodChoice("heft")),
        (f"doppler@runs:{RUN}", MethodChoice("doppler", "runs", RUN)),
        (f"active|doppler@datasets:{SHIPPED}", MethodChoice("doppler", "datasets", SHIPPED, "active")),
        ("samples|gdp@runs:a@b:c|d", MethodChoice("gdp", "runs", "a@b:c|d", "samples")),  # the path keeps every character
        ("search|local_search", MethodChoice("local_search", mode="search")),
    ],
)
def test_the_dashboards_values_read_as_their_parts(value, expected):
    assert MethodChoice.from_value(value) == expected


@pytest.mark.parametrize(
    "value", ["", "active|", "doppler@", "doppler@runs", "doppler@runs:", "doppler@:x", "polish|heft", "he ft", "a|b|heft", None, 3]
)
def test_a_malformed_value_is_refused_naming_it(value):
    with pytest.raises(ValueError, match="not a method choice: " + re.escape(repr(value))):
        MethodChoice.from_value(value)


def test_a_checkpoint_outside_datasets_and_runs_is_a_path_error():
    with pytest.raises(PathError, match="home:/x.pt"):
        MethodChoice.from_value("critical_path@home:/x.pt")


def test_a_choice_names_the_run_or_shipped_folder_its_checkpoint_lies_in():
    assert MethodChoice.from_value("gdp@runs:sweep1/seed0/checkpoints/sim-best.safetensors").source == "sweep1/seed0"
    assert MethodChoice.from_value("doppler@datasets:pretrained/zero_shot/doppler_gate.safetensors").source == "zero_shot"
    assert MethodChoice("heft").source == ""
