"""A generated corpus of mutated graph files, in every format: each loads into a valid graph or is refused in one line.

The corpus is made here from fixed seeds (nothing is committed but this code), so every run checks the same files:

- *targeted* files, whose outcome is known: random DAGs written in each format (they load back as the same graph), then
  the same DAGs with a cycle, a self-loop (on STG's dummy entry and exit tasks too), no op, two or three byte-order
  marks, a negative, NaN or huge cost, a huge op id, or control characters in names and file names;
- *blind* mutants of valid files: truncation, flipped bytes, duplicated, removed or swapped lines, and inserted tokens
  (huge numbers, NaN, foreign digits, byte-order marks, control characters), whose outcome is one of the two.

Every file goes through ``load_graph`` and ``workbench info``: a graph that loads is valid (finite costs in range, no
cycle, ids in range) and ``info`` prints it without a control character; a refusal is one
:class:`~workbench.formats.GraphFormatError` line naming the file, never a traceback. ``pytest -m fuzz`` runs twenty
times as many files from other seeds (left out of the default run and CI).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import workbench as wb
from workbench.cli import main
from workbench.formats import GraphFormatError
from workbench.graph import MAX_COST, MAX_EDGES, MAX_NODES

from .data.make_corpus import BOM, PAPER, STG, graph_json
from .test_malformed import NASTY

ROOT = Path(__file__).resolve().parent.parent
SUFFIX = {"paper": ".txt", "stg": ".stg", "json": ".json"}
CONTROL = ["\x1b[31m", "\x1b]0;title\x07", "\r", "\x08", "\u202e", "\x7f", "\x1b[2J"]


@dataclass(frozen=True)
class Case:
    """One file of the corpus: its bytes, and what loading it must give (``reason`` a refusal, ``graph`` a load, else either)."""

    name: str
    format: str
    data: bytes
    reason: str | None = None
    graph: wb.DataflowGraph | None = None
    file_name: str | None = None


# ------------------------------------------------------------------------------------------------ writers
def random_dag(rng: random.Random) -> wb.DataflowGraph:
    """A DAG of 1 to 24 ops with integer costs; an edge's communication cost is its source's (as the paper format stores it)."""
    n = rng.randint(1, 24)
    order = list(range(n))
    rng.shuffle(order)
    pairs = sorted({(order[i], order[j]) for i in range(n) for j in range(i + 1, n) if rng.random() < 3 / n})
    out_comm = [rng.randint(0, 50) for _ in range(n)]
    compute = [rng.randint(0, 99) for _ in range(n)]
    return wb.DataflowGraph.from_edges(compute, [(u, v, out_comm[u]) for u, v in pairs])


def edges_of(graph: wb.DataflowGraph) -> list[tuple[int, int]]:
    return list(zip(graph.src.tolist(), graph.dst.tolist(), strict=True))


def paper_text(graph: wb.DataflowGraph, edges: list[tuple[int, int]] | None = None, compute: list[str] | None = None) -> str:
    """``graph`` in the paper's format (one input node), with other ``edges`` or cost fields if given."""
    edges = edges_of(graph) if edges is None else edges
    out_comm = {u: int(c) for u, c in zip(graph.src.tolist(), graph.comm.tolist(), strict=True)}
    costs = compute or [str(int(c)) for c in graph.compute]
    lines = [str(graph.num_nodes + 1), "0,", ", ".join(str(u) for u, _ in edges), ", ".join(str(v) for _, v in edges)]
    lines += [f"{cost},{out_comm.get(op, 0)}" for op, cost in enumerate(costs)]
    return "\n".join(lines) + "\n"


def stg_text(graph: wb.DataflowGraph, edges: list[tuple[int, int]] | None = None, compute: list[str] | None = None) -> str:
    """``graph`` as an STG file (tasks 1..n, dummy entry 0 and exit n + 1), with other ``edges`` or costs if given."""
    edges = edges_of(graph) if edges is None else edges
    n = graph.num_nodes
    costs = compute or [str(int(c)) for c in graph.compute]
    preds: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges:
        preds[v].append(u + 1)
    has_successor = {u for u, _ in edges}
    lines = [str(n), "0 0 0"]
    for op in range(n):
        listed = preds[op] or [0]
        lines.append(" ".join(map(str, [op + 1, costs[op], len(listed), *listed])))
    sinks = [op + 1 for op in range(n) if op not in has_successor]
    lines.append(" ".join(map(str, [n + 1, 0, len(sinks), *sinks])))
    return "\n".join(lines) + "\n"


