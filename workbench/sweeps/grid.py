"""Sweep configurations: parse, validate and expand a grid into cells.

A configuration (YAML, JSON or a dict) names graphs, device counts, methods
(each with an options grid) and seeds; every combination is one *cell*, one
call of :func:`workbench.place`. Example::

    name: heuristics
    graphs: [chain_mm, ffnn, {generate: layered, nodes: 500, seed: 1}]
    devices: [4, 8]
    methods:
      - critical_path
      - heft
      - {method: local_search, options: {budget: [1000, 5000]}}
    seeds: 3                  # 0, 1, 2 (or a list)
    out: results/heuristics.csv
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..graph import DataflowGraph

__all__ = ["ConfigError", "GraphSpec", "MethodSpec", "Cell", "SweepConfig", "load_config", "parse_config"]

CONFIG_KEYS = ("name", "graphs", "devices", "methods", "seeds", "out", "engine", "workers", "address")
ENGINES = ("serial", "local", "ray")


class ConfigError(ValueError):
    """A sweep configuration is wrong; the message names the key and value."""


@dataclass(frozen=True)
class GraphSpec:
    """Where one graph of the grid comes from.

    Attributes:
        label: the graph's name in the results table.
        source: ``"bundled"`` (a paper graph by name), ``"file"`` or ``"generate"``.
        value: the bundled name, the file path, or the generator kind.
        params: generator parameters (``source == "generate"``).
    """

    label: str
    source: str
    value: str
    params: tuple[tuple[str, Any], ...] = ()

    def load(self) -> DataflowGraph:
        """Build the graph (bundled files are read, generated graphs generated)."""
        if self.source == "bundled":
            from ..datasets import bundled_graph

            return bundled_graph(self.value)
        if self.source == "file":
            from ..formats import load_graph

            return load_graph(self.value)
        from ..generators import generate

        return generate(self.value, **dict(self.params))


@dataclass(frozen=True)
class MethodSpec:
    """One method of the grid with its options grid (lists expand).

    Attributes:
        method: a registered placer name.
        label: its name in the results table (defaults to ``method``).
        options: option name → values to try (a list in the config expands; to pass a
            list as one value, wrap it in another list).
    """

    method: str
    label: str
    options: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    def option_sets(self) -> list[dict[str, Any]]:
        names = [name for name, _ in self.options]
        return [dict(zip(names, values, strict=True)) for values in itertools.product(*(vals for _, vals in self.options))]


@dataclass(frozen=True)
class Cell:
    """One placement of the sweep: a graph, a device count, a method with options, a seed."""

    graph: GraphSpec
    devices: int
    method: str
    label: str
    seed: int
    options: tuple[tuple[str, Any], ...] = ()
    files: str = ""

    @property
    def key(self) -> str:
        """A stable identity used to skip finished cells when a sweep is rerun.

        It includes ``files``: the size and modification time of every option
        that names a file (a checkpoint), so a retrained checkpoint runs again.
        """
        return json.dumps(
            [self.graph.label, self.devices, self.label, self.method, self.seed, dict(self.options), self.files],
            sort_keys=True,
            default=str,
        )

    def parameters(self) -> dict[str, Any]:
        """The cell's parameters as table columns (each option as ``option.NAME``)."""
        row = {
            "cell": self.key,
            "graph": self.graph.label,
            "devices": self.devices,
            "method": self.method,
            "label": self.label,
            "seed": self.seed,
            "options": json.dumps(dict(self.options), sort_keys=True, default=str),
        }
        row.update({f"option.{name}": value for name, value in self.options})
        return row


