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
# # 05 · Sweeps and scaling
#
# Run a grid of graphs × methods × seeds with `workbench.sweep` on a local
# process pool, read the results as a pandas table and plot them; the same
# grid runs on a Ray cluster by changing one argument. Then a second sweep
# over generated graphs of growing size shows how each method's wall time
# and solution quality scale. Takes about a minute in fast mode
# (`WORKBENCH_FAST=1`, a smaller grid; the saved outputs come from it) on a
# 2-core machine busy with other work; the full grid takes several times as long.

# %% tags=["parameters"]
import os
from pathlib import Path

FAST = os.environ.get("WORKBENCH_FAST", "0") == "1"  # CI sets this: fewer seeds, smaller graphs and budgets
GRAPHS = ["chain_mm", "ffnn", "transformer_block", "full_transformer_layer"]
DEVICES = [4] if FAST else [4, 8]
SEEDS = 2 if FAST else 5
LOCAL_SEARCH_BUDGET = 500 if FAST else 5_000
SIZES = [50, 100, 200] if FAST else [100, 300, 1_000, 3_000, 10_000]  # ops of the generated graphs
WORKERS = 2  # processes of the local pool
RESULTS = Path(
    os.environ.get("WORKBENCH_NOTEBOOK_RUNS", "../runs/notebooks")
)  # results tables (git-ignored); finished cells are not run again

# %% [markdown]
# ## A sweep is a small config
# The same mapping can live in a YAML file (`workbench sweep config.yaml`).
# Lists expand: every graph × device count × method × option value × seed is
# one cell, one call of `workbench.place`. Methods with randomness (random,
# local search) differ between seeds; the heuristics are deterministic.

# %%
import plotly.express as px

import workbench as wb
from workbench.notebook import relative_to, scaling_exponents
from workbench.viz import static_fallbacks

static_fallbacks()  # a PNG beside each interactive chart, so the saved notebook renders on GitHub and nbviewer

methods = ["critical_path", "heft", "peft", "etf", "random", {"method": "local_search", "options": {"budget": LOCAL_SEARCH_BUDGET}}]
config = {
    "name": "paper_graphs",
    "graphs": GRAPHS,
    "devices": DEVICES,
    "methods": methods,
    "seeds": SEEDS,
    "out": str(RESULTS / f"05_paper_graphs_{'fast' if FAST else 'full'}.csv"),
}
results = wb.sweep(config, engine="local", workers=WORKERS)
results[["graph", "devices", "label", "seed", "makespan", "gap", "seconds", "status"]].head(8)

# %% [markdown]
# ## The one-line change for Ray
# `engine="ray"` runs the same cells as Ray tasks: with no `address` on a
# private local Ray instance with `workers` CPUs, with `address="auto"` (or
# `"ray://host:10001"`) on a running cluster whose nodes have the workbench
# installed. Given the same results file it would skip the cells finished
# above, so this run writes its own table, and the makespans must match the
# local run's cell for cell (every method here is deterministic given its
# seed). Not run in fast mode (starting Ray takes a while).

# %%
if not FAST:
    on_ray = wb.sweep(
        {**config, "out": str(RESULTS / "05_paper_graphs_ray.csv")}, engine="ray", workers=WORKERS
    )  # on a cluster: address="auto"
    assert (on_ray["makespan"].to_numpy() == results["makespan"].to_numpy()).all()
    print(f"Ray ran {len(on_ray)} cells on {on_ray['host'].nunique()} host(s); same makespans as the local pool")

# %% [markdown]
# ## Results as a table
# Failed cells keep their error message (`status`, `error`) instead of
# stopping the sweep. Makespans relative to the critical-path teacher on the
# same graph, device count and seed:

# %%
ok = results[results["status"] == "ok"].copy()
print(f"{len(ok)} of {len(results)} cells finished; failures: {results.loc[results['status'] != 'ok', 'error'].tolist()}")
ok["vs_critical_path"] = relative_to(ok, "critical_path", by="label", keys=("graph", "devices", "seed"))
summary = ok.groupby(["graph", "devices", "label"], sort=False).agg(
    makespan=("makespan", "mean"),
    vs_critical_path=("vs_critical_path", "mean"),
    spread=("vs_critical_path", "std"),
    seconds=("seconds", "mean"),
)
summary.round(3)

# %%
px.box(
    ok, x="label", y="vs_critical_path", color="graph", facet_col="devices", points="all",
    title=f"makespan / critical path's over {SEEDS} seeds (lower is better)",
)  # fmt: skip

# %%
px.scatter(
    ok, x="seconds", y="gap", color="label", symbol="graph", log_x=True,
    title="quality against wall time: gap to the lower bound vs seconds per placement",
)  # fmt: skip

# %% [markdown]
# ## How cost grows with graph size
# Random series-parallel graphs (`workbench.generate("series_parallel",
# nodes=N)`) of growing size, one device count, each method once. Wall time
# per placement on log–log axes; the fitted slope k says the time grows like
# nodes^k. Local search has a fixed budget of simulator evaluations, each of
# which costs time linear in the graph.

# %%
scaling_config = {
    "name": "scaling",
    "graphs": [{"generate": "series_parallel", "nodes": n, "seed": 0, "label": f"series_parallel_{n}"} for n in SIZES],
    "devices": 4,
    "methods": ["critical_path", "heft", "etf", {"method": "local_search", "options": {"budget": LOCAL_SEARCH_BUDGET}}],
    "out": str(RESULTS / f"05_scaling_{'fast' if FAST else 'full'}.csv"),
}
scaling = wb.sweep(scaling_config, engine="local", workers=WORKERS)
scaling = scaling[scaling["status"] == "ok"]
scaling_exponents(scaling, x="nodes", y="seconds", by="label").round(2)

# %%
px.line(
    scaling, x="nodes", y="seconds", color="label", markers=True, log_x=True, log_y=True,
    title="wall time per placement against graph size",
)  # fmt: skip

# %%
scaling = scaling.assign(vs_critical_path=relative_to(scaling, "critical_path", by="label", keys=("graph", "devices", "seed")))
px.line(
    scaling, x="nodes", y="vs_critical_path", color="label", markers=True, log_x=True,
    title="makespan relative to critical path against graph size",
)  # fmt: skip
