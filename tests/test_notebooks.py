"""Notebooks: each .ipynb is paired with a reviewed jupytext .py, carries current and clean outputs, and runs in fast mode."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest
from bs4 import BeautifulSoup

from workbench.notebook_outputs import PLOTLY_MIME, WARNING_TEXT, execute, problems, source_hash

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
SCRIPTS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))


def _cells(notebook) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source.strip()) for cell in notebook.cells]


def test_every_notebook_has_its_script():
    assert SCRIPTS, "no notebooks found"
    assert {p.stem for p in NOTEBOOKS.glob("*.ipynb")} == {p.stem for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_pair_is_in_sync(script):
    notebook = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    assert _cells(jupytext.read(script)) == _cells(notebook), f"run: jupytext --sync {script}"
    first_code = next(c for c in notebook.cells if c.cell_type == "code")
    assert "parameters" in first_code.metadata.get("tags", []), "the first code cell must be tagged 'parameters'"
    assert "WORKBENCH_FAST" in first_code.source
    assert notebook.cells[0].cell_type == "markdown" and "Takes" in notebook.cells[0].source


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_committed_outputs_are_current_and_clean(script):
    """The saved outputs come from the notebook's present code (a hash in its metadata) and show no error, stderr or
    warning, every figure with its PNG: what GitHub shows is what the code makes. `make notebooks` regenerates them."""
    notebook = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    assert problems(notebook, script.stem) == []
    assert sum(len(c.outputs) for c in notebook.cells if c.cell_type == "code") > 0


def test_the_output_check_catches_stale_code_warnings_and_figures_without_png():
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("fig", execution_count=1)]
    notebook.cells[0].outputs = [
        nbformat.v4.new_output("display_data", data={PLOTLY_MIME: {"data": []}, "text/plain": "Figure"}),
        nbformat.v4.new_output("stream", name="stderr", text="progress"),
        nbformat.v4.new_output("display_data", data={"text/plain": "UserWarning: The kopts argument is ignored if using a server."}),
    ]
    notebook.metadata["workbench"] = {"source_hash": source_hash(notebook)}
    found = problems(notebook, "nb")
    assert len(found) == 3 and "without a PNG" in found[0] and "stderr" in found[1] and "warning text" in found[2]
    notebook.cells[0].source = "fig.show()"
    assert "code changed" in problems(notebook, "nb")[0]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_nbconvert_html_shows_every_figure_as_a_static_image(script, tmp_path):
    """The GitHub-style render: `jupyter nbconvert --to html` draws every figure as an <img> of its PNG, warns of
    no output it cannot represent, and shows no warning text."""
    notebook_path = script.with_suffix(".ipynb")
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--output-dir", str(tmp_path), str(notebook_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # e.g. "Your element with mimetype(s) ... is not able to be represented"; nbconvert's lab template itself gives no
    # PNG output an alt attribute (the panel's own images have one), so that one notice is not the notebook's doing
    notices = [line for line in done.stderr.splitlines() if "warn" in line.lower() and "Alternative text is missing" not in line]
    assert not notices, done.stderr
    page = (tmp_path / f"{script.stem}.html").read_text(encoding="utf-8")
    notebook = nbformat.read(notebook_path, as_version=4)
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    pngs = [o.data["image/png"].replace("\n", "") for o in outputs if PLOTLY_MIME in o.get("data", {})]
    panels = [o.data["text/html"] for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    for panel in panels:
        images = re.findall(r'src="data:image/png;base64,([^"]+)"', panel)
        assert len(images) == 2, "the panel's bars and Gantt charts as images"
        pngs += images
    for png in pngs:
        assert f'src="data:image/png;base64,{png[:200]}' in page
    assert page.count('src="data:image/png;base64,') == len(pngs)
    assert 'data-mime-type="application/vnd.jupyter.stderr"' not in page
    soup = BeautifulSoup(page, features="html.parser")
    for hidden in soup(["script", "style"]):  # the page's own CSS and JavaScript
        hidden.decompose()
    assert not WARNING_TEXT.search(soup.get_text()), WARNING_TEXT.search(soup.get_text())


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_every_notebook_saves_a_png_beside_its_figures(script):
    assert "static_fallbacks()" in script.read_text(encoding="utf-8"), f"{script.stem} saves its figures without a PNG for GitHub"


HAS_CHROMIUM = Path("/usr/bin/chromium").exists()


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
def test_notebook_runs_in_fast_mode_with_clean_outputs(script):
    """What `make notebooks` does, into memory: the notebook runs against the present code without an error, a warning
    or a figure lacking its PNG (so regenerating would succeed)."""
    notebook = execute(script.with_suffix(".ipynb"))
    assert problems(notebook, script.stem) == []
    assert all("100%|" in bar for bar in _saved_bars(notebook)), _saved_bars(notebook)
