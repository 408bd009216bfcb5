"""Checkpoints that cannot run code, fit only what they were trained for, and training that never loses or hides a stage.

Security: a pickle payload, a TorchScript payload and corrupted safetensors
files are refused without running anything (each payload is first shown to
be live). Fit: a policy trained for one graph and device count is refused
elsewhere unless cross-graph. Faults: a real kill -9 at a checkpoint write,
then resume: every stage checkpoint exists and the metrics equal the
uninterrupted run's; a NaN loss ends the run ``diverged``. A simulated kill
before every write of a run and the damaged run directories are
``tests/test_run_faults.py``'s.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

os.environ.setdefault("DGLBACKEND", "pytorch")

import workbench as wb
from tests.test_training import SMALL, TINY, Crash, crash_at, tiny_config, tiny_load_policy, without_time
from workbench.learn import FEATURE_LAYOUT, CheckpointError, TrainedFor, load_policy, make_policy
from workbench.learn.checkpoint import read_checkpoint, write_checkpoint
from workbench.runs import read_meta, read_rows
from workbench.training import train
from workbench.training.checkpoint import read_training_state
from workbench.training.resume import ResumeError

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "DGLBACKEND": "pytorch"}


def run_python(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=timeout)


@pytest.fixture(scope="module")
def doppler():
    torch.manual_seed(0)
    return make_policy("doppler")


# --- payloads ---------------------------------------------------------------------------------------------------
class _CreatesMarker:
    """Unpickling this creates the marker file (what a malicious checkpoint would do instead)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_pickle_payload_is_refused_without_running(tmp_path, doppler):
    payload, marker = tmp_path / "evil.pt", tmp_path / "pwned"
    torch.save({"format": "workbench-policy", "format_version": 1, "payload": _CreatesMarker(str(marker))}, payload)
    torch.load(payload, weights_only=False)  # the payload is live: plain unpickling runs it
    assert marker.exists()
    marker.unlink()
    shutil.copy(payload, tmp_path / "evil.safetensors")
    for name in ("evil.pt", "evil.safetensors"):  # the name does not matter, the content decides
        with pytest.raises(CheckpointError, match=r"pickle checkpoint .* --trust-pickle-checkpoint"):
            load_policy(tmp_path / name)
    with pytest.raises(CheckpointError, match="more than tensors and plain data"):  # even when the user trusts it
        load_policy(payload, allow_unsafe_pickle=True)
    with pytest.raises(CheckpointError, match="pickle checkpoint"):
        wb.place(wb.bundled_graph("chain_mm"), "doppler", devices=4, checkpoint=payload)
    with pytest.raises(CheckpointError, match="pickle checkpoint"):
        train(tiny_config(init_checkpoint=str(payload)), tmp_path / "run", progress=False)
    assert not marker.exists()


TORCHSCRIPT_PAYLOAD = """
    import torch
    from typing import Tuple

    class Payload(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.x = 1

        def forward(self) -> int:
            return self.x

        @torch.jit.export
        def __getstate__(self) -> Tuple[int, bool]:
            return (self.x, self.training)

        @torch.jit.export
        def __setstate__(self, state: Tuple[int, bool]) -> None:
            print("PAYLOAD-RAN")
            self.x = state[0]
            self.training = state[1]

    torch.jit.save(torch.jit.script(Payload()), {path!r})
    torch.load({path!r}, weights_only=True)  # torch 2.2.1 hands TorchScript to torch.jit.load, which runs __setstate__
"""


def test_a_torchscript_payload_is_refused_without_running(tmp_path):
    path, script = tmp_path / "scripted.pt", tmp_path / "make_payload.py"
    script.write_text(textwrap.dedent(TORCHSCRIPT_PAYLOAD.format(path=str(path))))  # TorchScript compiles from a source file
    made = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=ENV, timeout=120)
    assert made.returncode == 0, made.stderr
    assert "PAYLOAD-RAN" in made.stdout, "the payload is live under torch.load(weights_only=True)"
    shutil.copy(path, tmp_path / "scripted.safetensors")
    refused = run_python(f"""
        import workbench as wb
        from workbench.learn import CheckpointError, load_policy
        from workbench.learn.migrate import main
        for call in (lambda: load_policy({str(path)!r}), lambda: load_policy({str(path)!r}, allow_unsafe_pickle=True),
                     lambda: load_policy({str(tmp_path / "scripted.safetensors")!r}, allow_unsafe_pickle=True),
                     lambda: wb.place(wb.bundled_graph("chain_mm"), "doppler", devices=4, checkpoint={str(path)!r})):
            try:
                call()
            except CheckpointError as error:
                print("REFUSED:", error)
        print("MIGRATE EXIT", main([{str(path)!r}, "--trust-pickle-checkpoint", "--out", {str(tmp_path / "out.safetensors")!r}]))
    """)
    assert refused.returncode == 0, refused.stderr
    assert "PAYLOAD-RAN" not in refused.stdout
    lines = [line for line in refused.stdout.splitlines() if line.startswith("REFUSED:")]
    assert len(lines) == 4 and "pickle checkpoint" in lines[0] and all("TorchScript archive" in line for line in lines[1:3])
    assert "MIGRATE EXIT 2" in refused.stdout and "TorchScript archive" in refused.stderr
    assert not (tmp_path / "out.safetensors").exists()


