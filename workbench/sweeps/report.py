"""The ``## Paper comparison`` section of a markdown report: statistics, tables, prose and the figure.

Everything here reads a finished results table (one row per cell, see
``docs/contracts.md``, "Sweep table"); nothing runs a placer. The prose
states only facts read off the measured table.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from ..fileio import atomic_write_text
from ..runs import RunPaths, try_read_json
from .paper import PAPER_COLUMNS, PAPER_GRAPH_TITLES, PAPER_REPORTED, ROWS, TIME_SCALE, paper_improvement

__all__ = [
    "SECTION",
    "NOTES",
    "summarize",
    "tables",
    "paper_table",
    "discussion",
    "checkpoint_provenance",
    "write_comparison_figure",
    "write_section",
]

SECTION = "## Paper comparison"
NOTES = "### Notes"
"""A person's reading of the numbers: a subsection of the section that rewriting keeps."""


def summarize(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """Mean and std of makespan per (graph, devices, label) with the improvement over critical path
    and the gap to the lower bound; and the first error of each row that only failed."""
    ok = frame[frame["status"] == "ok"]
    stats = ok.groupby(["graph", "devices", "label"])["makespan"].agg(["mean", "std", "count"]).reset_index()
    stats["std"] = stats["std"].fillna(0.0)
    reference = stats[stats["label"] == "critical_path"].set_index(["graph", "devices"])["mean"]
    keys = list(zip(stats["graph"], stats["devices"], strict=True))
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


def tables(stats: pd.DataFrame, failures: pd.Series, unavailable: Mapping, targets: list[tuple[str, int]]) -> str:
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


def paper_table(stats: pd.DataFrame, graphs: list[str]) -> str:
    lines = [
        "**Ours beside the paper** — improvement over critical path "
        "(ours: simulator, 4 devices; paper: real system, 4×P100, its Table 2)\n",
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


def discussion(stats: pd.DataFrame, unavailable: Mapping, graphs: list[str]) -> str:
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
            points.append(
                f"  - Ordering of the {len(pairs)} paired rows: {sum(concordant)} of {len(concordant)} pairs ranked as in the paper."
            )
    for devices in sorted(set(stats["devices"]) - {4}):
        for g, frame in stats[stats["devices"] == devices].groupby("graph"):
            best = frame.loc[frame["mean"].idxmin()]
            points.append(
                f"- {devices} devices, {g}: best {_best(frame)} ({_percent(best['improvement'])} over critical path, "
                f"{best['gap']:.1%} above the lower bound)."
            )
    reasons: dict[tuple[int, str], set[str]] = {}
    for (_, devices, row), reason in unavailable.items():
        reasons.setdefault((devices, reason.removeprefix("not available: ")), set()).add(row)
    for (devices, reason), rows in sorted(reasons.items()):
        points.append(f"- Not measured with {devices} devices on some or all graphs ({reason}): {', '.join(sorted(rows))}.")
    return "\n".join(points)


def checkpoint_provenance(checkpoints: Mapping[tuple[str, str], str]) -> str:
    """Where each learned row's checkpoint came from: its path, the rows using it and the command that trained it."""
    users: dict[str, list[str]] = {}
    for (_graph, label), path in sorted(checkpoints.items()):
        users.setdefault(path, []).append(label)
    lines = []
    for path, labels in users.items():
        checkpoint = Path(path)
        meta = try_read_json(RunPaths(checkpoint.parent.parent).meta_path) or try_read_json(
            RunPaths(checkpoint.parent).meta_path
        )  # a run's, or a shipped policy's
        command = f" — `{meta['command']}`" if meta.get("command") else ""
        lines.append(f"- `{path}`: {', '.join(labels)}{command}")
    return (
        "Checkpoints of the learned rows (path: rows — training command):\n\n" + "\n".join(lines)
        if lines
        else "No learned checkpoints were found (see `--runs`)."
    )


def write_comparison_figure(stats: pd.DataFrame, graphs: list[str], path_stem: Path) -> Path | None:
    """Improvement over critical path per graph: ours (4 devices) beside the paper's. PNG, else HTML."""
    try:
        from ..viz import write_figure
        from ..viz.reports import improvement_bars
    except ImportError:  # plotly is the dashboard extra's
        return None
    ours = {}
    for row in ROWS:
        if row.label == "critical_path":
            continue
        values = []
        for g in graphs:
            match = stats[(stats["graph"] == g) & (stats["devices"] == 4) & (stats["label"] == row.label)]
            values.append(100 * match.iloc[0]["improvement"] if len(match) else None)
        if any(v is not None for v in values):
            ours[row.label] = values
    paper = {column: [100 * paper_improvement(g, column) for g in graphs] for column in PAPER_COLUMNS[1:]}
    return write_figure(improvement_bars(ours, paper, [PAPER_GRAPH_TITLES[g] for g in graphs]), path_stem.with_suffix(".png"))


def write_section(path: Path, body: str) -> None:
    """Replace (or append) the ``## Paper comparison`` section of a markdown file, atomically.

    A ``### Notes`` subsection already in the section (a person's reading of
    the numbers) is kept at the section's end.
    """
    text = path.read_text(encoding="utf-8") if path.exists() else "# Results\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    old = pattern.search(text)
    notes = old.group(0)[old.group(0).index(NOTES) :].strip() if old and NOTES in old.group(0) else ""
    section = f"{SECTION}\n\n{body.strip()}\n" + (f"\n{notes}\n" if notes else "")
    if old:
        text = pattern.sub(lambda _: section + "\n", text, count=1).rstrip() + "\n"
    else:
        text = text.rstrip() + "\n\n" + section
    atomic_write_text(path, text)
