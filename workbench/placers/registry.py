"""The method registry: every placement method's name, class, kind and options, in one place.

An entry names the module and class of a :class:`~workbench.placers.base.Placer`
(imported only when the method is used), a one-line description and a kind.
A placer's options are its constructor's parameters, read from the signature
by :func:`placer_options`. Every method list in the workbench is derived from
here (:func:`methods` by kind), never written out by hand.

The core methods are registered below; learned methods register from the
learn layer's own registry module, which the public API (the ``workbench``
package) imports: the core never names a higher layer. Plain Python
only: importing this module must stay cheap (``import workbench`` imports it).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from ..extras import missing_modules, require_modules

if TYPE_CHECKING:
    from inspect import Parameter

    from .base import Placer

__all__ = [
    "KINDS",
    "PlacerEntry",
    "PlacerError",
    "REGISTRY",
    "register_placer",
    "placers",
    "methods",
    "require",
    "placer_class",
    "placer_options",
    "placer_parameters",
    "get_placer",
]

# kind -> what a method of that kind is
KINDS: dict[str, str] = {
    "baseline": "a fixed rule that ignores the costs",
    "random": "a seeded random placement",
    "heuristic": "a list-scheduling heuristic from the literature",
    "rule": "a list-scheduling rule of this workbench (not from the literature)",
    "search": "a search scored by the simulator, within an evaluation budget",
    "exact": "an exact solver, time-limited; reports a proven lower bound",
    "learned": "a trained policy; needs a checkpoint",
}


class PlacerError(ValueError):
    """A method that is not registered, or an option it does not take or refuses."""


class PlacerEntry(NamedTuple):
    """One registered method (a named tuple: ``dataclasses`` and ``inspect`` would slow ``import workbench``).

    Attributes:
        module: the module that defines the placer class (imported on first use).
        cls: the :class:`Placer` subclass's name in ``module``.
        description: one line for listings.
        kind: a key of :data:`KINDS`.
        requires: top-level modules of optional extras the method needs (``("torch", "dgl")``); see :mod:`workbench.extras`.
        fixed: ``(name, value)`` constructor arguments the registry gives the class, so that one class serves several methods
            (every learned policy's placer gets its ``method``); they are not options.
    """

    module: str
    cls: str
    description: str
    kind: str
    requires: tuple[str, ...] = ()
    fixed: tuple[tuple[str, Any], ...] = ()


REGISTRY: dict[str, PlacerEntry] = {}


def register_placer(
    name: str,
    module: str,
    cls: str,
    description: str,
    kind: str = "heuristic",
    requires: tuple[str, ...] = (),
    fixed: Mapping[str, Any] | None = None,
) -> None:
    """Register (or replace) method ``name``: class ``cls`` of ``module``, imported only when used; ``requires`` names the
    modules of optional extras it needs, so that listings can leave it out and using it says which extra to install;
    ``fixed`` holds constructor arguments the registry passes itself (:attr:`PlacerEntry.fixed`)."""
    if kind not in KINDS:
        raise PlacerError(f"unknown kind {kind!r} for method {name!r}; kinds: {', '.join(KINDS)}")
    REGISTRY[name] = PlacerEntry(module, cls, description, kind, tuple(requires), tuple(sorted((fixed or {}).items())))


register_placer("single", "workbench.placers.simple", "SinglePlacer", "every op on device 0", "baseline")
register_placer("round_robin", "workbench.placers.simple", "RoundRobinPlacer", "op i on device i mod D", "baseline")
register_placer("random", "workbench.placers.simple", "RandomPlacer", "uniformly random device per op (seeded)", "random")
register_placer(
    "critical_path",
    "workbench.placers.critical_path",
    "CriticalPathPlacer",
    "the paper's teacher: largest bottom level first, earliest-start device",
    "heuristic",
)
register_placer(
    "heft", "workbench.placers.heft", "HeftPlacer", "HEFT (Topcuoglu et al. 2002): upward rank, earliest finish with insertion", "heuristic"
)
register_placer(
    "cpop",
    "workbench.placers.cpop",
    "CpopPlacer",
    "CPOP (Topcuoglu et al. 2002): critical path on one device, others earliest finish",
    "heuristic",
)
register_placer(
    "peft",
    "workbench.placers.peft",
    "PeftPlacer",
    "PEFT (Arabnejad, Barbosa 2014): earliest finish plus optimistic cost table",
    "heuristic",
)
register_placer(
    "etf", "workbench.placers.etf", "EtfPlacer", "ETF (Hwang et al. 1989): ready op and device with the earliest start", "heuristic"
)
register_placer(
    "affinity",
    "workbench.placers.affinity",
    "AffinityPlacer",
    "this workbench's affinity rule: largest bottom level first, earliest finish plus the transfer it forces at shared consumers",
    "rule",
)
register_placer(
    "best_constructive",
    "workbench.placers.best_constructive",
    "BestConstructivePlacer",
    "the fair baseline: every heuristic, rule and baseline once, the best simulated makespan kept (one evaluation each)",
    "search",
)
register_placer(
    "local_search",
    "workbench.placers.local_search",
    "LocalSearchPlacer",
    "simulated annealing from the best one-pass method (rules included), structure-aware moves (budget in evaluations)",
    "search",
)
register_placer(
    "cpsat", "workbench.placers.cpsat", "CpSatPlacer", "exact CP-SAT schedule model, time-limited; reports its proven lower bound", "exact"
)


def placers() -> dict[str, str]:
    """Registered method names with a one-line description each."""
    return {name: entry.description for name, entry in REGISTRY.items()}


def methods(*kinds: str, available: bool = False) -> list[str]:
    """The registered methods of the given kinds (all of them when none is given), in registry order; with
    ``available``, only those whose required modules are installed."""
    unknown = [kind for kind in kinds if kind not in KINDS]
    if unknown:
        raise PlacerError(f"unknown kind(s) {', '.join(map(repr, unknown))}; kinds: {', '.join(KINDS)}")
    listed = [name for name, entry in REGISTRY.items() if not kinds or entry.kind in kinds]
    return [name for name in listed if not missing_modules(REGISTRY[name].requires)] if available else listed


def _entry(method: str) -> PlacerEntry:
    if method not in REGISTRY:
        raise PlacerError(f"unknown method {method!r}; registered: {', '.join(REGISTRY)}")
    return REGISTRY[method]


def require(method: str) -> None:
    """Raise :class:`~workbench.extras.MissingExtra` (one line naming the extra) when a module ``method`` needs is not installed."""
    require_modules(f"method {method!r}", *_entry(method).requires)


@cache
def _load(entry: PlacerEntry) -> tuple[type, tuple[Parameter, ...]]:
    cls = getattr(importlib.import_module(entry.module), entry.cls)
    fixed = {name for name, _ in entry.fixed}
    return cls, tuple(p for p in _constructor_parameters(cls) if p.name not in fixed)


def _constructor_parameters(cls: type) -> tuple[Parameter, ...]:
    """The keyword parameters of ``cls``'s constructor; a ``**options`` parameter passes on to the base class's."""
    import inspect

    parameters = inspect.signature(cls).parameters.values()
    own = tuple(p for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))
    if any(p.kind is p.VAR_KEYWORD for p in parameters) and cls.__mro__[1] is not object:
        names = {p.name for p in own}
        own += tuple(p for p in _constructor_parameters(cls.__mro__[1]) if p.name not in names)
    return own


def placer_class(method: str) -> type[Placer]:
    """The placer class of ``method`` (imports its module)."""
    require(method)
    return _load(_entry(method))[0]


def placer_options(method: str) -> tuple[str, ...]:
    """The options ``method`` accepts: its placer's constructor parameters."""
    return tuple(p.name for p in placer_parameters(method))


def placer_parameters(method: str) -> tuple[Parameter, ...]:
    """The constructor parameters of ``method``'s placer (its options, with their annotations and defaults), without the
    registry's fixed arguments; :mod:`workbench.placers.options` reads a type for each from them."""
    require(method)
    return _load(_entry(method))[1]


def get_placer(method: str, **options: Any) -> Placer:
    """Build the placer ``method`` with ``options``; clear errors for unknown names and options."""
    accepted = placer_options(method)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise PlacerError(f"method {method!r} does not take option(s) {', '.join(unknown)}; it takes: {', '.join(accepted) or 'none'}")
    return placer_class(method)(**dict(_entry(method).fixed), **options)
