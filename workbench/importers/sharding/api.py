"""Shard a traced module: walk it, then write the block graph with its provenance."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.fx

from ...generators.blocks import BlockProgram, CostModel
from ...generators.profiles import DeviceProfile, get_profile
from ...graph import DataflowGraph
from ..torch_fx import Traced, op_records, trace_module
from .values import (
    KERNEL_STYLES,
    SPLIT_KINDS,
    PartsError,
    Sharder,
    Unsupported,
    Value,
    parse_op_parts,
    parse_parts,
)
from .walker import Walker


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
    sharder = Sharder(program, parts, einsum_steps=kernels == "einsum", op_parts=per_op)
    walker = Walker(traced, sharder)
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
                if isinstance(result, Value) and (
                    len(result.shape) != len(traced_shape) or any(a not in (b, 1) for a, b in zip(result.shape, traced_shape, strict=True))
                ):  # broadcast (expanded) dimensions may stay size 1
                    raise Unsupported(f"sharded shape {result.shape} is not the traced {traced_shape}")
            except Unsupported as reason:
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
    options: dict[str, Any] = {
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
