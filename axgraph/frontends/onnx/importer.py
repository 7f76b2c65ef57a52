"""Import an ONNX model as an axes graph.

The importer walks the model's nodes in their (topological) order and looks
each operator up in the rule table (`import_rules.RULES`). Values known when the
model is imported (initializers, constants, shapes) stay NumPy arrays, and a
node whose inputs are all known is computed at once with ONNX's reference
evaluator, so shape arithmetic never reaches the graph. Every other value is an
op whose axes are its ONNX dimensions in order (see `axgraph.frontends.positional`).

Axes come from the inputs' dimensions: one axis per distinct `dim_param`, shared
by every input that names it, whose length is the size variable ``ng.dim(name)``
(or the size given in `sizes`); a fixed dimension gets an axis of its own.
"""
from __future__ import annotations

import ast
import importlib
import itertools
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Set

import numpy as np

from ...axes import Axes, Axis, make_axis
from ...debug_info import user_location
from ...errors import AxgraphError
from ...dims import Dim, DimLike, dim
from ...op_graph.op import Op
from ...op_graph.elementwise import add, floor, maximum, minimum, multiply, subtract
from ...op_graph.reductions import tensor_size
from ...op_graph.tensors import constant, placeholder, variable
from . import import_elementwise, import_linear, import_nn, import_rnn, import_shape  # noqa: F401
from .import_rules import RULES, Node, OnnxImportError, UnsupportedOperatorError, Value

#: The names of ONNX's default operator domain, the one the rules import (a rule reads the
#: model's opset of it where operators changed: axes as attributes in older opsets, ...).
DOMAINS = ("", "ai.onnx")


@dataclass
class ImportedModel:
    """An ONNX model as axgraph ops.

    Attributes
    ----------
    inputs : list of Op
        One placeholder per model input that is not an initializer, in the model's
        order, with the input's name; its axes are the input's dimensions in order.
    outputs : list of Op
        One op per model output, in the model's order; its axes are the output's
        dimensions in order.
    input_names, output_names : list of str
        The ONNX names of `inputs` and `outputs`.
    axes : dict of str to Axis
        The axis of each `dim_param` of the inputs, by name.
    variables : dict of str to Op
        The initializers imported as variables (``trainable=True``), by name.
    opset : int
        The model's default-domain operator set version.
    """

    inputs: List[Op]
    outputs: List[Op]
    input_names: List[str]
    output_names: List[str]
    axes: Dict[str, Axis] = field(default_factory=dict)
    variables: Dict[str, Op] = field(default_factory=dict)
    opset: int = 0