def json_text(graph: wb.DataflowGraph, edges: list[tuple[int, int]] | None = None, compute: list[str] | None = None) -> str:
    """``graph`` in the native JSON format, with other ``edges`` or costs (JSON number text) if given."""
    data = json.loads(wb.formats.graph_json_text(graph))
    if edges is not None:
        data.update(src=[u for u, _ in edges], dst=[v for _, v in edges], comm=[1] * len(edges))
    text = json.dumps(data)
    if compute is not None:
        text = text.replace(json.dumps(data["compute"]), "[" + ", ".join(compute) + "]", 1)
    return text


WRITERS: dict[str, Callable[..., str]] = {"paper": paper_text, "stg": stg_text, "json": json_text}


def as_stored(graph: wb.DataflowGraph, fmt: str) -> wb.DataflowGraph:
    """What loading ``graph`` written in ``fmt`` gives: STG has no communication costs and names its tasks t1..tn."""
    if fmt != "stg":
        return graph
    edges = sorted(edges_of(graph), key=lambda edge: edge[1])  # by task, each task's predecessors in file order
    return wb.DataflowGraph.from_edges(graph.compute, edges, names=tuple(f"t{t}" for t in range(1, graph.num_nodes + 1)))


def reachable(graph: wb.DataflowGraph, start: int) -> set[int]:
    successors: dict[int, list[int]] = {}
    for u, v in edges_of(graph):
        successors.setdefault(u, []).append(v)
    seen, stack = set(), [start]
    while stack:
        for v in successors.get(stack.pop(), []):
            if v not in seen:
                seen.add(v)
                stack.append(v)
    return seen


# ---------------------------------------------------------------------------------------- targeted files
NEGATIVE = {"paper": "finite number >= 0", "stg": "negative cost", "json": "not a cost"}
NOT_A_NUMBER = {"paper": ("nan", "not a number"), "stg": ("nan", "'nan' is not an integer"), "json": ("NaN", "NaN is not a JSON number")}
HUGE_COST = {"paper": ("1e300", "at most 1e+18"), "stg": (str(10**19), "more than the 1e+18 allowed"), "json": ("1e300", "not a cost")}
HUGE_ID = {"paper": (10**25, "too large for a node id"), "stg": (10**40, "digits, too large"), "json": (10**300, "far outside the op ids")}
NO_OP = {
    "paper": ("1\n0,\n\n\n", "leaves no node to schedule"),
    "stg": ("0\n0 0 0\n1 0 1 0\n", "no task to schedule"),
    "json": (graph_json(num_nodes=0, compute=[], src=[], dst=[], comm=[]), "no op to schedule"),
}


def with_control_characters(graph: wb.DataflowGraph, rng: random.Random) -> wb.DataflowGraph:
    """``graph`` with control characters in its name, format, op names and op types (JSON keeps them all)."""

    def pick() -> str:
        return rng.choice(CONTROL)

    return wb.DataflowGraph(
        graph.compute,
        graph.src,
        graph.dst,
        graph.comm,
        names=tuple(f"op{i}{pick()}" for i in range(graph.num_nodes)),
        op_types=tuple(pick() for _ in range(graph.num_nodes)),
        metadata={"name": f"{pick()}graph{pick()}", "format": f"json{pick()}"},
    )


def stg_predecessor_added(text: str, task: int, predecessor: int) -> str:
    """The STG file ``text`` with ``predecessor`` added to the line of ``task`` (0 is the dummy entry, n + 1 the exit)."""
    lines = text.splitlines()
    number, cost, count, *listed = lines[1 + task].split()
    if task == 0:
        count, listed = "0", []
    lines[1 + task] = " ".join([number, cost, str(int(count) + 1), *listed, str(predecessor)])
    return "\n".join(lines) + "\n"


