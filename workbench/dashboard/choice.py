"""A method as the dashboard's dropdowns hold it: :class:`MethodChoice` and its one text form.

The browser holds a choice as text, ``[mode|]method[@root:path]``:

- ``method`` is a registry name (``heft``, ``doppler``);
- ``@root:path`` names a learned method's checkpoint, ``root`` being
  ``datasets`` (a shipped policy, ``path`` under datasets/) or ``runs`` (a
  run's weights, ``path`` under the runs folder);
- ``mode`` says how the method spends a search budget: ``active`` runs the
  checkpoint's per-instance active search (Compare and the any-time chart),
  ``samples`` takes the best of K sampled placements and ``search`` the
  method's own budget (the any-time chart's series).

:meth:`MethodChoice.from_value` is the only place that text is split and
:meth:`MethodChoice.to_value` the only place it is joined.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .context import DashboardContext, PathError

__all__ = ["MODES", "ROOTS", "MethodChoice"]

MODES = ("active", "samples", "search")
"""How a choice may spend a search budget (none: as the method runs by default)."""
ROOTS = ("datasets", "runs")
"""The folders a checkpoint may come from."""
_METHOD = re.compile(r"[A-Za-z0-9_.+-]+")


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


@dataclass(frozen=True)
class MethodChoice:
    """One dropdown entry: a registered ``method``, its checkpoint (``root`` and ``path``; empty without one) and its
    ``mode`` (one of :data:`MODES`, or empty). Building one that its text form could not carry raises ``ValueError``; a
    ``root`` other than :data:`ROOTS` raises :class:`~workbench.dashboard.context.PathError`."""

    method: str
    root: str = ""
    path: str = ""
    mode: str = ""

    def __post_init__(self) -> None:
        if not _METHOD.fullmatch(self.method):
            raise ValueError(f"not a method name: {_shown(self.method)}")
        if self.mode and self.mode not in MODES:
            raise ValueError(f"not a mode: {_shown(self.mode)}; modes are {', '.join(MODES)}")
        if bool(self.root) != bool(self.path):
            raise ValueError(f"a checkpoint needs both a root and a path, got {_shown(self.root)} and {_shown(self.path)}")
        if self.root and self.root not in ROOTS:
            raise PathError(f"checkpoint {_shown(f'{self.root}:{self.path}')} is neither in datasets/ nor in runs/")

    def to_value(self) -> str:
        """The text form, ``[mode|]method[@root:path]``."""
        mode = f"{self.mode}|" if self.mode else ""
        checkpoint = f"@{self.root}:{self.path}" if self.root else ""
        return f"{mode}{self.method}{checkpoint}"

    @classmethod
    def from_value(cls, value: object) -> MethodChoice:
        """The choice ``value`` (:meth:`to_value`'s text) holds; ``ValueError`` naming ``value`` when it holds none."""
        if not isinstance(value, str):
            raise ValueError(f"not a method choice: {_shown(value)}")
        head, bar, rest = value.partition("|")
        mode, rest = (head, rest) if bar and head in MODES else ("", value)
        method, at, checkpoint = rest.partition("@")
        root, colon, path = checkpoint.partition(":")
        if at and not colon:
            raise ValueError(f"not a method choice: {_shown(value)} (a checkpoint is written @root:path)")
        try:
            return cls(method, root, path, mode)
        except ValueError as error:  # PathError stays a PathError
            raise type(error)(f"not a method choice: {_shown(value)} ({error})") from None

    def with_mode(self, mode: str) -> MethodChoice:
        """The same method and checkpoint in ``mode``."""
        return dataclasses.replace(self, mode=mode)

    @property
    def active(self) -> bool:
        """Whether it runs the checkpoint's per-instance active search."""
        return self.mode == "active"

    @property
    def source(self) -> str:
        """Where the checkpoint lies: the shipped folder's name (``chain_mm_112nodes``, ``zero_shot``) or the run's folder
        under the runs folder (``sweep1/seed0`` for ``sweep1/seed0/checkpoints/sim-best.safetensors``); empty without one."""
        if not self.root:
            return ""
        folder = PurePosixPath(self.path).parent
        if self.root == "runs":
            return (folder.parent if folder.name == "checkpoints" else folder).as_posix()
        return folder.name

    def checkpoint_path(self, ctx: DashboardContext) -> Path | None:
        """The checkpoint file inside ``ctx``'s datasets or runs folder (``PathError`` for a path leading out of it);
        ``None`` without a checkpoint."""
        if not self.root:
            return None
        return ctx.in_datasets(self.path) if self.root == "datasets" else ctx.in_runs(self.path)
