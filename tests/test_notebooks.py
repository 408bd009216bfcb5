"""Notebooks: each .ipynb is paired with a reviewed jupytext .py, stored without outputs, and runs in fast mode."""

from __future__ import annotations

import os
from pathlib import Path

import jupytext
import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
SCRIPTS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))


def _cells(notebook) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source.strip()) for cell in notebook.cells]


def test_every_notebook_has_its_script():
    assert SCRIPTS, "no notebooks found"
    assert {p.stem for p in NOTEBOOKS.glob("*.ipynb")} == {p.stem for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_pair_is_in_sync_and_outputs_are_stripped(script):
    notebook = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    assert _cells(jupytext.read(script)) == _cells(notebook), f"run: jupytext --sync {script}"
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, f"{script.stem}: outputs are not stripped"
    first_code = next(c for c in notebook.cells if c.cell_type == "code")
    assert "parameters" in first_code.metadata.get("tags", []), "the first code cell must be tagged 'parameters'"
    assert "WORKBENCH_FAST" in first_code.source
    assert notebook.cells[0].cell_type == "markdown" and "Takes" in notebook.cells[0].source


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_every_notebook_saves_a_png_beside_its_figures(script):
    # fast mode (the tests) skips the PNGs, which cost a chromium render each: the executed test notebook below checks the mechanism
    assert "static_fallbacks()" in script.read_text(encoding="utf-8"), f"{script.stem} saves its figures without a PNG for GitHub"


HAS_CHROMIUM = Path("/usr/bin/chromium").exists()
PLOTLY_MIME = "application/vnd.plotly.v1+json"


def _execute(notebook, monkeypatch) -> None:
    from nbclient import NotebookClient

    monkeypatch.setenv("DGLBACKEND", "pytorch")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(NOTEBOOKS.parent), os.environ.get("PYTHONPATH")]))
    )  # the kernel imports this checkout
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()


def _figure_outputs(notebook) -> list:
    return [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs if PLOTLY_MIME in o.get("data", {})]


def _saved_bars(notebook) -> list[str]:
    """The text an executed notebook keeps of its progress bars (tqdm's ``NN%|``), as GitHub shows it."""
    texts = [o.get("text", "") or o.get("data", {}).get("text/plain", "") for c in notebook.cells for o in c.get("outputs", [])]
    return [t for t in texts if "%|" in t]


@pytest.mark.slow
@pytest.mark.skipif(not HAS_CHROMIUM, reason="the PNG fallback needs Debian's chromium")
def test_an_executed_notebook_keeps_its_final_progress_and_a_png_beside_each_figure(monkeypatch):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            "from workbench.progress import progress_bar\nfor _ in progress_bar(range(80), desc='placing'):\n    pass"
        ),
        nbformat.v4.new_code_cell(
            "from workbench.viz import message_figure, static_fallbacks\nassert static_fallbacks()\nmessage_figure('hello')"
        ),
    ]
    _execute(notebook, monkeypatch)
    bar = notebook.cells[0].outputs
    assert [o.output_type for o in bar] == ["display_data"] and "80/80" in bar[0].data["text/plain"], bar  # not "0/80", no stderr
    figures = _figure_outputs(notebook)
    assert len(figures) == 1 and figures[0].data["image/png"]  # GitHub and nbviewer draw the PNG


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_notebook_runs_in_fast_mode(script, monkeypatch, tmp_path):
    monkeypatch.setenv("WORKBENCH_FAST", "1")
    monkeypatch.setenv("WORKBENCH_NOTEBOOK_RUNS", str(tmp_path))  # training runs and sweep tables of this test only
    notebook = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    _execute(notebook, monkeypatch)
    errors = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert all("100%|" in bar for bar in _saved_bars(notebook)), _saved_bars(notebook)
