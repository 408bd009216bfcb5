"""The benchmark corpus: its manifest regenerates every graph bit for bit, and its split keeps the paper graphs out of training."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from workbench import corpus
from workbench.datasets import PAPER_GRAPHS


@pytest.fixture(scope="module")
def manifest() -> list[corpus.CorpusEntry]:
    return corpus.load_manifest()


def test_every_generated_entry_regenerates_bit_identically(manifest):
    for entry in manifest:
        if entry.family == "zoo":
            continue
        first, second = corpus.build(entry), corpus.build(entry)
        assert corpus.content_hash(first) == corpus.content_hash(second) == entry.sha256, entry.name
        assert first.num_nodes == entry.nodes


def _planned(entry: corpus.CorpusEntry) -> dict:
    return {k: v for k, v in entry.to_dict().items() if k not in ("nodes", "sha256")}


def test_shipped_manifest_is_what_design_writes(manifest):
    """design() is plan() built and hashed; the hashes are checked by the rebuild tests (the zoo's needs [models])."""
    assert [_planned(e) for e in corpus.plan()] == [_planned(e) for e in manifest]
    assert all(e.sha256 and e.nodes > 0 for e in manifest)


def test_the_real_split_is_the_whole_zoo_at_four_and_eight_devices(manifest):
    from workbench.importers.zoo import ZOO, entries

    real = corpus.entries("real", manifest=manifest)
    assert [dict(e.params) for e in real] == entries()  # every model at both partitionings, as the zoo lists them
    assert {e.params["name"] for e in real} == set(ZOO) and len(real) == 2 * len(ZOO)
    assert all(e.family == "zoo" and e.devices == (4, 8) for e in real)
    assert not [e for e in manifest if e.family == "zoo" and e.split != "real"]


def _rebuilds_bit_for_bit(entry: corpus.CorpusEntry) -> None:
    graph = corpus.build(entry)  # build() checks the hash too
    assert corpus.content_hash(graph) == entry.sha256 and graph.num_nodes == entry.nodes, entry.name


def test_a_real_split_entry_rebuilds_bit_for_bit(manifest):
    pytest.importorskip("transformers")
    _rebuilds_bit_for_bit(next(e for e in manifest if e.name == "zoo-gpt2-small-1"))  # the quickest to build


@pytest.mark.slow
def test_every_real_split_entry_rebuilds_bit_for_bit(manifest):
    pytest.importorskip("transformers")
    pytest.importorskip("torchvision")
    for entry in corpus.entries("real", manifest=manifest):
        _rebuilds_bit_for_bit(entry)


def test_test_split_has_twenty_graphs_at_four_and_eight_devices_and_the_paper_graphs_only_there(manifest):
    for devices in (4, 8):
        assert len(corpus.entries("test", devices, manifest=manifest)) >= 20
    papers = [e for e in manifest if e.family == "paper"]
    assert sorted(e.params["name"] for e in papers) == sorted(PAPER_GRAPHS)
    assert {e.split for e in papers} == {"test"}
    assert {e.split for e in manifest} == set(corpus.SPLITS)


def test_a_changed_cost_is_caught_by_the_hash(manifest):
    entry = next(e for e in manifest if e.family == "layered")
    graph = corpus.build(entry)
    compute = graph.compute.copy()
    compute[0] = np.nextafter(compute[0], np.inf)
    changed = type(graph)(compute, graph.src, graph.dst, graph.comm)
    assert corpus.content_hash(changed) != entry.sha256
    tampered = corpus.CorpusEntry(**{**entry.__dict__, "params": {**entry.params, "ccr": entry.params["ccr"] * 2}})
    with pytest.raises(corpus.CorpusError, match="sha256 mismatch"):
        corpus.build(tampered)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"version": 2, "entries": []}, "expected"),
        ({"version": 1, "entries": [{"name": "a", "family": "tree", "split": "holdout"}]}, "split must be one of"),
        ({"version": 1, "entries": [{"name": "a", "family": "tree", "split": "test", "colour": 1}]}, "unknown field"),
        ({"version": 1, "entries": [{"name": "a", "family": "tree", "split": "test"}] * 2}, "unique"),
    ],
)
def test_a_malformed_manifest_is_refused_with_its_reason(tmp_path, data, message):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(data))
    with pytest.raises(corpus.CorpusError, match=message):
        corpus.load_manifest(path)


def test_entries_filters_by_split_devices_and_family(manifest):
    trees = corpus.entries("train", 2, families=["tree"], manifest=manifest)
    assert trees and all(e.family == "tree" and e.split == "train" and 2 in e.devices for e in trees)
    assert not corpus.entries("test", 2, families=["paper"], manifest=manifest)
    with pytest.raises(corpus.CorpusError, match="unknown split"):
        corpus.entries("holdout", manifest=manifest)


@pytest.mark.parametrize("missing", ["transformers", "torch"])
def test_a_zoo_entry_without_the_models_extra_names_the_extra(manifest, monkeypatch, missing):
    """A clean clone without [models] (or without torch at all) that asks for the real split is told what to install."""
    monkeypatch.setitem(sys.modules, missing, None)  # import fails as if not installed
    entry = next(e for e in manifest if e.family == "zoo" and e.params["spec"].startswith("hf:"))
    with pytest.raises(corpus.CorpusError, match=rf"^corpus entry {entry.name}: .*doppler-workbench\[models\]"):
        corpus.build(entry)


def test_a_zoo_entry_that_the_zoo_no_longer_lists_asks_for_a_new_manifest(manifest):
    entry = next(e for e in manifest if e.family == "zoo")
    changed = corpus.CorpusEntry(**{**entry.__dict__, "params": {**entry.params, "parts": "batch=8"}})
    with pytest.raises(corpus.CorpusError, match="not the zoo's listing.*python -m workbench.corpus"):
        corpus.build(changed)
