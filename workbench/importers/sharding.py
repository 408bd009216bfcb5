"""Shard a traced model into a partitioned block graph: one node per block kernel.

A model's operator graph (:func:`~workbench.importers.from_torch`) is mostly
a chain, and placement has nothing to decide on it. The DOPPLER paper's
graphs are partitioned tensor programs instead: each einsum is split into
block kernels along its dimensions (EinDecomp: Bourgeois et al., 2024), which
is where the parallelism comes from. :func:`shard` gives a traced model that
treatment with the machinery of the paper families
(:class:`~workbench.generators.blocks.BlockProgram`):

- every tensor dimension has a *kind*, followed through the program:
  ``batch`` and ``seq`` (model inputs), ``hidden`` (feature dimensions of
  linear layers and embeddings), ``heads`` and ``head_dim`` (a hidden
  dimension reshaped into two), ``channels`` and ``spatial`` (images);
  ``parts`` says how many blocks each kind is split into (``spatial``,
  ``head_dim`` and unnamed dimensions stay whole);
- linear layers, matmuls, ``einsum`` and attention are block einsums (a
  split contracted dimension adds one ``partial_sum`` node per output block);
  softmax and normalisations reduce over a split dimension with partial
  results (``partial_max`` / ``partial_sum``) before they normalise;
  elementwise ops, embeddings, reductions and pooling are one kernel per
  block; convolutions are split along batch and channels; views, reshapes
  and permutes are free relabelings, and slicing or concatenating gathers
  the blocks each new block overlaps;
- an op that none of this covers stays one node that reads every block of
  its inputs, and is listed in ``metadata["unsharded"]``.
- ``kernels="einsum"`` writes each op as the steps of the paper's system
  instead (its graph writer in github.com/dcbdan/einsummable): a
  ``formation`` node after every contraction and reduction, layer norm,
  softmax and attention step by step, a linear's bias as its own step.

Each op's FLOPs (the conventions of :func:`from_torch`) are shared exactly
among its kernels; the partial-result nodes' additions are counted apart
(``metadata["combine_flops"]``), so the graph's ``total_flops`` minus them
equals the traced model's ``total_flops``. Costs come from a cost model:
``roofline`` on a device profile, or the paper files' convention.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import torch
import torch.fx

from ..generators.blocks import BlockProgram, BlockTensor, CostModel
from ..generators.profiles import DeviceProfile, get_profile
from ..graph import DataflowGraph
from .torch_fx import OpRecord, Traced, op_records, trace_module

__all__ = ["shard", "shard_traced", "parse_parts", "auto_parts", "SPLIT_KINDS", "KERNEL_STYLES", "PartsError"]

SPLIT_KINDS = ("batch", "seq", "heads", "hidden", "channels")
"""Dimension kinds that ``parts`` may split (all others stay whole)."""

KERNEL_STYLES = ("torch", "einsum")
"""How ops become kernels: ``torch``, one kernel per traced op and block (partial results only where a reduced
dimension is split); ``einsum``, the steps the paper's system writes (see :func:`shard`)."""

_NON_POINTWISE = frozenset(
    {
        "gather",
        "index_select",
        "scatter",
        "scatter_add",
        "cumsum",
        "cumprod",
        "roll",
        "flip",
        "pad",
        "interpolate",
        "upsample",
        "sort",
        "topk",
        "repeat",
        "repeat_interleave",
        "tile",
        "index",
        "take",
        "one_hot",
        "diff",
        "cross",
        "argsort",
        "nonzero",
        "masked_select",
        "unique",
        "bincount",
        "histc",
        "diag",
        "tril_indices",
        "triu_indices",
    }
)
_MAX_COMBINE = frozenset({"amax", "amin", "max", "min", "argmax", "argmin", "all", "any"})


class PartsError(ValueError):
    """Bad partition counts (an unknown kind, a count below 1) or an unreachable node target."""


class _Unsupported(Exception):
    """This op cannot be sharded: it becomes one node (the message says why)."""


def parse_parts(text: str | Mapping[str, int] | None, extra: Sequence[str] = ()) -> dict[str, int]:
    """``"batch=2,heads=4"`` (or a dict) → ``{"batch": 2, "heads": 4}``; a clear error for anything else.

    ``extra`` names keys allowed besides :data:`SPLIT_KINDS` (``reduced`` in ``op_parts``)."""
    if text is None:
        return {}
    if isinstance(text, str):
        items = {}
        for item in filter(None, (t.strip() for t in text.split(","))):
            kind, sep, count = item.partition("=")
            if not sep:
                raise PartsError(f"parts {text!r}: expected KIND=COUNT pairs such as batch=2,heads=4")
            try:
                items[kind.strip()] = int(count)
            except ValueError:
                raise PartsError(f"parts {text!r}: {count!r} is not an integer") from None
        text = items
    unknown = sorted(set(text) - set(SPLIT_KINDS) - set(extra))
    if unknown:
        raise PartsError(f"unknown dimension kind(s) {', '.join(unknown)} in parts; kinds: {', '.join((*SPLIT_KINDS, *extra))}")
    bad = {k: v for k, v in text.items() if not isinstance(v, int) or v < 1}
    if bad:
        raise PartsError(f"parts must be integers >= 1, got {bad}")
    return dict(text)


