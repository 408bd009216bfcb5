"""The paper's code is a variant of the Doppler model (``learn/paper.py``), not switches inside it."""

from __future__ import annotations

import ast
import dataclasses
import inspect

import pytest
import torch

import workbench as wb
from workbench.learn import PolicyConfig, load_policy, make_policy
from workbench.learn.doppler import DopplerPolicy
from workbench.learn.paper import PAPER_SWITCHES, PaperDopplerPolicy

SMALL = dict(width=16, edge_hidden=16, message_passing_steps=2, head_hidden=(16,), attention_heads=2)


@pytest.mark.parametrize("switch", PAPER_SWITCHES)
def test_any_paper_switch_builds_the_variant_and_none_builds_the_main_model(switch):
    changes = {switch: True, "zscore_ready_inputs": True} if switch == "path_sum_order_bug" else {switch: True}
    config = dataclasses.replace(PolicyConfig(**SMALL), **changes)
    assert type(make_policy("doppler", config)) is PaperDopplerPolicy
    assert type(make_policy("doppler", PolicyConfig(**SMALL))) is DopplerPolicy
    assert type(make_policy("doppler_plc_only", PolicyConfig.paper("doppler_plc_only"))) is PaperDopplerPolicy


def test_a_saved_paper_policy_loads_as_the_variant_and_places_the_same(tmp_path):
    torch.manual_seed(0)
    policy = make_policy("doppler", dataclasses.replace(PolicyConfig.paper(), width=16, edge_hidden=16))
    policy.save(tmp_path / "paper.safetensors")
    loaded = load_policy(tmp_path / "paper.safetensors")
    graph = wb.bundled_graph("chain_mm")
    assert type(loaded) is PaperDopplerPolicy
    assert loaded.rollout(graph, 4, mode="greedy").assignment.tolist() == policy.rollout(graph, 4, mode="greedy").assignment.tolist()


def test_the_main_model_reads_no_paper_switch():
    """Only ``encoder()`` hands ``zscore_graph_features`` to the shared encoder; every other use lives in ``paper.py``."""
    import workbench.learn.doppler as doppler

    tree = ast.parse(inspect.getsource(doppler))
    reads = [
        (node.attr, node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in PAPER_SWITCHES and isinstance(node.value, ast.Name | ast.Attribute)
    ]
    encoder_lines = range(doppler.encoder.__code__.co_firstlineno, doppler.encoder.__code__.co_firstlineno + 5)
    assert [name for name, line in reads if line not in encoder_lines] == []
    assert [name for name, _ in reads] == ["zscore_graph_features"]
