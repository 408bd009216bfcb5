"""Atomic writes: whole files only, with the permissions a plain ``open`` would give (not ``mkstemp``'s 0600)."""

from __future__ import annotations

import os
import stat

import pytest

from workbench.fileio import atomic_path, atomic_write_json, atomic_write_text


@pytest.fixture
def umask():
    """Set the process's umask for one test; restored after it."""
    old = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_a_new_file_gets_0666_less_the_umask(tmp_path, umask, mask, expected):
    umask(mask)
    atomic_write_text(tmp_path / "shared" / "results.csv", "a,b\n")
    atomic_write_json(tmp_path / "run.json", {"x": 1})
    assert mode(tmp_path / "shared" / "results.csv") == mode(tmp_path / "run.json") == expected


def test_a_replaced_file_keeps_its_mode_and_writers_by_path_get_it_too(tmp_path, umask):
    umask(0o022)
    path = tmp_path / "table.csv"
    path.write_text("old")
    path.chmod(0o640)
    atomic_write_text(path, "new")
    assert path.read_text() == "new" and mode(path) == 0o640
    with atomic_path(tmp_path / "figure.png") as tmp:  # a writer that wants a file name (plotly, pandas, safetensors)
        tmp.write_bytes(b"png")
    assert mode(tmp_path / "figure.png") == 0o644
    assert not list(tmp_path.glob(".tmp-*"))