@dataclass(frozen=True)
class SweepConfig:
    """A validated sweep.

    Attributes:
        name: the sweep's name (used for the default output file).
        graphs: the graphs of the grid.
        devices: the device counts of the grid.
        methods: the methods of the grid.
        seeds: the seeds of the grid.
        out: the results table (``.csv``, or ``.parquet`` when pyarrow is installed).
        engine: ``serial``, ``local`` (process pool) or ``ray``.
        workers: processes for ``local`` / CPUs for a local Ray instance (None: all cores).
        address: an existing Ray cluster's address (``ray`` engine), e.g. ``auto``.
    """

    name: str
    graphs: tuple[GraphSpec, ...]
    devices: tuple[int, ...]
    methods: tuple[MethodSpec, ...]
    seeds: tuple[int, ...]
    out: str = "results.csv"
    engine: str = "serial"
    workers: int | None = None
    address: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def cells(self) -> list[Cell]:
        """Every combination, graphs outermost, seeds innermost."""
        return [
            Cell(graph, devices, spec.method, spec.label, seed, tuple(sorted(options.items())), _file_stamps(options))
            for graph in self.graphs
            for devices in self.devices
            for spec in self.methods
            for options in spec.option_sets()
            for seed in self.seeds
        ]


def _file_stamps(options: Mapping[str, Any]) -> str:
    """Size and modification time of each option value that names an existing file."""
    stamps = {}
    for name, value in sorted(options.items()):
        if isinstance(value, str) and os.path.isfile(value):
            stat = os.stat(value)
            stamps[name] = [stat.st_size, stat.st_mtime_ns]
    return json.dumps(stamps) if stamps else ""


