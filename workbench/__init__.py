"""Doppler workbench: place the ops of a dataflow graph on devices.

The public API, imported lazily so that ``import workbench`` stays fast and
never imports torch:

- graphs: :func:`load_graph`, :func:`save_graph`, :class:`DataflowGraph`,
  :func:`bundled_graphs`, :func:`bundled_graph`
- simulation: :func:`simulate`, :func:`simulate_many`, :class:`Evaluator`,
  :func:`lower_bound`, :func:`validate`, :class:`Cluster`
- placement: :func:`place`, :func:`placers` (the registry, with the learned
  methods of :mod:`workbench.learn.registry`), :func:`load_placement` (a
  placement file, checked against its graph)
- learned policies (import torch + DGL on first use): :class:`PlacementEnv`,
  :func:`make_policy`, :func:`load_policy`, :class:`PolicyConfig`
"""

from __future__ import annotations

from .imports import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "DataflowGraph": "workbench.graph",
    "GraphError": "workbench.graph",
    "load_graph": "workbench.formats",
    "save_graph": "workbench.formats",
    "GraphFormatError": "workbench.formats",
    "bundled_graphs": "workbench.datasets",
    "bundled_graph": "workbench.datasets",
    "PAPER_GRAPHS": "workbench.datasets",
    "Cluster": "workbench.cluster",
    "simulate": "workbench.sim",
    "simulate_many": "workbench.sim",
    "Evaluator": "workbench.sim",
    "lower_bound": "workbench.sim",
    "validate": "workbench.sim",
    "AssignmentError": "workbench.sim",
    "SimResult": "workbench.sim",
    "Trace": "workbench.sim",
    "place": "workbench.placers",
    "placers": "workbench.placers",
    "Placement": "workbench.placers",
    "load_placement": "workbench.placers",
    "Placer": "workbench.placers",
    "register_placer": "workbench.placers",
    "PlacerError": "workbench.placers",
    "generate": "workbench.generators",
    "DeviceProfile": "workbench.generators",
    "from_torch": "workbench.importers",
    "measure": "workbench.systems",
    "Measurement": "workbench.systems",
    "SimulatorOracle": "workbench.systems",
    "LocalExecutor": "workbench.systems",
    "RemoteEngine": "workbench.systems",
    "calibrate": "workbench.systems",
    "sweep": "workbench.sweeps",
    "read_results": "workbench.sweeps",
    "PlacementEnv": "workbench.learn",
    "EnvConfig": "workbench.learn",
    "PolicyConfig": "workbench.learn",
    "LearnedPolicy": "workbench.learn",
    "Rollout": "workbench.learn",
    "make_policy": "workbench.learn",
    "load_policy": "workbench.learn",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

# The learned methods' registry lines (plain Python, no torch): imported here, by the one public API, so
# that place(), the CLI, the dashboard, sweeps and benchmarks see them while the core placers never
# import the learn layer.
from .learn import registry as _learned_methods  # noqa: E402,F401
