"""Packaging: one source of dependencies, a set-up that is a no-op the second time."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

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
