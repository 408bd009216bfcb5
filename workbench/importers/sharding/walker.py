"""The walk over a traced graph: each op's rule looked up in one table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..torch_fx import OpRecord
from .einsums import EinsumRules
from .layout import LayoutRules
from .pointwise import PointwiseRules
from .spatial import SpatialRules

Rule = Callable[[Any, OpRecord], Any]

RULES: dict[str, Rule] = {
    "matmul": EinsumRules.matmul,
    "attention": EinsumRules.attention,
    "embedding": EinsumRules.embedding,
    "conv": SpatialRules.conv,
    "pool": SpatialRules.pool,
    "norm": PointwiseRules.norm,
    "softmax": PointwiseRules.softmax,
    "reduce": PointwiseRules.reduce,
}
"""The rule for each op category (:func:`~workbench.importers.torch_fx.op_records`); any other category is elementwise."""

OP_TYPE_RULES: dict[str, Rule] = {
    **dict.fromkeys(("cat", "concat", "concatenate", "stack"), LayoutRules.cat),
    **dict.fromkeys(("view_as_complex", "view_as_real"), PointwiseRules.complex_view),
}
"""Op types whose rule overrides their category's."""


class Walker(PointwiseRules, EinsumRules, SpatialRules, LayoutRules):
    """Walks the traced graph in order, giving each fx value its blocks by its op's rule."""

    def op(self, record: OpRecord) -> Any:
        node = record.node
        self.args, self.kwargs = self.concrete(tuple(node.args)), {k: self.concrete(v) for k, v in node.kwargs.items()}
        if record.op_type == "getitem" and isinstance(self.value(self.args[0]), (tuple, list)):
            return self.value(self.args[0])[self.args[1]]
        if record.category == "view":
            return self.view(record)
        rule = OP_TYPE_RULES.get(record.op_type) or RULES.get(record.category, PointwiseRules.elementwise)
        return rule(self, record)
