"""docs/architecture.md and docs/contracts.md stay true (issue 30 part 8): every claim they make is checked by a test.

:data:`CLAIMS` quotes each claim word for word (whitespace aside) and names the test that fails when it becomes false: one
in this file, or the one in another test file that already checks it. Two tests keep the table honest: every quote is
still in its doc (reword a claim and its row must follow), and every test it names exists. Every code name and path the
two docs write in backticks is checked too (:func:`test_every_name_and_path_the_docs_give_exists`).

A claim that is false today, in a part of issue 30 another branch builds, is an ``xfail(strict=True)`` naming that part:
when the part lands the test passes, strict xfail fails, and the mark comes off.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import functools
import inspect
import re
import subprocess
from pathlib import Path
from typing import NamedTuple

import pytest

from workbench.placers import KINDS, methods
from workbench.runs import GREEDY_COLUMNS, METRIC_COLUMNS, TEXT_COLUMNS, VALUE_COLUMNS

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "workbench"
ARCH, CONTRACTS = "docs/architecture.md", "docs/contracts.md"
THIS = "tests/test_docs_claims.py"


class Claim(NamedTuple):
    doc: str
    quote: str
    test: str
    """``FILE::function`` of the test that checks the claim."""


def here(name: str) -> str:
    return f"{THIS}::{name}"


CLAIMS_TEXT = """
[architecture]
Each layer imports only its own layer and the layers below it
-> tests/test_architecture.py::test_no_module_imports_a_higher_layer

its `LAYER_OF` table mirrors this one
-> tests/test_architecture.py::test_the_layer_table_mirrors_docs_architecture

that no module-level import closes a circle
-> tests/test_architecture.py::test_no_module_level_import_closes_a_circle

the core, the figures and the graph sources never import torch, DGL or Dash (but the torch.fx importers and bundled
models, which wrap it)
-> tests/test_architecture.py::test_lower_layers_never_import_torch_dgl_or_dash

`import workbench` imports nothing heavy
-> tests/test_cli.py::test_import_workbench_stays_light

`DataflowGraph` (immutable, `graph.py`)
-> tests/test_graph.py::test_arrays_are_read_only

every graph obeys the size and cost caps of `graph.py`
-> tests/test_graph_fuzz.py::test_each_mutated_file_loads_into_a_valid_graph_or_is_refused_in_one_line

The backends return a measured `Trace` in the same format inside a `Measurement`
-> tests/test_systems.py::test_executor_runs_each_paper_graph_and_its_trace_obeys_the_model

The simulator, the local executor and the remote engine implement it
-> tests/test_systems.py::test_every_backend_is_the_one_cost_oracle_and_training_adapts_only_functions

`training/oracle.py` only adapts plain functions to it
-> tests/test_systems.py::test_every_backend_is_the_one_cost_oracle_and_training_adapts_only_functions

written through `workbench/runs/`
-> test_every_trainer_writes_its_run_through_workbench_runs

by the trainers behind `workbench train corpus|gate|scorer|pretrained`
-> test_every_trainer_writes_its_run_through_workbench_runs

