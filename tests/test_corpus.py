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


def test_shipped_manifest_is_what_design_writes(manifest):
    assert [e.to_dict() for e in corpus.design()] == [e.to_dict() for e in manifest]


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


def test_a_zoo_entry_without_the_models_extra_names_the_extra(manifest, monkeypatch):
    monkeypatch.setitem(sys.modules, "workbench.importers.zoo", None)
    entry = next(e for e in manifest if e.family == "zoo")
    with pytest.raises(corpus.CorpusError, match=r"\[models\] extra"):
        corpus.build(entry)
