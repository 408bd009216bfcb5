"""The paper's comparison (DOPPLER, Yao et al., ICLR 2026, Table 2) rerun in the simulator.

On the four paper graphs with 4 devices (and 8 devices on generated graphs of
the same families when :func:`workbench.generate` exists): critical_path,
heft, Placeto, GDP, local search, Doppler after Stage I, after Stages I+II and
with inference-time sampling, and the ablations (learned SEL only, learned
PLC only, one joint policy); mean ± std over seeds. Methods that cannot run
here (not registered, or no trained checkpoint) appear as "not available:
<reason>". Writes the ``## Paper comparison`` section of a markdown file, a
figure and the raw results table.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import platform
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from ..datasets import DATASETS_DIR, PAPER_GRAPHS
from .figures import write_figure
from .grid import GraphSpec, MethodSpec, SweepConfig, accepted_options
from .runners import sweep

__all__ = ["reproduce", "PAPER_REPORTED", "ROWS"]

SECTION = "## Paper comparison"
TIME_SCALE = 1e10  # the paper's files are in raw integer units; the paper divides by 1e10

# Real-system milliseconds on 4×P100 as reported in the paper (Table 2).
PAPER_COLUMNS = ("critical_path", "placeto", "gdp", "enumerative_optimizer", "doppler_sim", "doppler_sys")
PAPER_REPORTED: dict[str, dict[str, float]] = {
    "chain_mm_112nodes": dict(zip(PAPER_COLUMNS, (230.4, 137.1, 198.0, 139.0, 122.5, 123.4))),
    "ffnn_192nodes": dict(zip(PAPER_COLUMNS, (217.8, 126.3, 100.3, 50.2, 49.9, 47.4))),
    "transformer_block_215nodes": dict(zip(PAPER_COLUMNS, (230.9, 411.5, 336.5, 172.7, 191.5, 160.3))),
    "full_transformer_layer_261nodes": dict(zip(PAPER_COLUMNS, (292.6, 295.1, 231.5, 174.8, 167.0, 150.6))),
}
PAPER_GRAPH_TITLES = {
    "chain_mm_112nodes": "ChainMM",
    "ffnn_192nodes": "FFNN",
    "transformer_block_215nodes": "Llama block",
    "full_transformer_layer_261nodes": "Llama layer",
}
# Generator kinds tried for the 8-device rows (the paper's families).
GENERATED_FAMILIES = ("chain_mm", "ffnn", "transformer_block", "transformer_layer")


@dataclass(frozen=True)
class Row:
    """One row of the comparison.

    Attributes:
        label: the row's name in the table.
        method: the registered placer.
        stage: for learned methods, the training stage whose checkpoint is used
            (``"il"`` Stage I, ``"sim"`` Stages I+II); None for heuristics.
        sampling: use inference-time sampling (best of K simulated samples).
        paper: the paper column this row corresponds to, if any.
    """

    label: str
    method: str
    stage: str | None = None
    sampling: bool = False
    paper: str | None = None


ROWS = (
    Row("critical_path", "critical_path", paper="critical_path"),
    Row("heft", "heft"),
    Row("placeto", "placeto", stage="sim", paper="placeto"),
    Row("gdp", "gdp", stage="sim", paper="gdp"),
    Row("local_search", "local_search", paper="enumerative_optimizer"),
    Row("doppler (Stage I)", "doppler", stage="il"),
    Row("doppler (Stage I+II)", "doppler", stage="sim", paper="doppler_sim"),
    Row("doppler (Stage I+II, sampling)", "doppler", stage="sim", sampling=True),
    Row("doppler_sel_only", "doppler_sel_only", stage="sim"),
    Row("doppler_plc_only", "doppler_plc_only", stage="sim"),
    Row("joint", "joint", stage="sim"),
)


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
    def for_run(cls, quick: bool, seeds: int | None) -> "Settings":
        base = cls(seeds=2, search_budget=300, samples=4) if quick else cls(seeds=5, search_budget=20_000, samples=64)
        return base if seeds is None else cls(seeds, base.search_budget, base.samples, base.generated_nodes)


@dataclass
class Plan:
    """The cells to run per graph, and why the other rows cannot run."""

    sweeps: list[SweepConfig] = field(default_factory=list)
    unavailable: dict[tuple[str, int, str], str] = field(default_factory=dict)  # (graph, devices, row) -> reason
    checkpoints: dict[tuple[str, str], str] = field(default_factory=dict)  # (graph, row) -> checkpoint used
    notes: list[str] = field(default_factory=list)


def find_checkpoint(method: str, graph: str, stage: str, runs: Path) -> Path | None:
    """The newest checkpoint of ``method`` trained on ``graph`` through ``stage`` (``"il"`` or ``"sim"``).

    Looks in training run directories under ``runs`` (any ``meta.json`` naming
    the method and graph, with ``checkpoints/<stage>-best.safetensors``, the weights
    training selected, or else ``checkpoints/<stage>.safetensors``), then in the shipped
    ``datasets/pretrained/<graph>/<method>.safetensors`` when the ``meta.json`` beside
    it says its last stage is ``stage`` (no ``meta.json``: taken as Stages I+II).
    """
    found: list[tuple[str, Path]] = []
    for meta_path in sorted(runs.glob("**/meta.json")) if runs.is_dir() else []:
        meta = _read_json(meta_path)
        graphs = [str(g) for g in meta.get("graphs") or []]
        if meta.get("method") != method or not any(graph.startswith(g) or g.startswith(graph) for g in graphs):
            continue
        selected = meta_path.parent / "checkpoints" / f"{stage}-best.safetensors"  # the run's best greedy weights (greedy_every)
        checkpoint = selected if selected.is_file() else meta_path.parent / "checkpoints" / f"{stage}.safetensors"
        if checkpoint.is_file():
            found.append((str(meta.get("updated", "")), checkpoint))
    if found:
        return max(found)[1]
    pretrained = DATASETS_DIR / "pretrained" / graph / f"{method}.safetensors"
    if not pretrained.is_file():
        return None
    stages = _read_json(pretrained.with_name("meta.json")).get("stages") or ["il", "sim"]
    return pretrained if stages[-1] == stage else None


def _read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``, or ``{}`` when it is missing or unreadable (a run being written)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _method_spec(row: Row, graph: str, settings: Settings, runs: Path) -> tuple[MethodSpec | None, str | None]:
    """The method spec of ``row`` on ``graph``, or why it is not available."""
    from ..placers.base import REGISTRY

    if row.method not in REGISTRY:
        return None, "not available: not registered"
    accepted = accepted_options(row.method)
    options: dict[str, tuple[Any, ...]] = {}
    if row.stage is not None:
        checkpoint = find_checkpoint(row.method, graph, row.stage, runs)
        if checkpoint is None:
            stage = "Stage I" if row.stage == "il" else "Stages I+II"
            return None, f"not available: no {stage} checkpoint"
        options["checkpoint"] = (str(checkpoint),)
        if "samples" in accepted:
            options["samples"] = (settings.samples if row.sampling else 1,)
    if "budget" in accepted:
        options["budget"] = (settings.search_budget,)
    return MethodSpec(row.method, row.label, tuple(sorted(options.items()))), None


def _generated_graphs(settings: Settings, notes: list[str]) -> list[GraphSpec]:
    import workbench

    if not hasattr(workbench, "generate"):
        notes.append("8 devices on generated graphs: skipped, `workbench.generate` is not available in this installation.")
        return []
    specs = []
    for kind in GENERATED_FAMILIES:
        spec = GraphSpec(f"generated_{kind}", "generate", kind)
        try:
            spec.load()
        except Exception as exc:  # noqa: BLE001 - a family the generator lacks is reported, not fatal
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


def summarize(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """Mean and std of makespan per (graph, devices, label) with the improvement over critical path
    and the gap to the lower bound; and the first error of each row that only failed."""
    ok = frame[frame["status"] == "ok"]
    stats = ok.groupby(["graph", "devices", "label"])["makespan"].agg(["mean", "std", "count"]).reset_index()
    stats["std"] = stats["std"].fillna(0.0)
    reference = stats[stats["label"] == "critical_path"].set_index(["graph", "devices"])["mean"]
    keys = list(zip(stats["graph"], stats["devices"]))
    cp = np.array([reference.get(k, np.nan) for k in keys], dtype=float)
    stats["improvement"] = (cp - stats["mean"].to_numpy(float)) / cp
    bound = ok.groupby(["graph", "devices"])["lower_bound"].max()
    stats["gap"] = stats["mean"].to_numpy(float) / np.array([bound.get(k, np.nan) for k in keys], dtype=float) - 1
    failures = frame[frame["status"] != "ok"].groupby(["graph", "devices", "label"])["error"].first()
    return stats, failures


def _percent(value: float) -> str:
    return "–" if not np.isfinite(value) else f"{value:+.1%}"


def _short(error: str, limit: int = 90) -> str:
    """An error cut to fit a table cell (the raw results keep it whole)."""
    text = str(error)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cell_text(stats: pd.DataFrame, failures: pd.Series, unavailable: Mapping, graph: str, devices: int, label: str) -> str:
    if (graph, devices, label) in unavailable:
        return unavailable[(graph, devices, label)]
    match = stats[(stats["graph"] == graph) & (stats["devices"] == devices) & (stats["label"] == label)]
    if match.empty:
        error = failures.get((graph, devices, label))
        return f"failed: {_short(error)}" if error is not None else "–"
    row = match.iloc[0]
    if graph in PAPER_REPORTED:  # the paper's raw integer units, shown as the paper does
        return f"{row['mean'] / TIME_SCALE:,.1f} ± {row['std'] / TIME_SCALE:,.1f} ({_percent(row['improvement'])})"
    return f"{row['mean']:.4g} ± {row['std']:.2g} ({_percent(row['improvement'])})"


def _tables(stats: pd.DataFrame, failures: pd.Series, unavailable: Mapping, targets: list[tuple[str, int]]) -> str:
    lines = []
    for devices in sorted({d for _, d in targets}):
        graphs = [g for g, d in targets if d == devices]
        unit = "/ 1e10" if all(g in PAPER_REPORTED for g in graphs) else "in the generator's unit (seconds)"
        lines.append(f"**{devices} devices** — simulated makespan {unit}, mean ± std over seeds (improvement over critical path)\n")
        lines.append("| method | " + " | ".join(PAPER_GRAPH_TITLES.get(g, g) for g in graphs) + " |")
        lines.append("|---|" + "---|" * len(graphs))
        for row in ROWS:
            cells = [_cell_text(stats, failures, unavailable, g, devices, row.label) for g in graphs]
            lines.append(f"| {row.label} | " + " | ".join(cells) + " |")
        per_graph = [stats[(stats["graph"] == g) & (stats["devices"] == devices)] for g in graphs]
        best = [f"{_best(frame)} ({frame['gap'].min():.1%})" if len(frame) else "–" for frame in per_graph]
        lines.append("| *best method (gap to lower bound)* | " + " | ".join(best) + " |\n")
    return "\n".join(lines)


def _paper_table(stats: pd.DataFrame, graphs: list[str]) -> str:
    lines = [
        "**Ours beside the paper** — improvement over critical path (ours: simulator, 4 devices; paper: real system, 4×P100, its Table 2)\n",
        "| row (ours ↔ paper) | " + " | ".join(f"{PAPER_GRAPH_TITLES[g]} ours | paper" for g in graphs) + " |",
        "|---|" + "---|---|" * len(graphs),
    ]
    paper_rows = [(r.label, r.paper) for r in ROWS if r.paper and r.paper != "critical_path"] + [("—", "doppler_sys")]
    for label, paper in paper_rows:
        cells = []
        for g in graphs:
            match = stats[(stats["graph"] == g) & (stats["devices"] == 4) & (stats["label"] == label)]
            ours = _percent(match.iloc[0]["improvement"]) if len(match) else "–"
            cells.append(f"{ours} | {paper_improvement(g, paper):+.1%}")
        lines.append(f"| {label} ↔ {paper} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _best(frame: pd.DataFrame) -> str:
    """The label(s) with the smallest mean makespan (ties within 1e-6 relative listed together)."""
    low = frame["mean"].min()
    return " = ".join(frame.loc[frame["mean"] <= low * (1 + 1e-6), "label"])


def paper_improvement(graph: str, column: str) -> float:
    """The paper's relative improvement of ``column`` over its critical path on ``graph``."""
    reported = PAPER_REPORTED[graph]
    return (reported["critical_path"] - reported[column]) / reported["critical_path"]


