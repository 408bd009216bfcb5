"""Blocks of traced tensors: dimension kinds, partition counts, and the sharder that writes block kernels."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from ...generators.blocks import BlockProgram, BlockTensor
from ..torch_fx import OpRecord

SPLIT_KINDS = ("batch", "seq", "heads", "hidden", "channels")
"""Dimension kinds that ``parts`` may split (all others stay whole)."""

KERNEL_STYLES = ("torch", "einsum")
"""How ops become kernels: ``torch``, one kernel per traced op and block (partial results only where a reduced
dimension is split); ``einsum``, the steps the paper's system writes (see :func:`shard`)."""

NON_POINTWISE = frozenset(
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
MAX_COMBINE = frozenset({"amax", "amin", "max", "min", "argmax", "argmin", "all", "any"})


class PartsError(ValueError):
    """Bad partition counts (an unknown kind, a count below 1) or an unreachable node target."""


class Unsupported(Exception):
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
class Value:
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


def einsum_letters() -> Iterator[str]:
    for code in range(ord("a"), ord("z") + 1):
        yield chr(code)
    for code in range(ord("A"), ord("Z") + 1):
        yield chr(code)


def shares(total: int, weights: Sequence[float]) -> list[int]:
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


class Sharder:
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
    def free(self, name: str, shape: Sequence[int], kinds: Sequence[str]) -> Value:
        shape = tuple(int(s) for s in shape)
        tensor = self.program.input(name, shape, [self.count(k, s) for k, s in zip(kinds, shape, strict=False)])
        return Value(tensor, tuple(kinds), (1,) * len(shape))

    def relabel(
        self, value: Value, tensor_shape: Sequence[int], parts: Sequence[int], blocks: Any, kinds: Sequence[str], groups: Sequence[int]
    ) -> Value:
        tensor = BlockTensor(
            value.tensor.name, tuple(int(s) for s in tensor_shape), tuple(int(p) for p in parts), np.asarray(blocks).reshape(tuple(parts))
        )
        return Value(tensor, tuple(kinds), tuple(groups))

    def with_factor_parts(self, value: Value, parts: Sequence[int]) -> Value:
        tensor = self.program.repartition(value.tensor, parts)
        return Value(tensor, value.kinds, value.groups)

    def select_dims(self, value: Value, dims: Sequence[int]) -> Value:
        """``value`` with its dimensions ``dims``, in that order (a permutation, or dropping size-1 dimensions)."""
        if list(dims) == list(range(len(value.groups))):
            return value
        factors = [f for d in dims for f in range(*value.factor_slice(d).indices(len(value.kinds)))]
        dropped = [f for f in range(len(value.kinds)) if f not in factors]
        t = value.tensor
        if any(t.shape[f] != 1 for f in dropped):
            raise Unsupported(f"cannot drop a dimension of size > 1 from {value.shape}")
        return self.relabel(
            value,
            [t.shape[f] for f in factors],
            [t.parts[f] for f in factors],
            t.blocks.transpose(factors + dropped).reshape([t.parts[f] for f in factors]),
            [value.kinds[f] for f in factors],
            [value.groups[d] for d in dims],
        )

    def merge_dim(self, value: Value, dim: int) -> Value:
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

    def conform(self, value: Value, dim: int, structure: list[tuple[int, str]], parts: list[int]) -> Value:
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
                raise Unsupported(f"dimension of size {value.shape[dim]} meets size {total}")
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

    def squeeze_to(self, value: Value, rank: int, out_shape: Sequence[int]) -> tuple[Value, list[int]]:
        """Right-align ``value`` with an output of ``out_shape``; size-1 (broadcast) dimensions are dropped.

        Returns the value and, per remaining dimension, the output dimension it maps to.
        """
        offset = rank - len(value.shape)
        if offset < 0:
            raise Unsupported(f"operand of rank {len(value.shape)} for an output of rank {rank}")
        keep, mapping = [], []
        for d, size in enumerate(value.shape):
            if size == out_shape[offset + d]:
                keep.append(d)
                mapping.append(offset + d)
            elif size != 1:
                raise Unsupported(f"operand shape {value.shape} does not broadcast to {tuple(out_shape)}")
        return self.select_dims(value, keep), mapping

    def insert_dim(self, value: Value, dim: int) -> Value:
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
        operands: Sequence[tuple[Value, Sequence[str]]],
        out_labels: Sequence[str],
        flops: float,
        *,
        points: float | None = None,
        combine: str = "partial_sum",
        new_labels: Mapping[str, tuple[int, str]] | None = None,
        whole: Sequence[str] = (),
    ) -> Value:
        """One kernel per block of the iteration space: ``operands`` are (value, one label per dimension).

        A label's factors and kinds come from the first operand that computes
        it (else the first that has it); ``new_labels`` gives the size and
        kind of labels that no operand has (a weight's output features); each
        factor is split by its kind, except labels in ``whole``.
        """
        structure: dict[str, list[tuple[int, str]]] = {}
        for value, labels in sorted(operands, key=lambda op: not op[0].produced):
            if len(labels) != len(value.shape):
                raise Unsupported(f"{len(labels)} labels for an operand of rank {len(value.shape)}")
            for d, label in enumerate(labels):
                structure.setdefault(label, value.factors(d))
        for label, (size, kind) in (new_labels or {}).items():
            structure.setdefault(label, [(size, kind)])
        if set(out_labels) - set(structure):
            raise Unsupported("an output dimension that no input has")
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
        letters = einsum_letters()
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
        return Value(out, tuple(kinds), tuple(len(structure[label]) for label in out_labels))

    def single(self, record: OpRecord, inputs: Sequence[Value], reason: str) -> list[Value]:
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
            outs.append(Value(tensor, tuple(kinds), (1,) * len(shape)))
        return outs
