"""Network building blocks shared by the learned policies: the MPNN encoder and MLP heads.

The encoder is the message-passing neural network of Gilmer et al. (2017)
that DOPPLER uses: an edge-conditioned convolution (``dgl.nn.NNConv``)
followed by a GRU, repeated for a fixed number of steps on the bidirected
graph. The edge network (linear, ReLU, linear) maps an edge's features to
its ``width x width`` message matrix; its first layer runs once per forward
pass, its last is NNConv's ``edge_func``.

:class:`EdgeConv` is ``dgl.nn.NNConv`` with the same parameters and the same
output and gradients (tests check them against ``NNConv.forward``), computed
without any per-edge ``width``-sized tensor: DGL's NNConv materialises every
edge's message matrix. Each step aggregates the source features weighted by
each edge-network column with one sparse product, then applies the edge
network's last layer once per node (see :class:`EdgeConv`), so a step costs
``nodes x (edge_hidden + 1) x width²`` plus ``edges x (edge_hidden + 1) x width``.
With a wide edge network (``edge_hidden`` >= ``GROUPED_EDGE_HIDDEN``, the
paper's 128) the per-node product grows with ``edge_hidden``; there
:meth:`EdgeConv.grouped` builds the message matrix once per distinct edge
feature row (a paper graph has 4 to 20) and multiplies each edge group by it.
"""

from __future__ import annotations

import dataclasses
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

import dgl
import numpy as np
import torch
from numba import njit
from torch import nn

from ..graph import DataflowGraph
from .features import EDGE_FEATURES, NODE_FEATURES, longest_path_members, static_features
from .policy_config import ACTIVATIONS

__all__ = [
    "ACTIVATIONS",
    "Encoder",
    "EdgeConv",
    "ScoringHead",
    "aggregate",
    "mlp",
    "numpy_mlp",
    "sums_before",
    "GraphTensors",
    "graph_tensors",
    "path_sum",
    "zscore",
    "numpy_zscore",
    "GROUPED_EDGE_HIDDEN",
    "ENCODER_BLOCK",
    "node_blocks",
]

GROUPED_EDGE_HIDDEN = 32
"""From this edge-network width on, :class:`Encoder` uses :meth:`EdgeConv.grouped` (cheaper there, same output)."""
ENCODER_BLOCK = 8192
"""Without gradients on the CPU, :class:`Encoder` runs a step on this many nodes at a time (the same embeddings, bit for
bit, in a fraction of the memory: a 100,000-op graph's step would otherwise hold a (900,000, 128) product)."""


def activation_layer(name: str, negative_slope: float) -> nn.Module:
    """The activation ``name`` (one of ``ACTIVATIONS``)."""
    if name == "leaky_relu":
        return nn.LeakyReLU(negative_slope)
    if name == "relu":
        return nn.ReLU()
    if name == "tanh":
        return nn.Tanh()
    raise ValueError(f"unknown activation {name!r}; use one of {', '.join(ACTIVATIONS)}")


def mlp(sizes: list[int], activation: str, negative_slope: float) -> nn.Sequential:
    """Linear layers of ``sizes`` (input first, output last) with ``activation`` between them."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(pairwise(sizes)):
        if i:
            layers.append(activation_layer(activation, negative_slope))
        layers.append(nn.Linear(a, b))
    return nn.Sequential(*layers)


def _affine(weight: np.ndarray, bias: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``x @ weight + bias`` as a function of ``x``."""
    return lambda x: x @ weight + bias


def _leaky_relu(slope: float) -> Callable[[np.ndarray], np.ndarray]:
    """Leaky ReLU with ``slope`` below zero, on numpy arrays."""
    return lambda x: np.where(x > 0, x, slope * x)


