"""The one build step pyproject.toml cannot declare: ship the top-level ``datasets/`` folder inside the package.

The bundled datasets (paper graphs, the STG set, the corpus manifest, the pretrained checkpoints) live at the
repository's top level, where the papers' files and the docs name them. A wheel carries them as the package
data folder ``workbench/data/``, which :mod:`workbench.datasets` reads when the package is installed; an
editable install (``pip install -e .``) copies nothing and reads the top-level folder itself.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATASETS = Path(__file__).resolve().parent / "datasets"


class BuildPyWithDatasets(build_py):
    """``build_py`` that also copies ``datasets/`` to ``workbench/data/`` in the build tree (not for editable installs)."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / "workbench" / "data"
        shutil.rmtree(target, ignore_errors=True)  # a previous build's files, some perhaps deleted since
        shutil.copytree(DATASETS, target, ignore=shutil.ignore_patterns(".*", "__pycache__"))


setup(cmdclass={"build_py": BuildPyWithDatasets})
