"""The figures datasets/pretrained/README.md quotes are what the shipped files give: export.json's and the CLI's makespans."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import workbench as wb
from workbench.cli import main

PRETRAINED = Path(__file__).resolve().parents[1] / "datasets" / "pretrained"
ROW = re.compile(r"^\| (\w+) \| ([\d,]+) \| ([\d,]+) \|$", re.MULTILINE)


def test_the_readmes_greedy_makespans_are_export_jsons_and_the_clis(capsys):
    pytest.importorskip("torch")
    rows = ROW.findall((PRETRAINED / "README.md").read_text())
    assert {name for name, _, _ in rows} == set(wb.PAPER_GRAPHS)  # one row per shipped graph policy
    for name, exported, now in rows:
        export = json.loads((PRETRAINED / name / "export.json").read_text())
        shipped = Path(export["exported_from"]).name.split(".")[0]
        assert export["greedy_by_stage"][shipped][name] == int(exported.replace(",", "")), name
        capsys.readouterr()
        assert main(["place", name, "--method", "doppler", "--devices", "4", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["makespan"] == int(now.replace(",", "")), name
