"""Where the dashboard reads and writes: the datasets and runs folders, uploads, background jobs.

Every file the UI lets a user pick goes through :func:`resolve_inside`, so a
path typed or crafted in the browser can never leave these folders. The
upload folder is private to this server (mode 0700) and removed when the
process exits (:meth:`DashboardContext.close`, also run at exit).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..runs import list_runs, shipped_training_runs
from .limits import Limits

__all__ = ["DashboardContext", "default_runs_dir", "resolve_inside", "PathError"]


def checkout_root(package_dir: Path) -> Path | None:
    """The checkout that holds the package folder ``package_dir`` (an editable install, or ``PYTHONPATH`` pointing at
    the repository), or None when the package is installed (a wheel in site-packages, whose parent holds no pyproject.toml)."""
    root = package_dir.resolve().parent
    return root if (root / "pyproject.toml").is_file() else None


CHECKOUT = checkout_root(Path(__file__).parents[1])


class PathError(ValueError):
    """A path that names something outside the folders the dashboard may read."""


def default_runs_dir() -> Path:
    """``$WORKBENCH_RUNS`` when set, else ``runs/`` at the root of the checkout this package runs from, else (an
    installed wheel) ``runs/`` in the current working directory, never beside site-packages."""
    override = os.environ.get("WORKBENCH_RUNS")
    if override:
        return Path(override)
    return (CHECKOUT if CHECKOUT is not None else Path.cwd()) / "runs"


def resolve_inside(root: Path, relative: str | os.PathLike) -> Path:
    """``root / relative`` resolved; raises :class:`PathError` when it escapes ``root``."""
    text = os.fspath(relative)
    if not text or "\x00" in text:
        raise PathError(f"invalid path {text!r}")
    base = Path(root).resolve()
    target = (base / text).resolve()
    if target != base and base not in target.parents:
        raise PathError(f"{text!r} is outside {base}")
    return target


@dataclass(frozen=True)
class DashboardContext:
    """The folders one dashboard instance works with.

    Attributes:
        runs_dir: training runs (read by Training, written by Launch).
        datasets_dir: bundled graphs and pretrained checkpoints (read only).
        upload_dir: where uploaded graph files are kept for this server's life.
        limits: the caps and allow-lists every request is checked against.
    """

    runs_dir: Path
    datasets_dir: Path
    upload_dir: Path
    limits: Limits = field(default_factory=Limits)

    @classmethod
    def create(
        cls,
        runs_dir: str | os.PathLike | None = None,
        datasets_dir: str | os.PathLike | None = None,
        limits: Limits | None = None,
        scratch_dir: str | os.PathLike | None = None,
    ) -> DashboardContext:
        """A context with a fresh private upload folder (in ``scratch_dir``, default the system temp folder), removed at exit."""
        from ..datasets import DATASETS_DIR

        context = cls(
            runs_dir=Path(runs_dir) if runs_dir is not None else default_runs_dir(),
            datasets_dir=Path(datasets_dir) if datasets_dir is not None else DATASETS_DIR,
            upload_dir=Path(tempfile.mkdtemp(prefix="workbench-uploads-", dir=scratch_dir)),
            limits=limits if limits is not None else Limits(),
        )
        atexit.register(context.close)
        return context

    def close(self) -> None:
        """Remove the upload folder and everything uploaded."""
        shutil.rmtree(self.upload_dir, ignore_errors=True)

    def in_runs(self, relative: str | os.PathLike) -> Path:
        return resolve_inside(self.runs_dir, relative)

    def in_datasets(self, relative: str | os.PathLike) -> Path:
        return resolve_inside(self.datasets_dir, relative)

    def run_keys(self) -> list[tuple[str, Path]]:
        """``(key, folder)`` of every training run a page offers: the runs folder's (:func:`workbench.runs.list_runs`,
        newest first) keyed ``runs:<path under the runs folder>``, then the shipped pretrained runs keyed
        ``pretrained:<folder under datasets/pretrained>`` (read-only)."""
        own = [("runs:" + run.name, run.path) for run in list_runs(self.runs_dir)]
        return own + [("pretrained:" + path.name, path) for path in shipped_training_runs(self.datasets_dir / "pretrained")]

    def run_path(self, key: str) -> Path:
        """The folder a run key (:meth:`run_keys`) names, inside the runs folder or datasets/pretrained (no path traversal)."""
        root, _, relative = str(key).partition(":")
        if root == "runs" and relative:
            return self.in_runs(relative)
        if root == "pretrained" and relative and "/" not in relative:
            return self.in_datasets(f"pretrained/{relative}")
        raise PathError(f"not a run: {key!r}")