def test_corrupted_safetensors_files_are_refused(tmp_path, doppler):
    good = tmp_path / "good.safetensors"
    doppler.save(good)
    data = good.read_bytes()
    header_end = 8 + int.from_bytes(data[:8], "little")
    cases = {
        "weights": data[:-100] + bytes(b ^ 0xFF for b in data[-100:]),  # flipped bytes in the tensor data
        "header": data.replace(b'\\"negative_slope\\": 0.1', b'\\"negative_slope\\": 0.2'),  # an edited header (valid JSON, a valid config)
        "length": (len(data) * 2).to_bytes(8, "little") + data[8:],
        "truncated": data[: header_end + 10],
        "empty": b"",
    }
    expected = {
        "weights": "SHA-256",
        "header": "SHA-256",
        "length": "header claims",
        "truncated": "corrupt",
        "empty": "no safetensors header",
    }
    assert cases["header"] != data
    for name, content in cases.items():
        (tmp_path / f"{name}.safetensors").write_bytes(content)
        with pytest.raises(CheckpointError, match=expected[name]):
            load_policy(tmp_path / f"{name}.safetensors")
    assert load_policy(good).config == doppler.config


def test_loading_reads_no_pickle(tmp_path, doppler, monkeypatch):
    doppler.save(tmp_path / "p.safetensors")

    def forbidden(*args, **kwargs):
        raise AssertionError("a checkpoint load reached pickle")

    import pickle

    monkeypatch.setattr(torch, "load", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "Unpickler", forbidden)
    assert load_policy(tmp_path / "p.safetensors").config == doppler.config


def test_an_old_checkpoint_is_converted_once_with_the_trust_flag(tmp_path, doppler, capsys):
    from workbench.learn.migrate import main
    from workbench.provenance import versions

    old = tmp_path / "old.pt"  # the format before safetensors: a torch.save dict
    payload = {
        "format": "workbench-policy",
        "format_version": 1,
        "method": "doppler",
        "config": dataclasses.asdict(doppler.config),
        "feature_layout": FEATURE_LAYOUT,
        "versions": versions(),
        "state_dict": doppler.state_dict(),
        "extra": {"episode": 7},
    }
    torch.save(payload, old)
    with pytest.raises(SystemExit):
        main([str(old)])
    assert "--trust-pickle-checkpoint" in capsys.readouterr().err and not old.with_suffix(".safetensors").exists()
    assert main([str(old), "--trust-pickle-checkpoint", "--graph", "chain_mm", "--devices", "4"]) == 0
    migrated = load_policy(old.with_suffix(".safetensors"), graph=wb.bundled_graph("chain_mm"), devices=4)
    assert migrated.checkpoint_extra == {"episode": 7} and migrated.trained_for.devices == 4
    assert all(torch.equal(a, b) for a, b in zip(migrated.state_dict().values(), doppler.state_dict().values(), strict=True))
    with pytest.raises(CheckpointError, match="pickle checkpoint"):
        load_policy(old)


def test_a_run_in_the_old_format_is_refused_not_restarted(tmp_path, crashed_run):
    out = tmp_path / "run"
    shutil.copytree(crashed_run, out)
    for path in (out / "checkpoints").glob("*.safetensors"):
        path.rename(path.with_suffix(".pt"))
    before = (out / "metrics.csv").read_bytes()
    with pytest.raises(ResumeError, match=r"older workbench .* cannot be resumed"):
        train(tiny_config(), out, library=TINY, progress=False)
    assert (out / "metrics.csv").read_bytes() == before


