"""The state the op rules share while walking a traced graph."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from ..torch_fx import OpRecord, Traced
from .values import Sharder, Value, shares


def op_dims(value: Any, rank: int) -> list[int]:
    """An op's ``dim`` argument as sorted non-negative dimensions (``None``: all of them)."""
    if value is None:
        return list(range(rank))
    if isinstance(value, int):
        value = [value]
    return sorted(d % rank for d in value)


class WalkerBase:
    """The walk's state: each fx value's blocks, the op being sharded and its resolved arguments."""

    def __init__(self, traced: Traced, sharder: Sharder) -> None:
        self.traced = traced
        self.s = sharder
        self.values: dict[torch.fx.Node, Any] = {}
        self.labels = (f"l{i}" for i in range(10**9))
        self.args: tuple[Any, ...] = ()  # the op being sharded: its arguments, host-side values resolved
        self.kwargs: dict[str, Any] = {}
        self.model_inputs: set[str] = set()  # names of the input tensors: data, unlike weights and constants

    def computed(self, value: Value) -> bool:
        """Whether ``value`` is data (made by a kernel, or a model input) rather than a weight or a constant."""
        return value.produced or value.tensor.name in self.model_inputs

    def label(self) -> str:
        return next(self.labels)

    def concrete(self, arg: Any) -> Any:
        """``arg`` with host-side fx values (sizes, indices) replaced by what they were on the example inputs."""
        if isinstance(arg, torch.fx.Node):
            return self.traced.recorder.constants.get(arg, arg)
        if isinstance(arg, (tuple, list)):
            return type(arg)(self.concrete(a) for a in arg)
        if isinstance(arg, slice):
            return slice(self.concrete(arg.start), self.concrete(arg.stop), self.concrete(arg.step))
        return arg

    def arg(self, position: int, keyword: str, default: Any = None) -> Any:
        """Argument ``position`` (or ``keyword``) of the op being sharded, host-side values resolved."""
        if len(self.args) > position:
            return self.args[position]
        return self.kwargs.get(keyword, default)

    def value(self, arg: Any) -> Any:
        return self.values.get(arg) if isinstance(arg, torch.fx.Node) else None

    def tensor_args(self, node: torch.fx.Node) -> list[Value]:
        from torch.utils._pytree import tree_flatten

        return [v for a in tree_flatten((self.args, self.kwargs))[0] if isinstance((v := self.value(a)), Value)]

    # -------------------------------------------------------- placeholders and constants
    def placeholder(self, node: torch.fx.Node, shape: tuple[int, ...], dtype: torch.dtype, image_like: bool) -> Value:
        """A model input: token ids (batch, seq), images (batch, channels, spatial...) or features (batch, [seq,] hidden)."""
        if not dtype.is_floating_point:
            kinds = ["batch", "seq"] + ["other"] * (len(shape) - 2)
        elif len(shape) >= 3 and image_like:
            kinds = ["batch", "channels"] + ["spatial"] * (len(shape) - 2)
        else:
            kinds = ["batch"] + ["seq"] * (len(shape) > 2) + ["other"] * max(0, len(shape) - 3) + ["hidden"] * (len(shape) > 1)
        self.model_inputs.add(node.name)
        return self.s.free(node.name, shape, kinds[: len(shape)])

    def out_shape(self, record: OpRecord) -> tuple[int, ...]:
        return tuple(record.outs[0][0])

    # -------------------------------------------------------- helpers the op families share

    def s_parts(self, value: Value, dim: int) -> list[int]:
        return [self.s.count(k, s) for s, k in value.factors(dim)]

    def split_softmax(self, name: str, value: Value, labels: list[str], dim: int, flops: int) -> Value:
        """Safe softmax with its reductions: max, exp(x - max), sum, divide; the einsum style subtracts and exponentiates
        in two steps, as the paper's system does (``softmax_v1`` of its graph writer)."""
        kept = [label for d, label in enumerate(labels) if d != dim]
        if self.s.einsum_steps:
            share = shares(flops, [1, 1, 1, 1, 1])
            peak = self.s.apply(f"{name}.max", "reduce_max", [(value, labels)], kept, share[0], combine="partial_max")
            shifted = self.s.apply(f"{name}.sub", "sub", [(value, labels), (peak, kept)], labels, share[1])
            shifted = self.s.apply(f"{name}.exp", "exp", [(shifted, labels)], labels, share[2])
            total = self.s.apply(f"{name}.sum", "reduce_sum", [(shifted, labels)], kept, share[3])
            return self.s.apply(f"{name}.div", "div", [(shifted, labels), (total, kept)], labels, share[4])
        fifth = [flops * i // 5 for i in range(6)]
        peak = self.s.apply(f"{name}.max", "reduce_max", [(value, labels)], kept, fifth[1] - fifth[0], combine="partial_max")
        shifted = self.s.apply(f"{name}.exp", "exp", [(value, labels), (peak, kept)], labels, fifth[3] - fifth[1])
        total = self.s.apply(f"{name}.sum", "reduce_sum", [(shifted, labels)], kept, fifth[4] - fifth[3])
        return self.s.apply(f"{name}.div", "div", [(shifted, labels), (total, kept)], labels, fifth[5] - fifth[4])
