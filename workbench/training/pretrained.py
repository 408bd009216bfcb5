"""Regenerate ``datasets/pretrained/``: train a policy on each paper graph and ship it with its run's records.

Each graph gets its own run (``RUNS/<graph>``, resumable like any ``workbench
train`` run); its final policy is exported to
``datasets/pretrained/<graph>/<method>.safetensors`` (the stage checkpoint with the
best greedy placement, see :func:`export_policy`). The export is an ordinary run directory
(:mod:`workbench.runs`): the run's ``config.json``, ``meta.json``, ``metrics.csv`` (``greedy.csv`` when it has one)
and ``best/`` (``placement.json`` and its ``trace.json``: the best placement seen in training, often better than
the policy's greedy one), without the training checkpoints, plus the policy and ``export.json``; so every shipped
number can be traced to the episodes that produced it. Usage::

    workbench train pretrained --episodes 150,250 [--graphs ffnn ...] [--runs runs/pretrained] [--set FIELD=VALUE ...]
    workbench train pretrained --export runs/bench-training/doppler/*/seed0   # finished runs made elsewhere
    workbench train pretrained --migrate   # once (issue 30): the shipped folders of the older layout become run directories
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..commandline import OneLineParser
from ..datasets import DATASETS_DIR, PAPER_GRAPHS
from ..learn.learned_search import METHOD as SCORER
from ..runs import (
    ZERO_SHOT_FOLDER,
    CsvLog,
    RunPaths,
    RunWriter,
    checkpoint_file,
    checkpoint_name,
    read_meta,
    read_rows,
    reference as reference_of,
    shipped_training_runs,
    zero_shot_checkpoint,
)
from ..sim import simulate
from .checkpoint import load_checkpoint
from .config import config_from_values, parse_overrides
from .loop import load_graphs, train
from .rundir import RunDirectory

__all__ = ["PRETRAINED_DIR", "export_policy", "migrate_shipped", "summary_table", "main"]

PRETRAINED_DIR = DATASETS_DIR / "pretrained"


def export_policy(run_dir: str | Path, destination: str | Path, library: Any = None) -> Path:
    """Write the run's policy (no optimizer state) to ``destination/<method>.safetensors`` with the run's records.

    Of the run's stage checkpoints (``checkpoints/<stage>.safetensors``, and
    ``<stage>-best.safetensors`` where training kept its best greedy weights) the one whose
    greedy placement is best (mean makespan ÷ critical_path's over the run's
    graphs; ties: the later stage) is exported; ``export.json`` records each
    stage's greedy makespans and the choice.
    """
    if library is None:
        library = importlib.import_module("workbench.learn")
    run, destination = RunDirectory(run_dir), Path(destination)
    meta = read_meta(run.meta_path)
    if meta.get("status") != "finished":
        raise ValueError(f"{run.path} has status {meta.get('status')!r}; only finished runs are exported")
    config = run.existing_config()
    if config is None:
        raise ValueError(f"{run.path} has no config.json; only runs of `workbench train` are exported")
    graphs = load_graphs(config.graphs)
    greedy: dict[str, dict[str, float]] = {}
    chosen, chosen_score, policy = "", float("inf"), None
    checkpoints = {stage: run.stage_checkpoint(stage) for stage in config.stages}
    checkpoints.update({f"{stage}-best": run.best_checkpoint(stage) for stage in config.stages if run.best_checkpoint(stage).exists()})
    for stage, path in checkpoints.items():
        candidate, _ = load_checkpoint(library, path, map_location="cpu")
        with torch.no_grad():
            greedy[stage] = {
                name: simulate(g, candidate.rollout(g, config.devices, mode="greedy").assignment, config.devices).makespan
                for name, g in graphs.items()
            }
        score = float(np.mean([greedy[stage][name] / meta["evaluation"][name]["critical_path"] for name in graphs]))
        if score <= chosen_score:
            chosen, chosen_score, policy = stage, score, candidate
    if policy is None:
        raise ValueError(f"{run.path} holds no stage checkpoint to export")
    summary = {key: meta.get(key) for key in ("command", "stages", "seed", "devices", "reference", "evaluation", "started", "finished")}
    record = {"exported_from": run.checkpoint(chosen).relative_to(run.path).as_posix(), "greedy_by_stage": greedy}
    target = checkpoint_file(destination, meta["method"])
    destination.mkdir(parents=True, exist_ok=True)
    policy.save(target, extra={"run": summary, **record})
    exported = RunWriter(destination)
    exported.copy_records(run)
    exported.write_export(record)
    return target


def migrate_shipped(root: str | Path = PRETRAINED_DIR) -> list[Path]:
    """Bring the shipped folders under ``root`` of the older layout into the run-directory layout; run once (issue 30).

    - A graph's export: its ``best_placement.json`` becomes ``best/placement.json`` (a placement file: identity keys
      added, the assignment unchanged) beside its simulated ``best/trace.json``.
    - ``zero_shot/``: ``meta.json`` is written by :func:`~workbench.training.gate_training.gate_meta` from the gate
      run's ``config.json`` (its ``start_from`` named as the corpus trainer names it now, ``sim-best``) and the policy.
    - ``learned_search/``: ``config.json`` is split out of ``meta.json``, which gets the scorer run's record
      (:func:`~workbench.training.learned_search.scorer_meta`); ``metrics.csv`` gets its ``episode`` column (the epochs
      over the rounds), every other field as it was.

    The policies' files are not touched. Returns the files written; a folder already migrated is left as it is.
    """
    root, written = Path(root), []
    for folder in shipped_training_runs(root):
        written += _migrate_export(folder)
    written += _migrate_zero_shot(root / ZERO_SHOT_FOLDER)
    written += _migrate_scorer(root / SCORER)
    return written


def _migrate_export(folder: Path) -> list[Path]:
    from ..datasets import bundled_graph
    from ..placers.placement_file import placement_record

    run = RunWriter(folder)
    old = run.legacy_best_placement_path
    if not old.is_file():
        return []
    found = json.loads(old.read_text(encoding="utf-8"))
    graph, devices = bundled_graph(found["graph"]), int(found["devices"])
    simulated = simulate(graph, found["assignment"], devices)
    if not np.isclose(simulated.makespan, found["makespan"], rtol=1e-9):
        raise ValueError(f"{old}: makespan {found['makespan']!r}, but its assignment simulates to {simulated.makespan!r}")
    fields = {key: found[key] for key in ("method", "makespan", "order", "stage", "episode") if key in found}
    run.write_best(placement_record(graph, found["assignment"], devices, graph=found["graph"], **fields), simulated.trace.to_json())
    old.unlink()
    return [run.best_placement_path(), run.best_trace_path()]


def _config(kind: type[Any], held: dict[str, Any]) -> Any:
    """The trainer config ``kind`` of the JSON ``held`` (lists back to tuples)."""
    fields: dict[str, Any] = {key: tuple(value) if isinstance(value, list) else value for key, value in held.items()}
    return kind(**fields)


def _migrate_zero_shot(folder: Path) -> list[Path]:
    from ..learn import load_policy
    from .gate_training import GateTrainConfig, gate_meta

    run = RunWriter(folder)
    if read_meta(run.meta_path).get("status") == "finished":
        return []
    held = json.loads(run.config_path.read_text(encoding="utf-8"))
    start = Path(held["start_from"])
    if start == checkpoint_file(start.parent, "best"):  # the corpus trainer's kept Stage II weights, as it named them then
        held["start_from"] = checkpoint_file(start.parent, "sim-best").as_posix()
    config = GateTrainConfig.from_dict(held, str(run.config_path))
    command = "workbench train gate --out runs/gate-s2 --start-from " + config.start_from
    meta = {**gate_meta(config, load_policy(zero_shot_checkpoint(folder.parent)).method, command=command), "status": "finished"}
    run.write_config(held)
    run.write_meta(meta)
    return [run.config_path, run.meta_path]


def _migrate_scorer(folder: Path) -> list[Path]:
    from .learned_search import METRICS as SCORER_METRICS, ScorerTrainConfig, scorer_meta

    run = RunWriter(folder)
    held = read_meta(run.meta_path)
    if held.get("status") == "finished":
        return []
    config = _config(ScorerTrainConfig, held.pop("config"))
    run.write_config(dataclasses.asdict(config))
    rows = [{"episode": (int(row["round"]) - 1) * config.epochs + int(row["epoch"]), **row} for row in read_rows(run.metrics_path)]
    CsvLog(run.metrics_path, SCORER_METRICS).write(rows)
    run.write_meta({**scorer_meta(config, held["command"]), **held, "status": "finished"})
    return [run.config_path, run.metrics_path, run.meta_path]


def _cell(value: float, critical_path: float) -> str:
    return f"{value / 1e10:.1f} ({value / critical_path:.3f}×)"


def summary_table(folder: str | Path = PRETRAINED_DIR) -> str:
    """A markdown table of the shipped policies: budget, wall time, greedy makespan per stage, beside the heuristics (÷ 1e10)."""
    lines = [
        "| graph | episodes (il+sim) | training wall time | critical_path | best heuristic | greedy after each stage | shipped "
        "| best of greedy + K samples (evaluated policy) | best seen in training |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in map(RunPaths, shipped_training_runs(folder)):
        meta, rows = read_meta(run.meta_path), read_rows(run.metrics_path)
        record = json.loads(run.export_path.read_text(encoding="utf-8"))
        name = run.path.name
        found, reference = meta["evaluation"][name], reference_of(meta, name)
        budget = "+".join(str(sum(r["stage"] == s for r in rows)) for s in meta["stages"])
        critical_path = found["critical_path"]
        by_stage = ", ".join(f"{stage} {_cell(values[name], critical_path)}" for stage, values in record["greedy_by_stage"].items())
        lines.append(
            f"| {name} | {budget} | {float(rows[-1]['seconds']) / 60:.1f} min | {found['critical_path'] / 1e10:.1f} | "
            f"{reference['best_heuristic'] / 1e10:.1f} ({reference['best_heuristic_method']}) | {by_stage} | "
            f"{checkpoint_name(record['exported_from'])} | {_cell(found['search'], critical_path)}, K={found['search_samples']} | "
            f"{_cell(found['best_seen'], critical_path)} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, prog: str = "workbench train pretrained") -> int:
    """``workbench train pretrained [--export RUN_DIR ... | --table]``: train, export or list the shipped paper-graph policies."""
    parser = OneLineParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--graphs", nargs="+", default=list(PAPER_GRAPHS), help="paper graphs (default: all four)")
    parser.add_argument("--method", default="doppler")
    parser.add_argument("--stages", default="il,sim")
    parser.add_argument("--episodes", default="150,250", help="episodes per stage (default 150,250)")
    parser.add_argument("--devices", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rl-mode", default="epsilon", choices=("epsilon", "sample"), help="TrainConfig.rl_mode of the RL stages")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="any other TrainConfig field (repeatable)")
    parser.add_argument("--export", nargs="+", metavar="RUN_DIR", help="export these finished single-graph runs instead of training")
    parser.add_argument("--runs", default="runs/pretrained", help="where the runs go (resumable)")
    parser.add_argument("--to", default=str(PRETRAINED_DIR), help="where the exported policies go")
    parser.add_argument("--table", action="store_true", help="print the markdown summary of the policies in --to, then exit")
    parser.add_argument("--migrate", action="store_true", help="make the older folders in --to run directories, then exit")
    args = parser.parse_args(argv)
    if args.migrate:
        for path in migrate_shipped(args.to):
            print(f"wrote {path}")
        return 0
    if args.table:
        print(summary_table(args.to))
        return 0
    if args.export:
        for run_dir in args.export:
            config = RunDirectory(run_dir).existing_config()
            if config is None or len(config.graphs) != 1:
                parser.error(f"--export {run_dir}: not a single-graph run directory")
            graph = load_graphs(config.graphs)
            print(f"{run_dir} -> {export_policy(run_dir, Path(args.to) / next(iter(graph)))}")
        return 0
    try:
        overrides = parse_overrides(args.set)
    except ValueError as exc:
        parser.error(str(exc))
    for graph in args.graphs:
        config = config_from_values(
            {
                "graphs": (graph,),
                "devices": args.devices,
                "method": args.method,
                "stages": tuple(args.stages.split(",")),
                "episodes": tuple(int(e) for e in args.episodes.split(",")),
                "seed": args.seed,
                "rl_mode": args.rl_mode,
                **overrides,
            }
        )
        out = Path(args.runs) / graph
        command = shlex.join([*prog.split(), *(argv if argv is not None else sys.argv[1:])])
        result = train(config, out, command=command)
        if result.status != "finished":
            print(f"{graph}: {result.status} after {result.episodes} episodes; rerun to resume", file=sys.stderr)
            return 130
        target = export_policy(out, Path(args.to) / graph)
        found = result.evaluation[graph]
        print(
            f"{graph}: {target}  greedy {found['greedy']:.6g}  best of {found['search_samples']} {found['search']:.6g}  critical_path "
            f"{found['critical_path']:.6g}"
        )
    return 0
