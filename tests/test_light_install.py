"""The light install (no learn, models, dashboard or sweeps extra): every subcommand and method works or names the extra.

The extras' modules are hidden from a child process by a ``sitecustomize`` on its PYTHONPATH that sets each to None
in ``sys.modules``: ``import torch`` then fails as on a machine without it, and ``importlib.util.find_spec`` says
it is not installed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import workbench as wb
from workbench.cli import COMMANDS
from workbench.extras import EXTRA_OF, PROJECT, pip_install

ROOT = Path(__file__).resolve().parent.parent
HIDDEN = sorted(EXTRA_OF)  # every module an extra brings: learn, models, dashboard, sweeps, tensorboard


@pytest.fixture(scope="module")
def light_env(tmp_path_factory) -> dict[str, str]:
    site = tmp_path_factory.mktemp("light")
    (site / "sitecustomize.py").write_text(f"import sys\n\nfor name in {HIDDEN!r}:\n    sys.modules[name] = None\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}


def light(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_hidden_modules_are_missing_in_the_child(light_env, tmp_path):
    code = f"import importlib.util as u, workbench; print([m for m in {HIDDEN!r} if u.find_spec(m) is not None])"
    out = subprocess.run([sys.executable, "-c", code], env=light_env, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def assert_names_extra(result: subprocess.CompletedProcess, extra: str) -> None:
    """Exit status 2 and one line on stderr (after any progress output) naming the extra's install command."""
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert pip_install(extra) in lines[0] and "error:" in lines[0]


# One small valid invocation per subcommand: "ok" when the light install can do it, else the extra it needs.
WALK: dict[str, list[tuple[list[str], str]]] = {
    "info": [(["info", "ffnn"], "ok")],
    "simulate": [(["simulate", "chain_mm", "--devices", "2", "--assignment", json.dumps([0, 1] * 38)], "ok")],
    "place": [
        (["place", "--list"], "ok"),
        (["place", "ffnn", "--method", "heft"], "ok"),
        (["place", "ffnn", "--method", "doppler"], "learn"),
        (["place", "ffnn", "--method", "learned_search", "--budget", "50"], "learn"),
    ],
    "compare": [
        (["compare", "chain_mm", "--devices", "2", "--budget", "30"], "ok"),
        (["compare", "chain_mm", "--methods", "heft,doppler"], "learn"),
    ],
    "bench": [(["bench", "sim", "--quick"], "ok"), (["bench", "episode", "--quick"], "learn")],
    "generate": [(["generate", "ffnn", "--param", "hidden_parts=2", "--out", "g.json"], "ok")],
    "import-model": [(["import-model", "workbench.models:gpt_decoder", "--target-nodes", "50"], "learn")],
    "serve-engine": [(["serve-engine", "chain_mm", "--port", "0"], "learn")],  # --simulate: test_serve_engine_simulates_without_extras
    "calibrate": [(["calibrate", "chain_mm", "--devices", "2"], "learn")],
    "sweep": [(["sweep", "tiny.yaml", "--no-progress"], "ok"), (["sweep", "learned.yaml", "--no-progress"], "learn")],
    "reproduce": [(["reproduce", "--quick", "--graphs", "chain_mm", "--out", "report"], "dashboard")],
    "train": [(["train", "chain_mm", "--episodes", "1,1", "--out", "run"], "learn")],
}


def test_the_walk_covers_every_subcommand():
    assert set(WALK) == set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_subcommand_works_or_names_its_extra(command, light_env, tmp_path):
    sweep = "name: {0}\ngraphs: [chain_mm]\ndevices: [2]\nmethods: [{1}]\nseeds: 1\nout: {0}.csv\nengine: serial\n"
    (tmp_path / "tiny.yaml").write_text(sweep.format("tiny", "heft"))
    (tmp_path / "learned.yaml").write_text(sweep.format("learned", "heft, learned_search"))
    for args, expected in WALK[command]:
        result = light(light_env, tmp_path, *args)
        if expected != "ok":
            assert_names_extra(result, expected)
            continue
        assert result.returncode == 0, f"{args}: {result.stderr[-3000:]}"
        assert "Traceback" not in result.stderr
        if command == "compare":  # its default methods are those installed, and it says what it left out
            left_out = [line for line in result.stderr.splitlines() if "left out" in line]
            assert len(left_out) == 1 and "learned_search" in left_out[0] and pip_install("learn") in left_out[0]
            assert "learned_search" not in result.stdout and "local_search" in result.stdout
        if args == ["place", "--list"]:  # every method listed; those needing the learn extra say so
            marked = {line.split()[0] for line in result.stdout.splitlines() if line.endswith(f"(not installed: {pip_install('learn')})")}
            assert marked == {name for name, entry in wb.placers.REGISTRY.items() if entry.requires}


def test_serve_engine_simulates_without_extras(light_env, tmp_path):
    args = [sys.executable, "-m", "workbench", "serve-engine", "chain_mm", "--simulate", "--port", "0"]
    server = subprocess.Popen(args, cwd=tmp_path, env=light_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        assert server.stdout.readline().startswith("serving chain_mm_112nodes on 127.0.0.1:")
    finally:
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=60)
    assert server.returncode in (0, 130) and "Traceback" not in err  # 130: the interrupt came before serve_forever began


def test_every_method_places_or_names_its_extra(light_env, tmp_path):
    """Through the API, in one child: each registered method places chain_mm, or raises MissingExtra naming `learn`;
    exactly the methods registered with required modules are refused, and `methods(available=True)` leaves them out."""
    code = """
import json, workbench as wb
from workbench.extras import MissingExtra
from workbench.placers import methods, placer_options
graph, out = wb.bundled_graph("chain_mm"), {}
for method in methods():
    try:
        options = {k: v for k, v in (("budget", 30), ("time_limit", 2.0)) if k in placer_options(method)}
        out[method] = wb.place(graph, method=method, devices=2, **options).makespan > 0
    except MissingExtra as exc:
        out[method] = str(exc)
print(json.dumps({"results": out, "available": methods(available=True)}))
"""
    result = subprocess.run([sys.executable, "-c", code], env=light_env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    needs = {name for name, entry in wb.placers.REGISTRY.items() if entry.requires}
    assert needs >= set(wb.placers.methods("learned")) | {"learned_search"}
    for method, outcome in report["results"].items():
        if method in needs:
            assert isinstance(outcome, str) and f"method {method!r} needs torch" in outcome and f"'{PROJECT}[learn]'" in outcome
        else:
            assert outcome is True, (method, outcome)
    assert report["available"] == [m for m in wb.placers.methods() if m not in needs]
