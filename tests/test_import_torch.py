"""torch.fx / torch.export import: op counts, hand-checked FLOPs, clear errors, coarsening invariants."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import workbench as wb  # noqa: E402
from workbench.cli import main  # noqa: E402
from workbench.generators import get_profile  # noqa: E402
from workbench.importers import TraceError, coarsen, from_torch  # noqa: E402
from workbench.models import gpt_decoder, mlp, small_cnn  # noqa: E402


class HandChecked(nn.Module):
    """One op of each FLOP formula, small enough to count by hand."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)  # (1,3,8,8) -> (1,8,8,8)
        self.norm = nn.LayerNorm(8)
        self.fc = nn.Linear(8, 16)

    def forward(self, image: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        x = self.conv(image)  # 512 outputs x (2*3*3*3 + 1) = 28160
        x = self.norm(x)  # 5 x 512 = 2560
        x = F.relu(x)  # 512
        y = self.fc(x)  # 64 rows x 16 x (2*8 + 1) = 17408
        z = torch.matmul(y, y.transpose(-1, -2))  # (1,8,8,16) @ (1,8,16,8): 512 outputs x 2 x 16 = 16384
        att = F.scaled_dot_product_attention(q, q, q)  # q (1,2,4,8): 8 rows x 4 keys x (16 + 16 + 5) = 1184
        return z.sum() + att.sum()  # 512 + 64 (reductions), 1 (add)


HAND_FLOPS = {"conv": 28160, "norm": 2560, "relu": 512, "fc": 17408, "matmul": 16384, "scaled_dot_product_attention": 1184}


def test_hand_checked_flops_and_op_counts():
    inputs = (torch.randn(1, 3, 8, 8), torch.randn(1, 2, 4, 8))
    graph = from_torch(HandChecked(), inputs)
    flops = dict(zip(graph.names, graph.metadata["op_flops"], strict=True))
    for name, expected in HAND_FLOPS.items():
        assert flops[name] == expected, name
    assert graph.metadata["total_flops"] == sum(HAND_FLOPS.values()) + 512 + 64 + 1
    assert graph.op_types.count("transpose") == 1 and graph.compute[graph.names.index("transpose")] == 0.0  # views are free
    v100 = get_profile("V100")
    fc = graph.names.index("fc")
    fc_bytes = 4 * (512 + 128 + 16 + 1024)  # input, weight, bias, output
    assert graph.compute[fc] == pytest.approx(max(17408 / v100.flops["float32"], fc_bytes / v100.memory_bandwidth) + v100.launch_latency)
    assert np.allclose(graph.comm[graph.src == fc], v100.transfer_time(4 * 1024))
    assert graph.metadata["tracer"] == "fx" and graph.metadata["time_unit"] == "s"


def test_bundled_examples_op_counts_and_mlp_flops():
    two, three = from_torch(gpt_decoder(layers=2)), from_torch(gpt_decoder(layers=3))
    per_block = three.num_nodes - two.num_nodes
    assert two.num_nodes == from_torch(gpt_decoder(layers=1)).num_nodes + per_block  # every block adds the same ops
    assert three.op_types.count("linear") == 4 * 3 + 1 and three.op_types.count("scaled_dot_product_attention") == 3
    assert three.op_types.count("layernorm") == 2 * 3 + 1
    model = mlp(features=10, hidden=20, layers=2, classes=3, batch=4)
    graph = from_torch(model)
    assert graph.op_types == ("linear", "relu", "linear", "relu", "linear")
    assert graph.num_edges == 4
    expected = 4 * (20 * 21 + 20 + 20 * 41 + 20 + 3 * 41)  # linear: B·out·(2·in + 1); relu: B·out
    assert graph.metadata["total_flops"] == expected
    cnn = from_torch(small_cnn())
    assert cnn.op_types.count("conv2d") == 3 and cnn.op_types.count("maxpool2d") == 3


def test_export_fallback_when_fx_cannot_trace():
    class PositionIds(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 6)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x) + torch.arange(x.shape[1], device=x.device).sum()

    graph = from_torch(PositionIds(), torch.randn(3, 4))
    assert graph.metadata["tracer"] == "export"
    assert 3 * 6 * (2 * 4 + 1) in graph.metadata["op_flops"]  # the linear, as aten addmm


def test_untraceable_module_and_missing_inputs_give_clear_errors():
    class Branchy(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.sum() > 0:
                return x * 2
            return x

    with pytest.raises(TraceError, match=r"cannot trace Branchy: torch.fx failed at .*`if x.sum\(\) > 0:`.*control flow"):
        from_torch(Branchy(), torch.randn(2))
    with pytest.raises(TraceError, match="no example input or shape given for: image, q"):
        from_torch(HandChecked())
    with pytest.raises(TraceError, match="op 'tokens'.*failed on the example inputs"):
        from_torch(gpt_decoder(), torch.randn(2, 8))  # float token ids


def test_measure_times_every_op_locally():
    graph = from_torch(mlp(batch=8), measure=True, repeats=2)
    assert np.all(graph.compute > 0) and graph.metadata["costs"].startswith("measured on")


def test_fusion_and_grouping_keep_costs_and_the_mapping():
    graph = from_torch(gpt_decoder(layers=2))
    fused = coarsen(graph)
    assert fused.num_nodes < graph.num_nodes and fused.total_compute == pytest.approx(graph.total_compute)
    assert "linear" in fused.op_types and "view" not in fused.op_types
    grouped = from_torch(gpt_decoder(layers=2), target_nodes=12, fuse_elementwise=True)
    assert grouped.num_nodes <= 12
    groups = grouped.metadata["coarse_groups"]
    assert sorted(op for group in groups for op in group) == list(range(graph.num_nodes))


@pytest.mark.slow
def test_import_of_a_model_with_thousands_of_ops():
    graph = from_torch(gpt_decoder(layers=100, width=64, seq=16))
    assert graph.num_nodes > 2000
    assert coarsen(graph, target_nodes=200).num_nodes == 200


def test_cli_import_model(tmp_path, capsys):
    out = tmp_path / "gpt.json"
    args = ["import-model", "workbench.models:gpt_decoder", "--kwarg", "layers=1", "--input-shape", "1,16", "--input-dtype", "int64"]
    assert main([*args, "--fuse", "--out", str(out)]) == 0
    graph = wb.load_graph(out)
    assert graph.metadata["coarsened_from"] > graph.num_nodes and graph.metadata["input_shapes"] == [[1, 16]]
    assert main(["import-model", "workbench.models.gpt:Block", "--kwarg", "width=8", "--kwarg", "heads=2"]) == 2
    assert "no example input or shape given for: x" in capsys.readouterr().err
    assert main(["import-model", "workbench.models.nope:gpt"]) == 2
    assert "cannot import 'workbench.models.nope'" in capsys.readouterr().err
