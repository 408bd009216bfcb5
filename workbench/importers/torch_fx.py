"""Import a PyTorch ``nn.Module`` as a DataflowGraph: one node per traced operation.

The module is traced with ``torch.fx.symbolic_trace`` (Reed et al., "torch.fx:
practical program capture and transformation for deep learning in Python",
MLSys 2022), or with ``torch.export`` where fx cannot trace it, then run once
on the example inputs to learn every tensor's shape. Each op's compute cost is
the roofline time (see :class:`~workbench.generators.profiles.DeviceProfile`)
of its analytic FLOPs and the bytes it reads and writes; views and reshapes
launch no kernel and cost 0. With ``measure=True`` each op is timed on the
local device instead (CUDA when present). An edge's communication cost is the
time to send the producer's output tensors over the profile's link. Inputs,
parameters and constants are not nodes (they are where the graph starts).

FLOP conventions (one multiply-add = 2 FLOPs): matmul/linear ``2·M·N·K``;
convolution ``2·out·(C_in/groups)·kernel``; attention ``4·B·L·S·E`` plus
5 per score for the softmax; normalization and softmax 5 per element;
reductions 1 per input element; pooling 1 per input element (an
approximation); elementwise 1 per output element, 4 for transcendental
functions.
"""

from __future__ import annotations

import copy
import inspect
import math
import os
import statistics
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.fx
from torch.utils._pytree import tree_flatten

from ..generators.profiles import DeviceProfile, get_profile
from ..graph import DataflowGraph
from .coarsen import coarsen

__all__ = ["from_torch", "TraceError", "op_category", "trace_module", "op_records", "Traced", "OpRecord", "is_huggingface"]


class TraceError(ValueError):
    """The module could not be turned into a graph (untraceable, or an op failed on the inputs)."""


_CATEGORIES: dict[str, frozenset[str]] = {
    "matmul": frozenset({"linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm", "einsum", "bilinear"}),
    "conv": frozenset(
        {
            "conv1d",
            "conv2d",
            "conv3d",
            "convolution",
            "conv_transpose1d",
            "conv_transpose2d",
            "conv_transpose3d",
            "convtranspose1d",
            "convtranspose2d",
            "convtranspose3d",
        }
    ),
    "attention": frozenset(
        {
            "scaled_dot_product_attention",
            "scaled_dot_product_flash_attention",
            "scaled_dot_product_efficient_attention",
            "multiheadattention",
        }
    ),
    "norm": frozenset(
        {
            "layer_norm",
            "layernorm",
            "batch_norm",
            "batchnorm1d",
            "batchnorm2d",
            "batchnorm3d",
            "group_norm",
            "groupnorm",
            "instance_norm",
            "instancenorm1d",
            "instancenorm2d",
            "native_layer_norm",
            "native_batch_norm",
            "native_batch_norm_legit_no_training",
            "native_group_norm",
            "rms_norm",
            "rmsnorm",
            "localresponsenorm",
        }
    ),
    "softmax": frozenset({"softmax", "log_softmax", "logsoftmax"}),
    "embedding": frozenset({"embedding", "embeddingbag"}),
    "pool": frozenset(
        {
            "max_pool1d",
            "max_pool2d",
            "max_pool3d",
            "avg_pool1d",
            "avg_pool2d",
            "avg_pool3d",
            "adaptive_avg_pool1d",
            "adaptive_avg_pool2d",
            "adaptive_max_pool2d",
            "max_pool2d_with_indices",
            "maxpool1d",
            "maxpool2d",
            "maxpool3d",
            "avgpool1d",
            "avgpool2d",
            "avgpool3d",
            "adaptiveavgpool1d",
            "adaptiveavgpool2d",
            "adaptivemaxpool2d",
        }
    ),
    "reduce": frozenset(
        {
            "sum",
            "mean",
            "amax",
            "amin",
            "max",
            "min",
            "var",
            "std",
            "var_mean",
            "norm",
            "argmax",
            "argmin",
            "cumsum",
            "logsumexp",
            "prod",
            "any",
            "all",
        }
    ),
    "view": frozenset(
        {
            "view",
            "reshape",
            "permute",
            "transpose",
            "t",
            "flatten",
            "unflatten",
            "unsqueeze",
            "squeeze",
            "expand",
            "expand_as",
            "getitem",
            "split",
            "chunk",
            "unbind",
            "select",
            "slice",
            "narrow",
            "as_strided",
            "detach",
            "alias",
            "view_as",
            "movedim",
            "identity",
            "unsafe_view",
            "split_with_sizes",
            "size",
            "dim",
        }
    ),
}
_OP_CATEGORY = {name: category for category, names in _CATEGORIES.items() for name in names}
_TRANSCENDENTAL = frozenset(
    {
        "exp",
        "log",
        "tanh",
        "sigmoid",
        "gelu",
        "silu",
        "softplus",
        "erf",
        "pow",
        "sqrt",
        "rsqrt",
        "sin",
        "cos",
        "mish",
        "elu",
        "selu",
        "logsigmoid",
        "hardswish",
    }
)


