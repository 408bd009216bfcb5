"""Packaging: one source of dependencies, a set-up that is a no-op the second time."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.conftest import tracked_tree

ROOT = Path(__file__).resolve().parent.parent


def test_environment_yml_installs_the_package_with_every_extra():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = env["dependencies"]
    assert "python=3.11" in deps and project["requires-python"].startswith(">=3.11")
    pip = next(d["pip"] for d in deps if isinstance(d, dict))
    assert pip == ["-e .[all]"]
    extras = project["optional-dependencies"]
    assert set(extras["all"][0].split("[")[1].rstrip("]").split(",")) == set(extras) - {"all"}


def test_dgl_stack_is_pinned_as_documented():
    learn = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["learn"]
    for pin in ("torch==2.2.1", "dgl==2.1.0", "torchdata==0.7.1", "packaging"):
        assert pin in learn
    core = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not any(d.startswith(("torch", "dgl")) for d in core)


@pytest.mark.skipif(shutil.which("make") is None or not (ROOT / ".venv" / ".installed").exists(), reason="needs make and a set-up venv")
def test_second_setup_is_a_no_op():
    out = subprocess.run(["make", "-q", "setup"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, "make setup would reinstall although nothing changed"


def test_jupyterlab_opens_without_a_build_dialog():
    # Dash installs a JupyterLab source extension (share/jupyter/lab/extensions/dash-jupyterlab.tgz), so JupyterLab's build
    # status is "needed" and it would open with "Build Recommended"; `make setup` turns the build check off for this venv.
    config = pytest.importorskip("jupyterlab_server.config")
    page = config.get_static_page_config(level="all")
    assert page.get("buildCheck") is False and page.get("buildAvailable") is False, (
        "run `make setup` (it writes labconfig/page_config.json)"
    )


def test_parquet_support_is_in_the_extra_that_names_it():
    """docs/contracts.md names Parquet results tables; pyarrow writes them, so an extra installs it (the error names it: test_sweeps)."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(d.startswith("pyarrow") for d in extras["sweeps"])
    assert "Parquet needs pyarrow, in the `sweeps` extra" in " ".join((ROOT / "docs" / "contracts.md").read_text().split())


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout")
def test_installed_wheel_carries_its_datasets_and_checkpoints(tmp_path):
    """`pip install` of the built wheel, run outside the repository: the bundled graphs, a shipped checkpoint and
    `bench sim --quick` work. The venv sees this interpreter's installed dependencies (a path file, not the editable
    install's finder), so only the package itself comes from the wheel; a build needs setuptools>=68 from the index."""
    import sysconfig

    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), "."],
        cwd=tracked_tree(tmp_path / "src"),
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = wheels.glob("doppler_workbench-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = {n.removeprefix("workbench/data/") for n in archive.namelist() if n.startswith("workbench/data/")}
    tracked = subprocess.run(["git", "ls-files", "datasets"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert shipped == {n.removeprefix("datasets/") for n in tracked}

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True
        ).stdout.strip()
    )
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)]
    subprocess.run(install, check=True, capture_output=True)

    away = tmp_path / "elsewhere"
    away.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WORKBENCH_DATASETS", "WORKBENCH_RUNS")}

    def workbench(*args: str) -> str:
        out = subprocess.run([venv / "bin" / "workbench", *args], cwd=away, env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, f"workbench {' '.join(args)}: {out.stderr[-2000:]}"
        return out.stdout

    assert "ffnn_192nodes" in workbench("info", "ffnn")
    placed = json.loads(workbench("place", "ffnn", "--method", "doppler", "--devices", "4", "--json"))
    assert placed["method"] == "doppler" and len(placed["assignment"]) == 180
    assert placed["details"]["checkpoint"] == str(site / "workbench" / "data" / "pretrained" / "ffnn_192nodes" / "doppler.safetensors")
    assert all(name in workbench("bench", "sim", "--quick") for name in ("chain_mm_112nodes", "full_transformer_layer_261nodes"))
    # the dashboard's runs folder: the current folder's runs/, not one beside site-packages
    code = "from workbench.dashboard.context import CHECKOUT, default_runs_dir; print(CHECKOUT, default_runs_dir())"
    where = subprocess.run([python, "-c", code], cwd=away, env=env, capture_output=True, text=True, timeout=600)
    assert where.stdout.split() == ["None", str(away / "runs")], where.stderr[-2000:]


def test_the_extras_map_names_the_extras_that_install_each_module():
    """The one-line "needs the X extra" messages (workbench.extras) agree with pyproject.toml, and so do the registry's requirements."""
    from workbench.extras import EXTRA_OF, PROJECT
    from workbench.placers import REGISTRY

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert PROJECT == project["name"]
    extras = project["optional-dependencies"]
    for module, extra in EXTRA_OF.items():
        names = {re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0] for requirement in extras[extra]}
        assert module in names, f"{module} is not in the {extra!r} extra"
    assert {module for entry in REGISTRY.values() for module in entry.requires} <= set(EXTRA_OF)


def test_workbench_datasets_names_the_datasets_folder(tmp_path):
    """The documented override: WORKBENCH_DATASETS replaces the bundled folder for every reader (graphs and checkpoints)."""
    shutil.copytree(ROOT / "datasets" / "doppler-paper", tmp_path / "doppler-paper")
    code = "import workbench.datasets as d, workbench.runs as r; print(d.DATASETS_DIR, r.pretrained_checkpoint('ffnn_192nodes', 'doppler'))"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WORKBENCH_DATASETS": str(tmp_path)}
    where = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.split()
    assert where == [str(tmp_path), str(tmp_path / "pretrained" / "ffnn_192nodes" / "doppler.safetensors")]
    info = subprocess.run([sys.executable, "-m", "workbench", "info", "ffnn", "--json"], env=env, capture_output=True, text=True)
    assert info.returncode == 0 and json.loads(info.stdout)["nodes"] == 180
    (tmp_path / "doppler-paper" / "ffnn_192nodes.txt").unlink()
    missing = subprocess.run([sys.executable, "-m", "workbench", "info", "ffnn"], env=env, capture_output=True, text=True)
    assert missing.returncode == 2 and str(tmp_path / "doppler-paper" / "ffnn_192nodes.txt") in missing.stderr
