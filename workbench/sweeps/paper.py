"""What the DOPPLER paper compares and reports (Yao et al., ICLR 2026, Table 2), and the rows of our comparison.

Data only: the real-system milliseconds the paper reports on 4×P100, the
graph titles it uses, and which of our methods (:data:`ROWS`) stands for
which of its columns. :mod:`.reproduce` runs the rows, :mod:`.report`
writes them beside the paper's numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TIME_SCALE", "PAPER_COLUMNS", "PAPER_REPORTED", "PAPER_GRAPH_TITLES", "GENERATED_FAMILIES", "Row", "ROWS", "paper_improvement"]

TIME_SCALE = 1e10  # the paper's files are in raw integer units; the paper divides by 1e10

# Real-system milliseconds on 4×P100 as reported in the paper (Table 2).
PAPER_COLUMNS = ("critical_path", "placeto", "gdp", "enumerative_optimizer", "doppler_sim", "doppler_sys")
PAPER_REPORTED: dict[str, dict[str, float]] = {
    "chain_mm_112nodes": dict(zip(PAPER_COLUMNS, (230.4, 137.1, 198.0, 139.0, 122.5, 123.4), strict=True)),
    "ffnn_192nodes": dict(zip(PAPER_COLUMNS, (217.8, 126.3, 100.3, 50.2, 49.9, 47.4), strict=True)),
    "transformer_block_215nodes": dict(zip(PAPER_COLUMNS, (230.9, 411.5, 336.5, 172.7, 191.5, 160.3), strict=True)),
    "full_transformer_layer_261nodes": dict(zip(PAPER_COLUMNS, (292.6, 295.1, 231.5, 174.8, 167.0, 150.6), strict=True)),
}
PAPER_GRAPH_TITLES = {
    "chain_mm_112nodes": "ChainMM",
    "ffnn_192nodes": "FFNN",
    "transformer_block_215nodes": "Llama block",
    "full_transformer_layer_261nodes": "Llama layer",
}
# Generator kinds tried for the 8-device rows (the paper's families).
GENERATED_FAMILIES = ("chain_mm", "ffnn", "transformer_block", "transformer_layer")


@dataclass(frozen=True)
class Row:
    """One row of the comparison.

    Attributes:
        label: the row's name in the table.
        method: the registered placer.
        stage: for learned methods, the training stage whose checkpoint is used
            (``"il"`` Stage I, ``"sim"`` Stages I+II); None for heuristics.
        sampling: use inference-time sampling (best of K simulated samples).
        paper: the paper column this row corresponds to, if any.
        preset: for learned methods, the ``policy_preset`` of the training run
            whose checkpoint is used (``paper``: ``TrainConfig.paper()``).
        starts: for searches, the start set (``"literature"``: the heuristics and baselines only, the paper's
            comparison; None: the method's default, every one-pass method).
    """

    label: str
    method: str
    stage: str | None = None
    sampling: bool = False
    paper: str | None = None
    preset: str = "default"
    starts: str | None = None


ROWS = (
    Row("critical_path", "critical_path", paper="critical_path"),
    Row("heft", "heft"),
    Row("placeto", "placeto", stage="sim", paper="placeto"),
    Row("gdp", "gdp", stage="sim", paper="gdp"),
    Row("best_constructive", "best_constructive"),
    Row("local_search (literature start)", "local_search", paper="enumerative_optimizer", starts="literature"),
    Row("local_search", "local_search"),
    Row("doppler (Stage I)", "doppler", stage="il"),
    Row("doppler (Stage I+II)", "doppler", stage="sim", paper="doppler_sim"),
    Row("doppler (Stage I+II, sampling)", "doppler", stage="sim", sampling=True),
    Row("doppler-paper (Stage I+II, paper preset)", "doppler", stage="sim", preset="paper"),
    Row("doppler_sel_only", "doppler_sel_only", stage="sim"),
    Row("doppler_plc_only", "doppler_plc_only", stage="sim"),
    Row("joint", "joint", stage="sim"),
)


def paper_improvement(graph: str, column: str) -> float:
    """The paper's relative improvement of ``column`` over its critical path on ``graph``."""
    reported = PAPER_REPORTED[graph]
    return (reported["critical_path"] - reported[column]) / reported["critical_path"]
