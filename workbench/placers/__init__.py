"""Placement methods behind one interface; see :mod:`workbench.placers.base`."""

from .base import REGISTRY, Decision, Placement, Placer, get_placer, place, placers, register_placer

__all__ = ["REGISTRY", "Decision", "Placement", "Placer", "get_placer", "place", "placers", "register_placer"]