@dataclass(frozen=True)
class _Value:
    """A traced tensor as blocks: ``tensor`` is split per *factor*; dimension ``d`` groups ``groups[d]`` consecutive factors."""

    tensor: BlockTensor
    kinds: tuple[str, ...]
    groups: tuple[int, ...]

    @property
    def produced(self) -> bool:
        return bool((self.tensor.blocks >= 0).any())

    def factor_slice(self, dim: int) -> slice:
        start = sum(self.groups[:dim])
        return slice(start, start + self.groups[dim])

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(math.prod(self.tensor.shape[self.factor_slice(d)]) for d in range(len(self.groups)))

    def factors(self, dim: int) -> list[tuple[int, str]]:
        sl = self.factor_slice(dim)
        return list(zip(self.tensor.shape[sl], self.kinds[sl], strict=True))


def _letters():
    for code in range(ord("a"), ord("z") + 1):
        yield chr(code)
    for code in range(ord("A"), ord("Z") + 1):
        yield chr(code)


def _shares(total: int, weights: Sequence[float]) -> list[int]:
    """``total`` split in integers proportional to ``weights``, adding up to it exactly."""
    bounds = np.concatenate([[0.0], np.cumsum(weights)]) / sum(weights)
    cuts = [int(total * b) for b in bounds[:-1]] + [int(total)]
    return [b - a for a, b in pairwise(cuts)]


def parse_op_parts(op_parts: Mapping[str, str | Mapping[str, int]] | None) -> list[tuple[re.Pattern[str], dict[str, int]]]:
    """``{"wq": "hidden=2,reduced=2"}`` → compiled patterns and parsed parts (``reduced``: the contracted dimensions)."""
    parsed = []
    for pattern, parts in (op_parts or {}).items():
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise PartsError(f"op_parts pattern {pattern!r}: {exc}") from None
        parsed.append((compiled, parse_parts(parts, extra=("reduced",))))
    return parsed


