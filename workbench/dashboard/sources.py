"""What the pages compute: graphs from their sources, the methods on offer, placements and traces.

A graph is named by a *key* the browser can hold:

- ``bundled:<path under datasets/>`` — a paper graph or an STG graph,
- ``upload:<file in the upload folder>`` — a file a user uploaded,
- ``generated:<JSON {"kind": ..., "params": {...}}>`` — ``workbench.generate``.

Methods are :class:`~workbench.dashboard.choice.MethodChoice` values: the
registry's names; a learned method carries its checkpoint as
``method@datasets:<path>`` or ``method@runs:<path>`` (a run's weights to use
after each of its stages, ``<stage>-best`` where training kept them; ``last``
while it has none), and ``active|`` before it
runs that checkpoint's per-instance active search (a policy whose placer takes
``search``) within the search budget. Results are cached, so
redrawing a chart (highlighting an op, switching pages) does not re-run a
placer.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..datasets import PAPER_GRAPHS
from ..fileio import atomic_write_bytes
from ..formats import load_graph
from ..generators import generate
from ..graph import DataflowGraph
from ..placers import methods, place, placer_options, placers as registered_placers
from ..runs import RunPaths, checkpoint_name, list_runs, pretrained_checkpoint, zero_shot_checkpoint
from .choice import MethodChoice
from .context import DashboardContext, PathError
from .learned import checkpoint_header, checkpoint_origin, pretrained_name
from .work import check_generated, check_upload

__all__ = [
    "MAX_UPLOAD_BYTES",
    "UploadError",
    "graph_choices",
    "load_graph_key",
    "save_upload",
    "generator_kinds",
    "generator_defaults",
    "method_choices",
    "parse_method",
    "method_label",
    "run_placement",
    "graph_label",
]

MAX_UPLOAD_BYTES = 16 * 1024 * 1024
GRAPH_SUFFIXES = (".txt", ".stg", ".json")


class UploadError(ValueError):
    """An upload the dashboard refuses (too large, not base64, wrong kind of file)."""


# ---------------------------------------------------------------- graphs
def graph_choices(ctx: DashboardContext) -> list[dict[str, str]]:
    """Dropdown options for the bundled graphs: the paper's four, then the STG set."""
    options = []
    paper = ctx.datasets_dir / "doppler-paper"
    for name in PAPER_GRAPHS:
        if (paper / f"{name}.txt").is_file():
            options.append({"label": f"{name} (DOPPLER paper)", "value": f"bundled:doppler-paper/{name}.txt"})
    for path in sorted((ctx.datasets_dir / "stg").glob("*/*.stg")):
        relative = path.relative_to(ctx.datasets_dir).as_posix()
        options.append({"label": f"STG {path.parent.name}-task {path.stem}", "value": f"bundled:{relative}"})
    return options


def graph_label(key: str) -> str:
    """A short human name for a graph key."""
    kind, _, rest = key.partition(":")
    if kind == "upload" and _UPLOAD_NAME.fullmatch(rest):
        return f"uploaded {_UPLOAD_NAME.fullmatch(rest).group(1)}"
    if kind == "generated":
        try:
            spec = json.loads(rest)
            return f"generated {spec.get('kind')}"
        except (json.JSONDecodeError, AttributeError):
            return "generated graph"
    return Path(rest).stem


def generator_kinds() -> list[dict[str, str]]:
    """Dropdown options for ``workbench.generate``'s families."""
    from ..generators import GENERATORS

    return [{"label": f"{kind} — {entry[2]}", "value": kind} for kind, entry in GENERATORS.items()]


def generator_defaults(kind: str | None) -> dict[str, Any]:
    """A family's parameters with their defaults (empty when unknown)."""
    from ..generators import generator_parameters

    try:
        return dict(generator_parameters(kind)) if kind else {}
    except (ValueError, KeyError):
        return {}


