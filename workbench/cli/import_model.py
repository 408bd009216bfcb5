"""``workbench import-model SPEC --input-shape ... [--parts ...] --out graph.json``: a torch model as a graph.

SPEC is ``hf:TYPE`` (HuggingFace, from its config), ``tv:NAME`` (torchvision),
``timm:NAME`` or ``PACKAGE.MODULE:FACTORY``; ``zoo:NAME`` builds a zoo entry at its default
partitioning and ``--zoo DIR`` rebuilds the whole zoo.
"""

from __future__ import annotations

from . import CliError

_DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "long")


def register(sub) -> None:
    parser = sub.add_parser(
        "import-model", help="trace a PyTorch model (torch.fx / HuggingFace fx / torch.export) into a graph, optionally sharded"
    )
    parser.add_argument(
        "factory",
        metavar="SPEC",
        nargs="?",
        help=(
            "hf:TYPE (e.g. hf:gpt2), tv:NAME (e.g. tv:resnet50), timm:NAME, zoo:NAME, "
            "or PACKAGE.MODULE:FACTORY (e.g. workbench.models:gpt_decoder)"
        ),
    )
    parser.add_argument(
        "--input-shape", action="append", default=[], metavar="D1,D2,...", help="shape of one forward() input, in order (repeatable)"
    )
    parser.add_argument(
        "--input-dtype",
        action="append",
        default=[],
        choices=_DTYPES,
        help="dtype of each input (default float32; int64/long for token ids)",
    )
    parser.add_argument(
        "--kwarg",
        action="append",
        default=[],
        metavar="K=V",
        help="config field (hf:), model argument (tv:, timm:) or factory keyword (JSON or string; repeatable)",
    )
    parser.add_argument("--profile", default="V100", help="device profile preset (P100, V100, A100, H100) or a JSON file of its fields")
    parser.add_argument("--measure", action="store_true", help="time each op on the local device instead of the roofline estimate")
    parser.add_argument("--fuse", action="store_true", help="fuse cheap elementwise/view ops into their producers")
    parser.add_argument(
        "--target-nodes",
        type=int,
        metavar="N",
        help="group ops until at most N nodes remain (or, with --shard-auto, shard to at most N nodes)",
    )
    parser.add_argument(
        "--parts",
        metavar="KIND=N,...",
        help="shard into block kernels, e.g. batch=2,heads=4,hidden=2,seq=1 (kinds: batch, seq, heads, hidden, channels)",
    )
    parser.add_argument("--shard-auto", action="store_true", help="shard, picking the parts that give at most --target-nodes nodes")
    parser.add_argument(
        "--op-parts",
        action="append",
        default=[],
        metavar="PATTERN:KIND=N,...",
        help=(
            "shard per op, as the paper's system does (repeatable): ops whose fx name fully matches the regular "
            "expression PATTERN get these splits (reduced=N: their contracted dimensions), every other op keeps its "
            "inputs' splits; --parts then splits the model's inputs. E.g. 'wq:hidden=2,reduced=2' 'w1|w3:hidden=4'"
        ),
    )
    parser.add_argument(
        "--op-share",
        type=int,
        metavar="N",
        help="with --cost-model paper: charge every node its op's cost / N (the paper's transformer files: 4)",
    )
    parser.add_argument(
        "--kernels",
        choices=("torch", "einsum"),
        default="torch",
        help="sharded ops as one kernel per traced op and block (torch), or as the paper's system writes them (einsum)",
    )
    parser.add_argument(
        "--cost-model",
        choices=("roofline", "paper"),
        default="roofline",
        help="costs of sharded graphs: roofline on --profile, or the paper files' convention",
    )
    parser.add_argument("--zoo", metavar="DIR", help="rebuild every zoo graph (workbench/importers/zoo.py) into DIR and print the table")
    parser.add_argument("--out", metavar="FILE", help="write the graph as JSON (else print a summary)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)


def _shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(x) for x in text.replace("x", ",").split(",") if x.strip())
    except ValueError:
        raise CliError(f"--input-shape {text!r}: expected comma-separated integers such as 2,128") from None
    if not shape or min(shape) < 1:
        raise CliError(f"--input-shape {text!r}: every dimension must be >= 1")
    return shape


