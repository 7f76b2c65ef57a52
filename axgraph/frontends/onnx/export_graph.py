"""The ONNX graph under construction: value names, nodes, constants and run-time sizes.

Export rules (export_rules.py) write through this builder only, so naming,
constant sharing and the computing of symbolic sizes are done once here. A
size variable (`N`) is read at run time from a graph input holding it as a
dim (`Shape(x, start=p, end=p+1)`), and a dim expression (`2*N + 1`) is
computed from those with integer ONNX ops, so reshapes, broadcasts and slices
over symbolic dims work for every size the model is fed.
"""
from __future__ import annotations

import ast
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ...core import Node
from ...dims import Dim
from ...errors import AxgraphError, GraphError


class OnnxExportError(GraphError):
    """A graph, or an op of it, that cannot be written as an ONNX model.

    The message names the op (its core op and, where known, the axes op it
    came from) and the user's file and line that built it.
    """


class OnnxNotInstalledError(AxgraphError, ImportError):
    """ONNX export was asked for, but the onnx package is not installed."""


def load_onnx():
    """The onnx module, imported on first use (it is an optional extra)."""
    try:
        import onnx
    except ImportError as error:
        raise OnnxNotInstalledError("ONNX export needs the onnx package: pip install "
                                    "'axgraph[onnx]'") from error
    return onnx