def targeted(seed: int) -> list[Case]:
    """The files made from random DAG ``seed`` whose outcome is known, in every format."""
    rng = random.Random(seed)
    graph = random_dag(rng)
    n, edges = graph.num_nodes, edges_of(graph)
    op, target = rng.randrange(n), rng.randrange(n)
    later = sorted(reachable(graph, op))
    files: list[tuple[str, str, str, str | None, wb.DataflowGraph | None]] = []  # format, kind, text, reason, graph loaded
    for fmt, write in WRITERS.items():
        text, stored = write(graph), as_stored(graph, fmt)
        files += [(fmt, "valid", text, None, stored), (fmt, "valid-bom", BOM + text, None, stored)]
        files.append((fmt, "two-boms", BOM * rng.randint(2, 3) + text, "more than one byte-order mark", None))
        files.append((fmt, "self-loop", write(graph, edges=[*edges, (op, op)]), "is a self-loop on op", None))
        if later:
            files.append((fmt, "cycle", write(graph, edges=[*edges, (rng.choice(later), op)]), "cycle", None))
        if seed == 0:
            files.append((fmt, "no-op", *NO_OP[fmt], None))
        costs = [str(int(c)) for c in graph.compute]
        for kind, (value, reason) in [
            ("negative-cost", (f"-{rng.randint(1, 10**6)}", NEGATIVE[fmt])),
            ("nan-cost", NOT_A_NUMBER[fmt]),
            ("huge-cost", HUGE_COST[fmt]),
        ]:
            files.append((fmt, kind, write(graph, compute=[*costs[:op], value, *costs[op + 1 :]]), reason, None))
        huge, reason = HUGE_ID[fmt]
        files.append((fmt, "huge-id", write(graph, edges=[*edges, (target, huge) if fmt == "json" else (huge, target)]), reason, None))
    named = with_control_characters(graph, rng)
    files.append(("json", "control-in-names", json_text(named), None, named))
    stg, task = stg_text(graph), rng.randint(1, n)
    entry = stg_predecessor_added(stg, 0, rng.choice([task, 0, n + 1]))
    files.append(("stg", "entry-has-predecessor", entry, "the dummy entry task 0 lists", None))
    files.append(("stg", "exit-precedes-task", stg_predecessor_added(stg, task, n + 1), f"task {task} lists the dummy exit", None))
    files.append(("stg", "exit-self-loop", stg_predecessor_added(stg, n + 1, n + 1), f"task {n + 1} lists the dummy exit", None))
    cases = [Case(f"{fmt}-{seed}-{kind}", fmt, text.encode(), reason, loaded) for fmt, kind, text, reason, loaded in files]
    for fmt, write in WRITERS.items():  # a file name with control characters: escaped wherever it is printed
        name = f"g{seed}{rng.choice(CONTROL)}{SUFFIX[fmt]}"
        cases.append(Case(f"{fmt}-{seed}-control-in-file-name", fmt, write(graph).encode(), None, as_stored(graph, fmt), name))
    return cases


