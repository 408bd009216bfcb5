"""The learned methods' registry lines: ``workbench.place(graph, method="doppler", checkpoint=PATH)``.

Plain Python (no torch): :mod:`workbench` imports this module so that every
front end sees the learned methods, while their placers
(:mod:`workbench.learn.placers`, torch + DGL) load only when used.
"""

from __future__ import annotations

from ..placers.registry import register_placer

_PLACERS = "workbench.learn.placers"
_NEEDS = ("torch", "dgl", "safetensors")
"""What the learned policies import, all of the ``learn`` extra (:mod:`workbench.extras`); learned_search needs no DGL."""

TEACHERS = ("critical_path", "affinity")
"""Device rules of the imitation teacher, each the step-by-step form of the registered placer of that name: ``critical_path`` (the
earliest-start device) or ``affinity`` (the smallest affinity cost: earliest finish plus the transfer the choice forces at consumers
whose other inputs are placed, :mod:`workbench.placers.affinity`)."""

register_placer(
    "doppler",
    _PLACERS,
    "DopplerPlacer",
    "DOPPLER: learned SEL (next op) + PLC (device) policies; needs a checkpoint; search='active' adapts it to the graph",
    "learned",
    requires=_NEEDS,
)
register_placer(
    "placeto",
    _PLACERS,
    "PlacetoPlacer",
    "Placeto: topological order, placement-aware embeddings; needs a checkpoint",
    "learned",
    requires=_NEEDS,
)
register_placer(
    "gdp", _PLACERS, "GDPPlacer", "GDP: graph encoder + attention, all ops in one pass; needs a checkpoint", "learned", requires=_NEEDS
)
register_placer(
    "joint", _PLACERS, "JointPlacer", "one policy over (ready op, device) pairs; needs a checkpoint", "learned", requires=_NEEDS
)
register_placer(
    "doppler_sel_only",
    _PLACERS,
    "DopplerSelOnlyPlacer",
    "ablation: learned SEL, critical-path device choice; needs a checkpoint",
    "learned",
    requires=_NEEDS,
)
register_placer(
    "doppler_plc_only",
    _PLACERS,
    "DopplerPlcOnlyPlacer",
    "ablation: critical-path op order, learned PLC; needs a checkpoint",
    "learned",
    requires=_NEEDS,
)
register_placer(
    "learned_search",
    "workbench.learn.learned_search",
    "LearnedSearchPlacer",
    "local_search with half its proposals chosen by a move scorer trained across the corpus (budget in evaluations)",
    "search",
    requires=("torch", "safetensors"),
)