def load_graph_key(ctx: DashboardContext, key: str) -> DataflowGraph:
    """The graph a key names; raises ``ValueError`` (or ``GraphFormatError``) saying what is wrong."""
    if not isinstance(key, str) or ":" not in key:
        raise ValueError(f"not a graph key: {key!r}")
    kind, _, rest = key.partition(":")
    if kind == "bundled":
        path = ctx.in_datasets(rest)
    elif kind == "upload":
        path = _resolve_upload(ctx, rest)
    elif kind == "generated":
        check_generated(ctx, rest)  # size and memory caps, in a killable child
        return _generated(rest)
    else:
        raise ValueError(f"unknown graph source {kind!r}")
    if path.suffix not in GRAPH_SUFFIXES and kind == "bundled":
        raise PathError(f"{rest!r} is not a graph file")
    graph = _load_file(str(path), path.stat().st_mtime_ns if path.exists() else 0)
    ctx.limits.check_graph_size(graph.num_nodes, graph.num_edges, graph_label(key))
    return graph.with_metadata(name=_UPLOAD_NAME.fullmatch(rest).group(1)) if kind == "upload" else graph


_UPLOAD_NAME = re.compile(r"[0-9a-f]{16}-([A-Za-z0-9_-]{1,40})(?:\.txt|\.stg|\.json)?")


def _resolve_upload(ctx: DashboardContext, name: str) -> Path:
    if not _UPLOAD_NAME.fullmatch(name):
        raise PathError(f"not an uploaded file name: {name!r}")
    return ctx.upload_dir / name


@lru_cache(maxsize=32)
def _load_file(path: str, _mtime: int) -> DataflowGraph:
    return load_graph(path)


@lru_cache(maxsize=16)
def _generated(spec_text: str) -> DataflowGraph:
    try:
        spec = json.loads(spec_text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"generator parameters are not valid JSON: {exc.msg}") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("kind"), str) or not isinstance(spec.get("params", {}), dict):
        raise ValueError('generator spec must be {"kind": NAME, "params": {...}}')
    return generate(spec["kind"], **spec.get("params", {}))


def save_upload(ctx: DashboardContext, filename: str, contents: str) -> str:
    """Keep an uploaded file (a ``dcc.Upload`` data URL) and check it is a graph within the caps; returns its key.

    Its size is checked before it is decoded; it is parsed in a killable child
    under the server's caps (:func:`~workbench.dashboard.work.check_upload`).
    Raises :class:`UploadError` for a refused upload, ``LimitError`` for a
    graph beyond the size caps and ``GraphFormatError`` (message naming the
    uploaded file) when the file is not a graph.
    """
    if not isinstance(contents, str) or "," not in contents:
        raise UploadError("the upload is empty")
    payload = contents.split(",", 1)[1]
    if len(payload) * 3 // 4 > MAX_UPLOAD_BYTES:
        raise UploadError(f"{filename} is larger than the {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB upload limit")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise UploadError(f"{filename}: the upload is not valid base64 data") from None
    if len(data) > MAX_UPLOAD_BYTES:
        raise UploadError(f"{filename} is larger than the {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB upload limit")
    suffix = Path(filename or "").suffix.lower()
    stem = re.sub(r"[^A-Za-z0-9_-]", "_", Path(filename or "upload").stem)[:40] or "upload"
    name = f"{hashlib.sha256(data).hexdigest()[:16]}-{stem}" + (suffix if suffix in GRAPH_SUFFIXES else "")
    ctx.upload_dir.mkdir(parents=True, exist_ok=True)
    path = ctx.upload_dir / name
    atomic_write_bytes(path, data)
    try:
        check_upload(ctx, path, filename)
    except Exception:
        path.unlink(missing_ok=True)
        raise
    return f"upload:{name}"


