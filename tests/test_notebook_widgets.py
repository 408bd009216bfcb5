"""The notebooks' building blocks: comparisons, side-by-side Gantt charts and the compare panel."""

from __future__ import annotations

import base64

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from hypothesis import given, settings, strategies as st

import workbench as wb
from workbench.notebook import (
    HEURISTICS,
    SEARCH,
    Comparison,
    compare_panel,
    default_methods,
    gantt_grid,
    moved_ops,
    placement_changes,
    relative_to,
    scaling_exponents,
    seconds_oracle,
    stage_placements,
)


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
    assert list(panel.bars.data[0].y) == ["round_robin", "critical_path", "heft"]  # horizontal bars: methods on y
    best = panel.table.loc[panel.table["makespan"].idxmin(), "method"]
    assert best in panel.status.value

    panel.graph.value = "ffnn_192nodes"
    assert set(panel.table["graph"]) == {"ffnn_192nodes"}
    assert panel.bars.layout.title.text.startswith("ffnn_192nodes")


PLOTLY_MIME = "application/vnd.plotly.v1+json"


def _decoded(value):
    """plotly's JSON with its base64 arrays (``{"dtype", "bdata"}``) back as numpy arrays."""
    if isinstance(value, dict) and set(value) >= {"dtype", "bdata"}:
        array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        return array.reshape(value["shape"]) if "shape" in value else array
    if isinstance(value, dict):
        return {k: _decoded(v) for k, v in value.items()}
    return [_decoded(v) for v in value] if isinstance(value, list) else value


def _shown(output) -> go.Figure:
    """The figure an ``Output`` widget of the panel shows (what the notebook draws, not the panel's attributes)."""
    [item] = output.outputs
    return go.Figure(_decoded(item["data"][PLOTLY_MIME]))


def test_the_panels_shown_figures_change_with_the_widgets(comparison):
    """What the notebook displays (the Output widgets and the table widget) follows the controls, not only the attributes."""
    panel = compare_panel(comparison, devices=(4, 8), methods=["critical_path", "heft", "round_robin"], selected=["critical_path", "heft"])
    bars_output = panel.bars_output
    assert list(_shown(bars_output).data[0].y) == ["critical_path", "heft"] and "chain_mm_112nodes" in _shown(bars_output).layout.title.text
    before = list(_shown(bars_output).data[0].x)
    panel.graph.value = "ffnn_192nodes"
    assert panel.bars_output is bars_output  # redrawn in place, not replaced by a widget nobody displays
    shown = _shown(bars_output)
    assert shown.layout.title.text.startswith("ffnn_192nodes") and list(shown.data[0].x) != before
    assert list(shown.data[0].x) == pytest.approx([comparison.placement("ffnn_192nodes", 4, m).makespan for m in ("critical_path", "heft")])
    panel.devices.value = 8  # the charts follow the device count, not only the table
    assert len(_shown(panel.gantts_output).layout.yaxis.tickvals) == 8 and "ffnn_192nodes" in panel.table_widget.value
    assert "8 devices" in _shown(panel.bars_output).layout.title.text
    panel.methods.value = ("round_robin",)
    assert list(_shown(panel.bars_output).data[0].y) == ["round_robin"]
    assert sum(1 for t in _shown(panel.gantts_output).data if t.type == "bar" and t.customdata is not None) >= 1
    panel.methods.value = ()
    assert panel.bars_output.outputs == () and panel.gantts_output.outputs == () and panel.table_widget.value == ""


def test_the_panel_uses_core_widgets_only():
    """plotly's FigureWidget is an anywidget, which JupyterLab failed to restore on reopening ("Failed to initialize model")."""
    import ipywidgets

    panel = compare_panel([wb.bundled_graph("chain_mm_112nodes")], devices=(4,), methods=["critical_path"])
    stack, seen = [panel.widget], []
    while stack:
        widget = stack.pop()
        seen.append(widget)
        stack.extend(getattr(widget, "children", ()))
    assert all(w._model_module == "@jupyter-widgets/controls" or isinstance(w, ipywidgets.Output) for w in seen), {
        type(w).__name__ for w in seen
    }