# --- what a policy fits -----------------------------------------------------------------------------------------
def test_a_policy_is_refused_for_a_graph_or_device_count_it_was_not_trained_for(tmp_path, doppler):
    chain, ffnn = wb.bundled_graph("chain_mm"), wb.bundled_graph("ffnn")
    doppler.trained_for = TrainedFor.of([chain], 4)
    try:
        doppler.save(tmp_path / "chain.safetensors")
        doppler.trained_for = TrainedFor.of([chain, ffnn], 4)
        doppler.save(tmp_path / "both.safetensors")
    finally:
        doppler.trained_for = None
    assert wb.place(chain, "doppler", devices=4, checkpoint=tmp_path / "chain.safetensors").makespan > 0
    with pytest.raises(
        CheckpointError,
        match=r"trained for graph 'chain_mm_112nodes' \(76 ops.*with 4 devices, not for graph 'ffnn_192nodes'.* with 4 devices",
    ):
        wb.place(ffnn, "doppler", devices=4, checkpoint=tmp_path / "chain.safetensors")
    with pytest.raises(CheckpointError, match=r"with 4 devices, not for graph 'chain_mm_112nodes'.* with 2 devices"):
        wb.place(chain, "doppler", devices=2, checkpoint=tmp_path / "chain.safetensors")
    # the same structure under another name is the same graph; a cross-graph policy places any graph on any count
    wb.place(chain.with_metadata(name="renamed"), "doppler", devices=4, checkpoint=tmp_path / "chain.safetensors")
    assert read_checkpoint(tmp_path / "both.safetensors").trained_for.cross_graph
    wb.place(wb.load_graph(SMALL), "doppler", devices=3, checkpoint=tmp_path / "both.safetensors")


def test_the_shipped_policies_know_their_graph():
    ffnn = wb.bundled_graph("ffnn")
    trained = read_checkpoint(ROOT / "datasets" / "pretrained" / ffnn.name / "doppler.safetensors").trained_for
    assert trained.devices == 4 and [g.name for g in trained.graphs] == [ffnn.name] and not trained.cross_graph
    with pytest.raises(CheckpointError, match="with 4 devices, not for graph 'ffnn_192nodes'.* with 2 devices"):
        wb.place(ffnn, "doppler", devices=2)


def test_non_finite_weights_are_refused(tmp_path, doppler):
    weights = {k: v.clone() for k, v in doppler.state_dict().items()}
    name = next(k for k, v in weights.items() if v.is_floating_point())
    weights[name].view(-1)[0] = float("nan")
    header = read_checkpoint_header(tmp_path, doppler)
    write_checkpoint(tmp_path / "nan.safetensors", weights, header)
    with pytest.raises(CheckpointError, match=f"NaN or infinite values in weights/{name}"):
        load_policy(tmp_path / "nan.safetensors")
    with pytest.raises(CheckpointError, match="NaN or infinite"):
        wb.place(wb.bundled_graph("chain_mm"), "doppler", devices=4, checkpoint=tmp_path / "nan.safetensors")
    broken = make_policy("doppler")
    broken.load_state_dict(weights)
    with pytest.raises(CheckpointError, match="refusing to save"):
        broken.save(tmp_path / "never.safetensors")
    assert not (tmp_path / "never.safetensors").exists()


def read_checkpoint_header(tmp_path, policy):
    policy.save(tmp_path / "header.safetensors")
    return read_checkpoint(tmp_path / "header.safetensors").header


# --- kill -9 at every checkpoint write ----------------------------------------------------------------------------
KILL_CONFIG = dict(graphs=(SMALL,), stages=("il", "sim"), episodes=(2, 2), checkpoint_every=1, search_samples=0)
WRITES = 6  # il: last; il, last; sim: last; sim, last
KILL_AT_WRITE = """
    import os, signal
    from tests.test_training import TINY, tiny_config
    from workbench.training import train

    writes, rename = [0], os.replace

    def die_at_write(tmp, path):  # a checkpoint's temporary file is complete, the rename has not happened: kill -9
        if str(path).endswith(".safetensors"):
            writes[0] += 1
            if writes[0] == {write}:
                os.kill(os.getpid(), signal.SIGKILL)
        rename(tmp, path)

    os.replace = die_at_write
    train(tiny_config(**{config!r}), {out!r}, library=TINY, progress=False)
"""


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("kill") / "whole"
    train(tiny_config(**KILL_CONFIG), out, library=TINY, progress=False)
    return out


@pytest.mark.parametrize("write", [3, WRITES])  # the last of Stage I; the final `last`, after the final stage checkpoint
def test_kill_at_a_checkpoint_write_then_resume_keeps_every_stage(tmp_path, uninterrupted, write):
    out = tmp_path / "run"
    killed = run_python(KILL_AT_WRITE.format(write=write, config=KILL_CONFIG, out=str(out)))
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert list((out / "checkpoints").glob(".tmp-*")), "the kill left the temporary file of the interrupted save"
    result = train(tiny_config(**KILL_CONFIG), out, library=TINY, progress=False)
    assert result.status == "finished" and result.episodes == 4
    names = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert names == ["il.safetensors", "last.safetensors", "sim.safetensors"], "every stage checkpoint, no stale temporary file"
    assert read_training_state(out / "checkpoints" / "il.safetensors").episode == 2
    assert read_training_state(out / "checkpoints" / "sim.safetensors").episode == 4
    assert read_training_state(out / "checkpoints" / "last.safetensors").episode == 4, "the resume completes the hand-over to last"
    assert read_meta(out / "meta.json")["episodes_done"] == 4
    assert without_time(read_rows(out / "metrics.csv")) == without_time(read_rows(uninterrupted / "metrics.csv"))
    for name in ("il", "sim", "last"):
        resumed, whole = (tiny_load_policy(d / "checkpoints" / f"{name}.safetensors") for d in (out, uninterrupted))
        assert all(torch.equal(a, b) for a, b in zip(resumed.state_dict().values(), whole.state_dict().values(), strict=True))


