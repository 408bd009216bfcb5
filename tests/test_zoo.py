"""The zoo's manifest: every model at each partitioning, listed for a corpus to store and rebuilt from that listing."""

from __future__ import annotations

import json

import pytest

from workbench.importers.zoo import ZOO, entries


def test_entries_list_every_model_at_every_partitioning_as_json():
    listed = entries()
    assert [(e["name"], e["parts"]) for e in listed] == [(name, parts) for name, entry in ZOO.items() for parts in entry.partitionings]
    assert all(e["partitioning"] == ZOO[e["name"]].partitionings.index(e["parts"]) for e in listed)
    assert json.loads(json.dumps(listed)) == listed  # a manifest can store them as they are


@pytest.mark.slow
def test_an_entry_rebuilds_from_its_listed_parameters():
    pytest.importorskip("transformers")
    from workbench.importers.zoo import build_entry

    item = next(e for e in entries() if e["name"] == "gpt2-small" and e["partitioning"] == 1)
    graph = build_entry(item["name"], item["partitioning"])
    assert graph.metadata["partitioning"] == item["parts"] and graph.metadata["spec"] == item["spec"]
    assert graph.metadata["input_shapes"] == [item["input_shape"]]
