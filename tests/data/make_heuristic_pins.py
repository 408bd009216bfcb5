"""Write ``heuristic_pins.json``: a hash of every one-pass heuristic's assignment and placement order on the corpus.

The near-linear rewrites of the list schedulers (issue 32) must return exactly
what the first implementations returned, ties included; ``tests/test_heuristic_pins.py``
compares against this file. It was written by the quadratic implementations
before they changed. Run ``python tests/data/make_heuristic_pins.py`` only when a
heuristic's result is meant to change.

Graphs: every corpus entry outside the ``real`` split (the zoo needs the
``[models]`` extra), at each of its device counts, and the paper-size ChainMM
of :data:`EXTRA` at 16 devices.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PINS = HERE / "heuristic_pins.json"
METHODS = ("heft", "etf", "critical_path", "cpop", "peft", "affinity")
# name -> (generator, parameters, device counts): a graph larger than the corpus's, with the paper's cost ties.
EXTRA = {"chain_mm-16x8x16x8+16x16x8": ("chain_mm", {"parts": "16x8x16x8+16x16x8", "cost_model": "paper"}, (16,))}


def digest(values: np.ndarray | None) -> str | None:
    """SHA-256 of the values as little-endian int64 (``None`` stays ``None``)."""
    if values is None:
        return None
    return hashlib.sha256(np.ascontiguousarray(np.asarray(values, dtype="<i8")).tobytes()).hexdigest()


def cases():
    """(case name, graph builder, devices) for every pinned case."""
    import workbench as wb
    from workbench import corpus

    for entry in corpus.entries():
        if entry.split == "real":
            continue
        for devices in entry.devices:
            yield entry.name, (lambda e=entry: corpus.build(e)), devices
    for name, (family, params, device_counts) in EXTRA.items():
        for devices in device_counts:
            yield name, (lambda f=family, p=params: wb.generate(f, **p)), devices


def pin(decision) -> str:
    """The first 16 hex digits of a SHA-256 over the hashes of a decision's assignment and order."""
    return hashlib.sha256(f"{digest(decision.assignment)}:{digest(decision.order)}".encode()).hexdigest()[:16]


def pins(methods=METHODS) -> dict[str, str]:
    """``"graph@devices/method"`` -> :func:`pin` of the method's decision."""
    from workbench.placers.base import get_placer

    out: dict[str, str] = {}
    for name, build, devices in cases():
        graph = build()
        for method in methods:
            out[f"{name}@{devices}/{method}"] = pin(get_placer(method).place(graph, devices))
            print(name, devices, method, flush=True, file=sys.stderr)
    return out


if __name__ == "__main__":
    PINS.write_text(json.dumps(pins(), indent=0, sort_keys=True) + "\n")
