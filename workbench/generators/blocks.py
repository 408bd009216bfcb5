"""Partitioned tensor programs: one graph node per block kernel.

A tensor is split into blocks along each of its dimensions; an einsum over
partitioned tensors becomes one kernel per combination of blocks of all its
indices, and when a contracted index is split, one ``sum`` node per output
block adds the partial results (with ``formation``, a node per output block
even when nothing is split, as the paper's system materialises every
contraction). Input tensors (activations fed in, weights)
are not nodes: as in the DOPPLER paper's graphs, only computations are
scheduled. This is how systems that decompose einsums into block kernels
build their task graphs (Bourgeois et al., "EinDecomp: decomposition of
declaratively-specified machine learning and numerical computations for
parallel execution", 2024; the DOPPLER paper's graphs come from such a
system).

Costs come from a :class:`CostModel`: ``roofline`` (a
:class:`~workbench.generators.profiles.DeviceProfile`, seconds) or ``paper``
(the convention of the paper's files: a kernel costs the number of points of
its block iteration space, a ``sum`` node the elements it writes, and
sending any node's output costs four times its compute cost; the paper's
time unit).

The graph limits (:func:`~workbench.graph.check_graph_size`) are checked as
the program grows: before a tensor's blocks or an einsum's kernels are
allocated, so an oversized request fails at once.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..graph import DataflowGraph, check_graph_size
from .profiles import DTYPE_BYTES, DeviceProfile

__all__ = ["BlockTensor", "BlockProgram", "CostModel", "PAPER_TIME_UNIT"]

PAPER_TIME_UNIT = "paper (÷1e10 when reported)"


@dataclass(frozen=True)
class CostModel:
    """Turns a node's work into (compute, communication) costs.

    Attributes:
        kind: ``"roofline"`` (seconds from ``profile``) or ``"paper"`` (the
            paper files' convention, see the module docstring).
        profile: the device profile used by ``roofline``.
        dtype: element type of every tensor (sets bytes and the FLOP rate).
        op_share: ``paper`` only: every node costs its op's points divided by
            ``op_share``, whatever its block's size, instead of its block's
            points (the paper's transformer files: 4, the blocks per op its
            partitioner aims at; an op split in fewer blocks then costs less
            in total than it computes).
    """

    kind: str
    profile: DeviceProfile
    dtype: str = "float32"
    op_share: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("roofline", "paper"):
            raise ValueError(f"unknown cost model {self.kind!r}; use 'roofline' or 'paper'")
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"unknown dtype {self.dtype!r}; known: {', '.join(DTYPE_BYTES)}")
        if self.kind == "roofline":
            self.profile.peak_flops(self.dtype)
        if self.op_share is not None and (self.kind != "paper" or self.op_share < 1):
            raise ValueError(f"op_share={self.op_share} needs the paper cost model and an integer >= 1")

    def points(self, block: float, total: float) -> float:
        """The points a node is charged: its block's, or its op's ``total`` over ``op_share``."""
        return total / self.op_share if self.op_share else block

    @property
    def itemsize(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def time_unit(self) -> str:
        return "s" if self.kind == "roofline" else PAPER_TIME_UNIT

    def costs(self, flops: float, points: float, nbytes: float, out_bytes: float) -> tuple[float, float]:
        if self.kind == "paper":
            return float(points), 4.0 * float(points)
        return self.profile.kernel_time(flops, nbytes, self.dtype), self.profile.transfer_time(out_bytes)


def _bounds(size: int, parts: int) -> list[int]:
    return [size * i // parts for i in range(parts + 1)]


@dataclass(frozen=True)
class BlockTensor:
    """A tensor split into blocks.

    Attributes:
        name: label used in node names.
        shape: full size per dimension.
        parts: number of blocks per dimension.
        blocks: node id producing each block (``-1``: an input, no node), shape ``parts``.
    """

    name: str
    shape: tuple[int, ...]
    parts: tuple[int, ...]
    blocks: np.ndarray

    def block_shape(self, index: Sequence[int]) -> tuple[int, ...]:
        return tuple(_bounds(s, p)[i + 1] - _bounds(s, p)[i] for s, p, i in zip(self.shape, self.parts, index, strict=True))


TOUCH_BASE = 1 << 40
"""Block ids from here on stand for several producers' blocks, read directly (see ``BlockProgram.touch``)."""


class BlockProgram:
    """Builds the block-kernel graph of a tensor program, op by op.

    With ``touch``, re-splitting a tensor adds no nodes: a kernel whose input
    block overlaps several blocks of the tensor as it was made reads those
    blocks directly, as the DOPPLER paper's system does (its kernels "touch"
    the blocks they overlap). Without it, ``repartition`` nodes gather them.
    """

    def __init__(self, cost_model: CostModel, touch: bool = False) -> None:
        self.cost_model = cost_model
        self.touch = touch
        self.touched: list[tuple[int, ...]] = []  # block id TOUCH_BASE + i reads the blocks touched[i]
        self.compute: list[float] = []
        self.comm: list[float] = []
        self.names: list[str] = []
        self.op_types: list[str] = []
        self.src: list[int] = []
        self.dst: list[int] = []
        self.flops: list[float] = []
        self.total_flops = 0.0

    # ------------------------------------------------------------ nodes
    def node(self, name: str, op_type: str, preds: Sequence[int], flops: float, points: float, nbytes: float, out_bytes: float) -> int:
        """One kernel reading the outputs of ``preds`` (ids < 0: inputs, no edge); returns its id."""
        node = len(self.compute)
        preds = [m for p in preds for m in self._members(int(p))]
        check_graph_size(node + 1, len(self.src) + len(preds))
        compute, comm = self.cost_model.costs(flops, points, nbytes, out_bytes)
        self.compute.append(compute)
        self.comm.append(comm)
        self.names.append(name)
        self.op_types.append(op_type)
        for pred in dict.fromkeys(int(p) for p in preds if p >= 0):
            self.src.append(pred)
            self.dst.append(node)
        self.flops.append(flops)
        self.total_flops += flops
        return node

    def input(self, name: str, shape: Sequence[int], parts: Sequence[int]) -> BlockTensor:
        """An input tensor (weights or activations fed in): blocks without nodes."""
        shape, parts = tuple(int(s) for s in shape), tuple(int(p) for p in parts)
        if len(shape) != len(parts):
            raise ValueError(f"{name}: {len(shape)} dimensions but {len(parts)} partition counts")
        for size, count in zip(shape, parts, strict=True):
            if size < 1 or count < 1 or count > size:
                raise ValueError(f"{name}: cannot split a dimension of size {size} into {count} parts")
        check_graph_size(math.prod(parts))  # each block becomes at most one op
        return BlockTensor(name, shape, parts, np.full(parts, -1, dtype=np.int64))

    def repartition(self, tensor: BlockTensor, parts: Sequence[int]) -> BlockTensor:
        """Re-split ``tensor``; each new block gathers the old blocks it overlaps (one node each)."""
        parts = tuple(int(p) for p in parts)
        if parts == tensor.parts:
            return tensor
        if self.touch:
            return self._touch(tensor, parts)
        return self.gather(f"{tensor.name}.repartition", "repartition", tensor.shape, parts, [(tensor, (0,) * len(parts))], alias=False)

    def _members(self, block: int) -> tuple[int, ...]:
        """The nodes whose outputs block id ``block`` stands for."""
        return self.touched[block - TOUCH_BASE] if block >= TOUCH_BASE else (block,)

    def _touch(self, tensor: BlockTensor, parts: tuple[int, ...]) -> BlockTensor:
        """``tensor`` re-split without nodes: each new block stands for the produced blocks it overlaps."""
        out = self.input(f"{tensor.name}.touch", tensor.shape, parts)
        old = [_bounds(s, p) for s, p in zip(tensor.shape, tensor.parts, strict=True)]
        new = [_bounds(s, p) for s, p in zip(out.shape, out.parts, strict=True)]
        for index in itertools.product(*(range(p) for p in parts)):
            ranges = [
                [j for j in range(tensor.parts[axis]) if old[axis][j] < new[axis][i + 1] and old[axis][j + 1] > new[axis][i]]
                for axis, i in enumerate(index)
            ]
            blocks = tuple(
                dict.fromkeys(m for j in itertools.product(*ranges) if tensor.blocks[j] >= 0 for m in self._members(int(tensor.blocks[j])))
            )
            if len(blocks) == 1:
                out.blocks[index] = blocks[0]
            elif blocks:
                out.blocks[index] = TOUCH_BASE + len(self.touched)
                self.touched.append(blocks)
        return out

    def gather(
        self,
        name: str,
        op_type: str,
        shape: Sequence[int],
        parts: Sequence[int],
        sources: Sequence[tuple[BlockTensor, Sequence[int]]],
        flops: int = 0,
        alias: bool = True,
    ) -> BlockTensor:
        """A tensor of ``shape`` split into ``parts`` whose blocks copy the overlapping blocks of ``sources``.

        Each source sits at its offsets in the new tensor (a concatenation
        places sources side by side; a slice is one source at negative
        offsets). A new block is a node gathering the source blocks it
        overlaps, unless no source block comes from a node (then it is an
        input too) or, with ``alias``, it is exactly one source block and
        ``flops`` is 0 (then it is that block). ``flops`` (the copy's work)
        are shared among the new blocks by size, exactly.
        """
        out = self.input(name, shape, parts)
        new = [_bounds(s, p) for s, p in zip(out.shape, out.parts, strict=True)]
        total = math.prod(out.shape)
        done = 0
        for index in itertools.product(*(range(p) for p in out.parts)):
            lo = [new[axis][i] for axis, i in enumerate(index)]
            hi = [new[axis][i + 1] for axis, i in enumerate(index)]
            preds: list[int] = []
            exact = None
            for tensor, offsets in sources:
                old = [[b + o for b in _bounds(s, p)] for s, p, o in zip(tensor.shape, tensor.parts, offsets, strict=True)]
                ranges = [
                    [j for j in range(tensor.parts[axis]) if old[axis][j] < hi[axis] and old[axis][j + 1] > lo[axis]]
                    for axis in range(len(lo))
                ]
                for j in itertools.product(*ranges):
                    preds.append(int(tensor.blocks[j]))
                    if all(old[axis][j[axis]] == lo[axis] and old[axis][j[axis] + 1] == hi[axis] for axis in range(len(lo))):
                        exact = int(tensor.blocks[j])
            elems = math.prod(out.block_shape(index))
            block_flops = int(flops * (done + elems) // total - flops * done // total) if flops else 0
            done += elems
            if all(p < 0 for p in preds) and not block_flops:
                continue
            if alias and exact is not None and len(preds) == 1 and not block_flops:
                out.blocks[index] = exact
                continue
            nbytes = elems * self.cost_model.itemsize
            charged = self.cost_model.points(elems, total)
            out.blocks[index] = self.node(f"{name}{list(index)}", op_type, preds, block_flops, charged, 2 * nbytes, nbytes)
        return out

    def einsum(
        self,
        name: str,
        spec: str,
        *tensors: BlockTensor,
        op_type: str,
        flops_per_point: float = 1.0,
        combine: str = "sum",
        flops: int | None = None,
        points: float | None = None,
        formation: bool = False,
    ) -> BlockTensor:
        """One kernel per block of the iteration space of ``spec`` (``"ik,kj->ij"``), plus partial results combined.

        ``flops_per_point`` is the work per point of the iteration space: 2 for
        a multiply-add, 1 for an add or a comparison, more for transcendental
        functions. ``combine`` names the op (``sum``, ``max``) that merges the
        partial results of a split contracted index: one node per output block.
        ``flops`` instead gives the op's total work, shared among its kernels
        by their points exactly (integer shares adding up to it); ``points``
        the op's total points for the ``paper`` cost model when they are not
        its iteration space (a convolution's or a gather's). With
        ``formation``, a contraction or reduction gets one node per output
        block even when one kernel made it (a ``formation`` copy), as the
        paper's system materialises the result of every einsum with a
        reduced index.
        """
        inputs_spec, _, out_labels = spec.replace(" ", "").partition("->")
        in_labels = inputs_spec.split(",")
        if len(in_labels) != len(tensors):
            raise ValueError(f"{name}: spec {spec!r} names {len(in_labels)} inputs, got {len(tensors)}")
        sizes: dict[str, int] = {}
        parts: dict[str, int] = {}
        for labels, tensor in zip(in_labels, tensors, strict=True):
            if len(labels) != len(tensor.shape):
                raise ValueError(f"{name}: {tensor.name} has {len(tensor.shape)} dimensions, spec {labels!r} has {len(labels)}")
            for label, size, count in zip(labels, tensor.shape, tensor.parts, strict=True):
                if sizes.setdefault(label, size) != size:
                    raise ValueError(f"{name}: index {label!r} is {sizes[label]} in one input and {size} in {tensor.name}")
                parts.setdefault(label, count)
        if set(out_labels) - set(sizes):
            raise ValueError(f"{name}: output index not in any input: {spec!r}")
        tensors = tuple(self.repartition(t, [parts[label] for label in labels]) for labels, t in zip(in_labels, tensors, strict=True))
        reduced = [label for label in sizes if label not in out_labels]
        order = list(out_labels) + reduced
        bounds = {label: _bounds(sizes[label], parts[label]) for label in order}
        out = self.input(name, [sizes[label] for label in out_labels], [parts[label] for label in out_labels])
        check_graph_size(len(self.compute) + math.prod(parts[label] for label in order))
        partials: dict[tuple[int, ...], list[int]] = {}
        itemsize = self.cost_model.itemsize
        total_points = math.prod(sizes[label] for label in order)
        done = 0
        for index in itertools.product(*(range(parts[label]) for label in order)):
            at = dict(zip(order, index, strict=True))
            block = {label: bounds[label][at[label] + 1] - bounds[label][at[label]] for label in order}
            block_points = math.prod(block[label] for label in order)
            if flops is None:
                block_flops = flops_per_point * block_points
            else:  # this kernel's exact integer share of the op's work
                block_flops = int(flops * (done + block_points) // total_points - flops * done // total_points)
            done += block_points
            cost_points = self.cost_model.points(
                block_points if points is None else points * block_points / total_points, total_points if points is None else points
            )
            out_elems = float(np.prod([block[label] for label in out_labels]))
            in_elems = sum(float(np.prod([block[label] for label in labels])) for labels in in_labels)
            preds = [t.blocks[tuple(at[label] for label in labels)] for labels, t in zip(in_labels, tensors, strict=True)]
            suffix = list(index) if index else ""
            node = self.node(
                f"{name}{suffix}", op_type, preds, block_flops, cost_points, (in_elems + out_elems) * itemsize, out_elems * itemsize
            )
            partials.setdefault(index[: len(out_labels)], []).append(node)
        for out_index, nodes in partials.items():
            if len(nodes) == 1 and not (formation and reduced):
                out.blocks[out_index] = nodes[0]
                continue
            elems = float(np.prod(out.block_shape(out_index)))
            kind = combine if len(nodes) > 1 else "formation"
            charged = self.cost_model.points(elems, float(np.prod(out.shape)))
            out.blocks[out_index] = self.node(
                f"{name}.{kind}{list(out_index)}",
                kind,
                nodes,
                (len(nodes) - 1) * elems,
                charged,
                (len(nodes) + 1) * elems * itemsize,
                elems * itemsize,
            )
        return out

    def select_last(self, name: str, tensor: BlockTensor, axis: int) -> BlockTensor:
        """The last slice along ``axis`` (that dimension dropped): one copy node per remaining block."""
        shape = tensor.shape[:axis] + tensor.shape[axis + 1 :]
        parts = tensor.parts[:axis] + tensor.parts[axis + 1 :]
        out = self.input(name, shape, parts)
        for index in itertools.product(*(range(p) for p in parts)):
            source = tensor.blocks[index[:axis] + (tensor.parts[axis] - 1,) + index[axis:]]
            elems = float(np.prod(out.block_shape(index)))
            nbytes = elems * self.cost_model.itemsize
            out.blocks[index] = self.node(f"{name}{list(index)}", "slice", [source], 0.0, elems, 2 * nbytes, nbytes)
        return out

    # ------------------------------------------------------------ result
    def graph(self, metadata: dict[str, Any]) -> DataflowGraph:
        comm = np.asarray(self.comm)
        src = np.asarray(self.src, dtype=np.int64)
        return DataflowGraph(
            compute=np.asarray(self.compute),
            src=src,
            dst=np.asarray(self.dst, dtype=np.int64),
            comm=comm[src] if src.size else np.zeros(0),
            names=tuple(self.names),
            op_types=tuple(self.op_types),
            metadata={"time_unit": self.cost_model.time_unit, "total_flops": self.total_flops, **metadata},
        )
