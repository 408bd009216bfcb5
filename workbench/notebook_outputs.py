"""The committed notebooks' outputs: execute them in place and check that they are current and clean.

The ``.ipynb`` files under ``notebooks/`` carry their executed outputs, so a
reader on GitHub or nbviewer sees every table and figure. ``make notebooks``
(``python -m workbench.notebook_outputs``) regenerates them: each runs in a
fresh kernel in fast mode (``WORKBENCH_FAST=1``: fixed seeds, small budgets)
with the training runs and sweep tables in a temporary folder, every plotly
figure with a PNG beside it (:func:`workbench.viz.static_fallbacks`) and no
widget state (viewers without a widget manager then show the compare panel's
static copy). The notebook's metadata keeps a hash of its code cells;
:func:`problems` (run by the tests, so by CI) reports a notebook whose code
changed since, a cell left unexecuted, an error, anything written to stderr,
warning text, a figure without its PNG and a path of this machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["NOTEBOOKS", "source_hash", "execute", "problems", "main"]

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
"""The checkout's notebooks folder."""
PLOTLY_MIME = "application/vnd.plotly.v1+json"
PANEL_MIME = "application/vnd.jupyter.widget-view+json"
WARNING_TEXT = re.compile(r"\b\w*(Warning|warn)\b[:(]|kopts argument")
"""A warning as Python or Kaleido prints it (``UserWarning: ...``, ``warnings.warn(``)."""


def source_hash(notebook: Any) -> str:
    """SHA-256 of the notebook's code cells, the part its outputs depend on (markdown edits need no rerun)."""
    sources = [cell.source for cell in notebook.cells if cell.cell_type == "code"]
    return hashlib.sha256(json.dumps(sources).encode()).hexdigest()


def _output_text(output: Any) -> str:
    """Everything of one output a reader sees as text."""
    if output.output_type == "stream":
        return str(output.text)
    if output.output_type == "error":
        return "\n".join(output.traceback)
    data = output.get("data", {})
    return "\n".join(str(data[key]) for key in ("text/plain", "text/html", "text/markdown") if key in data)


def problems(notebook: Any, name: str = "notebook") -> list[str]:
    """What is wrong with an executed notebook's saved outputs, one line each (empty when it is current and clean)."""
    found = []
    recorded = notebook.metadata.get("workbench", {}).get("source_hash")
    if recorded != source_hash(notebook):
        found.append(f"{name}: its code changed since its outputs were made; run `make notebooks`")
    local = [str(Path.home()), str(NOTEBOOKS.parent), tempfile.gettempdir()]
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        where = f"{name} cell {index}"
        if cell.execution_count is None:
            found.append(f"{where} was not executed")
        for output in cell.outputs:
            text = _output_text(output)
            if output.output_type == "error":
                found.append(f"{where} raised {output.ename}: {output.evalue}")
            elif output.output_type == "stream" and output.name == "stderr":
                found.append(f"{where} wrote to stderr: {text.strip()[:200]}")
            elif WARNING_TEXT.search(text):
                found.append(f"{where} shows warning text: {WARNING_TEXT.search(text).group(0)}")
            data = output.get("data", {})
            if PLOTLY_MIME in data and not data.get("image/png"):
                found.append(f"{where} has a figure without a PNG (GitHub draws nothing)")
            if PANEL_MIME in data and 'src="data:image/png' not in data.get("text/html", ""):
                found.append(f"{where} has a widget without a static copy of its figures")
            paths = [p for p in local if p in text]
            if paths:
                found.append(f"{where} shows a path of this machine ({paths[0]})")
    return found


def execute(path: str | Path, timeout: int = 900) -> Any:
    """Run the notebook at ``path`` in a fresh kernel in fast mode and return it, stamped with :func:`source_hash`."""
    import nbformat
    from nbclient import NotebookClient

    path = Path(path)
    notebook = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="workbench-notebook-") as runs:
        env = dict(os.environ, WORKBENCH_FAST="1", WORKBENCH_NOTEBOOK_RUNS=runs, DGLBACKEND="pytorch", PYTHONHASHSEED="0")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(NOTEBOOKS.parent), os.environ.get("PYTHONPATH")]))  # this checkout
        client = NotebookClient(
            notebook,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
            store_widget_state=False,
            record_timing=False,
        )
        client.execute(env=env)
    notebook.metadata.pop("widgets", None)
    notebook.metadata["workbench"] = {"source_hash": source_hash(notebook), "mode": "WORKBENCH_FAST=1"}
    return notebook


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m workbench.notebook_outputs [--check] [NOTEBOOK ...]``: regenerate (or check) the notebooks' outputs."""
    import nbformat

    from .fileio import atomic_write_text

    parser = argparse.ArgumentParser(prog="python -m workbench.notebook_outputs", description=main.__doc__)
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebooks/NN_*.ipynb")
    parser.add_argument("--check", action="store_true", help="only report notebooks whose outputs are stale or unclean")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    failed = False
    for path in paths:
        if not path.is_file():
            print(f"error: {path} is not a file", file=sys.stderr)
            return 2
        if args.check:
            found = problems(nbformat.read(path, as_version=4), path.name)
        else:
            notebook = execute(path)
            found = problems(notebook, path.name)
            if not found:
                atomic_write_text(path, nbformat.writes(notebook) + "\n")
        for line in found:
            print(line, file=sys.stderr)
        failed = failed or bool(found)
        print(f"{path.name}: {'not written' if found and not args.check else 'stale or unclean' if found else 'ok'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
