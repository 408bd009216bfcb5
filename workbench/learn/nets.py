"""Network building blocks shared by the learned policies: the MPNN encoder and MLP heads.

The encoder is the message-passing neural network of Gilmer et al. (2017)
that DOPPLER uses: an edge-conditioned convolution (``dgl.nn.NNConv``)
followed by a GRU, repeated for a fixed number of steps on the bidirected
graph. The edge network (linear, ReLU, linear) maps an edge's features to
its ``width x width`` message matrix; its first layer runs once per forward
pass, its last is NNConv's ``edge_func``.

:class:`EdgeConv` is ``dgl.nn.NNConv`` with the same parameters and the same
output (a test checks it against ``NNConv.forward``), computed about 10x
faster on CPU: DGL's NNConv materialises every edge's message matrix and
broadcasts source features against them into a ``(nodes, in, out)`` buffer
per call; here all messages come from one dense matrix product and DGL only
averages them.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from itertools import pairwise

import dgl
import dgl.function as fn
import numpy as np
import torch
from torch import nn

from ..graph import DataflowGraph
from .features import EDGE_FEATURES, NODE_FEATURES, static_features

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
]


ACTIVATIONS = ("leaky_relu", "relu", "tanh")


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


def numpy_mlp(layers: nn.Sequential):
    """A numpy function computing ``layers`` (as :func:`mlp` builds them) on float64 rows, without autograd.

    Rollouts call it once per step: tiny numpy products avoid torch's per-op
    overhead and its thread pool, which stalls on busy machines.
    """
    steps = []
    for layer in layers:
        if isinstance(layer, nn.Linear):
            weight, bias = layer.weight.detach().cpu().double().numpy().T, layer.bias.detach().cpu().double().numpy()
            steps.append(lambda x, w=weight, b=bias: x @ w + b)
        elif isinstance(layer, nn.LeakyReLU):
            steps.append(lambda x, slope=layer.negative_slope: np.where(x > 0, x, slope * x))
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

    def numpy_finish(self):
        """:meth:`finish` as a numpy function on float64 rows (for rollouts' step loops)."""
        rest = numpy_mlp(self.layers[1:])
        return lambda first: rest(first)[..., 0]


@dataclass(frozen=True)
class GraphTensors:
    """A graph's static features as tensors on one device, ready for the networks."""

    graph: dgl.DGLGraph
    node: torch.Tensor
    edge: torch.Tensor
    down_path: tuple[torch.Tensor, torch.Tensor]
    up_path: tuple[torch.Tensor, torch.Tensor]
    topological_order: torch.Tensor
    num_nodes: int


_tensor_cache: weakref.WeakKeyDictionary[DataflowGraph, dict[str, GraphTensors]] = weakref.WeakKeyDictionary()


def graph_tensors(graph: DataflowGraph, device: torch.device) -> GraphTensors:
    """The bidirected DGL graph and feature tensors of ``graph`` on ``device`` (cached)."""
    per_device = _tensor_cache.setdefault(graph, {})
    key = str(device)
    if key not in per_device:
        feats = static_features(graph)

        def as_long(a: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(a, dtype=torch.int64, device=device)

        dg = dgl.graph((torch.as_tensor(feats.src), torch.as_tensor(feats.dst)), num_nodes=graph.num_nodes)
        try:
            dg = dg.to(device)
        except (dgl.DGLError, RuntimeError):  # DGL built without CUDA: EdgeConv aggregates in torch instead
            pass
        per_device[key] = GraphTensors(
            graph=dg,
            node=torch.as_tensor(feats.node, device=device),
            edge=torch.as_tensor(feats.edge, device=device),
            down_path=(as_long(feats.down_path[0]), as_long(feats.down_path[1])),
            up_path=(as_long(feats.up_path[0]), as_long(feats.up_path[1])),
            topological_order=as_long(np.array(graph.topological_order)),
            num_nodes=graph.num_nodes,
        )
    return per_device[key]


def sums_before(parts: torch.Tensor, devices: np.ndarray, num_devices: int) -> torch.Tensor:
    """``(steps, devices, width)``: at step ``t``, per device, the sum of ``parts[s]`` over earlier steps ``s`` placed there."""
    steps = parts.shape[0]
    placed = parts.new_zeros(steps, num_devices, parts.shape[1])
    placed[torch.arange(steps, device=parts.device), torch.as_tensor(devices, device=parts.device)] = parts
    return torch.cumsum(placed, dim=0) - placed


def path_sum(embedding: torch.Tensor, path: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Per op, the sum of ``embedding`` over the ops on its path (``path`` from :func:`graph_tensors`)."""
    rows, cols = path
    return torch.zeros_like(embedding).index_add_(0, rows, embedding[cols])


class EdgeConv(dgl.nn.NNConv):
    """``dgl.nn.NNConv`` whose ``edge_func`` is one linear layer, computed without per-edge matrices.

    With ``edge_func(z) = A z + a``, an edge's message ``h_src @ W(z)`` equals
    ``(h_src ⊗ [z, 1]) @ [A, a]`` rearranged: one dense matrix product over all
    edges instead of a ``(width x width)`` matrix per edge.
    """

    def __init__(self, width: int, edge_hidden: int, aggregator: str) -> None:
        super().__init__(width, width, edge_func=nn.Linear(edge_hidden, width * width), aggregator_type=aggregator)

    def forward(self, graph: dgl.DGLGraph, feat: torch.Tensor, efeat: torch.Tensor) -> torch.Tensor:
        linear = self.edge_func
        d_in, d_out, k = self._in_src_feats, self._out_feats, linear.in_features
        table = (
            torch.cat([linear.weight, linear.bias.unsqueeze(1)], dim=1)
            .view(d_in, d_out, k + 1)
            .transpose(1, 2)
            .reshape(d_in * (k + 1), d_out)
        )
        src, dst = graph.edges()
        on_graph = src.device == feat.device
        if not on_graph:  # a DGL build without CUDA keeps the graph on the CPU
            src, dst = src.to(feat.device), dst.to(feat.device)
        edge_inputs = torch.cat([efeat, efeat.new_ones(efeat.shape[0], 1)], dim=1)
        outer = (feat[src].unsqueeze(2) * edge_inputs.unsqueeze(1)).reshape(efeat.shape[0], d_in * (k + 1))
        messages = outer @ table
        if not on_graph:
            return aggregate(messages, dst, feat.shape[0], self._aggre_type) + self.bias
        with graph.local_scope():
            graph.edata["m"] = messages
            graph.update_all(fn.copy_e("m", "m"), self.reducer("m", "neigh"))
            return graph.dstdata["neigh"] + self.bias


def aggregate(messages: torch.Tensor, dst: torch.Tensor, num_nodes: int, aggregator: str) -> torch.Tensor:
    """Sum or mean of ``messages`` per destination node, in plain torch (DGL's reducers where DGL cannot run)."""
    total = messages.new_zeros(num_nodes, messages.shape[1]).index_add_(0, dst, messages)
    if aggregator == "sum":
        return total
    count = torch.bincount(dst, minlength=num_nodes).clamp(min=1).to(messages.dtype)
    return total / count.unsqueeze(1)


class Encoder(nn.Module):
    """MPNN: project node features (``node_inputs`` columns), then ``steps`` rounds of NNConv + GRU at ``width``."""

    def __init__(self, width: int, steps: int, edge_hidden: int, aggregator: str, node_inputs: int = len(NODE_FEATURES)) -> None:
        super().__init__()
        self.width = width
        self.steps = steps
        self.project = nn.Linear(node_inputs, width)
        self.edge_net = nn.Sequential(nn.Linear(len(EDGE_FEATURES), edge_hidden), nn.ReLU())
        self.conv = EdgeConv(width, edge_hidden, aggregator)
        self.gru = nn.GRUCell(width, width)

    def forward(self, inputs: GraphTensors) -> torch.Tensor:
        """Embeddings ``(n, width)`` of every op."""
        hidden = torch.relu(self.project(inputs.node))
        edge_hidden = self.edge_net(inputs.edge)
        for _ in range(self.steps):
            hidden = self.gru(torch.relu(self.conv(inputs.graph, hidden, edge_hidden)), hidden)
        return hidden
