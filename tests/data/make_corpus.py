"""Write the loader test corpus: ``malformed/`` (files every loader must refuse) and ``bom/``.

Run ``python tests/data/make_corpus.py`` after editing a case; the files and
``malformed/expected.json`` (file -> the reason its error must give, and the
line it must name when there is one) are committed. Each file is tiny; the
cases that need the file system (a FIFO, ``/dev/zero``, a file over the size
cap) are made at test time by ``tests/test_malformed.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
BOM = "\ufeff"

# A valid file of each format; the cases below break one thing at a time.
PAPER = "5\n0, 1,\n0, 0, 1\n1, 2, 2\n10,40\n20,50\n30,60\n"
STG = "2\n0 0 0\n1 3 1 0\n2 4 1 1\n3 0 1 2\n"
GRAPH = {"format": "workbench-graph", "version": 1, "num_nodes": 3, "compute": [1, 2, 3], "src": [0, 1], "dst": [1, 2], "comm": [4, 5]}


def graph_json(**changes) -> str:
    """The valid JSON graph with ``changes`` applied (a value of ``...`` drops the key)."""
    data = {**GRAPH, **changes}
    return json.dumps({k: v for k, v in data.items() if v is not ...})


def paper_costs(first: str) -> str:
    """The valid paper file with the first cost line replaced."""
    return PAPER.replace("10,40", first)


def stg_task1(line: str) -> str:
    """The valid STG file with task 1's line replaced."""
    return STG.replace("1 3 1 0", line)