def op_category(op_type: str) -> str:
    """matmul, conv, attention, norm, softmax, embedding, pool, reduce, view or elementwise."""
    return _OP_CATEGORY.get(op_type, "elementwise")


def _op_type(node: torch.fx.Node, gm: torch.fx.GraphModule) -> str:
    if node.op == "call_module":
        return type(gm.get_submodule(str(node.target))).__name__.lower()
    if node.op == "call_method":
        name = str(node.target)
    else:
        name = getattr(node.target, "__name__", str(node.target)).split(".")[0]
    name = name.strip("_") or name
    return name[1:] if name in ("iadd", "imul", "isub", "itruediv") else name


def _numel(shape: Iterable[int]) -> int:
    return math.prod(shape)


class _Recorder(torch.fx.Interpreter):
    """Runs the graph once, keeping each node's output shapes/dtypes (and, with ``repeats``, its run time)."""

    def __init__(self, gm: torch.fx.GraphModule, repeats: int, device: torch.device) -> None:
        super().__init__(gm)
        self.shapes: dict[torch.fx.Node, list[tuple[tuple[int, ...], torch.dtype]]] = {}
        self.seconds: dict[torch.fx.Node, float] = {}
        self.constants: dict[torch.fx.Node, Any] = {}  # host-side values (sizes, indices) that later ops take as arguments
        self.repeats = repeats
        self.sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def run_node(self, node: torch.fx.Node) -> Any:
        try:
            result = super().run_node(node)
            if self.repeats and node.op.startswith("call"):
                times = []
                for _ in range(self.repeats):
                    self.sync()
                    start = time.perf_counter()
                    super().run_node(node)
                    self.sync()
                    times.append(time.perf_counter() - start)
                self.seconds[node] = statistics.median(times)
        except TraceError:
            raise
        except Exception as exc:  # an op that fails on the example inputs
            raise TraceError(f"op {node.name!r} ({node.op} {node.target}) failed on the example inputs: {_first_line(exc)}") from exc
        self.shapes[node] = [(tuple(t.shape), t.dtype) for t in tree_flatten(result)[0] if isinstance(t, torch.Tensor)]
        if not self.shapes[node] and isinstance(result, (int, float, bool, tuple, list, slice)):
            self.constants[node] = result
        return result


def _user_frame(exc: BaseException) -> str:
    """``file:line`` of the innermost traceback frame outside torch, where the failing op is."""
    torch_dir = os.path.dirname(torch.__file__)
    frame = None
    tb = exc.__traceback__
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(torch_dir):
            frame = tb
        tb = tb.tb_next
    if frame is None or frame.tb_frame.f_code.co_filename == __file__:
        return ""
    import linecache

    code = frame.tb_frame.f_code
    line = linecache.getline(code.co_filename, frame.tb_lineno).strip()
    return f" at {os.path.basename(code.co_filename)}:{frame.tb_lineno} in {code.co_name} (`{line}`)"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _hf_input_names(module: torch.nn.Module, count: int) -> list[str]:
    """The forward() arguments a HuggingFace model's inputs go to, in order."""
    names = [module.main_input_name, "attention_mask", "token_type_ids"]
    if count > len(names):
        raise TraceError(f"{type(module).__name__}: at most {len(names)} inputs ({', '.join(names)}), got {count}")
    return names[:count]


def is_huggingface(module: torch.nn.Module) -> bool:
    """Whether ``module`` is a HuggingFace ``PreTrainedModel`` (without importing transformers)."""
    transformers = sys.modules.get("transformers")
    return transformers is not None and isinstance(module, transformers.PreTrainedModel)