def numpy_mlp(layers: nn.Sequential) -> Callable[[np.ndarray], np.ndarray]:
    """A numpy function computing ``layers`` (as :func:`mlp` builds them) on float64 rows, without autograd.

    Rollouts call it once per step: tiny numpy products avoid torch's per-op
    overhead and its thread pool, which stalls on busy machines.
    """
    steps: list[Callable[[np.ndarray], np.ndarray]] = []
    for layer in layers:
        if isinstance(layer, nn.Linear):
            weight, bias = layer.weight.detach().cpu().double().numpy().T, layer.bias.detach().cpu().double().numpy()
            steps.append(_affine(weight, bias))
        elif isinstance(layer, nn.LeakyReLU):
            steps.append(_leaky_relu(layer.negative_slope))
        elif isinstance(layer, nn.ReLU):
            steps.append(lambda x: np.maximum(x, 0.0))
        elif isinstance(layer, nn.Tanh):
            steps.append(np.tanh)
        else:
            raise TypeError(f"numpy_mlp handles Linear, LeakyReLU, ReLU and Tanh layers, not {type(layer).__name__}")

    def run(x: np.ndarray) -> np.ndarray:
        for step in steps:
            x = step(x)
        return x

    return run


class ScoringHead(nn.Module):
    """An MLP scoring a concatenation of named input segments, with its first layer usable per segment.

    The first layer is linear, so a segment's contribution can be computed on
    its own (:meth:`part`) and added up: parts fixed per op are computed once
    per episode, parts summed over the ops on a device are summed as
    contributions, and only what changes per step is computed per step.
    """

    def __init__(self, segments: dict[str, int], hidden: tuple[int, ...], activation: str, negative_slope: float) -> None:
        super().__init__()
        self.slices: dict[str, slice] = {}
        start = 0
        for name, size in segments.items():
            self.slices[name] = slice(start, start + size)
            start += size
        self.layers = mlp([start, *hidden, 1], activation, negative_slope)

    def part(self, name: str, x: torch.Tensor) -> torch.Tensor:
        """Segment ``name``'s contribution to the first layer (no bias)."""
        return x @ self.layers[0].weight[:, self.slices[name]].T

    @property
    def bias(self) -> torch.Tensor:
        return self.layers[0].bias

    def finish(self, first: torch.Tensor) -> torch.Tensor:
        """Logits from the summed first-layer contributions (bias included)."""
        return self.layers[1:](first).squeeze(-1)

    def forward(self, **segments: torch.Tensor) -> torch.Tensor:
        return self.layers(torch.cat([segments[name] for name in self.slices], dim=-1)).squeeze(-1)

    def numpy_projected_part(self, name: str, projection: nn.Linear) -> tuple[np.ndarray, np.ndarray]:
        """``(weight, bias)`` with ``f @ weight + bias == part(name, projection(f))``, as float64 numpy."""
        with torch.no_grad():
            first = self.layers[0].weight[:, self.slices[name]]
            return (first @ projection.weight).T.cpu().double().numpy(), (first @ projection.bias).cpu().double().numpy()

    def numpy_finish(self) -> Callable[[np.ndarray], np.ndarray]:
        """:meth:`finish` as a numpy function on float64 rows (for rollouts' step loops)."""
        rest = numpy_mlp(self.layers[1:])
        return lambda first: rest(first)[..., 0]


@dataclass(frozen=True)
class GraphTensors:
    """A graph's static features as tensors on one device, ready for the networks."""

    graph: dgl.DGLGraph
    node: torch.Tensor
    edge: torch.Tensor
    topological_order: torch.Tensor
    num_nodes: int
    down_path: tuple[torch.Tensor, torch.Tensor] | None = None
    """``(rows, cols)``: op ``rows[k]`` has op ``cols[k]`` on its longest path to an exit, itself included
    (:func:`~workbench.learn.features.longest_path_members`); None unless asked for (``graph_tensors(paths=True)``)."""
    up_path: tuple[torch.Tensor, torch.Tensor] | None = None
    """The same for the longest path from an entry."""


_tensor_cache: weakref.WeakKeyDictionary[DataflowGraph, dict[str, GraphTensors]] = weakref.WeakKeyDictionary()


