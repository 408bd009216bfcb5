"""Run a graph imported from a PyTorch model with the model's own ops.

:class:`ModuleKernels` plugs into :class:`~workbench.systems.LocalExecutor`
(``LocalExecutor(devices, kernels=ModuleKernels(graph_module, inputs))``) and
executes, for each op of the dataflow graph, the ``torch.fx`` nodes it stands
for, on its worker's device, with a replica of the module's parameters there.
An op's output is the dict of the values its nodes produced; a cross-device
edge copies that dict's tensors into the consumer's device memory.

Which fx nodes an op runs: ``op_nodes[op]`` when given, else the graph's
``metadata["fx_nodes"]`` (a list per op, as a coarsening importer keeps it),
else the one node named like the op (``graph.names[op]``). Every value an op
reads must be computed by the op itself, arrive along one of its in-edges, or
be a model input or parameter; otherwise the op fails with a message naming
the missing node. The graph's compute costs do not matter here: each op takes
as long as the model's own kernels take. After a run, :attr:`outputs` holds
the values the model's output node reads, for checking against ``module(*inputs)``.
"""

from __future__ import annotations

import copy
import threading
from typing import Any, Sequence

import numpy as np
import torch
import torch.fx

from ..graph import DataflowGraph
from .executor import OpKernels, Worker, _stream

__all__ = ["ModuleKernels"]


class ModuleKernels(OpKernels):
    """The module's own fx ops per dataflow op (see the module docstring).

    Args:
        module: a ``torch.fx.GraphModule`` (``torch.fx.symbolic_trace(model)``).
        example_inputs: one tensor per placeholder of the fx graph, in order.
        op_nodes: fx node names per op (default: from metadata or op names).
    """

    def __init__(self, module: torch.fx.GraphModule, example_inputs: Sequence[Any], op_nodes: Sequence[Sequence[str]] | None = None) -> None:
        if not isinstance(module, torch.fx.GraphModule):
            raise TypeError(f"ModuleKernels needs a torch.fx.GraphModule, got {type(module).__name__}; trace it with torch.fx.symbolic_trace")
        placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(example_inputs):
            raise ValueError(f"the module takes {len(placeholders)} inputs ({', '.join(n.name for n in placeholders)}) but {len(example_inputs)} were given")
        self.module = module.eval()
        self.inputs = dict(zip((n.name for n in placeholders), example_inputs))
        self.op_nodes = None if op_nodes is None else [list(names) for names in op_nodes]
        self.nodes = {n.name: n for n in module.graph.nodes}
        self.output_node = next(n for n in module.graph.nodes if n.op == "output")
        self.outputs: dict[str, Any] = {}
        self._plan: list[list[torch.fx.Node]] = []
        self._replicas: dict[str, torch.nn.Module] = {}
        self._constants: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def setup(self, graph: DataflowGraph, assignment: np.ndarray, workers: Sequence[Worker], time_scale: float) -> dict[str, Any]:
        names = self.op_nodes or graph.metadata.get("fx_nodes") or [[name] for name in (graph.names or ())]
        if len(names) != graph.num_nodes:
            raise ValueError(f"ModuleKernels knows fx nodes for {len(names)} ops but the graph has {graph.num_nodes}; give op_nodes or names")
        plan = []
        for op, op_names in enumerate(names):
            missing = [name for name in op_names if name not in self.nodes]
            if missing:
                raise ValueError(f"op {op} ({graph.op_name(op)}) names fx node {missing[0]!r}, which the module's graph does not have")
            plan.append([self.nodes[name] for name in op_names])
        self._plan = plan
        for worker in workers:
            key = str(worker.device)
            if key not in self._replicas:
                self._replicas[key] = copy.deepcopy(self.module).to(worker.device)
        self.outputs = {}
        return {"kernel": "torch module ops", "fx_nodes": sum(len(p) for p in plan)}

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
            try:
                return self._constant(arg, worker)
            except KeyError:
                raise ValueError(f"op {op} needs fx node {arg.name!r}, which neither it nor an op feeding it computes") from None

        with torch.no_grad(), _stream(worker):
            for node in self._plan[op]:
                args = torch.fx.node.map_arg(node.args, value)
                kwargs = torch.fx.node.map_arg(node.kwargs, value)
                if node.op == "call_module":
                    env[node.name] = replica.get_submodule(str(node.target))(*args, **kwargs)
                elif node.op == "call_function":
                    env[node.name] = node.target(*args, **kwargs)
                elif node.op == "call_method":
                    env[node.name] = getattr(args[0], str(node.target))(*args[1:], **kwargs)
                else:
                    env[node.name] = value(node)
        produced = {node.name: env[node.name] for node in self._plan[op]}
        wanted = {arg.name for arg in self.output_node.all_input_nodes}
        with self._lock:
            self.outputs.update({k: v for k, v in produced.items() if k in wanted})
        return produced

    def send(self, edge: int, value: Any, source: Worker, target: Worker) -> Any:
        with _stream(target, target.copy_stream):
            moved = {k: v.to(target.device, copy=True, non_blocking=target.copy_stream is not None) if isinstance(v, torch.Tensor) else v for k, v in value.items()}
        target.sync(target.copy_stream)
        return moved

    def teardown(self) -> None:
        self._constants = {}
        self._replicas = {}

    def result(self) -> Any:
        """The model's output as the last run computed it (the fx output node's structure)."""
        return torch.fx.node.map_arg(self.output_node.args[0], lambda arg: self.outputs[arg.name])
