"""The notebooks' building blocks: comparisons, side-by-side Gantt charts and the compare panel."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import workbench as wb
from workbench.notebook import Comparison, compare_panel, default_methods, gantt_grid, relative_to, scaling_exponents


@pytest.fixture(scope="module")
def comparison() -> Comparison:
    graphs = [wb.bundled_graph("chain_mm_112nodes"), wb.bundled_graph("ffnn_192nodes")]
    return Comparison(graphs, options={"local_search": {"budget": 200}})


def test_table_matches_the_placers_and_relates_each_method_to_the_teacher(comparison):
    table = comparison.run([4, 8], ["critical_path", "round_robin", "local_search"], progress=False)
    assert len(table) == 2 * 2 * 3
    for row in table.itertuples():
        graph = comparison.graphs[row.graph]
        expected = wb.simulate(graph, comparison.placement(row.graph, row.devices, row.method).assignment, row.devices).makespan
        assert row.makespan == pytest.approx(expected)
    teacher = table[table["method"] == "critical_path"]
    assert np.allclose(teacher["vs_critical_path"], 1.0)
    cell = table[(table["graph"] == "ffnn_192nodes") & (table["devices"] == 4)]
    assert cell["lower_bound"].nunique() == 1 and (cell["gap"] >= -1e-9).all()
    assert (cell["makespan"] >= cell["lower_bound"] * (1 - 1e-9)).all()


def test_placements_are_computed_once(comparison, monkeypatch):
    comparison.placement("chain_mm_112nodes", 4, "heft")
    monkeypatch.setattr("workbench.notebook.place", lambda *a, **k: pytest.fail("placed again"))
    comparison.placement("chain_mm_112nodes", 4, "heft")


def test_bad_arguments_name_what_is_wrong(comparison):
    with pytest.raises(ValueError, match="no_such_method"):
        Comparison([wb.bundled_graph("ffnn")], options={"no_such_method": {}})
    with pytest.raises(ValueError, match="unknown graph 'nope'"):
        comparison.placement("nope", 4, "heft")
    with pytest.raises(ValueError, match="budget"):
        Comparison([wb.bundled_graph("ffnn")], options={"heft": {"budget": 3}}).placement("ffnn_192nodes", 4, "heft")


def test_gantt_grid_draws_one_chart_per_method_on_a_shared_time_axis(comparison):
    fig = comparison.gantts("chain_mm_112nodes", 4, ["critical_path", "round_robin", "local_search"], columns=2)
    titles = [a.text for a in fig.layout.annotations]
    assert [t.split(":")[0] for t in titles] == ["critical_path", "round_robin", "local_search"]
    axes = {trace.xaxis for trace in fig.data}
    assert axes == {"x", "x2", "x3"}
    longest = max(comparison.placement("chain_mm_112nodes", 4, m).makespan for m in ("critical_path", "round_robin", "local_search"))
    xaxes = [fig.layout[name] for name in ("xaxis", "xaxis2", "xaxis3")]
    assert all(axis.range[1] == pytest.approx(longest * 1.01) for axis in xaxes)
    assert len({axis.matches for axis in xaxes} - {None}) == 1, "zooming one chart zooms all"
    assert list(fig.layout.yaxis3.tickvals) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="at least one trace"):
        gantt_grid(comparison.graphs["chain_mm_112nodes"], {})


def test_panel_redraws_when_a_widget_changes(comparison):
    panel = compare_panel(comparison, devices=(4, 8), methods=["critical_path", "heft", "round_robin"], selected=["critical_path", "heft"])
    assert list(panel.table["method"]) == ["critical_path", "heft"] and set(panel.table["devices"]) == {4}
    assert len(panel.gantts.layout.yaxis.tickvals) == 4

    panel.devices.value = 8
    assert set(panel.table["devices"]) == {8}
    assert len(panel.gantts.layout.yaxis.tickvals) == 8
    assert "8 devices" in panel.bars.layout.title.text

    panel.methods.value = ("round_robin", "critical_path", "heft")
    assert list(panel.bars.data[0].x) == ["round_robin", "critical_path", "heft"]
    best = panel.table.loc[panel.table["makespan"].idxmin(), "method"]
    assert best in panel.status.value

    panel.graph.value = "ffnn_192nodes"
    assert set(panel.table["graph"]) == {"ffnn_192nodes"}
    assert panel.bars.layout.title.text.startswith("ffnn_192nodes")


def test_panel_reports_a_method_it_cannot_run_and_draws_the_rest(comparison):
    panel = compare_panel(comparison, devices=(4,), methods=["critical_path", "doppler"], options=None)
    if "doppler" in default_methods(comparison.graphs["chain_mm_112nodes"]):
        pytest.skip("a pretrained doppler checkpoint exists for chain_mm")
    assert "doppler skipped" in panel.status.value and "checkpoint" in panel.status.value
    assert list(panel.table["method"]) == ["critical_path"]
    panel.methods.value = ()
    assert "pick at least one method" in panel.status.value


def test_relative_to_divides_by_the_reference_row_with_the_same_keys():
    frame = pd.DataFrame(
        {
            "graph": ["a", "a", "a", "a", "b"],
            "seed": [0, 0, 1, 1, 0],
            "label": ["critical_path", "heft", "critical_path", "heft", "heft"],
            "makespan": [10.0, 5.0, 20.0, 30.0, 7.0],
        }
    )
    ratio = relative_to(frame, "critical_path", by="label", keys=("graph", "seed"))
    assert ratio.iloc[:4].tolist() == [1.0, 0.5, 1.0, 1.5]
    assert np.isnan(ratio.iloc[4]), "no teacher row for graph b"
    with pytest.raises(ValueError, match="several rows per graph"):
        relative_to(frame, "critical_path", by="label", keys=("graph",))


def test_scaling_exponents_recover_a_power_law():
    nodes = np.array([100, 300, 1000, 3000])
    frame = pd.DataFrame(
        {"method": ["linear"] * 4 + ["quadratic"] * 4, "nodes": np.concatenate([nodes, nodes]), "seconds": np.concatenate([2e-4 * nodes, 3e-7 * nodes**2])}
    )
    slopes = scaling_exponents(frame)
    assert slopes["linear"] == pytest.approx(1.0) and slopes["quadratic"] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="two distinct nodes"):
        scaling_exponents(frame[frame["nodes"] == 100])
