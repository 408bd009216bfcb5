"""The layer rule of docs/architecture.md: a module imports only from its own layer or below.

Every module of the package is parsed with ``ast`` and every dependency it
names is collected: ``import`` statements (at any depth, so lazy imports
inside functions count), ``importlib.import_module("...")`` calls, and string
constants that name a workbench module exactly (registry entries and lazy
export tables that are imported by name later). The top-level
``workbench/__init__.py`` is exempt: its lazy public API names every layer.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import workbench

PACKAGE = Path(__file__).resolve().parent.parent / "workbench"

LAYERS = {
    "core": 0,
    "graph sources": 1,
    "figures": 1,
    "learned policies / backends": 2,
    "training": 3,
    "experiments": 4,
    "views": 5,
}
"""The layers of docs/architecture.md, bottom (0) to top; layers of equal rank may import each other.

Figures (``workbench/viz/``, plotly only) sit below the backends because calibration draws with them."""

LAYER_OF = {
    # core: the graph model, formats, simulator, placers and the contracts every layer shares
    "graph": "core", "levels": "core", "formats": "core", "datasets": "core", "cluster": "core", "sim": "core", "schedule": "core",
    "placers": "core", "imports": "core", "fileio": "core", "provenance": "core", "commandline": "core", "runs": "core",
    "progress": "core", "extras": "core",
    "generators": "graph sources", "importers": "graph sources", "models": "graph sources", "corpus": "graph sources", "viz": "figures",
    "learn": "learned policies / backends", "systems": "learned policies / backends",
    "training": "training",
    "sweeps": "experiments", "bench": "experiments",
    "dashboard": "views", "notebook": "views", "notebook_outputs": "views", "cli": "views", "__main__": "views",
}  # fmt: skip
"""Each top-level module or subpackage of ``workbench`` and its layer."""

NO_HEAVY_IMPORTS = ("core", "graph sources", "figures")
"""Layers whose modules never import torch, DGL or Dash (but see TORCH_BY_DESIGN)."""
HEAVY = ("torch", "dgl", "dash")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def resolve(name: str, level: int, importer: str, is_package: bool) -> str:
    """The absolute module name of ``from <level dots><name> import ...`` in ``importer``."""
    if level == 0:
        return name
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def imported_names(node: ast.Import | ast.ImportFrom, importer: str, is_package: bool, known: dict[str, Path] = MODULES) -> set[str]:
    """The modules an ``import`` or ``from ... import`` statement of ``importer`` names (a name imported from a package
    that is a module of ``known`` too)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    base = resolve(node.module or "", node.level, importer, is_package)
    return {base} | {f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known}


