"""``workbench import-model PACKAGE.MODULE:FACTORY --input-shape ... --out graph.json``: a torch model as a graph."""

from __future__ import annotations

from ..imports import import_object
from . import CliError

_DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "long")


def register(sub) -> None:
    parser = sub.add_parser("import-model", help="trace a PyTorch model (torch.fx / torch.export) into a graph")
    parser.add_argument("factory", metavar="PACKAGE.MODULE:FACTORY", help="a function (or class) returning an nn.Module, e.g. workbench.models:gpt_decoder")
    parser.add_argument("--input-shape", action="append", default=[], metavar="D1,D2,...", help="shape of one forward() input, in order (repeatable)")
    parser.add_argument("--input-dtype", action="append", default=[], choices=_DTYPES, help="dtype of each input (default float32; int64/long for token ids)")
    parser.add_argument("--kwarg", action="append", default=[], metavar="K=V", help="keyword argument for the factory (JSON or string; repeatable)")
    parser.add_argument("--profile", default="V100", help="device profile preset (P100, V100, A100, H100) or a JSON file of its fields")
    parser.add_argument("--measure", action="store_true", help="time each op on the local device instead of the roofline estimate")
    parser.add_argument("--fuse", action="store_true", help="fuse cheap elementwise/view ops into their producers")
    parser.add_argument("--target-nodes", type=int, metavar="N", help="group ops until at most N nodes remain")
    parser.add_argument("--out", metavar="FILE", help="write the graph as JSON (else print a summary)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)


def _factory(spec: str):
    try:
        return import_object(spec)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(x) for x in text.replace("x", ",").split(",") if x.strip())
    except ValueError:
        raise CliError(f"--input-shape {text!r}: expected comma-separated integers such as 2,128") from None
    if not shape or min(shape) < 1:
        raise CliError(f"--input-shape {text!r}: every dimension must be >= 1")
    return shape


def run(args) -> int:
    import torch

    from ..generators.profiles import get_profile
    from ..importers.torch_fx import from_torch
    from .common import json_argument
    from .generate import parse_params, save_and_report

    profile = args.profile if not args.profile.endswith(".json") else json_argument(args.profile, "--profile")
    profile = get_profile(profile)
    model = _factory(args.factory)(**parse_params(args.kwarg))
    if not isinstance(model, torch.nn.Module):
        raise CliError(f"{args.factory} returned {type(model).__name__}, not a torch.nn.Module")
    if len(args.input_dtype) > len(args.input_shape):
        raise CliError(f"{len(args.input_dtype)} --input-dtype for {len(args.input_shape)} --input-shape")
    inputs = None
    if args.input_shape:
        inputs = []
        for i, text in enumerate(args.input_shape):
            dtype = getattr(torch, args.input_dtype[i]) if i < len(args.input_dtype) else torch.float32
            shape = _shape(text)
            inputs.append(torch.zeros(shape, dtype=dtype) if not dtype.is_floating_point else torch.randn(shape, dtype=dtype))
    graph = from_torch(model, inputs, profile, measure=args.measure, fuse_elementwise=args.fuse, target_nodes=args.target_nodes)
    save_and_report(graph, args, f", {graph.metadata['total_flops']:.4g} FLOPs, traced with {graph.metadata['tracer']}")
    return 0
