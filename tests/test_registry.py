"""The method registry: kinds, options read from the constructors, and every method list derived from it."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import workbench as wb
from workbench.placers import KINDS, REGISTRY, PlacerError, get_placer, methods, placer_class, placer_options, register_placer

ROOT = Path(__file__).resolve().parents[1]
REGISTRY_MODULES = {ROOT / "workbench" / "placers" / "registry.py", ROOT / "workbench" / "learn" / "registry.py"}
# Literals that hold method names but are not method lists.
NOT_METHOD_LISTS = {
    "PAPER_COLUMNS": "the column names of the paper's Table 2 (data about the paper)",
    "ZOO_TABLE_COLUMNS": "the fixed columns of the zoo's placement table in docs/generators.md (a report's definition)",
}


def test_every_entry_has_a_known_kind_and_a_placer_class():
    for name, entry in REGISTRY.items():
        assert entry.kind in KINDS, name
        if entry.kind != "learned":  # learned classes import torch; test_learn_policies places with them
            assert issubclass(placer_class(name), wb.Placer), name


def test_the_kinds_partition_the_registry_in_registry_order():
    assert methods() == list(REGISTRY)
    by_kind = [m for kind in KINDS for m in methods(kind)]
    assert sorted(by_kind) == sorted(REGISTRY) and len(by_kind) == len(set(by_kind))
    assert methods("heuristic", "baseline") == [m for m in REGISTRY if REGISTRY[m].kind in ("heuristic", "baseline")]
    with pytest.raises(PlacerError, match="unknown kind"):
        methods("magic")


def test_the_learned_methods_register_from_the_learn_layer_without_torch():
    code = (
        "import sys, workbench; from workbench.placers import REGISTRY, methods; "
        "assert methods('learned') and all(REGISTRY[m].module.startswith('workbench.learn.') for m in methods('learned')); "
        "assert 'torch' not in sys.modules and 'dgl' not in sys.modules; print(','.join(methods('learned')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip().split(",") == methods("learned")
    for core in (ROOT / "workbench" / "placers").glob("*.py"):  # the core names no higher layer, not even in a string
        assert "workbench.learn" not in core.read_text(encoding="utf-8"), core


def test_the_learned_policies_are_exactly_the_learned_methods():
    pytest.importorskip("torch")
    from workbench.learn import METHODS

    assert set(METHODS) == set(methods("learned"))


@pytest.mark.parametrize("method", [m for m in REGISTRY if REGISTRY[m].kind != "learned"])
def test_options_are_the_constructor_parameters(method):
    cls = placer_class(method)
    parameters = inspect.signature(cls).parameters
    named = tuple(name for name, p in parameters.items() if p.kind is not p.VAR_KEYWORD)
    if len(named) == len(parameters):
        assert placer_options(method) == named
    else:  # ``**options`` passes on to the base class: its options follow the placer's own
        base = cls.__mro__[1]
        assert placer_options(method) == named + tuple(inspect.signature(base).parameters)
    assert type(get_placer(method)) is placer_class(method)


def test_options_of_a_learned_method_and_of_a_newly_registered_one():
    assert "checkpoint" in placer_options("doppler") and "samples" in placer_options("doppler")
    register_placer("heft_again", "workbench.placers.heft", "HeftPlacer", "HEFT under a second name")
    try:
        assert methods("heuristic")[-1] == "heft_again" and placer_options("heft_again") == placer_options("heft")
    finally:
        del REGISTRY["heft_again"]
    with pytest.raises(PlacerError, match="unknown kind 'clever'"):
        register_placer("x", "workbench.placers.heft", "HeftPlacer", "x", kind="clever")
    with pytest.raises(wb.PlacerError, match="unknown method 'nope'"):
        placer_options("nope")


def test_the_derived_method_lists_follow_the_registry():
    from workbench.bench.placers import PAPER_METHODS, STG_METHODS
    from workbench.cli.compare import parse_methods
    from workbench.notebook import HEURISTICS, LEARNED, SEARCH
    from workbench.placers.best_constructive import constructive_methods

    assert list(HEURISTICS) == list(PAPER_METHODS) == methods("baseline", "heuristic", "rule")
    assert list(SEARCH) == methods("search", "exact") and list(LEARNED) == methods("learned")
    assert set(STG_METHODS) == set(methods()) - set(methods("random", "learned"))
    assert constructive_methods() == methods("heuristic") + methods("rule") + methods("baseline") and "affinity" in constructive_methods()
    assert constructive_methods("literature") == methods("heuristic") + methods("baseline")
    assert parse_methods(None) == methods("baseline", "heuristic", "rule", "search")
    assert "random" not in parse_methods(None) and "cpsat" not in parse_methods(None)


def _method_lists(source: str, registered: set[str]) -> list[int]:
    """Lines of the list/tuple/set literals in ``source`` that hold two or more different registered method names."""
    tree = ast.parse(source)
    exempt = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in NOT_METHOD_LISTS for t in node.targets)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and id(node) not in exempt:
            if len({e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in registered}) >= 2:
                found.append(node.lineno)
    return found


def test_no_hand_written_method_list_remains_outside_the_registry():
    sources = sorted(p for p in (ROOT / "workbench").rglob("*.py") if p not in REGISTRY_MODULES) + [ROOT / "app.py"]
    found = [
        f"{path.relative_to(ROOT)}:{line}" for path in sources for line in _method_lists(path.read_text(encoding="utf-8"), set(REGISTRY))
    ]
    assert not found, "derive these method lists from workbench.placers.methods(kind, ...):\n" + "\n".join(found)


def test_the_method_list_check_finds_a_hand_written_list():
    source = 'PAPER_COLUMNS = ("heft", "cpop")\nSTARTS = ["heft", "etf", "dls"]\nPAIR = ("heft", "heft")\nKINDS = {"x": ("etf", "peft")}\n'
    assert _method_lists(source, set(REGISTRY)) == [2, 4]
