"""The axes graph as text: one line per op, driven by each class's declared attributes.

    print(ng.format_graph(h))    # prints:
    x = AssignableTensorOp(persistent=True, input=True) : (C:3, N:4) float32  # model.py:8
    w = AssignableTensorOp(initial_value=<array [3, 5] float32>, persistent=True, \
        trainable=True) : (C:3, H:5) float32  # model.py:9
    h = DotOp(w, x, pairs=[(C:3, C:3)]) : (H:5, N:4) float32  # model.py:10

Each line reads like the call that built the op: its name, its class, its
args by name, then its attributes (those that are None or False are left
out), then the result's axes with their lengths and its element type, the
ops it must run after (`other_deps`) and the user's file:line. No op needs
code of its own here: a new op class prints as soon as it declares its
attributes. `axgraph.visualize.graph_to_dot` draws the same facts.
"""
from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Iterable, List, Optional, Union

import numpy as np

from ..axes import Axes, Axis
from ..debug_info import user_location
from ..errors import AxgraphTypeError, AxgraphValueError
from .op import Op, upstream_ops

if TYPE_CHECKING:  # pragma: no cover - for type checkers only
    from ..shapes.inference import ShapeReport

Roots = Union[Op, Iterable[Op]]
#: What a `shapes=` argument takes: a report, True to infer one, or None/False for none.
Shapes = Union["ShapeReport", bool, None]


def graph_ops(roots: Roots) -> List[Op]:
    """The ops `roots` reach through args and other_deps, in creation order (the order
    the program built them, which runs each op after its args)."""
    roots = [roots] if isinstance(roots, Op) else list(roots)
    return sorted(upstream_ops(roots, include_control=True), key=lambda op: op._serial)


def format_graph(roots: Roots, shapes: Shapes = None) -> str:
    """The axes graph that `roots` reach, as text: one line per op.

    Each line reads like the call that built the op: its name, its class,
    its args by name and its attributes (those that are None or False are
    left out), then the result's axes with their lengths and its element
    type, the ops it must run after and the user's file:line. Ops come in
    the order the program built them, which puts each after its args.

    Parameters
    ----------
    roots : Op or iterable of Op
        The ops whose graph is shown (through args and other_deps).
    shapes : ShapeReport or bool, optional
        Show each axis's length as the shape solver infers it (``(N: B, H: H - 2)``),
        then the sizes and the checks left for when data is fed, as `print(report)`
        lists them: a report of `ng.infer_shapes`, or True to infer one here.

    Returns
    -------
    str
        The lines, joined by newlines.

    Raises
    ------
    AxgraphValueError
        `shapes` is a report of another graph (an op shown is not in it).
    ShapeConflictError
        With ``shapes=True``: lengths in the graph that contradict each other.

    Examples
    --------
    >>> import axgraph as ng
    >>> C, N = ng.make_axis(length=3, name="C"), ng.make_axis(length=4, name="N")
    >>> x = ng.placeholder([C, N], name="x")
    >>> w = ng.variable([C], initial_value=0.5, name="w")
    >>> print(ng.format_graph(ng.multiply(w, x, name="h")))
    x = AssignableTensorOp(persistent=True, input=True) : (C:3, N:4) float32  # ...
    w = AssignableTensorOp(initial_value=0.5, persistent=True, trainable=True) : (C:3) float32  # ...
    h = Multiply(w, x) : (C:3, N:4) float32  # ...
    """
    ops = graph_ops(roots)
    report = shape_report(ops, shapes)
    lines = [format_op(op, report) for op in ops]
    if report is not None:
        lines.extend(report.summary_lines())
    return "\n".join(lines)


def shape_report(ops: List[Op], shapes: Shapes) -> Optional["ShapeReport"]:
    """The report a `shapes=` argument asks for over `ops` (None for none), checked to
    cover every op, so that no length shown comes from another graph."""
    from ..shapes.inference import ShapeReport, infer_shapes

    if shapes is None or shapes is False:
        return None
    if shapes is True:
        return infer_shapes(ops)
    if not isinstance(shapes, ShapeReport):
        raise AxgraphTypeError(f"shapes= takes a ShapeReport (from ng.infer_shapes) or True, "
                               f"not {shapes!r:.80}", user_location())
    covered = set(shapes.ops)
    missing = [op for op in ops if op not in covered]
    if missing:
        raise AxgraphValueError(f"shapes= is a report of another graph: it has no "
                                f"{missing[0].name} ({type(missing[0]).__name__}); pass "
                                f"ng.infer_shapes of these ops, or shapes=True",
                                missing[0].location)
    return shapes


def format_op(op: Op, report: Optional["ShapeReport"] = None) -> str:
    """One op as ``name = Class(args, attr=value) : axes dtype  after [...]  # file:line``;
    with a `report`, the axes show the lengths it infers."""
    line = f"{op.name} = {op_call(op)}"
    if op.is_tensor_op:
        line += f" : {format_op_axes(op, report)} {op.dtype}"
    if op.other_deps:
        line += f"  after [{', '.join(dep.name for dep in op.other_deps)}]"
    return f"{line}  # {format_location(op)}"


def format_op_axes(op: Op, report: Optional["ShapeReport"] = None) -> str:
    """``(C:3, N:?)``, or with a `report` the lengths it infers: ``(C: 3, N: B)``."""
    if report is None:
        return format_axes(op.axes)
    return f"({report.format_lengths(op)})"


def op_call(op: Op) -> str:
    """``Class(arg, arg, attr=value)``: the args by name, then the attributes shown."""
    parts = [arg.name for arg in op.args]
    parts += [f"{key}={format_value(value)}" for key, value in shown_attributes(op)]
    return f"{type(op).__name__}({', '.join(parts)})"


def shown_attributes(op: Op) -> List[tuple]:
    """(name, value) of the declared attributes worth showing: not None, not False."""
    return [(key, value) for key, value in op.attribute_values.items()
            if value is not None and value is not False]


def format_location(op: Op) -> str:
    """``file.py:12``: the base name of the user's file, and the line."""
    path, line = op.location
    return f"{os.path.basename(path)}:{line}"


def format_axes(axes: Iterable[Axis]) -> str:
    """``(C:3, N:?)``: each axis's name and length (? where not yet known)."""
    return "(" + ", ".join(format_axis(axis) for axis in axes) + ")"


def format_axis(axis: Axis) -> str:
    return f"{axis.name}:{'?' if axis.length is None else axis.length}"


def format_value(value) -> str:
    """Compact, stable text for an attribute value of any kind."""
    if isinstance(value, Op):
        return value.name
    if isinstance(value, Axes):
        return format_axes(value)
    if isinstance(value, Axis):
        return format_axis(value)
    if isinstance(value, slice):
        parts = ["" if bound is None else str(bound) for bound in
                 (value.start, value.stop, value.step)]
        return ":".join(parts[:2]) + (f":{parts[2]}" if parts[2] else "")
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.ndim == 0:
            return repr(array.item())
        return f"<array {list(array.shape)} {array.dtype}>"
    if isinstance(value, np.dtype):
        return str(value)
    if isinstance(value, tuple):
        return "(" + ", ".join(format_value(item) for item in value) + ")"
    if isinstance(value, list):
        return "[" + ", ".join(format_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{format_value(k)}: {format_value(v)}"
                               for k, v in value.items()) + "}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ", ".join(f"{field.name}={format_value(getattr(value, field.name))}"
                           for field in dataclasses.fields(value))
        return f"{type(value).__name__}({fields})"
    if callable(value):
        return f"<function {getattr(value, '__name__', type(value).__name__)}>"
    return repr(value)