def _trace(module: torch.nn.Module, inputs: tuple) -> tuple[torch.fx.GraphModule, str]:
    if is_huggingface(module):  # HuggingFace's own fx tracer handles its models' optional inputs and control flow
        from transformers.utils.fx import symbolic_trace as hf_symbolic_trace

        try:
            return hf_symbolic_trace(module, input_names=_hf_input_names(module, len(inputs))), "transformers.fx"
        except TraceError:
            raise
        except Exception as exc:
            raise TraceError(
                f"cannot trace {type(module).__name__} with transformers.utils.fx{_user_frame(exc)}: {_first_line(exc)}"
            ) from None
    try:
        return torch.fx.symbolic_trace(module), "fx"
    except Exception as fx_exc:
        fx_reason = f"torch.fx failed{_user_frame(fx_exc)}: {_first_line(fx_exc)}"
    try:
        exported = torch.export.export(module, inputs).module()
    except Exception as export_exc:
        raise TraceError(
            f"cannot trace {type(module).__name__}: {fx_reason}; torch.export also failed{_user_frame(export_exc)}: "
            f"{_first_line(export_exc)}"
        ) from None
    if not isinstance(exported, torch.fx.GraphModule):
        raise TraceError(
            f"cannot trace {type(module).__name__}: {fx_reason}; torch.export gave a {type(exported).__name__}, not an fx graph"
        )
    return exported, "export"


