"""ONNX export: an axes-graph computation written as an ONNX model file.

The computation is lowered to the core IR and optimized as every compiling
transformer does (axgraph/lowering, axgraph/passes), and each core node is
written by the rule its class has in `export_rules.RULES`. Exporting from the
core IR, a small closed op set with positional dims, is what makes the export
complete: a test asks the rule table for every core op class.

The graph's inputs are the exported placeholders, in the order given; stored
tensors (variables, persistent tensors) become initializers holding their
values. A training step exports as a pure function: each stored tensor it
writes is an input too (its initializer is the default) and its new value an
extra output, ``W.new``.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

import numpy as np

from ...debug_info import user_location
from ...dims import Dim
from ...errors import FeedError
from ...core import Function, Node
from ...core.function import map_nodes
from ...lowering import LoweredComputation, lower
from ...op_graph.execution_order import schedule
from ...op_graph.op import Op
from ...op_graph.tensors import AssignableTensorOp
from ...passes.pattern import renamed_copy
from ...transformers.base import Computation, Transformer
from .export_graph import (GraphBuilder, OnnxExportError, OnnxNotInstalledError, load_onnx,
                           onnx_dims, tensor_type)
from . import export_windows  # noqa: F401  (registers the window rules in RULES)
from .export_rules import RULES

#: The lowest opset the rules write for (Shape's start/end, ScatterND's reduction).
MIN_OPSET = 17


def export(computation_or_results: Union[Computation, Op, Sequence[Op], Function],
           path: Union[str, os.PathLike, None],
           inputs: Optional[Sequence[Op]] = None, *, opset: int = MIN_OPSET,
           transformer: Optional[Transformer] = None, optimize: bool = True,
           name: str = "axgraph") -> Any:
    """Write a computation as an ONNX model (and return it).

    Parameters
    ----------
    computation_or_results : Computation, Op, sequence of Op, or core.Function
        A computation made by ``transformer.computation(...)``, or the result
        op(s) to compute. A result op's name (with a suffix where two collide)
        names its graph output. A core `Function` is written as it is: its
        parameters are the inputs (`inputs`, `transformer` and `optimize` do
        not apply), its results the outputs.
    path : str, os.PathLike or None
        The file to write (replaced atomically); None writes nothing.
    inputs : sequence of Op, optional
        The placeholders that become the graph's inputs, in order, each named
        by its placeholder's name; a dim whose length is symbolic or unset
        becomes a ``dim_param`` named by its size (the axis name). Default: the
        computation's parameters, or every placeholder the results read, in
        the order they were made.
    opset : int, optional
        The opset of the default ONNX domain, 17 (default) or later.
    transformer : Transformer, optional
        Where the stored tensors' values are read (a computation's own
        transformer by default). Without one, every stored tensor is written
        with its initial value.
    optimize : bool, optional
        Run the default core passes (folding, simplification) first (default True).
    name : str, optional
        The graph's name.

    Returns
    -------
    onnx.ModelProto
        The model written, checked by ``onnx.checker``.

    Raises
    ------
    OnnxExportError
        An op ONNX cannot express (named with the user's line that built it),
        a placeholder read but not among `inputs`, a size no input holds, or an
        opset below 17.
    OnnxNotInstalledError
        The ``onnx`` package is not installed (``pip install 'axgraph[onnx]'``);
        an ImportError too.
    """
    onnx = load_onnx()
    if not isinstance(opset, int) or opset < MIN_OPSET:
        raise OnnxExportError(f"export writes opset {MIN_OPSET} or later, not {opset!r}",
                              user_location())
    if isinstance(computation_or_results, Function):
        graph = _function_graph(onnx, computation_or_results, opset, name)
        return _finish(onnx, graph, opset, path)
    if isinstance(computation_or_results, Computation):
        computation = computation_or_results
        results, ops = list(computation.results), list(computation.ops)
        transformer = transformer if transformer is not None else computation.transformer
        if inputs is None:
            inputs = computation.parameters
    else:
        results = _result_ops(computation_or_results)
        ops = schedule(results + [dep for op in results for dep in op.user_deps])
    if inputs is None:
        inputs = [op for op in ops if isinstance(op, AssignableTensorOp) and op.input
                  and op.initial_value is None]
    inputs = _checked_inputs(inputs)
    lowered = lower(ops, results, inputs)
    lowered.function = _named_by_axes(lowered)
    if optimize:
        from ...passes import PassManager, default_passes

        lowered.function = PassManager(default_passes(), max_rounds=4).run(lowered.function)
    graph = _write_graph(onnx, lowered, results, inputs, transformer, opset, name)
    return _finish(onnx, graph, opset, path)


def _finish(onnx, graph, opset: int, path):
    """The checked model of `graph`, written to `path` unless it is None. Its IR version
    is the oldest that knows the opset, so that older runtimes read it too."""
    opsets = [onnx.helper.make_opsetid("", opset)]
    model = onnx.helper.make_model(graph, producer_name="axgraph", opset_imports=opsets)
    model.ir_version = onnx.helper.find_min_ir_version_for(opsets, ignore_unknown=True)
    onnx.checker.check_model(model)
    if path is not None:
        _write_atomically(Path(path), model.SerializeToString())
    return model


def _result_ops(results) -> List[Op]:
    listed = [results] if isinstance(results, Op) else list(results)
    for op in listed:
        if not isinstance(op, Op):
            raise OnnxExportError(f"export takes a computation or result ops, not "
                                  f"{type(op).__name__} {op!r:.60}", user_location())
    return listed


def _checked_inputs(inputs: Iterable[Op]) -> List[AssignableTensorOp]:
    checked: List[AssignableTensorOp] = []
    for op in inputs:
        if not (isinstance(op, AssignableTensorOp) and op.input):
            raise FeedError(f"export inputs must be placeholders; {op!r:.80} is not",
                            user_location())
        checked.append(op)
    if len(set(checked)) != len(checked):
        raise FeedError("a placeholder is listed twice among the export inputs", user_location())
    return checked


def _axes_text(op: Op) -> str:
    return ",".join(axis.name for axis in op.axes)


def _named_by_axes(lowered: LoweredComputation) -> Function:
    """The lowered function with each axes op's core node named by the op and its axes,
    ``hidden[H,N]`` (its dims are those axes, in order).

    The names are given as user names, which passes keep on the nodes they rebuild for
    the same value and drop from those computing another (a transposed one).
    """
    labels = {node: f"{op.name}[{_axes_text(op)}]" for op, node in lowered.values.items()
              if op.is_tensor_op and node.inputs and not node.has_user_name}

    def rename(node: Node, original: Node) -> Optional[Node]:
        label = labels.get(original)
        return None if label is None else renamed_copy(node, node.inputs, label)

    return map_nodes(lowered.function, rename)


def write_nodes(g: GraphBuilder, nodes: Iterable[Node], known: Dict[Node, str],
                wanted: Dict[Node, str]) -> None:
    """Write each node not in `known` by its rule, in order, recording its value's name in
    `known`; a node in `wanted` gets that name (a graph output, a fused body's result),
    the others their own (made unique)."""
    for node in nodes:
        if node in known:
            continue
        rule = RULES.lookup(type(node))
        if rule is None:
            raise node._fail(OnnxExportError, "has no ONNX export rule (a host call such as a "
                                              "print, or an op made outside the core set)")
        out = wanted.get(node)
        if out is None:  # an inner value: its type is declared, symbolic dims included
            out = g.fresh(node.name)
            g.value_info.append(value_info(out, node))
        rule(g, node, [known[x] for x in node.inputs], out)
        known[node] = out


def _stored_values(tensors: List[AssignableTensorOp],
                   transformer: Optional[Transformer]) -> Dict[Op, np.ndarray]:
    from ... import make_transformer
    from ...serialization import get_values

    if not tensors:
        return {}
    if transformer is not None:
        return get_values(transformer, tensors)
    with make_transformer("numpy") as fresh:  # the initial values, made as any transformer would
        return get_values(fresh, tensors)


def value_info(name: str, node: Node, doc: str = ""):
    """The ONNX ValueInfo of `node`'s value under `name`: element type and dims."""
    from onnx import helper

    return helper.make_tensor_value_info(name, tensor_type(node.element_type.dtype),
                                         onnx_dims(node.shape), doc_string=doc)


def _write_graph(onnx, lowered: LoweredComputation, results: List[Op],
                 inputs: List[AssignableTensorOp], transformer: Optional[Transformer],
                 opset: int, name: str):
    """The graph of a lowered computation: placeholders in, stored tensors as initializers."""
    function = lowered.function
    by_tensor = dict(zip(lowered.state_inputs, function.parameters))
    stored = [t for t in lowered.state_inputs if t not in inputs]
    for tensor in stored:
        if tensor.input and tensor.initial_value is None:
            raise OnnxExportError(f"placeholder {tensor.name} {tensor.axes} is read but is not "
                                  f"among the exported inputs", tensor.location)
    written = list(lowered.state_outputs)
    parts = _GraphParts()
    for tensor in inputs:  # in order; one the function does not read still appears
        doc = f"placeholder {tensor.name}, axes ({_axes_text(tensor)})"
        parameter = by_tensor.get(tensor)
        if parameter is not None:
            parts.inputs.append((parameter, tensor.name, doc))
        else:
            dims = [a.length if isinstance(a.length, int) else
                    str(a.length) if a.length is not None else a.name for a in tensor.axes]
            parts.unread.append(onnx.helper.make_tensor_value_info(
                tensor.name, tensor_type(tensor.dtype), dims, doc_string=doc))
    values = _stored_values(stored, transformer)
    for tensor in stored:
        doc = f"stored tensor {tensor.name}, axes ({_axes_text(tensor)})"
        parts.stored.append((by_tensor[tensor], tensor.name, values[tensor],
                             doc if tensor in written else None))
    for op, position in zip(results, lowered.result_positions):
        if position is not None:
            parts.outputs.append((function.results[position], op.name,
                                  f"{op.name}, axes ({_axes_text(op)})"))
    first_state = len(function.results) - len(written)
    for tensor, node in zip(written, function.results[first_state:]):
        parts.outputs.append((node, f"{tensor.name}.new",
                              f"new value of {tensor.name}, axes ({_axes_text(tensor)})"))
    return parts.graph(onnx, function, opset, name)


def _function_graph(onnx, function: Function, opset: int, name: str):
    """The graph of a core Function: each parameter an input, each result an output."""
    parts = _GraphParts()
    parts.inputs = [(p, p.name, "") for p in function.parameters]
    parts.outputs = [(node, node.name if node.has_user_name else f"output_{k}", "")
                     for k, node in enumerate(function.results)]
    return parts.graph(onnx, function, opset, name)


class _GraphParts:
    """What becomes a graph's inputs, initializers and outputs, before names are fixed."""

    def __init__(self) -> None:
        #: (parameter, name, doc) of each graph input, in order.
        self.inputs: List[tuple] = []
        #: value infos of exported inputs the function does not read.
        self.unread: List[Any] = []
        #: (parameter, name, value, doc) of each initializer; a doc makes it an input too.
        self.stored: List[tuple] = []
        #: (node, name, doc) of each graph output, in order.
        self.outputs: List[tuple] = []

    def graph(self, onnx, function: Function, opset: int, name: str):
        g = GraphBuilder(opset)
        known: Dict[Node, str] = {}
        graph_inputs = []
        for parameter, input_name, doc in self.inputs:
            known[parameter] = input_name = g.fresh(input_name)
            graph_inputs.append(value_info(input_name, parameter, doc))
            for position, dim in enumerate(parameter.shape):
                if isinstance(dim, Dim) and dim.is_symbol:
                    g.size_sources.setdefault(dim.name, (input_name, position))
        for info in self.unread:
            info.name = g.fresh(info.name)
            graph_inputs.append(info)
        for parameter, value_name, value, doc in self.stored:
            known[parameter] = value_name = g.fresh(value_name)
            value = np.asarray(value, dtype=parameter.element_type.dtype)
            g.initializer(value_name, value)
            for position, dim in enumerate(parameter.shape):  # a size only it holds
                if isinstance(dim, Dim) and dim.is_symbol:
                    g.size_sources.setdefault(dim.name, (value_name, position))
            if doc is not None:  # a training step's state: an input defaulting to its value
                graph_inputs.append(onnx.helper.make_tensor_value_info(
                    value_name, tensor_type(value.dtype), list(value.shape), doc_string=doc))
        wanted: Dict[Node, str] = {}
        output_names = []
        for node, output_name, _ in self.outputs:
            output_name = g.fresh(output_name)
            output_names.append(output_name)
            if node not in known and node not in wanted:
                wanted[node] = output_name
        write_nodes(g, function.nodes, known, wanted)
        graph_outputs = []
        for (node, _, doc), output_name in zip(self.outputs, output_names):
            if known[node] != output_name:  # an input, or a value output twice
                g.add("Identity", [known[node]], output_name)
            graph_outputs.append(value_info(output_name, node, doc))
        return onnx.helper.make_graph(g.nodes, name, graph_inputs, graph_outputs,
                                      initializer=g.initializers, value_info=g.value_info)


def _write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in its folder, then rename."""
    descriptor, temporary = tempfile.mkstemp(dir=path.parent or Path("."), prefix=path.name,
                                             suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


__all__ = ["MIN_OPSET", "OnnxExportError", "OnnxNotInstalledError", "export", "write_nodes"]
