"""Op rules for views, reshapes, slicing, indexing and concatenation."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.fx

from ..torch_fx import OpRecord
from .base import WalkerBase, op_dims
from .values import (
    Unsupported,
    Value,
)


class LayoutRules(WalkerBase):
    """Views and reshapes relabel blocks; slicing and concatenation gather the blocks each new block overlaps."""

    def view(self, record: OpRecord) -> Any:
        op_type = record.op_type
        source = self.value(self.args[0])
        if not isinstance(source, Value):
            raise Unsupported("view of a non-tensor")
        rank = len(source.shape)
        out_shapes = [tuple(s) for s, _ in record.outs]
        if op_type in ("view", "reshape", "flatten", "unflatten", "view_as", "reshape_as", "unsafe_view"):
            return self.reshape(source, out_shapes[0])
        if op_type in ("permute", "transpose", "t", "movedim"):
            if op_type == "t":
                order = list(range(rank))[::-1]
            elif op_type == "transpose":
                a, b = (d % rank for d in self.args[1:3])
                order = list(range(rank))
                order[a], order[b] = order[b], order[a]
            elif op_type == "permute":
                dims = self.args[1:] if not isinstance(self.args[1], (list, tuple)) else self.args[1]
                order = [d % rank for d in dims]
            else:
                raise Unsupported("movedim")
            return self.s.select_dims(source, order)
        if op_type in ("detach", "alias", "identity"):
            return source
        if op_type == "unsqueeze":
            return self.s.insert_dim(source, self.arg(1, "dim") % (rank + 1))
        if op_type == "squeeze":
            dims = self.arg(1, "dim")
            drop = op_dims(dims, rank) if dims is not None else [d for d, s in enumerate(source.shape) if s == 1]
            return self.s.select_dims(source, [d for d in range(rank) if d not in drop or source.shape[d] != 1])
        if op_type in ("expand", "expand_as"):
            out_shape = out_shapes[0]
            value = source
            for _ in range(len(out_shape) - rank):
                value = self.s.insert_dim(value, 0)
            return value  # broadcast dimensions stay size 1 and are broadcast by the ops that read them
        if op_type in ("split", "chunk", "unbind", "split_with_sizes"):
            return self.split(record, source)
        if op_type in ("getitem", "select", "slice", "narrow"):
            return self.index(record, source)
        raise Unsupported(f"view {op_type}")

    def reshape(self, source: Value, new_shape: tuple[int, ...]) -> Value:
        if tuple(source.shape) == tuple(new_shape):
            return source
        value = source
        t = value.tensor
        factors = [(t.shape[f], value.kinds[f], t.parts[f]) for f in range(len(value.kinds)) if t.shape[f] != 1]
        if any(s > 1 for s in new_shape) and math.prod(s for s, _, _ in factors) != math.prod(new_shape):
            raise Unsupported(f"reshape of a broadcast {source.shape} to {new_shape}")
        out_factors: list[tuple[int, str, int]] = []
        groups: list[int] = []
        repart: dict[int, int] = {}
        i = 0
        original = [f for f in range(len(value.kinds)) if t.shape[f] != 1]
        pending = list(factors)
        for size in new_shape:
            if size == 1:
                out_factors.append((1, "other", 1))
                groups.append(1)
                continue
            group: list[tuple[int, str, int]] = []
            product = 1
            while product < size:
                if i >= len(pending):
                    raise Unsupported(f"reshape {source.shape} -> {new_shape}")
                f_size, f_kind, f_parts = pending[i]
                if product * f_size <= size:
                    group.append(pending[i])
                    product *= f_size
                    i += 1
                    continue
                outer = size // product
                if size % product or f_size % outer:
                    raise Unsupported(f"reshape {source.shape} -> {new_shape}")
                inner_kind = "head_dim" if f_kind == "hidden" else "other"
                outer_kind = "heads" if f_kind == "hidden" else f_kind
                wanted = f_parts if self.s.follow and not self.s.overridden(outer_kind, False) else self.s.count(outer_kind, outer)
                outer_parts = math.gcd(wanted, outer) if group == [] else 1
                if f_parts != outer_parts:
                    repart[original[i]] = outer_parts
                group.append((outer, outer_kind, outer_parts))
                pending[i] = (f_size // outer, inner_kind, 1)
                product *= outer
            if product != size:
                raise Unsupported(f"reshape {source.shape} -> {new_shape}")
            if len(group) > 1 and all(k == "spatial" for _, k, _ in group):  # image positions become a sequence of tokens
                group = [(size, "seq", 1)]
            out_factors.extend(group)
            groups.append(len(group))
        if i != len(pending) and any(s != 1 for s, _, _ in pending[i:]):
            raise Unsupported(f"reshape {source.shape} -> {new_shape}")
        if repart:  # a split factor whose blocks do not line up with its new outer factor
            parts = [repart.get(f, p) for f, p in enumerate(t.parts)]
            value = self.s.with_factor_parts(value, parts)
            t = value.tensor
        return self.s.relabel(
            value, [s for s, _, _ in out_factors], [p for _, _, p in out_factors], t.blocks, [k for _, k, _ in out_factors], groups
        )

    def slice_dim(self, name: str, value: Value, dim: int, start: int, stop: int) -> Value:
        size = value.shape[dim]
        if start == 0 and stop == size:
            return value
        value = self.s.merge_dim(value, dim)
        t = value.tensor
        f = value.factor_slice(dim).start
        shape = list(t.shape)
        shape[f] = stop - start
        parts = list(t.parts)
        parts[f] = self.s.count(value.kinds[f], stop - start)
        offsets = [0] * len(shape)
        offsets[f] = -start
        tensor = self.s.program.gather(name, "slice", shape, parts, [(t, offsets)])
        return Value(tensor, value.kinds, value.groups)

    def split(self, record: OpRecord, source: Value) -> list[Value]:
        node = record.node
        dim = self.arg(2 if record.op_type != "unbind" else 1, "dim", 0) % len(source.shape)
        pieces, start = [], 0
        for index, (shape, _) in enumerate(record.outs):
            length = shape[dim] if record.op_type != "unbind" else 1
            piece = self.slice_dim(f"{node.name}.{index}", source, dim, start, start + length)
            if record.op_type == "unbind":
                piece = self.s.select_dims(piece, [d for d in range(len(source.shape)) if d != dim])
            pieces.append(piece)
            start += length
        return pieces

    def index(self, record: OpRecord, source: Value) -> Value:
        node, op_type = record.node, record.op_type
        rank = len(source.shape)
        if op_type == "select":
            dim, at = self.args[1] % rank, self.args[2] % source.shape[self.args[1] % rank]
            value = self.slice_dim(node.name, source, dim, at, at + 1)
            return self.s.select_dims(value, [d for d in range(rank) if d != dim])
        if op_type == "narrow":
            dim, start, length = self.args[1] % rank, self.args[2], self.args[3]
            return self.slice_dim(node.name, source, dim, start, start + length)
        if op_type == "slice":
            raise Unsupported("aten slice")
        index = self.concrete(self.args[1])
        index = index if isinstance(index, tuple) else (index,)
        if any(isinstance(i, torch.fx.Node) for i in index):
            raise Unsupported("tensor index")
        if Ellipsis in index:
            at = index.index(Ellipsis)
            fill = rank - (len(index) - 1 - sum(i is None for i in index))
            index = index[:at] + (slice(None),) * fill + index[at + 1 :]
        value, dim, drop = source, 0, []
        for item in index:
            if item is None:
                value = self.s.insert_dim(value, dim)
                dim += 1
            elif isinstance(item, int):
                at = item % value.shape[dim]
                value = self.slice_dim(node.name, value, dim, at, at + 1)
                drop.append(dim)
                dim += 1
            elif isinstance(item, slice):
                start, stop, step = item.indices(value.shape[dim])
                if step != 1:
                    raise Unsupported("strided slice")
                value = self.slice_dim(node.name, value, dim, start, max(start, stop))
                dim += 1
            else:
                raise Unsupported(f"index {item!r}")
        return self.s.select_dims(value, [d for d in range(len(value.shape)) if d not in drop])

    def cat(self, record: OpRecord) -> Value:
        node = record.node
        pieces = [self.value(a) for a in self.args[0]]
        if any(not isinstance(p, Value) for p in pieces):
            raise Unsupported("concatenates a non-tensor")
        out_shape = self.out_shape(record)
        dim = self.arg(1, "dim", 0) % len(out_shape)
        if record.op_type == "stack":
            pieces = [self.s.insert_dim(p, dim) for p in pieces]
        pieces = [self.s.merge_dim(p, dim) for p in pieces]
        reference = max(pieces, key=lambda p: (p.produced, p.shape[dim]))
        structure = {d: reference.factors(d) for d in range(len(out_shape)) if d != dim}
        conformed = []
        for piece in pieces:
            for d, factors in structure.items():
                piece = self.s.conform(piece, d, factors, [self.s.count(k, s) for s, k in factors])
            conformed.append(piece)
        t = reference.tensor
        f = reference.factor_slice(dim).start
        shape, parts = list(t.shape), list(conformed[0].tensor.parts)
        shape[f] = out_shape[dim]
        parts[f] = self.s.count(reference.kinds[f], out_shape[dim])
        sources, offset = [], 0
        for piece in conformed:
            offsets = [0] * len(shape)
            offsets[f] = offset
            sources.append((piece.tensor, offsets))
            offset += piece.shape[dim]
        tensor = self.s.program.gather(node.name, record.op_type, shape, parts, sources, flops=int(record.flops))
        return Value(tensor, reference.kinds, reference.groups)