def _discussion(stats: pd.DataFrame, unavailable: Mapping, graphs: list[str]) -> str:
    """Facts read off the measured table: orderings, agreements and differences with the paper."""
    points = []
    for g in graphs:
        ours = stats[(stats["graph"] == g) & (stats["devices"] == 4)].set_index("label")
        if ours.empty:
            continue
        tied = _best(ours.reset_index())
        paper_best = max(PAPER_COLUMNS[1:], key=lambda column: paper_improvement(g, column))
        heuristics = [r.label for r in ROWS if r.stage is None and r.label in ours.index]
        spread = ", ".join(f"{h} {_percent(ours.loc[h, 'improvement'])}" for h in heuristics)
        points.append(
            f"- **{PAPER_GRAPH_TITLES[g]}**: our best is {tied} ({_percent(ours['improvement'].max())} over critical path, "
            f"{ours['gap'].min():.1%} above the lower bound); the paper's best is {paper_best} "
            f"({paper_improvement(g, paper_best):+.1%}). Non-learned rows: {spread}."
        )
        pairs = [(r.label, r.paper) for r in ROWS if r.paper and r.paper != "critical_path" and r.label in ours.index]
        for label, paper in pairs:
            verdict = "agree" if (ours.loc[label, "improvement"] > 0) == (paper_improvement(g, paper) > 0) else "differ"
            points.append(
                f"  - {label} vs critical path: ours {_percent(ours.loc[label, 'improvement'])}, "
                f"paper ({paper}) {paper_improvement(g, paper):+.1%} — the signs {verdict}."
            )
        if len(pairs) >= 2:
            concordant = [
                (ours.loc[a, "improvement"] - ours.loc[b, "improvement"]) * (paper_improvement(g, pa) - paper_improvement(g, pb)) > 0
                for (a, pa), (b, pb) in itertools.combinations(pairs, 2)
            ]
            points.append(f"  - Ordering of the {len(pairs)} paired rows: {sum(concordant)} of {len(concordant)} pairs ranked as in the paper.")
    for devices in sorted(set(stats["devices"]) - {4}):
        for g, frame in stats[stats["devices"] == devices].groupby("graph"):
            best = frame.loc[frame["mean"].idxmin()]
            points.append(f"- {devices} devices, {g}: best {_best(frame)} ({_percent(best['improvement'])} over critical path, {best['gap']:.1%} above the lower bound).")
    reasons: dict[tuple[int, str], set[str]] = {}
    for (_, devices, row), reason in unavailable.items():
        reasons.setdefault((devices, reason.removeprefix("not available: ")), set()).add(row)
    for (devices, reason), rows in sorted(reasons.items()):
        points.append(f"- Not measured with {devices} devices on some or all graphs ({reason}): {', '.join(sorted(rows))}.")
    return "\n".join(points)