def _inputs(args):
    import torch

    if len(args.input_dtype) > len(args.input_shape):
        raise CliError(f"{len(args.input_dtype)} --input-dtype for {len(args.input_shape)} --input-shape")
    inputs = []
    for i, text in enumerate(args.input_shape):
        dtype = getattr(torch, args.input_dtype[i]) if i < len(args.input_dtype) else torch.float32
        shape = _shape(text)
        inputs.append(torch.zeros(shape, dtype=dtype) if not dtype.is_floating_point else torch.randn(shape, dtype=dtype))
    return inputs


def _op_parts(items: list[str]) -> dict[str, str] | None:
    """``["wq:hidden=2,reduced=2", ...]`` -> ``{"wq": "hidden=2,reduced=2", ...}`` (``None`` when none is given)."""
    if not items:
        return None
    parsed: dict[str, str] = {}
    for item in items:
        pattern, sep, parts = item.rpartition(":")
        if not sep or not pattern or "=" not in parts:
            raise CliError(f"--op-parts {item!r}: expected PATTERN:KIND=N,... such as 'wq:hidden=2,reduced=2'")
        if pattern in parsed:
            raise CliError(f"--op-parts: pattern {pattern!r} given twice")
        parsed[pattern] = parts
    return parsed


def _sharding_options(args) -> dict:
    """The options of --kernels, --op-parts and --op-share for shard() (only those given)."""
    if args.op_share is not None and args.cost_model != "paper":
        raise CliError("--op-share needs --cost-model paper")
    options: dict = {"kernels": args.kernels} if args.kernels != "torch" else {}
    op_parts = _op_parts(args.op_parts)
    if op_parts is not None:
        options["op_parts"] = op_parts
    if args.op_share is not None:
        options["op_share"] = args.op_share
    return options


def run(args) -> int:
    from ..generators.profiles import get_profile
    from .common import json_argument
    from .generate import parse_params, save_and_report

    if args.zoo:
        from ..importers.zoo import build_zoo

        build_zoo(args.zoo, report=print)
        return 0
    if not args.factory:
        raise CliError("give a model SPEC (hf:TYPE, tv:NAME, timm:NAME, zoo:NAME or PACKAGE.MODULE:FACTORY) or --zoo DIR")
    if args.parts and args.shard_auto:
        raise CliError("give --parts or --shard-auto, not both")
    if args.shard_auto and args.target_nodes is None:
        raise CliError("--shard-auto needs --target-nodes")
    kwargs = parse_params(args.kwarg, "--kwarg")
    profile = args.profile if not args.profile.endswith(".json") else json_argument(args.profile, "--profile")
    profile = get_profile(profile)
    sharding = _sharding_options(args)
    if args.factory.startswith("zoo:"):
        from ..importers.zoo import build_entry

        graph = build_entry(args.factory.removeprefix("zoo:"), profile=profile, cost_model=args.cost_model, **sharding)
        save_and_report(graph, args, f", {len(graph.metadata['unsharded'])} unsharded ops")
        return 0
    from ..importers.specs import build_model, default_inputs

    named = args.factory.startswith(("hf:", "tv:", "timm:"))
    meta = named and not args.measure  # shapes only, no weights in memory (a user's factory runs as written)
    model = build_model(args.factory, kwargs, meta=meta)
    inputs = _inputs(args) or default_inputs(args.factory)
    device = "meta" if meta else None
    name = args.factory if named else None  # else the module's class name
    if args.parts or args.shard_auto or "op_parts" in sharding:
        from ..importers.sharding import shard

        if args.measure or args.fuse:
            raise CliError("--measure and --fuse apply to operator graphs, not to sharded ones")
        graph = shard(
            model,
            inputs,
            args.parts,
            target_nodes=args.target_nodes if args.shard_auto else None,
            cost_model=args.cost_model,
            profile=profile,
            device=device,
            name=name,
            **sharding,
        )
        unsharded = graph.metadata["unsharded"]
        detail = f", parts {graph.metadata['parts']}, {len(unsharded)} unsharded ops" + (
            f" ({', '.join(sorted({u['op_type'] for u in unsharded}))})" if unsharded else ""
        )
        save_and_report(graph, args, detail)
        return 0
    if sharding:
        raise CliError("--kernels, --op-share and --op-parts apply to sharded graphs: give --parts, --shard-auto or --op-parts")
    from ..importers.torch_fx import from_torch

    graph = from_torch(
        model, inputs, profile, measure=args.measure, device=device, fuse_elementwise=args.fuse, target_nodes=args.target_nodes, name=name
    )
    save_and_report(graph, args, f", {graph.metadata['total_flops']:.4g} FLOPs, traced with {graph.metadata['tracer']}")
    return 0