def load_config(path: str | Path) -> SweepConfig:
    """Read a YAML or JSON sweep configuration file and validate it."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"sweep config {str(path)!r} does not exist")
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:  # parser errors differ per format; report them all alike
        raise ConfigError(
            f"sweep config {str(path)!r} is not valid {path.suffix.lstrip('.') or 'YAML'}: {str(exc).splitlines()[0]}"
        ) from None
    return parse_config(data, base=path.parent)


def parse_config(data: Any, base: str | Path = ".") -> SweepConfig:
    """Validate a configuration mapping; relative graph paths resolve against ``base``."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"a sweep config must be a mapping, got {type(data).__name__}")
    unknown = sorted(set(map(str, data)) - set(CONFIG_KEYS))
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(map(repr, unknown))}; known: {', '.join(CONFIG_KEYS)}")
    for key in ("graphs", "methods"):
        if not data.get(key):
            raise ConfigError(f"{key!r} is missing or empty")
    engine = str(data.get("engine", "serial"))
    if engine not in ENGINES:
        raise ConfigError(f"engine: {engine!r} is not one of {', '.join(ENGINES)}")
    workers = data.get("workers")
    if workers is not None and (not _is_int(workers) or workers < 1):
        raise ConfigError(f"workers: must be a positive integer, got {workers!r}")
    name = str(data.get("name", "sweep"))
    graphs = tuple(graph_spec(entry, Path(base)) for entry in _as_list(data["graphs"]))
    labels = [g.label for g in graphs]
    if len(set(labels)) != len(labels):
        raise ConfigError(
            f"graphs: duplicate graph label(s) {sorted({x for x in labels if labels.count(x) > 1})}; give each a distinct 'label'"
        )
    return SweepConfig(
        name=name,
        graphs=graphs,
        devices=_devices(data.get("devices", 4)),
        methods=tuple(_method_spec(entry) for entry in _as_list(data["methods"])),
        seeds=_seeds(data.get("seeds", 1)),
        out=str(data.get("out") or f"{name}.csv"),
        engine=engine,
        workers=workers,
        address=None if data.get("address") is None else str(data["address"]),
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _devices(value: Any) -> tuple[int, ...]:
    counts = _as_list(value)
    bad = [v for v in counts if not _is_int(v) or v < 1]
    if bad or not counts:
        raise ConfigError(f"devices: must be positive integers, got {value!r}")
    return tuple(dict.fromkeys(counts))


def _seeds(value: Any) -> tuple[int, ...]:
    if _is_int(value):
        if value < 1:
            raise ConfigError(f"seeds: a count must be >= 1, got {value}")
        return tuple(range(value))
    seeds = _as_list(value)
    if not seeds or not all(_is_int(s) for s in seeds):
        raise ConfigError(f"seeds: must be a count or a list of integers, got {value!r}")
    return tuple(dict.fromkeys(seeds))


def graph_spec(entry: Any, base: Path) -> GraphSpec:
    """A graph of the grid: a bundled name or prefix, a file (absolute or relative to ``base``), or ``{generate: KIND, ...}``."""
    from ..datasets import PAPER_GRAPHS

    if isinstance(entry, Mapping):
        entry = dict(entry)
        label = entry.pop("label", None)
        if "generate" in entry:
            kind = str(entry.pop("generate"))
            params = tuple(sorted(entry.items()))
            default = kind + ("(" + ",".join(f"{k}={v}" for k, v in params) + ")" if params else "")
            return GraphSpec(str(label or default), "generate", kind, params)
        if set(entry) != {"path"}:
            raise ConfigError(
                f"graphs: an entry must be a name, a path, {{path: ..., label: ...}} or {{generate: KIND, ...}}; got keys {sorted(entry)}"
            )
        return _with_label(graph_spec(str(entry["path"]), base), label)
    text = str(entry)
    for candidate in (Path(text), base / text):
        if candidate.is_file():
            return GraphSpec(candidate.stem, "file", str(candidate.resolve()))
    matches = [g for g in PAPER_GRAPHS if g == text] or [g for g in PAPER_GRAPHS if g.startswith(text)]
    if len(matches) == 1:
        return GraphSpec(matches[0], "bundled", matches[0])
    raise ConfigError(f"graphs: {text!r} is neither a graph file nor a bundled graph ({', '.join(PAPER_GRAPHS)})")


def _with_label(spec: GraphSpec, label: Any) -> GraphSpec:
    return spec if label is None else GraphSpec(str(label), spec.source, spec.value, spec.params)


def _method_spec(entry: Any) -> MethodSpec:
    from ..placers import REGISTRY, placer_options

    if isinstance(entry, Mapping):
        unknown = sorted(set(entry) - {"method", "label", "options"})
        if unknown or "method" not in entry:
            raise ConfigError(f"methods: an entry must be a name or {{method, label, options}}; got keys {sorted(entry)}")
        method, label, options = str(entry["method"]), entry.get("label"), entry.get("options") or {}
    else:
        method, label, options = str(entry), None, {}
    if method not in REGISTRY:
        raise ConfigError(f"methods: unknown method {method!r}; registered: {', '.join(REGISTRY)}")
    if not isinstance(options, Mapping):
        raise ConfigError(f"methods: options of {method!r} must be a mapping, got {options!r}")
    accepted = placer_options(method)
    unknown = sorted(set(map(str, options)) - set(accepted))
    if unknown:
        raise ConfigError(f"methods: {method!r} does not take option(s) {', '.join(unknown)}; it takes: {', '.join(accepted) or 'none'}")
    empty = sorted(str(k) for k, v in options.items() if isinstance(v, (list, tuple)) and not v)
    if empty:
        raise ConfigError(f"methods: option(s) {', '.join(empty)} of {method!r} have an empty list of values")
    grid = tuple((str(k), tuple(_typed(method, str(k), value) for value in _as_list(v))) for k, v in sorted(options.items()))
    return MethodSpec(method, str(label or method), grid)


def _typed(method: str, key: str, value: Any) -> Any:
    """One grid value of option ``key``, checked and parsed as ``workbench place --option`` parses it (``"1e-3"``, which
    YAML reads as text, becomes a float); an option that cannot be given as text (a starting assignment) is kept as given."""
    from ..placers.options import OptionError, declared_options, parse_value

    if declared_options(method)[key].type is None:
        return value
    try:
        return parse_value(method, key, value)
    except OptionError as exc:
        raise ConfigError(f"methods: {exc}") from None