def test_the_panels_output_carries_a_static_copy_for_viewers_without_widgets(comparison, monkeypatch):
    import plotly.io as pio
    from plotly.io.base_renderers import MimetypeRenderer

    from workbench.viz.export import PNG_RENDERER

    class FakePng(MimetypeRenderer):  # what static_fallbacks() registers, without starting chromium
        def to_mimebundle(self, fig_dict):
            return {"image/png": base64.b64encode(b"png").decode()}

    pio.renderers[PNG_RENDERER] = FakePng()
    monkeypatch.setattr(pio.renderers, "default", f"plotly_mimetype+{PNG_RENDERER}")
    panel = compare_panel(comparison, devices=(4, 8), methods=["critical_path", "heft"])
    bundle = panel._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == panel.widget.model_id
    static = bundle["text/html"]
    assert static.count('<img src="data:image/png;base64,') == 2, "the bars and the Gantt charts"
    assert 'alt="chain_mm_112nodes on 4 devices"' in static
    assert "critical_path" in static and "<table" in static and "<script" not in static
    assert "chain_mm_112nodes on 4 devices" in bundle["text/plain"]
    for output in (panel.bars_output, panel.gantts_output):
        assert output.outputs[0]["data"]["image/png"], "the PNG rides along inside the widget too (classic notebook, saved state)"


def test_the_gantt_grid_lays_out_without_overlap(comparison):
    """Each chart's band of the figure's height holds its device rows; titles sit in the gap above their own chart."""
    methods = ["critical_path", "round_robin", "heft", "local_search"]
    for devices in (4, 8):
        fig = comparison.gantts("chain_mm_112nodes", devices, methods, columns=2)
        plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
        bands = {}
        for index in range(1, 5):
            y, x = fig.layout[f"yaxis{index if index > 1 else ''}"], fig.layout[f"xaxis{index if index > 1 else ''}"]
            bands[index] = (y.domain, x.domain)
            assert (y.domain[1] - y.domain[0]) * plot_px / devices >= 36, "room for a two-line device label per row"
        for a in range(1, 5):
            for b in range(a + 1, 5):
                (ya, xa), (yb, xb) = bands[a], bands[b]
                overlap_y = min(ya[1], yb[1]) - max(ya[0], yb[0])
                overlap_x = min(xa[1], xb[1]) - max(xa[0], xb[0])
                assert overlap_y < 0 or overlap_x < 0, f"charts {a} and {b} overlap"
        for index, annotation in enumerate(fig.layout.annotations, start=1):
            (y0, y1), (x0, x1) = bands[index]
            assert annotation.text.startswith(methods[index - 1]) and x0 <= annotation.x <= x1
            assert annotation.y == pytest.approx(y1) and annotation.yanchor == "bottom"
            above = [band[0][0] for band in bands.values() if band[0][0] > y1 + 1e-9]
            room = ((min(above) if above else 1 + fig.layout.margin.t / plot_px) - y1) * plot_px
            assert room >= 40, f"the title of {methods[index - 1]} has {room:.0f} px above its chart"


def test_learned_methods_are_offered_where_a_checkpoint_ships(tmp_path, monkeypatch):
    graph = wb.bundled_graph("ffnn")
    monkeypatch.setattr("workbench.datasets.DATASETS_DIR", tmp_path)
    assert default_methods(graph) == [*HEURISTICS, *SEARCH]
    (tmp_path / "pretrained" / graph.name).mkdir(parents=True)
    (tmp_path / "pretrained" / graph.name / "gdp.safetensors").touch()
    assert default_methods(graph) == [*HEURISTICS, *SEARCH, "gdp"]
    (tmp_path / "pretrained" / graph.name / "meta.json").write_text('{"devices": 4}')
    assert default_methods(graph, 4) == [*HEURISTICS, *SEARCH, "gdp"] and default_methods(graph, 8) == [*HEURISTICS, *SEARCH]


