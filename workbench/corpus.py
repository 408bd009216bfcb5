"""The benchmark corpus: a fixed train / validation / test split of graphs, stored as a manifest, never as files.

``datasets/corpus/manifest.json`` lists one entry per graph: its family, the
parameters that regenerate it, its seed, split, the device counts it is used
at, the device profile its costs come from, its op count and a SHA-256 over
its costs and edges (:func:`content_hash`), so a rebuilt graph can be checked
bit for bit. Families:

- the DOPPLER paper's four workloads (:mod:`workbench.generators.paper_families`)
  at several sizes and partitionings, mostly with the paper files' cost
  convention (``cost_model="paper"``: sending a block costs four times
  computing it, so placement matters), some with roofline costs of a device
  profile;
- the random DAG families (:mod:`workbench.generators.random_dags`) with
  communication-heavy costs (CCR 1–4);
- ``paper``: the four bundled graphs of the paper, test only (never trained on);
- split ``large``: paper families and random DAGs of 1,500–20,000 ops, used at
  8 and 16 devices, test only (never trained on): where a one-pass policy and
  a search limited by evaluations differ most (:data:`_LARGE_VARIANTS`);
- ``zoo`` (split ``real``): every graph of the real-model zoo
  (:func:`workbench.importers.zoo.entries`: six models at two partitionings,
  used at 4 and 8 devices), rebuilt by :func:`workbench.importers.zoo.build_entry`
  and hashed like the others. They need the ``[models]`` extra, whose pinned
  torch, transformers and torchvision the hashes were taken with; :func:`build`
  names the extra when it is missing.

``python -m workbench.corpus`` rewrites the manifest from :func:`design`
(with the ``[models]`` extra installed: it builds every graph, the zoo's
included, in 6.5 s on a 2-core VM; the sizes were chosen so that
local_search clearly beats the heuristics; the measured gap per family is in
``docs/results/history.md``, issue 19).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .datasets import DATASETS_DIR, PAPER_GRAPHS, bundled_graph
from .generators import generate
from .graph import DataflowGraph
from .placers.placement_file import content_hash

__all__ = [
    "SPLITS",
    "MANIFEST_PATH",
    "CorpusEntry",
    "load_manifest",
    "entries",
    "build",
    "content_hash",
    "plan",
    "design",
    "write_manifest",
]

SPLITS = ("train", "validation", "test", "real", "large")
MANIFEST_PATH = DATASETS_DIR / "corpus" / "manifest.json"
MANIFEST_VERSION = 1
_FIELDS = ("name", "family", "params", "seed", "split", "devices", "profile", "nodes", "sha256")


class CorpusError(ValueError):
    """A malformed manifest, an unknown split, or an entry that cannot be rebuilt here."""


@dataclass(frozen=True)
class CorpusEntry:
    """One corpus graph.

    Attributes:
        name: unique, readable name (family and variant).
        family: a generator of :data:`workbench.generators.GENERATORS`, ``"paper"`` or ``"zoo"``.
        params: the generator's parameters (``paper``: ``{"name": ...}``; ``zoo``: the zoo's listing of the graph,
            :func:`workbench.importers.zoo.entries`: ``name``, ``partitioning`` and what they stand for).
        seed: the random families' seed (also passed to the generator), ``None`` for deterministic ones.
        split: ``"train"``, ``"validation"``, ``"test"``, ``"real"`` (real models: never trained on, reported apart) or
            ``"large"`` (1,500–20,000 ops at 8 and 16 devices, never trained on).
        devices: the device counts the graph is used at.
        profile: the device profile its costs come from (``"paper"`` for the paper's cost convention, ``None`` for unit-free).
        nodes: op count.
        sha256: :func:`content_hash` of the built graph (zoo graphs: with the ``[models]`` extra's pinned versions).
    """

    name: str
    family: str
    params: Mapping[str, Any] = field(default_factory=dict)
    seed: int | None = None
    split: str = "train"
    devices: tuple[int, ...] = (2, 4, 8)
    profile: str | None = None
    nodes: int = 0
    sha256: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {name: list(self.devices) if name == "devices" else getattr(self, name) for name in _FIELDS}


def build(entry: CorpusEntry) -> DataflowGraph:
    """The entry's graph, regenerated from its parameters (and checked against its hash when it has one)."""
    if entry.family == "paper":
        graph = bundled_graph(str(entry.params["name"]))
    elif entry.family == "zoo":
        graph = _build_zoo(entry)
    else:
        params = dict(entry.params)
        if entry.seed is not None:
            params["seed"] = entry.seed
        graph = generate(entry.family, **params)
    if entry.sha256 is not None and content_hash(graph) != entry.sha256:
        versions = (
            f" (zoo graphs are hashed with the [models] extra's pinned versions; installed: {_model_versions()})"
            if entry.family == "zoo"
            else ""
        )
        raise CorpusError(f"corpus entry {entry.name}: the rebuilt graph differs from the manifest's (sha256 mismatch){versions}")
    return graph.with_metadata(name=entry.name)


def _build_zoo(entry: CorpusEntry) -> DataflowGraph:
    """A zoo entry's graph, once its parameters are checked against the zoo's listing; a missing extra is named."""
    from .importers.zoo import build_entry, entries as zoo_entries

    name, partitioning = str(entry.params.get("name")), int(entry.params.get("partitioning", 0))
    listed = next((item for item in zoo_entries() if (item["name"], item["partitioning"]) == (name, partitioning)), None)
    if listed != dict(entry.params):
        raise CorpusError(
            f"corpus entry {entry.name}: its parameters are not the zoo's listing of {name!r} partitioning {partitioning} "
            "(workbench/importers/zoo.py changed?); rewrite the manifest with python -m workbench.corpus"
        )
    try:
        return build_entry(name, partitioning)
    except ImportError as exc:
        raise CorpusError(
            f"corpus entry {entry.name}: zoo graphs need the [models] extra (pip install 'doppler-workbench[models]'): {exc}"
        ) from None
    except ValueError as exc:  # the spec's SpecError names the missing package and the extra
        raise CorpusError(f"corpus entry {entry.name}: {exc}") from None


def _model_versions() -> str:
    """``"torch 2.2.1, transformers 4.44.2, torchvision 0.17.1"``: the installed packages a zoo graph depends on."""
    from .provenance import versions

    packages = ("torch", "transformers", "torchvision")
    found = versions(packages)
    return ", ".join(f"{package} {found.get(package, 'none')}" for package in packages)


def _entry(data: Mapping[str, Any], where: str) -> CorpusEntry:
    unknown = sorted(set(data) - set(_FIELDS))
    missing = [name for name in ("name", "family", "split") if name not in data]
    if unknown or missing:
        raise CorpusError(f"{where}: unknown field(s) {unknown}, missing field(s) {missing}; fields: {', '.join(_FIELDS)}")
    if data["split"] not in SPLITS:
        raise CorpusError(f"{where}: split must be one of {', '.join(SPLITS)}, got {data['split']!r}")
    devices = tuple(int(d) for d in data.get("devices", (2, 4, 8)))
    if not devices or min(devices) < 1:
        raise CorpusError(f"{where}: devices must be a non-empty list of counts >= 1, got {data.get('devices')!r}")
    return CorpusEntry(**{**data, "devices": devices, "params": dict(data.get("params", {}))})


def load_manifest(path: str | Path = MANIFEST_PATH) -> list[CorpusEntry]:
    """Every entry of a corpus manifest (the shipped one by default)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CorpusError(f"cannot read corpus manifest {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("version") != MANIFEST_VERSION or not isinstance(data.get("entries"), list):
        raise CorpusError(f"{path}: expected {{'version': {MANIFEST_VERSION}, 'entries': [...]}}")
    out = [_entry(item, f"{path} entry {i}") for i, item in enumerate(data["entries"])]
    names = [e.name for e in out]
    if len(set(names)) != len(names):
        raise CorpusError(f"{path}: entry names must be unique")
    return out


def entries(
    split: str | None = None,
    devices: int | None = None,
    families: Iterable[str] | None = None,
    manifest: Iterable[CorpusEntry] | None = None,
) -> list[CorpusEntry]:
    """The manifest's entries of one split (all when ``None``), used at ``devices``, of the given families."""
    if split is not None and split not in SPLITS:
        raise CorpusError(f"unknown split {split!r}; splits: {', '.join(SPLITS)}")
    wanted = None if families is None else set(families)
    return [
        e
        for e in (load_manifest() if manifest is None else manifest)
        if (split is None or e.split == split) and (devices is None or devices in e.devices) and (wanted is None or e.family in wanted)
    ]


# ---- the design the shipped manifest was written from ------------------------------------------

_PAPER_COSTS = {"cost_model": "paper"}
# (family, parameters) of the generated paper-family variants; the paper cost convention unless a profile is named.
_PAPER_FAMILY_VARIANTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("chain_mm", {"parts": "2x2x2x4+2x4x4"}),
    ("chain_mm", {"parts": "2x4x4x2+2x2x2"}),
    ("chain_mm", {"parts": "4x2x4x2+4x4x2"}),
    ("chain_mm", {"parts": "2x2x4x2+2x4x2"}),
    ("chain_mm", {"shapes": "20000x40000x20000+20000x20000x20000+20000x40000x20000", "parts": "2x4x2+2x2x2+2x4x2"}),
    ("chain_mm", {"shapes": "20000x40000x20000+20000x20000x20000+20000x40000x20000", "parts": "4x2x4+4x4x4+4x2x4"}),
    ("chain_mm", {"shapes": "20000x20000x40000x20000x20000", "parts": "2x4x2x4x2"}),
    ("chain_mm", {"shapes": "20000x20000x40000x20000x20000", "parts": "4x2x4x2x4"}),
    ("ffnn", {"batch_parts": 4, "hidden_parts": 4}),
    ("ffnn", {"batch_parts": 8, "hidden_parts": 4}),
    ("ffnn", {"batch_parts": 4, "hidden_parts": 8}),
    ("ffnn", {"batch_parts": 2, "hidden_parts": 8}),
    ("ffnn", {"batch_parts": 8, "hidden_parts": 2}),
    ("ffnn", {"batch_parts": 4, "hidden_parts": 4, "hidden_layers": 2}),
    ("ffnn", {"batch_parts": 2, "hidden_parts": 4, "hidden_layers": 3}),
    ("ffnn", {"batch_parts": 4, "hidden_parts": 2, "hidden_layers": 3}),
    ("transformer_block", {}),
    ("transformer_block", {"batch_parts": 2, "seq_parts": 2, "hidden_parts": 1}),
    ("transformer_block", {"seq_parts": 2, "hidden_parts": 1, "head_parts": 2}),
    ("transformer_block", {"seq_parts": 4, "hidden_parts": 1}),
    ("transformer_block", {"seq_parts": 2, "hidden_parts": 2, "ffn_parts": 2}),
    ("transformer_block", {"seq_parts": 1, "hidden_parts": 2, "head_parts": 2, "ffn_parts": 2}),
    ("transformer_layer", {}),
    ("transformer_layer", {"seq_parts": 2, "hidden_parts": 1, "head_parts": 2}),
    ("transformer_layer", {"seq_parts": 2, "hidden_parts": 2, "vocab_parts": 2}),
    ("transformer_layer", {"layers": 2, "seq_parts": 2, "hidden_parts": 1}),
    ("transformer_layer", {"batch_parts": 2, "seq_parts": 2, "hidden_parts": 1, "fused": True}),
    ("transformer_layer", {"layers": 2, "seq_parts": 1, "hidden_parts": 2, "fused": True}),
    ("chain_mm", {"parts": "2x4x2x4+2x2x4", "profile": "P100", "cost_model": "roofline"}),
    ("ffnn", {"batch_parts": 8, "hidden_parts": 4, "profile": "P100", "cost_model": "roofline"}),
    ("transformer_block", {"batch_parts": 2, "seq_parts": 2, "hidden_parts": 1, "profile": "V100", "cost_model": "roofline"}),
    ("transformer_layer", {"profile": "A100", "cost_model": "roofline", "dtype": "float16"}),
)
# (family, parameters, seeds) of the random DAG variants; communication-heavy so that placement matters.
_RANDOM_VARIANTS: tuple[tuple[str, dict[str, Any], range], ...] = (
    ("layered", {"layers": 12, "width": 12, "ccr": 1.0}, range(0, 4)),
    ("layered", {"layers": 16, "width": 8, "ccr": 2.0, "compute_dist": "lognormal"}, range(4, 8)),
    ("layered", {"layers": 8, "width": 20, "ccr": 4.0, "edge_prob": 0.1}, range(8, 12)),
    ("series_parallel", {"nodes": 150, "ccr": 1.0}, range(0, 4)),
    ("series_parallel", {"nodes": 250, "ccr": 2.0, "parallel_prob": 0.6, "compute_dist": "exponential"}, range(4, 8)),
    ("erdos_renyi", {"nodes": 150, "edge_prob": 0.03, "ccr": 1.0}, range(0, 4)),
    ("erdos_renyi", {"nodes": 200, "edge_prob": 0.02, "ccr": 2.0, "compute_dist": "lognormal"}, range(4, 8)),
    ("tree", {"shape": "fork_join", "branching": 2, "depth": 6, "ccr": 1.0}, range(0, 4)),
    ("tree", {"shape": "fork_join", "branching": 3, "depth": 4, "ccr": 2.0}, range(4, 8)),
)
# (family, parameters, seed) of the large split: 1,500-20,000 ops, used at 8 and 16 devices; each builds in under a second and
# every one-pass method places it in seconds (the quadratic heuristics rule out larger paper families here, issue 32).
_LARGE_VARIANTS: tuple[tuple[str, dict[str, Any], int | None], ...] = (
    ("transformer_layer", {**_PAPER_COSTS, "layers": 16}, None),
    ("transformer_block", {**_PAPER_COSTS, "batch_parts": 4, "seq_parts": 4, "hidden_parts": 2, "head_parts": 2}, None),
    ("ffnn", {**_PAPER_COSTS, "batch_parts": 8, "hidden_parts": 8, "hidden_layers": 4}, None),
    ("chain_mm", {**_PAPER_COSTS, "parts": "8x4x8x8+8x8x8"}, None),
    ("layered", {"layers": 100, "width": 20, "ccr": 2.0}, 100),
    ("erdos_renyi", {"nodes": 3000, "edge_prob": 0.001, "ccr": 2.0}, 100),
    ("series_parallel", {"nodes": 10000, "ccr": 2.0}, 100),
    ("series_parallel", {"nodes": 20000, "ccr": 1.0, "parallel_prob": 0.6}, 101),
)
_LARGE_DEVICES = (8, 16)
_ZOO_DEVICES = (4, 8)
_ZOO_PROFILE = "V100"  # build_entry's costs: shard's roofline default


def _split_of(index: int) -> str:
    """Entry index within its family -> split: every third graph is a test graph, every fifth of the others validation."""
    if index % 3 == 2:
        return "test"
    return "validation" if index % 5 == 4 else "train"


def _cost_signature(graph: DataflowGraph) -> tuple[Any, ...]:
    """Op and edge counts with the sorted costs: equal for two numberings of one graph."""
    return graph.num_nodes, graph.num_edges, np.sort(graph.compute).tobytes(), np.sort(graph.comm).tobytes()


def plan() -> list[CorpusEntry]:
    """The corpus's entries as designed, before building: their op counts and hashes are :func:`design`'s."""
    from .importers.zoo import entries as zoo_entries

    planned: list[CorpusEntry] = []
    seen: dict[str, int] = {}

    def add(family: str, params: dict[str, Any], seed: int | None, profile: str | None) -> None:
        index = seen.get(family, 0)
        seen[family] = index + 1
        planned.append(CorpusEntry(f"{family}-{index:02d}", family, params, seed, _split_of(index), (2, 4, 8), profile))

    for family, params in _PAPER_FAMILY_VARIANTS:
        full = {**_PAPER_COSTS, **params}
        add(family, full, None, "paper" if full["cost_model"] == "paper" else str(full["profile"]))
    for family, params, seeds in _RANDOM_VARIANTS:
        for seed in seeds:
            add(family, dict(params), seed, None)
    planned.extend(CorpusEntry(name, "paper", {"name": name}, None, "test", (4, 8), "paper") for name in PAPER_GRAPHS)
    planned.extend(
        CorpusEntry(f"{family}-large-{index:02d}", family, params, seed, "large", _LARGE_DEVICES, "paper" if seed is None else None)
        for index, (family, params, seed) in enumerate(_LARGE_VARIANTS)
    )
    planned.extend(
        CorpusEntry(f"zoo-{item['name']}-{item['partitioning']}", "zoo", item, None, "real", _ZOO_DEVICES, _ZOO_PROFILE)
        for item in zoo_entries()
    )
    return planned


def design() -> list[CorpusEntry]:
    """:func:`plan`'s entries built, checked (no graph outside the test split has a paper graph's costs) and hashed:
    the shipped manifest, written by :func:`write_manifest`."""
    paper = {_cost_signature(bundled_graph(name)): name for name in PAPER_GRAPHS}
    built = []
    for entry in plan():
        graph = build(entry)
        if entry.split != "test" and _cost_signature(graph) in paper:
            raise CorpusError(f"{entry.name} has the costs of the paper's {paper[_cost_signature(graph)]}, which must stay out of training")
        built.append(CorpusEntry(**{**entry.__dict__, "nodes": graph.num_nodes, "sha256": content_hash(graph)}))
    return built


def write_manifest(path: str | Path = MANIFEST_PATH, corpus: Iterable[CorpusEntry] | None = None) -> Path:
    """Write ``corpus`` (default: :func:`design`) as a manifest, atomically."""
    from .fileio import atomic_write_text

    items = [e.to_dict() for e in (design() if corpus is None else corpus)]
    atomic_write_text(path, json.dumps({"version": MANIFEST_VERSION, "entries": items}, indent=1) + "\n")
    return Path(path)


if __name__ == "__main__":
    print(write_manifest())
