"""Op rules for elementwise ops, reductions, normalisations and softmax."""

from __future__ import annotations

import math
from typing import Any

from ..torch_fx import OpRecord
from .base import WalkerBase, op_dims
from .values import (
    MAX_COMBINE,
    NON_POINTWISE,
    Unsupported,
    Value,
    shares,
)


class PointwiseRules(WalkerBase):
    """Elementwise ops, reductions, normalisations and softmax."""

    def elementwise(self, record: OpRecord) -> Value:
        inputs = self.tensor_args(record.node)
        if record.op_type == "type_as":  # a cast: the second tensor gives only the dtype
            inputs = inputs[:1]
        if not any(self.computed(v) for v in inputs):
            raise Unsupported("reads no computed tensor (a constant)")
        if record.op_type in NON_POINTWISE:
            raise Unsupported("not pointwise")
        if len(record.outs) != 1:
            raise Unsupported(f"{len(record.outs)} outputs")
        out_shape = self.out_shape(record)
        out_labels = [self.label() for _ in out_shape]
        operands = []
        for value in inputs:
            value, mapping = self.s.squeeze_to(value, len(out_shape), out_shape)
            operands.append((value, [out_labels[m] for m in mapping]))
        broadcast = {
            label: (size, "other") for label, size in zip(out_labels, out_shape, strict=True)
        }  # dimensions that every input broadcasts
        return self.s.apply(record.node.name, record.op_type, operands, out_labels, record.flops, new_labels=broadcast)

    def complex_view(self, record: OpRecord) -> Value:
        """``view_as_complex`` / ``view_as_real``: one conversion kernel per block, as the paper's system converts
        between real pairs and complex numbers in a step of its own; the pair is a whole trailing dimension of size 2."""
        value = self.tensor_args(record.node)[0]
        t = value.tensor
        to_complex = record.op_type == "view_as_complex"
        if to_complex:
            if value.shape[-1] != 2 or t.parts[-1] != 1 or value.groups[-1] != 1:
                raise Unsupported("the real pairs are not one whole trailing dimension")
            value = self.s.relabel(value, t.shape[:-1], t.parts[:-1], t.blocks.reshape(t.parts[:-1]), value.kinds[:-1], value.groups[:-1])
        labels = [self.label() for _ in value.shape]
        out_points = math.prod(self.out_shape(record))  # complex numbers, or the reals they become
        out = self.s.apply(record.node.name, record.op_type, [(value, labels)], labels, record.flops, points=out_points)
        if to_complex:
            return out
        t = out.tensor
        return self.s.relabel(out, t.shape + (2,), t.parts + (1,), t.blocks[..., None], out.kinds + ("other",), out.groups + (1,))

    def reduce(self, record: OpRecord) -> Any:
        node = record.node
        inputs = self.tensor_args(node)
        if len(inputs) != 1:  # torch.max(a, b) and friends are elementwise
            return self.elementwise(record)
        value = inputs[0]
        if not self.computed(value):
            raise Unsupported("reads no computed tensor (a constant)")
        if record.op_type in ("cumsum", "cumprod", "var_mean"):
            raise Unsupported("a scan" if record.op_type != "var_mean" else "two results")
        rank = len(value.shape)
        reduced = op_dims(self.arg(1, "dim"), rank) if rank else []
        combine = "partial_max" if record.op_type in MAX_COMBINE else "partial_sum"
        labels = [self.label() for _ in value.shape]
        kept = [labels[d] for d in range(rank) if d not in reduced]
        out = self.s.apply(node.name, record.op_type, [(value, labels)], kept, record.flops, combine=combine)
        if self.arg(2, "keepdim", False):
            for d in reduced:
                out = self.s.insert_dim(out, d)
        if len(record.outs) == 2:  # (values, indices)
            return (out, out)
        if tuple(out.shape) != self.out_shape(record):
            raise Unsupported(f"reduction result {out.shape} is not the traced {self.out_shape(record)}")
        return out

    def normalise(self, record: OpRecord, value: Value, reduced: list[int]) -> Value:
        """A normalisation over ``reduced`` (5 FLOPs per element): one kernel per block when those dimensions are
        whole, else statistics with partial sums (sum and sum of squares, 2 FLOPs), then normalise and scale (3)."""
        name, flops = record.node.name, int(record.flops)
        labels = [self.label() for _ in value.shape]
        if not any(p > 1 for d in reduced for p in self.s_parts(value, d)):
            return self.s.apply(name, record.op_type, [(value, labels)], labels, flops)
        kept = [labels[d] for d in range(len(labels)) if d not in reduced]
        stats = self.s.apply(f"{name}.stats", f"{record.op_type}_stats", [(value, labels)], kept, flops * 2 // 5)
        return self.s.apply(f"{name}.apply", record.op_type, [(value, labels), (stats, kept)], labels, flops - flops * 2 // 5)

    def norm(self, record: OpRecord) -> Value:
        value = self.tensor_args(record.node)[0]
        rank = len(value.shape)
        sub = record.submodule
        if "batch" in record.op_type and "norm" in record.op_type:  # inference batch norm: a per-channel affine map
            reduced = []
        elif sub is not None and hasattr(sub, "normalized_shape"):
            reduced = list(range(rank - len(sub.normalized_shape), rank))
            if self.s.einsum_steps and "layer" in record.op_type:
                return self.layer_norm_steps(record, value, reduced, sub.weight is not None, getattr(sub, "bias", None) is not None)
        elif record.op_type in ("layer_norm", "native_layer_norm"):
            reduced = list(range(rank - len(self.arg(1, "normalized_shape")), rank))
            if self.s.einsum_steps:
                return self.layer_norm_steps(record, value, reduced, self.arg(2, "weight") is not None, self.arg(3, "bias") is not None)
        else:  # group / instance norm: statistics over everything but the batch
            reduced = list(range(1, rank))
        return self.normalise(record, value, reduced)

    def layer_norm_steps(self, record: OpRecord, x: Value, reduced: list[int], weight: bool, bias: bool) -> Value:
        """Layer norm as the paper's system writes RMSNorm, after centring: sum, scale to the mean, subtract, square,
        sum, scale and add epsilon, reciprocal square root, multiply; then the gain and the bias (one step each)."""
        name = record.node.name
        labels = [self.label() for _ in x.shape]
        kept = [labels[d] for d in range(len(labels)) if d not in reduced]
        features = [labels[d] for d in reduced]
        elems, rows = math.prod(x.shape), math.prod(x.shape[d] for d in range(len(labels)) if d not in reduced)
        steps = ["sum", "mean", "sub", "square", "square_sum", "var_eps", "rsqrt", "normalise"] + ["weight"] * weight + ["bias"] * bias
        work = {"mean": rows, "var_eps": 2 * rows, "rsqrt": rows}
        flops = dict(zip(steps, shares(int(record.flops), [work.get(step, elems) for step in steps]), strict=True))
        full = (x, labels)
        total = self.s.apply(f"{name}.sum", "reduce_sum", [full], kept, flops["sum"])
        mean = self.s.apply(f"{name}.mean", "div", [(total, kept)], kept, flops["mean"])
        centred = self.s.apply(f"{name}.sub", "sub", [full, (mean, kept)], labels, flops["sub"])
        square = self.s.apply(f"{name}.square", "square", [(centred, labels)], labels, flops["square"])
        row = self.s.apply(f"{name}.square_sum", "reduce_sum", [(square, labels)], kept, flops["square_sum"])
        row = self.s.apply(f"{name}.var_eps", "scale_add", [(row, kept)], kept, flops["var_eps"])
        row = self.s.apply(f"{name}.rsqrt", "rsqrt", [(row, kept)], kept, flops["rsqrt"])
        y = self.s.apply(f"{name}.normalise", "mul", [(centred, labels), (row, kept)], labels, flops["normalise"])
        affine_shape = [x.shape[d] for d in reduced]
        affine_kinds = [x.kinds[x.factor_slice(d).start] for d in reduced]
        for step, op_type in (("weight", "mul"), ("bias", "add")):
            if step in flops:
                param = self.s.free(f"{name}.{step}", affine_shape, affine_kinds)
                y = self.s.apply(f"{name}.{step}", op_type, [(y, labels), (param, features)], labels, flops[step])
        return y

    def softmax(self, record: OpRecord) -> Value:
        value = self.tensor_args(record.node)[0]
        dim = self.arg(1, "dim")
        if dim is None:
            raise Unsupported("softmax without dim")
        reduced = [dim % len(value.shape)]
        # 5 FLOPs per element: max 1, exp(x - max) 2, sum 1, divide 1
        labels = [self.label() for _ in value.shape]
        if not self.s.einsum_steps and not any(p > 1 for p in self.s_parts(value, reduced[0])):
            return self.s.apply(record.node.name, record.op_type, [(value, labels)], labels, int(record.flops))
        return self.split_softmax(record.node.name, value, labels, reduced[0], int(record.flops))