def graph_tensors(graph: DataflowGraph, device: torch.device, paths: bool = True) -> GraphTensors:
    """The bidirected DGL graph and feature tensors of ``graph`` on ``device`` (cached).

    ``paths``: include the longest-path members that SEL's path sums read. They hold an op per step of every op's
    path (n x depth pairs: most of the memory and time on a deep 100,000-op graph), so a policy that does not
    read them leaves them out.
    """
    per_device = _tensor_cache.setdefault(graph, {})
    key = str(device)

    def as_long(a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(a, dtype=torch.int64, device=device)

    if key not in per_device:
        feats = static_features(graph)

        dg = dgl.graph((torch.as_tensor(feats.src), torch.as_tensor(feats.dst)), num_nodes=graph.num_nodes)
        try:
            dg = dg.to(device)
        except (dgl.DGLError, RuntimeError):  # DGL built without CUDA: EdgeConv aggregates in torch instead
            pass
        per_device[key] = GraphTensors(
            graph=dg,
            node=torch.as_tensor(feats.node, device=device),
            edge=torch.as_tensor(feats.edge, device=device),
            topological_order=as_long(np.array(graph.topological_order)),
            num_nodes=graph.num_nodes,
        )
    if paths and per_device[key].down_path is None:
        down, up = (longest_path_members(graph, downward) for downward in (True, False))
        per_device[key] = dataclasses.replace(
            per_device[key], down_path=(as_long(down[0]), as_long(down[1])), up_path=(as_long(up[0]), as_long(up[1]))
        )
    return per_device[key]


def sums_before(parts: torch.Tensor, devices: np.ndarray, num_devices: int) -> torch.Tensor:
    """``(steps, devices, width)``: at step ``t``, per device, the sum of ``parts[s]`` over earlier steps ``s`` placed there."""
    steps = parts.shape[0]
    placed = parts.new_zeros(steps, num_devices, parts.shape[1])
    placed[torch.arange(steps, device=parts.device), torch.as_tensor(devices, device=parts.device)] = parts
    return torch.cumsum(placed, dim=0) - placed


def path_sum(embedding: torch.Tensor, path: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
    """Per op, the sum of ``embedding`` over the ops on its path (``path`` from :func:`graph_tensors` with ``paths=True``)."""
    if path is None:
        raise ValueError("path sums need graph_tensors(..., paths=True)")
    rows, cols = path
    return torch.zeros_like(embedding).index_add_(0, rows, embedding[cols])


# paper preset switches
def zscore(x: torch.Tensor, dim: int = 0, mask: torch.Tensor | None = None, unbiased: bool = False, eps: float = 1e-6) -> torch.Tensor:
    """``(x - mean) / (std + eps)`` along ``dim`` (over the rows ``mask`` keeps, when given): the paper's ``normalize_feat_state``.

    The paper's code (``scheduler/rl_agent.py``) z-scores with the population
    std and ``eps`` 1e-6, its path-sum embeddings with the sample std and 1e-8.
    A constant column maps to 0, with a zero gradient (no NaN).
    """
    weight = torch.ones_like(x) if mask is None else mask.to(x.dtype).unsqueeze(-1).expand_as(x)
    count = weight.sum(dim, keepdim=True)
    mean = (x * weight).sum(dim, keepdim=True) / count.clamp(min=1)
    squares = (((x - mean) * weight) ** 2).sum(dim, keepdim=True) / (count - 1 if unbiased else count).clamp(min=1)
    return (x - mean) / (squares.clamp(min=1e-30).sqrt() + eps) * weight


def numpy_zscore(x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """:func:`zscore` over the rows of a float64 array (population std), for rollouts' step loops."""
    scale = 1.0 / x.shape[0]
    centred = x - x.sum(axis=0) * scale
    return centred / (np.sqrt((centred * centred).sum(axis=0) * scale) + eps)


@dataclass(frozen=True)
class SpreadLayout:
    """Where :meth:`EdgeConv.spread_matrix` puts each edge's weights: a CSR layout of one DGL graph for one edge-network width.

    Edges are merged per (destination, source) pair (parallel edges add up);
    row ``v * columns + k`` holds column ``k`` of the weights of ``v``'s pairs.
    """

    pair_of_edge: torch.Tensor
    """``(edges,)``: the pair each edge adds into."""
    edge_in_degree: torch.Tensor
    """``(edges,)``: the in-degree of each edge's destination (the mean aggregator's divisor)."""
    entry: torch.Tensor
    """``(pairs * columns,)``: stored entry ``i`` is element ``entry[i]`` of the flattened ``(pairs, columns)`` weights."""
    crow: torch.Tensor
    """``(nodes * columns + 1,)``: the CSR row pointers."""
    col: torch.Tensor
    """``(pairs * columns,)``: each stored entry's source node."""


_layout_cache: weakref.WeakKeyDictionary[dgl.DGLGraph, dict[tuple[str, int], SpreadLayout]] = weakref.WeakKeyDictionary()


def spread_layout(graph: dgl.DGLGraph, columns: int, device: torch.device) -> SpreadLayout:
    """The :class:`SpreadLayout` of ``graph`` for ``columns`` weights per edge, as tensors on ``device`` (cached per graph object)."""
    per_key = _layout_cache.setdefault(graph, {})
    key = (str(device), columns)
    if key not in per_key:
        n = graph.num_nodes()
        src, dst = (ends.to(device) for ends in graph.edges())
        pairs, pair_of_edge = torch.unique(dst * n + src, return_inverse=True)  # sorted by destination, then source
        pair_dst = pairs // n
        degree = torch.bincount(pair_dst, minlength=n)
        first = torch.cumsum(degree, 0) - degree
        row_start = columns * first.unsqueeze(1) + torch.arange(columns, device=device) * degree.unsqueeze(1)
        rank = torch.arange(pairs.shape[0], device=device) - first[pair_dst]
        position = (row_start[pair_dst] + rank.unsqueeze(1)).reshape(-1)  # where (pair, k) is stored
        entry = torch.empty_like(position)
        entry[position] = torch.arange(position.shape[0], device=device)
        per_key[key] = SpreadLayout(
            pair_of_edge=pair_of_edge,
            edge_in_degree=torch.bincount(dst, minlength=n)[dst],
            entry=entry,
            crow=torch.cat([row_start.reshape(-1), position.new_full((1,), position.shape[0])]),
            col=(pairs % n)[entry // columns],
        )
    return per_key[key]


class EdgeConv(dgl.nn.NNConv):
    """``dgl.nn.NNConv`` whose ``edge_func`` is one linear layer, computed without per-edge matrices.

    With ``edge_func(z) = A z + a`` and ``A_k`` the ``(width x width)``
    matrix of column ``k`` of ``A``, an edge's message is
    ``h_src @ W(z) = sum_k z_k (h_src @ A_k) + h_src @ a``. Averaging (or
    summing) over a node's incoming edges commutes with the ``A_k``: a step
    aggregates ``z_k h_src`` per node and column ``k`` with one sparse
    product (the matrix of :meth:`spread_matrix`, built once per encoder
    pass), then applies every ``A_k`` and ``a`` in one dense product per
    node (:meth:`propagate`). Nothing grows with edges x width.
    """

    def __init__(self, width: int, edge_hidden: int, aggregator: str) -> None:
        super().__init__(width, width, edge_func=nn.Linear(edge_hidden, width * width), aggregator_type=aggregator)

    def forward(self, graph: dgl.DGLGraph, feat: torch.Tensor, efeat: torch.Tensor) -> torch.Tensor:
        return self.propagate(self.spread_matrix(graph, efeat), feat)

    def spread_matrix(self, graph: dgl.DGLGraph, efeat: torch.Tensor) -> torch.Tensor:
        """Sparse CSR ``(nodes * (edge_hidden + 1), nodes)``: row ``v * (edge_hidden + 1) + k``, column ``u`` holds column ``k``
        of ``[efeat, 1]`` summed over the edges ``u -> v`` (divided by ``v``'s in-degree with the mean aggregator)."""
        n, columns = graph.num_nodes(), efeat.shape[1] + 1
        layout = spread_layout(graph, columns, efeat.device)
        weights = torch.cat([efeat, efeat.new_ones(efeat.shape[0], 1)], dim=1)
        if self._aggre_type == "mean":
            weights = weights / layout.edge_in_degree.to(weights.dtype).unsqueeze(1)
        pairs = layout.entry.shape[0] // columns
        values = weights.new_zeros(pairs, columns).index_add_(0, layout.pair_of_edge, weights)
        with warnings.catch_warnings():  # torch 2.2 calls its CSR support beta; products and their gradients are what a test checks
            warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta", UserWarning)
            return torch.sparse_csr_tensor(layout.crow, layout.col, values.reshape(-1)[layout.entry], (n * columns, n))

    def propagate(self, spread: torch.Tensor, feat: torch.Tensor) -> torch.Tensor:
        """One step's output from :meth:`spread_matrix`'s matrix and the node features ``feat``: one row per node of the matrix."""
        columns = self.edge_func.in_features + 1
        return (spread @ feat).view(spread.shape[0] // columns, columns * self._in_src_feats) @ self.table() + self.bias

    def table(self) -> torch.Tensor:
        """``((edge_hidden + 1) * width, width)``: row ``(k, i)`` is row ``i`` of ``A_k`` (of ``a`` for ``k = edge_hidden``)."""
        linear = self.edge_func
        d_in, d_out, columns = self._in_src_feats, self._out_feats, linear.in_features + 1
        return (
            torch.cat([linear.weight, linear.bias.unsqueeze(1)], dim=1)
            .view(d_in, d_out, columns)
            .permute(2, 0, 1)
            .reshape(columns * d_in, d_out)
        )

    # paper preset switches
    def grouped(self, graph: dgl.DGLGraph, feat: torch.Tensor, edge_hidden: torch.Tensor, groups: tuple) -> torch.Tensor:
        """:meth:`forward` with one message matrix per distinct edge-feature row (``groups`` from :meth:`edge_groups`).

        ``edge_hidden`` holds the edge network's hidden rows of one edge per
        group; :meth:`message_matrices` of them can be passed instead, to build
        the matrices once for several steps.
        """
        order, lengths, _ = groups
        if order.numel() == 0:  # no edges, no messages (DGL's segment_mm cannot concatenate zero groups)
            return feat.new_zeros(feat.shape[0], self._out_feats) + self.bias
        matrices = edge_hidden if edge_hidden.dim() == 3 else self.message_matrices(edge_hidden)
        src, dst = graph.edges()
        src, dst = src.to(feat.device)[order], dst.to(feat.device)[order]
        messages = dgl.ops.segment_mm(feat[src], matrices, lengths)
        return aggregate(messages, dst, feat.shape[0], self._aggre_type) + self.bias

    def message_matrices(self, edge_hidden: torch.Tensor) -> torch.Tensor:
        """``(rows, width, width)``: the message matrix of each row of edge-network hidden features."""
        return self.edge_func(edge_hidden).view(edge_hidden.shape[0], self._in_src_feats, self._out_feats)

    @staticmethod
    def edge_groups(edge: torch.Tensor) -> tuple:
        """``(edge order sorted by distinct row, group lengths on the CPU, one edge of each group)`` for :meth:`grouped`."""
        _, inverse = torch.unique(edge, dim=0, return_inverse=True)
        order = torch.argsort(inverse, stable=True)
        lengths = torch.bincount(inverse).cpu()
        starts = torch.cumsum(lengths, 0) - lengths
        return order, lengths, order[starts.to(order.device)]


def aggregate(messages: torch.Tensor, dst: torch.Tensor, num_nodes: int, aggregator: str) -> torch.Tensor:
    """Sum or mean of ``messages`` per destination node, in plain torch (DGL's reducers where DGL cannot run)."""
    total = messages.new_zeros(num_nodes, messages.shape[1]).index_add_(0, dst, messages)
    if aggregator == "sum":
        return total
    count = torch.bincount(dst, minlength=num_nodes).clamp(min=1).to(messages.dtype)
    return total / count.unsqueeze(1)


class Encoder(nn.Module):
    """MPNN: project node features (``node_inputs`` columns), then ``steps`` rounds of NNConv + GRU at ``width``.

    ``zscore_inputs`` z-scores node and edge features over the graph first (the paper's code).
    """

    def __init__(
        self, width: int, steps: int, edge_hidden: int, aggregator: str, zscore_inputs: bool = False, node_inputs: int = len(NODE_FEATURES)
    ) -> None:
        super().__init__()
        self.width = width
        self.steps = steps
        self.zscore_inputs = zscore_inputs
        self.project = nn.Linear(node_inputs, width)
        self.edge_net = nn.Sequential(nn.Linear(len(EDGE_FEATURES), edge_hidden), nn.ReLU())
        self.conv = EdgeConv(width, edge_hidden, aggregator)
        self.gru = nn.GRUCell(width, width)

    def forward(self, inputs: GraphTensors) -> torch.Tensor:
        """Embeddings ``(n, width)`` of every op."""
        node, edge = (zscore(inputs.node), zscore(inputs.edge)) if self.zscore_inputs else (inputs.node, inputs.edge)
        hidden = torch.relu(self.project(node))
        edge_hidden = self.edge_net(edge)
        if self.conv.edge_func.in_features >= GROUPED_EDGE_HIDDEN:
            groups = EdgeConv.edge_groups(inputs.edge)
            matrices = self.conv.message_matrices(edge_hidden[groups[2]])
            for _ in range(self.steps):
                hidden = self.gru(torch.relu(self.conv.grouped(inputs.graph, hidden, matrices, groups)), hidden)
            return hidden
        spread = self.conv.spread_matrix(inputs.graph, edge_hidden)
        if torch.is_grad_enabled() or hidden.device.type != "cpu":
            for _ in range(self.steps):
                hidden = self.gru(torch.relu(self.conv.propagate(spread, hidden)), hidden)
            return hidden
        return self._compiled_steps(hidden, spread, edge_hidden.shape[1] + 1)

    def _compiled_steps(self, hidden: torch.Tensor, spread: torch.Tensor, columns: int) -> torch.Tensor:
        """The steps without gradients on the CPU, in blocks of at most :data:`ENCODER_BLOCK` nodes, the sparse product compiled
        (:func:`_spread_rows`: no (nodes x columns, width) product at once, and no zero-filled one per step): the same
        embeddings as :meth:`EdgeConv.propagate`, bit for bit (tested)."""
        crow, col, values = (part.numpy() for part in (spread.crow_indices(), spread.col_indices(), spread.values()))
        table, bounds = self.conv.table(), node_blocks(hidden.shape[0], ENCODER_BLOCK)
        gathered = np.empty((max(b - a for a, b in pairwise(bounds)), columns * self.width), dtype=np.float32)
        for _ in range(self.steps):
            done, feat = torch.empty_like(hidden), hidden.numpy()
            for start, stop in pairwise(bounds):
                rows = torch.from_numpy(_spread_rows(crow, col, values, feat, start, columns, gathered[: stop - start]))
                done[start:stop] = self.gru(torch.relu(rows @ table + self.conv.bias), hidden[start:stop])
            hidden = done
        return hidden


def node_blocks(total: int, nodes: int) -> list[int]:
    """Bounds cutting ``total`` nodes into as few blocks of at most ``nodes`` as will do, of equal size (give or take one), so
    none is tiny: a product of a few rows takes another BLAS path, whose sums can round differently (measured: 1 to 3 rows)."""
    count = max(1, -(-total // nodes))
    return [total * i // count for i in range(count + 1)]


@njit(cache=True, fastmath={"contract"})
def _spread_rows(
    crow: np.ndarray, col: np.ndarray, values: np.ndarray, feat: np.ndarray, first: int, columns: int, out: np.ndarray
) -> np.ndarray:  # pragma: no cover - compiled
    """Rows ``first .. first + len(out)`` of ``(spread @ feat).view(nodes, columns * width)`` for :meth:`EdgeConv.spread_matrix`'s
    CSR matrix, into ``out``. Each sum runs over the row's entries in order with fused multiply-adds (``contract``), as
    MKL's sparse product does: the same float32 values, bit for bit, without its zero-filled output and copies (and
    without the rows whose weights are all 0, where the edge network's ReLU is off on every edge: three of the shipped
    zero-shot policy's eight columns)."""
    width = feat.shape[1]
    for node in range(out.shape[0]):
        for k in range(columns):
            row, base = (first + node) * columns + k, k * width
            out[node, base : base + width] = 0.0
            if not values[crow[row] : crow[row + 1]].any():
                continue  # all weights 0 (a ReLU column of the edge network that is off): the sum of finite terms is +0.0 either way
            for entry in range(crow[row], crow[row + 1]):
                weight, source = values[entry], col[entry]
                for c in range(width):
                    out[node, base + c] += weight * feat[source, c]
    return out
