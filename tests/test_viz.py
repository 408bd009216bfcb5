"""workbench.viz: plotly-only figures (no Dash), trace-viewer timelines, units, training curves."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import workbench as wb
from tests.conftest import small_dag
from workbench import viz
from workbench.runs import GREEDY_PERIODIC

NO_DASH = textwrap.dedent(
    """
    import sys
    class NoDash:
        def find_spec(self, name, path=None, target=None):
            if name == "dash" or name.startswith("dash."):
                raise ImportError("dash is blocked")
    sys.meta_path.insert(0, NoDash())
    """
)


def without_dash(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", NO_DASH + textwrap.dedent(code)], capture_output=True, text=True, timeout=120)


def test_notebook_and_viz_import_and_draw_without_dash():
    done = without_dash(
        """
        import workbench as wb, workbench.notebook, workbench.viz as viz
        from workbench.runs import read_run  # notebooks 03 and 04 read runs with it
        graph = wb.bundled_graph("chain_mm")
        trace = wb.simulate(graph, [i % 2 for i in range(graph.num_nodes)], 2).trace
        viz.gantt_figure(graph, trace, critical_path=True)
        assert "dash" not in sys.modules
        """
    )
    assert done.returncode == 0, done.stderr


def test_blocking_dash_really_blocks_it():
    done = without_dash("from workbench.dashboard import create_app")
    assert done.returncode != 0 and "dash is blocked" in done.stderr


def test_trace_critical_path_ends_at_the_makespan_and_chains_without_gaps():
    graph = wb.bundled_graph("chain_mm")
    placement = wb.place(graph, "heft", 4)
    trace = wb.simulate(graph, placement.assignment, 4).trace
    path = viz.trace_critical_path(graph, trace)
    assert trace.end[path[-1]] == trace.makespan
    assert trace.start[path[0]] == 0.0 or trace.ready[path[0]] == 0.0
    edges = set(zip(graph.src.tolist(), graph.dst.tolist(), strict=False))
    for a, b in zip(path, path[1:], strict=False):
        same_device_next = trace.device[a] == trace.device[b] and trace.end[a] <= trace.start[b]
        assert (a, b) in edges or same_device_next
        assert trace.end[a] <= trace.start[b] + 1e-9
    durations = sum(trace.end[o] - trace.start[o] for o in path)
    assert durations <= trace.makespan + 1e-6


def test_critical_path_of_a_chain_on_one_device_is_the_chain():
    graph = small_dag("chain")
    trace = wb.simulate(graph, [0, 0, 0, 0], 1).trace
    assert viz.trace_critical_path(graph, trace) == [0, 1, 2, 3]
    split = wb.simulate(graph, [0, 1, 0, 1], 2).trace
    assert viz.trace_critical_path(graph, split) == [0, 1, 2, 3]


def test_utilisation_track_integrates_to_each_devices_busy_time():
    graph = wb.bundled_graph("ffnn")
    trace = wb.simulate(graph, np.arange(graph.num_nodes) % 3, 3).trace
    use = viz.utilisation_frame(trace, 3, bins=50)
    width = trace.makespan / 50
    for d in range(3):
        busy = (trace.end - trace.start)[trace.device == d].sum()
        assert use.loc[use["device"] == d, "busy"].sum() * width == pytest.approx(busy, rel=1e-6)
    assert use["busy"].between(0, 1).all()


def test_find_ops_by_id_or_name():
    graph = wb.bundled_graph("chain_mm")
    assert viz.find_ops(graph, graph.num_nodes, "3") == [3]
    assert viz.find_ops(graph, graph.num_nodes, str(graph.num_nodes)) == []
    name = viz.op_names(graph, graph.num_nodes)[5]
    assert 5 in viz.find_ops(graph, graph.num_nodes, name.upper())


def test_times_are_written_in_the_graphs_unit_without_si_suffixes():
    paper = wb.bundled_graph("ffnn")
    assert viz.format_time(8.41823e11, paper) == "8.41823e11 (84.1823 ÷1e10)"
    assert "paper" in viz.time_axis(paper)["title"] and viz.time_axis(paper)["exponentformat"] == "power"
    assert viz.format_time(0.5, wb.DataflowGraph.from_edges([1.0], [], metadata={"time_unit": "s"})) == "0.5 s"
    fig = viz.gantt_figure(paper, wb.simulate(paper, [0] * paper.num_nodes, 1).trace)
    assert "paper units" in fig.layout.xaxis2.title.text and fig.layout.xaxis.exponentformat == "power"


def test_gantt_transfers_point_from_sender_to_receiver():
    graph = small_dag("diamond")
    trace = wb.simulate(graph, [0, 1, 0, 1], 2).trace
    arrows = next(t for t in viz.gantt_figure(graph, trace).data if t.name.endswith("transfers"))
    symbols = list(arrows.marker.symbol)
    for k in range(trace.transfer_start.size):
        assert (arrows.y[3 * k], arrows.y[3 * k + 1]) == (trace.transfer_src_device[k], trace.transfer_dst_device[k])
        assert symbols[3 * k + 1] == "arrow" and arrows.marker.angleref == "previous"


def test_stage_three_gets_its_own_axis_and_greedy_points_are_drawn():
    frame = pd.DataFrame(
        {
            "stage": ["il"] * 5 + ["sim"] * 20 + ["real"] * 5,
            "episode": range(30),
            "makespan": [1e13] * 25 + [0.4] * 5,
            "seconds": np.arange(30.0),
        }
    )
    periodic = GREEDY_PERIODIC
    greedy = {
        "run": pd.DataFrame(
            {
                "episode": [10, 20, 5, 25, 28],
                "seconds": [10.0, 20.0, 5.0, 25.0, 28.0],
                "makespan": [9e12, 8e12, 9.5e12, 0.5, 0.3],
                "stage": ["sim", "sim", "sim", "real", "real"],
                "what": ["greedy, kept Stage II weights", periodic, periodic, periodic, periodic],
            }
        )
    }
    fig = viz.training_curves({"run": frame}, greedy=greedy, x="seconds")
    real = [t for t in fig.data if t.yaxis == "y2"]
    assert (
        real and all(max(t.y) < 1 for t in real) and all(min(t.y) > 1e12 for t in fig.data if t.yaxis == "y" and t.name.startswith("run"))
    )
    assert fig.layout.yaxis2.overlaying == "y" and "s" in fig.layout.yaxis2.title.text
    assert any(t.name == "run: greedy, kept Stage II weights" and list(t.y) == [9e12] and t.mode == "markers" for t in fig.data)
    line = next(t for t in fig.data if t.name == f"run: {periodic}")
    assert list(line.x) == [5.0, 20.0] and list(line.y) == [9.5e12, 8e12] and line.mode == "lines+markers"  # in time order
    assert next(t for t in fig.data if t.name == f"run: {periodic} (Stage III, s)").yaxis == "y2"
    assert fig.layout.xaxis.title.text.startswith("training wall-clock")


def test_stage_labels_are_short_where_a_stage_is_narrow_and_shading_is_per_run():
    long = pd.DataFrame({"stage": ["il"] * 30 + ["sim"] * 400, "episode": range(430), "makespan": 1.0})
    fig = viz.training_curves({"a": long, "b": long})
    texts = [a.text for a in fig.layout.annotations]
    assert "I" in texts and not any(t.endswith("Stage I: imitation") for t in texts)
    bands = {(s.y0, s.y1) for s in fig.layout.shapes}
    assert len(bands) == 2  # one band per run, not merged across runs


def test_stage_labels_of_staggered_runs_are_shared_and_a_colliding_one_moves_up_a_row():
    from workbench.viz.training import LABEL_PX, PLOT_PX

    early = pd.DataFrame({"stage": ["il"] * 100 + ["sim"] * 900, "episode": range(1000), "makespan": 1.0})
    late = pd.DataFrame({"stage": ["il"] * 900 + ["sim"] * 100, "episode": range(1000), "makespan": 1.0})
    labels = viz.training_curves({"early": early, "late": late}).layout.annotations
    assert sorted(a.text for a in labels) == ["Stage I: imitation", "Stage II: simulator RL"]  # one per stage, over both runs
    assert {a.hovertext for a in labels} == {"Stage I: imitation: early, late", "Stage II: simulator RL: early, late"}
    (first, second) = sorted(labels, key=lambda a: a.x)
    apart = abs(first.x - second.x) / 1000 * PLOT_PX >= (len(first.text) + len(second.text)) * LABEL_PX / 2
    assert not apart and first.y != second.y, "their middles are too close for both names: the second goes up a row"
    assert viz.training_curves({"early": early}).layout.annotations[0].y == 1.0, "one run: labels at the top of its full-height shading"


# ----------------------------------------------------------- trace-event export
TRACE_EVENT_KEYS = {
    "X": {"name", "ph", "ts", "dur", "pid", "tid"},
    "M": {"name", "ph", "pid", "tid", "args"},
    "C": {"name", "ph", "ts", "pid", "args"},
    "s": {"name", "ph", "ts", "pid", "tid", "id"},
    "f": {"name", "ph", "ts", "pid", "tid", "id"},
}


@pytest.mark.parametrize("graph_name,devices", [("chain_mm", 4), ("ffnn", 3)])
def test_trace_events_have_one_slice_per_op_and_transfer_in_microseconds(graph_name, devices):
    import json

    from workbench.sim.trace_events import DEVICE_PID, TRANSFER_PID, trace_events_json

    graph = wb.bundled_graph(graph_name)
    trace = wb.simulate(graph, wb.place(graph, "heft", devices).assignment, devices).trace
    data = json.loads(trace_events_json(trace, viz.op_names(graph, graph.num_nodes), graph.name, microseconds_per_unit=1e-7))
    events = data["traceEvents"]
    assert data["displayTimeUnit"] in ("ms", "ns")
    for event in events:
        assert TRACE_EVENT_KEYS[event["ph"]] <= set(event), event
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
    ops = [e for e in events if e["ph"] == "X" and e.get("cat") == "op"]
    transfers = [e for e in events if e["ph"] == "X" and e.get("cat") == "transfer"]
    assert len(ops) == trace.num_ops and len(transfers) == trace.transfer_start.size > 0
    for event in ops:
        op = event["args"]["op"]
        assert event["pid"] == DEVICE_PID and event["tid"] == trace.device[op]
        assert event["ts"] == pytest.approx(trace.start[op] * 1e-7) and event["dur"] == pytest.approx(
            (trace.end[op] - trace.start[op]) * 1e-7
        )
    seen = sorted((e["args"]["src_op"], e["args"]["dst_op"], e["ts"], e["dur"]) for e in transfers)
    expected = sorted(
        zip(
            trace.transfer_src_op.tolist(),
            trace.transfer_dst_op.tolist(),
            (trace.transfer_start * 1e-7).tolist(),
            ((trace.transfer_end - trace.transfer_start) * 1e-7).tolist(),
            strict=False,
        )
    )
    assert [s[:2] for s in seen] == [e[:2] for e in expected]
    assert np.allclose([s[2:] for s in seen], [e[2:] for e in expected])
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {threads[(DEVICE_PID, d)] for d in range(devices)} == {f"device {d}" for d in range(devices)}
    for event in transfers:  # each transfer sits on a thread named after its link
        assert threads[(TRANSFER_PID, event["tid"])].startswith(
            f"device {event['args']['src_device']} → device {event['args']['dst_device']}"
        )
    counters: dict = {}
    for event in (e for e in events if e["ph"] == "C"):  # one counter track per device, numeric series
        assert event["pid"] == DEVICE_PID and all(isinstance(v, int | float) for v in event["args"].values()) and event["args"]
        counters.setdefault(event["name"], []).append((event["ts"], event["args"]["ops running"]))
    assert set(counters) == {f"device {d} busy" for d in range(devices)}
    for d in range(devices):
        steps = counters[f"device {d} busy"]
        times, values = np.array([t for t, _ in steps]), np.array([v for _, v in steps])
        assert times[0] == 0 and np.all(np.diff(times) > 0) and np.all(values[1:] != values[:-1]) and values[-1] == 0
        busy = np.sum(np.diff(np.r_[times, data["otherData"]["makespan"] * 1e-7]) * values)  # the track integrates to the busy time
        mine = trace.device == d
        assert busy == pytest.approx(np.sum(trace.end[mine] - trace.start[mine]) * 1e-7)
        assert set(values) <= {0, 1}  # the simulator runs one op at a time per device
    by_thread: dict = {}
    for event in ops + transfers:  # complete slices on one thread must not overlap (they would have to nest)
        by_thread.setdefault((event["pid"], event["tid"]), []).append((event["ts"], event["ts"] + event["dur"]))
    for slices in by_thread.values():
        slices.sort()
        assert all(a[1] <= b[0] + 1e-9 for a, b in zip(slices, slices[1:], strict=False))


def test_busy_steps_count_overlapping_and_back_to_back_intervals():
    from workbench.sim.trace_events import busy_steps

    times, running = busy_steps(np.array([0.0, 2.0, 3.0, 5.0]), np.array([2.0, 4.0, 5.0, 6.0]))
    assert times.tolist() == [0.0, 3.0, 4.0, 6.0] and running.tolist() == [1, 2, 1, 0]  # 2 → 2 and 5 → 5 are seamless
    times, running = busy_steps(np.array([1.0]), np.array([1.5]))
    assert times.tolist() == [0.0, 1.0, 1.5] and running.tolist() == [0, 1, 0]


def test_trace_events_refuse_bad_arguments():
    from workbench.sim.trace_events import to_trace_events

    trace = wb.simulate(small_dag("chain"), [0, 1, 0, 1], 2).trace
    with pytest.raises(ValueError, match="positive"):
        to_trace_events(trace, microseconds_per_unit=0)
    with pytest.raises(ValueError, match="3 names for 4 ops"):
        to_trace_events(trace, names=["a", "b", "c"])


@pytest.mark.skipif(not __import__("pathlib").Path("/usr/bin/chromium").exists(), reason="needs Debian's chromium")
def test_static_fallbacks_put_a_png_beside_the_interactive_figure(monkeypatch):
    import kaleido
    import plotly.io as pio

    monkeypatch.setattr(pio.renderers, "default", pio.renderers.default)
    monkeypatch.setattr(pio.defaults, "headers", pio.defaults.headers)
    assert viz.static_fallbacks()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            bundle = pio.renderers._build_mime_bundle(viz.message_figure("hello").to_dict())
    finally:
        kaleido.stop_sync_server(silence_warnings=True)
    assert "application/vnd.plotly.v1+json" in bundle and bundle["image/png"]
    assert not [str(w.message) for w in caught], "a warning under every figure (Kaleido's 'kopts argument is ignored')"


def test_long_runs_are_thinned_for_drawing_but_smoothed_over_every_row():
    episodes = np.arange(300_000)
    frame = pd.DataFrame({"stage": "sim", "episode": episodes, "makespan": (episodes % 2).astype(float)})
    fig = viz.training_curves({"long": frame}, window=2)
    raw, line = (t for t in fig.data if t.legendgroup == "long")
    assert len(raw.x) <= viz.training.MAX_RAW_POINTS and len(line.x) <= viz.training.MAX_LINE_POINTS
    assert raw.x[-1] > 299_000 and set(np.round(line.y[1:], 6)) == {0.5}  # the mean of every pair, not of the kept points
    spiky = frame.assign(makespan=np.where(episodes == 123_457, 9.0, np.where(episodes == 7, -9.0, 1.0)))
    raw, line = (t for t in viz.training_curves({"spiky": spiky}, raw_points=500, line_points=100).data if t.legendgroup == "spiky")
    assert len(raw.x) <= 500 and len(line.x) <= 100 and line.x[-1] == 299_999
    assert {123_457, 7, 0, 299_999} <= set(raw.x), "a stretch's extremes and the ends are kept, not every k-th point"


def test_the_png_renderer_tries_a_figure_again_when_kaleidos_page_was_not_ready(monkeypatch):
    from plotly.io.base_renderers import PngRenderer

    from workbench.viz.export import _png_renderer

    calls = []

    def flaky(self, fig_dict):
        calls.append(fig_dict)
        if len(calls) < 3:
            raise RuntimeError("ReferenceError: kaleido_scopes is not defined")
        return {"image/png": "ok"}

    monkeypatch.setattr(PngRenderer, "to_mimebundle", flaky)
    assert _png_renderer(100).to_mimebundle({"data": []}) == {"image/png": "ok"} and len(calls) == 3
    calls.clear()

    def down(self, fig_dict):
        calls.append(fig_dict)
        raise RuntimeError("down")

    monkeypatch.setattr(PngRenderer, "to_mimebundle", down)
    with pytest.raises(RuntimeError, match="down"):
        _png_renderer(100).to_mimebundle({"data": []})
    assert len(calls) == 3, "three tries, then the error"


def test_a_png_export_tries_again_when_kaleidos_page_was_not_ready(monkeypatch, tmp_path):
    import plotly.graph_objects as go
    import plotly.io as pio

    calls = []

    def flaky(*args, **kwargs):
        calls.append(args)
        if len(calls) < 3:
            raise RuntimeError("ReferenceError: kaleido_scopes is not defined")
        return b"png"

    monkeypatch.setattr(pio, "to_image", flaky)
    assert viz.to_png(go.Figure()) == b"png" and len(calls) == 3, "the dashboard's and calibrate's PNG try again"
    calls.clear()
    monkeypatch.setattr(go.Figure, "write_image", lambda self, path, **kw: Path(path).write_bytes(flaky()))
    written = viz.write_figure(go.Figure(), tmp_path / "figure.png")
    assert written.suffix == ".png" and written.read_bytes() == b"png" and len(calls) == 3, "not the HTML fallback"
