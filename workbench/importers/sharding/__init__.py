"""Shard a traced model into a partitioned block graph: one node per block kernel.

A model's operator graph (:func:`~workbench.importers.from_torch`) is mostly
a chain, and placement has nothing to decide on it. The DOPPLER paper's
graphs are partitioned tensor programs instead: each einsum is split into
block kernels along its dimensions (EinDecomp: Bourgeois et al., 2024), which
is where the parallelism comes from. :func:`shard` gives a traced model that
treatment with the machinery of the paper families
(:class:`~workbench.generators.blocks.BlockProgram`):

- every tensor dimension has a *kind*, followed through the program:
  ``batch`` and ``seq`` (model inputs), ``hidden`` (feature dimensions of
  linear layers and embeddings), ``heads`` and ``head_dim`` (a hidden
  dimension reshaped into two), ``channels`` and ``spatial`` (images);
  ``parts`` says how many blocks each kind is split into (``spatial``,
  ``head_dim`` and unnamed dimensions stay whole);
- linear layers, matmuls, ``einsum`` and attention are block einsums (a
  split contracted dimension adds one ``partial_sum`` node per output block);
  softmax and normalisations reduce over a split dimension with partial
  results (``partial_max`` / ``partial_sum``) before they normalise;
  elementwise ops, embeddings, reductions and pooling are one kernel per
  block; convolutions are split along batch and channels; views, reshapes
  and permutes are free relabelings, and slicing or concatenating gathers
  the blocks each new block overlaps;
- an op that none of this covers stays one node that reads every block of
  its inputs, and is listed in ``metadata["unsharded"]``.
- ``kernels="einsum"`` writes each op as the steps of the paper's system
  instead (its graph writer in github.com/dcbdan/einsummable): a
  ``formation`` node after every contraction and reduction, layer norm,
  softmax and attention step by step, a linear's bias as its own step.

Each op's FLOPs (the conventions of :func:`from_torch`) are shared exactly
among its kernels; the partial-result nodes' additions are counted apart
(``metadata["combine_flops"]``), so the graph's ``total_flops`` minus them
equals the traced model's ``total_flops``. Costs come from a cost model:
``roofline`` on a device profile, or the paper files' convention.
"""

from .api import auto_parts, shard, shard_traced
from .values import KERNEL_STYLES, SPLIT_KINDS, PartsError, parse_parts

__all__ = ["shard", "shard_traced", "parse_parts", "auto_parts", "SPLIT_KINDS", "KERNEL_STYLES", "PartsError"]
