"""Every command and Python block in README.md and docs/*.md runs as written, on a copy of the checkout.

Each fenced block is tagged with its language. ``bash`` blocks run line by line (a trailing ``\\`` joins
lines) and ``python`` blocks run whole, in a copy of the checkout's files (tracked, and new ones git does
not ignore), so nothing lands in the repository; ``workbench`` and ``python`` resolve to this interpreter.
``text`` and ``json`` blocks are listings and are not run.

HTML comments right before a block, invisible when the Markdown is rendered, change how it runs:

- ``<!-- docs-run: skip "TEXT": REASON -->``: the block's lines that contain TEXT are not run
  (a bash block only); ``<!-- docs-run: skip: REASON -->``: the whole block is not run. Every skip
  gives its reason, and there are at most ``MAX_SKIPPED`` skipped commands.
- ``<!-- docs-run: full "TEXT": REASON -->`` or ``<!-- docs-run: full: REASON -->``: as skip, but
  ``WORKBENCH_DOCS_FULL=1`` runs them (a long command that has no smaller size).
- ``<!-- docs-run: quick "OLD" -> "NEW" -->``: CI runs the block with OLD replaced by NEW, a smaller
  size of the same command; ``WORKBENCH_DOCS_FULL=1`` runs it as written.
- ``<!-- docs-run: time "TEXT" 7 min -->``: the lines that contain TEXT take about 7 min, which the
  line itself says (the test checks that it does). A command may take ``SLACK`` times its stated time
  (``DEFAULT_SECONDS`` when it states none) in CPU seconds, its own and its children's: unlike wall
  time, a busy machine does not stretch them. Its wall time is capped at ``HANG`` times that, against
  a command that hangs.

Every marker must match something in its block, so a marker cannot outlive the line it was written for.
"""

from __future__ import annotations

import hashlib
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import tracked_tree

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_LANGUAGES = {"bash", "python"}
LISTING_LANGUAGES = {"text", "json"}
FULL = os.environ.get("WORKBENCH_DOCS_FULL") == "1"
# A command that states no time should take well under this; one that states a time may take SLACK times that (in CPU
# seconds), and HANG times that in wall seconds (a 2-core machine at load 20 stretches wall time 10-15 times).
DEFAULT_SECONDS = 30.0
SLACK = 4.0
HANG = 20.0
MAX_SKIPPED = 19

FENCE = re.compile(r"^```(\S*)\s*$")
MARKER = re.compile(r"^<!--\s*docs-run:\s*(.*?)\s*-->\s*$")
SKIP = re.compile(r'^(?P<kind>skip|full)(?:\s+"(?P<text>[^"]+)")?:\s*(?P<reason>\S.*)$')
QUICK = re.compile(r'^quick\s+"(?P<old>[^"]+)"\s*->\s*"(?P<new>[^"]*)"$')
TIME = re.compile(r'^time\s+"(?P<text>[^"]+)"\s+(?P<amount>\d+(?:\.\d+)?)\s*(?P<unit>s|min|h)$')
UNIT_SECONDS = {"s": 1.0, "min": 60.0, "h": 3600.0}


@dataclass
class Command:
    """One thing to run: a bash line (continuations joined) or a whole Python block."""

    text: str
    line: int
    stated: str | None = None  # the stated time as written in the marker, e.g. "7 min"
    seconds: float | None = None
    skipped: str | None = None  # the reason, when not run

    @property
    def limit(self) -> float:
        return SLACK * (self.seconds if self.seconds is not None else DEFAULT_SECONDS)


@dataclass
class Block:
    """A fenced block and the markers before it."""

    path: Path
    line: int  # the opening fence's line, from 1
    language: str
    body: str
    markers: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path.name}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file with the docs-run markers on the lines right before each."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found, index = [], 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        markers, above = [], index - 1
        while above >= 0 and (marker := MARKER.match(lines[above])):
            markers.insert(0, marker.group(1))
            above -= 1
        end = next((i for i in range(index + 1, len(lines)) if lines[i].startswith("```")), None)
        assert end is not None, f"{path.name}:{index + 1}: a fenced block is never closed"
        found.append(Block(path, index + 1, opening.group(1), "\n".join(lines[index + 1 : end]) + "\n", markers))
        index = end + 1
    return found


