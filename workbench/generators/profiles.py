"""Device profiles: what a kernel and a transfer cost on a given accelerator.

A :class:`DeviceProfile` turns the FLOPs and bytes of a kernel into a run time
with the roofline model (Williams, Waterman and Patterson, "Roofline: an
insightful visual performance model for multicore architectures", CACM 2009):
``max(flops / peak, bytes / memory bandwidth) + launch latency``. A transfer of
``b`` bytes to another device costs ``link latency + b / link bandwidth``.
Times are in seconds.

The presets use the vendors' published peak figures (dense, no sparsity;
float16/bfloat16 on tensor cores where the GPU has them, float32 and float64
without): P100 SXM2, V100 SXM2, A100 SXM4 80 GB and H100 SXM5. Link bandwidth is the
per-direction bandwidth between two GPUs (one NVLink 1.0 link for the P100,
two NVLink 2.0 links for the V100 as in a DGX-1, the NVSwitch fabric for the
A100 and H100). Launch latencies are typical CUDA kernel-launch overheads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any

__all__ = ["DeviceProfile", "PROFILES", "get_profile", "DTYPE_BYTES"]

DTYPE_BYTES: Mapping[str, int] = MappingProxyType(
    {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int8": 1, "bool": 1}
)


@dataclass(frozen=True)
class DeviceProfile:
    """Peak rates of one accelerator and its links.

    Attributes:
        name: a short label, such as ``"V100"``.
        flops: peak FLOP/s per data type (``"float32"``, ``"float16"``, ...).
        memory_bandwidth: device-memory bandwidth in bytes/s.
        link_bandwidth: bandwidth of a transfer to another device, bytes/s.
        launch_latency: fixed cost of launching one kernel, seconds.
        link_latency: fixed cost of one transfer to another device, seconds.
    """

    name: str
    flops: Mapping[str, float]
    memory_bandwidth: float
    link_bandwidth: float
    launch_latency: float = 5e-6
    link_latency: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "flops", MappingProxyType(dict(self.flops)))
        for label in ("memory_bandwidth", "link_bandwidth"):
            if not getattr(self, label) > 0:
                raise ValueError(f"profile {self.name!r}: {label} must be > 0, got {getattr(self, label)!r}")
        for label in ("launch_latency", "link_latency"):
            if not getattr(self, label) >= 0:
                raise ValueError(f"profile {self.name!r}: {label} must be >= 0, got {getattr(self, label)!r}")
        bad = {k: v for k, v in self.flops.items() if not v > 0}
        if not self.flops or bad:
            raise ValueError(f"profile {self.name!r}: flops needs a rate > 0 per dtype, got {dict(self.flops)!r}")

    def peak_flops(self, dtype: str) -> float:
        """Peak FLOP/s for ``dtype``; a clear error when the device has no rate for it."""
        try:
            return self.flops[dtype]
        except KeyError:
            raise ValueError(f"profile {self.name!r} has no FLOP rate for dtype {dtype!r}; it has {', '.join(self.flops)}") from None

    def kernel_time(self, flops: float, nbytes: float, dtype: str = "float32") -> float:
        """Roofline time of one kernel that does ``flops`` and moves ``nbytes`` through memory."""
        return max(flops / self.peak_flops(dtype), nbytes / self.memory_bandwidth) + self.launch_latency

    def transfer_time(self, nbytes: float) -> float:
        """Time to send ``nbytes`` to another device (0 for nothing to send)."""
        return self.link_latency + nbytes / self.link_bandwidth if nbytes > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {f.name: dict(self.flops) if f.name == "flops" else getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeviceProfile:
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(known))
        missing = [name for name in ("name", "flops", "memory_bandwidth", "link_bandwidth") if name not in data]
        if unknown or missing:
            raise ValueError(f"device profile: unknown field(s) {unknown}, missing field(s) {missing}; fields: {', '.join(known)}")
        return cls(**dict(data))


PROFILES: Mapping[str, DeviceProfile] = MappingProxyType(
    {
        "P100": DeviceProfile("P100", {"float64": 5.3e12, "float32": 10.6e12, "float16": 21.2e12}, 732e9, 20e9, 5e-6, 10e-6),
        "V100": DeviceProfile("V100", {"float64": 7.8e12, "float32": 15.7e12, "float16": 125e12}, 900e9, 50e9, 5e-6, 8e-6),
        "A100": DeviceProfile(
            "A100",
            {"float64": 9.7e12, "float32": 19.5e12, "float16": 312e12, "bfloat16": 312e12},
            2039e9,
            300e9,
            4e-6,
            5e-6,
        ),
        "H100": DeviceProfile(
            "H100",
            {"float64": 34e12, "float32": 67e12, "float16": 989e12, "bfloat16": 989e12},
            3350e9,
            450e9,
            3e-6,
            4e-6,
        ),
    }
)


def get_profile(profile: str | DeviceProfile | Mapping[str, Any]) -> DeviceProfile:
    """A profile from a preset name (case-insensitive), a dict of fields, or a profile."""
    if isinstance(profile, DeviceProfile):
        return profile
    if isinstance(profile, Mapping):
        return DeviceProfile.from_dict(profile)
    for name, preset in PROFILES.items():
        if name.lower() == str(profile).lower():
            return preset
    raise ValueError(f"unknown device profile {profile!r}; presets: {', '.join(PROFILES)}")
