"""A zoo of real-model block graphs: the manifest, and the code that rebuilds them (graphs are not stored).

Each entry names a model by its spec (:mod:`workbench.importers.specs`,
random weights from a config, nothing downloaded), its example input, and
two partitionings (:func:`~workbench.importers.sharding.shard`); the first is
the default. ``workbench import-model zoo:NAME`` builds one entry at its
default partitioning; ``workbench import-model --zoo DIR`` writes every
entry at both partitionings into ``DIR`` with the placement table of
``docs/generators.md`` (4 and 8 devices).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..graph import DataflowGraph

__all__ = ["ZOO", "ZooEntry", "entries", "build_entry", "build_zoo", "placement_row"]


@dataclass(frozen=True)
class ZooEntry:
    """One zoo model.

    Attributes:
        spec: model spec (``hf:TYPE``, ``tv:NAME``, ``PACKAGE.MODULE:FACTORY``).
        kwargs: config fields or model arguments.
        input_shape: shape of the one example input.
        input_dtype: its dtype (``int64`` token ids or ``float32`` images).
        partitionings: parts per dimension kind; the first is the default.
    """

    spec: str
    kwargs: Mapping[str, Any]
    input_shape: tuple[int, ...]
    input_dtype: str
    partitionings: tuple[str, str]


_TEXT = ("batch=2,seq=2,hidden=2", "seq=2,heads=4,hidden=2")
_IMAGES = ("batch=2,channels=4", "batch=4,channels=2")

ZOO: Mapping[str, ZooEntry] = {
    "gpt2-small": ZooEntry("hf:gpt2", {"n_layer": 2}, (2, 128), "int64", _TEXT),
    "gpt2-medium": ZooEntry("hf:gpt2", {"n_layer": 2, "n_embd": 1024, "n_head": 16}, (2, 128), "int64", _TEXT[::-1]),
    "llama-layer": ZooEntry(
        "hf:llama",
        {
            "hidden_size": 4096,
            "intermediate_size": 11008,
            "num_hidden_layers": 1,
            "num_attention_heads": 32,
            "num_key_value_heads": 32,
            "vocab_size": 32000,
        },
        (2, 512),
        "int64",
        _TEXT,
    ),
    "bert-base": ZooEntry("hf:bert", {"num_hidden_layers": 2}, (2, 128), "int64", _TEXT),
    "resnet50": ZooEntry("tv:resnet50", {}, (8, 3, 224, 224), "float32", _IMAGES),
    "vit-b-16": ZooEntry("tv:vit_b_16", {}, (2, 3, 224, 224), "float32", ("batch=2,seq=2,hidden=2", "batch=2,heads=4,hidden=2")),
}
"""GPT-2 small and medium widths (two of their blocks), a Llama-7B-sized decoder layer, BERT-base (two
blocks), ResNet-50 and ViT-B/16. Fewer blocks than the full models keep the graphs at a few hundred to a
few thousand nodes; every block is the same, so more of them repeat the same placement problem. The
defaults are the partitionings measured in docs/generators.md: GPT-2 medium defaults to its heads split,
the only one on which local search gains 10% over critical_path at 4 devices."""


def entries() -> list[dict[str, Any]]:
    """Every zoo graph, one per model and partitioning, as JSON-ready parameters (a corpus manifest can store them):
    ``name`` and ``partitioning`` (the index :func:`build_entry` takes; 0 is the default), and what they stand for
    (``parts``, ``spec``, ``kwargs``, ``input_shape``, ``input_dtype``)."""
    return [
        {
            "name": name,
            "partitioning": index,
            "parts": parts,
            "spec": entry.spec,
            "kwargs": dict(entry.kwargs),
            "input_shape": list(entry.input_shape),
            "input_dtype": entry.input_dtype,
        }
        for name, entry in ZOO.items()
        for index, parts in enumerate(entry.partitionings)
    ]


def build_entry(name: str, partitioning: int = 0, **options: Any) -> DataflowGraph:
    """Zoo graph ``name`` at its ``partitioning``-th parts (0: the default); ``options`` go to :func:`shard`."""
    import torch

    from .sharding import shard
    from .specs import SpecError, build_model

    if name not in ZOO:
        raise SpecError(f"unknown zoo graph {name!r}; the zoo has: {', '.join(ZOO)}")
    entry = ZOO[name]
    model = build_model(entry.spec, entry.kwargs, meta=True)
    inputs = (torch.zeros(entry.input_shape, dtype=getattr(torch, entry.input_dtype)),)
    graph = shard(model, inputs, entry.partitionings[partitioning], device="meta", name=name, **options)
    return graph.with_metadata(zoo=name, spec=entry.spec, kwargs=dict(entry.kwargs), partitioning=entry.partitionings[partitioning])


def placement_row(graph: DataflowGraph, devices: int, budget: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Nodes, edges, lower bound and the makespans of critical_path, heft and local_search (``budget`` evaluations)."""
    from ..placers.base import place
    from ..sim import lower_bound

    row: dict[str, Any] = {
        "graph": graph.name,
        "devices": devices,
        "nodes": graph.num_nodes,
        "edges": graph.num_edges,
        "lower_bound": lower_bound(graph, devices),
    }
    for method in ZOO_TABLE_COLUMNS:
        options = {"budget": budget} if method == "local_search" else {}
        start = time.perf_counter()
        row[method] = place(graph, method=method, devices=devices, seed=seed, **options).makespan
        row[f"{method}_s"] = time.perf_counter() - start
    row["local_search_gain"] = 1 - row["local_search"] / row["critical_path"]
    return row


ZOO_TABLE_COLUMNS = ("critical_path", "heft", "local_search")
"""The methods the zoo table reports (docs/generators.md): the teacher, the classic list scheduler, and search."""

_COLUMNS = ("zoo", "parts", "devices", "nodes", "edges", "lower_bound", *ZOO_TABLE_COLUMNS, "local_search_gain", "build_s")


def build_zoo(
    out: str | Path, devices: tuple[int, ...] = (4, 8), budget: int = 2000, report: Callable[[str], Any] = print
) -> list[dict[str, Any]]:
    """Write every zoo graph at both partitionings into ``out``; return the placement rows, reported as a Markdown table."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    report("| " + " | ".join(_COLUMNS) + " |")
    report("|" + "---|" * len(_COLUMNS))
    rows = []
    for item in entries():
        start = time.perf_counter()
        graph = build_entry(item["name"], item["partitioning"])
        seconds = time.perf_counter() - start
        graph.save(out / f"{item['name']}.{'default' if item['partitioning'] == 0 else 'alt'}.json")
        for count in devices:
            row = {"zoo": item["name"], "parts": item["parts"], "build_s": seconds, **placement_row(graph, count, budget)}
            rows.append(row)
            cells = [
                f"{100 * row[c]:.1f}%" if c == "local_search_gain" else f"{row[c]:.4g}" if isinstance(row[c], float) else str(row[c])
                for c in _COLUMNS
            ]
            report("| " + " | ".join(cells) + " |")
    return rows
