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


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_notebook_runs_in_fast_mode(script, monkeypatch, tmp_path):
    from nbclient import NotebookClient

    monkeypatch.setenv("WORKBENCH_FAST", "1")
    monkeypatch.setenv("WORKBENCH_NOTEBOOK_RUNS", str(tmp_path))  # training runs and sweep tables of this test only
    monkeypatch.setenv("DGLBACKEND", "pytorch")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(NOTEBOOKS.parent), os.environ.get("PYTHONPATH")]))
    )  # the kernel imports this checkout
    notebook = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    errors = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
