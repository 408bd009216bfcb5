"""Models named by a short spec, made from a config with random weights (nothing is downloaded).

- ``hf:TYPE``: a HuggingFace ``transformers`` base model of model type
  ``TYPE`` (``gpt2``, ``llama``, ``bert``, ...), from
  ``AutoConfig.for_model(TYPE, **kwargs)`` and ``AutoModel.from_config``;
  the kwargs are config fields (``n_layer=12``, ``hidden_size=1024``).
- ``tv:NAME``: a torchvision model (``resnet50``, ``vit_b_16``, ...) from
  ``torchvision.models.get_model(NAME, weights=None, **kwargs)``.
- ``timm:NAME``: a timm model (``convnext_tiny``, ``efficientnet_b0``, ...)
  from ``timm.create_model(NAME, pretrained=False, **kwargs)``.
- ``PACKAGE.MODULE:FACTORY``: any function or class returning an
  ``nn.Module``, called with the kwargs.

``hf:``, ``tv:`` and ``timm:`` need the ``[models]`` extra (transformers,
torchvision and timm at versions that work with torch 2.2.1).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Mapping
from typing import Any

import torch

from ..imports import import_object

__all__ = ["build_model", "default_inputs", "SpecError", "MODELS_EXTRA"]

MODELS_EXTRA = "pip install 'doppler-workbench[models]'"

_HF_DEFAULT_TOKENS = (2, 128)
_DEFAULT_IMAGES = (1, 3, 224, 224)


class SpecError(ValueError):
    """A model spec that names nothing buildable (unknown model, unknown field, missing extra)."""


def _require(package: str, spec: str) -> Any:
    try:
        return importlib.import_module(package)
    except ImportError:
        raise SpecError(f"{spec} needs {package}, which is not installed: {MODELS_EXTRA}") from None


def _huggingface(spec: str, model_type: str, kwargs: Mapping[str, Any]) -> torch.nn.Module:
    transformers = _require("transformers", spec)
    known = transformers.CONFIG_MAPPING.keys()
    if model_type not in known:
        raise SpecError(
            f"unknown HuggingFace model type {model_type!r} in {spec!r}; e.g. gpt2, llama, bert, t5, vit (transformers knows {len(known)})"
        )
    defaults = transformers.AutoConfig.for_model(model_type)
    unknown = sorted(k for k in kwargs if not hasattr(defaults, k))
    if unknown:
        common = transformers.PretrainedConfig().to_dict()
        fields = sorted(k for k in defaults.to_dict() if k not in common and not k.startswith("_"))
        raise SpecError(f"{spec}: unknown config field(s) {', '.join(unknown)}; {type(defaults).__name__} has: {', '.join(fields)}")
    config = transformers.AutoConfig.for_model(model_type, **kwargs)
    if hasattr(config, "use_cache"):  # a graph of one forward pass: no key/value cache as an extra output
        config.use_cache = False
    return transformers.AutoModel.from_config(config)


def _torchvision(spec: str, name: str, kwargs: Mapping[str, Any]) -> torch.nn.Module:
    torchvision = _require("torchvision", spec)
    known = torchvision.models.list_models()
    if name not in known:
        raise SpecError(f"unknown torchvision model {name!r} in {spec!r}; e.g. resnet50, vit_b_16, mobilenet_v3_small ({len(known)} known)")
    try:
        return torchvision.models.get_model(name, weights=None, **kwargs)
    except TypeError as exc:
        raise SpecError(f"{spec}: {exc}") from None


def _timm(spec: str, name: str, kwargs: Mapping[str, Any]) -> torch.nn.Module:
    timm = _require("timm", spec)
    if not timm.is_model(name):
        raise SpecError(
            f"unknown timm model {name!r} in {spec!r}; e.g. resnet50, convnext_tiny, efficientnet_b0 ({len(timm.list_models())} known)"
        )
    try:
        return timm.create_model(name, pretrained=False, **kwargs)
    except TypeError as exc:
        raise SpecError(f"{spec}: {exc}") from None


def build_model(spec: str, kwargs: Mapping[str, Any] | None = None, *, meta: bool = False) -> torch.nn.Module:
    """The module named by ``spec`` (see the module docstring), built with ``kwargs``.

    ``meta=True`` builds it on the meta device: no memory, no weights, only
    shapes (enough for roofline import and sharding, not for ``measure``).
    """
    kwargs = dict(kwargs or {})
    prefix, _, name = spec.partition(":")
    if prefix == "timm":  # built on the CPU and then moved: timm's constructors read tensor values
        model = _timm(spec, name, kwargs)
        return model.to("meta") if meta else model
    with torch.device("meta") if meta else contextlib.nullcontext():
        if prefix == "hf":
            return _huggingface(spec, name, kwargs)
        if prefix == "tv":
            return _torchvision(spec, name, kwargs)
        if "." not in prefix or not name:
            raise SpecError(f"unknown model spec {spec!r}; use hf:TYPE, tv:NAME, timm:NAME or PACKAGE.MODULE:FACTORY")
        try:
            factory = import_object(spec)
        except ValueError as exc:
            raise SpecError(str(exc)) from None
        model = factory(**kwargs)
    if not isinstance(model, torch.nn.Module):
        raise SpecError(f"{spec} returned {type(model).__name__}, not a torch.nn.Module")
    return model


def default_inputs(spec: str) -> tuple[torch.Tensor, ...] | None:
    """Example inputs for ``hf:`` (2 sequences of 128 token ids), ``tv:`` and ``timm:`` (one 224x224 RGB image); None otherwise."""
    if spec.startswith("hf:"):
        return (torch.zeros(_HF_DEFAULT_TOKENS, dtype=torch.int64),)
    if spec.startswith(("tv:", "timm:")):
        return (torch.randn(_DEFAULT_IMAGES),)
    return None