def dependencies(importer: str, path: Path) -> set[str]:
    """Every workbench module ``importer`` names: imports, ``import_module`` calls, exact module-name strings."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    public_api = {
        alias.asname or "workbench"
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name == "workbench"
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            found |= imported_names(node, importer, is_package)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                name = node.args[0].value
                found.add(resolve(name.lstrip("."), len(name) - len(name.lstrip(".")), importer, is_package))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in MODULES:
            found.add(node.value)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in public_api:
            found.add(workbench._EXPORTS.get(node.attr, "workbench"))
    return found


def layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "workbench" or len(parts) < 2:
        return None
    return LAYER_OF[parts[1]]


DOC_ROWS = {
    "core": "core",
    "graph sources": "graph sources",
    "figures": "figures",
    "learned policies": "learned policies / backends",
    "execution backends": "learned policies / backends",
    "training": "training",
    "experiments": "experiments",
    "views": "views",
}
"""The rows of the table in docs/architecture.md and the layer each stands for."""


def documented_layers() -> dict[str, str]:
    """Module → layer as the table in docs/architecture.md lists them (its modules column)."""
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    found = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] in DOC_ROWS:
            for token in re.findall(r"`([^`]+)`", cells[1]):
                name = token.removeprefix("workbench/").rstrip("/").removesuffix(".py")
                if name in LAYER_OF:
                    found[name] = DOC_ROWS[cells[0]]
    return found


def test_the_layer_table_mirrors_docs_architecture():
    documented = documented_layers()
    present = {name.split(".")[1] for name in MODULES if "." in name} - {"__main__"}
    assert present <= set(documented), f"not in docs/architecture.md's table: {sorted(present - set(documented))}"
    differ = {name: (layer, LAYER_OF[name]) for name, layer in documented.items() if LAYERS[layer] != LAYERS[LAYER_OF[name]]}
    assert not differ, f"docs/architecture.md (left) and LAYER_OF (right) disagree: {differ}"


def test_every_module_has_a_layer():
    missing = sorted({name.split(".")[1] for name in MODULES if "." in name} - set(LAYER_OF))
    assert not missing, f"add these to LAYER_OF (and to docs/architecture.md): {missing}"


@pytest.mark.parametrize("importer", sorted(name for name in MODULES if name != "workbench"))
def test_no_module_imports_a_higher_layer(importer):
    own = layer(importer)
    upward = []
    for imported in sorted(dependencies(importer, MODULES[importer])):
        target = layer(imported)
        if target is None:
            continue
        if LAYERS[target] > LAYERS[own]:
            upward.append(f"{imported} ({target})")
    assert not upward, f"{importer} ({own}) imports a higher layer: {', '.join(upward)}"


TORCH_BY_DESIGN = ("workbench.importers", "workbench.models")
"""The torch.fx importer and the bundled torch models wrap torch; they are imported only when used."""


@pytest.mark.parametrize(
    "importer", sorted(n for n in MODULES if n != "workbench" and layer(n) in NO_HEAVY_IMPORTS and not n.startswith(TORCH_BY_DESIGN))
)
def test_lower_layers_never_import_torch_dgl_or_dash(importer):
    heavy = sorted(d for d in dependencies(importer, MODULES[importer]) if d.split(".")[0] in HEAVY)
    assert not heavy, f"{importer} ({layer(importer)}) imports {heavy}"


def test_the_walk_sees_every_kind_of_import(tmp_path):
    """The scanner itself: relative, lazy, import_module and registry-string dependencies are all found."""
    source = (
        "import numpy\nfrom ..sim import simulate\nfrom . import base\n"
        "def f():\n    from ..learn.placers import DopplerPlacer\n    importlib.import_module('workbench.training')\n"
        "REGISTRY = {'x': ('workbench.dashboard.sources', 'Y')}\n"
        "def g():\n    import workbench as wb\n    return wb.sweep\n"
    )
    path = tmp_path / "local_search.py"
    path.write_text(source)
    found = dependencies("workbench.placers.local_search", path)
    assert {
        "workbench.sim",
        "workbench.placers",
        "workbench.learn.placers",
        "workbench.training",
        "workbench.dashboard.sources",
        "workbench.sweeps",
        "numpy",
    } <= found


MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 100


def oversized(path: Path, label: str) -> list[str]:
    """The module itself when it is over :data:`MAX_MODULE_LINES` lines, and each function or method in it (nested and
    async ones included) over :data:`MAX_FUNCTION_LINES`, from its ``def`` line to its last; ``label`` names the file."""
    text = path.read_text(encoding="utf-8")
    found = [f"{label}: {len(text.splitlines())} lines"] if len(text.splitlines()) > MAX_MODULE_LINES else []
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES:
            found.append(f"{label}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines")
    return found


def test_no_module_is_over_600_lines_and_no_function_over_100():
    """Issue 30: the big rooms stay split (tests and generated files live outside ``workbench/``)."""
    found = [item for path in MODULES.values() for item in oversized(path, str(path.relative_to(PACKAGE.parent)))]
    assert not found, "split these: " + "; ".join(found)


def test_the_size_check_sees_modules_methods_and_nested_functions(tmp_path):
    def lines(indent: int, count: int) -> str:
        return "".join(f"{' ' * indent}x{i} = {i}\n" for i in range(count))

    source = (
        "class A:\n    async def method(self):\n"
        + lines(8, MAX_FUNCTION_LINES)  # with its def line: one line too many
        + "def outer():\n    def inner():\n"
        + lines(8, MAX_FUNCTION_LINES)
        + "    return inner\n"
        + "def small():\n"
        + lines(4, MAX_FUNCTION_LINES - 1)  # exactly at the limit
    )
    path = tmp_path / "big.py"
    path.write_text(source + "\n" * MAX_MODULE_LINES)
    found = oversized(path, "big.py")
    assert found[0] == f"big.py: {len(source.splitlines()) + MAX_MODULE_LINES} lines"
    assert sorted(item.split(" ")[1].rstrip(":") for item in found[1:]) == ["inner", "method", "outer"]
    path.write_text(lines(0, MAX_MODULE_LINES))
    assert oversized(path, "big.py") == []


def absolute_self_imports(path: Path) -> list[str]:
    """The ``import workbench...`` and ``from workbench... import`` statements of a module of the package (by line)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        found += [f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {name}" for name in names if name.split(".")[0] == "workbench"]
    return found


def test_no_module_inside_the_package_imports_workbench_by_name():
    """One import style inside the package (issue 30): its own modules are imported relatively, never through
    ``import workbench`` (the lazy public API, for users) nor ``from workbench.x import``."""
    found = [line for path in MODULES.values() for line in absolute_self_imports(path)]
    assert not found, "import these relatively: " + "; ".join(found)


@pytest.mark.parametrize("package", ["sim"])
def test_a_split_packages_init_only_re_exports(package):
    """docs/architecture.md: ``sim/__init__.py`` only re-exports; its logic lives in named modules."""
    tree = ast.parse((PACKAGE / package / "__init__.py").read_text(encoding="utf-8"))
    logic = [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    assert not logic, f"{package}/__init__.py defines {logic}"


def module_level_imports(importer: str, path: Path, known: dict[str, Path] = MODULES) -> set[str]:
    """The workbench modules ``importer`` imports when it is itself imported: statements at module level (inside ``if``,
    ``try`` and class bodies too, not under ``if TYPE_CHECKING``), never those inside functions, which run later. A
    package a module sits in is left out: it is always imported first, so it closes no circle. ``known``: the modules
    there are (an imported name that is no module counts as the module that holds it)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.update(imported_names(node, importer, is_package, known))
            elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
                visit(node.body + node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body + [s for h in node.handlers for s in h.body] + node.orelse + node.finalbody)
            elif isinstance(node, ast.ClassDef | ast.With):
                visit(node.body)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)).body)
    modules = set()
    for name in found:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != importer and not importer.startswith(name + "."):
            modules.add(name)
    return modules


def import_circles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``imports`` (module → the modules it imports): each strongly connected group of two or more."""
    import networkx as nx

    graph = nx.DiGraph([(a, b) for a, targets in imports.items() for b in targets])
    return [sorted(group) for group in nx.strongly_connected_components(graph) if len(group) > 1]


def test_no_module_level_import_closes_a_circle():
    """Issue 30: no import circle between modules. Imports inside functions are not counted: they run after every module
    has loaded, and the lazy imports of the registry and the public API are such by design."""
    circles = import_circles({name: module_level_imports(name, path) for name, path in MODULES.items()})
    assert not circles, "break these import circles: " + "; ".join(" <-> ".join(c) for c in circles)


def test_the_circle_check_finds_a_circle_through_a_sibling_but_not_through_a_function(tmp_path):
    a, b, c = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "c.py"
    a.write_text("from .b import x\n")
    b.write_text("from . import c\nif TYPE_CHECKING:\n    from .a import y\n")
    c.write_text("try:\n    from .a import z\nexcept ImportError:\n    pass\ndef f():\n    from .b import w\n")
    names = {"workbench.sim": tmp_path / "__init__.py", "workbench.sim.a": a, "workbench.sim.b": b, "workbench.sim.c": c}
    imports = {name: module_level_imports(name, path, names) for name, path in names.items() if name != "workbench.sim"}
    assert imports["workbench.sim.b"] >= {"workbench.sim.c"} and "workbench.sim.a" not in imports["workbench.sim.b"]
    assert "workbench.sim.b" not in imports["workbench.sim.c"]
    assert import_circles(imports) == [["workbench.sim.a", "workbench.sim.b", "workbench.sim.c"]]