def _provenance(checkpoints: Mapping[tuple[str, str], str]) -> str:
    """Where each learned row's checkpoint came from: its path, the rows using it and the command that trained it."""
    users: dict[str, list[str]] = {}
    for (graph, label), path in sorted(checkpoints.items()):
        users.setdefault(path, []).append(label)
    lines = []
    for path, labels in users.items():
        checkpoint = Path(path)
        meta = _read_json(checkpoint.parent.parent / "meta.json") or _read_json(checkpoint.with_name("meta.json"))
        command = f" — `{meta['command']}`" if meta.get("command") else ""
        lines.append(f"- `{path}`: {', '.join(labels)}{command}")
    return "Checkpoints of the learned rows (path: rows — training command):\n\n" + "\n".join(lines) if lines else "No learned checkpoints were found (see `--runs`)."


def _figure(stats: pd.DataFrame, graphs: list[str], path_stem: Path) -> Path | None:
    """Improvement over critical path per graph: ours (4 devices) beside the paper's. PNG, else HTML."""
    try:
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots
    except ImportError:
        return None
    figure = make_subplots(rows=1, cols=2, subplot_titles=("ours: simulator, 4 devices", "paper: real system, 4×P100"), shared_yaxes=True)
    titles = [PAPER_GRAPH_TITLES[g] for g in graphs]
    for row in ROWS:
        if row.label == "critical_path":
            continue
        values = []
        for g in graphs:
            match = stats[(stats["graph"] == g) & (stats["devices"] == 4) & (stats["label"] == row.label)]
            values.append(100 * match.iloc[0]["improvement"] if len(match) else None)
        if any(v is not None for v in values):
            figure.add_trace(go.Bar(name=row.label, x=titles, y=values, legendgroup="ours"), row=1, col=1)
    for column in PAPER_COLUMNS[1:]:
        values = [100 * paper_improvement(g, column) for g in graphs]
        figure.add_trace(go.Bar(name=f"paper: {column}", x=titles, y=values, legendgroup="paper"), row=1, col=2)
    figure.update_layout(barmode="group", yaxis_title="improvement over critical path (%)", width=1300, height=520, template="plotly_white")
    return write_figure(figure, path_stem.with_suffix(".png"))


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    import workbench

    found = {"workbench": workbench.__version__, "python": platform.python_version()}
    for package in ("numpy", "pandas", "numba", "torch", "dgl", "ray", "plotly"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            continue
    return found


NOTES = "### Notes"


def write_section(path: Path, body: str) -> None:
    """Replace (or append) the ``## Paper comparison`` section of a markdown file, atomically.

    A ``### Notes`` subsection already in the section (a person's reading of
    the numbers) is kept at the section's end.
    """
    from ..graph import atomic_write_text

    text = path.read_text(encoding="utf-8") if path.exists() else "# Results\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    old = pattern.search(text)
    notes = old.group(0)[old.group(0).index(NOTES):].strip() if old and NOTES in old.group(0) else ""
    section = f"{SECTION}\n\n{body.strip()}\n" + (f"\n{notes}\n" if notes else "")
    if old:
        text = pattern.sub(lambda _: section + "\n", text, count=1).rstrip() + "\n"
    else:
        text = text.rstrip() + "\n\n" + section
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)


