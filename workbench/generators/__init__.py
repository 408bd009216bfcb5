"""Graph sources: the paper's workloads at any size and random DAG families.

``generate(kind, **params)`` builds a :class:`~workbench.graph.DataflowGraph`
and records the generator and every parameter (defaults included) in its
metadata, so ``generate(g.metadata["generator"], **g.metadata["params"])``
rebuilds it. To add a family, write a function whose keyword parameters all
have defaults and list it in ``GENERATORS``.
"""

from __future__ import annotations

import importlib
import inspect
import numbers
from collections.abc import Callable, Mapping
from typing import Any

from ..graph import DataflowGraph
from .profiles import PROFILES, DeviceProfile, get_profile

__all__ = ["GENERATORS", "generate", "generator_function", "generator_parameters", "DeviceProfile", "PROFILES", "get_profile"]

GENERATORS: dict[str, tuple[str, str, str]] = {
    "chain_mm": ("workbench.generators.paper_families", "chain_mm", "sums of chains of block matrix products (paper: ChainMM)"),
    "ffnn": ("workbench.generators.paper_families", "ffnn", "feed-forward network forward pass (paper: FFNN)"),
    "transformer_block": ("workbench.generators.paper_families", "transformer_block", "Llama transformer block (paper)"),
    "transformer_layer": ("workbench.generators.paper_families", "transformer_layer", "full Llama layer: blocks + norm + LM head (paper)"),
    "layered": ("workbench.generators.random_dags", "layered", "random layered DAG"),
    "tree": ("workbench.generators.random_dags", "tree", "fan-out, fan-in or fork-join trees"),
    "series_parallel": ("workbench.generators.random_dags", "series_parallel", "random series-parallel DAG"),
    "erdos_renyi": ("workbench.generators.random_dags", "erdos_renyi", "Erdős–Rényi DAG (random order, edge probability p)"),
}


def generator_function(kind: str) -> Callable[..., DataflowGraph]:
    if kind not in GENERATORS:
        raise ValueError(f"unknown generator {kind!r}; known: {', '.join(GENERATORS)}")
    module, function, _ = GENERATORS[kind]
    return getattr(importlib.import_module(module), function)


def generator_parameters(kind: str) -> dict[str, Any]:
    """Parameter name → default value of a generator."""
    return {name: p.default for name, p in inspect.signature(generator_function(kind)).parameters.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, DeviceProfile):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _check_type(kind: str, name: str, value: Any, default: Any) -> None:
    """Integers, numbers and booleans must be given as such (strings and profiles are checked by the family)."""
    expected = {bool: (bool,), int: (numbers.Integral,), float: (numbers.Real,)}.get(type(default))
    if expected and (not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected)):
        raise ValueError(f"parameter {name} of {kind} must be {type(default).__name__}, got {value!r}")


def generate(kind: str, **params: Any) -> DataflowGraph:
    """Build a graph of family ``kind`` (see ``GENERATORS``) with ``params``; unknown parameters are an error."""
    function = generator_function(kind)
    defaults = generator_parameters(kind)
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ValueError(f"unknown parameter(s) {', '.join(unknown)} for {kind}; accepted: {', '.join(defaults)}")
    for name, value in params.items():
        _check_type(kind, name, value, defaults[name])
    resolved = {**defaults, **params}
    graph = function(**resolved)
    return graph.with_metadata(
        format="generated",
        name=f"{kind}_{graph.num_nodes}nodes",
        generator=kind,
        params=_plain(resolved),
    )