# --- divergence ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("poison", ["loss", "weights"])
def test_a_non_finite_loss_or_weight_ends_the_run_diverged(tmp_path, monkeypatch, poison):
    import workbench.training.loop as loop

    real_episode = loop.imitation_episode

    def diverging(*args):
        step = real_episode(*args)
        policy = args[0]
        if len(read_rows(tmp_path / "run" / "metrics.csv")) == 3:  # the fourth episode blows up
            with torch.no_grad():
                policy.sel.weight.fill_(float("inf"))
            if poison == "loss":
                step["loss"] = float("nan")
        return step

    monkeypatch.setattr(loop, "imitation_episode", diverging)
    config = tiny_config(graphs=(SMALL,), stages=("il", "sim"), episodes=(6, 2), checkpoint_every=2, search_samples=0)
    result = train(config, tmp_path / "run", library=TINY, progress=False)
    assert result.status == "diverged"
    meta = read_meta(tmp_path / "run" / "meta.json")
    assert meta["status"] == "diverged" and meta["diverged_at"] == 3
    assert ("loss is nan" if poison == "loss" else "weights hold NaN") in meta["error"] and "episode 2" in meta["error"]
    last = tmp_path / "run" / "checkpoints" / "last.safetensors"
    assert read_training_state(last).episode == 2, "the last finite checkpoint is kept"
    assert torch.isfinite(tiny_load_policy(last).sel.weight).all()
    rows = read_rows(tmp_path / "run" / "metrics.csv")
    assert len(rows) == 4
    again = train(config, tmp_path / "run", library=TINY, progress=False)
    assert again.status == "diverged" and len(read_rows(tmp_path / "run" / "metrics.csv")) == 4, "rerunning does not train on"


# --- resume checks its own files ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def crashed_run(tmp_path_factory):
    """A run killed after episode 7 with its checkpoint after episode 5 (8 metrics rows)."""
    out = tmp_path_factory.mktemp("crashed") / "run"
    with pytest.raises(Crash):
        train(tiny_config(), out, library=TINY, progress=False, callback=crash_at(7))
    return out


def test_resume_keeps_every_earlier_byte_of_the_metrics(tmp_path, crashed_run):
    out = tmp_path / "run"
    shutil.copytree(crashed_run, out)
    before = (out / "metrics.csv").read_bytes()
    train(tiny_config(), out, library=TINY, progress=False)
    after = (out / "metrics.csv").read_bytes()
    kept = b"".join(before.splitlines(keepends=True)[:7])  # header + episodes 0..5; 6 and 7 are replayed
    assert after.startswith(kept) and len(read_rows(out / "metrics.csv")) == 12


def test_a_checkpoint_from_another_run_is_refused(tmp_path, crashed_run):
    other = tmp_path / "other"
    with pytest.raises(Crash):
        train(tiny_config(), other, library=TINY, progress=False, callback=crash_at(10))
    out = tmp_path / "run"
    shutil.copytree(crashed_run, out)
    shutil.copy(other / "checkpoints" / "last.safetensors", out / "checkpoints" / "last.safetensors")
    with pytest.raises(ResumeError, match="belongs to another run"):
        train(tiny_config(), out, library=TINY, progress=False)
    different = tmp_path / "different"
    with pytest.raises(Crash):
        train(tiny_config(devices=3), different, library=TINY, progress=False, callback=crash_at(7))
    shutil.copy(different / "checkpoints" / "last.safetensors", out / "checkpoints" / "last.safetensors")
    with pytest.raises(
        CheckpointError, match=r"trained for graph 'chain_mm_112nodes' .* with 3 devices, but this run trains .* with 4 devices"
    ):
        train(tiny_config(), out, library=TINY, progress=False)


def test_stale_temporary_files_are_removed_on_start(tmp_path, crashed_run):
    out = tmp_path / "run"
    shutil.copytree(crashed_run, out)
    stale = [out / "checkpoints" / ".tmp-abc123last.safetensors", out / ".tmp-xyzmeta.json", out / "best" / ".tmp-1trace.json"]
    for path in stale:
        path.write_bytes(b"half a file")
    train(tiny_config(), out, library=TINY, progress=False)
    assert not [p for p in stale if p.exists()]
    assert np.isfinite(float(read_rows(out / "metrics.csv")[-1]["makespan"]))