def reproduce(
    quick: bool = False,
    out: str | Path = "docs/results.md",
    seeds: int | None = None,
    engine: str = "serial",
    workers: int | None = None,
    graphs: list[str] | None = None,
    runs: str | Path = "runs",
    progress: bool = True,
) -> dict[str, Any]:
    """Run the comparison and write the report section, the figure and the raw results.

    Returns ``{"files": [...], "summary": DataFrame, "unavailable": {...}}``.
    """
    from ..bench import machine
    from .grid import graph_spec

    settings = Settings.for_run(quick, seeds)
    out = Path(out)
    chosen = [graph_spec(g, Path(".")).label for g in graphs] if graphs else list(PAPER_GRAPHS)
    stem = out.parent / "results" / ("paper_comparison_quick" if quick else "paper_comparison")
    stem.parent.mkdir(parents=True, exist_ok=True)
    raw = stem.with_suffix(".csv")
    work = plan(settings, chosen, Path(runs), raw, engine, workers)
    frames = [sweep(config, progress=progress) for config in work.sweeps]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["graph", "devices", "label", "makespan", "status", "error", "lower_bound"])
    stats, failures = summarize(frame)
    targets = [(g, 4) for g in chosen] + [(c.graphs[0].label, 8) for c in work.sweeps if c.devices == (8,)]
    figure = _figure(stats, chosen, stem)
    flags = [("--quick", quick), (f"--seeds {seeds}", seeds), (f"--engine {engine}", engine != "serial"), (f"--workers {workers}", workers)]
    flags += [(f"--graphs {' '.join(graphs or [])}", graphs), (f"--runs {runs}", str(runs) != "runs"), (f"--out {out}", True)]
    command = " ".join(["workbench reproduce", *(flag for flag, used in flags if used)])
    m = machine()

    def relative(path: Path) -> str:  # links in the markdown are relative to it
        return path.relative_to(out.parent).as_posix() if path.is_relative_to(out.parent) else str(path)

    body = [
        f"Produced by `{command}` on {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC "
        f"({m['cpu']}, {m['cores']} cores; {', '.join(f'{k} {v}' for k, v in _versions().items())}).",
        f"Seeds: {settings.seeds}; search budget {settings.search_budget:,} simulator evaluations; "
        f"inference-time sampling keeps the best of {settings.samples} samples. Raw results: [{relative(raw)}]({relative(raw)})"
        + (f"; figure: [{relative(figure)}]({relative(figure)})." if figure else "."),
        "The paper's numbers are real-system milliseconds on 4×P100 GPUs; ours are the simulator's makespans for the same graphs. "
        "Only the *relative improvement over critical path* is comparable between the two.",
        _tables(stats, failures, work.unavailable, targets),
        _paper_table(stats, chosen),
        _provenance(work.checkpoints),
        "### What the measurements say",
        _discussion(stats, work.unavailable, chosen),
        *(f"- {note}" for note in work.notes),
    ]
    if figure is not None and figure.suffix == ".png":
        body.insert(4, f"![improvement over critical path]({relative(figure)})")
    write_section(out, "\n\n".join(body))
    files = [out, raw] + ([figure] if figure else [])
    print(f"{int((frame['status'] == 'ok').sum())}/{len(frame)} cells ok", file=sys.stderr)
    return {"files": [str(f) for f in files], "summary": stats, "unavailable": work.unavailable}
