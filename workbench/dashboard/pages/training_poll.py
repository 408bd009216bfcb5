"""Training's polls: the browser's gate on its timer, and the appended points a poll sends when runs only grew."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
from dash import Patch

from ...runs import Run
from ...viz.style import format_numbers
from .training_runs import run_label, run_series

__all__ = ["APPENDED_POINTS", "GATE", "extension"]

APPENDED_POINTS = 1_000
"""Points the polls may append to a chart (:func:`extension`) before it is drawn whole again (at least its series'
budget): a whole redraw of 20 runs costs the browser seconds on a loaded machine, so not every few polls."""


GATE = """
function (n, poll, drawn, selection, metric, window, x) {
    const keep = dash_clientside.no_update;
    const rows = parseInt(window) > 0 ? parseInt(window) : 25;
    if (!drawn || JSON.stringify(drawn.view) !== JSON.stringify([selection || [], metric, rows, x])) { return keep; }
    const pending = poll && (drawn.answered === null || drawn.answered === undefined || drawn.answered < poll.n);
    if (pending && Date.now() - poll.t < 300000) { return keep; }
    return {n: n, t: Date.now()};
}
"""
"""The timer, gated in the browser: a poll goes to the server only when the charts show the chosen view (no redraw for a
new selection is on its way) and the last poll was answered (or five minutes passed), so a poll never supersedes a
redraw in flight, and a change of selection always supersedes a poll."""


def _extend(patch: Patch, anchors: dict[str, Any], frames: dict[str, pd.DataFrame], rows: dict[str, int], metric: str, window: int, x: str):
    """Append each series' rows from ``rows[label]`` on to ``patch`` (its raw points, rolling mean and last stage band);
    ``None`` when a series cannot just grow (its new rows start a stage, reach Stage III or go back in ``x``)."""
    for label, frame in frames.items():
        anchor = anchors.get(label)
        new = frame.iloc[rows[label] :].dropna(subset=[c for c in (x, metric) if c in frame])
        if new.empty:
            continue
        old = frame.iloc[: rows[label]].dropna(subset=[x, metric]) if anchor else None
        if anchor is None or old is None or old.empty or x not in new or metric not in new:
            return None
        if "stage" in frame and (new["stage"] != old["stage"].iloc[-1]).any() or float(new[x].iloc[0]) < anchor["last"]:
            return None
        smooth = frame.dropna(subset=[x, metric])[metric].rolling(window, min_periods=1).mean().iloc[len(old) :]
        if anchor["raw"] is not None:
            patch["data"][anchor["raw"]]["x"].extend(new[x].tolist())
            patch["data"][anchor["raw"]]["y"].extend(new[metric].tolist())
            patch["data"][anchor["raw"]]["customdata"].extend(format_numbers(new[metric]).tolist())
        patch["data"][anchor["line"]]["x"].extend(new[x].tolist())
        patch["data"][anchor["line"]]["y"].extend(smooth.tolist())
        last = float(new[x].iloc[-1])
        if "band" in anchor:
            patch["layout"]["shapes"][anchor["band"]]["x1"] = last + anchor["pad"]
            anchor["right"] = max(anchor["right"], last + anchor["pad"])
            right = max(other["right"] for other in anchors.values() if other.get("label") == anchor["label"])
            patch["layout"]["annotations"][anchor["label"]]["x"] = (anchor["x0"] + right) / 2  # the label stays over its stage
        anchor["last"] = last
    return patch


def extension(drawn: dict[str, Any], selected: list[tuple[str, Run, list[int]]], metric: str, window: int, x: str):
    """``(makespan Patch, metric Patch, what is drawn then)`` appending the rows the selected runs gained since ``drawn``;
    ``None`` when a whole redraw is needed (a run was rewritten, its greedy evaluations, meta.json or best placement
    changed, a series cannot just grow, or the points appended since the last redraw reach its point budget)."""
    rows: dict[str, int] = {}
    frames: dict[str, pd.DataFrame] = {}
    for key, run, stamp in selected:
        before = drawn["runs"].get(key)
        if before is None or before[:2] != stamp[:2] or stamp[2] < before[2]:
            return None
        for name, frame, _graph in run_series(run_label(key), run):
            if name != run_label(key) and stamp[2] > before[2]:
                return None  # a run on several graphs: its new rows are split per graph; redraw
            frames[name], rows[name] = frame, before[2]
    appended = drawn["appended"] + sum(stamp[2] - drawn["runs"][key][2] for key, _run, stamp in selected)
    if appended >= drawn["budget"]:
        return None
    after = json.loads(json.dumps(drawn))
    patches = []
    for name, column in (("makespan", "makespan"), ("metric", metric)):
        patch = _extend(Patch(), after[name], frames, rows, column, window, x)
        if patch is None:
            return None
        patches.append(patch)
    high = max((anchor["last"] for anchor in after["makespan"].values()), default=None)
    if after["refs"] and high is not None and (after["high"] is None or high > after["high"]):
        for index in after["refs"]:
            patches[0]["data"][index]["x"][1] = high  # the reference lines reach the newest point
        after["high"] = high
    after["runs"] = {key: stamp for key, _run, stamp in selected}
    after["appended"] = appended
    return patches[0], patches[1], after