class GraphBuilder:
    """What the rules share while one model is imported: new axes, constants as ops."""

    def __init__(self, sizes: Mapping[str, int]):
        self.sizes = dict(sizes)
        self.axes_by_dim: Dict[str, Axis] = {}
        self._counter = itertools.count()
        self._constant_ops: Dict[int, tuple] = {}
        #: Each input's axes, by size variable: where a size is read at run time.
        self.size_sources: Dict[str, tuple] = {}
        self._size_names: Set[str] = set()

    def unique_name(self, hint: str) -> str:
        """`hint` made an identifier and numbered: a name no other axis of the model has."""
        return f"{_op_name(hint)}_{next(self._counter)}"

    def new_axis(self, length: Optional[DimLike], hint: str) -> Axis:
        """A new axis of `length`, named after `hint` and numbered."""
        return make_axis(length=length, name=self.unique_name(hint))

    def axis_of_length(self, length: DimLike, hint: str, taken: List[Axis]) -> Axis:
        """An axis of `length`: the input axis of that size variable if it is one (and not
        in `taken`), else a new one."""
        if isinstance(length, Dim) and str(length) in self.size_sources:
            axis = self.size_sources[str(length)][1]
            if axis not in taken:
                return axis
        return self.new_axis(length, hint)

    def as_op(self, value: Value, hint: str) -> Op:
        """`value` as an op: an array becomes a constant on new axes (once per array)."""
        if isinstance(value, Op):
            return value
        if value.dtype == object and value.ndim == 0:
            return self.size_op(value.item(), hint)
        if value.dtype == object:
            raise OnnxImportError(f"ONNX value {hint!r} holds symbolic sizes {value.tolist()}: "
                                  f"it can only feed shape arguments (Reshape, Expand ...), or "
                                  f"give the sizes with import_model(..., sizes={{...}})",
                                  user_location())
        known = self._constant_ops.get(id(value))
        if known is not None:
            return known[1]
        axes = Axes([self.new_axis(int(n), f"{hint}_d{i}") for i, n in enumerate(value.shape)])
        op = constant(value, axes, dtype=value.dtype, name=_op_name(hint))
        self._constant_ops[id(value)] = (value, op)  # (the array is kept alive with its id)
        return op

    def size_op(self, size: DimLike, hint: str) -> Op:
        """An int64 scalar op computing `size` (an expression of the inputs' sizes) at run
        time, from the lengths of the inputs' axes."""
        try:
            return self._size_expression(ast.parse(str(size), mode="eval").body)
        except (SyntaxError, KeyError):
            raise OnnxImportError(f"ONNX value {hint!r} is the size {size}, which cannot be "
                                  f"computed from the inputs' sizes: give the sizes with "
                                  f"import_model(..., sizes={{...}})", user_location()) from None

    def _size_expression(self, tree: ast.AST) -> Op:
        if isinstance(tree, ast.Constant) and isinstance(tree.value, int):
            return constant(np.int64(tree.value), dtype=np.int64)
        if isinstance(tree, ast.Name):
            source, axis = self.size_sources[tree.id]
            return tensor_size(source, reduction_axes=[axis], dtype=np.int64)
        if isinstance(tree, ast.UnaryOp) and isinstance(tree.op, ast.USub):
            return -self._size_expression(tree.operand)
        if isinstance(tree, ast.BinOp) and type(tree.op) in _SIZE_OPERATORS:
            left, right = self._size_expression(tree.left), self._size_expression(tree.right)
            return _SIZE_OPERATORS[type(tree.op)](left, right)
        if isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and \
                tree.func.id in ("max", "min") and tree.args:
            combine = maximum if tree.func.id == "max" else minimum
            terms = [self._size_expression(arg) for arg in tree.args]
            result = terms[0]
            for term in terms[1:]:
                result = combine(result, term)
            return result
        raise KeyError(ast.dump(tree))

    def input_axis(self, dimension: Any, input_name: str, position: int, taken: List[Axis]
                   ) -> Axis:
        """The axis of one dimension of a model input."""
        param = dimension.dim_param if dimension.HasField("dim_param") else ""
        if dimension.HasField("dim_value"):
            return self.new_axis(int(dimension.dim_value), f"{input_name}_d{position}")
        if not param:  # a dimension of unknown length, its own
            name = self.unique_name(f"{input_name}_d{position}")
            return make_axis(length=self._length_of(name), name=name)
        axis = self.axes_by_dim.get(param)
        if axis is None:
            axis = make_axis(length=self._length_of(param), name=param)
            self.axes_by_dim[param] = axis
        return self.new_axis(axis.length, param) if axis in taken else axis

    def _length_of(self, param: str) -> DimLike:
        """A fixed size from `sizes`, or a size variable named after `param` (one per param:
        two params that read alike as identifiers get different names)."""
        if param in self.sizes:
            return int(self.sizes[param])
        identifier = re.sub(r"\W", "_", param)
        identifier = identifier if identifier.isidentifier() else f"d_{identifier}"
        while identifier in self._size_names:
            identifier += "_"
        self._size_names.add(identifier)
        return dim(identifier)


def _floor_divide(a: Op, b: Op) -> Op:
    """a // b of whole numbers (sizes: a >= 0, b >= 1), in int64."""
    return multiply(floor(a / b), 1, dtype=np.int64)


#: Python's arithmetic on sizes (`str` of an `ng.dim` expression) as ops.
_SIZE_OPERATORS: Dict[type, Callable[[Op, Op], Op]] = {
    ast.Add: add, ast.Sub: subtract, ast.Mult: multiply, ast.FloorDiv: _floor_divide,
    ast.Mod: lambda a, b: a - b * _floor_divide(a, b),
}


