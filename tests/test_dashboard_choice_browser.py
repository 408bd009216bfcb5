"""Compare in headless Chromium: a run two levels deep offers its best weights, and the card says where they come from."""

from __future__ import annotations

import json

import pytest

import workbench as wb
from tests.test_dashboard import write_checkpoints, write_run
from tests.test_dashboard_anytime_browser import table_makespans
from tests.test_dashboard_browser import COMPARED, browser, choose, compared, finish, gantt_titles, pytestmark, serve, visit
from workbench import viz
from workbench.cli import main

__all__ = ["browser", "pytestmark"]

BEST = "doppler (run sweep1/seed0, trained on chain_mm_112nodes, Stage II best greedy)"


@pytest.fixture(scope="module")
def nested(tmp_path_factory):
    """A runs folder holding one doppler run two levels deep: its Stage I weights are FFNN's policy, its sim-best chain_mm's."""
    runs = tmp_path_factory.mktemp("runs")
    run = write_run(runs / "sweep1", "seed0")
    write_checkpoints(run, {"il": {"episode": 30}}, weights_of="ffnn_192nodes")
    paths = write_checkpoints(run, {"sim": {"episode": 60}, "sim-best": {"episode": 40}, "last": {"stage": "sim", "episode": 60}})
    return runs, paths.checkpoint("sim-best")


@pytest.fixture(scope="module")
def nested_server(nested):
    yield from serve(runs_dir=nested[0])


def test_a_nested_runs_best_weights_place_on_compare_as_workbench_place_does(nested, nested_server, browser, tmp_path, capsys):
    _runs, best = nested
    assert main(["place", "chain_mm", "--method", "doppler", "--devices", "4", "--option", f"checkpoint={best}", "--json"]) == 0
    makespan = viz.format_time(json.loads(capsys.readouterr().out)["makespan"], wb.bundled_graph("chain_mm"))
    page, errors = visit(browser, nested_server + "/", COMPARED)
    choose(page, "compare-bundled", "chain_mm_112nodes (DOPPLER paper)")
    compared(page, "text=chain_mm_112nodes, 4 devices")
    page.click("#compare-methods")
    options = page.get_by_role("option").all_text_contents()
    assert BEST in options and not any("run sweep1/seed0" in o and "Stage II)" in o for o in options), options  # best, not sim
    page.get_by_role("option", name=BEST, exact=True).click()
    page.keyboard.press("Escape")
    page.click("#compare-run")
    compared(page, "text=doppler (run sweep1/seed0): device timelines")
    (title,) = [t for t in gantt_titles(page) if t.startswith("doppler (run sweep1/seed0)")]
    assert "trained on chain_mm_112nodes, Stage II best greedy" in title and f"makespan {makespan}" in title, title
    (label,) = [m for m in table_makespans(page) if m.startswith("doppler (run sweep1/seed0")]
    assert table_makespans(page)[label] == makespan
    finish(page, errors, tmp_path / "compare-nested-run.png")
