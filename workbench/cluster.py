"""Device models: identical devices (the paper's) or a heterogeneous :class:`Cluster`.

A cluster holds at most :data:`MAX_DEVICES` devices: its link tables (and the
simulator's and placers' copies of them) grow with the square of the device
count.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

__all__ = ["Cluster", "Devices", "as_cluster", "num_devices", "MAX_DEVICES"]

MAX_DEVICES = 1024


class DeviceCountError(ValueError):
    """A device count outside 1..MAX_DEVICES (bad input, not a bug)."""


def _check_count(devices: int) -> None:
    if devices < 1:
        raise DeviceCountError(f"devices must be >= 1, got {devices}")
    if devices > MAX_DEVICES:
        raise DeviceCountError(
            f"devices must be at most {MAX_DEVICES} "
            f"(workbench.cluster.MAX_DEVICES; a heterogeneous cluster's link tables grow with its square), got {devices}"
        )


@dataclass(frozen=True)
class Cluster:
    """Devices with per-device speeds and per-pair links.

    An op of compute cost ``c`` runs ``c / speeds[d]`` on device ``d``; an edge
    of communication cost ``c`` from device ``i`` to ``j != i`` takes
    ``c / bandwidth[i][j] + latency[i][j]``.

    Attributes:
        speeds: relative compute speed per device (1.0 = the graph's costs).
        bandwidth: relative link speed per ordered device pair (1.0 = the graph's costs).
        latency: fixed time added to every transfer per ordered pair, in the graph's unit.
        contention: serialize transfers that share a link (ordered device pair);
            the paper's model has no contention.
    """

    speeds: tuple[float, ...]
    bandwidth: tuple[tuple[float, ...], ...] | None = None
    latency: tuple[tuple[float, ...], ...] | None = None
    contention: bool = False

    def __post_init__(self) -> None:
        d = len(self.speeds)
        _check_count(d)
        speeds = tuple(float(s) for s in self.speeds)
        if any(not np.isfinite(s) or s <= 0 for s in speeds):
            raise ValueError(f"device speeds must be finite and > 0, got {speeds}")
        object.__setattr__(self, "speeds", speeds)
        for name, default in (("bandwidth", 1.0), ("latency", 0.0)):
            value = getattr(self, name)
            if value is None:  # one shared row: memory linear in d
                object.__setattr__(self, name, ((default,) * d,) * d)
                continue
            matrix = np.asarray(value, dtype=float)
            if matrix.shape != (d, d):
                raise ValueError(f"{name} must be a {d}x{d} matrix, got shape {matrix.shape}")
            off = matrix[~np.eye(d, dtype=bool)]
            if name == "bandwidth" and np.any(~np.isfinite(off) | (off <= 0)):
                raise ValueError("link bandwidths must be finite and > 0")
            if name == "latency" and np.any(~np.isfinite(off) | (off < 0)):
                raise ValueError("link latencies must be finite and >= 0")
            object.__setattr__(self, name, tuple(map(tuple, matrix.tolist())))

    @classmethod
    def identical(cls, devices: int) -> Cluster:
        """``devices`` identical devices with the paper's links."""
        return cls(speeds=(1.0,) * int(devices))

    @property
    def num_devices(self) -> int:
        return len(self.speeds)

    @property
    def is_identical(self) -> bool:
        """True when this cluster is exactly the paper's model."""
        d = self.num_devices
        off = ~np.eye(d, dtype=bool)
        return (
            all(s == 1.0 for s in self.speeds)
            and bool(np.all(np.asarray(self.bandwidth)[off] == 1.0))
            and bool(np.all(np.asarray(self.latency)[off] == 0.0))
            and not self.contention
        )

    def compute_time(self, cost: float, device: int) -> float:
        return cost / self.speeds[device]

    def comm_time(self, cost: float, src_device: int, dst_device: int) -> float:
        if src_device == dst_device:
            return 0.0
        assert self.bandwidth is not None and self.latency is not None  # __post_init__ fills both
        return cost / self.bandwidth[src_device][dst_device] + self.latency[src_device][dst_device]

    def to_dict(self) -> dict:
        return {
            "speeds": list(self.speeds),
            "bandwidth": [list(r) for r in self.bandwidth or ()],
            "latency": [list(r) for r in self.latency or ()],
            "contention": self.contention,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Cluster:
        return cls(
            speeds=tuple(data["speeds"]),
            bandwidth=data.get("bandwidth") or None,
            latency=data.get("latency") or None,
            contention=bool(data.get("contention", False)),
        )


Devices = int | Cluster


def num_devices(devices: Devices) -> int:
    """How many devices ``devices`` (an int or a :class:`Cluster`) names."""
    if isinstance(devices, Cluster):
        return devices.num_devices
    if isinstance(devices, (bool, np.bool_)) or not isinstance(devices, (int, np.integer)):
        raise TypeError(f"devices must be an int or a Cluster, got {type(devices).__name__}")
    _check_count(int(devices))
    return int(devices)


@lru_cache(maxsize=64)
def _identical(devices: int) -> Cluster:
    return Cluster.identical(devices)


def as_cluster(devices: Devices) -> Cluster:
    """A :class:`Cluster` for ``devices``."""
    return devices if isinstance(devices, Cluster) else _identical(num_devices(devices))
