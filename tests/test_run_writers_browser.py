"""The acceptance test of one run layout (issue 30), in headless Chromium: every trainer's tiny run
(``tests/test_run_writers.py``) is listed on Training, and its weights are offered on Compare, ``workbench train``'s run
two folders deep (``sweep1/seed0``) on both pages. The pages are read by their visible labels."""

from __future__ import annotations

import pytest

from tests.test_dashboard_browser import COMPARED, browser, finish, pytestmark, serve, settle, visit
from tests.test_run_writers import TRAIN, trained

__all__ = ["browser", "pytestmark", "trained"]  # the fixtures and marks shared with the other tests

LISTED = (TRAIN, "corpus", "gate", "scorer", "pretrained ffnn_192nodes")
"""The run table's labels of the runs (the export is the datasets folder's pretrained policy of ffnn_192nodes)."""
OFFERED = {
    TRAIN: f"run {TRAIN}, ",
    "corpus": "run corpus, ",
    "gate": "run gate, ",
    "scorer": "learned_search (run scorer, ",
    "pretrained": "(pretrained, ",
}
"""What Compare's method options say of each trainer's weights, searched for by the text typed into the picker."""


@pytest.fixture(scope="module")
def server(trained):
    runs, datasets = trained
    yield from serve(runs_dir=runs, datasets_dir=datasets)


def options(page, typed: str) -> list[str]:
    """The labels Compare's method picker offers when ``typed`` is typed into it (the picker draws only what matches)."""
    page.click("#compare-methods")
    page.keyboard.type(typed)
    settle(page, 0.5)
    found = page.get_by_role("option").all_text_contents()
    for _ in typed:
        page.keyboard.press("Backspace")
    page.keyboard.press("Escape")
    return found


def test_training_lists_every_trainers_run_and_the_export(server, browser, tmp_path):
    page, errors = visit(browser, server + "/training", 'td[data-dash-column="run"]')
    labels = page.locator('td[data-dash-column="run"]').all_text_contents()
    assert all(label in labels for label in LISTED), labels
    page.click("#training-none")
    for label in LISTED:
        page.locator('td[data-dash-column="run"]', has_text=label).first.click()
        settle(page)
    page.wait_for_selector(f"text={TRAIN}", timeout=60_000)
    finish(page, errors, tmp_path / "training-every-trainer.png")


def test_compare_offers_the_weights_of_every_trainers_run(server, browser, tmp_path):
    page, errors = visit(browser, server + "/", COMPARED)
    for typed, label in OFFERED.items():
        found = options(page, typed)
        assert any(label in option for option in found), (typed, found)
    finish(page, errors, tmp_path / "compare-every-trainer.png")
