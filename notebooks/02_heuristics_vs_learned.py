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
# # 02 · Heuristics, search and learned placers side by side
#
# Every placer in the workbench on the DOPPLER paper's four graphs with 4 and
# 8 devices: the classic list-scheduling heuristics, simulated-annealing local
# search, the time-limited exact CP-SAT model, and the pretrained DOPPLER
# policies where a checkpoint ships in `datasets/pretrained/`. A results
# table, makespan bars, Gantt charts side by side, and a panel to pick the
# graph, devices and methods yourself, and the best makespan against the
# simulator evaluations spent. Takes 4 minutes in fast mode
# (`WORKBENCH_FAST=1`, small budgets; the saved outputs come from it) on a
# 2-core machine busy with other work; the full search budgets took 22
# minutes on such a machine.

# %% tags=["parameters"]
import os

FAST = os.environ.get("WORKBENCH_FAST", "0") == "1"  # CI sets this: small search budgets
GRAPHS = ("chain_mm_112nodes", "ffnn_192nodes", "transformer_block_215nodes", "full_transformer_layer_261nodes")
DEVICES = (4, 8)
LOCAL_SEARCH_BUDGET = 1_000 if FAST else 20_000  # simulator evaluations per placement
CPSAT_SECONDS = 1.0 if FAST else 10.0  # wall-time limit of the exact model per placement
ANYTIME_BUDGET = 30 if FAST else 200  # simulator evaluations per any-time run
ANYTIME_SEEDS = 2 if FAST else 3  # seeds per any-time curve
SEED = 0

# %% [markdown]
# ## The methods
# `workbench.placers.placers()` lists every registered method. Learned methods need a
# checkpoint; `pretrained_methods` says which ones ship one for each graph
# (`workbench.place(graph, method="doppler")` then finds it by itself).

# %%
import pandas as pd
import plotly.express as px
from IPython.display import Markdown

import workbench as wb
from workbench.notebook import HEURISTICS, SEARCH, Comparison, compare_panel, pretrained_methods
from workbench.placers import placers
from workbench.training.pretrained import summary_table
from workbench.viz import static_fallbacks

static_fallbacks()  # a PNG beside each interactive chart, so the saved notebook renders on GitHub and nbviewer

graphs = [wb.bundled_graph(name) for name in GRAPHS]
descriptions = placers()
pretrained = {graph.name: pretrained_methods(graph) for graph in graphs}
pd.DataFrame(
    {"description": [descriptions[m] for m in (*HEURISTICS, *SEARCH, "doppler")]},
    index=[*HEURISTICS, *SEARCH, "doppler"],
)

# %%
pd.Series({name: ", ".join(methods) or "none shipped" for name, methods in pretrained.items()}, name="pretrained policies")

# %% [markdown]
# How the shipped policies were trained, from their own run records
# (makespans ÷ 1e10, ratios to the teacher's). They were trained on 4
# devices, and a checkpoint places only the graph and device count it was
# trained for, so the 8-device columns below have no learned row.

# %%
Markdown(summary_table())

# %% [markdown]
# ## Place every graph with every method
# A `Comparison` places each graph × device count × method once and keeps the
# placement (assignment, simulated makespan, the best lower bound, wall
# time). The table relates every makespan to the teacher's (critical path)
# and to the lower bound no schedule can beat.

# %%
comparison = Comparison(
    graphs,
    options={
        "local_search": {"budget": LOCAL_SEARCH_BUDGET},
        "learned_search": {"budget": LOCAL_SEARCH_BUDGET},
        "cpsat": {"time_limit": CPSAT_SECONDS},
    },
    seed=SEED,
)
table = comparison.run(DEVICES)
table.head(12)

# %% [markdown]
# Makespan ÷ 1e10 (the paper's unit), one column per graph and device count:

# %%
(table.pivot_table(index="method", columns=["graph", "devices"], values="makespan", sort=False) / 1e10).round(1)

# %% [markdown]
# Relative to the critical-path teacher (below 1 is better), and how far each
# method stays above the lower bound:

