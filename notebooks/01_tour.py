# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 · A tour of the workbench
#
# Load one of the DOPPLER paper's dataflow graphs, look at it, simulate a
# placement on four devices, draw its Gantt chart and placement heatmap, and
# read the lower bound that no schedule can beat. Takes about half a minute
# (on a 2-core machine busy with other work), most of it drawing the PNGs.
#
# Times are in the graph's own unit; the paper divides by 1e10 when it
# reports, and so do the captions here.

# %% tags=["parameters"]
import os

FAST = os.environ.get("WORKBENCH_FAST", "0") == "1"  # CI sets this; the tour is quick either way
GRAPH = "chain_mm_112nodes"
DEVICES = 4

# %% [markdown]
# ## The graph
# `workbench.bundled_graph` loads a bundled paper graph by name;
# `workbench.load_graph` loads any `.txt` (paper), `.stg` or workbench `.json` file.

# %%
import pandas as pd

import workbench as wb
from workbench import viz as figures

figures.static_fallbacks()  # a PNG beside each interactive chart, so the saved notebook renders on GitHub and nbviewer

graph = wb.bundled_graph(GRAPH)
pd.Series(figures.graph_statistics(graph, DEVICES))

# %%
figures.graph_figure(graph, color_by="compute", title=f"{graph.name}: ops in topological layers")

# %% [markdown]
# ## Simulate a placement
# The simulator follows the paper's runtime: asynchronous, work-conserving,
# one op at a time per device, first come first served, and a transfer cost
# whenever an input comes from another device. Round robin is the paper's
# own reference placement.

# %%
assignment = wb.place(graph, method="round_robin", devices=DEVICES).assignment
result = wb.simulate(graph, assignment, devices=DEVICES)
bound = wb.lower_bound(graph, DEVICES)
print(f"makespan {result.makespan / 1e10:,.1f}   lower bound {bound / 1e10:,.1f}   gap {result.makespan / bound - 1:.0%}")

# %%
figures.gantt_figure(graph, result.trace, title="round robin: one row per device, transfers between rows")

# %%
figures.placement_heatmap(graph, assignment, DEVICES, title="round robin: ops (topological order) × devices")

# %% [markdown]
# ## A better placement
# The critical-path heuristic (DOPPLER's teacher) places the op with the
# longest remaining path first, on the device where it can start earliest.

# %%
teacher = wb.place(graph, method="critical_path", devices=DEVICES)
print(f"critical path: makespan {teacher.makespan / 1e10:,.1f} in {teacher.seconds * 1e3:.1f} ms")
figures.gantt_figure(graph, wb.simulate(graph, teacher.assignment, DEVICES).trace, title="critical path")

# %% [markdown]
# ## The trace as data
# Every chart is drawn from the trace, which is also a pandas frame (and JSON):
# per op its device, ready, start and end times; per transfer its ends and times.
# `workbench.validate` checks it against the execution model.

# %%
ops = result.trace.to_frame()
assert wb.validate(graph, assignment, result.trace, DEVICES) == []
ops.sort_values("start").head(10)
