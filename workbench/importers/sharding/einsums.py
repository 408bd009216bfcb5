"""Op rules for contractions: linear layers, matmuls, einsum, attention, and embeddings."""

from __future__ import annotations

import math
from typing import Any

from ..torch_fx import OpRecord
from .base import WalkerBase
from .values import (
    Unsupported,
    Value,
    shares,
)


class EinsumRules(WalkerBase):
    """Linear layers, matmuls, einsum, attention and embeddings as block einsums."""

    def matmul(self, record: OpRecord) -> Value:
        node, op_type = record.node, record.op_type
        args = self.tensor_args(node)
        if op_type == "einsum":
            equation = str(self.args[0]).replace(" ", "")
            lhs, _, rhs = equation.partition("->")
            if "." in equation or not rhs:
                raise Unsupported("einsum with ellipsis or implicit output")
            operands = [(v, list(spec)) for v, spec in zip(args, lhs.split(","), strict=False)]
            return self.s.apply(node.name, "einsum", operands, list(rhs), record.flops)
        if op_type == "linear":
            x = args[0]
            if any(v.produced for v in args[1:]):
                raise Unsupported("a computed weight")
            labels = [self.label() for _ in x.shape]
            out_features = self.label()
            weight_value = self.s.free(f"{node.name}.weight", (self.out_shape(record)[-1], x.shape[-1]), ("hidden", "hidden"))
            out_labels = labels[:-1] + [out_features]
            has_bias = record.flops != 2 * math.prod(self.out_shape(record)) * x.shape[-1]
            flops, bias_flops = self.bias_split(record, has_bias)
            y = self.s.apply(node.name, "linear", [(x, labels), (weight_value, [out_features, labels[-1]])], out_labels, flops)
            if not bias_flops:
                return y
            bias_vector = self.s.free(f"{node.name}.bias", (self.out_shape(record)[-1],), ("hidden",))
            return self.s.apply(f"{node.name}.bias", "add", [(y, out_labels), (bias_vector, [out_features])], out_labels, bias_flops)
        bias: Value | None = None
        if op_type in ("addmm", "baddbmm", "addbmm"):
            bias, args = (args[0], args[1:]) if len(args) == 3 else (None, args)
        if len(args) != 2:
            raise Unsupported(f"{len(args)} tensor operands")
        a, b = args
        if len(a.shape) < 2 or len(b.shape) < 2:
            raise Unsupported("vector operand")
        out_shape = self.out_shape(record)
        if op_type == "addbmm":
            raise Unsupported("batch-reducing matmul")
        rank = len(out_shape)
        out_labels = [self.label() for _ in out_shape]
        contracted = self.label()
        operands = []
        for value, own in ((a, [out_labels[-2], contracted]), (b, [contracted, out_labels[-1]])):
            batch = value.shape[:-2]
            offset = rank - 2 - len(batch)
            keep = [d for d, size in enumerate(batch) if size == out_shape[offset + d]]
            if any(size != 1 for d, size in enumerate(batch) if d not in keep):
                raise Unsupported("batch dimensions do not broadcast")
            value = self.s.select_dims(value, keep + [len(batch), len(batch) + 1])
            operands.append((value, [out_labels[offset + d] for d in keep] + own))
        flops, bias_flops = self.bias_split(record, bias is not None)
        y = self.s.apply(node.name, "matmul", operands, out_labels, flops)
        if not bias_flops or bias is None:
            return y
        bias, mapping = self.s.squeeze_to(bias, rank, out_shape)
        return self.s.apply(f"{node.name}.bias", "add", [(y, out_labels), (bias, [out_labels[m] for m in mapping])], out_labels, bias_flops)

    def bias_split(self, record: OpRecord, has_bias: bool) -> tuple[int, int]:
        """(product FLOPs, bias FLOPs): in the einsum style a bias is its own elementwise step (one FLOP per output element)."""
        bias_flops = math.prod(self.out_shape(record)) if has_bias and self.s.einsum_steps else 0
        return int(record.flops) - bias_flops, bias_flops

    def attention(self, record: OpRecord) -> Any:
        if record.op_type == "multiheadattention":
            return self.multihead(record)
        node = record.node
        q, k, v = (self.value(a) for a in self.args[:3])
        mask = self.value(self.arg(3, "attn_mask"))
        causal = bool(self.arg(5, "is_causal", False))
        *batch, s, d = q.shape
        t, e = k.shape[-2], v.shape[-1]
        rows = math.prod(batch) * s
        flops = int(record.flops)
        score_flops, soft_flops = 2 * rows * t * d, 5 * rows * t
        if score_flops + soft_flops + 2 * rows * t * e != flops:
            raise Unsupported("attention shapes do not match its FLOPs")
        b_labels = [self.label() for _ in batch]
        ls, lt, ld, le = self.label(), self.label(), self.label(), self.label()
        scores = self.s.apply(
            f"{node.name}.scores", "matmul", [(q, b_labels + [ls, ld]), (k, b_labels + [lt, ld])], b_labels + [ls, lt], score_flops
        )
        if causal and mask is None and self.s.einsum_steps:  # the causal mask as an added input, as the paper's system writes it
            mask = self.s.free(f"{node.name}.causal_mask", (s, t), (scores.kinds[scores.factor_slice(len(batch)).start], scores.kinds[-1]))
        probs = self.masked_softmax(node.name, scores, b_labels + [ls, lt], mask, soft_flops)
        return self.s.apply(
            f"{node.name}.context",
            "matmul",
            [(probs, b_labels + [ls, lt]), (v, b_labels + [lt, le])],
            b_labels + [ls, le],
            flops - score_flops - soft_flops,
        )

    def masked_softmax(self, name: str, scores: Value, labels: list[str], mask: Value | None, flops: int) -> Value:
        """Mask and softmax of attention scores. The torch style folds the 1/sqrt(d) scale into the scores and joins the
        mask at no FLOP cost; the einsum style scales and masks in their own steps (sharing the softmax's FLOPs)."""
        if self.s.einsum_steps:
            scale_flops, mask_flops, flops = shares(flops, [1, mask is not None, 5])
            scores = self.s.apply(f"{name}.scale", "mul", [(scores, labels)], labels, scale_flops)
        if mask is not None:
            mask, mapping = self.s.squeeze_to(mask, len(labels), scores.shape)
            op_type, cost = ("add", mask_flops) if self.s.einsum_steps else ("mask", 0)
            scores = self.s.apply(f"{name}.mask", op_type, [(scores, labels), (mask, [labels[m] for m in mapping])], labels, cost)
        if self.s.einsum_steps or any(p > 1 for p in self.s_parts(scores, len(labels) - 1)):
            return self.split_softmax(f"{name}.softmax", scores, labels, len(labels) - 1, flops)
        return self.s.apply(f"{name}.softmax", "softmax", [(scores, labels)], labels, flops)

    def multihead(self, record: OpRecord) -> tuple:
        """``nn.MultiheadAttention``: Q/K/V projections split by heads, attention per head, output projection."""
        node, module = record.node, record.submodule
        query, key, value = (self.value(a) for a in self.args[:3])
        if not module.batch_first or not module._qkv_same_embed_dim or len(query.shape) != 3:
            raise Unsupported("only batch_first attention with equal q/k/v widths")
        batch, s, width = query.shape
        t = key.shape[1]
        heads = module.num_heads
        head_dim = width // heads
        lb, ls, lt, lh, ln, ld, lo = (self.label() for _ in range(7))
        new = {ln: (heads, "heads"), ld: (head_dim, "head_dim")}
        projected, spent = {}, 0
        for part, source, length in (("q", query, ls), ("k", key, lt), ("v", value, lt)):
            weight = self.s.free(f"{node.name}.W{part}", (width, heads, head_dim), ("hidden", "heads", "head_dim"))
            flops = 2 * batch * source.shape[1] * width * width
            projected[part] = self.s.apply(
                f"{node.name}.{part}_proj",
                "linear",
                [(source, [lb, length, lh]), (weight, [lh, ln, ld])],
                [lb, length, ln, ld],
                flops,
                new_labels=new,
                whole=[ld],
            )
            spent += flops
        flops = 2 * batch * s * t * width
        scores = self.s.apply(
            f"{node.name}.scores",
            "matmul",
            [(projected["q"], [lb, ls, ln, ld]), (projected["k"], [lb, lt, ln, ld])],
            [lb, ln, ls, lt],
            flops,
            whole=[ld],
        )
        probs = self.masked_softmax(node.name, scores, [lb, ln, ls, lt], None, 5 * batch * heads * s * t)
        context = self.s.apply(
            f"{node.name}.context",
            "matmul",
            [(probs, [lb, ln, ls, lt]), (projected["v"], [lb, lt, ln, ld])],
            [lb, ls, ln, ld],
            flops,
            whole=[ld],
        )
        spent += 2 * flops + 5 * batch * heads * s * t
        w_out = self.s.free(f"{node.name}.Wo", (heads, head_dim, width), ("heads", "head_dim", "hidden"))
        out = self.s.apply(
            f"{node.name}.out_proj",
            "linear",
            [(context, [lb, ls, ln, ld]), (w_out, [ln, ld, lo])],
            [lb, ls, lo],
            int(record.flops) - spent,
            new_labels={lo: (width, "hidden")},
            whole=[ld],
        )
        return (out, None)

    def embedding(self, record: OpRecord) -> Value:
        node = record.node
        ids = self.tensor_args(node)[0]
        out_shape = self.out_shape(record)
        labels = [self.label() for _ in ids.shape]
        width = self.label()
        return self.s.apply(
            node.name,
            record.op_type,
            [(ids, labels)],
            labels + [width],
            record.flops,
            points=math.prod(out_shape),
            new_labels={width: (out_shape[-1], "hidden")},
        )
