"""Softmax, log-softmax and their backprops in NumPy, for the cpu backend's unfused nodes.

A node over the trailing dims of a dense input runs instead as a fused row
kernel (fusion.py, C); these serve every other layout, and `RowNumpyKernel` runs
such a group where the C engine does not. Each writes its result into `out` with one temporary of the
reduced shape. `PassesNumpyKernel` runs a multi-pass row group (a normalization)
where the C engine cannot: its members one by one, as the unfused program would.
"""
from __future__ import annotations

from typing import Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from ... import core
from ...core import interpreter
from ...core.node import Node
from .group import (FusedGroup, check_call, check_extras, concrete_shape, finish_empty,
                    group_shapes)
from .kernel_blocked_numpy import NumpyKernel


def softmax(x: np.ndarray, axes: Sequence[int], out: np.ndarray) -> np.ndarray:
    """exp(x - max) / sum(exp(x - max)) over `axes`, computed in out."""
    axes = tuple(axes)
    if x.size == 0:
        return out
    np.subtract(x, np.max(x, axis=axes, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= np.sum(out, axis=axes, keepdims=True)
    return out


def log_softmax(x: np.ndarray, axes: Sequence[int], out: np.ndarray) -> np.ndarray:
    """x - max - log(sum(exp(x - max))) over `axes`, computed in out."""
    axes = tuple(axes)
    if x.size == 0:
        return out
    np.subtract(x, np.max(x, axis=axes, keepdims=True), out=out)
    total = np.sum(np.exp(out), axis=axes, keepdims=True)
    out -= np.log(total, out=total)
    return out


def softmax_backprop(dy: np.ndarray, y: np.ndarray, axes: Sequence[int],
                     out: np.ndarray) -> np.ndarray:
    """y * (dy - sum(dy * y)) over `axes`, computed in out."""
    axes = tuple(axes)
    total = np.sum(np.multiply(dy, y), axis=axes, keepdims=True)
    np.subtract(dy, total, out=out)
    out *= y
    return out


def log_softmax_backprop(dy: np.ndarray, y: np.ndarray, axes: Sequence[int],
                         out: np.ndarray) -> np.ndarray:
    """dy - exp(y) * sum(dy) over `axes`, computed in out."""
    total = np.sum(dy, axis=tuple(axes), keepdims=True)
    return np.subtract(dy, np.exp(y) * total, out=out)


class RowNumpyKernel:
    """A fused group ending in a row op, run with NumPy: the elementwise members as one
    blocked NumPy kernel into a scratch array, then the row op (the functions above).

    For machines without a C compiler and for element types the C engine leaves to
    NumPy; `kernel(*inputs, out=array)` as the other engines' kernels.
    """

    engine = "numpy"

    def __init__(self, group: FusedGroup, shapes: Mapping[Node, Tuple[int, ...]]):
        self.group = group
        row = group.row
        assert row is not None  # compile_group sends only row groups here
        _, self.out_shape, self.outer, self.inner = group_shapes(group, shapes)
        self.in_shapes = [concrete_shape(x, shapes) for x in group.inputs]
        self.axes = tuple(row.attributes["axes"])
        self.prologue: Optional[NumpyKernel] = None
        source = group.elementwise_output
        #: The input that is the row op's operand (None: the prologue computes it).
        self._source: Optional[int] = None
        if source in group.inputs:
            self._source = group.inputs.index(source)
            text = ""
        else:
            read = [j for j, x in enumerate(group.inputs)
                    if any(x in m.inputs for m in group.elementwise_nodes)]
            self._read = read
            self.prologue = NumpyKernel(
                FusedGroup(group.elementwise_nodes, tuple(group.inputs[j] for j in read),
                           source), shapes)
            self._scratch = (concrete_shape(source, shapes), source.element_type.dtype)
            text = self.prologue.source
        self._y = (group.inputs.index(row.inputs[1])
                   if isinstance(row, core.SoftmaxBackprop) else None)
        self.source = text + f"\n# then rows: {row.op} over axes {self.axes}\n"

    def __call__(self, *arrays: np.ndarray, out: np.ndarray) -> np.ndarray:
        check_call("fused NumPy row kernel", self.group, self.in_shapes, self.out_shape,
                   arrays, out)
        if finish_empty(self.group, self.outer, self.inner, out):
            return out
        if self.prologue is not None:
            x = self.prologue(*[arrays[j] for j in self._read], out=np.empty(*self._scratch))
        else:
            assert self._source is not None
            x = arrays[self._source]
        row = self.group.row
        with np.errstate(all="ignore"):
            if isinstance(row, core.SoftmaxBackprop):
                assert self._y is not None
                y = arrays[self._y]
                function = (log_softmax_backprop if isinstance(row, core.LogSoftmaxBackprop)
                            else softmax_backprop)
                return function(x, y, self.axes, out=out)
            if isinstance(row, core.LogSoftmax):
                return log_softmax(x, self.axes, out=out)
            softmax(x, self.axes, out=out)
            fill = self.group.row_fill
            if fill is not None:  # the guard: rows of nothing but -inf hold the fill
                empty = np.all(x == -np.inf, axis=self.axes, keepdims=True)
                np.copyto(out, fill.attributes["value"], where=empty)
            return out

    def __repr__(self) -> str:
        return f"<RowNumpyKernel {self.group!r}>"


class PassesNumpyKernel:
    """A multi-pass row group (`FusedGroup.row_dims`) run member by member with the
    reference interpreter's kernels: for element types or machines the C engine does not
    serve, and for calls with no elements. `kernel(*inputs, out=array, extras=arrays)`
    writes the output into `out` and the group's extras (row values) into `extras`.
    """

    engine = "numpy"

    def __init__(self, group: FusedGroup, shapes: Mapping[Node, Tuple[int, ...]],
                 bindings: Optional[Mapping[str, int]] = None):
        self.group = group
        _, self.out_shape, self.outer, self.inner = group_shapes(group, shapes)
        self.in_shapes = [concrete_shape(x, shapes) for x in group.inputs]
        self.extra_shapes = [concrete_shape(x, shapes) for x in group.extras]
        self._context = interpreter.Context(dict(bindings or {}), {})
        self.source = "# the members one by one (reference kernels):\n" + "".join(
            f"#   {node.op} {node.type_str()}\n" for node in group.nodes)

    def __call__(self, *arrays: np.ndarray, out: np.ndarray,
                 extras: Sequence[np.ndarray] = ()) -> np.ndarray:
        group = self.group
        arrays = tuple(check_call("fused NumPy row-pass kernel", group, self.in_shapes,
                                  self.out_shape, arrays, out))
        check_extras("fused NumPy row-pass kernel", group, self.extra_shapes, extras)
        values: Dict[Node, np.ndarray] = dict(zip(group.inputs, arrays))
        with np.errstate(all="ignore"):
            for node in group.nodes:
                values[node] = np.asarray(interpreter.find_kernel(type(node))(
                    node, self._context, *[values[x] for x in node.inputs]))
        for array, node in zip((out, *extras), group.outputs):
            np.copyto(array, values[node])
        return out

    def __repr__(self) -> str:
        return f"<PassesNumpyKernel {self.group!r}>"

