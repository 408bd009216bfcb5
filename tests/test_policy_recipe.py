"""docs/architecture.md's "Add a learned policy" recipe, followed with a toy policy: one module, one registration line.

The toy (``tests/toys/toy_policy.py``) then trains, places from its checkpoint, and is offered by ``workbench compare``,
the dashboard's Compare page and sweeps, with nothing else touched.
"""

from __future__ import annotations

import csv
import json

import pytest

import workbench as wb
from workbench.cli import main
from workbench.learn.registry import POLICIES, register_policy
from workbench.placers.registry import REGISTRY, methods


@pytest.fixture
def toy():
    register_policy("toy", "tests.toys.toy_policy", "ToyPolicy", "a toy: one learned score per device")  # the recipe's one line
    yield "toy"
    REGISTRY.pop("toy")
    POLICIES.pop("toy")


def test_a_policy_added_by_one_module_and_one_line_trains_places_and_is_offered_everywhere(toy, tmp_path, capsys, monkeypatch):
    from workbench.dashboard.context import DashboardContext
    from workbench.dashboard.sources import method_choices, parse_method
    from workbench.runs import RunPaths

    assert toy in methods("learned") and toy in wb.placers.placers()
    runs = tmp_path / "runs"
    run = runs / "nested" / toy  # two levels deep: offered all the same
    assert main(["train", "chain_mm", "--devices", "2", "--method", toy, "--stages", "il", "--episodes", "3", "--out", str(run)]) == 0
    checkpoint = RunPaths(run).stage_checkpoint("il")
    assert checkpoint.is_file()

    placement = wb.place(wb.bundled_graph("chain_mm"), toy, 2, checkpoint=str(checkpoint))
    assert placement.method == toy and placement.makespan >= placement.lower_bound
    capsys.readouterr()

    monkeypatch.setattr("workbench.runs.pretrained_checkpoint", lambda graph, method, *root: checkpoint)  # as if shipped for the graph
    assert main(["compare", "chain_mm", "--devices", "2", "--methods", f"heft,{toy}", "--json"]) == 0
    rows = {row["method"]: row for row in json.loads(capsys.readouterr().out)["rows"]}
    assert rows[toy]["makespan"] == placement.makespan

    context = DashboardContext.create(runs_dir=runs, scratch_dir=tmp_path)
    offered = [o["value"] for o in method_choices(context, "chain_mm_112nodes") if o["value"].startswith(f"{toy}@runs:")]
    assert offered, "the dashboard's Compare page offers the toy's run checkpoints"
    assert parse_method(context, offered[0])[0] == toy
    from workbench.dashboard.pages import compare

    children, state = compare.compare_view(context, "bundled:doppler-paper/chain_mm_112nodes.txt", 2, [offered[0]], 0, 100, 1)
    assert state is not None and state["methods"] == [offered[0]] and "failed" not in str(children), str(children)[-2000:]
    assert "'gantt/0'" in str(children), "the Compare page places it (in a child of its fork server) and draws its timeline"

    sweep = tmp_path / "toy.yaml"
    out = tmp_path / "toy.csv"
    entry = f"{{method: {toy}, options: {{checkpoint: {checkpoint}}}}}"
    sweep.write_text(f"name: toy\ngraphs: [chain_mm]\ndevices: [2]\nmethods:\n  - {entry}\nseeds: 1\nout: {out}\n", encoding="utf-8")
    assert main(["sweep", str(sweep), "--engine", "local", "--workers", "1", "--no-progress"]) == 0  # in a spawned worker
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert [row["method"] for row in rows] == [toy] and float(rows[0]["makespan"]) == placement.makespan
