"""Op rules for images: convolutions and pooling."""

from __future__ import annotations

import math

from ..torch_fx import OpRecord
from .base import WalkerBase
from .values import (
    Unsupported,
    Value,
)


class SpatialRules(WalkerBase):
    """Convolutions (split along batch and channels) and pooling."""

    def conv(self, record: OpRecord) -> Value:
        node, module = record.node, record.submodule
        x = self.tensor_args(node)[0]
        out_shape = self.out_shape(record)
        groups = module.groups if module is not None else self.arg(6, "groups", 1)
        spatial = len(out_shape) - 2
        lb, lc = self.label(), self.label()
        in_spatial = [self.label() for _ in range(spatial)]
        out_spatial = [self.label() for _ in range(spatial)]
        new = {label: (size, "spatial") for label, size in zip(out_spatial, out_shape[2:], strict=True)}
        if groups > 1 and groups == x.shape[1] == out_shape[1]:  # depthwise: output channel c reads input channel c
            out_labels = [lb, lc] + out_spatial
        else:  # dense (grouped convolutions read all channel blocks: a superset of their true inputs)
            lo = self.label()
            new[lo] = (out_shape[1], "channels")
            out_labels = [lb, lo] + out_spatial
        kernel = math.prod(module.kernel_size) if module is not None else 1
        mult_adds = math.prod(out_shape) * (x.shape[1] // groups) * kernel
        return self.s.apply(
            node.name,
            record.op_type,
            [(x, [lb, lc] + in_spatial)],
            out_labels,
            record.flops,
            points=mult_adds,
            new_labels=new,
            whole=in_spatial + out_spatial,
        )

    def pool(self, record: OpRecord) -> Value:
        node = record.node
        x = self.tensor_args(node)[0]
        out_shape = self.out_shape(record)
        if len(record.outs) != 1 or len(out_shape) != len(x.shape):
            raise Unsupported("pooling with indices or a changed rank")
        lead = [self.label() for _ in x.shape[:2]]
        in_spatial = [self.label() for _ in x.shape[2:]]
        out_spatial = [self.label() for _ in out_shape[2:]]
        new = {label: (size, "spatial") for label, size in zip(out_spatial, out_shape[2:], strict=True)}
        return self.s.apply(
            node.name,
            record.op_type,
            [(x, lead + in_spatial)],
            lead + out_spatial,
            record.flops,
            points=math.prod(x.shape),
            new_labels=new,
            whole=in_spatial + out_spatial,
            combine="partial_max",
        )
