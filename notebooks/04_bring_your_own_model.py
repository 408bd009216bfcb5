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
# # 04 · Bring your own model
#
# Import a PyTorch model into a dataflow graph through torch.fx
# (`workbench.from_torch`), coarsen it, and place it with the heuristics,
# local search and a DOPPLER policy trained on it. The bundled GPT-style
# decoder (`workbench.models.gpt_decoder`) comes first; it turns out to be a
# single chain of work, so the second half runs the same decoder on
# micro-batches, which gives the placers something to do. The last sections
# import a HuggingFace GPT-2 from its config (`hf:gpt2`, random weights, no
# download), shard it into block kernels, the way the paper's graphs are
# built, and place it beside a graph of the real-model zoo (they need the
# `[models]` extra). Costs come from a V100 roofline model, in seconds. Takes under a
# minute and a half in fast mode (`WORKBENCH_FAST=1`, a few training episodes; the
# saved outputs come from it) on a 2-core machine busy with other work; the full
# training budget takes several times as long.

# %% tags=["parameters"]
import os
from pathlib import Path

FAST = os.environ.get("WORKBENCH_FAST", "0") == "1"  # CI sets this: a few training episodes, small search budget
LAYERS = 4  # decoder blocks
MICRO_BATCHES = 4  # independent slices of the batch in the second half
DEVICES = 4
PROFILE = "V100"
LOCAL_SEARCH_BUDGET = 1_000 if FAST else 20_000
EPISODES = (10, 10) if FAST else (200, 400)  # imitation, simulator RL
RUNS = Path(
    os.environ.get("WORKBENCH_NOTEBOOK_RUNS", "../runs/notebooks")
)  # training runs land here (git-ignored); a finished run is reused

# %% [markdown]
# ## Import the decoder
# `from_torch` traces the module with torch.fx (falling back to torch.export),
# propagates shapes on the model's `example_inputs()`, and costs every op on
# the device profile: matmuls and attention by FLOPs, elementwise ops by
# bytes moved, views free. Edges carry the bytes of the producer's output.

# %%
import pandas as pd
import torch
from torch import nn

import workbench as wb
from workbench import viz as figures
from workbench.importers import coarsen
from workbench.models import gpt_decoder
from workbench.notebook import Comparison, stage_placements
from workbench.runs import RunPaths, read_run, reference_lines
from workbench.training import TrainConfig, train

figures.static_fallbacks()  # a PNG beside each interactive chart, so the saved notebook renders on GitHub and nbviewer

decoder = gpt_decoder(layers=LAYERS)
graph = wb.from_torch(decoder, profile=PROFILE, name="gpt_decoder")
pd.Series(graph.op_types).value_counts().rename("ops per type")

# %% [markdown]
# ## Coarsen
# `coarsen` fuses cheap single-input ops (views, elementwise) into their
# producer and can group further down to a target size; compute is
# preserved, and `metadata["coarse_groups"]` names the original ops behind
# each coarse node.

# %%
coarse = coarsen(graph)
pd.DataFrame({"imported": figures.graph_statistics(graph, DEVICES), "coarsened": figures.graph_statistics(coarse, DEVICES)})

# %%
pd.Series({i: [graph.names[op] for op in group] for i, group in enumerate(coarse.metadata["coarse_groups"][:8])}, name="original ops")

# %%
figures.graph_figure(coarse, color_by="compute", title=f"{coarse.name}: {coarse.num_nodes} ops in topological layers")

# %% [markdown]
# ## Placing the decoder as it is
# The longest path carries all of the compute (see "longest path (compute)"
# against "total compute" above): the decoder is one chain, the lower bound
# equals running everything on one device, and a placer can only lose
# time to transfers. The table says so.

# %%
plain = Comparison([coarse], options={"local_search": {"budget": LOCAL_SEARCH_BUDGET}})
plain.run([DEVICES], ["single", "round_robin", "critical_path", "heft", "etf", "local_search"])

# %% [markdown]
# ## Your own model: the decoder on micro-batches
# Model code of your own goes through the same call. Here the batch is split
# into slices that run through the decoder independently (as in
# pipeline-parallel inference): independent chains a placer can spread over
# the devices, with the final concatenation joining them.


# %%
class MicroBatched(nn.Module):
    """Runs ``model`` on ``parts`` slices of the batch and concatenates the outputs."""

    def __init__(self, model: nn.Module, parts: int) -> None:
        super().__init__()
        self.model, self.parts = model, parts

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        slices = ids.chunk(self.parts)
        return torch.cat([self.model(slices[i]) for i in range(self.parts)])


model = MicroBatched(gpt_decoder(layers=LAYERS, batch=2 * MICRO_BATCHES), MICRO_BATCHES)
inputs = model.model.example_inputs()
batched = coarsen(wb.from_torch(model, inputs, profile=PROFILE, name="gpt_microbatched"))
pd.Series(figures.graph_statistics(batched, DEVICES), name=batched.name)

# %%
figures.graph_figure(batched, color_by="compute", title=f"{batched.name}: {MICRO_BATCHES} micro-batches")

# %% [markdown]
# ## Train a policy on it
# A DOPPLER policy (SEL picks the next op, PLC its device) first imitates the
# critical-path teacher, then improves by REINFORCE in the simulator. The
# run directory records every episode; rerunning this cell with the same
# settings reuses the finished run.

# %%
RUNS.mkdir(parents=True, exist_ok=True)
graph_file = RUNS / f"{batched.name}.json"
wb.save_graph(batched, graph_file)
config = TrainConfig(graphs=(str(graph_file),), devices=DEVICES, stages=("il", "sim"), episodes=EPISODES)
result = train(config, out=RUNS / f"04_{batched.name}_{DEVICES}dev_{'+'.join(map(str, EPISODES))}")
run = read_run(result.run_dir)
figures.training_curves(run.metrics, references=reference_lines(run.meta), title="makespan per episode (seconds)")

