"""The paper's comparison (DOPPLER, Yao et al., ICLR 2026, Table 2) rerun in the simulator.

On the four paper graphs with 4 devices (and 8 devices on generated graphs of
the same families): the rows of :data:`~workbench.sweeps.paper.ROWS`, critical_path,
heft, Placeto, GDP, local search, Doppler after Stage I, after Stages I+II and
with inference-time sampling, and the ablations (learned SEL only, learned
PLC only, one joint policy); mean ± std over seeds. Methods that cannot run
here (not registered, or no trained checkpoint) appear as "not available:
<reason>". Writes the ``## Paper comparison`` section of a markdown file, a
figure and the raw results table. This module plans and runs the cells; the
paper's numbers are :mod:`.paper`, the section's text and figure :mod:`.report`.
"""

from __future__ import annotations

import datetime as dt
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..datasets import DATASETS_DIR, PAPER_GRAPHS
from ..provenance import machine, versions
from ..runs import RunPaths, list_runs, pretrained_checkpoint, try_read_json
from .grid import GraphSpec, MethodSpec, SweepConfig
from .paper import GENERATED_FAMILIES, PAPER_REPORTED, ROWS, Row
from .report import SECTION, checkpoint_provenance, discussion, paper_table, summarize, tables, write_comparison_figure, write_section
from .runners import sweep

__all__ = ["reproduce", "find_checkpoint", "plan", "Settings", "Plan", "PAPER_REPORTED", "ROWS", "SECTION", "write_section"]


@dataclass(frozen=True)
class Settings:
    """How much work the comparison does.

    Attributes:
        seeds: seeds per cell.
        search_budget: simulator evaluations for search methods (``budget`` option).
        samples: K for inference-time sampling.
        generated_nodes: target size of the generated 8-device graphs.
    """

    seeds: int
    search_budget: int
    samples: int
    generated_nodes: int = 250

    @classmethod
    def for_run(cls, quick: bool, seeds: int | None) -> Settings:
        base = cls(seeds=2, search_budget=300, samples=4) if quick else cls(seeds=5, search_budget=20_000, samples=64)
        return base if seeds is None else cls(seeds, base.search_budget, base.samples, base.generated_nodes)


@dataclass
class Plan:
    """The cells to run per graph, and why the other rows cannot run."""

    sweeps: list[SweepConfig] = field(default_factory=list)
    unavailable: dict[tuple[str, int, str], str] = field(default_factory=dict)  # (graph, devices, row) -> reason
    checkpoints: dict[tuple[str, str], str] = field(default_factory=dict)  # (graph, row) -> checkpoint used
    notes: list[str] = field(default_factory=list)


def find_checkpoint(method: str, graph: str, stage: str, runs: Path, preset: str = "default") -> Path | None:
    """The newest checkpoint of ``method`` trained on ``graph`` through ``stage`` (``"il"`` or ``"sim"``) with ``policy_preset`` ``preset``.

    Looks in the training runs under ``runs`` (:func:`~workbench.runs.list_runs`: those whose ``meta.json`` names
    the method and graph, with the stage's selected checkpoint: its best greedy
    weights, else its final ones; :meth:`~workbench.runs.RunPaths.selected_checkpoint`),
    then in the shipped ``datasets/pretrained/<graph>/`` policy of ``method``
    when the ``meta.json`` beside it says its last stage is ``stage`` (no
    ``meta.json``: taken as Stages I+II).
    """
    found: list[tuple[str, Path]] = []
    for run in list_runs(runs):
        meta = run.meta
        graphs = [str(g) for g in meta.get("graphs") or []]
        if meta.get("method") != method or not any(graph.startswith(g) or g.startswith(graph) for g in graphs):
            continue
        if try_read_json(RunPaths(run.path).config_path).get("policy_preset", "default") != preset:
            continue
        checkpoint = RunPaths(run.path).selected_checkpoint(stage)
        if checkpoint is not None:
            found.append((str(meta.get("updated", "")), checkpoint))
    if found:
        return max(found)[1]
    if preset != "default":  # the shipped policies are trained with the defaults
        return None
    pretrained = pretrained_checkpoint(graph, method, DATASETS_DIR / "pretrained")
    if not pretrained.is_file():
        return None
    stages = try_read_json(RunPaths(pretrained.parent).meta_path).get("stages") or ["il", "sim"]
    return pretrained if stages[-1] == stage else None


def _method_spec(row: Row, graph: str, settings: Settings, runs: Path) -> tuple[MethodSpec | None, str | None]:
    """The method spec of ``row`` on ``graph``, or why it is not available."""
    from ..placers import REGISTRY, placer_options

    if row.method not in REGISTRY:
        return None, "not available: not registered"
    accepted = placer_options(row.method)
    options: dict[str, tuple[Any, ...]] = {}
    if row.stage is not None:
        checkpoint = find_checkpoint(row.method, graph, row.stage, runs, row.preset)
        if checkpoint is None:
            stage = "Stage I" if row.stage == "il" else "Stages I+II"
            return None, f"not available: no {stage} checkpoint"
        options["checkpoint"] = (str(checkpoint),)
        if "samples" in accepted:
            options["samples"] = (settings.samples if row.sampling else 1,)
    if "budget" in accepted:
        options["budget"] = (settings.search_budget,)
    if row.starts is not None:
        options["starts"] = (row.starts,)
    return MethodSpec(row.method, row.label, tuple(sorted(options.items()))), None