def tensor_type(dtype: np.dtype) -> int:
    """The ONNX TensorProto element type of a NumPy dtype (bf16 through ml_dtypes)."""
    from onnx import TensorProto, helper

    if dtype.name == "bfloat16":
        return TensorProto.BFLOAT16
    return int(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


def onnx_dims(shape: Sequence) -> List[Union[int, str]]:
    """ONNX dims of a core shape: an int stays, a symbolic dim becomes its text (a dim_param)."""
    return [d if isinstance(d, int) else str(d) for d in shape]


class GraphBuilder:
    """Collects the nodes and initializers of one ONNX graph.

    Parameters
    ----------
    opset : int
        The default domain's opset the rules write for (some ops changed form:
        ReduceMax takes its axes as an input from 18 on).
    """

    def __init__(self, opset: int):
        self.opset = opset
        self.nodes: List[Any] = []
        self.initializers: List[Any] = []
        #: The declared types of inner values (core nodes' element types and shapes).
        self.value_info: List[Any] = []
        #: The ONNX value holding each core node's result.
        self.values: Dict[Node, str] = {}
        #: Where each size variable can be read: (graph input name, dim position).
        self.size_sources: Dict[str, Tuple[str, int]] = {}
        self._used: set = set()
        self._shared_constants: Dict[Tuple, str] = {}
        self._dims: Dict[str, str] = {}
        self._shapes: Dict[Tuple[str, ...], str] = {}

    # -- names -----------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        """A value name not used yet: `hint`, or `hint` with a numeric suffix."""
        name, k = hint, 1
        while name in self._used:
            k += 1
            name = f"{hint}_{k}"
        self._used.add(name)
        return name

    # -- nodes -----------------------------------------------------------------------
    def add(self, op_type: str, inputs: Sequence[str], out: Optional[str] = None,
            outputs: int = 1, **attributes) -> str:
        """Append one node; returns its (first) output's name, `out` if given, else a fresh one.

        `outputs` > 1 gives the node more outputs (fresh names); only the first is
        returned, the rest are left unused (MaxPool's indices are read through `add_many`).
        """
        return self.add_many(op_type, inputs, [out] + [None] * (outputs - 1), **attributes)[0]

    def add_many(self, op_type: str, inputs: Sequence[str], outs: Sequence[Optional[str]],
                 **attributes) -> List[str]:
        """Append one node with several outputs (fresh names where `outs` has None)."""
        from onnx import helper

        names = [name if name is not None else self.fresh(f"{op_type}_out") for name in outs]
        self.nodes.append(helper.make_node(op_type, list(inputs), names,
                                           name=self.fresh(f"{op_type}_node"),
                                           **{k: v for k, v in attributes.items()
                                              if v is not None}))
        return names

    def initializer(self, name: str, array: np.ndarray) -> str:
        """A named initializer holding `array` (its name returned, as given)."""
        from onnx import numpy_helper

        array = np.array(array, order="C")
        if array.dtype.name == "bfloat16":  # ml_dtypes' type: its bits, as ONNX stores them
            from onnx import TensorProto, helper

            tensor = helper.make_tensor(name, TensorProto.BFLOAT16, array.shape,
                                        array.tobytes(), raw=True)
        else:
            tensor = numpy_helper.from_array(array, name)
        self.initializers.append(tensor)
        return name

    def constant(self, array, dtype=None, hint: str = "const") -> str:
        """An initializer holding `array`; equal small constants are written once."""
        array = np.asarray(array, dtype=dtype)
        key = None
        if array.size <= 16:
            key = (array.dtype.str, array.shape, array.tobytes())
            if key in self._shared_constants:
                return self._shared_constants[key]
        name = self.initializer(self.fresh(hint), array)
        if key is not None:
            self._shared_constants[key] = name
        return name

    def ints(self, values: Sequence[int]) -> str:
        """A 1-D int64 constant (axes, pads, static shapes, slice bounds)."""
        return self.constant(np.asarray(list(values), dtype=np.int64), hint="ints")

    def zeros(self, shape: str, dtype: np.dtype) -> str:
        """Zeros of `dtype` in the shape the 1-D int64 tensor `shape` holds at run time."""
        from onnx import numpy_helper

        return self.add("ConstantOfShape", [shape],
                        value=numpy_helper.from_array(np.zeros(1, dtype=dtype)))

    # -- sizes -----------------------------------------------------------------------
    def dim(self, value) -> str:
        """A 1-D int64 tensor of one element: `value` (an int or a dim expression) at run time."""
        if isinstance(value, int):
            return self.ints([value])
        text = str(value)
        if text not in self._dims:
            self._dims[text] = self._expression(ast.parse(text, mode="eval").body, value)
        return self._dims[text]

    def shape(self, dims: Sequence) -> str:
        """A 1-D int64 tensor of `dims` (a constant when they are all ints)."""
        if all(isinstance(d, int) for d in dims):
            return self.ints(dims)
        key = tuple(str(d) for d in dims)
        if key not in self._shapes:
            self._shapes[key] = self.add("Concat", [self.dim(d) for d in dims], axis=0)
        return self._shapes[key]

    def _expression(self, tree: ast.AST, whole: Dim) -> str:
        """ONNX integer ops computing the parsed dim expression `tree` (of `whole`)."""
        if isinstance(tree, ast.Constant) and isinstance(tree.value, int):
            return self.ints([tree.value])
        if isinstance(tree, ast.Name):
            source = self.size_sources.get(tree.id)
            if source is None:
                raise OnnxExportError(
                    f"size {tree.id} (in {whole}) is no dim of any graph input, so the "
                    f"ONNX model could not read it: add a placeholder that has this axis to "
                    f"the exported inputs")
            name, position = source
            return self.add("Shape", [name], start=position, end=position + 1)
        if isinstance(tree, ast.UnaryOp) and isinstance(tree.op, ast.USub):
            return self.add("Neg", [self._expression(tree.operand, whole)])
        if isinstance(tree, ast.BinOp):
            operator = {ast.Add: "Add", ast.Sub: "Sub", ast.Mult: "Mul", ast.FloorDiv: "Div",
                        ast.Mod: "Mod"}.get(type(tree.op))
            if operator is not None:
                a = self._expression(tree.left, whole)
                b = self._expression(tree.right, whole)
                return self.add(operator, [a, b])
        if (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name)
                and tree.func.id in ("max", "min")):
            return self.add(tree.func.id.capitalize(),
                            [self._expression(arg, whole) for arg in tree.args])
        raise OnnxExportError(f"the dim expression {whole} has a form the exporter does not "
                              f"compute ({ast.dump(tree)})")
