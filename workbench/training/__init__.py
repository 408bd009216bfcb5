"""Training placement policies in three stages (DOPPLER, Yao et al., ICLR 2026, Sec. 4).

Stage I imitates the critical_path teacher (:mod:`.imitation`), Stage II runs
REINFORCE against the simulator and Stage III against a real-system cost
oracle (:mod:`.reinforce`, :mod:`.oracle`). :func:`train` runs them from one
:class:`TrainConfig` and writes a run directory (:mod:`.rundir`, CONTRACTS.md
section 2) that survives interruption and resumes from its last checkpoint.
"""

from .config import TrainConfig, field_docs
from .loop import TrainResult, load_graphs, reference_makespans, train
from .oracle import CostOracle, SimulatorOracle, as_oracle
from .rundir import METRIC_COLUMNS, RunDirectory, read_meta, read_metrics
from .search import SearchResult, search

__all__ = [
    "TrainConfig", "field_docs", "train", "TrainResult", "load_graphs", "reference_makespans",
    "CostOracle", "SimulatorOracle", "as_oracle", "RunDirectory", "METRIC_COLUMNS", "read_metrics",
    "read_meta", "search", "SearchResult",
]  # fmt: skip