def commands(block: Block) -> list[Command]:
    """The block's commands, with its markers applied (CI's quick sizes unless WORKBENCH_DOCS_FULL=1)."""
    body, used = block.body, set()
    whole_skip, line_skips, times = None, [], []
    for marker in block.markers:
        if quick := QUICK.match(marker):
            assert quick["old"] in body, f"{block.name}: the quick marker's {quick['old']!r} is not in the block"
            if not FULL:
                body = body.replace(quick["old"], quick["new"])
        elif skip := SKIP.match(marker):
            reason = skip["reason"] if skip["kind"] == "skip" else f"runs only with WORKBENCH_DOCS_FULL=1: {skip['reason']}"
            if skip["kind"] == "full" and FULL:
                continue
            if skip["text"] is None:
                whole_skip = reason
            else:
                line_skips.append((skip["text"], reason))
        elif stated := TIME.match(marker):
            times.append((stated["text"], f"{stated['amount']} {stated['unit']}", float(stated["amount"]) * UNIT_SECONDS[stated["unit"]]))
        else:
            raise AssertionError(f"{block.name}: unknown docs-run marker {marker!r}")
    written, run = _units(block.body, block.language, block.line + 1), _units(body, block.language, block.line + 1)
    assert [line for line, _ in written] == [line for line, _ in run], f"{block.name}: a quick marker changes the block's lines"
    units = []
    for (line, original), (_, text) in zip(written, run, strict=True):
        unit = Command(text, line, skipped=whole_skip)
        for part, reason in line_skips:
            if part in original:
                unit.skipped = reason
                used.add(("skip", part))
        for part, said, seconds in times:
            if part in original:
                # the doc states the time next to the command (in its comment, or in a Python block's comments), where a reader sees it
                where = original.split("#", 1)[1] if block.language == "bash" and "#" in original else original
                assert said in where, f"{block.name}: the line with {part!r} does not say it takes {said}"
                unit.stated, unit.seconds = said, (unit.seconds or 0.0) + seconds
                used.add(("time", part))
        units.append(unit)
    for part, _ in line_skips:
        assert ("skip", part) in used, f"{block.name}: the skip marker's {part!r} matches no line"
    for part, _, _ in times:
        assert ("time", part) in used, f"{block.name}: the time marker's {part!r} matches no line"
    assert not (line_skips and block.language == "python"), f"{block.name}: a Python block is skipped whole or not at all"
    return units


def _units(body: str, language: str, first: int) -> list[tuple[int, str]]:
    """``(line, text)`` of what runs: the whole Python block, or each bash command (a trailing backslash joins lines)."""
    if language == "python":
        return [(first, body)]
    units, pending, start = [], "", first
    for number, text in enumerate(body.splitlines(), first):
        if not pending:
            start = number
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        if (pending + text).strip():
            units.append((start, pending + text))
        pending = ""
    return units


def all_blocks() -> list[Block]:
    return [block for path in DOCS for block in blocks(path)]


def runnable() -> list:
    params = []
    for block in all_blocks():
        if block.language not in RUN_LANGUAGES:
            continue
        units = commands(block)
        marks = []
        if all(unit.skipped for unit in units):
            marks.append(pytest.mark.skip(reason=f"{block.name}: {units[0].skipped}"))
        elif sum(unit.limit for unit in units if not unit.skipped) > 4 * DEFAULT_SECONDS:
            marks.append(pytest.mark.slow)
        params.append(pytest.param(block, id=block.name, marks=marks))
    return params


def test_every_block_is_tagged_and_every_skip_has_a_reason():
    """An untagged fence would escape the runner; skips must stay few and explained."""
    skipped = []
    for block in all_blocks():
        assert block.language in RUN_LANGUAGES | LISTING_LANGUAGES, f"{block.name}: tag the fence bash, python, text or json"
        if block.language in RUN_LANGUAGES:
            skipped += [(block.name, unit.text.strip(), unit.skipped) for unit in commands(block) if unit.skipped]
        else:
            assert not block.markers, f"{block.name}: docs-run markers on a block that is not run"
    assert all(len(reason) > 10 for _, _, reason in skipped)
    assert len(skipped) <= MAX_SKIPPED, "\n".join(f"{name}: {text[:60]}  ({reason})" for name, text, reason in skipped)


