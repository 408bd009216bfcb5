"""The datasets bundled in the repository's ``datasets/`` folder."""

from __future__ import annotations

import os
from pathlib import Path

from .formats import load_graph
from .graph import DataflowGraph

__all__ = ["DATASETS_DIR", "PAPER_GRAPHS", "bundled_graphs", "bundled_graph", "stg_graphs"]

DATASETS_DIR = Path(os.environ.get("WORKBENCH_DATASETS", Path(__file__).resolve().parent.parent / "datasets"))
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
