"""The bundled datasets: the repository's ``datasets/`` folder, shipped in the wheel as ``workbench/data/``.

:data:`DATASETS_DIR` is, in this order: the folder named by the environment variable
``WORKBENCH_DATASETS`` (read once, at import), the ``workbench/data/`` folder of an installed wheel
(``setup.py`` copies ``datasets/`` there at build time), or the top-level ``datasets/`` of a checkout
(an editable install, or ``PYTHONPATH`` pointing at the repository).
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

from .formats import load_graph
from .graph import DataflowGraph

__all__ = ["DATASETS_DIR", "PAPER_GRAPHS", "bundled_graphs", "bundled_graph", "stg_graphs"]


def _datasets_dir() -> Path:
    """``$WORKBENCH_DATASETS``, else the datasets an installed wheel carries, else the checkout's ``datasets/``."""
    override = os.environ.get("WORKBENCH_DATASETS")
    if override:
        return Path(override)
    shipped = Path(str(files("workbench").joinpath("data")))
    return shipped if shipped.is_dir() else Path(__file__).resolve().parent.parent / "datasets"


DATASETS_DIR = _datasets_dir()
PAPER_DIR = DATASETS_DIR / "doppler-paper"
STG_DIR = DATASETS_DIR / "stg"

PAPER_GRAPHS = (
    "chain_mm_112nodes",
    "ffnn_192nodes",
    "transformer_block_215nodes",
    "full_transformer_layer_261nodes",
)


def bundled_graphs() -> dict[str, Path]:
    """Name → path of every bundled paper graph."""
    return {name: PAPER_DIR / f"{name}.txt" for name in PAPER_GRAPHS}


def bundled_graph(name: str) -> DataflowGraph:
    """Load a bundled paper graph by name (``"ffnn_192nodes"``) or unique prefix (``"ffnn"``)."""
    matches = [g for g in PAPER_GRAPHS if g == name] or [g for g in PAPER_GRAPHS if g.startswith(name)]
    if len(matches) != 1:
        raise KeyError(f"unknown bundled graph {name!r}; bundled: {', '.join(PAPER_GRAPHS)}")
    return load_graph(PAPER_DIR / f"{matches[0]}.txt")


def stg_graphs() -> list[Path]:
    """Paths of the bundled STG 50-task graphs."""
    return sorted((STG_DIR / "50").glob("*.stg"))