def _op_name(name: str) -> str:
    """An ONNX name made an identifier (ONNX names may hold any character)."""
    return re.sub(r"\W", "_", name) or "value"


def _onnx():
    try:
        return importlib.import_module("onnx")
    except ImportError:
        raise OnnxImportError("ONNX import needs the optional package onnx: "
                              "pip install 'axgraph[onnx]'", user_location()) from None


def import_model(model: Any, sizes: Optional[Mapping[str, int]] = None,
                 trainable: bool = False) -> ImportedModel:
    """Import an ONNX model as axgraph ops over named axes.

    Parameters
    ----------
    model : str, os.PathLike or onnx.ModelProto
        The model, or the path of a ``.onnx`` file.
    sizes : dict of str to int, optional
        A fixed length for some `dim_param`s; the others become size variables
        (``ng.dim``), bound when data is fed.
    trainable : bool
        Import float initializers as variables (`ImportedModel.variables`), so
        the model can be trained further; by default they are constants.

    Returns
    -------
    ImportedModel
        The inputs (placeholders) and outputs (ops): ``t.computation(model.outputs,
        *model.inputs)`` runs the model on any transformer.

    Raises
    ------
    UnsupportedOperatorError
        If the model uses an operator (or an attribute value) with no import rule:
        the message names the operator and the node, and lists the supported ones.
    OnnxImportError
        If the file cannot be read as an ONNX model, or the model is malformed (an
        input no node computes, an axis out of range), or an op refuses what a node
        asks of it (the node is named).

    Examples
    --------
    >>> import numpy as np
    >>> import axgraph as ng
    >>> from onnx import TensorProto, helper
    >>> from axgraph.frontends.onnx import import_model
    >>> graph = helper.make_graph(
    ...     [helper.make_node("Relu", ["x"], ["y"])], "relu",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])])
    >>> model = import_model(helper.make_model(graph))
    >>> model.inputs[0].axes
    Axes(batch: batch, x_d1_0: 3)
    >>> with ng.make_transformer("numpy") as t:
    ...     run = t.computation(model.outputs, *model.inputs)
    ...     print(run(np.array([[-1.0, 0.0, 2.0]], np.float32))[0])
    [[0. 0. 2.]]
    """
    onnx = _onnx()
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        try:
            model = onnx.load(path)
        except Exception as error:  # a missing file, or bytes that are no ONNX model
            raise OnnxImportError(f"cannot read the ONNX model {path!r}: "
                                  f"{type(error).__name__}: {error}", user_location()) from None
    if not isinstance(model, onnx.ModelProto):
        raise OnnxImportError(f"import_model takes an onnx.ModelProto or a path, not "
                              f"{type(model).__name__}", user_location())
    opset = next((o.version for o in model.opset_import if o.domain in DOMAINS), 0)
    graph = model.graph
    builder = GraphBuilder(sizes or {})
    env: Dict[str, Value] = {}
    variables: Dict[str, Op] = {}
    for tensor in graph.initializer:
        array = onnx.numpy_helper.to_array(tensor)
        if trainable and array.dtype.kind == "f":
            axes = Axes([builder.new_axis(int(n), f"{tensor.name}_d{i}")
                         for i, n in enumerate(array.shape)])
            variables[tensor.name] = variable(axes, dtype=array.dtype, initial_value=array,
                                              name=_op_name(tensor.name))
            env[tensor.name] = variables[tensor.name]
        else:
            env[tensor.name] = array
    inputs, input_names = [], []
    for value_info in graph.input:
        if value_info.name in env:
            continue  # an initializer listed among the inputs (models of IR version < 4)
        inputs.append(_placeholder(onnx, builder, value_info))
        for axis in inputs[-1].axes:
            if isinstance(axis.length, Dim):
                builder.size_sources.setdefault(str(axis.length), (inputs[-1], axis))
        input_names.append(value_info.name)
        env[value_info.name] = inputs[-1]
    for index, proto in enumerate(graph.node):
        _import_node(onnx, builder, env, proto, index, opset)
    outputs = []
    for value_info in graph.output:
        if value_info.name not in env:
            raise OnnxImportError(f"ONNX output {value_info.name!r} is computed by no node",
                                  user_location())
        outputs.append(builder.as_op(env[value_info.name], value_info.name))
    return ImportedModel(inputs, outputs, input_names, [o.name for o in graph.output],
                         dict(builder.axes_by_dim), variables, opset)