read through `workbench/runs/` (torch-free
-> test_every_reader_reads_runs_through_workbench_runs

Checkpoint file names all come from `runs.checkpoint_file`
-> test_checkpoint_file_names_come_from_checkpoint_file_alone

Loading never unpickles
-> test_no_module_unpickles_what_it_reads

old `.pt` files are refused unless converted once
-> tests/test_checkpoints.py::test_an_old_checkpoint_is_converted_once_with_the_trust_flag

Training writes a stage's checkpoint before `last`
-> tests/test_checkpoints.py::test_kill_at_a_checkpoint_write_then_resume_keeps_every_stage

(`runs/validate/`, called from `training/resume.py` and the corpus and gate trainers)
-> test_resume_and_the_trainers_check_runs_through_runs_validate

rewritten atomically per cell, read back to resume
-> tests/test_sweeps.py::test_resume_skips_finished_cells_and_reruns_failed_ones

Every file the workbench writes whole goes through `fileio.py`
-> test_every_file_is_written_through_fileio_but_the_growing_ones

Every recorded machine and version comes from `provenance.py`
-> test_machine_and_versions_are_recorded_only_by_provenance

They agree exactly and both reproduce the paper simulator's 168 reference makespans
-> tests/test_sim.py::test_reproduces_the_paper_simulator_exactly

everything but contention
-> tests/test_sim.py::test_fast_engine_refuses_contention

widen the engine-agreement property test in `tests/test_sim.py`
-> tests/test_sim.py::test_engines_agree_and_schedules_are_valid

The kind (`baseline`, `random`, `heuristic` from the literature, `rule` of this workbench's own such as `affinity`,
`search`, `exact`, `learned`)
-> test_the_kinds_are_the_documented_ones_and_one_pass_kinds_start_every_search

the one-pass kinds `heuristic`, `rule` and `baseline` make up the fair baseline `best_constructive` and every
search's starts
-> test_the_kinds_are_the_documented_ones_and_one_pass_kinds_start_every_search

never written out by hand (`tests/test_registry.py` checks)
-> tests/test_registry.py::test_no_hand_written_method_list_remains_outside_the_registry

a method's options are read from its constructor by `placer_options(NAME)`
-> tests/test_registry.py::test_options_are_the_constructor_parameters

then `methods(..., available=True)` (compare's defaults) leaves it out where those modules are missing
-> tests/test_light_install.py::test_every_method_places_or_names_its_extra

it then takes the `ties` option
-> tests/test_ties.py::test_every_list_scheduling_heuristic_takes_ties

the parametrized tests in `tests/test_placers.py` pick it up
-> test_the_placer_tests_are_parametrized_from_the_registry

the core registry never names the learn layer
-> tests/test_registry.py::test_the_learned_methods_register_from_the_learn_layer_without_torch

`register_policy("NAME", "package.module", "Class", "one line")`
-> test_register_policy_takes_the_documented_line

offer it with nothing else touched
-> tests/test_policy_recipe.py::test_a_policy_added_by_one_module_and_one_line_trains_places_and_is_offered_everywhere

resolve names through `make_oracle`
-> tests/test_systems.py::test_one_resolver_builds_every_kind_of_oracle_for_training_and_the_cli

a function in `workbench/viz/` returning a plotly figure (plotly only, no Dash
-> tests/test_architecture.py::test_lower_layers_never_import_torch_dgl_or_dash

one module in `workbench/dashboard/pages/` with `PATH`, `NAME`, `layout(context, jobs, **query)` and
`register_callbacks(app, context, jobs)`, plus one entry in `PAGES`
-> test_every_dashboard_page_has_the_documented_parts

which adds PNG and CSV downloads
-> tests/test_dashboard.py::test_png_and_csv_downloads_of_a_card

`tests/test_architecture.py` holds every module of `workbench/` to 600 lines and every function to 100
-> tests/test_architecture.py::test_no_module_is_over_600_lines_and_no_function_over_100

inside it to the relative form
-> tests/test_architecture.py::test_no_module_inside_the_package_imports_workbench_by_name

The writer's header, every reader and the dashboard's chart choices (`VALUE_COLUMNS`) follow; a numeric column needs
nothing else to be written, read and charted
-> test_a_new_numeric_metrics_column_is_written_read_and_charted

resume refuses a `metrics.csv` header other than the config's
-> tests/test_run_faults.py::test_a_damaged_run_is_refused_naming_the_file_and_field_and_nothing_changes

REINFORCE with one or several rollouts per update
-> test_grouped_rollouts_are_an_option_of_training

JSON and pandas frames
-> tests/test_sim.py::test_trace_json_and_frame_round_trip

`workbench.simulate(graph, assignment, devices, engine, priority)`
-> test_the_trace_json_has_the_documented_keys

`workbench.place(graph, method="NAME")`, `workbench place/compare`, the dashboard, sweeps, benchmarks and
`reproduce` then offer it
-> tests/test_registry.py::test_the_derived_method_lists_follow_the_registry

Write one module with a `LearnedPolicy` subclass (`workbench/learn/policy.py`: `__init__(config)`, `encode(inputs)`,
`play(state, choose, teacher, encoded)` returning `finish_rollout(...)`)
-> test_register_policy_takes_the_documented_line

an external runtime can instead speak the JSON-lines protocol of `workbench serve-engine`
-> tests/test_systems_remote.py::test_round_trip_matches_the_oracle_behind_the_server

A page that outgrows one module splits by feature into sibling modules
-> test_every_dashboard_page_has_the_documented_parts

[contracts]
The data that crosses a layer boundary, each defined once in code
-> test_each_contract_is_defined_where_the_table_says

`library.make_policy(method, config=None)` returns a `torch.nn.Module`
-> test_the_rollout_contract_has_the_documented_signatures

`policy.rollout(graph, devices, mode="sample", epsilon=0.0, generator=None, teacher=False, guide=None,
teacher_rule="critical_path") -> Rollout`
-> test_the_rollout_contract_has_the_documented_signatures

`steps` (decisions made), `step_log_prob` (per step, for discounted returns) and `rule` (the rule pair a gate chose,
else `None`)
-> test_the_rollout_contract_has_the_documented_signatures

reading parses data only and never unpickles, so a checkpoint cannot run code
-> tests/test_checkpoints.py::test_a_pickle_payload_is_refused_without_running

width and edge network ≤ 1024, message-passing steps ≤ 32, head layers ≤ 16 of width ≤ 1024
-> test_the_checkpoint_bounds_are_the_documented_ones

`move_scorer.SCORER_FIELDS`: hidden ≤ 1024, layers ≤ 16
-> test_the_checkpoint_bounds_are_the_documented_ones

may hold at most `checkpoint.MAX_PARAMETERS` (16 M) numbers
-> test_the_checkpoint_bounds_are_the_documented_ones

Files are at most 256 MiB (`MAX_CHECKPOINT_BYTES`) and their JSON header at most 8 MiB (`MAX_HEADER_BYTES`)
-> test_the_checkpoint_bounds_are_the_documented_ones

with `cross_graph` true only when the graphs hold two or more structures
-> tests/test_checkpoint_header.py::test_a_malformed_trained_for_is_refused

every weight stored as float32 or float16 (float64, integers and bfloat16 are refused)
-> tests/test_checkpoint_header.py::test_a_weight_of_another_dtype_shape_or_value_is_refused

so a refused file costs its header, not its size
-> tests/test_checkpoint_routes.py::test_no_crafted_checkpoint_costs_1_s_of_cpu_or_500_mb_or_builds_a_module_before_it_is_refused

which never imports torch (and pandas only when a frame is built), so every trainer and reader uses it
-> tests/test_runs.py::test_the_runs_package_imports_without_pandas

Paths, column names, checkpoint names, the writer, the reader and the lister are the package `workbench/runs/`
-> test_run_file_names_come_from_workbench_runs

no trainer rewrites a table it appends to), and a resumed run first keeps the rows its checkpoint has seen
-> tests/test_runs.py::test_a_table_grows_by_whole_lines_and_a_resume_keeps_what_the_checkpoint_saw

**Checkpoint names** come from one function
-> test_checkpoint_file_names_come_from_checkpoint_file_alone

`RunPaths.selected_checkpoint(stage)` picks `<stage>-best` over `<stage>`
-> tests/test_runs.py::test_the_weights_to_use_are_each_stages_best_else_its_end_else_last

`RunPaths.usable_checkpoints(stages)` (what the dashboard's Compare page offers)
-> tests/test_dashboard.py::test_a_run_two_levels_deep_is_offered_on_compare_with_its_best_weights_and_the_origin_its_header_gives

`runs.list_runs(root)` finds the runs at most `runs.MAX_DEPTH` (5) folders below `root`
-> tests/test_runs.py::test_runs_are_listed_down_to_max_depth_never_inside_a_run_newest_first

The dashboard's Training and Compare pages and `workbench reproduce` list runs with it
-> test_the_pages_and_reproduce_list_runs_with_list_runs

a last line without its newline is ignored (it is being written)
-> tests/test_runs.py::test_read_rows_drops_a_half_written_last_line

a graph path with a comma is one quoted field
-> tests/test_runs.py::test_a_graph_path_with_a_comma_reads_the_same_through_every_reader

Each line is parsed on its own, so a stray quote costs only its line
-> tests/test_runs.py::test_a_stray_quote_costs_only_its_own_row

`tests/test_runs.py` checks what such a file reads as, not how fast
-> tests/test_runs.py::test_a_300000_row_metrics_file_reads_whole_with_its_damaged_lines_reported

A poll reads only the whole lines appended to `metrics.csv` and `greedy.csv` since the last
-> tests/test_runs.py::test_a_followed_table_reads_only_appended_lines_and_whole_again_when_rewritten

costs three `stat` calls per poll
-> tests/test_runs.py::test_a_followed_run_reads_like_read_run_and_a_stopped_run_is_not_read_again

A damaged directory is refused (`RunDamaged`, a `ValueError`: the CLI exits 2) with one line naming the file and the
line or field, and no byte changes
-> tests/test_run_faults.py::test_a_damaged_run_is_refused_naming_the_file_and_field_and_nothing_changes

a kill between the two leaves rows that are replayed
-> tests/test_run_faults.py::test_a_corpus_run_killed_after_its_rows_but_before_its_checkpoint_replays_them_exactly

A `TrainConfig` with a non-finite number (`grad_clip=nan`, `rl_lr_start=inf`) is refused up front, naming the field
-> tests/test_run_faults.py::test_a_config_with_a_non_finite_number_is_refused_naming_the_field

`runs.references(meta)` and `runs.reference(meta, graph)` read both forms
-> tests/test_runs.py::test_references_are_keyed_per_graph_whatever_the_run_wrote

**`metrics.csv`** columns are `runs.METRIC_COLUMNS`: `stage`, `episode`, `graph`, `makespan`, `reward`, `baseline`,
`loss`, `loss_policy`, `loss_entropy`, `loss_imitation`, `teacher_agreement`, `epsilon`, `lr`, `seconds`, `oracle`,
plus `predicted`
-> test_the_run_tables_have_the_documented_columns

**`greedy.csv`** columns are `runs.GREEDY_COLUMNS`: `stage`, `episode`, `graph`, `greedy`, `seconds`
-> test_the_run_tables_have_the_documented_columns

into the one greedy curve the Training page and notebook 03 draw
-> test_the_greedy_curve_is_drawn_from_greedy_evaluations

parameters: `cell` (the cell's key), `graph`, `nodes`, `edges`, `devices`, `method`, `label`, `seed`, `options`
(JSON of the option values) and one `option.NAME` column per option
-> test_the_sweep_table_has_the_documented_columns

A cell whose `status` is `ok` is not run again; a failed one is
-> tests/test_sweeps.py::test_resume_skips_finished_cells_and_reruns_failed_ones

Parquet needs pyarrow, in the `sweeps` extra
-> tests/test_sweeps.py::test_parquet_output_needs_pyarrow_and_says_so

`oracle.measure(graph, assignment, repeats=3, timeout=60.0, trace=False) -> Measurement`: `seconds`
-> test_the_cost_oracle_has_the_documented_signature_and_failures

`float(measurement)` is the reward and raises `MeasurementError` for a failed one
-> test_the_cost_oracle_has_the_documented_signature_and_failures

takes `sim`, `local`, `HOST:PORT` or `module:factory`
-> tests/test_systems.py::test_one_resolver_builds_every_kind_of_oracle_for_training_and_the_cli

one at each evaluation that improved on every earlier one
-> tests/test_anytime.py::test_best_so_far_matches_the_running_minimum_of_every_evaluation

`ops.*` have one entry per op (index = op id), `transfers.*` one per cross-device edge that moved data
-> test_the_trace_json_has_the_documented_keys

`SimResult.to_dict()` wraps a trace with `makespan`, `engine`, `devices` and `priority`
-> test_the_trace_json_has_the_documented_keys

The keys `placement_record` writes first identify it
-> tests/test_placement_files.py::test_contracts_document_the_placement_form

They check the placement against the graph and refuse, in one line naming the file
-> tests/test_placement_files.py::test_load_placement_names_what_is_wrong

`ts` and `dur` are microseconds, from the graph's `time_unit` (`trace_time_scale`)
-> tests/test_traces.py::test_the_time_scale_follows_the_graphs_unit

Each transfer starts a flow
-> tests/test_traces.py::test_simulate_trace_is_trace_event_json_with_a_flow_per_transfer

returns `count` of them from one encoder pass (used when `rollouts_per_update > 1`)
-> tests/test_training.py::test_grouped_updates_use_leave_one_out_baselines_and_resume_between_updates

The trainers write the claim from what they trained on
-> tests/test_checkpoint_header.py::test_the_trainers_record_cannot_claim_cross_graph_for_one_graph

metrics.csv one line per episode, appended and flushed whole
-> tests/test_training.py::test_run_directory_matches_the_contract

a resumed run refuses a checkpoint of another run
-> tests/test_checkpoints.py::test_a_checkpoint_from_another_run_is_refused

The status is checked against the files, not trusted
-> tests/test_run_faults.py::test_a_finished_run_returns_at_once_and_a_status_without_its_files_is_refused

Stale `.tmp-*` files of killed saves are removed on start
-> tests/test_checkpoints.py::test_stale_temporary_files_are_removed_on_start

A stage checkpoint newer than `last` (a kill between the two saves) is handed over first
-> tests/test_checkpoints.py::test_kill_at_a_checkpoint_write_then_resume_keeps_every_stage

a non-finite loss (or an update that failed on non-finite values) ends the run diverged with its row logged last
-> tests/test_run_faults.py::test_a_corpus_run_whose_loss_goes_non_finite_ends_diverged_and_a_rerun_refuses_it

A non-finite or out-of-range learning rate, weight decay, epsilon or clip is refused up front
-> tests/test_run_faults.py::test_a_trainer_config_with_a_non_finite_or_zero_learning_rate_is_refused

On resume the evaluations after the checkpoint are cut off
-> tests/test_training.py::test_greedy_evaluations_survive_a_resume_at_and_after_a_stage_boundary

resume starts one only when no evaluation came before the checkpoint
-> tests/test_training.py::test_a_missing_greedy_csv_is_started_afresh_only_when_no_evaluation_came_before_the_checkpoint

`host`, and `traceback` for failed cells
-> test_the_sweep_table_has_the_documented_columns

Training calls `makespan_of(oracle, graph, assignment)`, which uses it when present
-> tests/test_systems.py::test_every_backend_is_the_one_cost_oracle_and_training_adapts_only_functions

evaluations count from 1 exactly as the placer counts its budget
-> tests/test_anytime.py::test_local_search_records_its_best_so_far_against_the_evaluations_it_counts

`op_names` is `null` for a graph without names
-> test_the_trace_json_has_the_documented_keys

the corpus manifest's `sha256` is the same function
-> test_the_corpus_manifest_hashes_graphs_as_placement_files_do

slices on one thread never overlap
-> tests/test_traces.py::test_simulate_trace_is_trace_event_json_with_a_flow_per_transfer
"""
"""Each claim of the two docs, quoted (wrapped at will: whitespace does not count), under the doc it is in, and after ``->``
the test that checks it: a function of this file, or ``FILE::function``."""


def parse_claims(text: str) -> list[Claim]:
    """The claims of :data:`CLAIMS_TEXT`."""
    claims, doc, quote = [], "", []
    for line in text.splitlines():
        if re.fullmatch(r"\[(\w+)\]", line):
            doc = f"docs/{line[1:-1]}.md"
        elif line.startswith("-> "):
            test = line[3:].strip()
            claims.append(Claim(doc, " ".join(quote), test if "::" in test else here(test)))
            quote = []
        elif line.strip():
            quote.append(line.strip())
    return claims


CLAIMS = parse_claims(CLAIMS_TEXT)


def normalized(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.quote[:60] for c in CLAIMS])
def test_every_claim_is_still_in_its_doc(claim):
    assert normalized(claim.quote) in normalized((ROOT / claim.doc).read_text(encoding="utf-8")), f"{claim.doc} no longer says it"


def test_every_claim_names_a_test_that_exists():
    tests = {}
    for path in {claim.test.partition("::")[0] for claim in CLAIMS}:
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        tests[path] = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    missing = [claim.test for claim in CLAIMS if claim.test.partition("::")[2] not in tests[claim.test.partition("::")[0]]]
    assert not missing, missing


# ------------------------------------------------------------------------------------------- names and paths in the docs
def lazy_table(node: ast.AST) -> bool:
    """``_EXPORTS = {...}``: the public API's table of lazily imported names."""
    return isinstance(node, ast.Assign) and any(getattr(target, "id", None) == "_EXPORTS" for target in node.targets)


@functools.cache
def _index() -> tuple[dict[str, set[str]], dict[str, set[str]], dict[str, list[str]]]:
    """From the package's sources: module → its top-level names (imports and lazy exports included), class → its members,
    class → its bases."""
    names: dict[str, set[str]] = {}
    members: dict[str, set[str]] = {}
    bases: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found = names.setdefault(module, set())
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):  # lazy export tables (``lazy_exports(__name__, {...})``, ``_EXPORTS = {...}``): their keys
            lazy = isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lazy_exports"
            table = node.args[1] if lazy and len(node.args) > 1 else getattr(node, "value", None) if lazy_table(node) else None
            if isinstance(table, ast.Dict):
                found.update(k.value for k in table.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                found.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                found.update(t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name))
            elif isinstance(node, ast.ImportFrom | ast.Import):
                found.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
            if isinstance(node, ast.ClassDef):
                own = members.setdefault(node.name, set())
                bases.setdefault(node.name, []).extend(b.id for b in node.bases if isinstance(b, ast.Name))
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        own.add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        own.add(item.target.id)
                    elif isinstance(item, ast.Assign):
                        own.update(t.id for t in item.targets if isinstance(t, ast.Name))
                    if isinstance(item, ast.FunctionDef) and item.name == "__init__":  # self.x = ... in the constructor
                        own.update(
                            t.attr
                            for t in ast.walk(item)
                            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
                        )
    return names, members, bases


MODULE_ROOTS = {
    "workbench": "workbench",
    "runs": "workbench.runs",
    "runs.validate": "workbench.runs.validate",
    "checkpoint": "workbench.learn.checkpoint",
    "learned_search": "workbench.learn.learned_search",
    "sim": "workbench.sim",
    "viz": "workbench.viz",
    "components": "workbench.dashboard.components",
}
"""How the docs abbreviate the modules they name (``runs.read_rows``, ``checkpoint.MAX_PARAMETERS``)."""


def _has_member(cls: str, member: str, members: dict[str, set[str]], bases: dict[str, list[str]]) -> bool:
    todo, seen = [cls], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in members:
            continue
        seen.add(name)
        if member in members[name]:
            return True
        todo.extend(bases.get(name, []))
    return False


def unknown_names(text: str) -> list[str]:
    """The code names and repository paths in backticks in ``text`` that do not exist: ``runs.X`` / ``Class.member`` /
    ``module.NAME`` (:data:`MODULE_ROOTS`), ``function(...)`` and ``CamelCase`` classes, and paths of the repository
    (``workbench/...``, ``tests/...``, ``*.py``). Words, commands, columns and placeholders are not names."""
    names, members, bases = _index()
    defined = set().union(*names.values(), *members.values())
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    files = sorted(set(tracked) | {parent.as_posix() for f in tracked for parent in Path(f).parents if parent != Path(".")})
    missing = []
    for token in re.findall(r"`([^`\n]+)`", text):
        if re.search(r"[<>*…]|NAME|\.\.\.", token.split("(")[0]):
            continue
        bare = token.split("(")[0].strip()
        if re.fullmatch(r"[\w./-]+\.py|(workbench|tests|docs|notebooks)/[\w./-]*", bare):
            if not any(f == bare.rstrip("/") or f.endswith("/" + bare.rstrip("/")) for f in files):
                missing.append(token)
            continue
        if not re.fullmatch(r"[A-Za-z_][\w.]*", bare):
            continue
        head, _, attr = bare.rpartition(".")
        if head in MODULE_ROOTS:
            if attr not in names.get(MODULE_ROOTS[head], set()) and f"{MODULE_ROOTS[head]}.{attr}" not in names:
                missing.append(token)
        elif head and head[0].isupper() and "." not in head and head in members:
            if not _has_member(head, attr, members, bases):
                missing.append(token)
        elif (
            not head
            and len(attr) > 1
            and not hasattr(builtins, attr)
            and attr not in defined
            and (re.fullmatch(r"[A-Z][a-z]+[A-Z]\w*", attr) or token.startswith(f"{attr}("))
        ):
            missing.append(token)
    return missing


@pytest.mark.parametrize("doc", [ARCH, CONTRACTS])
def test_every_name_and_path_the_docs_give_exists(doc):
    missing = unknown_names((ROOT / doc).read_text(encoding="utf-8"))
    assert not missing, f"{doc} names what the code does not have: {missing}"


def test_the_name_check_finds_what_is_missing():
    text = (
        "`runs.read_rows` `runs.read_rowz` `RunPaths.usable_checkpoints(stages)` `RunPaths.usable(stages)` `CostOracle` "
        "`CostOracel` `make_oracle(spec)` `make_oracel(spec)` `workbench/runs/layout.py` `workbench/runs/nope.py` "
        "`sim/trace.py` `corpus_training.py` `nowhere.py` `checkpoint.MAX_PARAMETERS` `stage` `runs/NAME/` `<stage>.safetensors`"
    )
    assert unknown_names(text) == [
        "runs.read_rowz",
        "RunPaths.usable(stages)",
        "CostOracel",
        "make_oracel(spec)",
        "workbench/runs/nope.py",
        "nowhere.py",
    ]


# ------------------------------------------------------------------------------------------------------- source scans
@functools.cache
def sources(skip: tuple[str, ...] = ()) -> dict[str, ast.Module]:
    """Every module of the package (``workbench/x/y.py`` → its tree), less the files and folders ``skip`` names."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if not name.startswith(skip):
            found[name] = ast.parse(path.read_text(encoding="utf-8"))
    return found


def docstrings(tree: ast.Module) -> set[int]:
    """``id`` of every docstring constant (modules, classes, functions, and the strings that follow an assignment)."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            found.update(id(b.value) for b in body if isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))
    return found


def string_literals(tree: ast.Module, pattern: str) -> list[int]:
    """Lines of the string constants (docstrings aside, f-string parts included) that match ``pattern``."""
    skip = docstrings(tree)
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip and re.search(pattern, node.value)
    ]


def test_checkpoint_file_names_come_from_checkpoint_file_alone():
    """Claimed: "Checkpoint file names all come from `runs.checkpoint_file`": no string names a ``.safetensors`` file (or an old
    pickle ``.pt`` one) but the suffixes' one definition in ``runs/layout.py``; messages may speak of the formats."""
    pattern = r"\.safetensors|^\*?\.pt$"
    found = [f"{name}:{line}" for name, tree in sources(("workbench/runs/layout.py",)).items() for line in string_literals(tree, pattern)]
    assert not found, "name checkpoints with runs.checkpoint_file / RunPaths: " + ", ".join(found)


RUN_FILES = ("config.json", "meta.json", "metrics.csv", "greedy.csv", "placement.json", "trace.json", "best_placement.json", "export.json")
"""The files of a run directory (and of a pretrained export) that only ``workbench/runs/`` should name."""


def run_file_paths(tree: ast.Module) -> list[int]:
    """Lines where a module builds a run file's path by hand: ``folder / "meta.json"``, or a tuple of run file names."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Div)
            and isinstance(node.right, ast.Constant)
            and node.right.value in RUN_FILES
        ):
            found.append(node.lineno)
        elif isinstance(node, ast.Tuple) and sum(isinstance(e, ast.Constant) and e.value in RUN_FILES for e in node.elts) >= 2:
            found.append(node.lineno)
    return found


RUN_FILE_PATHS_PENDING: dict[str, str] = {}
"""Modules that still name run files by hand, and the part of issue 30 that moves them onto ``workbench/runs/``."""


@pytest.mark.parametrize(
    "module",
    ["every other module"] + [pytest.param(m, marks=pytest.mark.xfail(strict=True, reason=r)) for m, r in RUN_FILE_PATHS_PENDING.items()],
)
def test_run_file_names_come_from_workbench_runs(module):
    """Claimed: "Paths, column names, checkpoint names, the writer, the reader and the lister are the package `workbench/runs/`":
    no module outside it builds a run file's path from its name."""
    trees = sources(("workbench/runs/",))
    chosen = (
        {m: t for m, t in trees.items() if m not in RUN_FILE_PATHS_PENDING} if module == "every other module" else {module: trees[module]}
    )
    found = [f"{name}:{line}" for name, tree in chosen.items() for line in run_file_paths(tree)]
    assert not found, "use workbench.runs (RunPaths, read_run, RunWriter) for: " + ", ".join(found)


def test_the_run_file_scan_sees_a_hand_built_path():
    tree = ast.parse('a = run / "meta.json"\nb = run.meta_path\nc = ("config.json", "metrics.csv")\nd = "meta.json" in text\n')
    assert run_file_paths(tree) == [1, 3]


def imports_from(tree: ast.Module, module: str, level: int | None = None) -> set[str]:
    """The names a module imports from ``module`` (relative: ``..runs`` is module ``runs`` at level 2), at any depth."""
    return {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == module and (level is None or node.level == level)
        for alias in node.names
    }


TRAINERS = {
    "workbench/training/rundir.py": "workbench train",
    "workbench/training/corpus_training.py": "workbench train corpus",
    "workbench/training/gate_training.py": "workbench train gate",
    "workbench/training/learned_search.py": "workbench train scorer",
    "workbench/training/pretrained.py": "workbench train pretrained",
}
TRAINERS_PENDING: dict[str, str] = {}


@pytest.mark.parametrize(
    "module",
    [
        pytest.param(m, marks=[pytest.mark.xfail(strict=True, reason=TRAINERS_PENDING[m])] if m in TRAINERS_PENDING else [])
        for m in TRAINERS
    ],
)
def test_every_trainer_writes_its_run_through_workbench_runs(module):
    """Claimed: "written through `workbench/runs/` (...) by `workbench train` (`training/rundir.py`), and by the trainers behind
    `workbench train corpus|gate|scorer|pretrained`": each writes with ``runs.RunWriter`` and its tables with ``runs.CsvLog``,
    and copies no run file by hand."""
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    assert "RunWriter" in imports_from(tree, "runs", 2), f"{TRAINERS[module]} does not write its run with runs.RunWriter"
    assert not run_file_paths(tree), f"{module} names run files by hand"


READERS = {
    "workbench/dashboard/pages/training.py": "the Training page",
    "workbench/dashboard/sources.py": "the Compare page's methods",
    "workbench/dashboard/pages/launch.py": "the Launch page",
    "workbench/dashboard/pages/measured.py": "the Measured page",
    "notebooks/03_three_stages.py": "notebook 03",
    "workbench/training/resume.py": "resume",
    "workbench/sweeps/reproduce.py": "workbench reproduce",
    "workbench/bench/runs.py": "the run-reader benchmark",
    "workbench/training/pretrained.py": "the pretrained export",
}


def test_every_reader_reads_runs_through_workbench_runs():
    """Claimed: "read through `workbench/runs/` (torch-free: one reader, ...) by the dashboard's Training, Compare, Launch and
    Measured pages, the notebooks, resume, `reproduce`, the benchmarks and the pretrained export": each imports the reader,
    and no module outside ``workbench/runs/`` parses a CSV but the two tables that are not runs."""
    for path, who in READERS.items():
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        used = imports_from(tree, "runs", None) | imports_from(tree, "workbench.runs", 0)
        assert used & {"read_run", "read_rows", "read_frame", "read_meta", "try_read_json", "RunFollowers", "list_runs"}, f"{who} ({path})"
    not_runs = {"workbench/sweeps/results.py": "the sweep table", "workbench/bench/placers.py": "the STG optima table"}
    parsers = {"read_csv", "reader", "DictReader"}
    found = [
        f"{name}:{node.lineno}"
        for name, tree in sources(("workbench/runs/", *not_runs)).items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in parsers
    ]
    assert not found, "read run tables with workbench.runs: " + ", ".join(found)


def test_resume_and_the_trainers_check_runs_through_runs_validate():
    """Claimed: "(`runs/validate/`, called from `training/resume.py` and the corpus and gate trainers)"."""
    checks = {
        "training/resume.py": "check_run",
        "training/corpus_training.py": "check_corpus_run",
        "training/gate_training.py": "check_gate_run",
    }
    for path, check in checks.items():
        tree = ast.parse((PACKAGE / path).read_text(encoding="utf-8"))
        assert check in imports_from(tree, "runs.validate", 2), path
        assert any(isinstance(n, ast.Call) and getattr(n.func, "id", None) == check for n in ast.walk(tree)), f"{path} never calls {check}"


def walks(call: ast.Call) -> bool:
    """``os.walk(...)``."""
    return isinstance(call.func, ast.Attribute) and call.func.attr == "walk" and getattr(call.func.value, "id", None) == "os"


def globs_for_runs(call: ast.Call) -> bool:
    """``folder.glob("*/meta.json")`` and the like: a search for the files that make a folder a run."""
    pattern = call.args[0] if call.args else None
    return (
        isinstance(call.func, ast.Attribute)
        and call.func.attr in ("glob", "rglob")
        and isinstance(pattern, ast.Constant)
        and bool(re.search(r"meta\.json|metrics\.csv", str(pattern.value)))
    )


def test_the_pages_and_reproduce_list_runs_with_list_runs():
    """Claimed: "The dashboard's Training and Compare pages and `workbench reproduce` list runs with it": they call ``list_runs``
    (Training through ``DashboardContext.run_keys``), and nothing outside ``workbench/runs/`` walks folders for runs."""
    callers = {
        name
        for name, tree in sources().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "list_runs"
    }
    assert {"workbench/dashboard/context.py", "workbench/dashboard/sources.py", "workbench/sweeps/reproduce.py"} <= callers
    training = (PACKAGE / "dashboard/pages/training.py").read_text(encoding="utf-8") + (
        PACKAGE / "dashboard/pages/training_runs.py"
    ).read_text(encoding="utf-8")
    assert "run_keys(" in training and "list_runs(self.runs_dir)" in (PACKAGE / "dashboard/context.py").read_text(encoding="utf-8")
    walkers = [
        f"{name}:{node.lineno}"
        for name, tree in sources(("workbench/runs/",)).items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (walks(node) or globs_for_runs(node))
    ]
    assert not walkers, "list runs with runs.list_runs: " + ", ".join(walkers)


def test_no_module_unpickles_what_it_reads():
    """Claimed: "Loading never unpickles": ``torch.load`` only in the opt-in reader of old checkpoints (``weights_only=True``), and
    ``pickle`` only to test in memory that an exception can cross to a worker process (``dashboard/work.py``)."""
    allowed = {("workbench/learn/checkpoint.py", "load"), ("workbench/dashboard/work.py", "loads")}
    found = []
    for name, tree in sources().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
                owner, call = node.func.value.id, node.func.attr
                if (owner, call) in {("torch", "load"), ("pickle", "load"), ("pickle", "loads"), ("np", "load"), ("numpy", "load")}:
                    if (name, call) not in allowed:
                        found.append(f"{name}:{node.lineno} {owner}.{call}")
                    elif owner == "torch":
                        assert any(k.arg == "weights_only" and getattr(k.value, "value", None) is True for k in node.keywords), name
    assert not found, found


WRITE_CALLS = {"write_text", "write_bytes", "to_csv", "to_parquet", "write_image", "write_html", "savefig"}
"""File writers of the standard library, pandas, plotly and matplotlib (the package's own ``save`` methods are scanned themselves)."""
GROWING_FILES = {
    "workbench/runs/write.py": "a run's tables: CsvLog appends whole lines",
    "workbench/training/rundir.py": "resume cuts greedy.csv back to the checkpoint",
    "workbench/training/run_setup.py": "resume cuts metrics.csv back to the checkpoint",
    "workbench/systems/calibration.py": "the calibration journal: one line appended per measurement",
    "workbench/dashboard/jobs.py": "a dashboard job's log, the child's stdout",
}
"""The files written in place, not through ``fileio`` (docs/architecture.md: "only growing files are written in place")."""


def in_place_writes(tree: ast.Module) -> list[int]:
    """Lines that write a file other than through ``fileio``: ``open`` for writing, ``Path.write_text`` and the like, and
    ``frame.to_csv(path)``-style calls with a target, outside a ``with atomic_path(...)`` block."""
    atomic = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and any(
            isinstance(item.context_expr, ast.Call) and getattr(item.context_expr.func, "id", None) == "atomic_path" for item in node.items
        ):
            atomic.update(id(n) for n in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or id(node) in atomic:
            continue
        name = getattr(node.func, "attr", getattr(node.func, "id", None))
        if name == "open":
            mode = next((a.value for a in node.args[1 if isinstance(node.func, ast.Name) else 0 :][:1] if isinstance(a, ast.Constant)), "r")
            mode = next((k.value.value for k in node.keywords if k.arg == "mode" and isinstance(k.value, ast.Constant)), mode)
            if not isinstance(mode, str) or set(mode) & set("wax+"):
                found.append(node.lineno)
        elif name in WRITE_CALLS and (node.args or any(k.arg in ("path", "path_or_buf", "file") for k in node.keywords)):
            found.append(node.lineno)
    return sorted(found)


def test_every_file_is_written_through_fileio_but_the_growing_ones():
    """Claimed: "Every file the workbench writes whole goes through `fileio.py` (temporary file, then rename); only growing files
    are written in place": no other module opens a file for writing or saves one outside ``atomic_path``."""
    found = [f"{name}:{line}" for name, tree in sources(("workbench/fileio.py", *GROWING_FILES)).items() for line in in_place_writes(tree)]
    assert not found, "write through workbench.fileio (atomic_write_text, atomic_path): " + ", ".join(found)
    for name in GROWING_FILES:
        assert in_place_writes(ast.parse((ROOT / name).read_text(encoding="utf-8"))), f"{name} no longer writes in place: drop it"


def test_the_write_scan_sees_plain_writes_and_spares_atomic_ones():
    source = (
        "with open(p, 'w') as f: pass\nopen(p)\nPath(p).write_text('x')\ntext = frame.to_csv()\nframe.to_csv(p)\n"
        "with atomic_path(p) as tmp:\n    frame.to_parquet(tmp)\np.open('a')\nos.open(p, os.O_RDONLY)\n"
    )
    assert in_place_writes(ast.parse(source)) == [1, 3, 5, 8]


def test_machine_and_versions_are_recorded_only_by_provenance():
    """Claimed: "Every recorded machine and version comes from `provenance.py`": host names, platform facts, CPU models and package
    versions are read nowhere else."""
    found = []
    for name, tree in sources(("workbench/provenance.py",)).items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("platform", "socket"):
                if node.value.id == "platform" or node.attr in ("gethostname", "getfqdn"):
                    found.append(f"{name}:{node.lineno} {node.value.id}.{node.attr}")
            elif isinstance(node, ast.ImportFrom) and node.module == "importlib.metadata":
                found.append(f"{name}:{node.lineno} importlib.metadata")
        found += [f"{name}:{line} /proc/cpuinfo" for line in string_literals(tree, r"/proc/cpuinfo")]
    assert not found, found


# ------------------------------------------------------------------------------------------------- registry and recipes
def test_the_kinds_are_the_documented_ones_and_one_pass_kinds_start_every_search():
    from workbench.placers.best_constructive import constructive_methods

    assert list(KINDS) == ["baseline", "random", "heuristic", "rule", "search", "exact", "learned"]
    assert sorted(constructive_methods()) == sorted(methods("heuristic", "rule", "baseline"))
    starts = (PACKAGE / "placers" / "local_search.py").read_text(encoding="utf-8")
    assert "constructive_methods(" in starts or "best_constructive" in starts, "local_search's starts are the one-pass methods"


def test_the_placer_tests_are_parametrized_from_the_registry():
    """Claimed: "the parametrized tests in `tests/test_placers.py` pick it up": their method list comes from the registry."""
    source = (ROOT / "tests" / "test_placers.py").read_text(encoding="utf-8")
    assert re.search(r"^CORE_PLACERS = \[name for name, entry in REGISTRY\.items\(\)", source, re.M)
    assert '@pytest.mark.parametrize("method", CORE_PLACERS)' in source


def test_register_policy_takes_the_documented_line():
    from workbench.learn.registry import register_policy

    parameters = inspect.signature(register_policy).parameters
    assert list(parameters)[:4] == ["name", "module", "cls", "description"]
    assert parameters["placer"].default == "LearnedPlacer"
    assert "DopplerPlacer" in (PACKAGE / "learn" / "placers.py").read_text(encoding="utf-8")
    pytest.importorskip("torch")
    from workbench.learn.choice import finish_rollout
    from workbench.learn.policy import LearnedPolicy

    assert LearnedPolicy.__abstractmethods__ == {"encode", "play"}
    assert list(inspect.signature(LearnedPolicy.__init__).parameters) == ["self", "config"]
    assert list(inspect.signature(LearnedPolicy.encode).parameters) == ["self", "inputs"]
    assert list(inspect.signature(LearnedPolicy.play).parameters) == ["self", "state", "choose", "teacher", "encoded"]
    assert callable(finish_rollout)


def test_every_dashboard_page_has_the_documented_parts():
    pytest.importorskip("dash")
    from workbench.dashboard import pages

    modules = {p.stem for p in (PACKAGE / "dashboard" / "pages").glob("*.py")}
    with_path = {
        m for m in modules if re.search(r"^PATH = ", (PACKAGE / "dashboard" / "pages" / f"{m}.py").read_text(encoding="utf-8"), re.M)
    }
    assert {page.__name__.rsplit(".", 1)[1] for page in pages.PAGES} == with_path, "every page module is in PAGES, and only those"
    for page in pages.PAGES:
        assert page.PATH.startswith("/") and page.NAME, page.__name__
        assert list(inspect.signature(page.layout).parameters)[:2] == ["context", "jobs"], page.__name__
        assert list(inspect.signature(page.register_callbacks).parameters) == ["app", "context", "jobs"], page.__name__
    siblings = {"compare": ("compare_choice", "compare_anytime", "compare_highlight"), "training": ("training_runs", "training_poll")}
    for page, parts in siblings.items():
        assert set(parts) <= modules - with_path, f"{page}'s feature modules"
        source = (PACKAGE / "dashboard" / "pages" / f"{page}.py").read_text(encoding="utf-8")
        for part in parts[1:] if page == "compare" else ():
            assert f"register_{part.removeprefix('compare_')}_callbacks(" in source, f"{page} registers {part}'s callbacks"


def test_a_new_numeric_metrics_column_is_written_read_and_charted(tmp_path):
    """Appending a column to METRIC_COLUMNS is all it takes: the charted columns are derived from it, the writer's header is
    it, and a numeric column the reader has never heard of reads as numbers."""
    from workbench.runs import CsvLog, read_frame
    from workbench.training import TrainConfig
    from workbench.training.rundir import RunDirectory

    assert VALUE_COLUMNS == tuple(c for c in METRIC_COLUMNS if c not in TEXT_COLUMNS and c != "episode")
    run = RunDirectory(tmp_path / "run")
    assert run.columns(TrainConfig(("chain_mm",))) == METRIC_COLUMNS
    assert run.columns(TrainConfig(("chain_mm",), stages=("real",), episodes=(1,))) == (*METRIC_COLUMNS, "predicted")
    columns = (*METRIC_COLUMNS, "new_value")
    with CsvLog(tmp_path / "metrics.csv", columns) as log:
        log.start()
        log.append([{"stage": "sim", "episode": e, "graph": "g", "oracle": "sim", "makespan": 2.0, "new_value": e / 2} for e in range(3)])
    frame = read_frame(tmp_path / "metrics.csv")
    assert frame["new_value"].tolist() == [0.0, 0.5, 1.0] and frame["new_value"].dtype.kind == "f"
    dashboard = "".join(p.read_text(encoding="utf-8") for p in (PACKAGE / "dashboard").rglob("*.py"))
    assert "VALUE_COLUMNS" in dashboard, "the Training page's chart choices come from VALUE_COLUMNS"


def test_grouped_rollouts_are_an_option_of_training():
    """Claimed: "REINFORCE with one or several rollouts per update" (the training layer's row)."""
    from workbench.training import TrainConfig

    fields = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    assert fields["rollouts_per_update"] == 1


# --------------------------------------------------------------------------------------------------------- contracts
CONTRACT_HOMES = [
    ("workbench.learn.choice", "Rollout"),
    ("workbench.learn.policy", "LearnedPolicy.rollout"),
    ("workbench.runs.write", "CsvLog"),
    ("workbench.runs.write", "RunWriter"),
    ("workbench.sweeps.results", "ResultsTable"),
    ("workbench.sweeps.grid", "Cell.parameters"),
    ("workbench.systems.oracle", "CostOracle"),
    ("workbench.systems.oracle", "Measurement"),
    ("workbench.systems.oracle", "CallableOracle"),
    ("workbench.systems.oracle", "as_oracle"),
    ("workbench.systems.oracle", "SimulatorOracle"),
    ("workbench.systems.executor", "LocalExecutor"),
    ("workbench.systems.remote.client", "RemoteEngine"),
    ("workbench.systems", "make_oracle"),
    ("workbench.placers.anytime", "BestSoFar"),
    ("workbench.sim.trace", "Trace.to_dict"),
    ("workbench.sim.trace", "Trace.from_dict"),
    ("workbench.placers.placement_file", "placement_record"),
    ("workbench.placers.placement_file", "content_hash"),
    ("workbench.placers.base", "Placement.to_dict"),
    ("workbench.placers.base", "Placement.from_dict"),
    ("workbench.sim.trace_events", "trace_events_json"),
    ("workbench.learn.env", "MakespanFn"),
    ("workbench.learn.checkpoint", "read_checkpoint"),
]
"""Where docs/contracts.md says each contract is defined: (module, name)."""


@pytest.mark.parametrize(("module", "name"), CONTRACT_HOMES, ids=[f"{m}:{n}" for m, n in CONTRACT_HOMES])
def test_each_contract_is_defined_where_the_table_says(module, name):
    if module.startswith("workbench.learn") or module == "workbench.systems.executor":
        pytest.importorskip("torch")
    import importlib

    obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    assert obj is not None
    source = Path(importlib.import_module(module).__file__ or "")
    defined = {
        target.id if isinstance(target, ast.Name) else target.name
        for node in ast.parse(source.read_text(encoding="utf-8")).body
        for target in (
            [node] if isinstance(node, ast.FunctionDef | ast.ClassDef) else getattr(node, "targets", [getattr(node, "target", None)])
        )
        if isinstance(target, ast.Name | ast.FunctionDef | ast.ClassDef)
    }
    assert name.split(".")[0] in defined, f"{name} is not defined in {module} (only imported there, or gone)"


def test_the_rollout_contract_has_the_documented_signatures():
    pytest.importorskip("torch")
    from workbench import learn
    from workbench.learn.choice import Rollout
    from workbench.learn.policy import LearnedPolicy

    def defaults(function) -> dict[str, object]:
        return {n: p.default for n, p in inspect.signature(function).parameters.items()}

    assert list(defaults(learn.make_policy).items()) == [("method", inspect.Parameter.empty), ("config", None)]
    assert list(defaults(learn.load_policy).items())[:2] == [("path", inspect.Parameter.empty), ("map_location", None)]
    assert list(defaults(learn.Guide))[:2] == ["order", "assignment"]
    rollout = defaults(LearnedPolicy.rollout)
    assert rollout == {
        "self": inspect.Parameter.empty,
        "graph": inspect.Parameter.empty,
        "devices": inspect.Parameter.empty,
        "mode": "sample",
        "epsilon": 0.0,
        "generator": None,
        "teacher": False,
        "guide": None,
        "teacher_rule": "critical_path",
    }
    assert list(defaults(LearnedPolicy.rollouts))[:4] == ["self", "graph", "devices", "count"]
    assert list(defaults(LearnedPolicy.save))[:3] == ["self", "path", "extra"]
    documented = ["assignment", "order", "log_prob", "entropy", "imitation_loss", "teacher_agreement", "steps", "step_log_prob", "rule"]
    assert [f.name for f in dataclasses.fields(Rollout)] == documented


def test_the_checkpoint_bounds_are_the_documented_ones():
    pytest.importorskip("torch")
    from workbench.learn.checkpoint import MAX_CHECKPOINT_BYTES, MAX_HEADER_BYTES, MAX_PARAMETERS
    from workbench.learn.move_scorer import SCORER_FIELDS
    from workbench.learn.policy import POLICY_FIELDS

    assert (MAX_CHECKPOINT_BYTES, MAX_HEADER_BYTES, MAX_PARAMETERS) == (256 << 20, 8 << 20, 16 << 20)
    bounds = {
        name: (POLICY_FIELDS[name].high, POLICY_FIELDS[name].items)
        for name in ("width", "edge_hidden", "message_passing_steps", "head_hidden")
    }
    assert bounds == {"width": (1024, 0), "edge_hidden": (1024, 0), "message_passing_steps": (32, 0), "head_hidden": (1024, 16)}
    assert (SCORER_FIELDS["hidden"].high, SCORER_FIELDS["layers"].high) == (1024, 16)


def test_the_run_tables_have_the_documented_columns():
    from workbench.runs import PREDICTED_COLUMN

    assert METRIC_COLUMNS == (
        "stage",
        "episode",
        "graph",
        "makespan",
        "reward",
        "baseline",
        "loss",
        "loss_policy",
        "loss_entropy",
        "loss_imitation",
        "teacher_agreement",
        "epsilon",
        "lr",
        "seconds",
        "oracle",
    )
    assert PREDICTED_COLUMN == "predicted" and TEXT_COLUMNS == ("stage", "graph", "oracle")
    assert GREEDY_COLUMNS == ("stage", "episode", "graph", "greedy", "seconds")


def test_the_greedy_curve_is_drawn_from_greedy_evaluations():
    for path in (PACKAGE / "dashboard" / "pages" / "training.py", ROOT / "notebooks" / "03_three_stages.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert any(isinstance(n, ast.Call) and getattr(n.func, "id", None) == "greedy_evaluations" for n in ast.walk(tree)), path
        assert not string_literals(tree, r"^greedy_selection_"), f"{path} joins the greedy curve itself"


def test_the_sweep_table_has_the_documented_columns():
    from workbench.sweeps.results import METRIC_COLUMNS as RESULT_COLUMNS, PARAMETER_COLUMNS, ResultsTable

    assert PARAMETER_COLUMNS == ("graph", "nodes", "edges", "devices", "method", "label", "seed", "options")
    documented = ("makespan", "lower_bound", "gap", "seconds", "cpu_seconds", "evaluations", "status", "error", "finished", "host")
    assert RESULT_COLUMNS == documented
    assert list(ResultsTable("unused.csv").frame().columns) == ["cell", *PARAMETER_COLUMNS, *documented]
    from workbench.sweeps.grid import Cell, GraphSpec
    from workbench.sweeps.runners import run_cell

    cell = Cell(GraphSpec("chain_mm", "bundled", "chain_mm"), 2, "heft", "heft", 0, (("no_such_option", 1),))
    row = run_cell(cell, GraphSpec("chain_mm", "bundled", "chain_mm").load())
    assert row["status"] == "error" and "no_such_option" in row["error"] and "placers/base.py" in row["traceback"]
    assert set(row) == {"cell", *PARAMETER_COLUMNS, "option.no_such_option", *documented, "traceback"}


def test_the_cost_oracle_has_the_documented_signature_and_failures():
    import workbench as wb
    from workbench.sim import AssignmentError
    from workbench.systems import CostOracle, Measurement, MeasurementError, SimulatorOracle

    parameters = inspect.signature(CostOracle.measure).parameters
    assert {n: p.default for n, p in list(parameters.items())[3:]} == {"repeats": 3, "timeout": 60.0, "trace": False}
    assert [f.name for f in dataclasses.fields(Measurement)] == ["seconds", "samples", "errors", "trace", "oracle", "details"]
    failed = Measurement(float("nan"), errors=("worker died",), oracle="local")
    assert not failed.ok
    with pytest.raises(MeasurementError, match="worker died"):
        float(failed)
    graph = wb.bundled_graph("chain_mm")
    sim = SimulatorOracle(2)
    assert float(sim.measure(graph, [0] * graph.num_nodes)) == sim.makespan(graph, [0] * graph.num_nodes)
    with pytest.raises(AssignmentError):
        sim.measure(graph, [5] * graph.num_nodes)


def test_the_trace_json_has_the_documented_keys():
    import workbench as wb

    graph = wb.bundled_graph("chain_mm")
    assignment = [i % 2 for i in range(graph.num_nodes)]
    result = wb.simulate(graph, assignment, 2)
    data = result.trace.to_dict()
    assert list(data) == ["ops", "transfers", "op_names", "makespan"]
    assert list(data["ops"]) == ["device", "ready", "start", "end"] and all(len(v) == graph.num_nodes for v in data["ops"].values())
    assert list(data["transfers"]) == ["src_op", "dst_op", "src_device", "dst_device", "start", "end"]
    crossing = {(int(s), int(d)) for s, d in zip(graph.src, graph.dst, strict=True) if assignment[s] != assignment[d]}
    moved = set(zip(data["transfers"]["src_op"], data["transfers"]["dst_op"], strict=True))
    assert moved and moved <= crossing
    assert list(result.to_dict()) == ["makespan", "engine", "devices", "priority", "trace"]
    assert list(inspect.signature(wb.simulate).parameters)[:5] == ["graph", "assignment", "devices", "engine", "priority"]
    unnamed = wb.DataflowGraph.from_edges([1.0, 2.0], [(0, 1, 3.0)])
    assert unnamed.names is None and wb.simulate(unnamed, [0, 1], 2).trace.to_dict()["op_names"] is None


def test_the_corpus_manifest_hashes_graphs_as_placement_files_do():
    """Claimed: "`graph_hash`: `content_hash(graph)` (...) the corpus manifest's `sha256` is the same function"."""
    from workbench.corpus import build, load_manifest
    from workbench.placers.placement_file import content_hash, placement_record

    entry = next(e for e in load_manifest() if e.family not in ("zoo", "paper"))
    graph = build(entry)
    assert entry.sha256 == content_hash(graph) == placement_record(graph, [0] * graph.num_nodes, 2)["graph_hash"]
