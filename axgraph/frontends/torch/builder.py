"""An FX graph of ATen ops as a core Function, one declared rule per op."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from ... import core
from ...dims import Dim, DimLike
from ...errors import AxgraphError
from . import ops_elementwise, ops_nn, ops_reduce, ops_shape  # noqa: F401 - they fill RULES
from .errors import TorchBridgeError, node_location, node_source
from .registry import RULES, Arguments, op_name
from .types import element_type, shape_of, sym_dim


@dataclass(frozen=True)
class Output:
    """Where one graph output comes from: a result of the Function (`result`), an input
    passed straight through (`argument`), a size (`dim`) or a constant (`value`).

    A result torch traced with a permuted layout is computed in that memory order and
    handed back as the same permuted view (`permutation`): PyTorch code reading it may
    rely on its strides. An input, or a transpose of one (a weight transposed and saved
    for the backward graph), comes back as a view of the input (`argument` with its
    `permutation`), as eager PyTorch would give it; where torch's graph computed a new
    tensor there (a clone the core saw through), the view is copied (`copy`): PyTorch
    code may write to it, and the input must not change."""

    kind: str
    index: int = 0
    dim: DimLike = 0
    value: Any = None
    permutation: Optional[Tuple[int, ...]] = None
    copy: bool = False


@dataclass
class BuiltGraph:
    """A core Function for an FX graph, and how its inputs and outputs map to torch's.

    Attributes
    ----------
    function : core.Function or None
        The Function (None when every output is an input or a size).
    tensor_inputs : list of int
        For each Function parameter, the position of its graph input.
    outputs : list of Output
        One per graph output, in order.
    single : bool
        Whether the graph returns one value rather than a tuple.
    size_inputs : list of (int, str)
        The graph inputs that are sizes given as plain variables: position and name.
    """

    function: Optional[core.Function]
    tensor_inputs: List[int]
    outputs: List[Output]
    single: bool
    size_inputs: List[Tuple[int, str]]


class GraphBuilder:
    """Walks an FX graph in order, giving each node the core value its rule builds."""

    def __init__(self, graph: torch.fx.Graph, input_values: Optional[Sequence[Any]] = None):
        self.graph = graph
        self.values: Dict[torch.fx.Node, Any] = {}
        self.parameters: List[core.Node] = []
        self.tensor_inputs: List[int] = []
        self.size_inputs: List[Tuple[int, str]] = []
        self.input_values: Dict[int, Any] = {}
        self._given = input_values

    # -- what rules call --------------------------------------------------------------------

    def resolve(self, value: Any) -> Any:
        """The core value of an FX argument (nodes looked up, lists resolved item by item)."""
        if isinstance(value, torch.fx.Node):
            return self.values[value]
        if isinstance(value, (list, tuple)):
            return type(value)(self.resolve(v) for v in value)
        if isinstance(value, torch.SymInt):
            return sym_dim(value)
        return value

    @staticmethod
    def meta(node: Any) -> Any:
        """The traced value of an FX node (a fake tensor, a SymInt, or a tuple of them)."""
        return node.meta.get("val")

    def out_type(self, node: torch.fx.Node, index: Optional[int] = None
                 ) -> Tuple[core.ElementType, core.Shape]:
        """The element type and shape torch traced for a node's result (or its `index`-th)."""
        value = self.meta(node)
        if index is not None:
            value = value[index]
        et = element_type(value.dtype)
        assert et is not None, "unsupported_reason refused this element type"
        return et, shape_of(value)

    # -- the walk ---------------------------------------------------------------------------

    def build(self) -> BuiltGraph:
        """The core Function computing the graph's outputs from its tensor inputs."""
        position = 0
        outputs: Any = None
        for node in self.graph.nodes:
            if node.op == "placeholder":
                self._placeholder(node, position)
                position += 1
            elif node.op == "call_function":
                self.values[node] = self._call(node)
            elif node.op == "get_attr":
                self.values[node] = self._constant(node)
            elif node.op == "output":
                outputs = node.args[0]
            else:
                raise TorchBridgeError(f"the bridge compiles ATen graphs of call_function "
                                       f"nodes; {node.op} {node.name} is not one",
                                       node_location(node))
        single = not isinstance(outputs, (tuple, list))
        return self._outputs([outputs] if single else list(outputs), single)

    def _input_meta(self, node: torch.fx.Node, position: int) -> Any:
        if self._given is not None:
            return self._given[position]
        return self.meta(node)

    def _placeholder(self, node: torch.fx.Node, position: int) -> None:
        value = self.input_values[position] = self._input_meta(node, position)
        if isinstance(value, torch.Tensor):
            et = element_type(value.dtype)
            if et is None:
                raise TorchBridgeError(f"input {node.name} has element type {value.dtype}, "
                                       f"which the bridge does not compile", node_location(node))
            parameter = core.Parameter(et, shape_of(value), name=node.name)
            self.parameters.append(parameter)
            self.tensor_inputs.append(position)
            self.values[node] = parameter
        elif isinstance(value, (torch.SymInt, int)):
            dim = self.values[node] = sym_dim(value)
            if isinstance(dim, Dim) and dim.is_symbol:
                self.size_inputs.append((position, dim.name))
        else:
            self.values[node] = value

    def _constant(self, node: torch.fx.Node) -> core.Node:
        """A tensor the graph holds (a `torch.tensor(...)` in the model) as a Constant."""
        value = attribute_value(node)
        et = element_type(value.dtype) if isinstance(value, torch.Tensor) else None
        if et is None:
            raise TorchBridgeError(f"the graph's constant {node.target} is not a tensor the "
                                   f"bridge compiles ({type(value).__name__})",
                                   node_location(node))
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        with unset_fake_temporarily():  # compiling runs under fake tensors; this one is real
            array = value.detach().numpy().copy()
        return core.Constant(et, tuple(value.shape), array)

    def _call(self, node: torch.fx.Node) -> Any:
        found = RULES.get(node.target)
        location = node_location(node)
        if found is None:
            raise TorchBridgeError(f"{op_name(node.target)} has no rule", location)
        try:
            with core.at_location(location):
                return found.build(self, node, Arguments(node, self.resolve))
        except TorchBridgeError:
            raise
        except Exception as error:  # noqa: BLE001 - any failure of a rule names the op and line
            reason = error.message if isinstance(error, AxgraphError) else \
                f"{type(error).__name__}: {error}"
            raise TorchBridgeError(
                f"{op_name(node.target)} ({node_source(node) or node.name}) could not be "
                f"built from core ops: {reason}", location) from error

    def _input_view(self, value: core.Node, item: Any, parameter_positions: Dict[int, int]
                    ) -> Optional[Tuple[int, Optional[Tuple[int, ...]]]]:
        """(graph input, permutation) when an output is an input or a transpose of one
        with the strides torch traced: handed back as a view of the input (as eager
        PyTorch gives it), nothing computed."""
        permutation = None
        if isinstance(value, core.Transpose):
            permutation = tuple(value.attributes["permutation"])
            value = value.inputs[0]
        if id(value) not in parameter_positions:
            return None
        position = self.tensor_inputs[parameter_positions[id(value)]]
        if permutation is not None:
            source, traced = self.input_values.get(position), self.meta(item)
            if not (isinstance(source, torch.Tensor) and isinstance(traced, torch.Tensor)
                    and source.permute(permutation).stride() == traced.stride()):
                return None
        return position, permutation

    def _outputs(self, outputs: List[Any], single: bool) -> BuiltGraph:
        results: List[core.Node] = []
        index_of: Dict[int, int] = {}
        described: List[Output] = []
        parameter_positions = {id(p): i for i, p in enumerate(self.parameters)}
        for item in outputs:
            value = self.resolve(item)
            view = (self._input_view(value, item, parameter_positions)
                    if isinstance(value, core.Node) else None)
            if value is None or isinstance(value, (bool, float)):
                described.append(Output("value", value=value))
            elif view is not None:
                described.append(Output("argument", view[0], permutation=view[1],
                                        copy=not _aliases_an_input(item)))
            elif isinstance(value, core.Node):
                order = memory_order(self.meta(item)) if isinstance(item, torch.fx.Node) else None
                if order is not None:
                    value = core.Transpose(value, order)
                if id(value) not in index_of:
                    index_of[id(value)] = len(results)
                    results.append(value)
                inverse = None if order is None else tuple(order.index(i) for i in range(len(order)))
                described.append(Output("result", index_of[id(value)], permutation=inverse))
            else:
                described.append(Output("dim", dim=value))
        function = core.Function(results, self.parameters) if results else None
        return BuiltGraph(function, self.tensor_inputs, described, single, self.size_inputs)