def _inputs(module: torch.nn.Module, example_inputs: Any) -> tuple:
    if example_inputs is None and callable(getattr(module, "example_inputs", None)):
        example_inputs = module.example_inputs()
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs or ())
    if is_huggingface(module) and not example_inputs:
        raise TraceError(
            f"{type(module).__name__} needs example inputs ({module.main_input_name} first); give --input-shape and --input-dtype"
        )
    params = [
        p
        for p in inspect.signature(module.forward).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    if len(example_inputs) < len(params):
        missing = ", ".join(p.name for p in params[len(example_inputs) :])
        raise TraceError(
            f"{type(module).__name__}.forward needs inputs ({', '.join(p.name for p in params)}); "
            f"no example input or shape given for: {missing}"
        )
    return example_inputs


def _einsum_flops(equation: str, shapes: list[tuple[int, ...]]) -> float:
    lhs = equation.replace(" ", "").split("->")[0].split(",")
    sizes: dict[str, int] = {}
    for spec, shape in zip(lhs, shapes, strict=False):
        left, _, right = spec.partition("...")
        for label, size in zip(left, shape, strict=False):
            sizes[label] = size
        for label, size in zip(right[::-1], shape[::-1], strict=False):
            sizes[label] = size
        if "..." in spec:
            sizes["..."] = max(sizes.get("...", 1), _numel(shape[len(left) : len(shape) - len(right)]))
    return (2.0 if len(lhs) > 1 else 1.0) * _numel(sizes.values())


def _flops(
    op_type: str, category: str, node: torch.fx.Node, submodule: Any, ins: list[tuple[int, ...]], out: list[tuple[int, ...]]
) -> float:
    out_elems = float(sum(_numel(s) for s in out))
    if category == "matmul":
        if op_type == "linear" and submodule is not None:
            return out_elems * (2 * submodule.in_features + (submodule.bias is not None))
        if op_type == "einsum":
            return _einsum_flops(str(node.args[0]), ins)
        if op_type in ("addmm", "baddbmm", "addbmm"):
            return out_elems * (2 * ins[1][-1] + 1)
        if op_type == "linear":
            return out_elems * (2 * ins[1][-1] + (len(ins) > 2))
        return 2.0 * out_elems * (ins[0][-1] if ins and ins[0] else 1)
    if category == "conv":
        weight = tuple(submodule.weight.shape) if submodule is not None else ins[1]
        has_bias = (submodule.bias is not None) if submodule is not None else len(ins) > 2
        if "transpose" in op_type:
            return 2.0 * _numel(ins[0]) * _numel(weight[1:]) + has_bias * out_elems
        return out_elems * (2.0 * _numel(weight[1:]) + has_bias)
    if category == "attention":
        if op_type == "multiheadattention":
            query, key = ins[0], ins[1]
            batch_first = submodule.batch_first
            q_len, k_len = (query[-2], key[-2]) if batch_first or len(query) == 2 else (query[0], key[0])
            tokens_q, tokens_k, embed = _numel(query[:-1]), _numel(key[:-1]), query[-1]
            batches = tokens_q // q_len
            return 2.0 * embed * embed * (2 * tokens_q + 2 * tokens_k) + batches * q_len * k_len * (4.0 * embed + 5 * submodule.num_heads)
        query, key, value = ins[0], ins[1], ins[2]
        rows = _numel(query[:-1])
        return rows * key[-2] * (2.0 * query[-1] + 2.0 * value[-1] + 5)
    if category in ("norm", "softmax"):
        return 5.0 * (_numel(ins[0]) if ins else out_elems)
    if category in ("reduce", "pool"):
        return float(_numel(ins[0])) if ins else out_elems
    if category in ("view", "embedding"):
        return 0.0
    return out_elems * (4.0 if op_type in _TRANSCENDENTAL else 1.0)


def _itemsize(dtype: torch.dtype) -> int:
    return dtype.itemsize if hasattr(dtype, "itemsize") else torch.tensor([], dtype=dtype).element_size()


@dataclass(frozen=True)
class Traced:
    """A traced module, run once on its example inputs.

    Attributes:
        gm: the fx graph module.
        tracer: ``fx``, ``transformers.fx`` or ``export``.
        recorder: each node's output shapes and dtypes (and run times when measured).
        inputs: the example inputs, as given.
        device: where the graph ran.
    """

    gm: torch.fx.GraphModule
    tracer: str
    recorder: _Recorder
    inputs: tuple
    device: torch.device


@dataclass(frozen=True)
class OpRecord:
    """One traced op that produces tensors: what it is, its tensors and its FLOPs (module docstring conventions)."""

    node: torch.fx.Node
    op_type: str
    category: str
    submodule: Any
    in_tensors: list[tuple[tuple[int, ...], torch.dtype]]
    outs: list[tuple[tuple[int, ...], torch.dtype]]
    flops: float
    preds: list[torch.fx.Node]


def trace_module(
    module: torch.nn.Module,
    example_inputs: Any = None,
    *,
    measure: bool = False,
    repeats: int = 5,
    device: str | torch.device | None = None,
) -> Traced:
    """Trace ``module`` (see :func:`from_torch` for the arguments) and run it once to learn every shape.

    ``device="meta"`` (or a module built on the meta device) learns the
    shapes without computing anything: fast and memory-free for large
    models, but not with ``measure``.
    """
    inputs = _inputs(module, example_inputs)
    current = next((p.device for p in module.parameters()), torch.device("cpu"))
    if device is None:
        device = "cuda" if measure and torch.cuda.is_available() else current
    device = torch.device(device)
    if measure and device.type == "meta":
        raise TraceError("cannot measure op times on the meta device; build the model with real weights")
    if device != current:  # run a copy there, leaving the caller's module where it is
        module = copy.deepcopy(module)
    was_training = module.training
    threads = torch.get_num_threads()
    module.eval()
    try:
        gm, tracer = _trace(module, inputs)
        gm = gm.to(device) if device != current else gm
        moved = tuple(x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs)
        recorder = _Recorder(gm, repeats if measure else 0, device)
        if not measure:  # shapes only: one thread avoids thread-pool overhead on thousands of tiny ops
            torch.set_num_threads(1)
        with torch.no_grad():
            recorder.run(*moved)
    finally:
        torch.set_num_threads(threads)
        module.train(was_training)
    return Traced(gm, tracer, recorder, inputs, device)


def op_records(traced: Traced) -> list[OpRecord]:
    """The traced ops that produce tensors, in graph order, with their FLOPs and the ops they read."""
    gm, recorder = traced.gm, traced.recorder
    ops = [n for n in gm.graph.nodes if n.op.startswith("call") and recorder.shapes.get(n)]
    produced = set(ops)
    records = []
    for node in ops:
        op_type = _op_type(node, gm)
        category = op_category(op_type)
        submodule = gm.get_submodule(node.target) if node.op == "call_module" else None
        arg_nodes = [a for a in tree_flatten((node.args, node.kwargs))[0] if isinstance(a, torch.fx.Node)]
        in_tensors = [t for a in arg_nodes for t in recorder.shapes.get(a, [])]
        if submodule is not None:
            in_tensors += [(tuple(p.shape), p.dtype) for p in submodule.parameters(recurse=False)]
        outs = recorder.shapes[node]
        flops = _flops(op_type, category, node, submodule, [s for s, _ in in_tensors], [s for s, _ in outs])
        preds = list(dict.fromkeys(a for a in arg_nodes if a in produced))
        records.append(OpRecord(node, op_type, category, submodule, in_tensors, outs, flops, preds))
    return records


def tensor_bytes(tensors: Sequence[tuple[tuple[int, ...], torch.dtype]]) -> float:
    """Bytes of ``(shape, dtype)`` tensors."""
    return float(sum(_numel(s) * _itemsize(d) for s, d in tensors))


def from_torch(
    module: torch.nn.Module,
    example_inputs: Any = None,
    profile: str | DeviceProfile | Mapping[str, Any] = "V100",
    *,
    measure: bool = False,
    repeats: int = 5,
    device: str | torch.device | None = None,
    fuse_elementwise: bool = False,
    target_nodes: int | None = None,
    name: str | None = None,
) -> DataflowGraph:
    """Trace ``module`` on ``example_inputs`` into a DataflowGraph.

    Args:
        module: the model (run in eval mode, without gradients). A
            HuggingFace ``PreTrainedModel`` is traced with HuggingFace's own
            tracer (``transformers.utils.fx``), its inputs going to
            ``main_input_name``, then ``attention_mask``, ``token_type_ids``.
        example_inputs: a tensor or a tuple of tensors for ``forward``; None
            uses ``module.example_inputs()`` when the module defines it.
        profile: device profile for the costs (preset name, dict or profile).
        measure: time each op on ``device`` instead of the roofline estimate.
        repeats: timed runs per op when measuring (the median is kept).
        device: where to run the module (default: where its parameters are;
            with ``measure``, CUDA when available; ``"meta"``: shapes only).
            A copy is moved there.
        fuse_elementwise, target_nodes: coarsen the result (see
            :func:`~workbench.importers.coarsen`).
        name: the graph's name (default: the module's class name).

    Raises:
        TraceError: the module cannot be traced (which op, where and why), an
            op fails on the inputs, or inputs are missing.
    """
    profile = get_profile(profile)
    traced = trace_module(module, example_inputs, measure=measure, repeats=repeats, device=device)
    records = op_records(traced)
    index = {r.node: i for i, r in enumerate(records)}
    compute = np.zeros(len(records))
    out_bytes = np.zeros(len(records))
    src: list[int] = []
    dst: list[int] = []
    for i, record in enumerate(records):
        out_bytes[i] = tensor_bytes(record.outs)
        nbytes = out_bytes[i] + tensor_bytes(record.in_tensors)
        dtype = str(record.outs[0][1]).removeprefix("torch.")
        if measure:
            compute[i] = traced.recorder.seconds[record.node]
        elif record.category != "view":
            compute[i] = profile.kernel_time(record.flops, nbytes, dtype if dtype in profile.flops else "float32")
        for pred in record.preds:
            src.append(index[pred])
            dst.append(i)
    comm = np.array([profile.transfer_time(b) for b in out_bytes])
    src_array = np.array(src, dtype=np.int64)
    graph = DataflowGraph(
        compute=compute,
        src=src_array,
        dst=np.array(dst, dtype=np.int64),
        comm=comm[src_array] if src_array.size else np.zeros(0),
        names=tuple(r.node.name for r in records),
        op_types=tuple(r.op_type for r in records),
        metadata={
            "format": "torch",
            "name": name or type(module).__name__,
            "tracer": traced.tracer,
            "input_shapes": [list(x.shape) for x in traced.inputs if isinstance(x, torch.Tensor)],
            "profile": profile.to_dict(),
            "costs": f"measured on {traced.device}" if measure else "roofline",
            "time_unit": "s",
            "total_flops": float(sum(r.flops for r in records)),
            "op_categories": [r.category for r in records],
            "op_flops": [r.flops for r in records],
        },
    )
    if fuse_elementwise or target_nodes is not None:
        graph = coarsen(graph, target_nodes=target_nodes, fuse_elementwise=fuse_elementwise)
    return graph
