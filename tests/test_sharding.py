"""Sharding traced models into block graphs, and models named by hf:/tv: specs: FLOP conservation, block inputs, errors."""

from __future__ import annotations

import sys

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import workbench as wb  # noqa: E402
from workbench.cli import main  # noqa: E402
from workbench.importers import TraceError, from_torch  # noqa: E402
from workbench.importers.sharding import auto_parts, parse_parts, shard, shard_traced  # noqa: E402
from workbench.importers.specs import SpecError, build_model, default_inputs  # noqa: E402
from workbench.importers.torch_fx import trace_module  # noqa: E402
from workbench.models import mlp  # noqa: E402

TINY_GPT2 = {"n_layer": 1, "n_embd": 32, "n_head": 2, "vocab_size": 100, "n_positions": 64}


def _blocks(graph, prefix):
    """Node ids of ``prefix[i, j, ...]`` kernels, by their block index."""
    found = {}
    for node, name in enumerate(graph.names):
        if name.startswith(prefix + "[") and name[len(prefix)] == "[":
            found[tuple(int(x) for x in name[len(prefix) + 1 : -1].split(","))] = node
    return found


def _preds(graph, node):
    return set(graph.src[graph.dst == node].tolist())


def _check_conservation_and_order(graph, traced_flops):
    meta = graph.metadata
    assert meta["total_flops"] - meta["combine_flops"] == traced_flops  # exact: kernels share each op's FLOPs in integers
    assert np.all(graph.src < graph.dst)  # nodes are made in a topological order, so the graph is acyclic
    assert nx.is_directed_acyclic_graph(nx.DiGraph(list(zip(graph.src.tolist(), graph.dst.tolist(), strict=True))))


def test_mlp_blocks_read_exactly_the_blocks_of_their_slices():
    model = mlp(features=4, hidden=8, layers=1, classes=2, batch=4)
    graph = shard(model, parts="batch=2,hidden=2")
    _check_conservation_and_order(graph, from_torch(model).metadata["total_flops"])
    # two linears, each 2 batch x 2 output x 2 contracted blocks + one partial sum per output block; 4 ReLU blocks
    assert graph.num_nodes == 2 * (8 + 4) + 4
    first, first_sum = _blocks(graph, "layers_0"), _blocks(graph, "layers_0.partial_sum")
    relu, second = _blocks(graph, "layers_1"), _blocks(graph, "layers_2")
    assert len(first) == 8 and len(first_sum) == 4 and len(relu) == 4
    for (b, o), node in first_sum.items():
        assert _preds(graph, node) == {first[b, o, 0], first[b, o, 1]}  # the partial results of its output block
        assert _preds(graph, relu[b, o]) == {node}  # elementwise: the same block
    for (b, _out_block, k), node in second.items():
        assert _preds(graph, node) == {relu[b, k]}  # rows b of the input, contracted slice k
    assert graph.metadata["unsharded"] == []


def test_gather_reads_exactly_the_overlapping_blocks_and_aliases_aligned_ones():
    from workbench.generators.blocks import BlockProgram, CostModel
    from workbench.generators.profiles import get_profile

    program = BlockProgram(CostModel("paper", get_profile("V100")))
    source = program.input("x", (12,), (3,))  # blocks [0,4) [4,8) [8,12), each made by a node
    for i in range(3):
        source.blocks[i] = program.node(f"x{i}", "op", [], 0, 4, 0, 0)
    middle = program.gather("mid", "slice", (6,), (2,), [(source, (-3,))])  # [3,6) reads blocks 0, 1; [6,9) reads 1, 2
    assert [sorted(_preds_of(program, b)) for b in middle.blocks] == [[0, 1], [1, 2]]
    aligned = program.gather("first", "slice", (4,), (1,), [(source, (0,))])  # exactly block 0: no node
    assert aligned.blocks.tolist() == [0]
    joined = program.gather("cat", "cat", (18,), (2,), [(source, (0,)), (middle, (12,))], flops=18)
    assert [sorted(_preds_of(program, b)) for b in joined.blocks] == [[0, 1, 2], [2, middle.blocks[0], middle.blocks[1]]]
    assert program.flops[joined.blocks[0]] + program.flops[joined.blocks[1]] == 18  # the copy's work, shared exactly


