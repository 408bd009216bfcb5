"""Every crafted checkpoint is refused on every route that loads one, within 1 s of CPU and 500 MB, and builds nothing.

The crafted files are the case tables of ``tests/test_checkpoint_header.py`` (config fields, header, weights,
``trained_for``, move-scorer) plus damaged files (a pickle payload, flipped or truncated bytes, a lying length, an
edited header, a header or a file over its size cap), each applied to the file a route expects. The routes:
``place --option checkpoint=FILE``, ``place --option start_policy=FILE`` (learned_search's start), ``train
--init-checkpoint``, a gated policy placed by ``doppler_plc_only``, the gate trainer's ``start_from``, resuming a run
whose ``last`` checkpoint is crafted, the dashboard's placement loader, and ``place --method learned_search --option
checkpoint=FILE`` for a move scorer.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import safetensors.torch
import torch

os.environ.setdefault("DGLBACKEND", "pytorch")

import workbench as wb
from workbench.cli import main
from workbench.learn import CheckpointError
from workbench.learn.checkpoint import MAX_CHECKPOINT_BYTES, MAX_HEADER_BYTES, read_checkpoint, write_checkpoint
from workbench.placers.registry import PlacerError
from workbench.training import TrainConfig, train
from workbench.training.gate_training import GateTrainConfig, gated_policy

from .test_checkpoint_header import (
    CHAIN,
    CONFIG_CASES,
    HEADER_CASES,
    ROUTES,
    SCORER_CASES,
    SCORER_WEIGHT_CASES,
    TRAINED_FOR_CASES,
    WEIGHT_CASES,
    forge,
    parts,
    with_config,
    with_weight,
    write_policy,
    write_scorer,
)
from .test_checkpoints import _CreatesMarker
from .test_training import Crash, crash_at

ROOT = Path(__file__).resolve().parents[1]
Craft = Callable[[Path, Path], Path]
"""Writes a crafted checkpoint at the second path from the honest file at the first; returns it."""


# ------------------------------------------------------------------------------------------ damaged files
def rewritten(change: Callable[[bytes], bytes]) -> Craft:
    def craft(source: Path, target: Path) -> Path:
        target.write_bytes(change(source.read_bytes()))
        return target

    return craft


def header_end(data: bytes) -> int:
    return 8 + int.from_bytes(data[:8], "little")


def pickle_payload(source: Path, target: Path) -> Path:
    """A torch.save pickle that would create a file next to ``target`` if it were ever unpickled."""
    torch.save({"format": "workbench-policy", "payload": _CreatesMarker(str(target.with_suffix(".pwned")))}, target)
    return target


def edited_without_digest(source: Path, target: Path) -> Path:
    """``source`` with another ``versions`` field but its old SHA-256 (an edit by hand)."""
    document, tensors = parts(source)
    document["versions"] = {"workbench": "forged"}
    target.write_bytes(safetensors.torch.save(tensors, metadata={"workbench": json.dumps(document)}))
    return target


def foreign_safetensors(source: Path, target: Path) -> Path:
    target.write_bytes(safetensors.torch.save({"w": torch.zeros(3)}))
    return target


def huge_header(source: Path, target: Path) -> Path:
    """``source`` with 9 MiB of padding in its header: refused from the header's length, before it is read."""
    document, tensors = parts(source)
    metadata = {"workbench": json.dumps(document), "padding": "x" * (MAX_HEADER_BYTES + 2**20)}
    target.write_bytes(safetensors.torch.save(tensors, metadata=metadata))
    return target


