"""The DOPPLER paper's four workloads as partitioned tensor programs, at any size.

Yao et al., "DOPPLER: Dual-Policy Learning for Device Assignment in
Asynchronous Dataflow Graphs" (ICLR 2026, arXiv 2505.23131) evaluate on a
chain of matrix multiplications, a feed-forward network, a Llama transformer
block and a full Llama transformer layer, each decomposed into block kernels.
Each family here writes the workload as einsums over partitioned tensors
(:mod:`workbench.generators.blocks`): sizes and the number of partitions per
dimension are parameters; costs come from a device profile (seconds) or the
paper files' convention (``cost_model="paper"``). The defaults are the
settings closest to the bundled graphs (see ``docs/generators.md``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..graph import DataflowGraph
from .blocks import BlockProgram, BlockTensor, CostModel
from .profiles import get_profile

__all__ = ["chain_mm", "ffnn", "transformer_block", "transformer_layer"]

Profile = "str | DeviceProfile | Mapping[str, Any]"


def _program(cost_model: str, profile: Profile, dtype: str) -> BlockProgram:
    return BlockProgram(CostModel(cost_model, get_profile(profile), dtype))


def _chains(value: str | int | Sequence[Sequence[int]], what: str) -> list[list[int]]:
    """``"20x40x20+20x30"`` (or nested lists) → ``[[20, 40, 20], [20, 30]]``."""
    if isinstance(value, str):
        try:
            chains = [[int(x) for x in chain.split("x")] for chain in value.replace(" ", "").split("+")]
        except ValueError:
            raise ValueError(f"{what}: expected numbers joined by 'x', chains joined by '+', got {value!r}") from None
    else:
        chains = [[int(x) for x in chain] for chain in value]
    if any(len(chain) < 2 for chain in chains):
        raise ValueError(f"{what}: each chain needs at least 2 dimensions (one matrix), got {value!r}")
    return chains


def chain_mm(
    shapes: str | Sequence[Sequence[int]] = "20000x40000x20000x40000+20000x20000x40000",
    parts: str | int | Sequence[Sequence[int]] = "2x4x2x4+2x2x4",
    dtype: str = "float32",
    profile: Profile = "V100",
    cost_model: str = "roofline",
) -> DataflowGraph:
    """Sums of chains of matrix products, ``M1 @ M2 @ ... + N1 @ N2 @ ... + ...``.

    Args:
        shapes: one chain per ``+``; a chain ``d0xd1x...xdk`` multiplies the
            matrices ``d0 x d1``, ``d1 x d2``, ... All chains must give the
            same result shape ``d0 x dk``. The default is the paper's
            ``A@B@C + D@E``.
        parts: the number of blocks per dimension, same layout as ``shapes``,
            or one int for every dimension.
        dtype, profile, cost_model: element type, device profile and cost
            model (``roofline`` or ``paper``).
    """
    dims = _chains(shapes, "shapes")
    splits = [[int(parts)] * len(chain) for chain in dims] if isinstance(parts, int) else _chains(parts, "parts")
    if [len(c) for c in splits] != [len(c) for c in dims]:
        raise ValueError(f"parts {parts!r} does not have the layout of shapes {shapes!r}")
    if len({(c[0], c[-1]) for c in dims}) != 1 or len({(c[0], c[-1]) for c in splits}) != 1:
        raise ValueError("every chain must give a result of the same shape and partitioning to be summed")
    program = _program(cost_model, profile, dtype)
    results: list[BlockTensor] = []
    for c, (chain, split) in enumerate(zip(dims, splits, strict=True)):
        letter = chr(ord("A") + c)
        product = program.input(f"{letter}1", chain[:2], split[:2])
        for i in range(1, len(chain) - 1):
            factor = program.input(f"{letter}{i + 1}", chain[i : i + 2], split[i : i + 2])
            product = program.einsum(f"{letter}.matmul{i}", "ik,kj->ij", product, factor, op_type="matmul", flops_per_point=2)
        results.append(product)
    total = results[0]
    for c, term in enumerate(results[1:], start=1):
        total = program.einsum(f"add{c}", "ij,ij->ij", total, term, op_type="add")
    return program.graph({"family": "chain_mm"})


def ffnn(
    batch: int = 131072,
    features: int = 32,
    hidden: int = 262144,
    classes: int = 32,
    hidden_layers: int = 1,
    batch_parts: int = 4,
    hidden_parts: int = 4,
    dtype: str = "float32",
    profile: Profile = "V100",
    cost_model: str = "roofline",
) -> DataflowGraph:
    """A feed-forward network's forward pass: ``hidden_layers`` × (matmul, bias, ReLU), an output layer, softmax.

    Args:
        batch, features, hidden, classes: rows of the input, input width,
            width of each hidden layer, output width.
        hidden_layers: number of hidden layers (>= 1).
        batch_parts, hidden_parts: blocks along the batch and hidden dimensions.
        dtype, profile, cost_model: see :func:`chain_mm`.
    """
    if hidden_layers < 1:
        raise ValueError(f"hidden_layers must be >= 1, got {hidden_layers}")
    program = _program(cost_model, profile, dtype)
    x = program.input("X", (batch, features), (batch_parts, 1))
    widths = [features] + [hidden] * hidden_layers + [classes]
    splits = [1] + [hidden_parts] * hidden_layers + [1]
    for layer in range(1, len(widths)):
        weight = program.input(f"W{layer}", widths[layer - 1 : layer + 1], splits[layer - 1 : layer + 1])
        bias = program.input(f"b{layer}", (widths[layer],), (splits[layer],))
        x = program.einsum(f"layer{layer}.matmul", "bi,io->bo", x, weight, op_type="matmul", flops_per_point=2)
        x = program.einsum(f"layer{layer}.bias", "bo,o->bo", x, bias, op_type="add")
        if layer < len(widths) - 1:
            x = program.einsum(f"layer{layer}.relu", "bo->bo", x, op_type="relu")
    _softmax(program, "softmax", x, "bo", "b")
    return program.graph({"family": "ffnn"})


def _softmax(program: BlockProgram, name: str, x: BlockTensor, labels: str, kept: str, fused: bool = True) -> BlockTensor:
    """Safe softmax over the labels of ``x`` not in ``kept``: max, exp(x - max) (two ops unless ``fused``), sum, divide."""
    peak = program.einsum(f"{name}.max", f"{labels}->{kept}", x, op_type="reduce_max", combine="max")
    if fused:
        shifted = program.einsum(f"{name}.exp", f"{labels},{kept}->{labels}", x, peak, op_type="exp", flops_per_point=5)
    else:
        shifted = program.einsum(f"{name}.sub", f"{labels},{kept}->{labels}", x, peak, op_type="sub")
        shifted = program.einsum(f"{name}.exp", f"{labels}->{labels}", shifted, op_type="exp", flops_per_point=4)
    total = program.einsum(f"{name}.sum", f"{labels}->{kept}", shifted, op_type="reduce_sum")
    return program.einsum(f"{name}.div", f"{labels},{kept}->{labels}", shifted, total, op_type="div")


def _rmsnorm(program: BlockProgram, name: str, x: BlockTensor, fused: bool) -> BlockTensor:
    """RMSNorm over the hidden dimension. Fused: sum of squares, reciprocal root, scale by it and the gain.
    Unfused: square, sum, mean, reciprocal root, scale, gain."""
    gain = program.input(f"{name}.gain", x.shape[-1:], x.parts[-1:])
    if fused:
        squares = program.einsum(f"{name}.square_sum", "bsh,bsh->bs", x, x, op_type="reduce_sum", flops_per_point=2)
        inverse = program.einsum(f"{name}.rsqrt", "bs->bs", squares, op_type="rsqrt", flops_per_point=6)
        return program.einsum(f"{name}.scale", "bsh,bs,h->bsh", x, inverse, gain, op_type="mul", flops_per_point=2)
    squares = program.einsum(f"{name}.square", "bsh->bsh", x, op_type="square")
    total = program.einsum(f"{name}.sum", "bsh->bs", squares, op_type="reduce_sum")
    mean = program.einsum(f"{name}.mean", "bs->bs", total, op_type="div")
    inverse = program.einsum(f"{name}.rsqrt", "bs->bs", mean, op_type="rsqrt", flops_per_point=5)
    scaled = program.einsum(f"{name}.scale", "bsh,bs->bsh", x, inverse, op_type="mul")
    return program.einsum(f"{name}.gain", "bsh,h->bsh", scaled, gain, op_type="mul")


def _rope(program: BlockProgram, name: str, x: BlockTensor, cos: BlockTensor, sin: BlockTensor, fused: bool) -> BlockTensor:
    """Rotary embedding ``x·cos + rotate(x)·sin`` (the rotation is a permutation, not an op)."""
    if fused:
        return program.einsum(name, "bsnd,sd,sd->bsnd", x, cos, sin, op_type="rope", flops_per_point=3)
    with_cos = program.einsum(f"{name}.cos", "bsnd,sd->bsnd", x, cos, op_type="mul")
    with_sin = program.einsum(f"{name}.sin", "bsnd,sd->bsnd", x, sin, op_type="mul")
    return program.einsum(f"{name}.add", "bsnd,bsnd->bsnd", with_cos, with_sin, op_type="add")


def _block(
    program: BlockProgram, name: str, x: BlockTensor, heads: int, ffn: int, head_parts: int, ffn_parts: int, fused: bool
) -> BlockTensor:
    """One Llama block on ``x`` (batch, seq, hidden): x + attention(norm(x)), then + SwiGLU MLP(norm(.))."""
    _, seq, hidden = x.shape
    seq_parts, hidden_parts = x.parts[1], x.parts[2]
    head_dim = hidden // heads
    y = _rmsnorm(program, f"{name}.attn_norm", x, fused)
    cos, sin = (program.input(f"{name}.rope_{f}", (seq, head_dim), (seq_parts, 1)) for f in ("cos", "sin"))
    projections = {}
    for part in "qkv":
        weight = program.input(f"{name}.W{part}", (hidden, heads, head_dim), (hidden_parts, head_parts, 1))
        projections[part] = program.einsum(f"{name}.{part}_proj", "bsh,hnd->bsnd", y, weight, op_type="matmul", flops_per_point=2)
    for part in "qk":
        projections[part] = _rope(program, f"{name}.{part}_rope", projections[part], cos, sin, fused)
    scores = program.einsum(f"{name}.scores", "bsnd,btnd->bnst", projections["q"], projections["k"], op_type="matmul", flops_per_point=2)
    mask = program.input(f"{name}.mask", (seq, seq), (seq_parts, seq_parts))
    if fused:
        scores = program.einsum(f"{name}.mask", "bnst,st->bnst", scores, mask, op_type="scale_mask", flops_per_point=2)
    else:
        scores = program.einsum(f"{name}.scale", "bnst->bnst", scores, op_type="mul")
        scores = program.einsum(f"{name}.mask", "bnst,st->bnst", scores, mask, op_type="add")
    probs = _softmax(program, f"{name}.softmax", scores, "bnst", "bns", fused)
    context = program.einsum(f"{name}.context", "bnst,btnd->bsnd", probs, projections["v"], op_type="matmul", flops_per_point=2)
    w_out = program.input(f"{name}.Wo", (heads, head_dim, hidden), (head_parts, 1, hidden_parts))
    attention = program.einsum(f"{name}.o_proj", "bsnd,ndh->bsh", context, w_out, op_type="matmul", flops_per_point=2)
    x = program.einsum(f"{name}.attn_residual", "bsh,bsh->bsh", x, attention, op_type="add")
    y = _rmsnorm(program, f"{name}.mlp_norm", x, fused)
    gate_up = []
    for part in ("gate", "up"):
        weight = program.input(f"{name}.W{part}", (hidden, ffn), (hidden_parts, ffn_parts))
        gate_up.append(program.einsum(f"{name}.{part}_proj", "bsh,hf->bsf", y, weight, op_type="matmul", flops_per_point=2))
    gate, up = gate_up
    if fused:
        act = program.einsum(f"{name}.swiglu", "bsf,bsf->bsf", gate, up, op_type="swiglu", flops_per_point=6)
    else:
        sigmoid = program.einsum(f"{name}.sigmoid", "bsf->bsf", gate, op_type="sigmoid", flops_per_point=4)
        silu = program.einsum(f"{name}.silu", "bsf,bsf->bsf", gate, sigmoid, op_type="mul")
        act = program.einsum(f"{name}.swiglu", "bsf,bsf->bsf", silu, up, op_type="mul")
    w_down = program.input(f"{name}.Wdown", (ffn, hidden), (ffn_parts, hidden_parts))
    mlp = program.einsum(f"{name}.down_proj", "bsf,fh->bsh", act, w_down, op_type="matmul", flops_per_point=2)
    return program.einsum(f"{name}.mlp_residual", "bsh,bsh->bsh", x, mlp, op_type="add")


def _check_transformer(hidden: int, heads: int) -> None:
    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads})")


def transformer_block(
    batch: int = 4,
    seq: int = 4096,
    hidden: int = 4096,
    heads: int = 32,
    ffn: int = 11008,
    batch_parts: int = 1,
    seq_parts: int = 2,
    hidden_parts: int = 2,
    head_parts: int = 1,
    ffn_parts: int = 1,
    fused: bool = False,
    dtype: str = "float32",
    profile: Profile = "V100",
    cost_model: str = "roofline",
) -> DataflowGraph:
    """One Llama transformer block: RMSNorm, attention with RoPE and a causal mask, RMSNorm, SwiGLU MLP, residuals.

    Args:
        batch, seq, hidden, heads, ffn: sizes (the defaults are Llama-7B's
            widths with 4 sequences of 4096 tokens).
        batch_parts, seq_parts, hidden_parts, head_parts, ffn_parts: blocks
            per dimension (the defaults give the graph closest to the bundled
            one; splitting only the batch gives independent pipelines).
        fused: one kernel per norm, softmax exponent, RoPE, scale+mask and
            SwiGLU, as a compiler would fuse them; the default keeps each
            elementwise step a node, as the paper's graphs do.
        dtype, profile, cost_model: see :func:`chain_mm`.
    """
    _check_transformer(hidden, heads)
    program = _program(cost_model, profile, dtype)
    x = program.input("x", (batch, seq, hidden), (batch_parts, seq_parts, hidden_parts))
    _block(program, "block", x, heads, ffn, head_parts, ffn_parts, fused)
    return program.graph({"family": "transformer_block"})


def transformer_layer(
    batch: int = 4,
    seq: int = 4096,
    hidden: int = 4096,
    heads: int = 32,
    ffn: int = 11008,
    vocab: int = 32000,
    layers: int = 1,
    batch_parts: int = 1,
    seq_parts: int = 2,
    hidden_parts: int = 2,
    head_parts: int = 1,
    ffn_parts: int = 1,
    vocab_parts: int = 1,
    fused: bool = False,
    dtype: str = "float32",
    profile: Profile = "V100",
    cost_model: str = "roofline",
) -> DataflowGraph:
    """A full Llama model step: ``layers`` blocks, the final RMSNorm, the LM head on the last position, softmax.

    Args:
        vocab, vocab_parts: vocabulary size and its blocks.
        layers: number of transformer blocks (>= 1).
        others: see :func:`transformer_block`.
    """
    _check_transformer(hidden, heads)
    if layers < 1:
        raise ValueError(f"layers must be >= 1, got {layers}")
    program = _program(cost_model, profile, dtype)
    x = program.input("x", (batch, seq, hidden), (batch_parts, seq_parts, hidden_parts))
    for layer in range(layers):
        x = _block(program, f"block{layer}", x, heads, ffn, head_parts, ffn_parts, fused)
    x = _rmsnorm(program, "final_norm", x, fused)
    last = program.select_last("last_token", x, axis=1)
    head = program.input("lm_head", (hidden, vocab), (hidden_parts, vocab_parts))
    logits = program.einsum("lm_head", "bh,hv->bv", last, head, op_type="matmul", flops_per_point=2)
    _softmax(program, "softmax", logits, "bv", "b", fused)
    return program.graph({"family": "transformer_layer"})
