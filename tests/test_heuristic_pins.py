"""Every one-pass heuristic returns exactly the assignment and order that its first (quadratic) implementation did.

``tests/data/heuristic_pins.json`` was written by ``tests/data/make_heuristic_pins.py`` before the list schedulers
got their near-linear data structures (issue 32): ties included, nothing may change.
"""

from __future__ import annotations

import json

import pytest

from workbench.placers.base import get_placer

from .data.make_heuristic_pins import METHODS, PINS, cases, pin

PINNED = json.loads(PINS.read_text())
CASES = {f"{name}@{devices}": (build, devices) for name, build, devices in cases()}
LARGE = {key for key in CASES if "large" in key or key.startswith("chain_mm-16x8")}


@pytest.mark.parametrize("case", [c if c not in LARGE else pytest.param(c, marks=pytest.mark.slow) for c in CASES])
def test_heuristics_return_their_pinned_decisions(case):
    build, devices = CASES[case]
    graph = build()
    changed = [m for m in METHODS if pin(get_placer(m).place(graph, devices)) != PINNED[f"{case}/{m}"]]
    assert not changed, f"{case}: {changed} changed their decision"


def test_every_case_is_pinned():
    assert set(PINNED) == {f"{case}/{m}" for case in CASES for m in METHODS}