# name -> (content, reason substring, line named or None)
CASES: dict[str, tuple[str | bytes, str, int | None]] = {
    # ---------------------------------------------------------------- any format
    "paper_empty.txt": ("", "file is empty", None),
    "paper_whitespace_only.txt": (" \n\t\n", "file is empty", None),
    "paper_bom_only.txt": (BOM, "file is empty", None),
    "paper_nul_byte.txt": (b"5\n0, 1,\x00\n", "binary data", 2),
    "paper_latin1.txt": (b"5\n0, 1,\n0\xe9\n", "not UTF-8", 3),
    "stg_empty.stg": ("", "file is empty", None),
    "stg_nul_byte.stg": (b"\x00", "binary data", 1),
    "stg_latin1.stg": (b"2\n0 0 0\n1 \xb2 1 0\n", "not UTF-8", 3),
    "json_empty.json": ("", "file is empty", None),
    "json_two_boms.json": (BOM + BOM + graph_json(), "more than one byte-order mark", 1),
    "paper_two_boms.txt": (BOM + BOM + PAPER, "more than one byte-order mark", 1),
    "json_nul_byte.json": (b'{"format": "workbench-graph"\x00}', "binary data", 1),
    "json_latin1.json": (b'{"format": "workbench-graph", "metadata": {"name": "caf\xe9"}}', "not UTF-8", 1),
    "sniffed_unknown": ("hello world\n", "unknown graph format", 1),
    "sniffed_garbage.dat": ("%%%\n@@@\n", "unknown graph format", 1),
    # ---------------------------------------------------------------- paper text
    "paper_truncated_header.txt": ("5\n0, 1,\n", "header lines", 2),
    "paper_count_word.txt": (PAPER.replace("5\n", "five\n", 1), "total node count", 1),
    "paper_count_arabic_digit.txt": (PAPER.replace("5\n", "\u0665\n", 1), "total node count", 1),
    "paper_count_underscore.txt": ("1_000" + PAPER[1:], "total node count", 1),
    "paper_count_negative.txt": ("-5" + PAPER[1:], "total node count", 1),
    "paper_count_over_cap.txt": ("100000000000000000" + PAPER[1:], "more than the 1,000,000", 1),
    "paper_no_nodes.txt": ("2\n0, 1,\n\n\n", "no node", 1),
    "paper_ids_letter.txt": (PAPER.replace("0, 0, 1", "0, a, 1"), "unexpected character 'a'", 3),
    "paper_ids_arabic_digit.txt": (PAPER.replace("0, 0, 1", "0, \u0661, 1"), "unexpected character", 3),
    "paper_ids_underscore.txt": (PAPER.replace("1, 2, 2", "1, 2, 0_2"), "unexpected character '_'", 4),
    "paper_ids_bom_inside.txt": (PAPER.replace("0, 0, 1", BOM + "0, 0, 1"), "unexpected character", 3),
    "paper_id_25_digits.txt": (PAPER.replace("1, 2, 2", "1, 2, " + "9" * 25), "too large for a node id", 4),
    "paper_edge_unknown_node.txt": (PAPER.replace("1, 2, 2", "1, 2, 7"), "node 7", 4),
    "paper_edge_count_mismatch.txt": (PAPER.replace("1, 2, 2", "1, 2"), "3 edge sources", 4),
    "paper_cycle.txt": ("4\n0, 1,\n0, 1\n1, 0\n1,1\n1,1\n", "cycle", 3),
    "paper_self_loop.txt": (PAPER.replace("1, 2, 2", "1, 2, 1"), "self-loop", 3),
    "paper_too_few_cost_lines.txt": (PAPER.rsplit("30,60\n", 1)[0], "2 cost lines for 3 nodes", 7),
    "paper_too_many_cost_lines.txt": (PAPER + "1,1\n", "more cost lines", 8),
    "paper_cost_one_field.txt": (paper_costs("10"), "compute_cost,communication_cost", 5),
    "paper_cost_word.txt": (paper_costs("ten,40"), "not a number", 5),
    "paper_cost_negative.txt": (paper_costs("-10,40"), "finite number >= 0", 5),
    "paper_cost_nan.txt": (paper_costs("nan,40"), "not a number", 5),
    "paper_cost_inf.txt": (paper_costs("10,inf"), "not a number", 5),
    "paper_cost_1e308.txt": (paper_costs("1e308,40"), "at most 1e+18", 5),
    "paper_cost_overflows_to_inf.txt": (paper_costs("1e999,40"), "at most 1e+18", 5),
    "paper_cost_20_digits.txt": (paper_costs("99999999999999999999,40"), "at most 1e+18", 5),
    "paper_cost_underscore.txt": (paper_costs("1_000,40"), "not a number", 5),
    "paper_cost_arabic_digits.txt": (paper_costs("\u0661\u0660,40"), "not a number", 5),
    "paper_cost_fullwidth_digits.txt": (paper_costs("\uff11\uff10,40"), "not a number", 5),
    "paper_cost_hex.txt": (paper_costs("0x10,40"), "not a number", 5),
    # ----------------------------------------------------------------------- STG
    "stg_count_word.stg": (STG.replace("2\n", "two\n", 1), "task count", 1),
    "stg_count_superscript.stg": (STG.replace("2\n", "\u00b2\n", 1), "task count", 1),
    "stg_count_underscore.stg": ("1_0" + STG[1:], "task count", 1),
    "stg_count_two_numbers.stg": (STG.replace("2\n", "2 3\n", 1), "task count", 1),
    "stg_count_over_cap.stg": ("1000000000000000" + STG[1:], "more than the 1,000,000", 1),
    "stg_too_few_task_lines.stg": (STG.replace("2 4 1 1\n", ""), "3 task lines, expected 4", 4),
    "stg_too_many_task_lines.stg": (STG + "4 0 1 3\n", "more task lines than the 4 expected", 6),
    "stg_duplicate_id.stg": (STG.replace("2 4 1 1", "1 4 1 1"), "duplicate task id 1 (first on line 3)", 4),
    "stg_id_out_of_range.stg": (STG.replace("2 4 1 1", "9 4 1 1"), "task id 9 outside 0..3", 4),
    "stg_short_task_line.stg": (stg_task1("1 3"), "needs 'id cost num_predecessors", 3),
    "stg_pred_out_of_range.stg": (STG.replace("2 4 1 1", "2 4 1 9"), "predecessor 9", 4),
    "stg_pred_count_mismatch.stg": (stg_task1("1 3 2 0"), "declares 2 predecessors but lists 1", 3),
    "stg_negative_cost.stg": (stg_task1("1 -3 1 0"), "negative cost", 3),
    "stg_cost_word.stg": (stg_task1("1 x 1 0"), "'x' is not an integer", 3),
    "stg_cost_decimal.stg": (stg_task1("1 3.5 1 0"), "'3.5' is not an integer", 3),
    "stg_cost_plus_sign.stg": (stg_task1("1 +3 1 0"), "'+3' is not an integer", 3),
    "stg_cost_superscript_digit.stg": (stg_task1("1 \u00b2 1 0"), "is not an integer", 3),
    "stg_cost_arabic_digit.stg": (stg_task1("1 \u0663 1 0"), "is not an integer", 3),
    "stg_cost_underscore.stg": (stg_task1("1 1_000 1 0"), "'1_000' is not an integer", 3),
    "stg_cost_20_digits.stg": (stg_task1("1 99999999999999999999 1 0"), "more than the 1e+18 allowed", 3),
    "stg_cost_40_digits.stg": (stg_task1("1 " + "9" * 40 + " 1 0"), "has 40 digits, too large", 3),
    "stg_dummy_cost.stg": (STG.replace("0 0 0", "0 5 0"), "dummy task 0 must have cost 0", 2),
    "stg_cycle.stg": (stg_task1("1 3 2 0 2"), "cycle", 3),
    "stg_zero_tasks.stg": ("0\n0 0 0\n1 0 1 0\n", "no task to schedule", 1),
    "stg_cycle_through_entry.stg": (STG.replace("0 0 0", "0 0 1 1"), "the dummy entry task 0 lists predecessor 1", 2),
    "stg_self_loop_on_entry.stg": (STG.replace("0 0 0", "0 0 1 0"), "the dummy entry task 0 lists predecessor 0", 2),
    "stg_cycle_through_exit.stg": (STG.replace("2 4 1 1", "2 4 2 1 3"), "task 2 lists the dummy exit task 3", 4),
    "stg_self_loop_on_exit.stg": (STG.replace("3 0 1 2", "3 0 2 2 3"), "task 3 lists the dummy exit task 3", 5),
    "stg_pred_count_over_tasks.stg": (stg_task1("1 3 99 0"), "declares 99 predecessors, more than the 3 other tasks", 3),
    "stg_two_boms.stg": (BOM + BOM + STG, "more than one byte-order mark", 1),
    # ---------------------------------------------------------------------- JSON
    "json_syntax.json": ('{"format": "workbench-graph",', "invalid JSON", 1),
    "json_syntax_line3.json": ('{\n"format": "workbench-graph",\n"compute": [1,, 2]}', "invalid JSON", 3),
    "json_underscore_number.json": (graph_json().replace("[1, 2, 3]", "[1_000, 2, 3]"), "invalid JSON", 1),
    "json_not_object.json": ("[1, 2]", "expected a JSON object", 1),
    "json_foreign.json": ('{"nodes": []}', "not a workbench graph", 1),
    "json_wrong_format_name.json": (graph_json(format="graph"), "not a workbench graph", 1),
    "json_deep_arrays.json": ("[" * 3000 + "]" * 3000, "nested more than 64 levels", None),
    "json_deep_objects.json": ('{"a":' * 3000 + "1" + "}" * 3000, "nested more than 64 levels", None),
    "json_deep_metadata.json": (graph_json(metadata={"x": json.loads("[" * 80 + "]" * 80)}), "nested more than 64 levels", None),
    "json_version_999.json": (graph_json(version=999), "unknown version 999", None),
    "json_version_string.json": (graph_json(version="1"), "unknown version '1'", None),
    "json_version_true.json": (graph_json(version=True), "unknown version True", None),
    "json_unknown_field.json": (graph_json(edges=[[0, 1]]), "unknown field 'edges'", None),
    "json_duplicate_key.json": (graph_json()[:-1] + ', "compute": [1, 2, 3]}', "duplicate key 'compute'", None),
    "json_edge_id_fraction.json": (graph_json(dst=[1.5, 2]), "item 0 is 1.5, not an integer op id", None),
    "json_edge_id_string.json": (graph_json(src=["0", 1]), "holds a non-number '0'", None),
    "json_edge_id_bool.json": (graph_json(src=[True, 1]), "holds a non-number True", None),
    "json_edge_id_1e300.json": (graph_json(dst=[1e300, 2]), "far outside the op ids", None),
    "json_edge_out_of_range.json": (graph_json(dst=[3, 2]), "destination 3", None),
    "json_edge_negative.json": (graph_json(src=[-1, 1]), "source -1", None),
    "json_edge_length_mismatch.json": (graph_json(dst=[1]), "2 edge sources but 1 edge destinations", None),
    "json_self_loop.json": (graph_json(dst=[0, 2]), "self-loop", None),
    "json_cycle.json": (graph_json(src=[0, 1, 2], dst=[1, 2, 0], comm=[1, 1, 1]), "cycle", None),
    "json_comm_count_mismatch.json": (graph_json(comm=[4]), "1 communication costs for 2 edges", None),
    "json_compute_not_list.json": (graph_json(compute="123"), "'compute' must be a list", None),
    "json_src_missing.json": (graph_json(src=...), "'src' must be a list", None),
    "json_compute_string.json": (graph_json(compute=[1, "2", 3]), "non-number '2'", None),
    "json_compute_negative.json": (graph_json(compute=[1, -2, 3]), "item 1 is -2, not a cost", None),
    "json_compute_1e308.json": (graph_json(compute=[1e308, 1e308, 1e308]), "item 0 is 1e+308, not a cost", None),
    "json_compute_1e400.json": (graph_json().replace("[1, 2, 3]", "[1e400, 2, 3]"), "item 0 is inf, not a cost", None),
    "json_compute_nan.json": (graph_json().replace("[1, 2, 3]", "[NaN, 2, 3]"), "NaN is not a JSON number", None),
    "json_comm_infinity.json": (graph_json().replace("[4, 5]", "[Infinity, 5]"), "Infinity is not a JSON number", None),
    "json_comm_20_digits.json": (graph_json(comm=[10**20, 5]), "not a cost in 0..1e+18", None),
    "json_integer_5000_digits.json": (graph_json().replace("[1, 2, 3]", "[" + "9" * 5000 + ", 2, 3]"), "value has 5000 digits", None),
    "json_num_nodes_mismatch.json": (graph_json(num_nodes=4), "num_nodes is 4", None),
    "json_num_nodes_bool.json": (graph_json(compute=[1], src=[], dst=[], comm=[], num_nodes=True), "num_nodes is True", None),
    "json_names_not_strings.json": (graph_json(names=[1, 2, 3]), "'names' must be a list of strings", None),
    "json_names_wrong_length.json": (graph_json(names=["a", "b"]), "2 names for 3 ops", None),
    "json_op_types_object.json": (graph_json(op_types={"a": 1}), "'op_types' must be a list of strings", None),
    "json_metadata_list.json": (graph_json(metadata=[1]), "'metadata' must be an object", None),
    "json_zero_ops.json": (graph_json(num_nodes=0, compute=[], src=[], dst=[], comm=[]), "no op to schedule", None),
    "json_nested_compute.json": (graph_json(compute=[[1], [2], 3]), "holds a non-number [1] (item 0)", None),
}

# Valid files that start with a UTF-8 byte-order mark: each loads as its BOM-less twin.
BOM_FILES = {"paper.txt": PAPER, "graph.stg": STG, "graph.json": graph_json()}


def main() -> None:
    malformed = HERE / "malformed"
    malformed.mkdir(exist_ok=True)
    for old in malformed.iterdir():
        old.unlink()
    expected = {}
    for name, (content, reason, line) in CASES.items():
        (malformed / name).write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        expected[name] = {"reason": reason, "line": line}
    (malformed / "expected.json").write_text(json.dumps(expected, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    bom = HERE / "bom"
    bom.mkdir(exist_ok=True)
    for name, text in BOM_FILES.items():
        (bom / name).write_bytes((BOM + text).encode("utf-8"))
    print(f"{len(CASES)} malformed files in {malformed}, {len(BOM_FILES)} BOM files in {bom}")


if __name__ == "__main__":
    main()