def header_of_empty_objects(source: Path, target: Path) -> Path:
    """A header just under :data:`MAX_HEADER_BYTES` of empty JSON objects, the costliest header to parse that is read."""
    header = json.dumps({"__metadata__": {"workbench": "[" + "{}," * ((MAX_HEADER_BYTES - 64) // 3) + "{}]"}}).encode()
    target.write_bytes(len(header).to_bytes(8, "little") + header)
    return target


def oversized(source: Path, target: Path) -> Path:
    """The honest file made sparse beyond the size cap (no disk used): refused before a byte is read."""
    shutil.copy(source, target)
    with open(target, "r+b") as handle:
        handle.truncate(MAX_CHECKPOINT_BYTES + 1)
    return target


FILE_CASES: dict[str, tuple[Craft, str]] = {
    "pickle_payload": (pickle_payload, "pickle checkpoint"),
    "flipped_weight_bytes": (rewritten(lambda d: d[:-64] + bytes(b ^ 0x5A for b in d[-64:])), "SHA-256"),
    "edited_header": (edited_without_digest, "SHA-256"),
    "length_lies": (rewritten(lambda d: (len(d) * 2).to_bytes(8, "little") + d[8:]), "header claims"),
    "truncated": (rewritten(lambda d: d[: header_end(d) + 10]), "truncated or corrupt"),
    "header_not_json": (rewritten(lambda d: (6).to_bytes(8, "little") + b"{nope}" + d[header_end(d) :]), "truncated or corrupt"),
    "empty": (rewritten(lambda d: b""), "no safetensors header"),
    "foreign_safetensors": (foreign_safetensors, "not a workbench policy checkpoint"),
    "over_the_size_cap": (oversized, "-byte limit"),
    "header_over_the_cap": (huge_header, "more than the 8,388,608 allowed (MAX_HEADER_BYTES)"),
}


def test_a_checkpoint_whose_header_would_pass_the_cap_is_not_written(tmp_path, honest):
    document, tensors = parts(honest["policy"])
    weights = {k.removeprefix("weights/"): v for k, v in tensors.items() if k.startswith("weights/")}
    header = {k: document[k] for k in ("method", "config", "feature_layout", "versions")}
    with pytest.raises(ValueError, match="more than the 8,388,608 bytes a checkpoint may hold"):
        write_checkpoint(tmp_path / "big.safetensors", weights, header, extra={"notes": "x" * MAX_HEADER_BYTES})
    assert not list(tmp_path.iterdir())
    write_checkpoint(tmp_path / "small.safetensors", weights, header, extra={"notes": "x" * (MAX_HEADER_BYTES // 2)})
    assert read_checkpoint(tmp_path / "small.safetensors").extra["notes"] == "x" * (MAX_HEADER_BYTES // 2)


# ---------------------------------------------------------------------------------------- the crafted set
def _config(changes: dict[str, Any]) -> Craft:
    return lambda source, target: with_config(source, target, **changes)


def _document(document: dict[str, Any]) -> Craft:
    return lambda source, target: forge(source, target, document)


def _weight(change: Callable[[torch.Tensor], torch.Tensor | None]) -> Craft:
    return lambda source, target: with_weight(source, target, change)


POLICY_CASES: dict[str, tuple[Craft, str]] = {
    **{f"config-{k}": (_config(changes), message) for k, (changes, message) in CONFIG_CASES.items()},
    **{f"header-{k}": (_document(document), message) for k, (document, message) in HEADER_CASES.items()},
    **{f"weight-{k}": (_weight(change), message) for k, (change, message) in WEIGHT_CASES.items()},
    **{f"trained_for-{k}": (_document({"trained_for": record}), message) for k, (record, message) in TRAINED_FOR_CASES.items()},
    **{f"file-{k}": case for k, case in FILE_CASES.items()},
}
MOVE_SCORER_CASES: dict[str, tuple[Craft, str]] = {
    **{f"scorer-{k}": (_document(document), message) for k, (document, message) in SCORER_CASES.items()},
    **{f"scorer-weight-{k}": (_weight(change), message) for k, (change, message) in SCORER_WEIGHT_CASES.items()},
    **{f"scorer-file-{k}": case for k, case in FILE_CASES.items()},
}


def test_at_least_60_crafted_checkpoints_are_tried_on_every_route():
    assert len(POLICY_CASES) + len(MOVE_SCORER_CASES) >= 60
    assert len(POLICY_CASES) == len(CONFIG_CASES) + len(HEADER_CASES) + len(WEIGHT_CASES) + len(TRAINED_FOR_CASES) + len(FILE_CASES)
    assert set(POLICY_ROUTES) == {"place", "start_policy", "init_checkpoint", "gate", "gate_start_from", "resume", "dashboard"}


# ------------------------------------------------------------------------------------------ honest files
GATE_RULES = ("bottom_level/affinity", "earliest_start/earliest_start")


@pytest.fixture(scope="module")
def honest(tmp_path_factory) -> dict[str, Path]:
    """The file each route expects: a small doppler policy, a gated one (as the shipped zero-shot policy is), a scorer."""
    folder = tmp_path_factory.mktemp("honest")
    return {
        "policy": write_policy(folder / "doppler.safetensors"),
        "gate": write_policy(folder / "gate.safetensors", "doppler_plc_only", gate_rules=GATE_RULES, place_rule_weight=50.0),
        "scorer": write_scorer(folder / "scorer.safetensors"),
    }


RUN_CONFIG = TrainConfig(graphs=("chain_mm",), stages=("il",), episodes=(3,), checkpoint_every=1, search_samples=0, device="cpu")


@pytest.fixture(scope="module")
def interrupted_run(tmp_path_factory) -> Path:
    """A run of the default doppler policy stopped in its second episode, its ``last`` checkpoint after the first."""
    out = tmp_path_factory.mktemp("resume") / "run"
    with pytest.raises(Crash):
        train(RUN_CONFIG, out, progress=False, callback=crash_at(1))
    return out


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory):
    from workbench.dashboard.context import DashboardContext

    scratch = tmp_path_factory.mktemp("dashboard")
    (scratch / "runs" / "crafted").mkdir(parents=True)
    context = DashboardContext.create(runs_dir=scratch / "runs", scratch_dir=scratch)
    yield context
    context.close()


# -------------------------------------------------------------------------------------------------- routes
def refused(call: Callable[[], Any], message: str) -> None:
    with pytest.raises((CheckpointError, PlacerError, ValueError)) as info:
        call()
    assert message in " ".join(str(info.value).split()), str(info.value)


def command(route: str) -> Callable[..., None]:
    """A command-line route of ``test_checkpoint_header.ROUTES``: exit 2, one line naming the reason, nothing written."""

    def run(craft: Craft, message: str, honest: dict[str, Path], tmp_path: Path, capsys: Any, **_: Any) -> None:
        path = craft(honest["policy"], tmp_path / "crafted.safetensors")
        assert main(ROUTES[route](path, tmp_path)) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert message in err, err
        assert not (tmp_path / "run").exists()

    return run


def gate(craft: Craft, message: str, honest: dict[str, Path], tmp_path: Path, **_: Any) -> None:
    path = craft(honest["gate"], tmp_path / "crafted.safetensors")
    refused(lambda: wb.place(CHAIN, "doppler_plc_only", devices=4, checkpoint=path), message)


def gate_start_from(craft: Craft, message: str, honest: dict[str, Path], tmp_path: Path, **_: Any) -> None:
    path = craft(honest["policy"], tmp_path / "crafted.safetensors")
    refused(lambda: gated_policy(GateTrainConfig(start_from=str(path))), message)


def resume(craft: Craft, message: str, tmp_path: Path, run: Path, **_: Any) -> None:
    """The run's ``last`` checkpoint replaced by the crafted one: the resume is refused and changes no byte of the run."""
    out = tmp_path / "resumed"
    shutil.copytree(run, out)
    craft(run / "checkpoints" / "last.safetensors", out / "checkpoints" / "last.safetensors")
    before = snapshot(out)
    refused(lambda: train(RUN_CONFIG, out, progress=False), message)
    assert snapshot(out) == before


def dashboard_loader(craft: Craft, message: str, honest: dict[str, Path], tmp_path: Path, context: Any, **_: Any) -> None:
    from workbench.dashboard import sources

    path = craft(honest["policy"], context.runs_dir / "crafted" / f"{tmp_path.name}.safetensors")
    value = f"doppler@runs:crafted/{path.name}"
    refused(lambda: sources.run_placement(context, "bundled:doppler-paper/chain_mm_112nodes.txt", value, 4), message)


POLICY_ROUTES: dict[str, Callable[..., None]] = {
    "place": command("place"),
    "start_policy": command("start_policy"),
    "init_checkpoint": command("init_checkpoint"),
    "gate": gate,
    "gate_start_from": gate_start_from,
    "resume": resume,
    "dashboard": dashboard_loader,
}
SCORER_ROUTE = ["place", "chain_mm", "--method", "learned_search", "--devices", "4", "--budget", "20", "--option"]


@pytest.mark.parametrize("route", sorted(POLICY_ROUTES))
@pytest.mark.parametrize("case", sorted(POLICY_CASES))
def test_a_crafted_policy_is_refused_on_every_route(tmp_path, capsys, honest, interrupted_run, dashboard, case, route):
    craft, message = POLICY_CASES[case]
    POLICY_ROUTES[route](craft, message, honest=honest, tmp_path=tmp_path, capsys=capsys, run=interrupted_run, context=dashboard)
    assert not list(tmp_path.rglob("*.pwned")) and not list(dashboard.runs_dir.rglob("*.pwned")), "the pickle payload ran"


@pytest.mark.parametrize("case", sorted(MOVE_SCORER_CASES))
def test_a_crafted_move_scorer_is_refused_by_learned_search(tmp_path, capsys, honest, case):
    craft, message = MOVE_SCORER_CASES[case]
    path = craft(honest["scorer"], tmp_path / "crafted.safetensors")
    assert main([*SCORER_ROUTE, f"checkpoint={path}"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err and message in err, err
    assert not path.with_suffix(".pwned").exists()


# ------------------------------------------------------------------------------------------ what it costs
MEASURE = """
import json, sys, time
import torch
from dgl.nn.pytorch import NNConv
import workbench as wb
from workbench.learn import CheckpointError, load_policy
from workbench.learn.learned_search import load_scorer

def kib(field):
    return int(next(line.split()[1] for line in open("/proc/self/status") if line.startswith(field + ":")))

built = []
register = torch.nn.Module.register_parameter
def counted(self, name, param):
    # A weight allocated for real is a module built. DGL's NNConv makes its bias with th.Tensor, which the meta device
    # (where the weights' shapes are worked out) does not reach: that one is not counted.
    if param is not None and param.device.type != "meta" and not (isinstance(self, NNConv) and name == "bias"):
        built.append(name)
    return register(self, name, param)
torch.nn.Module.register_parameter = counted

chain = wb.bundled_graph("chain_mm")
cases = json.loads(sys.stdin.read())
load_policy(cases["honest"], graph=chain, devices=4)  # imports and first-call costs before measuring
load_scorer(cases["honest_scorer"])
for kind, name, path in cases["crafted"]:
    built.clear()
    rss = kib("VmRSS")
    open("/proc/self/clear_refs", "w").write("5")  # peak RSS from here
    began = time.process_time()
    try:
        load_policy(path, graph=chain, devices=4) if kind == "policy" else load_scorer(path)
        outcome = "loaded"
    except CheckpointError as error:
        outcome = str(error)
    print(json.dumps({"name": name, "outcome": outcome, "cpu_s": time.process_time() - began,
                      "peak_mib": (kib("VmHWM") - rss) / 1024, "built": len(built)}))
"""


def padded_width_6000(source: Path, target: Path) -> Path:
    """The probe's case: ``width=6000`` in a large file with a valid SHA-256 (here 128 MiB of padding)."""
    document, tensors = parts(source)
    padding = {**tensors, "extra/padding": torch.zeros(32 * 2**20)}
    return forge(source, target, {"config": {**document["config"], "width": 6000}}, padding)


COSTLY: dict[str, tuple[Craft, str]] = {
    "width_6000_in_a_128_mib_file": (padded_width_6000, CONFIG_CASES["width_6000"][1]),
    "header_of_empty_objects": (header_of_empty_objects, "no format marker"),
}
"""Files too slow to make and read on every route: the largest file refused by its config, the costliest header read."""


def test_no_crafted_checkpoint_costs_1_s_of_cpu_or_500_mb_or_builds_a_module_before_it_is_refused(tmp_path, honest):
    """In a child process, each crafted file loaded as ``place`` and ``learned_search`` load them: its CPU time and its
    peak resident memory above what the process held before (``/proc/self/clear_refs`` resets the peak per file)."""
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("needs Linux /proc")
    every = (("policy", POLICY_CASES), ("scorer", MOVE_SCORER_CASES), ("policy", COSTLY))
    crafted = [
        (kind, name, str(craft(honest[kind], tmp_path / f"{name}.safetensors")))
        for kind, cases in every
        for name, (craft, _) in cases.items()
    ]
    messages = {name: message for _, cases in every for name, (_, message) in cases.items()}
    stdin = json.dumps({"honest": str(honest["policy"]), "honest_scorer": str(honest["scorer"]), "crafted": crafted})
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DGLBACKEND": "pytorch", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", MEASURE], input=stdin, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [row["name"] for row in rows] == [name for _, name, _ in crafted]
    for row in rows:
        assert messages[row["name"]] in row["outcome"], row
        assert row["built"] == 0, row
        assert row["cpu_s"] < 1.0, row
        assert row["peak_mib"] < 500, row