def test_panel_reports_a_method_it_cannot_run_and_draws_the_rest(comparison, tmp_path, monkeypatch):
    monkeypatch.setattr("workbench.datasets.DATASETS_DIR", tmp_path)  # no pretrained checkpoints at all
    fresh = Comparison([comparison.graphs["chain_mm_112nodes"]])
    panel = compare_panel(fresh, devices=(4,), methods=["critical_path", "doppler"])
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
        {
            "method": ["linear"] * 4 + ["quadratic"] * 4,
            "nodes": np.concatenate([nodes, nodes]),
            "seconds": np.concatenate([2e-4 * nodes, 3e-7 * nodes**2]),
        }
    )
    slopes = scaling_exponents(frame)
    assert slopes["linear"] == pytest.approx(1.0) and slopes["quadratic"] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="two distinct nodes"):
        scaling_exponents(frame[frame["nodes"] == 100])


@given(st.data())
@settings(max_examples=60, deadline=None)
def test_moved_ops_ignores_device_names_and_is_symmetric(data):
    devices = data.draw(st.integers(1, 6))
    n = data.draw(st.integers(0, 40))
    before = np.array(data.draw(st.lists(st.integers(0, devices - 1), min_size=n, max_size=n)), dtype=np.int64)
    after = np.array(data.draw(st.lists(st.integers(0, devices - 1), min_size=n, max_size=n)), dtype=np.int64)
    renamed = np.array(data.draw(st.permutations(range(devices))))[before]
    assert moved_ops(before, renamed, devices) == 0
    moved = moved_ops(before, after, devices)
    assert moved == moved_ops(after, before, devices)
    assert 0 <= moved <= int((before != after).sum())


def test_placement_changes_counts_moves_between_consecutive_placements():
    placements = {"teacher": [0, 0, 1, 1], "stage I": [1, 1, 0, 0], "stage II": [1, 1, 0, 2]}
    changes = placement_changes(placements, devices=3)
    assert changes[["from", "to"]].values.tolist() == [["teacher", "stage I"], ["stage I", "stage II"]]
    assert changes["moved"].tolist() == [0, 1] and changes["moved_same_ids"].tolist() == [4, 1]
    with pytest.raises(ValueError, match="differ in length"):
        moved_ops([0, 1], [0], 2)
    with pytest.raises(ValueError, match="0..1"):
        moved_ops([0, 2], [0, 1], 2)


def test_seconds_oracle_hands_seconds_to_training_and_refuses_failed_measurements():
    from workbench.systems import Measurement

    class Backend:
        def __init__(self, result):
            self.result, self.calls = result, []

        def measure(self, graph, assignment, repeats, timeout):
            self.calls.append((repeats, timeout))
            return self.result

    backend = Backend(Measurement(seconds=0.25, samples=(0.25,), oracle="local"))
    assert seconds_oracle(backend, repeats=2, timeout=5.0)(None, np.zeros(3)) == 0.25
    assert backend.calls == [(2, 5.0)]
    failing = Backend(Measurement(seconds=float("nan"), errors=("worker 2 ran out of memory",), oracle="local"))
    with pytest.raises(RuntimeError, match="local could not measure the placement: worker 2 ran out of memory"):
        seconds_oracle(failing)(None, np.zeros(3))


@pytest.mark.slow
def test_stage_placements_place_with_each_stage_checkpoint(tmp_path):
    from workbench.training import TrainConfig, train

    graph = wb.bundled_graph("chain_mm_112nodes")
    config = TrainConfig(graphs=("chain_mm_112nodes",), stages=("il", "sim"), episodes=(2, 2), search_samples=0, greedy_every=1)
    run = train(config, tmp_path / "run", progress=False)
    placements = stage_placements(run.run_dir, graph)
    assert list(placements) == ["il", "sim", "sim-best"]
    assert placements["sim-best"].makespan <= min(placements["il"].makespan, placements["sim"].makespan)  # Stage II's start and end compete
    for stage, placement in placements.items():
        assert placement.details["checkpoint"].endswith(f"{stage}.safetensors")
        assert placement.makespan == wb.simulate(graph, placement.assignment, 4).makespan
    with pytest.raises(ValueError, match="not a training run directory"):
        stage_placements(tmp_path, graph)
