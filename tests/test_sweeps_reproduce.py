"""`workbench reproduce --quick` on a tiny setting: every row present, learned rows found or explained."""

from __future__ import annotations

import json

import numpy as np
import pytest

from workbench.cli import main
from workbench.datasets import DATASETS_DIR
from workbench.placers.base import REGISTRY, Decision, Placer
from workbench.placers.registry import PlacerEntry
from workbench.sweeps.reproduce import ROWS, SECTION, find_checkpoint, write_section


class FakeLearnedPlacer(Placer):
    """Stands in for a learned placer: needs an existing checkpoint file, places round-robin."""

    def __init__(self, checkpoint=None, samples=1):
        if checkpoint is None or not open(checkpoint, "rb").read():
            raise FileNotFoundError("no checkpoint")
        self.samples = samples

    def place(self, graph, devices, seed=0):
        return Decision(np.arange(graph.num_nodes, dtype=np.int64) % devices)


@pytest.fixture
def fake_doppler(tmp_path, monkeypatch):
    monkeypatch.setitem(REGISTRY, "doppler", PlacerEntry(__name__, "FakeLearnedPlacer", "fake", "learned"))
    run = tmp_path / "runs" / "r1"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "sim.safetensors").write_bytes(b"weights")
    (run / "meta.json").write_text(json.dumps({"method": "doppler", "graphs": ["chain_mm_112nodes"], "status": "finished", "updated": "x"}))
    return tmp_path / "runs"


def test_find_checkpoint_reads_run_directories(fake_doppler):
    assert find_checkpoint("doppler", "chain_mm_112nodes", "sim", fake_doppler) == fake_doppler / "r1" / "checkpoints" / "sim.safetensors"
    assert find_checkpoint("doppler", "chain_mm_112nodes", "il", fake_doppler) is None
    # no run trained ffnn: the shipped pretrained checkpoint stands in for Stage I+II
    assert (
        find_checkpoint("doppler", "ffnn_192nodes", "sim", fake_doppler)
        == DATASETS_DIR / "pretrained" / "ffnn_192nodes" / "doppler.safetensors"
    )
    assert find_checkpoint("gdp", "chain_mm_112nodes", "sim", fake_doppler) is None
    # the weights training selected (greedy_every) win over the stage's final weights
    (fake_doppler / "r1" / "checkpoints" / "sim-best.safetensors").write_bytes(b"weights")
    assert (
        find_checkpoint("doppler", "chain_mm_112nodes", "sim", fake_doppler) == fake_doppler / "r1" / "checkpoints" / "sim-best.safetensors"
    )


def test_quick_reproduce_writes_every_row(fake_doppler, tmp_path, capsys):
    out = tmp_path / "docs" / "results.md"
    out.parent.mkdir()
    out.write_text("# Results\n\n## Other area\n\nkept\n")
    code = main(
        ["reproduce", "--quick", "--graphs", "chain_mm", "--seeds", "1", "--out", str(out), "--runs", str(fake_doppler), "--no-progress"]
    )
    assert code == 0
    text = out.read_text()
    assert "## Other area\n\nkept" in text, "other sections are left alone"
    section = text[text.index(SECTION) :]
    table = [line for line in section.splitlines() if line.startswith("| ")]
    for row in ROWS:
        assert any(line.startswith(f"| {row.label} |") for line in table), row.label

    def line(label: str) -> str:
        return next(x for x in table if x.startswith(f"| {label} |"))

    assert "not available: no Stage I checkpoint" in line("doppler (Stage I)")
    assert "not available" not in line("doppler (Stage I+II)") and "±" in line("doppler (Stage I+II)")
    assert "±" in line("critical_path") and "+0.0%" in line("critical_path")
    assert "+46.8%" in section, "the paper's Doppler-SIM improvement on ChainMM is shown"
    assert "workbench reproduce --quick" in section
    assert f"{fake_doppler / 'r1' / 'checkpoints' / 'sim.safetensors'}" in section, "the checkpoint used is named"
    raw = out.parent / "results" / "paper_comparison_quick.csv"
    assert raw.exists()
    # rerunning is idempotent: one section, finished cells skipped
    assert (
        main(
            [
                "reproduce",
                "--quick",
                "--graphs",
                "chain_mm",
                "--seeds",
                "1",
                "--out",
                str(out),
                "--runs",
                str(fake_doppler),
                "--no-progress",
            ]
        )
        == 0
    )
    assert out.read_text().count(SECTION) == 1


def test_write_section_replaces_only_its_own_section(tmp_path):
    path = tmp_path / "r.md"
    path.write_text(f"# R\n\n## A\n\na\n\n{SECTION}\n\nold\n\n## B\n\nb\n")
    write_section(path, "new")
    assert path.read_text() == f"# R\n\n## A\n\na\n\n{SECTION}\n\nnew\n\n## B\n\nb\n"


def test_find_checkpoint_takes_a_shipped_policy_only_for_its_last_stage(tmp_path, monkeypatch):
    import workbench.sweeps.reproduce as reproduce

    shipped = tmp_path / "pretrained" / "ffnn_192nodes"
    shipped.mkdir(parents=True)
    (shipped / "doppler.safetensors").write_bytes(b"w")
    monkeypatch.setattr(reproduce, "DATASETS_DIR", tmp_path)
    assert find_checkpoint("doppler", "ffnn_192nodes", "sim", tmp_path / "no-runs") == shipped / "doppler.safetensors"
    assert find_checkpoint("doppler", "ffnn_192nodes", "il", tmp_path / "no-runs") is None
    (shipped / "meta.json").write_text(json.dumps({"method": "doppler", "stages": ["il"]}))
    assert find_checkpoint("doppler", "ffnn_192nodes", "il", tmp_path / "no-runs") == shipped / "doppler.safetensors"
    assert find_checkpoint("doppler", "ffnn_192nodes", "sim", tmp_path / "no-runs") is None


def test_write_section_keeps_a_hand_written_notes_subsection(tmp_path):
    path = tmp_path / "r.md"
    path.write_text(f"# R\n\n{SECTION}\n\nold table\n\n### Notes\n\nmy reading\n\n## B\n\nb\n")
    write_section(path, "new table")
    assert path.read_text() == f"# R\n\n{SECTION}\n\nnew table\n\n### Notes\n\nmy reading\n\n## B\n\nb\n"


def test_reproduce_writes_outside_the_repository_unless_asked(tmp_path, monkeypatch, capsys):
    """Its default report is under runs/ (ignored by git), never the tracked docs/results.md; it says where it wrote."""
    import subprocess
    from pathlib import Path

    import workbench.sweeps.reproduce as module

    asked = []

    def fake(**kwargs):
        asked.append(Path(kwargs["out"]))
        return {"files": [str(kwargs["out"])], "summary": None, "unavailable": {}}

    monkeypatch.setattr(module, "reproduce", fake)
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", "--quick", "--no-progress"]) == 0
    assert asked == [module.DEFAULT_OUT] == [Path("runs/reproduce/results.md")]
    assert capsys.readouterr().out == "wrote runs/reproduce/results.md\n"
    root = Path(module.__file__).resolve().parents[2]
    if (root / ".git").exists():
        ignored = subprocess.run(["git", "check-ignore", "-q", str(module.DEFAULT_OUT)], cwd=root)
        assert ignored.returncode == 0, "the default report must not be a tracked (or trackable) file"
    assert main(["reproduce", "--quick", "--out", "docs/results.md"]) == 0 and asked[-1] == Path("docs/results.md")