# %% [markdown]
# What the greedy policy does after each stage (the episodes above explore,
# so they scatter around it), beside the best placement seen in training:

# %%
greedy = {f"greedy after {stage}": p.makespan for stage, p in stage_placements(result.run_dir, batched).items()}
pd.Series({**greedy, "best seen in training": run.best_placement["makespan"]}, name="makespan (s)")

# %% [markdown]
# ## Heuristics, search and the policy
# The policy places greedily from its last checkpoint (`samples=K` would keep
# the best of K sampled placements).

# %%
checkpoint = RunPaths(result.run_dir).last_checkpoint
comparison = Comparison(
    [batched],
    options={"local_search": {"budget": LOCAL_SEARCH_BUDGET}, "doppler": {"checkpoint": checkpoint}},
)
methods = ["single", "round_robin", "critical_path", "heft", "etf", "local_search", "doppler"]
comparison.run([DEVICES], methods)

# %%
comparison.bars(batched.name, DEVICES, methods)

# %%
comparison.gantts(batched.name, DEVICES, ["critical_path", "etf", "local_search", "doppler"])

# %% [markdown]
# Where each micro-batch's ops went (ops in topological order × devices):

# %%
for method in ("critical_path", "doppler"):
    placement = comparison.placement(batched.name, DEVICES, method)
    figures.placement_heatmap(batched, placement.assignment, DEVICES, title=method).show()

# %% [markdown]
# ## A HuggingFace model, sharded into block kernels
# Models from the ecosystems you already use are named by a short spec and
# made from their config with random weights, nothing downloaded:
# `hf:gpt2`, `hf:llama`, `hf:bert` (HuggingFace, traced with its own fx
# tracer), `tv:resnet50`, `tv:vit_b_16` (torchvision), `timm:...`. They need
# the `[models]` extra; without it the rest of this notebook only says so.

# %%
import importlib.util

from IPython.display import display

from workbench.importers.specs import MODELS_EXTRA

HAVE_MODELS = all(importlib.util.find_spec(package) is not None for package in ("transformers", "torchvision"))
if not HAVE_MODELS:
    print(f"The rest of this notebook needs the [models] extra (transformers, torchvision): {MODELS_EXTRA}")

# %% [markdown]
# `build_model("hf:gpt2", config fields)` builds GPT-2 on the meta device
# (shapes only, no memory). Its operator graph is again a chain; `shard`
# splits every op into block kernels along the batch, sequence and hidden
# dimensions (EinDecomp-style, as the paper's graphs are), adding a
# partial-sum node wherever a contracted dimension is split. Ops it cannot
# split stay single nodes and are listed (here only constants: position ids
# and the attention mask).

# %%
if HAVE_MODELS:
    from workbench.importers.sharding import shard
    from workbench.importers.specs import build_model

    gpt2 = build_model("hf:gpt2", {"n_layer": 2, "n_embd": 256, "n_head": 4}, meta=True)
    ids = (torch.zeros(2, 128, dtype=torch.int64),)
    operators = wb.from_torch(gpt2, ids, profile=PROFILE, device="meta", name="hf_gpt2")
    sharded = shard(gpt2, ids, "batch=2,seq=2,hidden=2", profile=PROFILE, device="meta", name="hf_gpt2_sharded")
    display(
        pd.DataFrame({"operators": figures.graph_statistics(operators, DEVICES), "sharded": figures.graph_statistics(sharded, DEVICES)})
    )
    display(pd.DataFrame(sharded.metadata["unsharded"]))

# %% [markdown]
# ## The zoo of real-model graphs
# `workbench.importers.zoo` names six real models (GPT-2 small and medium
# widths, a Llama-7B layer, BERT-base, ResNet-50, ViT-B/16), each at two
# partitionings; graphs are rebuilt on demand (`build_entry`), and
# `workbench import-model --zoo DIR` writes them all with their placement
# table. They are the `real` split of the benchmark corpus
# (`workbench.corpus`, for learned placement): one entry per model and
# partitioning, used at 4 and 8 devices, with its op count and a hash of
# its costs and edges that `corpus.build` checks when it rebuilds it.

# %%
if HAVE_MODELS:
    from workbench import corpus
    from workbench.importers.zoo import ZOO_TABLE_COLUMNS, placement_row

    real = corpus.entries("real")
    display(
        pd.DataFrame(
            [{"entry": e.name, "spec": e.params["spec"], "parts": e.params["parts"], "devices": e.devices, "nodes": e.nodes} for e in real]
        ).set_index("entry")
    )

# %% [markdown]
# Placement on the operator graph, on the sharded GPT-2 and on the zoo's
# GPT-2 small at its default partitioning: on the operator chain every
# placer ties, on the block graphs local search beats critical_path
# (`local_search_gain` = 1 − local_search / critical_path; the table of
# docs/generators.md runs 2,000 evaluations, this notebook
# `LOCAL_SEARCH_BUDGET`).

# %%
if HAVE_MODELS:
    graphs = [coarsen(operators), sharded, corpus.build(real[0])]  # zoo-gpt2-small-0: GPT-2 small at its default partitioning
    table = pd.DataFrame([placement_row(g, DEVICES, budget=LOCAL_SEARCH_BUDGET) for g in graphs]).set_index("graph")
    display(table[["nodes", "edges", "lower_bound", *ZOO_TABLE_COLUMNS, "local_search_gain"]])
