"""What a simulation (or a real run) returns: the makespan and the trace behind it."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..fileio import atomic_write_text

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Trace", "SimResult"]

_OP_FIELDS = ("device", "ready", "start", "end")
_TRANSFER_FIELDS = ("src_op", "dst_op", "src_device", "dst_device", "start", "end")


@dataclass(frozen=True, eq=False)
class Trace:
    """Per op: device, ready, start and end times; per cross-device transfer: its ends and times.

    ``ready`` is the time the op's last input arrived on its device (0 for
    entry ops). Times are in the graph's own unit.
    """

    device: np.ndarray
    ready: np.ndarray
    start: np.ndarray
    end: np.ndarray
    transfer_src_op: np.ndarray
    transfer_dst_op: np.ndarray
    transfer_src_device: np.ndarray
    transfer_dst_device: np.ndarray
    transfer_start: np.ndarray
    transfer_end: np.ndarray
    op_names: tuple[str, ...] | None = None

    @property
    def num_ops(self) -> int:
        return int(self.device.size)

    @property
    def makespan(self) -> float:
        return float(self.end.max(initial=0.0))

    def to_frame(self, kind: str = "ops") -> pd.DataFrame:
        """A pandas DataFrame of the ops (``kind="ops"``) or the transfers (``kind="transfers"``)."""
        import pandas as pd

        if kind == "ops":
            frame = pd.DataFrame(
                {
                    "op": np.arange(self.num_ops),
                    "name": list(self.op_names) if self.op_names else [f"op{i}" for i in range(self.num_ops)],
                    "device": self.device,
                    "ready": self.ready,
                    "start": self.start,
                    "end": self.end,
                }
            )
            frame["duration"] = frame["end"] - frame["start"]
            frame["wait"] = frame["start"] - frame["ready"]
            return frame
        if kind == "transfers":
            return pd.DataFrame({f: getattr(self, f"transfer_{f}") for f in _TRANSFER_FIELDS})
        raise ValueError(f"kind must be 'ops' or 'transfers', got {kind!r}")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ops": {f: getattr(self, f).tolist() for f in _OP_FIELDS}}
        out["transfers"] = {f: getattr(self, f"transfer_{f}").tolist() for f in _TRANSFER_FIELDS}
        out["op_names"] = list(self.op_names) if self.op_names else None
        out["makespan"] = self.makespan
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trace:
        ops, transfers = data["ops"], data["transfers"]
        ints = {"device", "src_op", "dst_op", "src_device", "dst_device"}

        def arr(name: str, values: list) -> np.ndarray:
            return np.asarray(values, dtype=np.int64 if name in ints else np.float64)

        return cls(
            **{f: arr(f, ops[f]) for f in _OP_FIELDS},
            **{f"transfer_{f}": arr(f, transfers[f]) for f in _TRANSFER_FIELDS},
            op_names=tuple(data["op_names"]) if data.get("op_names") else None,
        )

    def to_json(self, path: str | os.PathLike | None = None) -> str:
        """The trace as JSON text; also written atomically to ``path`` when given."""
        text = json.dumps(self.to_dict())
        if path is not None:
            atomic_write_text(path, text)
        return text

    @classmethod
    def from_json(cls, text_or_path: str | os.PathLike) -> Trace:
        text = str(text_or_path)
        if not text.lstrip().startswith("{"):
            with open(text_or_path, encoding="utf-8") as handle:
                text = handle.read()
        return cls.from_dict(json.loads(text))

    def same_as(self, other: Trace) -> bool:
        """Exact equality of every op and transfer (transfers compared as sorted sets)."""
        for f in _OP_FIELDS:
            if not np.array_equal(getattr(self, f), getattr(other, f)):
                return False

        def rows(t: Trace) -> list[tuple]:
            return sorted(zip(*(getattr(t, f"transfer_{f}").tolist() for f in _TRANSFER_FIELDS), strict=True))

        return rows(self) == rows(other)


@dataclass(frozen=True, eq=False)
class SimResult:
    """A simulated makespan with its trace and the settings that produced it."""

    makespan: float
    trace: Trace
    engine: str
    devices: int
    priority: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "makespan": self.makespan,
            "engine": self.engine,
            "devices": self.devices,
            "priority": self.priority,
            "trace": self.trace.to_dict(),
        }
