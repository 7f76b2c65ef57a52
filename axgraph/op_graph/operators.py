"""Python's operators on ops: ``x + y``, ``-x``, ``x < y``, ``x[1:3]``, ``w[i] = v``, ``w += d``.

Each builds an op of a family (elementwise, shape_ops, control, reductions),
and every family module imports op.py. So op.py only declares the operators
(for type checkers) and this module binds them onto `Op`; the op_graph
package imports it before anything can use an op. Imports then go one way:
families -> op.py, operators -> families.

Numbers become constants (``x * 2``) and results broadcast by axes, as the
`ng.*` functions do.
"""
from __future__ import annotations

from typing import Callable, Dict

from ..axes import AxesLike
from . import control, elementwise as ew, reductions, shape_ops
from .op import Op


def _update_in_place(op: Op, value, combine: Callable) -> Op:
    """``w += v`` on a stored tensor assigns ``w + v`` to it and keeps the name w bound
    to the tensor; on any other op it is the plain ``w = w + v``."""
    if not op.is_assignable or getattr(op, "constant", False):
        return combine(op, value)
    control.AssignOp(op, combine(op, value))
    return op


def _getitem(op: Op, item) -> Op:
    """``x[item]``: `ng.tensor_slice` with one int or slice per axis."""
    return shape_ops.tensor_slice(op, item)


def _setitem(op: Op, item, value) -> None:
    """``w[item] = value`` on a stored tensor is an assign (Nervana Graph's sugar): it is
    recorded in ``w.user_deps``, so later reads of w (and `computation(w)`) run it."""
    control.SetItem(op, item, value)


def _mean(op: Op, reduction_axes: AxesLike = None, out_axes: AxesLike = None) -> Op:
    """`ng.mean` of this op (the default axes: all but batch and recurrent ones)."""
    return reductions.mean(op, reduction_axes=reduction_axes, out_axes=out_axes)


def _insert_axis(op: Op, index: int, axis) -> Op:
    """This value with the new `axis` inserted at position `index` (a broadcast)."""
    axes = list(op.axes)
    axes.insert(index, axis)
    return shape_ops.broadcast(op, axes)


#: Binary operators and the function each calls; ``__rX__`` calls it with the operands swapped.
_ARITHMETIC: Dict[str, Callable] = {
    "add": ew.add, "sub": ew.subtract, "mul": ew.multiply, "truediv": ew.divide,
    "pow": ew.power,
}
#: Comparisons: Python reflects them itself (``1 < x`` calls ``x > 1``).
_COMPARISONS: Dict[str, Callable] = {
    "lt": ew.less, "le": ew.less_equal, "gt": ew.greater, "ge": ew.greater_equal,
}


def _bind() -> None:
    def forward(function: Callable) -> Callable:
        return lambda self, other: function(self, other)

    def reflected(function: Callable) -> Callable:
        return lambda self, other: function(other, self)

    def in_place(function: Callable) -> Callable:
        return lambda self, other: _update_in_place(self, other, function)

    methods: Dict[str, Callable] = {"__neg__": ew.negative, "__abs__": ew.absolute,
                                    "__getitem__": _getitem, "__setitem__": _setitem,
                                    "mean": _mean, "insert_axis": _insert_axis}
    for name, function in _ARITHMETIC.items():
        methods[f"__{name}__"] = forward(function)
        methods[f"__r{name}__"] = reflected(function)
    for name in ("add", "sub", "mul", "truediv"):
        methods[f"__i{name}__"] = in_place(_ARITHMETIC[name])
    for name, function in _COMPARISONS.items():
        methods[f"__{name}__"] = forward(function)
    for name, method in methods.items():
        setattr(Op, name, method)


_bind()