def test_markers_are_parsed_as_documented(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(
        '<!-- docs-run: skip "serve": a server runs until stopped -->\n'
        '<!-- docs-run: quick "--budget 2000" -> "--budget 50" -->\n'
        '<!-- docs-run: time "calibrate" 7 min -->\n'
        "```bash\n"
        "workbench place ffnn --budget 2000 \\\n    --out p.json\n"
        "workbench serve-engine ffnn\n"
        "workbench calibrate ffnn   # about 7 min\n"
        "```\n"
    )
    (block,) = blocks(doc)
    place, serve, calibrate = commands(block)
    assert place.text == f"workbench place ffnn --budget {2000 if FULL else 50}      --out p.json"
    assert (place.line, place.skipped, place.limit) == (5, None, SLACK * DEFAULT_SECONDS)
    assert serve.skipped == "a server runs until stopped"
    assert (calibrate.stated, calibrate.limit) == ("7 min", SLACK * 420)
    text = doc.read_text()
    doc.write_text(text.replace("# about 7 min", "# quick"))
    with pytest.raises(AssertionError, match="does not say it takes 7 min"):
        commands(blocks(doc)[0])
    doc.write_text(text.replace("serve-engine", "info"))
    with pytest.raises(AssertionError, match="matches no line"):
        commands(blocks(doc)[0])


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """One copy of the checkout for every block (numba's compiled cache is then built once)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    copy = tracked_tree(tmp_path_factory.mktemp("checkout"))
    # numba's compiled functions, valid for the copied sources (same size and mtime): without them each session compiles anew
    for cached in [*ROOT.glob("workbench/**/__pycache__/*.nbi"), *ROOT.glob("workbench/**/__pycache__/*.nbc")]:
        (copy / cached.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(cached, copy / cached.relative_to(ROOT))
    shims = copy.parent / "bin"
    shims.mkdir()
    for name, run in (("workbench", f'exec "{sys.executable}" -m workbench "$@"'), ("python", f'exec "{sys.executable}" "$@"')):
        (shims / name).write_text(f"#!/bin/sh\n{run}\n")
        (shims / name).chmod(0o755)
    return copy


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _fingerprint(copy: Path) -> dict[str, str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    return {name: hashlib.sha256((copy / name).read_bytes()).hexdigest() for name in filter(None, listed) if (copy / name).is_file()}


@pytest.mark.parametrize("block", runnable())
def test_documented_block_runs_as_written(block: Block, checkout: Path):
    env = {k: v for k, v in os.environ.items() if k not in ("WORKBENCH_DATASETS", "WORKBENCH_RUNS", "VIRTUAL_ENV")}
    env.update(
        PATH=f"{checkout.parent / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=str(checkout),
        DGLBACKEND="pytorch",
        PLOTLY_RENDERER="json",  # fig.show() prints the figure instead of opening a browser
        MPLBACKEND="Agg",
    )
    before = _fingerprint(checkout)
    for unit in commands(block):
        if unit.skipped:
            continue
        argv = ["bash", "-euo", "pipefail", "-c", unit.text] if block.language == "bash" else [sys.executable, "-c", unit.text]
        began, cpu = time.monotonic(), _children_cpu()
        try:
            out = subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True, timeout=HANG * unit.limit)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{block.path.name}:{unit.line} still ran after {HANG * unit.limit:.0f} s: {unit.text[:200]}")
        seconds, cpu = time.monotonic() - began, _children_cpu() - cpu
        print(f"{block.path.name}:{unit.line}  {seconds:6.1f} s wall {cpu:6.1f} s CPU  {unit.text.strip().splitlines()[0][:90]}")
        assert out.returncode == 0, f"{block.path.name}:{unit.line} exited {out.returncode}: {unit.text}\n{out.stderr[-3000:]}"
        said = f"it states {unit.stated}" if unit.stated else f"it states no time, so {DEFAULT_SECONDS:g} s"
        assert cpu <= unit.limit, f"{block.path.name}:{unit.line} took {cpu:.0f} CPU s; {said}, at most {SLACK:g}x that: {unit.text[:200]}"
    changed = sorted(name for name, digest in _fingerprint(checkout).items() if before.get(name) != digest)
    assert not changed, f"{block.name} rewrote files of the repository: {changed}"