class _Sharder:
    def __init__(
        self,
        program: BlockProgram,
        parts: Mapping[str, int],
        einsum_steps: bool = False,
        op_parts: list[tuple[re.Pattern[str], dict[str, int]]] | None = None,
    ) -> None:
        self.program = program
        self.parts = dict(parts)
        self.einsum_steps = einsum_steps
        self.unsharded: list[dict[str, str]] = []
        self.op_parts = op_parts
        self.override: dict[str, int] = {}  # the parts that op_parts gives the op being sharded

    @property
    def follow(self) -> bool:
        """Per-op partitions: an op's dimensions keep their operands' splits unless ``op_parts`` says otherwise."""
        return self.op_parts is not None

    def enter(self, op_name: str) -> None:
        """Sharding op ``op_name`` next: the first ``op_parts`` pattern that matches its whole name applies."""
        self.override = next((parts for pattern, parts in self.op_parts or () if pattern.fullmatch(op_name)), {})

    def count(self, kind: str, size: int, reduced: bool = False) -> int:
        if self.overridden(kind, reduced):
            count = self.override["reduced" if reduced else kind]
        else:
            count = self.parts.get(kind, 1) if kind in SPLIT_KINDS else 1
        return max(1, min(count, size))

    def overridden(self, kind: str, reduced: bool) -> bool:
        """Whether ``op_parts`` sets this dimension of the current op: its kind for an output one, ``reduced`` for a contracted one."""
        return ("reduced" if reduced else kind) in self.override

    # ------------------------------------------------------------ values
    def free(self, name: str, shape: Sequence[int], kinds: Sequence[str]) -> _Value:
        shape = tuple(int(s) for s in shape)
        tensor = self.program.input(name, shape, [self.count(k, s) for k, s in zip(kinds, shape, strict=False)])
        return _Value(tensor, tuple(kinds), (1,) * len(shape))

    def relabel(self, value: _Value, tensor_shape, parts, blocks, kinds, groups) -> _Value:
        tensor = BlockTensor(
            value.tensor.name, tuple(int(s) for s in tensor_shape), tuple(int(p) for p in parts), np.asarray(blocks).reshape(tuple(parts))
        )
        return _Value(tensor, tuple(kinds), tuple(groups))

    def with_factor_parts(self, value: _Value, parts: Sequence[int]) -> _Value:
        tensor = self.program.repartition(value.tensor, parts)
        return _Value(tensor, value.kinds, value.groups)

    def select_dims(self, value: _Value, dims: Sequence[int]) -> _Value:
        """``value`` with its dimensions ``dims``, in that order (a permutation, or dropping size-1 dimensions)."""
        if list(dims) == list(range(len(value.groups))):
            return value
        factors = [f for d in dims for f in range(*value.factor_slice(d).indices(len(value.kinds)))]
        dropped = [f for f in range(len(value.kinds)) if f not in factors]
        t = value.tensor
        if any(t.shape[f] != 1 for f in dropped):
            raise _Unsupported(f"cannot drop a dimension of size > 1 from {value.shape}")
        return self.relabel(
            value,
            [t.shape[f] for f in factors],
            [t.parts[f] for f in factors],
            t.blocks.transpose(factors + dropped).reshape([t.parts[f] for f in factors]),
            [value.kinds[f] for f in factors],
            [value.groups[d] for d in dims],
        )

    def merge_dim(self, value: _Value, dim: int) -> _Value:
        """Dimension ``dim`` as one factor (gathering its blocks first unless only its outermost factor is split)."""
        sl = value.factor_slice(dim)
        t = value.tensor
        if value.groups[dim] == 1:
            return value
        factor_kinds = value.kinds[sl]
        if any(p > 1 for p in t.parts[sl][1:]):
            parts = list(t.parts)
            for f in range(sl.start, sl.stop):
                parts[f] = 1
            value = self.with_factor_parts(value, parts)
            t = value.tensor
        merged_kind = next((k for k, p in zip(factor_kinds, t.parts[sl], strict=True) if p > 1), factor_kinds[0])
        shape = list(t.shape[: sl.start]) + [math.prod(t.shape[sl])] + list(t.shape[sl.stop :])
        parts = list(t.parts[: sl.start]) + [math.prod(t.parts[sl])] + list(t.parts[sl.stop :])
        kinds = list(value.kinds[: sl.start]) + [merged_kind] + list(value.kinds[sl.stop :])
        groups = list(value.groups)
        groups[dim] = 1
        return self.relabel(value, shape, parts, t.blocks, kinds, groups)

    def conform(self, value: _Value, dim: int, structure: list[tuple[int, str]], parts: list[int]) -> _Value:
        """Dimension ``dim`` of ``value`` with the factors ``structure`` split into ``parts`` (relabel, gather or slice as needed)."""
        total = math.prod(s for s, _ in structure)
        if value.shape[dim] == 1 and total > 1:  # a broadcast dimension: its one block stands for every index
            value = self.select_dims(value, [d for d in range(len(value.groups)) if d != dim])
            value = self.insert_dim(value, dim)
            f = value.factor_slice(dim).start
            t = value.tensor
            value = self.relabel(value, t.shape[:f] + (total,) + t.shape[f + 1 :], t.parts, t.blocks, value.kinds, value.groups)
        if [s for s, _ in value.factors(dim)] != [s for s, _ in structure]:
            if total != value.shape[dim]:
                raise _Unsupported(f"dimension of size {value.shape[dim]} meets size {total}")
            value = self.merge_dim(value, dim)
            sl = value.factor_slice(dim)
            t = value.tensor
            if t.parts[sl.start] > 1:  # gather, then split the dimension into the structure's factors
                value = self.with_factor_parts(value, [1 if f == sl.start else p for f, p in enumerate(t.parts)])
                t = value.tensor
            sizes = [s for s, _ in structure]
            value = self.relabel(
                value,
                list(t.shape[: sl.start]) + sizes + list(t.shape[sl.stop :]),
                list(t.parts[: sl.start]) + [1] * len(sizes) + list(t.parts[sl.stop :]),
                t.blocks,
                list(value.kinds[: sl.start]) + [k for _, k in structure] + list(value.kinds[sl.stop :]),
                [len(sizes) if d == dim else g for d, g in enumerate(value.groups)],
            )
        sl = value.factor_slice(dim)
        target = list(value.tensor.parts)
        target[sl] = parts
        return self.with_factor_parts(value, target)

    def squeeze_to(self, value: _Value, rank: int, out_shape: Sequence[int]) -> tuple[_Value, list[int]]:
        """Right-align ``value`` with an output of ``out_shape``; size-1 (broadcast) dimensions are dropped.

        Returns the value and, per remaining dimension, the output dimension it maps to.
        """
        offset = rank - len(value.shape)
        if offset < 0:
            raise _Unsupported(f"operand of rank {len(value.shape)} for an output of rank {rank}")
        keep, mapping = [], []
        for d, size in enumerate(value.shape):
            if size == out_shape[offset + d]:
                keep.append(d)
                mapping.append(offset + d)
            elif size != 1:
                raise _Unsupported(f"operand shape {value.shape} does not broadcast to {tuple(out_shape)}")
        return self.select_dims(value, keep), mapping

    def insert_dim(self, value: _Value, dim: int) -> _Value:
        """A new size-1 dimension at ``dim``."""
        start = sum(value.groups[:dim])
        t = value.tensor
        return self.relabel(
            value,
            list(t.shape[:start]) + [1] + list(t.shape[start:]),
            list(t.parts[:start]) + [1] + list(t.parts[start:]),
            t.blocks,
            list(value.kinds[:start]) + ["other"] + list(value.kinds[start:]),
            list(value.groups[:dim]) + [1] + list(value.groups[dim:]),
        )

    # ------------------------------------------------------------ einsum over dimensions
    def apply(
        self,
        name: str,
        op_type: str,
        operands: Sequence[tuple[_Value, Sequence[str]]],
        out_labels: Sequence[str],
        flops: int,
        *,
        points: float | None = None,
        combine: str = "partial_sum",
        new_labels: Mapping[str, tuple[int, str]] | None = None,
        whole: Sequence[str] = (),
    ) -> _Value:
        """One kernel per block of the iteration space: ``operands`` are (value, one label per dimension).

        A label's factors and kinds come from the first operand that computes
        it (else the first that has it); ``new_labels`` gives the size and
        kind of labels that no operand has (a weight's output features); each
        factor is split by its kind, except labels in ``whole``.
        """
        structure: dict[str, list[tuple[int, str]]] = {}
        for value, labels in sorted(operands, key=lambda op: not op[0].produced):
            if len(labels) != len(value.shape):
                raise _Unsupported(f"{len(labels)} labels for an operand of rank {len(value.shape)}")
            for d, label in enumerate(labels):
                structure.setdefault(label, value.factors(d))
        for label, (size, kind) in (new_labels or {}).items():
            structure.setdefault(label, [(size, kind)])
        if set(out_labels) - set(structure):
            raise _Unsupported("an output dimension that no input has")
        made: dict[str, list[int]] = {}  # per-op partitions: each label as the first produced operand splits it
        for value, labels in operands:
            for d, label in enumerate(labels):
                if self.follow and value.produced and label not in made and value.factors(d) == structure[label]:
                    made[label] = list(value.tensor.parts[value.factor_slice(d)])
        parts = {}
        for label, factors in structure.items():
            reduced = label not in out_labels
            parts[label] = [
                1 if label in whole else made[label][i] if label in made and not self.overridden(k, reduced) else self.count(k, s, reduced)
                for i, (s, k) in enumerate(factors)
            ]
        letters = _letters()
        sub = {label: "".join(next(letters) for _ in factors) for label, factors in structure.items()}
        tensors, specs = [], []
        for value, labels in operands:
            for d, label in enumerate(labels):
                value = self.conform(value, d, structure[label], parts[label])
            tensors.append(value.tensor)
            specs.append("".join(sub[label] for label in labels))
        missing = [label for label in out_labels if not any(label in labels for _, labels in operands)]
        if missing:  # labels only in the output (new sizes): carried by a weight-like input without a node
            shape = [s for label in missing for s, _ in structure[label]]
            tensors.append(self.program.input(f"{name}.shape", shape, [p for label in missing for p in parts[label]]))
            specs.append("".join(sub[label] for label in missing))
        spec = ",".join(specs) + "->" + "".join(sub[label] for label in out_labels)
        out = self.program.einsum(
            name, spec, *tensors, op_type=op_type, combine=combine, flops=int(flops), points=points, formation=self.einsum_steps
        )
        kinds = [k for label in out_labels for _, k in structure[label]]
        return _Value(out, tuple(kinds), tuple(len(structure[label]) for label in out_labels))

    def single(self, record: OpRecord, inputs: Sequence[_Value], reason: str) -> list[_Value]:
        """The op as one node reading every block of its inputs; its outputs whole."""
        self.unsharded.append({"op": record.node.name, "op_type": record.op_type, "reason": reason})
        preds = [int(b) for v in inputs for b in v.tensor.blocks.ravel() if b >= 0]
        in_bytes = sum(math.prod(v.shape) for v in inputs) * self.program.cost_model.itemsize
        out_elems = sum(math.prod(s) for s, _ in record.outs)
        node = self.program.node(
            record.node.name,
            record.op_type,
            preds,
            int(record.flops),
            out_elems,
            in_bytes + out_elems * self.program.cost_model.itemsize,
            out_elems * self.program.cost_model.itemsize,
        )
        source = next((v for v in inputs if v.produced), None)
        outs = []
        for shape, _ in record.outs:
            kinds = [
                source.kinds[source.factor_slice(d).start]
                if source is not None and d < len(source.shape) and source.shape[d] == size
                else "other"
                for d, size in enumerate(shape)
            ]
            tensor = self.program.input(record.node.name, shape, [1] * len(shape))
            tensor.blocks[...] = node
            outs.append(_Value(tensor, tuple(kinds), (1,) * len(shape)))
        return outs


