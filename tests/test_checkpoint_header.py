"""Crafted checkpoints: every header field typed and bounded before a module or tensor is built, weights float32 or
float16, finite and of exactly the shapes the config implies, ``trained_for`` well formed, and the shipped checkpoints
loading and placing exactly as before.

Each crafted file carries a correct SHA-256 (recomputed as a forger would): the digest protects integrity, not
authenticity, so what makes a file safe to load is the checks themselves.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import safetensors.torch
import torch

os.environ.setdefault("DGLBACKEND", "pytorch")

import workbench as wb
from workbench.learn import CheckpointError, TrainedFor, load_policy, make_policy
from workbench.learn.checkpoint import MAX_PARAMETERS, _digest, read_checkpoint
from workbench.learn.learned_search import PRETRAINED_SCORER, MoveScorer, ScorerConfig, load_scorer, save_scorer
from workbench.learn.policy import POLICY_FIELDS, PolicyConfig
from workbench.placers.registry import PlacerError
from workbench.runs import pretrained_checkpoint, zero_shot_checkpoint

ROOT = Path(__file__).resolve().parents[1]
PRETRAINED = ROOT / "datasets" / "pretrained"
CHAIN = wb.bundled_graph("chain_mm")
SMALL = PolicyConfig(width=16, message_passing_steps=2, head_hidden=(16,), attention_heads=2)


def write_policy(path: Path, method: str = "doppler", **changes: Any) -> Path:
    """A small policy (``SMALL`` with ``changes``) trained for chain_mm on 4 devices, saved at ``path``."""
    torch.manual_seed(0)
    policy = make_policy(method, dataclasses.replace(SMALL, method=method, **changes))
    policy.trained_for = TrainedFor.of([CHAIN], 4)
    policy.save(path)
    return path


def write_scorer(path: Path) -> Path:
    torch.manual_seed(0)
    save_scorer(path, MoveScorer(ScorerConfig(hidden=8, layers=2)), {"episodes": 0})
    return path


@pytest.fixture(scope="module")
def policy_file(tmp_path_factory) -> Path:
    return write_policy(tmp_path_factory.mktemp("policy") / "doppler.safetensors")


@pytest.fixture(scope="module")
def scorer_file(tmp_path_factory) -> Path:
    return write_scorer(tmp_path_factory.mktemp("scorer") / "scorer.safetensors")


def parts(path: Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """The JSON document and the tensors of a checkpoint, as a forger would read them."""
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    document = json.loads(json.loads(raw[8 : 8 + size])["__metadata__"]["workbench"])
    return document, safetensors.torch.load(raw)


def forge(source: Path, target: Path, document: dict[str, Any] | None = None, tensors: dict[str, torch.Tensor] | None = None) -> Path:
    """``source`` rewritten with another document or tensors, its SHA-256 recomputed (JSON with NaN or Infinity if asked)."""
    original, stored = parts(source)
    document = {**original, **(document or {})}
    document = {k: v for k, v in document.items() if v is not ...}
    tensors = stored if tensors is None else tensors
    document["sha256"] = _digest(document, tensors)
    target.write_bytes(safetensors.torch.save(tensors, metadata={"workbench": json.dumps(document)}))
    return target


def with_config(source: Path, target: Path, **changes: Any) -> Path:
    document, _ = parts(source)
    config = {k: v for k, v in {**document["config"], **changes}.items() if v is not ...}
    return forge(source, target, {"config": config})


def with_weight(source: Path, target: Path, change) -> Path:
    """``source`` with its first weight (in name order) replaced by ``change(tensor)``; ``None`` drops it."""
    _, tensors = parts(source)
    name = sorted(k for k in tensors if k.startswith("weights/"))[0]
    tensors = dict(tensors)
    replaced = change(tensors.pop(name))
    if replaced is not None:
        tensors[name] = replaced
    return forge(source, target, tensors=tensors)


# ------------------------------------------------------------------------------------------- policy config
CONFIG_CASES = {
    "width_6000": ({"width": 6000}, "'width' is 6000, outside 1 .. 1024"),
    "width_0": ({"width": 0}, "'width' is 0, outside 1 .. 1024"),
    "width_string": ({"width": "128"}, "'width' must be an integer, got '128'"),
    "width_float": ({"width": 16.0}, "'width' must be an integer, got 16.0"),
    "width_bool": ({"width": True}, "'width' must be an integer, got True"),
    "steps_ten_million": ({"message_passing_steps": 10**7}, "'message_passing_steps' is 10000000, outside 1 .. 32"),
    "steps_huge_integer": ({"message_passing_steps": 10**400}, "'message_passing_steps' is 1000000000000000000"),
    "edge_hidden": ({"edge_hidden": 100_000}, "'edge_hidden' is 100000, outside 1 .. 1024"),
    "head_layers": ({"head_hidden": [16] * 17}, "'head_hidden' must be a list of at most 16 values"),
    "head_width": ({"head_hidden": [10**6]}, "'head_hidden' item 0 is 1000000, outside 1 .. 1024"),
    "head_not_list": ({"head_hidden": "16"}, "'head_hidden' must be a list"),
    "slope_nan": ({"negative_slope": float("nan")}, "'negative_slope' is nan, outside 0 .. 1"),
    "slope_infinity": ({"negative_slope": float("inf")}, "'negative_slope' is inf, outside 0 .. 1"),
    "slope_negative": ({"negative_slope": -1e300}, "'negative_slope' is -1e+300, outside 0 .. 1"),
    "slope_string": ({"negative_slope": "0.1"}, "'negative_slope' must be a number"),
    "attention_heads": ({"attention_heads": 10**6}, "'attention_heads' is 1000000, outside 1 .. 64"),
    "attention_layers": ({"attention_layers": 17}, "'attention_layers' is 17, outside 1 .. 16"),
    "max_devices": ({"max_devices": 10**9}, "'max_devices' is 1000000000, outside 1 .. 1024"),
    "random_features": ({"random_features": 10**8}, "'random_features' is 100000000, outside 0 .. 256"),
    "rule_weight_nan": ({"place_rule_weight": float("nan")}, "'place_rule_weight' is nan"),
    "rule_weight_huge": ({"select_rule_weight": 1e300}, "'select_rule_weight' is 1e+300, outside 0 .. 1e+06"),
    "gate_rules_many": ({"gate_rules": ["bottom_level/affinity"] * 17}, "'gate_rules' must be a list of at most 16 values"),
    "gate_rule_number": ({"gate_rules": [1, 2]}, "'gate_rules' item 0 must be a string, got 1"),
    "flag_string": ({"share_encoder": "yes"}, "'share_encoder' must be true or false, got 'yes'"),
    "flag_integer": ({"zscore_graph_features": 1}, "'zscore_graph_features' must be true or false, got 1"),
    "unknown_field": ({"colour": "red"}, "unknown policy config field 'colour'"),
    "method_unknown": ({"method": "evil"}, "unknown learned method 'evil'"),
    "too_many_weights": ({"width": 1024, "edge_hidden": 1024, "attention_heads": 4}, f"more than the {MAX_PARAMETERS:,} a checkpoint"),
}


@pytest.mark.parametrize("case", sorted(CONFIG_CASES))
def test_a_config_field_out_of_type_or_range_is_refused_before_any_module_is_built(tmp_path, policy_file, case):
    changes, message = CONFIG_CASES[case]
    path = with_config(policy_file, tmp_path / f"{case}.safetensors", **changes)
    with pytest.raises(CheckpointError, match=f"{path}.*{re.escape(message)}"):
        load_policy(path)
    with pytest.raises((CheckpointError, PlacerError), match=re.escape(message)):
        wb.place(CHAIN, "doppler", devices=4, checkpoint=path)


def test_every_policy_config_field_has_a_type_and_a_range():
    assert set(POLICY_FIELDS) == {f for f in PolicyConfig.__dataclass_fields__}
    with pytest.raises(ValueError, match="'width' is 2000, outside 1 .. 1024"):
        PolicyConfig(width=2000)  # training refuses a policy whose checkpoint would be refused
    assert PolicyConfig.from_dict({"width": 16, "head_hidden": [8, 8], "negative_slope": 0}).head_hidden == (8, 8)


HEADER_CASES = {
    "no_config": ({"config": ...}, "lacks config"),
    "config_list": ({"config": [1, 2]}, "policy config must be a JSON object"),
    "method_forged": ({"method": "gdp"}, "says method 'gdp' but its config says"),
    "layout": ({"feature_layout": {"version": 0}}, "another feature layout"),
    "format_version_huge": ({"format_version": 10**400}, "has checkpoint format version 1000000000"),
}


@pytest.mark.parametrize("case", sorted(HEADER_CASES))
def test_a_malformed_policy_header_is_refused(tmp_path, policy_file, case):
    document, message = HEADER_CASES[case]
    path = forge(policy_file, tmp_path / "forged.safetensors", document)
    with pytest.raises(CheckpointError, match=re.escape(message)):
        load_policy(path)


# ------------------------------------------------------------------------------------------------ weights
WEIGHT_CASES = {
    "float64_huge": (lambda t: torch.full(t.shape, 1e300, dtype=torch.float64), "is stored as 'F64'; weights are float32 or float16"),
    "int64": (lambda t: torch.zeros(t.shape, dtype=torch.int64), "is stored as 'I64'"),
    "bfloat16": (lambda t: t.to(torch.bfloat16), "is stored as 'BF16'"),
    "nan": (lambda t: torch.full_like(t, float("nan")), "NaN or infinite values in weights/"),
    "float16_infinity": (lambda t: torch.full(t.shape, float("inf"), dtype=torch.float16), "NaN or infinite values in weights/"),
    "shape": (lambda t: torch.zeros(t.shape[0] + 1, *t.shape[1:]), "has shape"),
    "scalar": (lambda t: torch.zeros(()), "has shape []"),
    "missing": (lambda t: None, "lacks the weight"),
}


@pytest.mark.parametrize("case", sorted(WEIGHT_CASES))
def test_a_weight_of_another_dtype_shape_or_value_is_refused(tmp_path, policy_file, case):
    change, message = WEIGHT_CASES[case]
    path = with_weight(policy_file, tmp_path / f"{case}.safetensors", change)
    with pytest.raises(CheckpointError, match=re.escape(message)):
        load_policy(path)


def test_an_unknown_weight_is_refused_and_float16_weights_load_as_float32(tmp_path, policy_file):
    _, tensors = parts(policy_file)
    path = forge(policy_file, tmp_path / "extra.safetensors", tensors={**tensors, "weights/backdoor": torch.zeros(3)})
    with pytest.raises(CheckpointError, match="holds the weight 'backdoor', which its config does not have"):
        load_policy(path)
    half = {k: v.half() if k.startswith("weights/") else v for k, v in tensors.items()}
    path = forge(policy_file, tmp_path / "half.safetensors", tensors=half)
    loaded = load_policy(path)
    assert all(p.dtype == torch.float32 for p in loaded.parameters())
    first = next(k for k in sorted(half) if k.startswith("weights/"))
    assert torch.equal(loaded.state_dict()[first.removeprefix("weights/")], half[first].float())


# ------------------------------------------------------------------------------------------- trained_for
def trained_for(**changes: Any) -> dict[str, Any]:
    record = TrainedFor.of([CHAIN], 4).to_dict()
    return {**record, **changes}


def graph_entry(**changes: Any) -> dict[str, Any]:
    return {**TrainedFor.of([CHAIN], 4).to_dict()["graphs"][0], **changes}


TRAINED_FOR_CASES = {
    "absent": (..., "lacks trained_for"),
    "not_object": ([1], "trained_for must be a JSON object"),
    "unknown_key": (trained_for(anything=True), "trained_for has the unknown field 'anything'"),
    "no_cross_graph": ({"graphs": trained_for()["graphs"], "devices": 4}, "trained_for lacks 'cross_graph'"),
    "cross_graph_no_graphs": (trained_for(graphs=[], cross_graph=True), "trained_for.graphs must list 1 to"),
    "cross_graph_string": (trained_for(cross_graph="true"), "trained_for.cross_graph must be true or false"),
    "devices_zero": (trained_for(devices=0), "trained_for.devices is 0, outside 1 .. 1024"),
    "devices_float": (trained_for(devices=4.0), "trained_for.devices must be an integer"),
    "fingerprint": (trained_for(graphs=[graph_entry(fingerprint="x" * 64)]), "fingerprint must be 64 lowercase hex digits"),
    "nodes_negative": (trained_for(graphs=[graph_entry(nodes=-1)]), "trained_for.graphs[0].nodes is -1"),
    "name_number": (trained_for(graphs=[graph_entry(name=7)]), "trained_for.graphs[0].name must be a string"),
    "trained_for_empty_list": ([], "trained_for must be a JSON object, got []"),
    "graphs_a_string": (trained_for(graphs="chain_mm"), "trained_for.graphs must list 1 to"),
    "graph_a_string": (trained_for(graphs=["chain_mm"]), "trained_for.graphs[0] must be a JSON object, got 'chain_mm'"),
    "cross_graph_one_graph": (trained_for(cross_graph=True), "trained_for.cross_graph is true, but trained_for.graphs names one graph"),
    "cross_graph_same_graph_twice": (
        trained_for(graphs=[graph_entry(), graph_entry()], cross_graph=True),
        "trained_for.cross_graph is true, but trained_for.graphs names one graph",
    ),
    "cross_graph_renamed_copy": (
        trained_for(graphs=[graph_entry(), graph_entry(name="ffnn_192nodes")], cross_graph=True),
        "trained_for.cross_graph is true, but trained_for.graphs names one graph",
    ),
    "cross_graph_integer": (trained_for(cross_graph=1), "trained_for.cross_graph must be true or false, got 1"),
    "cross_graph_null": (trained_for(cross_graph=None), "trained_for.cross_graph must be true or false, got None"),
}


@pytest.mark.parametrize("case", sorted(TRAINED_FOR_CASES))
def test_a_malformed_trained_for_is_refused(tmp_path, policy_file, case):
    record, message = TRAINED_FOR_CASES[case]
    path = forge(policy_file, tmp_path / f"{case}.safetensors", {"trained_for": record})
    with pytest.raises(CheckpointError, match=re.escape(message)):
        read_checkpoint(path)
    with pytest.raises((CheckpointError, PlacerError), match=re.escape(message)):
        wb.place(CHAIN, "doppler", devices=4, checkpoint=path)


def test_a_refused_trained_for_is_one_line_naming_the_field(tmp_path, policy_file):
    for case in ("cross_graph_one_graph", "trained_for_empty_list", "graph_a_string", "cross_graph_integer"):
        path = forge(policy_file, tmp_path / f"{case}.safetensors", {"trained_for": TRAINED_FOR_CASES[case][0]})
        with pytest.raises(CheckpointError) as refused:
            load_policy(path, graph=wb.bundled_graph("ffnn"), devices=8)
        assert "\n" not in str(refused.value) and "trained_for" in str(refused.value) and str(path) in str(refused.value)


def test_a_policy_that_scores_devices_by_index_cannot_claim_more_devices_than_its_outputs(tmp_path):
    gdp = write_policy(tmp_path / "gdp.safetensors", "gdp", max_devices=4)
    two = [CHAIN, wb.bundled_graph("ffnn")]
    assert load_policy(forge(gdp, tmp_path / "four.safetensors", {"trained_for": TrainedFor.of(two, 4).to_dict()})).trained_for.cross_graph
    forged = forge(gdp, tmp_path / "eight.safetensors", {"trained_for": TrainedFor.of(two, 8).to_dict()})
    with pytest.raises(CheckpointError, match="trained_for.devices is 8, but its weights score at most 4 devices"):
        load_policy(forged)
    doppler = write_policy(tmp_path / "doppler.safetensors", max_devices=4)  # its weights do not follow max_devices
    at_8 = forge(doppler, tmp_path / "d8.safetensors", {"trained_for": TrainedFor.of(two, 8).to_dict()})
    assert load_policy(at_8).trained_for.devices == 8


def test_the_trainers_record_cannot_claim_cross_graph_for_one_graph():
    assert not TrainedFor.of([CHAIN, CHAIN.with_metadata(name="renamed")], 4).cross_graph  # one structure is one graph
    with pytest.raises(ValueError, match="names one graph"):
        TrainedFor.of([CHAIN, CHAIN.with_metadata(name="renamed")], 4, cross_graph=True)
    with pytest.raises(ValueError, match="names one graph"):
        TrainedFor.of([CHAIN], 4, cross_graph=True)


def test_a_null_trained_for_no_longer_skips_the_graph_and_device_check(tmp_path, policy_file):
    ffnn = wb.bundled_graph("ffnn")
    path = forge(policy_file, tmp_path / "null.safetensors", {"trained_for": None})
    with pytest.raises(CheckpointError, match="records no graph it was trained for"):
        wb.place(ffnn, "doppler", devices=8, checkpoint=path)
    assert load_policy(path).trained_for is None  # loading to train from it (no graph to check) still works
    wb.place(CHAIN, "doppler", devices=4, checkpoint=policy_file)  # the honest file places its own graph
    with pytest.raises(CheckpointError, match="not for graph 'ffnn_192nodes'"):
        wb.place(ffnn, "doppler", devices=8, checkpoint=policy_file)


# ------------------------------------------------------------------------------------------ move scorer
SCORER_CASES = {
    "unknown_key": ({"config": {"hidden": 8, "layers": 2, "dropout": 0.5}}, "unknown scorer config field 'dropout'"),
    "missing_config": ({"config": ...}, "lacks its scorer config"),
    "config_list": ({"config": [8, 2]}, "scorer config must be a JSON object"),
    "size_mismatch": ({"config": {"hidden": 32, "layers": 2}}, "has shape [8,"),
    "huge_hidden": ({"config": {"hidden": 10**6, "layers": 2}}, "'hidden' is 1000000, outside 1 .. 1024"),
    "huge_layers": ({"config": {"hidden": 8, "layers": 10**6}}, "'layers' is 1000000, outside 1 .. 16"),
    "layers_float": ({"config": {"hidden": 8, "layers": 2.5}}, "'layers' must be an integer"),
    "fewer_layers": ({"config": {"hidden": 8, "layers": 1}}, "holds the weight 'net.4.bias'"),
    "method": ({"method": "doppler"}, "holds a 'doppler' policy, not a learned_search scorer"),
    "trained_for_forged": ({"trained_for": {"graphs": [], "devices": 4, "cross_graph": True}}, "trained_for.graphs must list 1 to"),
}


@pytest.mark.parametrize("case", sorted(SCORER_CASES))
def test_a_malformed_move_scorer_is_refused_with_a_checkpoint_error(tmp_path, scorer_file, case):
    document, message = SCORER_CASES[case]
    path = forge(scorer_file, tmp_path / f"{case}.safetensors", document)
    with pytest.raises(CheckpointError, match=re.escape(message)):
        load_scorer(path)
    with pytest.raises(PlacerError, match=re.escape(message)):
        wb.place(CHAIN, "learned_search", devices=4, checkpoint=path, budget=20)


SCORER_WEIGHT_CASES = {
    "float64": (lambda t: t.double(), "is stored as 'F64'"),
    "nan": (lambda t: torch.full_like(t, float("nan")), "NaN or infinite"),
}


def test_a_move_scorer_with_float64_or_non_finite_weights_is_refused(tmp_path, scorer_file):
    for case, (change, message) in SCORER_WEIGHT_CASES.items():
        with pytest.raises(CheckpointError, match=message):
            load_scorer(with_weight(scorer_file, tmp_path / f"{case}.safetensors", change))


# ------------------------------------------------------------------------------------- shipped checkpoints
# Greedy placements of every shipped checkpoint, recorded with the code before the header checks (commit d84b551):
# the sha256 of the int64 assignment (first 16 hex digits) and the makespan.
SHIPPED = {
    ("chain_mm_112nodes", "doppler", 4): ("1cf46d7cf9bf705b", 12001000000000.0),
    ("ffnn_192nodes", "doppler", 4): ("3a7d40a0e6214ccc", 566959013888.0),
    ("transformer_block_215nodes", "doppler", 4): ("945d2031b0e83820", 1943705788416.0),
    ("full_transformer_layer_261nodes", "doppler", 4): ("5b6de63b5af60534", 1643716857856.0),
    ("chain_mm_112nodes", "zero_shot", 8): ("5e4b73e49973545d", 12000300000000.0),
    ("ffnn_192nodes", "zero_shot", 8): ("a173364a6b975811", 429511737344.0),
    ("transformer_block_215nodes", "zero_shot", 8): ("4420c7c8934dcb13", 1414686089216.0),
    ("full_transformer_layer_261nodes", "zero_shot", 8): ("53ec66d1424c7270", 972941479936.0),
}


@pytest.mark.parametrize("name, kind, devices", sorted(SHIPPED))
def test_every_shipped_checkpoint_loads_and_places_exactly_as_before(name, kind, devices):
    graph = wb.load_graph(ROOT / "datasets" / "doppler-paper" / f"{name}.txt")
    if kind == "zero_shot":
        placement = wb.place(graph, "doppler_plc_only", devices=devices, checkpoint=zero_shot_checkpoint())
    else:
        placement = wb.place(graph, "doppler", devices=devices)  # the graph's shipped policy (runs.pretrained_checkpoint)
    digest = hashlib.sha256(np.asarray(placement.assignment, dtype=np.int64).tobytes()).hexdigest()[:16]
    assert (digest, placement.makespan) == SHIPPED[name, kind, devices]


def test_every_checkpoint_under_datasets_pretrained_is_pinned_where_the_layout_names_it():
    """The pins above cover every shipped file (a checkpoint added or moved by a migration of the folders needs its pin),
    each found where :mod:`workbench.runs` names it: a graph's policy, the zero-shot policy and the move scorer."""
    pinned = {pretrained_checkpoint(name, "doppler") for name, kind, _ in SHIPPED if kind != "zero_shot"}
    assert set(PRETRAINED.rglob("*.safetensors")) == pinned | {zero_shot_checkpoint(), PRETRAINED_SCORER}


