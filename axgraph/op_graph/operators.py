"""Python's operators on ops: ``x + y``, ``-x``, ``x < y``, ``x[1:3]``, ``w[i] = v``, ``w += d``
(an assign, which w then names).

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
from ..debug_info import user_location
from ..errors import GraphError
from . import control, elementwise as ew, reductions, shape_ops
from .op import Op


def _update_in_place(op: Op, value, combine: Callable, symbol: str) -> Op:
    """``w += v`` is ``ng.assign(w, w + v)``, and w is then that assign op (Nervana Graph
    v0.4). On an op that is not a variable, placeholder or persistent tensor there is
    nothing to write: an error, rather than silently rebinding w to a new value."""
    if not op.is_assignable or getattr(op, "constant", False):
        if isinstance(op, control.AssignOp):
            what = (f"the assign to {op.tensor.name} that an earlier in-place operator (or "
                    f"ng.assign) gave; keep the tensor under a name of its own to update it "
                    f"again")
        else:
            what = "a constant" if op.is_assignable else "not a stored tensor"
        raise GraphError(f"{op.name} {symbol}= ...: in-place operators assign to a variable, "
                         f"placeholder or persistent tensor, and {op.name} is {what}; write "
                         f"`x = x {symbol} ...` for a new value", user_location())
    return control.assign(op, combine(op, value))


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
#: In-place operators, as Nervana Graph v0.4 had them (its ``__idiv__`` is Python 3's
#: ``__itruediv__``), and their symbols for errors.
_IN_PLACE: Dict[str, str] = {"add": "+", "sub": "-", "mul": "*", "truediv": "/"}
#: Comparisons: Python reflects them itself (``1 < x`` calls ``x > 1``).
_COMPARISONS: Dict[str, Callable] = {
    "lt": ew.less, "le": ew.less_equal, "gt": ew.greater, "ge": ew.greater_equal,
}


def _bind() -> None:
    def forward(function: Callable) -> Callable:
        return lambda self, other: function(self, other)

    def reflected(function: Callable) -> Callable:
        return lambda self, other: function(other, self)

    def in_place(function: Callable, symbol: str) -> Callable:
        return lambda self, other: _update_in_place(self, other, function, symbol)

    methods: Dict[str, Callable] = {"__neg__": ew.negative, "__abs__": ew.absolute,
                                    "__getitem__": _getitem, "__setitem__": _setitem,
                                    "mean": _mean, "insert_axis": _insert_axis}
    for name, function in _ARITHMETIC.items():
        methods[f"__{name}__"] = forward(function)
        methods[f"__r{name}__"] = reflected(function)
    for name, symbol in _IN_PLACE.items():
        methods[f"__i{name}__"] = in_place(_ARITHMETIC[name], symbol)
    for name, function in _COMPARISONS.items():
        methods[f"__{name}__"] = forward(function)
    for name, method in methods.items():
        setattr(Op, name, method)


_bind()