# --------------------------------------------------------------- methods
def _learned_checkpoints(ctx: DashboardContext, graph_name: str) -> list[MethodChoice]:
    """The checkpoints on offer: pretrained files (the graph's own, the shipped cross-graph policy) and the runs' weights
    to use (:meth:`~workbench.runs.RunPaths.usable_checkpoints`) of every run :func:`~workbench.runs.list_runs` finds: a
    policy's, or a move scorer's (``learned_search``, whose own default scorer is the plain method's)."""
    files = []
    for method in methods("learned") if re.fullmatch(r"[A-Za-z0-9_-]+", graph_name) else ():
        files.append(("datasets", ctx.datasets_dir, pretrained_checkpoint(graph_name, method, ctx.datasets_dir / "pretrained")))
    files.append(("datasets", ctx.datasets_dir, zero_shot_checkpoint(ctx.datasets_dir / "pretrained")))
    for run in list_runs(ctx.runs_dir):
        stages = run.meta.get("stages")
        for checkpoint in RunPaths(run.path).usable_checkpoints(map(str, stages) if isinstance(stages, list) else ()):
            files.append(("runs", ctx.runs_dir, checkpoint))
    found = []
    for root, folder, path in files:
        try:
            method = checkpoint_header(path).method if path.is_file() else ""
        except ValueError:
            continue  # not a checkpoint the placer could load: not offered
        if method in registered_placers() and "checkpoint" in placer_options(method):  # a policy, or learned_search's scorer
            found.append(MethodChoice(method, root, path.relative_to(folder).as_posix()))
    return found


def method_choices(ctx: DashboardContext, graph_name: str) -> list[dict[str, str]]:
    """Dropdown options: every registered non-learned method, then each learned checkpoint (and its active search), each
    labelled with its origin (:func:`~workbench.dashboard.learned.checkpoint_origin`)."""
    registered, learned = registered_placers(), methods("learned")
    options = [{"label": f"{name} — {text}", "value": name} for name, text in registered.items() if name not in learned]
    for choice in _learned_checkpoints(ctx, graph_name):
        if choice.method in registered:
            label = checkpoint_origin(ctx, choice.to_value()).label()
            options.append({"label": label, "value": choice.to_value()})
            if "search" in placer_options(choice.method):
                options.append({"label": f"{label}, active search", "value": choice.with_mode("active").to_value()})
    return options


def method_label(value: str) -> str:
    """A short label for a method dropdown value: ``doppler (pretrained)``, ``doppler_plc_only (pretrained zero_shot)``,
    ``gdp (run NAME, sim-best)``, ``heft``; ``doppler active search (pretrained)`` for an active search value."""
    choice = MethodChoice.from_value(value)
    method = choice.method + (" active search" if choice.active else "")
    if choice.root == "datasets":
        return f"{method} ({pretrained_name(choice.source)})"
    if choice.root == "runs":
        return f"{method} (run {choice.source}, {checkpoint_name(choice.path)})"
    return method


def parse_method(ctx: DashboardContext, value: str) -> tuple[str, dict[str, Any]]:
    """``(method, options)`` for a dropdown value; the checkpoint must lie in datasets/ or runs/."""
    choice = MethodChoice.from_value(value)
    method = choice.method
    if method not in registered_placers():
        raise ValueError(f"unknown method {method!r}")
    path = choice.checkpoint_path(ctx)
    if path is None:
        if method in methods("learned"):
            raise ValueError(f"{method} needs a checkpoint (pretrained or from a run)")
        return method, {}
    if not path.is_file():
        raise ValueError(f"checkpoint {choice.path} does not exist")
    if not choice.active:
        return method, {"checkpoint": str(path)}
    if "search" not in placer_options(method):
        raise ValueError(f"{method} has no active search")
    return method, {"checkpoint": str(path), "search": "active"}


@lru_cache(maxsize=128)
def run_placement(
    ctx: DashboardContext,
    graph_key: str,
    value: str,
    devices: int,
    seed: int = 0,
    budget: int | None = None,
    time_limit: float | None = None,
    extra: tuple[tuple[str, Any], ...] = (),
):
    """The :class:`workbench.Placement` of one method; ``budget``/``time_limit`` go to placers that take them, ``extra``
    holds more of the method's options as ``(key, value)`` pairs (Compare's options form, already checked)."""
    graph = load_graph_key(ctx, graph_key)
    method, options = parse_method(ctx, value)
    options.update(extra)
    accepted = placer_options(method)
    for name, option in (("budget", budget), ("time_limit", time_limit)):
        if option is not None and name in accepted:
            options[name] = option
    return place(graph, method=method, devices=devices, seed=seed, **options)