def _placeholder(onnx, builder: GraphBuilder, value_info) -> Op:
    tensor_type = value_info.type.tensor_type
    if not value_info.type.HasField("tensor_type") or not tensor_type.HasField("shape"):
        raise OnnxImportError(f"ONNX input {value_info.name!r} must be a tensor of known rank",
                              user_location())
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
    axes: List[Axis] = []
    for position, dimension in enumerate(tensor_type.shape.dim):
        axes.append(builder.input_axis(dimension, value_info.name, position, axes))
    return placeholder(Axes(axes), dtype=dtype, name=_op_name(value_info.name))


def _import_node(onnx, builder: GraphBuilder, env: Dict[str, Value], proto, index: int,
                 opset: int) -> None:
    label = f"{proto.op_type} node {proto.name!r}" if proto.name else \
        f"{proto.op_type} node #{index}"
    inputs: List[Optional[Value]] = []
    for name in proto.input:
        if name and name not in env:
            raise OnnxImportError(f"ONNX {label}: input {name!r} is computed by no earlier node",
                                  user_location())
        inputs.append(env[name] if name else None)
    given = [v for v in inputs if v is not None]
    results: List[Optional[Value]]
    if proto.domain in DOMAINS and given and all(
            isinstance(v, np.ndarray) and v.dtype != object for v in given):
        results = _folded(proto, inputs, opset)
    else:
        rule = RULES.get(proto.op_type) if proto.domain in DOMAINS else None
        if rule is None:
            domain = f" of domain {proto.domain!r}" if proto.domain not in DOMAINS else ""
            raise UnsupportedOperatorError(
                f"ONNX {label}: operator {proto.op_type}{domain} is not supported; the "
                f"supported operators are {', '.join(sorted(RULES))}", user_location())
        attributes = {a.name: _attribute(onnx, a) for a in proto.attribute}
        node = Node(proto, inputs, attributes, builder, opset, label)
        try:
            produced = rule(node)
        except OnnxImportError:
            raise
        except AxgraphError as error:  # an op refused what the node asked: name the node
            raise OnnxImportError(f"ONNX {label}: {error.message}", user_location()) from error
        results = list(produced) if isinstance(produced, tuple) else [produced]
    for name, value in zip(proto.output, results):
        if name:
            if value is None:
                raise UnsupportedOperatorError(f"ONNX {label}: output {name!r} is not supported",
                                               user_location())
            env[name] = _plain(value)


def _plain(value: Value) -> Value:
    """An array of sizes that are all whole numbers as an int64 array (the symbolic sizes
    sliced out of a shape may leave only fixed ones)."""
    if isinstance(value, np.ndarray) and value.dtype == object and all(
            isinstance(v, (int, np.integer)) for v in value.reshape(-1)):
        return value.astype(np.int64)
    return value


def _attribute(onnx, attribute) -> Any:
    value = onnx.helper.get_attribute_value(attribute)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode() for v in value]
    return value


def _folded(proto, inputs: List[Optional[Value]], opset: int) -> List[Optional[Value]]:
    """A node whose inputs are all known, computed now by ONNX's reference evaluator."""
    reference = importlib.import_module("onnx.reference")
    feeds = {name: value for name, value in zip(proto.input, inputs) if name}
    evaluator = reference.ReferenceEvaluator(proto, opsets={"": opset or 17})
    try:
        results = evaluator.run(None, feeds)
    except Exception as error:  # the reference evaluator's own errors vary by operator
        raise OnnxImportError(f"ONNX {proto.op_type} node {proto.name!r}: computing it from its "
                              f"constant inputs failed: {error}", user_location()) from None
    return [np.asarray(r) for r in results]
