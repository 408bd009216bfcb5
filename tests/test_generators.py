"""Generators: valid DAGs of the requested shape, FLOP-proportional costs, seeded determinism."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import workbench as wb
from workbench.cli import main
from workbench.generators import GENERATORS, DeviceProfile, generate, get_profile
from workbench.generators.blocks import BlockProgram, CostModel

# compute-bound with no overheads: a kernel's time is exactly flops / 1e12
COMPUTE_BOUND = DeviceProfile("compute_bound", {"float32": 1e12}, 1e30, 1e9, 0.0, 0.0)


def test_every_family_builds_a_valid_graph_with_names_types_and_regeneration_metadata():
    for kind in GENERATORS:
        graph = generate(kind)
        assert graph.num_nodes > 0 and len(graph.names) == len(graph.op_types) == graph.num_nodes
        assert graph.metadata["generator"] == kind and graph.metadata["time_unit"]
        again = generate(graph.metadata["generator"], **graph.metadata["params"])
        assert again.same_as(graph), kind
        json.dumps(graph.to_dict())  # metadata is JSON-ready


def test_paper_cost_model_reproduces_the_bundled_chain_mm_costs_exactly():
    ours = generate("chain_mm", cost_model="paper")
    paper = wb.bundled_graph("chain_mm")
    assert (ours.num_nodes, ours.num_edges) == (paper.num_nodes, paper.num_edges) == (76, 80)
    assert np.array_equal(np.sort(ours.compute), np.sort(paper.compute))
    assert np.array_equal(np.sort(ours.comm), np.sort(paper.comm))
    assert ours.metadata["time_unit"] == paper.metadata["time_unit"]


@pytest.mark.parametrize("kind", ["ffnn", "transformer_block", "transformer_layer"])
def test_paper_cost_model_sends_four_times_the_compute_like_the_paper_files(kind):
    graph = generate(kind, cost_model="paper")
    assert np.allclose(graph.comm, 4 * graph.compute[graph.src])


@pytest.mark.parametrize("p0,pk,pm", [(1, 1, 1), (2, 2, 2), (2, 3, 1), (1, 4, 2)])
def test_chain_mm_node_count_formula(p0, pk, pm):
    # (d0 x dm) @ (dm x dk): p0*pm*pk kernels, plus p0*pk sums when the contraction is split
    graph = generate("chain_mm", shapes="12x12x12", parts=f"{p0}x{pm}x{pk}")
    sums = p0 * pk if pm > 1 else 0
    assert graph.num_nodes == p0 * pm * pk + sums
    assert graph.num_edges == (p0 * pm * pk if pm > 1 else 0)
    assert graph.op_types.count("matmul") == p0 * pm * pk


@pytest.mark.parametrize("pb,ph,layers", [(1, 1, 1), (4, 4, 1), (2, 3, 2)])
def test_ffnn_node_count_formula(pb, ph, layers):
    graph = generate("ffnn", batch=64, features=8, hidden=48, classes=6, hidden_layers=layers, batch_parts=pb, hidden_parts=ph)
    first = 3 * pb * ph  # matmul, bias, relu
    middle = (layers - 1) * (pb * ph * ph + (pb * ph if ph > 1 else 0) + 2 * pb * ph)
    last = pb * ph + (pb if ph > 1 else 0) + pb + 4 * pb  # matmul, sums, bias, softmax
    assert graph.num_nodes == first + middle + last


@pytest.mark.parametrize("pb", [1, 2, 4])
@pytest.mark.parametrize("fused,per_block,head", [(True, 25, 9), (False, 39, 13)])
def test_transformer_node_count_formulas(pb, fused, per_block, head):
    small = dict(batch=4, seq=8, hidden=16, heads=4, ffn=32, batch_parts=pb, seq_parts=1, hidden_parts=1, fused=fused)
    assert generate("transformer_block", **small).num_nodes == per_block * pb
    for layers in (1, 2):
        assert generate("transformer_layer", vocab=50, layers=layers, **small).num_nodes == (per_block * layers + head) * pb


def test_splitting_hidden_and_heads_adds_partial_sums_and_keeps_total_flops():
    small = dict(batch=4, seq=8, hidden=16, heads=4, ffn=32, profile=COMPUTE_BOUND)
    whole = generate("transformer_block", batch_parts=1, seq_parts=1, hidden_parts=1, **small)
    split = generate("transformer_block", batch_parts=2, hidden_parts=2, head_parts=2, ffn_parts=2, seq_parts=2, **small)
    assert split.num_nodes > whole.num_nodes and split.op_types.count("sum") > 0
    kernels = [t not in ("sum", "max") for t in split.op_types]
    # kernel FLOPs do not depend on the partitioning; only the combining nodes add work
    kernel_flops = split.compute[kernels].sum() * 1e12
    assert kernel_flops == pytest.approx(whole.metadata["total_flops"])


@settings(max_examples=25, deadline=None)
@given(
    parts=st.tuples(*(st.integers(1, 3) for _ in range(5))),
    fused=st.booleans(),
    seq=st.integers(3, 9),
)
def test_any_partitioning_keeps_kernel_flops_even_with_uneven_blocks(parts, fused, seq):
    sizes = dict(batch=3, seq=seq, hidden=12, heads=3, ffn=10, fused=fused, profile=COMPUTE_BOUND)
    names = ("batch_parts", "seq_parts", "hidden_parts", "head_parts", "ffn_parts")
    whole = generate("transformer_layer", vocab=7, **sizes, **dict.fromkeys(names, 1))
    split = generate("transformer_layer", vocab=7, **sizes, **dict(zip(names, parts, strict=True)))
    kernels = np.array([t not in ("sum", "max", "repartition") for t in split.op_types])
    assert split.compute[kernels].sum() * 1e12 == pytest.approx(whole.metadata["total_flops"])
    assert np.all(split.compute[~kernels] >= 0)


def _op(graph, name: str) -> int:
    """The first block kernel of op ``name``."""
    return next(i for i, n in enumerate(graph.names) if n.startswith(name + "["))


def test_costs_scale_as_flops_predict_when_sizes_double():
    base = generate("chain_mm", shapes="64x64x64", parts=1, profile=COMPUTE_BOUND)
    wider = generate("chain_mm", shapes="64x128x64", parts=1, profile=COMPUTE_BOUND)
    assert wider.compute[0] == pytest.approx(2 * base.compute[0]) == pytest.approx(2 * 2 * 64**3 / 1e12)
    small = generate("ffnn", batch=64, features=8, hidden=32, classes=4, profile=COMPUTE_BOUND)
    double = generate("ffnn", batch=128, features=8, hidden=32, classes=4, profile=COMPUTE_BOUND)
    assert np.allclose(double.compute, 2 * small.compute)  # every op is linear in the batch
    attention = generate("transformer_block", batch=1, seq=16, hidden=16, heads=2, ffn=32, profile=COMPUTE_BOUND)
    longer = generate("transformer_block", batch=1, seq=32, hidden=16, heads=2, ffn=32, profile=COMPUTE_BOUND)
    scores = attention.compute[_op(attention, "block.scores")]
    assert longer.compute[_op(longer, "block.scores")] == pytest.approx(4 * scores)  # quadratic in seq


def test_roofline_profile_makes_elementwise_ops_memory_bound_and_adds_launch_latency():
    v100 = get_profile("v100")
    graph = generate("ffnn", batch=1024, features=16, hidden=256, classes=4, batch_parts=1, hidden_parts=1)
    relu = _op(graph, "layer1.relu")
    elems = 1024 * 256
    assert graph.compute[relu] == pytest.approx(2 * elems * 4 / v100.memory_bandwidth + v100.launch_latency)
    out = graph.comm[graph.src == relu][0]
    assert out == pytest.approx(v100.link_latency + elems * 4 / v100.link_bandwidth)
    half = generate("ffnn", batch=1024, features=16, hidden=256, classes=4, batch_parts=1, hidden_parts=1, dtype="float16")
    assert half.comm[half.src == relu][0] < out


def test_profiles_and_bad_parameters_give_clear_errors():
    assert get_profile("H100").memory_bandwidth > get_profile("P100").memory_bandwidth
    with pytest.raises(ValueError, match="bfloat16"):
        generate("ffnn", profile="P100", dtype="bfloat16")
    with pytest.raises(ValueError, match="unknown device profile"):
        get_profile("TPU9")
    with pytest.raises(ValueError, match="unknown parameter.*bogus"):
        generate("ffnn", bogus=1)
    with pytest.raises(ValueError, match="batch of ffnn must be int"):
        generate("ffnn", batch="many")
    assert generate("ffnn", batch=np.int64(64), features=4, hidden=16, classes=2).num_nodes == 88  # numpy ints are ints
    with pytest.raises(ValueError, match="missing field"):
        get_profile({"name": "mine"})
    with pytest.raises(ValueError, match="unknown generator"):
        generate("resnet")
    with pytest.raises(ValueError, match="multiple of heads"):
        generate("transformer_block", hidden=100, heads=3)
    with pytest.raises(ValueError, match="same shape"):
        generate("chain_mm", shapes="4x4+8x4", parts=1)
    profile = DeviceProfile.from_dict(get_profile("A100").to_dict())
    assert profile == get_profile("A100")


def test_repartition_gathers_overlapping_blocks():
    program = BlockProgram(CostModel("roofline", get_profile("V100")))
    x = program.input("x", (12,), (2,))
    relu = program.einsum("relu", "i->i", x, op_type="relu")
    other = program.input("y", (12,), (3,))
    program.einsum("add", "i,i->i", other, relu, op_type="add")  # parts of the first input win: relu -> 3 blocks
    graph = program.graph({})
    repart = [i for i, t in enumerate(graph.op_types) if t == "repartition"]
    assert len(repart) == 3
    assert sorted(len(graph.predecessors(i)) for i in repart) == [1, 1, 2]  # [0,4) [4,8) [8,12) over [0,6) [6,12)


# ---------------------------------------------------------------- random DAGs
def test_random_family_shapes():
    assert generate("layered", layers=5, width=7, width_jitter=0).num_nodes == 35
    assert int(generate("layered", layers=5, width=3).depth.max()) + 1 == 5
    b, d = 3, 3
    tree_nodes = (b ** (d + 1) - 1) // (b - 1)
    out_tree = generate("tree", shape="fan_out", branching=b, depth=d)
    assert out_tree.num_nodes == tree_nodes and out_tree.num_edges == tree_nodes - 1 and out_tree.in_degree.max() == 1
    in_tree = generate("tree", shape="fan_in", branching=b, depth=d)
    assert in_tree.num_nodes == tree_nodes and in_tree.out_degree.max() == 1
    fork_join = generate("tree", shape="fork_join", branching=b, depth=d)
    assert fork_join.num_nodes == 2 * tree_nodes - b**d and int(fork_join.depth.max()) == 2 * d
    assert generate("tree", shape="fork_join", branching=1, depth=4).num_nodes == 9  # a chain of 2·5 - 1
    sp = generate("series_parallel", nodes=40, seed=3)
    assert sp.num_nodes == 40 and (sp.in_degree == 0).sum() == 1 and (sp.out_degree == 0).sum() == 1
    assert generate("erdos_renyi", nodes=12, edge_prob=1.0).num_edges == 66
    assert generate("erdos_renyi", nodes=12, edge_prob=0.0).num_edges == 0


@pytest.mark.parametrize("kind", ["layered", "tree", "series_parallel", "erdos_renyi"])
def test_random_families_are_deterministic_per_seed(kind):
    assert generate(kind, seed=7).same_as(generate(kind, seed=7))
    assert not generate(kind, seed=7).same_as(generate(kind, seed=8))


@settings(max_examples=30, deadline=None)
@given(
    kind=st.sampled_from(["layered", "series_parallel", "erdos_renyi"]),
    seed=st.integers(0, 10_000),
    ccr=st.sampled_from([0.0, 0.1, 1.0, 10.0]),
    dist=st.sampled_from(["uniform", "exponential", "lognormal", "constant"]),
)
def test_random_dags_hit_the_ccr_and_are_topologically_numbered(kind, seed, ccr, dist):
    graph = generate(kind, seed=seed, ccr=ccr, compute_dist=dist, comm_dist=dist, compute_mean=3.0)
    assert np.all(graph.src < graph.dst)
    if graph.num_edges:
        assert graph.comm.mean() == pytest.approx(ccr * graph.compute.mean())
    if dist == "constant":
        assert np.all(graph.compute == 3.0)


# ---------------------------------------------------------------------- CLI
def test_cli_generate_writes_a_loadable_graph(tmp_path, capsys):
    out = tmp_path / "g.json"
    params = ["seq_parts=1", "hidden_parts=1", "fused=true", "batch_parts=2", "profile=A100"]
    assert main(["generate", "transformer_block", *(x for p in params for x in ("--param", p)), "--out", str(out)]) == 0
    assert "50 nodes" in capsys.readouterr().out
    graph = wb.load_graph(out)
    assert graph.same_as(generate("transformer_block", seq_parts=1, hidden_parts=1, fused=True, batch_parts=2, profile="A100"))
    assert main(["generate", "ffnn", "--param", "nope=1"]) == 2
    assert "unknown parameter" in capsys.readouterr().err
    assert main(["generate", "ffnn", "--param", "oops"]) == 2
    assert "expected KEY=VALUE" in capsys.readouterr().err
    assert main(["generate", "--list"]) == 0 and "series_parallel" in capsys.readouterr().out


def test_generators_and_the_importer_package_do_not_import_torch():
    code = "import sys, workbench; workbench.generate('transformer_layer'); import workbench.importers; print('torch' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip() == "False", run.stderr