def _aliases_an_input(item: Any) -> bool:
    """Whether torch's own graph hands this output back as (a view of) its input: a
    placeholder, or a view op's result (anything else is a new tensor in PyTorch)."""
    if not isinstance(item, torch.fx.Node):
        return False
    if item.op == "placeholder":
        return True
    target = item.target
    return item.op == "call_function" and bool(getattr(target, "is_view", False))


def attribute_value(node: torch.fx.Node) -> Any:
    """The value a get_attr node reads from its module."""
    value: Any = node.graph.owning_module
    for part in str(node.target).split("."):
        value = getattr(value, part)
    return value


def memory_order(value: Any) -> Optional[Tuple[int, ...]]:
    """The dims of a traced tensor from outermost to innermost in memory, when its layout
    is a permutation of a row-major one other than the identity (else None)."""
    if not isinstance(value, torch.Tensor) or value.dim() < 2:
        return None
    strides = []
    for size, stride in zip(value.shape, value.stride()):
        if not isinstance(size, int) or not isinstance(stride, int):
            return None  # symbolic: kept row-major
        strides.append(stride if size != 1 else None)
    present = [i for i, st in enumerate(strides) if st is not None]
    order = sorted(present, key=lambda i: -strides[i])  # type: ignore[operator]
    if order == present:
        return None
    # size-1 dims go where row-major puts them relative to their neighbours: outermost
    singles = [i for i, st in enumerate(strides) if st is None]
    order = singles + order
    expected = 1
    for i in reversed(order):
        if strides[i] is not None and strides[i] != expected:
            return None  # not dense (expanded or overlapping): kept row-major
        expected *= value.shape[i]
    return tuple(order)


def build_graph(graph: torch.fx.Graph, input_values: Optional[Sequence[Any]] = None
                ) -> BuiltGraph:
    """The core Function of an FX graph of ATen ops whose every op has a rule.

    Parameters
    ----------
    graph : torch.fx.Graph
        The graph, its nodes carrying torch's traced values (``meta["val"]``).
    input_values : sequence, optional
        Traced values for its placeholders, where their own metadata lacks them.

    Returns
    -------
    BuiltGraph
        The Function and how it maps onto the graph's inputs and outputs.

    Raises
    ------
    TorchBridgeError
        An op has no rule, or its rule could not build it; the message names the
        user's source line.
    """
    return GraphBuilder(graph, input_values).build()


__all__ = ["Output", "BuiltGraph", "GraphBuilder", "build_graph"]