# ---------------------------------------------------------------- op rules
def _dims(value: Any, rank: int) -> list[int]:
    if value is None:
        return list(range(rank))
    if isinstance(value, int):
        value = [value]
    return sorted(d % rank for d in value)


class _Walker:
    """Walks the traced graph in order, giving each fx value its blocks."""

    def __init__(self, traced: Traced, sharder: _Sharder) -> None:
        self.traced = traced
        self.s = sharder
        self.values: dict[torch.fx.Node, Any] = {}
        self.labels = (f"l{i}" for i in range(10**9))
        self.model_inputs: set[str] = set()  # names of the input tensors: data, unlike weights and constants

    def computed(self, value: _Value) -> bool:
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

    def tensor_args(self, node: torch.fx.Node) -> list[_Value]:
        from torch.utils._pytree import tree_flatten

        return [v for a in tree_flatten((self.args, self.kwargs))[0] if isinstance((v := self.value(a)), _Value)]

    # -------------------------------------------------------- placeholders and constants
    def placeholder(self, node: torch.fx.Node, shape: tuple[int, ...], dtype: torch.dtype, image_like: bool) -> _Value:
        """A model input: token ids (batch, seq), images (batch, channels, spatial...) or features (batch, [seq,] hidden)."""
        if not dtype.is_floating_point:
            kinds = ["batch", "seq"] + ["other"] * (len(shape) - 2)
        elif len(shape) >= 3 and image_like:
            kinds = ["batch", "channels"] + ["spatial"] * (len(shape) - 2)
        else:
            kinds = ["batch"] + ["seq"] * (len(shape) > 2) + ["other"] * max(0, len(shape) - 3) + ["hidden"] * (len(shape) > 1)
        self.model_inputs.add(node.name)
        return self.s.free(node.name, shape, kinds[: len(shape)])

    # -------------------------------------------------------- dispatch
    def op(self, record: OpRecord) -> Any:
        node, category = record.node, record.category
        self.args, self.kwargs = self.concrete(tuple(node.args)), {k: self.concrete(v) for k, v in node.kwargs.items()}
        if record.op_type == "getitem" and isinstance(self.value(self.args[0]), (tuple, list)):
            return self.value(self.args[0])[self.args[1]]
        if category == "view":
            return self.view(record)
        rule = {
            "matmul": self.matmul,
            "conv": self.conv,
            "attention": self.attention,
            "norm": self.norm,
            "softmax": self.softmax,
            "embedding": self.embedding,
            "pool": self.pool,
            "reduce": self.reduce,
        }.get(category, self.elementwise)
        if record.op_type in ("cat", "concat", "concatenate", "stack"):
            rule = self.cat
        if record.op_type in ("view_as_complex", "view_as_real"):
            rule = self.complex_view
        return rule(record)

    def out_shape(self, record: OpRecord) -> tuple[int, ...]:
        return tuple(record.outs[0][0])

    # -------------------------------------------------------- elementwise, reductions, normalisations
    def elementwise(self, record: OpRecord) -> _Value:
        inputs = self.tensor_args(record.node)
        if record.op_type == "type_as":  # a cast: the second tensor gives only the dtype
            inputs = inputs[:1]
        if not any(self.computed(v) for v in inputs):
            raise _Unsupported("reads no computed tensor (a constant)")
        if record.op_type in _NON_POINTWISE:
            raise _Unsupported("not pointwise")
        if len(record.outs) != 1:
            raise _Unsupported(f"{len(record.outs)} outputs")
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

    def complex_view(self, record: OpRecord) -> _Value:
        """``view_as_complex`` / ``view_as_real``: one conversion kernel per block, as the paper's system converts
        between real pairs and complex numbers in a step of its own; the pair is a whole trailing dimension of size 2."""
        value = self.tensor_args(record.node)[0]
        t = value.tensor
        to_complex = record.op_type == "view_as_complex"
        if to_complex:
            if value.shape[-1] != 2 or t.parts[-1] != 1 or value.groups[-1] != 1:
                raise _Unsupported("the real pairs are not one whole trailing dimension")
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
            raise _Unsupported("reads no computed tensor (a constant)")
        if record.op_type in ("cumsum", "cumprod", "var_mean"):
            raise _Unsupported("a scan" if record.op_type != "var_mean" else "two results")
        rank = len(value.shape)
        reduced = _dims(self.arg(1, "dim"), rank) if rank else []
        combine = "partial_max" if record.op_type in _MAX_COMBINE else "partial_sum"
        labels = [self.label() for _ in value.shape]
        kept = [labels[d] for d in range(rank) if d not in reduced]
        out = self.s.apply(node.name, record.op_type, [(value, labels)], kept, record.flops, combine=combine)
        if self.arg(2, "keepdim", False):
            for d in reduced:
                out = self.s.insert_dim(out, d)
        if len(record.outs) == 2:  # (values, indices)
            return (out, out)
        if tuple(out.shape) != self.out_shape(record):
            raise _Unsupported(f"reduction result {out.shape} is not the traced {self.out_shape(record)}")
        return out

    def normalise(self, record: OpRecord, value: _Value, reduced: list[int]) -> _Value:
        """A normalisation over ``reduced`` (5 FLOPs per element): one kernel per block when those dimensions are
        whole, else statistics with partial sums (sum and sum of squares, 2 FLOPs), then normalise and scale (3)."""
        name, flops = record.node.name, int(record.flops)
        labels = [self.label() for _ in value.shape]
        if not any(p > 1 for d in reduced for p in self.s_parts(value, d)):
            return self.s.apply(name, record.op_type, [(value, labels)], labels, flops)
        kept = [labels[d] for d in range(len(labels)) if d not in reduced]
        stats = self.s.apply(f"{name}.stats", f"{record.op_type}_stats", [(value, labels)], kept, flops * 2 // 5)
        return self.s.apply(f"{name}.apply", record.op_type, [(value, labels), (stats, kept)], labels, flops - flops * 2 // 5)

    def s_parts(self, value: _Value, dim: int) -> list[int]:
        return [self.s.count(k, s) for s, k in value.factors(dim)]

    def norm(self, record: OpRecord) -> _Value:
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

    def layer_norm_steps(self, record: OpRecord, x: _Value, reduced: list[int], weight: bool, bias: bool) -> _Value:
        """Layer norm as the paper's system writes RMSNorm, after centring: sum, scale to the mean, subtract, square,
        sum, scale and add epsilon, reciprocal square root, multiply; then the gain and the bias (one step each)."""
        name = record.node.name
        labels = [self.label() for _ in x.shape]
        kept = [labels[d] for d in range(len(labels)) if d not in reduced]
        features = [labels[d] for d in reduced]
        elems, rows = math.prod(x.shape), math.prod(x.shape[d] for d in range(len(labels)) if d not in reduced)
        steps = ["sum", "mean", "sub", "square", "square_sum", "var_eps", "rsqrt", "normalise"] + ["weight"] * weight + ["bias"] * bias
        work = {"mean": rows, "var_eps": 2 * rows, "rsqrt": rows}
        flops = dict(zip(steps, _shares(int(record.flops), [work.get(step, elems) for step in steps]), strict=True))
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

    def softmax(self, record: OpRecord) -> _Value:
        value = self.tensor_args(record.node)[0]
        dim = self.arg(1, "dim")
        if dim is None:
            raise _Unsupported("softmax without dim")
        reduced = [dim % len(value.shape)]
        # 5 FLOPs per element: max 1, exp(x - max) 2, sum 1, divide 1
        labels = [self.label() for _ in value.shape]
        if not self.s.einsum_steps and not any(p > 1 for p in self.s_parts(value, reduced[0])):
            return self.s.apply(record.node.name, record.op_type, [(value, labels)], labels, int(record.flops))
        return self.split_softmax(record.node.name, value, labels, reduced[0], int(record.flops))

    def split_softmax(self, name: str, value: _Value, labels: list[str], dim: int, flops: int) -> _Value:
        """Safe softmax with its reductions: max, exp(x - max), sum, divide; the einsum style subtracts and exponentiates
        in two steps, as the paper's system does (``softmax_v1`` of its graph writer)."""
        kept = [label for d, label in enumerate(labels) if d != dim]
        if self.s.einsum_steps:
            share = _shares(flops, [1, 1, 1, 1, 1])
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

    # -------------------------------------------------------- einsums
    def matmul(self, record: OpRecord) -> _Value:
        node, op_type = record.node, record.op_type
        args = self.tensor_args(node)
        if op_type == "einsum":
            equation = str(self.args[0]).replace(" ", "")
            lhs, _, rhs = equation.partition("->")
            if "." in equation or not rhs:
                raise _Unsupported("einsum with ellipsis or implicit output")
            operands = [(v, list(spec)) for v, spec in zip(args, lhs.split(","), strict=False)]
            return self.s.apply(node.name, "einsum", operands, list(rhs), record.flops)
        if op_type == "linear":
            x = args[0]
            if any(v.produced for v in args[1:]):
                raise _Unsupported("a computed weight")
            labels = [self.label() for _ in x.shape]
            out_features = self.label()
            weight_value = self.s.free(f"{node.name}.weight", (self.out_shape(record)[-1], x.shape[-1]), ("hidden", "hidden"))
            out_labels = labels[:-1] + [out_features]
            has_bias = record.flops != 2 * math.prod(self.out_shape(record)) * x.shape[-1]
            flops, bias_flops = self.bias_split(record, has_bias)
            y = self.s.apply(node.name, "linear", [(x, labels), (weight_value, [out_features, labels[-1]])], out_labels, flops)
            if not bias_flops:
                return y
            bias = self.s.free(f"{node.name}.bias", (self.out_shape(record)[-1],), ("hidden",))
            return self.s.apply(f"{node.name}.bias", "add", [(y, out_labels), (bias, [out_features])], out_labels, bias_flops)
        bias = None
        if op_type in ("addmm", "baddbmm", "addbmm"):
            bias, args = (args[0], args[1:]) if len(args) == 3 else (None, args)
        if len(args) != 2:
            raise _Unsupported(f"{len(args)} tensor operands")
        a, b = args
        if len(a.shape) < 2 or len(b.shape) < 2:
            raise _Unsupported("vector operand")
        out_shape = self.out_shape(record)
        if op_type == "addbmm":
            raise _Unsupported("batch-reducing matmul")
        rank = len(out_shape)
        out_labels = [self.label() for _ in out_shape]
        contracted = self.label()
        operands = []
        for value, own in ((a, [out_labels[-2], contracted]), (b, [contracted, out_labels[-1]])):
            batch = value.shape[:-2]
            offset = rank - 2 - len(batch)
            keep = [d for d, size in enumerate(batch) if size == out_shape[offset + d]]
            if any(size != 1 for d, size in enumerate(batch) if d not in keep):
                raise _Unsupported("batch dimensions do not broadcast")
            value = self.s.select_dims(value, keep + [len(batch), len(batch) + 1])
            operands.append((value, [out_labels[offset + d] for d in keep] + own))
        flops, bias_flops = self.bias_split(record, bias is not None)
        y = self.s.apply(node.name, "matmul", operands, out_labels, flops)
        if not bias_flops:
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
            raise _Unsupported("attention shapes do not match its FLOPs")
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

    def masked_softmax(self, name: str, scores: _Value, labels: list[str], mask: _Value | None, flops: int) -> _Value:
        """Mask and softmax of attention scores. The torch style folds the 1/sqrt(d) scale into the scores and joins the
        mask at no FLOP cost; the einsum style scales and masks in their own steps (sharing the softmax's FLOPs)."""
        if self.s.einsum_steps:
            scale_flops, mask_flops, flops = _shares(flops, [1, mask is not None, 5])
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
            raise _Unsupported("only batch_first attention with equal q/k/v widths")
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

    def conv(self, record: OpRecord) -> _Value:
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

    def pool(self, record: OpRecord) -> _Value:
        node = record.node
        x = self.tensor_args(node)[0]
        out_shape = self.out_shape(record)
        if len(record.outs) != 1 or len(out_shape) != len(x.shape):
            raise _Unsupported("pooling with indices or a changed rank")
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

    def embedding(self, record: OpRecord) -> _Value:
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

    # -------------------------------------------------------- views, slices and concatenation
    def view(self, record: OpRecord) -> Any:
        op_type = record.op_type
        source = self.value(self.args[0])
        if not isinstance(source, _Value):
            raise _Unsupported("view of a non-tensor")
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
                raise _Unsupported("movedim")
            return self.s.select_dims(source, order)
        if op_type in ("detach", "alias", "identity"):
            return source
        if op_type == "unsqueeze":
            return self.s.insert_dim(source, self.arg(1, "dim") % (rank + 1))
        if op_type == "squeeze":
            dims = self.arg(1, "dim")
            drop = _dims(dims, rank) if dims is not None else [d for d, s in enumerate(source.shape) if s == 1]
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
        raise _Unsupported(f"view {op_type}")

    def reshape(self, source: _Value, new_shape: tuple[int, ...]) -> _Value:
        if tuple(source.shape) == tuple(new_shape):
            return source
        value = source
        t = value.tensor
        factors = [(t.shape[f], value.kinds[f], t.parts[f]) for f in range(len(value.kinds)) if t.shape[f] != 1]
        if any(s > 1 for s in new_shape) and math.prod(s for s, _, _ in factors) != math.prod(new_shape):
            raise _Unsupported(f"reshape of a broadcast {source.shape} to {new_shape}")
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
                    raise _Unsupported(f"reshape {source.shape} -> {new_shape}")
                f_size, f_kind, f_parts = pending[i]
                if product * f_size <= size:
                    group.append(pending[i])
                    product *= f_size
                    i += 1
                    continue
                outer = size // product
                if size % product or f_size % outer:
                    raise _Unsupported(f"reshape {source.shape} -> {new_shape}")
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
                raise _Unsupported(f"reshape {source.shape} -> {new_shape}")
            if len(group) > 1 and all(k == "spatial" for _, k, _ in group):  # image positions become a sequence of tokens
                group = [(size, "seq", 1)]
            out_factors.extend(group)
            groups.append(len(group))
        if i != len(pending) and any(s != 1 for s, _, _ in pending[i:]):
            raise _Unsupported(f"reshape {source.shape} -> {new_shape}")
        if repart:  # a split factor whose blocks do not line up with its new outer factor
            parts = [repart.get(f, p) for f, p in enumerate(t.parts)]
            value = self.s.with_factor_parts(value, parts)
            t = value.tensor
        return self.s.relabel(
            value, [s for s, _, _ in out_factors], [p for _, _, p in out_factors], t.blocks, [k for _, k, _ in out_factors], groups
        )

    def slice_dim(self, name: str, value: _Value, dim: int, start: int, stop: int) -> _Value:
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
        return _Value(tensor, value.kinds, value.groups)

    def split(self, record: OpRecord, source: _Value) -> list[_Value]:
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

    def index(self, record: OpRecord, source: _Value) -> _Value:
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
            raise _Unsupported("aten slice")
        index = self.concrete(self.args[1])
        index = index if isinstance(index, tuple) else (index,)
        if any(isinstance(i, torch.fx.Node) for i in index):
            raise _Unsupported("tensor index")
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
                    raise _Unsupported("strided slice")
                value = self.slice_dim(node.name, value, dim, start, max(start, stop))
                dim += 1
            else:
                raise _Unsupported(f"index {item!r}")
        return self.s.select_dims(value, [d for d in range(len(value.shape)) if d not in drop])

    def cat(self, record: OpRecord) -> _Value:
        node = record.node
        pieces = [self.value(a) for a in self.args[0]]
        if any(not isinstance(p, _Value) for p in pieces):
            raise _Unsupported("concatenates a non-tensor")
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
        return _Value(tensor, reference.kinds, reference.groups)


def _check_op_patterns(per_op: list[tuple[re.Pattern[str], dict[str, int]]] | None, op_names: Sequence[str]) -> None:
    """Refuse ``op_parts`` patterns that match no op's whole fx name (a misspelt name would silently do nothing)."""
    unmatched = [pattern.pattern for pattern, _ in per_op or () if not any(pattern.fullmatch(name) for name in op_names)]
    if unmatched:
        shown = ", ".join(op_names[:12]) + (f", ... ({len(op_names)} ops)" if len(op_names) > 12 else "")
        raise PartsError(f"op_parts pattern(s) {', '.join(map(repr, unmatched))} match no op's whole fx name; the ops: {shown}")


def shard_traced(
    traced: Traced,
    parts: str | Mapping[str, int] | None = None,
    *,
    cost_model: str = "roofline",
    profile: str | DeviceProfile | Mapping[str, Any] = "V100",
    dtype: str = "float32",
    kernels: str = "torch",
    op_parts: Mapping[str, str | Mapping[str, int]] | None = None,
    op_share: int | None = None,
    name: str | None = None,
) -> DataflowGraph:
    """The block graph of an already traced module (see :func:`shard`)."""
    parts = parse_parts(parts)
    if kernels not in KERNEL_STYLES:
        raise PartsError(f"unknown kernel style {kernels!r}; use {' or '.join(KERNEL_STYLES)}")
    per_op = parse_op_parts(op_parts) if op_parts is not None else None
    program = BlockProgram(CostModel(cost_model, get_profile(profile), dtype, op_share), touch=per_op is not None)
    sharder = _Sharder(program, parts, einsum_steps=kernels == "einsum", op_parts=per_op)
    walker = _Walker(traced, sharder)
    records = {r.node: r for r in op_records(traced)}
    _check_op_patterns(per_op, [node.name for node in records])
    image_like = any(isinstance(m, torch.nn.modules.conv._ConvNd) for m in traced.gm.modules())
    for node in traced.gm.graph.nodes:
        shapes = traced.recorder.shapes.get(node)
        if node.op == "placeholder" and shapes:
            walker.values[node] = walker.placeholder(node, shapes[0][0], shapes[0][1], image_like)
        elif node.op == "get_attr" and shapes:
            shape = shapes[0][0]
            walker.values[node] = sharder.free(node.name, shape, ["other"] * (len(shape) - 1) + ["hidden"] * bool(shape))
        elif node in records:
            record = records[node]
            sharder.enter(node.name)
            try:
                result = walker.op(record)
                traced_shape = tuple(record.outs[0][0])
                if isinstance(result, _Value) and (
                    len(result.shape) != len(traced_shape) or any(a not in (b, 1) for a, b in zip(result.shape, traced_shape, strict=True))
                ):  # broadcast (expanded) dimensions may stay size 1
                    raise _Unsupported(f"sharded shape {result.shape} is not the traced {traced_shape}")
            except _Unsupported as reason:
                outs = sharder.single(record, walker.tensor_args(node), str(reason))
                result = outs[0] if len(outs) == 1 else tuple(outs)
            walker.values[node] = result
    combine_flops = float(sum(f for f, t in zip(program.flops, program.op_types, strict=True) if t.startswith("partial_")))
    source_flops = float(sum(r.flops for r in records.values()))
    model_name = name or type(traced.gm).__name__
    return program.graph(
        {
            "format": "sharded",
            "name": f"{model_name}_{len(program.compute)}nodes",
            "model": model_name,
            "tracer": traced.tracer,
            "input_shapes": [list(x.shape) for x in traced.inputs if isinstance(x, torch.Tensor)],
            "parts": {kind: parts.get(kind, 1) for kind in SPLIT_KINDS},
            "cost_model": cost_model,
            "kernels": kernels,
            "op_parts": {pattern.pattern: dict(op) for pattern, op in per_op} if per_op is not None else None,
            "op_share": op_share,
            "profile": get_profile(profile).to_dict(),
            "traced_ops": len(records),
            "source_flops": source_flops,
            "combine_flops": combine_flops,
            "unsharded": sharder.unsharded,
        }
    )


def shard(
    module: torch.nn.Module,
    example_inputs: Any = None,
    parts: str | Mapping[str, int] | None = None,
    *,
    target_nodes: int | None = None,
    cost_model: str = "roofline",
    profile: str | DeviceProfile | Mapping[str, Any] = "V100",
    dtype: str = "float32",
    kernels: str = "torch",
    op_parts: Mapping[str, str | Mapping[str, int]] | None = None,
    op_share: int | None = None,
    device: str | torch.device | None = None,
    name: str | None = None,
) -> DataflowGraph:
    """Trace ``module`` and shard it into a partitioned block graph.

    Args:
        module, example_inputs, device: as for :func:`~workbench.importers.from_torch`
            (``device="meta"`` learns shapes without computing).
        parts: blocks per dimension kind (``"batch=2,heads=4,hidden=2,seq=1"``
            or a dict; kinds: :data:`SPLIT_KINDS`; missing kinds stay whole).
        target_nodes: instead of ``parts``, pick them with :func:`auto_parts`.
        cost_model: ``roofline`` (seconds on ``profile``) or ``paper`` (the
            paper files' convention, see :mod:`workbench.generators.blocks`).
        dtype: element type for bytes and FLOP rates.
        kernels: ``torch`` (one kernel per traced op and block, as PyTorch
            runs it) or ``einsum`` (each op as the einsums the DOPPLER
            paper's system writes: layer norm, softmax and attention spelled
            out step by step with their reductions, a linear's bias its own
            step, and a ``formation`` node after every contraction and
            reduction, per output block, even when one kernel made it).
        op_parts: per-op partitions, as the paper's system picks them
            (``{"wq": "hidden=2,reduced=2", "w1|w3": "hidden=4,reduced=1"}``):
            given (even empty), every op keeps the splits of the operands
            it reads, except for the kinds that the first pattern matching
            the op's whole fx name sets (``reduced``: its contracted
            dimensions); a dimension no operand has is split by ``parts``;
            and a kernel whose input block overlaps several blocks reads
            them directly, with no regrouping node. ``parts`` then splits
            the model's inputs.
        op_share: with ``cost_model="paper"``, charge every node its op's
            points divided by ``op_share`` (the paper's transformer files: 4;
            see :class:`~workbench.generators.blocks.CostModel`).
        name: the graph's model name (default: the module's class name).

    Raises:
        TraceError: the module cannot be traced.
        PartsError: bad ``parts``, or both ``parts`` and ``target_nodes``.
    """
    if parts is not None and target_nodes is not None:
        raise PartsError("give parts or target_nodes, not both")
    traced = trace_module(module, example_inputs, device=device)
    options = {
        "cost_model": cost_model,
        "profile": profile,
        "dtype": dtype,
        "kernels": kernels,
        "op_parts": op_parts,
        "op_share": op_share,
        "name": name or type(module).__name__,
    }
    if target_nodes is not None:
        parts = auto_parts(traced, target_nodes, **options)
    return shard_traced(traced, parts, **options)


def auto_parts(traced: Traced, target_nodes: int, max_parts: int = 16, **options: Any) -> dict[str, int]:
    """Partition counts whose block graph has as many nodes as possible, at most ``target_nodes``.

    Greedy: starting from no split, double the kind that brings the node
    count closest to the target without passing it, until none does.
    """
    if target_nodes < 1:
        raise PartsError(f"target_nodes must be >= 1, got {target_nodes}")
    parts = {kind: 1 for kind in SPLIT_KINDS}
    best = shard_traced(traced, parts, **options).num_nodes
    if best > target_nodes:
        raise PartsError(f"the unsplit graph already has {best} nodes, more than target_nodes={target_nodes}")
    while True:
        trials = []
        for kind in SPLIT_KINDS:
            if parts[kind] * 2 > max_parts:
                continue
            trial = {**parts, kind: parts[kind] * 2}
            nodes = shard_traced(traced, trial, **options).num_nodes
            if best < nodes <= target_nodes:
                trials.append((nodes, kind))
        if not trials:
            return parts
        best, kind = max(trials)
        parts[kind] *= 2