# %%
px.bar(
    table,
    x="graph",
    y="vs_critical_path",
    color="method",
    barmode="group",
    facet_row="devices",
    title="makespan relative to critical path (lower is better)",
    height=600,
)

# %%
table.groupby("method", sort=False)[["vs_critical_path", "gap", "seconds"]].mean().sort_values("vs_critical_path")

# %% [markdown]
# ## One graph up close
# Makespan bars for the full transformer layer on four devices, then the Gantt
# charts of the teacher, the best heuristic, local search and (when shipped)
# DOPPLER on one shared time axis: idle gaps and cross-device transfers
# show where the time goes.

# %%
GRAPH, COUNT = "full_transformer_layer_261nodes", 4
methods = [*HEURISTICS, *SEARCH, *pretrained[GRAPH]]
comparison.bars(GRAPH, COUNT, methods)

# %%
cell = table[(table["graph"] == GRAPH) & (table["devices"] == COUNT)].set_index("method")["makespan"]
best_heuristic = cell[list(HEURISTICS)].idxmin()
shown = list(dict.fromkeys(["critical_path", best_heuristic, "local_search", *pretrained[GRAPH]]))
comparison.gantts(GRAPH, COUNT, shown, columns=2)

# %% [markdown]
# ## Makespan against evaluations
# Searches and sampled policies spend simulator evaluations, and each records
# the best makespan found so far against the evaluations spent
# (`placement.details["anytime"]`). Local search starts from the best
# one-pass method (the heuristics, the affinity rule and the baselines, one
# counted evaluation each: the fair baseline `best_constructive`); a
# pretrained policy samples K placements (K = the budget) or
# adapts itself to the graph by active search (EAS: a per-op × device table on
# its device logits, trained on its own samples). By default active search
# hands half of its budget, in ten bursts, to local search from its best
# placement so far and imitates what that search finds; `polish=0` is the
# pure EAS, whose every evaluation is a sample of the adapted policy. Every
# evaluation of both parts counts. The chart shows the mean over
# seeds and the min–max band, on a log axis: which method is ahead after 10,
# 100 or all evaluations. The second chart draws the same runs against the
# CPU seconds each had spent: a method that wins per evaluation can lose per
# second. The dashboard's Compare page draws the same charts.

# %%
from workbench.viz import anytime_figure

ANYTIME_GRAPH, ANYTIME_DEVICES = "ffnn_192nodes", 4
series = {"local_search": {"method": "local_search", "budget": ANYTIME_BUDGET}}
if "learned_search" in descriptions:
    series["learned_search"] = {"method": "learned_search", "budget": ANYTIME_BUDGET}
if "doppler" in pretrained[ANYTIME_GRAPH]:
    series["doppler best of K samples"] = {"method": "doppler", "samples": ANYTIME_BUDGET}
    series["doppler active search"] = {"method": "doppler", "search": "active", "budget": ANYTIME_BUDGET}
    series["doppler active search, pure EAS"] = {"method": "doppler", "search": "active", "budget": ANYTIME_BUDGET, "polish": 0}
graph = wb.bundled_graph(ANYTIME_GRAPH)
records = {
    label: [wb.place(graph, devices=ANYTIME_DEVICES, seed=seed, **options).details["anytime"] for seed in range(ANYTIME_SEEDS)]
    for label, options in series.items()
}
anytime_figure(records, title=f"{ANYTIME_GRAPH} on {ANYTIME_DEVICES} devices: best makespan against evaluations", graph=graph)

# %%
anytime_figure(
    records, title=f"{ANYTIME_GRAPH} on {ANYTIME_DEVICES} devices: best makespan against CPU seconds", graph=graph, x="cpu_seconds"
)

# %% [markdown]
# ## Pick for yourself
# Choose a graph, the device count and the methods; the table, bars and
# Gantt charts redraw. Placements already made above are reused, new ones are
# placed on the spot. The saved notebook keeps a static copy of the panel
# (its table and charts as images), which GitHub shows; run the cell for the
# live panel.

# %%
compare_panel(comparison, devices=DEVICES, selected=["critical_path", "best_constructive", "local_search", *pretrained[GRAPHS[0]]])
