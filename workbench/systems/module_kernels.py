"""Run a graph imported from a PyTorch model with the model's own ops.

:class:`ModuleKernels` plugs into :class:`~workbench.systems.LocalExecutor`
(``LocalExecutor(devices, kernels=ModuleKernels(graph_module, inputs))``) and
executes, for each op of the dataflow graph, the ``torch.fx`` nodes it stands
for, on its worker's device, with a replica of the module's parameters there.
An op's output is the dict of the values its nodes produced; a cross-device
edge copies that dict's tensors into the consumer's device memory.

Which fx nodes an op runs: ``op_nodes[op]`` when given, else the graph's
``metadata["fx_nodes"]`` (a list per op), else the one node named like the op
(``graph.names[op]``, as :func:`workbench.from_torch` names them; a coarsened
graph needs ``op_nodes``, built from its ``coarse_groups``). Every value an op
reads must be computed by the op itself, arrive along one of its in-edges, be
a model input or parameter, or come from a node no op stands for: those
that hold no tensor (shapes, sizes) are evaluated once at setup, the others
where they are needed. Otherwise the op fails with a message naming the
missing node. The graph's compute costs do not matter here: each op takes
as long as the model's own kernels take. After a run, :attr:`outputs` holds
the values the model's output node reads, for checking against ``module(*inputs)``.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import torch
import torch.fx
from torch.utils._pytree import tree_flatten

from ..graph import DataflowGraph
from .kernels import OpKernels, Worker, on_stream

__all__ = ["ModuleKernels"]


class ModuleKernels(OpKernels):
    """The module's own fx ops per dataflow op (see the module docstring).

    Args:
        module: the model, or its ``torch.fx.GraphModule`` (traced here when
            not; ``symbolic_trace`` names nodes the same way every time).
        example_inputs: one tensor per placeholder of the fx graph, in order.
        op_nodes: fx node names per op (default: from metadata or op names).
    """

    def __init__(self, module: torch.nn.Module, example_inputs: Sequence[Any], op_nodes: Sequence[Sequence[str]] | None = None) -> None:
        if not isinstance(module, torch.fx.GraphModule):
            module = torch.fx.symbolic_trace(module)
        placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(example_inputs):
            raise ValueError(
                f"the module takes {len(placeholders)} inputs ({', '.join(n.name for n in placeholders)}) "
                f"but {len(example_inputs)} were given"
            )
        self.module = module.eval()
        self.inputs = dict(zip((n.name for n in placeholders), example_inputs, strict=True))
        self.op_nodes = None if op_nodes is None else [list(names) for names in op_nodes]
        self.nodes = {n.name: n for n in module.graph.nodes}
        self.order = {n: i for i, n in enumerate(module.graph.nodes)}
        self._owned: set[str] = set()
        self._static: dict[str, Any] = {}
        self.output_node = next(n for n in module.graph.nodes if n.op == "output")
        self.outputs: dict[str, Any] = {}
        self._plan: list[list[torch.fx.Node]] = []
        self._replicas: dict[str, torch.nn.Module] = {}
        self._constants: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def setup(self, graph: DataflowGraph, assignment: np.ndarray, workers: Sequence[Worker], time_scale: float) -> dict[str, Any]:
        if self.op_nodes is None and "coarse_groups" in graph.metadata:
            raise ValueError(
                "this graph is coarsened: give op_nodes, the fx node names of each coarse op, for example "
                "[[fine.names[i] for i in group] for group in graph.metadata['coarse_groups']] with the graph before coarsening"
            )
        names = self.op_nodes or graph.metadata.get("fx_nodes") or [[name] for name in (graph.names or ())]
        if len(names) != graph.num_nodes:
            raise ValueError(
                f"ModuleKernels knows fx nodes for {len(names)} ops but the graph has {graph.num_nodes}; give op_nodes or names"
            )
        plan = []
        for op, op_names in enumerate(names):
            missing = [name for name in op_names if name not in self.nodes]
            if missing:
                raise ValueError(f"op {op} ({graph.op_name(op)}) names fx node {missing[0]!r}, which the module's graph does not have")
            plan.append(sorted((self.nodes[name] for name in op_names), key=self.order.__getitem__))
        self._plan = plan
        self._owned = {node.name for nodes in plan for node in nodes}
        self._static = self._static_values()
        for worker in workers:
            key = str(worker.device)
            if key not in self._replicas:
                self._replicas[key] = copy.deepcopy(self.module).to(worker.device)
        self.outputs = {}
        return {"kernel": "torch module ops", "fx_nodes": sum(len(p) for p in plan)}

    def _static_values(self) -> dict[str, Any]:
        """Values of nodes no op stands for that hold no tensor (shapes, sizes): fixed for these inputs."""
        static: dict[str, Any] = {}
        owned = self._owned

        class Recorder(torch.fx.Interpreter):
            def run_node(self, node: torch.fx.Node) -> Any:
                result = super().run_node(node)
                if node.op.startswith("call") and node.name not in owned:
                    leaves, _ = tree_flatten(result)
                    if not any(isinstance(leaf, torch.Tensor) for leaf in leaves):
                        static[node.name] = result
                return result

        with torch.no_grad():
            Recorder(self.module).run(*self.inputs.values())
        return static

    def _constant(self, node: torch.fx.Node, worker: Worker) -> Any:
        key = (node.name, str(worker.device))
        with self._lock:
            if key not in self._constants:
                if node.op == "placeholder":
                    value = self.inputs[node.name]
                    self._constants[key] = value.to(worker.device) if isinstance(value, torch.Tensor) else value
                elif node.op == "get_attr":
                    value = self._replicas[str(worker.device)]
                    for part in str(node.target).split("."):
                        value = getattr(value, part)
                    self._constants[key] = value
                else:
                    raise KeyError(node.name)
            return self._constants[key]

    def run(self, op: int, inputs: dict[int, Any], worker: Worker, stop: threading.Event) -> Any:
        env: dict[str, Any] = {}
        for received in inputs.values():
            env.update(received)
        replica = self._replicas[str(worker.device)]

        def value(arg: torch.fx.Node) -> Any:
            if arg.name in env:
                return env[arg.name]
            if arg.name in self._static:
                return self._static[arg.name]
            if arg.op in ("placeholder", "get_attr"):
                return self._constant(arg, worker)
            if arg.name in self._owned:
                raise ValueError(f"op {op} needs fx node {arg.name!r}, which another op computes but no edge brings here")
            env[arg.name] = call(arg)  # a node no op stands for (a shape query, say): computed where needed
            return env[arg.name]

        def call(node: torch.fx.Node) -> Any:
            args = torch.fx.node.map_arg(node.args, value)
            kwargs = torch.fx.node.map_arg(node.kwargs, value)
            if node.op == "call_module":
                return replica.get_submodule(str(node.target))(*args, **kwargs)
            if node.op == "call_function":
                return cast(Callable[..., Any], node.target)(*args, **kwargs)
            if node.op == "call_method":
                return getattr(args[0], str(node.target))(*args[1:], **kwargs)
            return value(node)

        with torch.no_grad(), on_stream(worker):
            for node in self._plan[op]:
                env[node.name] = call(node)
        produced = {node.name: env[node.name] for node in self._plan[op]}
        wanted = {arg.name for arg in self.output_node.all_input_nodes}
        with self._lock:
            self.outputs.update({k: v for k, v in produced.items() if k in wanted})
        return produced

    def send(self, edge: int, value: Any, source: Worker, target: Worker) -> Any:
        with on_stream(target, target.copy_stream):
            moved = {
                k: v.to(target.device, copy=True, non_blocking=target.copy_stream is not None) if isinstance(v, torch.Tensor) else v
                for k, v in value.items()
            }
        target.sync(target.copy_stream)
        return moved

    def teardown(self) -> None:
        self._constants = {}
        self._replicas = {}

    def result(self) -> Any:
        """The model's output as the last run computed it (the fx output node's structure)."""
        return torch.fx.node.map_arg(self.output_node.args[0], lambda arg: self.outputs[arg.name])
