"""The learned methods' registry lines: ``workbench.place(graph, method="doppler", checkpoint=PATH)``.

Plain Python (no torch): :mod:`workbench` imports this module so that every
front end sees the learned methods, while their placers
(:mod:`workbench.learn.placers`, torch + DGL) load only when used.
"""

from __future__ import annotations

from ..placers.registry import REGISTRY, PlacerEntry, register_placer

_PLACERS = "workbench.learn.placers"
_NEEDS = ("torch", "dgl", "safetensors")
"""What the learned policies import, all of the ``learn`` extra (:mod:`workbench.extras`); learned_search needs no DGL."""

TEACHERS = ("critical_path", "affinity")
"""Device rules of the imitation teacher, each the step-by-step form of the registered placer of that name: ``critical_path`` (the
earliest-start device) or ``affinity`` (the smallest affinity cost: earliest finish plus the transfer the choice forces at consumers
whose other inputs are placed, :mod:`workbench.placers.affinity`)."""

POLICIES: dict[str, tuple[str, str, dict[str, str]]] = {}
"""Learned method -> ``(module, class, constructor keyword arguments)`` of its policy; written by :func:`register_policy`."""

Registration = tuple[PlacerEntry | None, tuple[str, str, dict[str, str]] | None]
"""A method's entries in the two registries: its placer's and, for a learned policy, its policy's (:func:`registration`)."""


def registration(name: str) -> Registration:
    """Method ``name``'s registry entries in this process. A worker process (a sweep's pool, a dashboard child) has only
    the registrations its imports make; :func:`install_registration` adds one made at run time (a user's
    ``register_policy`` line)."""
    return REGISTRY.get(name), POLICIES.get(name)


def install_registration(name: str, entries: Registration) -> None:
    """Register method ``name`` with ``entries`` (from :func:`registration`) where this process does not have it yet."""
    placer, policy = entries
    if placer is not None:
        REGISTRY.setdefault(name, placer)
    if policy is not None:
        POLICIES.setdefault(name, policy)


def register_policy(
    name: str, module: str, cls: str, description: str, kwargs: dict[str, str] | None = None, placer: str = "LearnedPlacer"
) -> None:
    """Register learned method ``name`` in one line: its policy factory (class ``cls`` of ``module``, built with ``kwargs`` and a
    :class:`~workbench.learn.policy.PolicyConfig`), its placer (a class of :mod:`workbench.learn.placers`: ``LearnedPlacer``,
    or ``DopplerPlacer`` for per-instance active search), its one-line description; its kind is ``learned``.

    The method then trains (``workbench train --method NAME``), loads from checkpoints, and is offered by ``workbench
    compare``, the dashboard and sweeps. Nothing here imports torch: the module loads when the method is used.
    """
    POLICIES[name] = (module, cls, dict(kwargs or {}))
    register_placer(name, _PLACERS, placer, description, "learned", requires=_NEEDS, fixed={"method": name})


_DOPPLER = "workbench.learn.doppler"
register_policy(
    "doppler",
    _DOPPLER,
    "DopplerPolicy",
    "DOPPLER: learned SEL (next op) + PLC (device) policies; needs a checkpoint; search='active' adapts it to the graph",
    placer="DopplerPlacer",
)
register_policy(
    "placeto", "workbench.learn.placeto", "PlacetoPolicy", "Placeto: topological order, placement-aware embeddings; needs a checkpoint"
)
register_policy("gdp", "workbench.learn.gdp", "GDPPolicy", "GDP: graph encoder + attention, all ops in one pass; needs a checkpoint")
register_policy("joint", "workbench.learn.joint", "JointPolicy", "one policy over (ready op, device) pairs; needs a checkpoint")
register_policy(
    "doppler_sel_only",
    _DOPPLER,
    "DopplerPolicy",
    "ablation: learned SEL, critical-path device choice; needs a checkpoint",
    kwargs={"place": "critical_path"},
)
register_policy(
    "doppler_plc_only",
    _DOPPLER,
    "DopplerPolicy",
    "ablation: critical-path op order, learned PLC; needs a checkpoint; search='active' adapts it to the graph",
    kwargs={"select": "critical_path"},
    placer="DopplerPlacer",
)
register_placer(
    "learned_search",
    "workbench.learn.learned_search",
    "LearnedSearchPlacer",
    "local_search with half its proposals chosen by a move scorer trained across the corpus (budget in evaluations)",
    "search",
    requires=("torch", "safetensors"),
)