# ------------------------------------------------------------------------------------------- blind mutants
def mutate(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One mutation of ``data``, named."""
    lines = data.splitlines(keepends=True)
    kind = rng.choice(["truncate", "flip", "duplicate-line", "remove-line", "swap-lines", "insert-token", "replace-number"])
    if kind == "truncate":
        return kind, data[: rng.randrange(len(data))]
    if kind == "flip":
        out = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            out[rng.randrange(len(out))] ^= rng.randint(1, 255)
        return kind, bytes(out)
    if kind in ("duplicate-line", "remove-line", "swap-lines"):
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        if kind == "duplicate-line":
            lines.insert(j, lines[i])
        elif kind == "remove-line":
            del lines[i]
        else:
            lines[i], lines[j] = lines[j], lines[i]
        return kind, b"".join(lines)
    starts = [i for i in range(len(data)) if data[i : i + 1].isdigit() and (i == 0 or not data[i - 1 : i].isdigit())]
    if kind == "insert-token" or not starts:
        at = rng.randrange(len(data) + 1)
        token = rng.choice([*NASTY, *(c.encode() for c in CONTROL), b"\n", b"\x00"])
        return "insert-token", data[:at] + token + data[at:]
    start = rng.choice(starts)
    end = start
    while data[end : end + 1].isdigit():
        end += 1
    value = rng.choice([b"-1", b"-0", b"NaN", b"nan", b"inf", b"1e308", b"1e999", b"9" * 19, b"9" * 40, b"0", b"1.5", b"4294967296"])
    return kind, data[:start] + value + data[end:]


def bases() -> dict[str, list[bytes]]:
    """Valid files of each format to mutate: the smallest written by hand, shipped graphs, and a random DAG with names."""
    rich = wb.bundled_graph("chain_mm")
    return {
        "paper": [PAPER.encode(), (ROOT / "datasets" / "doppler-paper" / "chain_mm_112nodes.txt").read_bytes()],
        "stg": [STG.encode(), (ROOT / "datasets" / "stg" / "50" / "rand0000.stg").read_bytes()],
        "json": [graph_json().encode(), wb.formats.graph_json_text(rich.with_metadata(name="chain_mm")).encode()],
    }


def blind(seeds: range) -> list[Case]:
    """A mutant of each format's valid files per seed, one to three mutations each; every fifth has no extension (sniffed)."""
    cases = []
    for fmt, files in bases().items():
        for seed in seeds:
            rng = random.Random(f"{fmt}-{seed}")
            data, names = rng.choice(files), []
            for _ in range(rng.choice([1, 1, 2, 3])):
                kind, data = mutate(data, rng) if data else ("empty", data)
                names.append(kind)
            suffix = "" if seed % 5 == 0 else SUFFIX[fmt]
            cases.append(Case(f"{fmt}-mutant-{seed}-{'+'.join(names)}", fmt, data, file_name=f"mutant{suffix}"))
    return cases


SEEDS = range(8)
CORPUS = [case for seed in SEEDS for case in targeted(seed)] + blind(range(70))


def test_the_corpus_holds_at_least_400_files_of_every_format_and_kind():
    assert len(CORPUS) >= 400
    assert len({case.name for case in CORPUS}) == len(CORPUS)
    for fmt in WRITERS:
        mine = [case for case in CORPUS if case.format == fmt]
        assert len(mine) >= 120, fmt
        assert sum(case.graph is not None for case in mine) >= 2 * len(SEEDS), fmt
    kinds = {case.name.split("-", 2)[2] for case in CORPUS if case.reason is not None}
    assert {"two-boms", "self-loop", "cycle", "no-op", "negative-cost", "nan-cost", "huge-cost", "huge-id"} <= kinds
    assert {"entry-has-predecessor", "exit-precedes-task", "exit-self-loop"} <= kinds
    mutations = {kind for case in CORPUS if case.reason is None and case.graph is None for kind in case.name.split("-", 3)[3].split("+")}
    assert mutations >= {"truncate", "flip", "duplicate-line", "remove-line", "swap-lines", "insert-token", "replace-number"}


def assert_valid(graph: wb.DataflowGraph) -> None:
    """What every loaded graph holds: an op or more, sizes within the caps, finite costs in range, edges along a topological order."""
    assert 1 <= graph.num_nodes <= MAX_NODES and graph.num_edges <= MAX_EDGES
    for costs in (graph.compute, graph.comm):
        assert np.all(np.isfinite(costs)) and np.all((costs >= 0) & (costs <= MAX_COST))
    assert np.all((graph.src >= 0) & (graph.src < graph.num_nodes) & (graph.dst >= 0) & (graph.dst < graph.num_nodes))
    position = np.empty(graph.num_nodes, dtype=np.int64)
    position[np.asarray(graph.topological_order)] = np.arange(graph.num_nodes)
    assert np.all(position[graph.src] < position[graph.dst]), "an edge against the topological order: a cycle loaded"
    assert np.isfinite(wb.lower_bound(graph, 2))


def check(case: Case, folder: Path, capsys: Any) -> None:
    """Load ``case`` written in ``folder``, then run ``workbench info`` on it: a valid graph, or one line naming the file."""
    path = folder / (case.file_name or f"{case.name}{SUFFIX[case.format]}")
    path.write_bytes(case.data)
    try:
        graph = wb.load_graph(path)
    except GraphFormatError as exc:
        refusal: str | None = str(exc)
        assert refusal.startswith(str(path) if str(path).isprintable() else ascii(str(path))), refusal
        assert refusal.isprintable(), "a refusal prints no control character from the file"
        assert case.graph is None, f"a valid file was refused: {refusal}"
        if case.reason is not None:
            assert case.reason in refusal
    else:
        refusal = None
        assert case.reason is None, f"loaded a file that must be refused for {case.reason!r}"
        assert_valid(graph)
        if case.graph is not None:
            assert graph.same_as(case.graph)
            assert graph.metadata["name"] == case.graph.metadata.get("name", path.stem)
    code = main(["info", str(path)])
    out, err = capsys.readouterr()
    if refusal is None:
        assert code == 0 and err == "", err
        assert all(line.isprintable() for line in out.splitlines()), "info prints a control character from the file"
        assert graph.name in out
    else:
        assert code == 2 and out == ""
        assert err == f"workbench info: error: {refusal}\n"


@pytest.mark.parametrize("case", CORPUS, ids=[case.name for case in CORPUS])
def test_each_mutated_file_loads_into_a_valid_graph_or_is_refused_in_one_line(tmp_path, capsys, case):
    check(case, tmp_path, capsys)


@pytest.mark.fuzz
def test_a_longer_fuzz_from_other_seeds(tmp_path, capsys):
    """Twenty times the corpus, from seeds the default run does not use; not run by default (``pytest -m fuzz``)."""
    cases = [case for seed in range(8, 168) for case in targeted(seed)] + blind(range(70, 1470))
    assert len(cases) > 20 * 400
    for number, case in enumerate(cases):
        folder = tmp_path / str(number)
        folder.mkdir()
        check(case, folder, capsys)