def test_the_shipped_move_scorer_scores_exactly_as_before():
    scorer = load_scorer(PRETRAINED_SCORER)
    features = np.random.default_rng(0).normal(size=(50, scorer.net[0].in_features))
    assert hashlib.sha256(scorer.score(features).tobytes()).hexdigest()[:16] == "ac73f5fb40ba85e5"  # torch float32 since issue 32


# ------------------------------------------------------------------------------------------ command routes
ROUTES = {
    "place": lambda path, tmp: ["place", "chain_mm", "--method", "doppler", "--devices", "4", "--option", f"checkpoint={path}"],
    "start_policy": lambda path, tmp: ["place", "chain_mm", "--method", "learned_search", "--option", f"start_policy={path}"],
    "init_checkpoint": lambda path, tmp: ["train", "chain_mm", "--init-checkpoint", str(path), "--out", str(tmp / "run")],
}


@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize("case", ["width_6000", "steps_ten_million", "slope_nan"])
def test_every_command_refuses_a_crafted_checkpoint_in_one_line_before_writing_anything(tmp_path, policy_file, capsys, route, case):
    from workbench.cli import main

    changes, message = CONFIG_CASES[case]
    path = with_config(policy_file, tmp_path / f"{case}.safetensors", **changes)
    assert main(ROUTES[route](path, tmp_path)) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and message in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()