def _generated_graphs(settings: Settings, notes: list[str]) -> list[GraphSpec]:
    specs = []
    for kind in GENERATED_FAMILIES:
        spec = GraphSpec(f"generated_{kind}", "generate", kind)
        try:
            spec.load()
        except Exception as exc:  # a family the generator lacks is reported, not fatal
            notes.append(f"8 devices on a generated {kind}: skipped, `workbench.generate({kind!r})` failed: {exc}")
            continue
        specs.append(spec)
    return specs


def plan(settings: Settings, graphs: list[str], runs: Path, out: Path, engine: str, workers: int | None) -> Plan:
    """One sweep per (graph, devices): the learned rows' checkpoints differ per graph."""
    result = Plan()
    targets = [(GraphSpec(g, "bundled", g), 4) for g in graphs]
    targets += [(spec, 8) for spec in _generated_graphs(settings, result.notes)]
    for spec, devices in targets:
        methods = []
        for row in ROWS:
            method, reason = _method_spec(row, spec.label, settings, runs)
            if method is None:
                result.unavailable[(spec.label, devices, row.label)] = str(reason)
            else:
                methods.append(method)
                checkpoint = dict(method.options).get("checkpoint")
                if checkpoint:
                    result.checkpoints[(spec.label, row.label)] = checkpoint[0]
        if methods:
            result.sweeps.append(
                SweepConfig(
                    name=f"{spec.label} × {devices}",
                    graphs=(spec,),
                    devices=(devices,),
                    methods=tuple(methods),
                    seeds=tuple(range(settings.seeds)),
                    out=str(out),
                    engine=engine,
                    workers=workers,
                )
            )
    return result


DEFAULT_OUT = Path("runs") / "reproduce" / "results.md"
"""Where the report goes unless ``out`` names another file: never a tracked file (``docs/results.md`` only when asked)."""


def reproduce(
    quick: bool = False,
    out: str | Path = DEFAULT_OUT,
    seeds: int | None = None,
    engine: str = "serial",
    workers: int | None = None,
    graphs: list[str] | None = None,
    runs: str | Path = "runs",
    progress: bool = True,
) -> dict[str, Any]:
    """Run the comparison and write the report section (``out``), the figure and the raw results (beside it, in ``results/``).

    The default ``out`` is under ``runs/`` (ignored by git): the repository's ``docs/results.md`` is rewritten only when named.

    Returns ``{"files": [...], "summary": DataFrame, "unavailable": {...}}``.
    """
    from .grid import graph_spec

    settings = Settings.for_run(quick, seeds)
    out = Path(out)
    chosen = [graph_spec(g, Path(".")).label for g in graphs] if graphs else list(PAPER_GRAPHS)
    stem = out.parent / "results" / ("paper_comparison_quick" if quick else "paper_comparison")
    stem.parent.mkdir(parents=True, exist_ok=True)
    raw = stem.with_suffix(".csv")
    work = plan(settings, chosen, Path(runs), raw, engine, workers)
    frames = [sweep(config, progress=progress) for config in work.sweeps]
    frame = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=["graph", "devices", "label", "makespan", "status", "error", "lower_bound"])
    )
    stats, failures = summarize(frame)
    targets = [(g, 4) for g in chosen] + [(c.graphs[0].label, 8) for c in work.sweeps if c.devices == (8,)]
    drawn = write_comparison_figure(stats, chosen, stem)
    flags = [("--quick", quick), (f"--seeds {seeds}", seeds), (f"--engine {engine}", engine != "serial"), (f"--workers {workers}", workers)]
    flags += [(f"--graphs {' '.join(graphs or [])}", graphs), (f"--runs {runs}", str(runs) != "runs"), (f"--out {out}", True)]
    command = " ".join(["workbench reproduce", *(flag for flag, used in flags if used)])
    m = machine()

    def relative(path: Path) -> str:  # links in the markdown are relative to it
        return path.relative_to(out.parent).as_posix() if path.is_relative_to(out.parent) else str(path)

    body = [
        f"Produced by `{command}` on {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC "
        f"({m['cpu']}, {m['cores']} cores; {', '.join(f'{k} {v}' for k, v in versions().items())}).",
        f"Seeds: {settings.seeds}; search budget {settings.search_budget:,} simulator evaluations; "
        f"inference-time sampling keeps the best of {settings.samples} samples. Raw results: [{relative(raw)}]({relative(raw)})"
        + (f"; figure: [{relative(drawn)}]({relative(drawn)})." if drawn else "."),
        "The paper's numbers are real-system milliseconds on 4×P100 GPUs; ours are the simulator's makespans for the same graphs. "
        "Only the *relative improvement over critical path* is comparable between the two.",
        tables(stats, failures, work.unavailable, targets),
        paper_table(stats, chosen),
        checkpoint_provenance(work.checkpoints),
        "### What the measurements say",
        discussion(stats, work.unavailable, chosen),
        *(f"- {note}" for note in work.notes),
    ]
    if drawn is not None and drawn.suffix == ".png":
        body.insert(4, f"![improvement over critical path]({relative(drawn)})")
    write_section(out, "\n\n".join(body))
    files = [out, raw] + ([drawn] if drawn else [])
    print(f"{int((frame['status'] == 'ok').sum())}/{len(frame)} cells ok", file=sys.stderr)
    return {"files": [str(f) for f in files], "summary": stats, "unavailable": work.unavailable}