def _preds_of(program, node):
    return {s for s, d in zip(program.src, program.dst, strict=True) if d == node}


class Attention(nn.Module):
    """Heads split off the hidden dimension, attention scores, a softmax over a split dimension."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(16, 48)
        self.norm = nn.LayerNorm(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.norm(x)).split(16, dim=2)
        q, k, v = (t.view(2, 8, 4, 4).transpose(1, 2) for t in (q, k, v))
        scores = torch.softmax(q @ k.transpose(-1, -2), dim=-1)
        return torch.cumsum((scores @ v).transpose(1, 2).reshape(2, 8, 16), dim=1)


def test_split_reductions_use_partial_results_and_unshardable_ops_stay_single_nodes():
    model = Attention()
    x = torch.randn(2, 8, 16)
    graph = shard(model, (x,), "batch=2,seq=2,heads=2,hidden=2")
    _check_conservation_and_order(graph, from_torch(model, (x,)).metadata["total_flops"])
    types = set(graph.op_types)
    assert {"partial_max", "partial_sum", "layernorm_stats", "exp", "div", "slice"} <= types  # split softmax, layer norm and split
    assert [u["op_type"] for u in graph.metadata["unsharded"]] == ["cumsum"]
    cumsum = graph.names.index("cumsum")
    assert _preds(graph, cumsum) == set(_blocks(graph, "matmul_1.partial_sum").values())  # every block of its input
    whole = shard(model, (x,), "batch=2")  # nothing reduced is split: no partial results, half the blocks of batch=2 alone
    assert not {"partial_max", "partial_sum"} & set(whole.op_types)
    assert whole.metadata["total_flops"] == graph.metadata["source_flops"]


_ATTENTION = trace_module(Attention(), (torch.randn(2, 8, 16),))
_ATTENTION_FLOPS = from_torch(Attention(), (torch.randn(2, 8, 16),)).metadata["total_flops"]


@settings(max_examples=8, deadline=None)
@given(st.fixed_dictionaries({kind: st.sampled_from([1, 2, 3, 4]) for kind in ("batch", "seq", "heads", "hidden")}))
def test_any_partitioning_conserves_flops_and_stays_acyclic(parts):
    graph = shard_traced(_ATTENTION, parts, cost_model="paper")
    _check_conservation_and_order(graph, _ATTENTION_FLOPS)
    combines = [n for n, t in enumerate(graph.op_types) if t.startswith("partial_")]
    assert all(len(_preds(graph, n)) >= 2 for n in combines)  # a partial result joins at least two kernels
    assert [u["op_type"] for u in graph.metadata["unsharded"]] == ["cumsum"]


def test_einsum_style_spells_out_norms_softmax_and_bias_and_forms_every_contraction():
    graph = shard_traced(_ATTENTION, "batch=2,seq=2,hidden=2", kernels="einsum", cost_model="paper")
    _check_conservation_and_order(graph, _ATTENTION_FLOPS)  # the steps share each op's FLOPs exactly
    types = set(graph.op_types)
    assert {"reduce_sum", "sub", "square", "rsqrt", "reduce_max", "exp", "div", "formation"} <= types
    assert "layernorm" not in types and "softmax" not in types  # no fused kernel left
    bias, qkv_sum = _blocks(graph, "qkv.bias"), _blocks(graph, "qkv.partial_sum")
    assert len(bias) == 8 and all(_preds(graph, node) == {qkv_sum[index]} for index, node in bias.items())  # bias after the sum
    scores, formed = _blocks(graph, "matmul"), _blocks(graph, "matmul.formation")  # q @ k^T: head_dim whole, one kernel per block
    assert formed and len(formed) == len(scores)
    assert all(_preds(graph, node) == {scores[index + (0,)]} for index, node in formed.items())  # each copies its one kernel
    assert all(
        graph.compute[node] == graph.compute[scores[index + (0,)]] / 4 for index, node in formed.items()
    )  # elements written, head_dim 4
    torch_style = shard_traced(_ATTENTION, "batch=2,seq=2,hidden=2")
    assert "formation" not in torch_style.op_types and torch_style.num_nodes < graph.num_nodes
    with pytest.raises(ValueError, match="unknown kernel style 'fused'; use torch or einsum"):
        shard_traced(_ATTENTION, "batch=2", kernels="fused")


def test_einsum_style_scales_and_masks_causal_attention_in_their_own_steps():
    from workbench.models.gpt import Block

    model, x = Block(16, 2), torch.randn(2, 8, 16)
    graph = shard(model, (x,), "seq=2,hidden=2", kernels="einsum", cost_model="paper")
    _check_conservation_and_order(graph, from_torch(model, (x,)).metadata["total_flops"])
    scale, mask = _blocks(graph, "scaled_dot_product_attention.scale"), _blocks(graph, "scaled_dot_product_attention.mask")
    formed = _blocks(graph, "scaled_dot_product_attention.scores.formation")
    assert len(scale) == len(mask) == len(formed) == 4  # (query block, key block) with batch and heads whole
    assert all(_preds(graph, mask[i]) == {scale[i]} and _preds(graph, scale[i]) == {formed[i]} for i in scale)
    assert graph.metadata["kernels"] == "einsum" and graph.metadata["unsharded"] == []


def test_parts_and_auto_parts():
    assert parse_parts("batch=2, heads=4,hidden=2,seq=1") == {"batch": 2, "heads": 4, "hidden": 2, "seq": 1}
    with pytest.raises(ValueError, match="unknown dimension kind.*vocab"):
        parse_parts("vocab=2")
    with pytest.raises(ValueError, match="integers >= 1"):
        parse_parts("batch=0")
    model = mlp(features=8, hidden=16, layers=2, classes=4, batch=8)
    traced = trace_module(model)
    parts = auto_parts(traced, 60)
    nodes = shard(model, parts=parts).num_nodes
    assert 5 < nodes <= 60
    assert shard(model, target_nodes=60).num_nodes == nodes


def test_huggingface_model_from_a_spec_imports_and_shards():
    pytest.importorskip("transformers")
    model = build_model("hf:gpt2", TINY_GPT2)
    ids = (torch.zeros(2, 16, dtype=torch.int64),)
    ops = from_torch(model, ids)
    assert ops.metadata["tracer"] == "transformers.fx" and ops.op_types.count("addmm") == 4  # Conv1D: qkv, proj, fc, out
    graph = shard(model, ids, "batch=2,heads=2,hidden=2,seq=2")
    _check_conservation_and_order(graph, ops.metadata["total_flops"])
    assert graph.num_nodes > 4 * ops.num_nodes
    assert {u["op_type"] for u in graph.metadata["unsharded"]} <= {"arange", "full"}  # constants only, and reported
    on_meta = shard(build_model("hf:gpt2", TINY_GPT2, meta=True), ids, "batch=2,heads=2,hidden=2,seq=2", device="meta")
    assert on_meta.num_nodes == graph.num_nodes and on_meta.metadata["total_flops"] == graph.metadata["total_flops"]


def test_torchvision_model_from_a_spec_imports_and_shards():
    pytest.importorskip("torchvision")
    model = build_model("tv:resnet18", {"num_classes": 10}, meta=True)
    images = (torch.zeros(2, 3, 32, 32),)
    ops = from_torch(model, images, device="meta")
    graph = shard(model, images, "batch=2,channels=2", device="meta")
    _check_conservation_and_order(graph, ops.metadata["total_flops"])
    assert graph.metadata["unsharded"] == [] and "partial_sum" in graph.op_types  # input channels split: partial sums
    assert default_inputs("tv:resnet18")[0].shape == (1, 3, 224, 224)


def test_timm_model_from_a_spec_imports_and_shards():
    pytest.importorskip("timm")
    model = build_model("timm:resnet18", {"num_classes": 10}, meta=True)
    images = (torch.zeros(2, 3, 32, 32),)
    ops = from_torch(model, images, device="meta")
    graph = shard(model, images, "batch=2,channels=2", device="meta")
    _check_conservation_and_order(graph, ops.metadata["total_flops"])
    assert ops.metadata["tracer"] == "fx" and graph.metadata["unsharded"] == []
    with pytest.raises(SpecError, match="unknown timm model 'nope'"):
        build_model("timm:nope")


def test_unknown_specs_missing_extra_and_untraceable_models_give_one_line_errors(monkeypatch, capsys, tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("torchvision")
    for spec, message in [
        ("hf:nope", "unknown HuggingFace model type 'nope'"),
        ("tv:nope", "unknown torchvision model 'nope'"),
        ("nope", "unknown model spec 'nope'; use hf:TYPE, tv:NAME, timm:NAME or PACKAGE.MODULE:FACTORY"),
    ]:
        with pytest.raises(SpecError, match=message):
            build_model(spec)
    with pytest.raises(SpecError, match="unknown config field.*n_layerz; GPT2Config has: .*n_layer"):
        build_model("hf:gpt2", {"n_layerz": 2})
    with pytest.raises(SpecError, match="unexpected keyword"):
        build_model("tv:resnet18", {"depth": 3})

    class Branchy(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2 if x.sum() > 0 else x

    with pytest.raises(TraceError, match="cannot trace Branchy"):
        shard(Branchy(), (torch.randn(3),), "batch=2")
    (tmp_path / "branchy").mkdir()
    (tmp_path / "branchy" / "__init__.py").write_text("")
    (tmp_path / "branchy" / "model.py").write_text(
        "import torch\n\nclass Branchy(torch.nn.Module):\n    def forward(self, x):\n        return x * 2 if x.sum() > 0 else x\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["import-model", "branchy.model:Branchy", "--input-shape", "3"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot trace Branchy" in err  # the cause, on one line
    monkeypatch.setitem(sys.modules, "transformers", None)  # as if the extra were not installed
    with pytest.raises(SpecError, match=r"hf:gpt2 needs transformers, which is not installed: pip install 'doppler-workbench\[models\]'"):
        build_model("hf:gpt2")
    assert main(["import-model", "hf:gpt2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "[models]" in err


def test_cli_import_model_with_a_spec_and_parts(tmp_path, capsys):
    pytest.importorskip("transformers")
    out = tmp_path / "gpt2.json"
    kwargs = [arg for k, v in TINY_GPT2.items() for arg in ("--kwarg", f"{k}={v}")]
    args = ["import-model", "hf:gpt2", *kwargs, "--input-shape", "2,16", "--input-dtype", "int64"]
    assert main([*args, "--parts", "batch=2,heads=2,hidden=2,seq=2", "--cost-model", "paper", "--out", str(out)]) == 0
    graph = wb.load_graph(out)
    assert graph.metadata["parts"]["heads"] == 2 and graph.metadata["cost_model"] == "paper"
    assert "unsharded ops (arange, full)" in capsys.readouterr().out
    assert main([*args, "--shard-auto", "--target-nodes", "100"]) == 0
    assert main([*args, "--parts", "batch=2", "--shard-auto", "--target-nodes", "100"]) == 2
    assert "not both" in capsys.readouterr().err
    assert main([*args, "--parts", "vocab=2"]) == 2
    assert "unknown dimension kind(s) vocab" in capsys.readouterr().err
    assert main(["import-model", "zoo:nope"]) == 2
    assert "unknown zoo graph 'nope'; the zoo has: gpt2-small" in capsys.readouterr().err


@pytest.mark.slow
def test_every_zoo_graph_builds_conserves_flops_and_reports_only_constants():
    pytest.importorskip("transformers")
    pytest.importorskip("torchvision")
    from workbench.importers.zoo import ZOO, build_entry

    for name in ZOO:
        graph = build_entry(name)
        meta = graph.metadata
        assert meta["total_flops"] - meta["combine_flops"] == meta["source_flops"], name
        assert np.all(graph.src < graph.dst) and graph.num_nodes > 5 * meta["traced_ops"] // 2, name
        assert all(u["reason"] == "reads no computed tensor (a constant)" for u in meta["unsharded"]), name
