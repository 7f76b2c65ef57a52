"""A fused group as the kernel engines see it, and what both engines share.

`FusedGroup` is the engines' view of a `core.Fused` node (`FusedGroup.of`): the
body's members, its parameters as the inputs, its result as the output. The
finding of groups and the fusion pass (fusion.py) import the engines
(kernel_c.py, kernel_blocked_numpy.py); the engines import only this module.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence, Tuple

from ... import core
from ...core.node import Node
from ...core.traits import is_elementwise, reduction_identity, reduction_ufunc
from ...errors import ExecutionError, ShapeError
from ...strides import dense_order
from ...traversal import post_order



@dataclass(frozen=True)
class FusedGroup:
    """Nodes that run as one kernel.

    nodes: the members in topological order (the reduction, if any, is last).
    inputs: the external nodes the members read, in order of first use; the
        kernel takes one array per input, in this order.
    output: the member whose value leaves the group (the reduction if there
        is one). Every other member is used only by members and is not a
        function result, so it never needs memory of its own.
    reduction: None, or the final reduction (one that declares its `reduce_ufunc`:
        `reduces_in_groups`), which reduces all dims or the trailing dims of its
        input (so each output element reduces one contiguous run of the
        elementwise values).
    row: None, or the final row op (`is_row_op`: a softmax, a log-softmax or
        the backprop of one) over the trailing dims, which reads each row of
        the elementwise values (its first operand) a few times and writes one
        row of the output. A backprop's second operand, y, is an input.
    guard: empty, or the members after a softmax row op that set its rows of
        nothing but -inf to one scalar (`zeroed_rows_softmax`; the output is
        their Select): the row kernel notes such a row as it finds the row's
        largest value and fills it, instead of a second pass over the rows
        (the comparison, the conversion and the maximum) and a third (the
        Select).
    row_dims: 0, or the number of trailing dims that a multi-pass row group's rows
        span (`kernel_c._passes_source`): such a group is a normalization, members of the
        output's shape (the elements) and of its leading dims' shape (the row
        values: Sums over the row, and what is computed from them), joined by
        Broadcasts of row values over the row and of per-column values (a gain,
        a bias: the trailing dims' shape) over the rows.
    extras: the row values of a multi-pass group read outside it (a layer norm's
        mean and reciprocal deviation, kept for the backward pass): results of
        the group besides `output`, each the value of a Fused node of its own
        over the same body.
    """

    nodes: Tuple[Node, ...]
    inputs: Tuple[Node, ...]
    output: Node
    reduction: Optional[Node] = None
    row: Optional[Node] = None
    guard: Tuple[Node, ...] = ()
    row_dims: int = 0
    extras: Tuple[Node, ...] = ()

    @property
    def outputs(self) -> Tuple[Node, ...]:
        """The values the group gives out: its output, then its extras."""
        return (self.output,) + self.extras

    @property
    def final(self) -> Optional[Node]:
        """The reduction or the row op the group ends in (None: elementwise only)."""
        return self.reduction if self.reduction is not None else self.row

    @property
    def elementwise_output(self) -> Node:
        """The last elementwise value: the reduction's or row op's (first) input, or the
        output."""
        final = self.final
        return final.inputs[0] if final is not None else self.output

    @functools.cached_property
    def elementwise_nodes(self) -> Tuple[Node, ...]:
        """The members computed per element (every member but the reduction or row op, and
        the guard's)."""
        if self.row_dims:
            return self.nodes
        if self.guard:  # the members the row op's operand is computed from
            members = set(self.nodes)
            feeding = set(post_order([self.elementwise_output],
                                     lambda n: n.inputs if n in members else ()))
            return tuple(n for n in self.nodes if n in feeding)
        return self.nodes[:-1] if self.final is not None else self.nodes

    @property
    def row_fill(self) -> Optional[Node]:
        """The scalar Constant a guarded softmax writes in a row of nothing but -inf (None
        without a guard)."""
        return self.output.inputs[1] if self.guard else None

    def __repr__(self) -> str:
        ops = " ".join(n.op for n in self.nodes)
        return f"<FusedGroup [{ops}] -> {self.output.name} {self.output.type_str()}>"

    @classmethod
    def of(cls, fused: core.Fused) -> "FusedGroup":
        """The group a Fused node runs: its body, over its body's parameters."""
        output = fused.function.results[0]
        sums = [n for n in fused.body if type(n) is core.Sum]
        if len(fused.function.results) > 1 or (sums and sums[-1] is not output):
            return cls(fused.body, fused.function.parameters, output,
                       row_dims=len(sums[0].attributes["axes"]),
                       extras=fused.function.results[1:])
        reduction = output if reduces_in_groups(type(output)) else None
        row = output if is_row_op(type(output)) else None
        guarded = zeroed_rows_softmax(output)
        if guarded is not None:
            row, guard = guarded
            return cls(fused.body, fused.function.parameters, output, None, row, guard)
        return cls(fused.body, fused.function.parameters, output, reduction, row)


# -- members ---------------------------------------------------------------------------------

def op_family(node: Node) -> Optional[str]:
    """The elementwise family the op declares ('unary', 'binary', 'compare', 'logical',
    'select', 'convert': axgraph/core/traits.py), 'broadcast', 'constant' or None.

    None means the node cannot be a member. Broadcast joins only when it
    repeats a single element (a scalar, or a Constant with one fill value),
    because then the kernel reads one value instead of an indexed array;
    a Constant joins only when one scalar fills it (a literal in the kernel).
    """
    if is_elementwise(type(node)):
        return node.family
    if isinstance(node, core.Broadcast):
        (x,) = node.inputs
        if is_scalar_constant(x) or (x.shape.is_static and x.shape.size == 1):
            return "broadcast"
        return None
    if is_scalar_constant(node):
        return "constant"
    return None


def is_scalar_constant(node: Node) -> bool:
    """A Constant whose value is one scalar (a fill, or a rank-0 constant)."""
    return isinstance(node, core.Constant) and node.attributes["value"].ndim == 0


def reduces_in_groups(op_class: type) -> bool:
    """Whether a group may end in a reduction of `op_class`: one that declares the ufunc
    it reduces with (the blocked-NumPy engine needs no more; the C engine needs its
    `c_accumulate` too)."""
    return issubclass(op_class, core.Reduction) and reduction_ufunc(op_class) is not None


def is_row_op(op_class: type) -> bool:
    """Whether a group may end in a node of `op_class` as its row op: Softmax, LogSoftmax
    or the backprop of either."""
    return issubclass(op_class, (core.Softmax, core.SoftmaxBackprop))


def zeroed_rows_softmax(node: Node) -> Optional[Tuple[Node, Tuple[Node, ...]]]:
    """(the softmax, the guard's nodes) where `node` is a softmax over the trailing dims
    whose rows of nothing but -inf are set to a scalar c, as the torch bridge's
    `_safe_softmax` decomposes::

        Select(Broadcast(Equal(Max(Convert(NotEqual(x, -inf))), 0)), c, Softmax(x))

    (the Max and the Broadcast over the softmax's axes); else None. The guard's
    nodes are the Select, the Broadcast, the Equal, the Max, the Convert and the
    NotEqual: a row kernel computes them as it finds the row's largest value.
    """
    if type(node) is not core.Select:
        return None
    cond, fill, softmax = node.inputs
    if type(softmax) is not core.Softmax or not is_scalar_constant(fill):
        return None
    axes = tuple(sorted(softmax.attributes["axes"]))
    if axes != tuple(range(softmax.rank - len(axes), softmax.rank)):
        return None
    if not isinstance(cond, core.Broadcast) or tuple(sorted(cond.attributes["axes"])) != axes:
        return None
    equal = cond.inputs[0]
    peak = _other_than(equal, core.Equal, 0.0)
    if (not isinstance(peak, core.Max) or tuple(sorted(peak.attributes["axes"])) != axes
            or peak.inputs[0].rank != softmax.rank):
        return None
    convert = peak.inputs[0]
    if type(convert) is not core.Convert:
        return None
    not_equal = convert.inputs[0]
    if _other_than(not_equal, core.NotEqual, float("-inf")) is not softmax.inputs[0]:
        return None
    return softmax, (node, cond, equal, peak, convert, not_equal)


def _other_than(node: Node, op_class: type, value: float) -> Optional[Node]:
    """The operand beside a scalar Constant of `value` where `node` is an `op_class`
    comparison of the two (in either order), else None."""
    if type(node) is not op_class:
        return None
    for a, b in (node.inputs, node.inputs[::-1]):
        if is_scalar_constant(b) and float(b.attributes["value"]) == value:
            return a
    return None


# -- calling a kernel -----------------------------------------------------------------------

C_ELEMENT_TYPES = ("f32", "f64", "boolean")


def c_accepts(group: FusedGroup) -> bool:
    """Whether the C engine handles the group: every value it computes f32, f64 or
    boolean; an integer only as an input or a literal that every member reading it
    converts.

    Integer semantics (wrapping, truncating division, its division-by-zero
    error) and f16/bf16 stay with NumPy, which already matches the reference;
    an integer converted to a float or a boolean is a C cast, which rounds as
    NumPy's does.
    """
    members = set(group.nodes)
    for value in group.inputs + group.nodes:
        if value.element_type.name in C_ELEMENT_TYPES:
            continue
        if not value.element_type.is_integral or (value in members
                                                  and op_family(value) != "constant"):
            return False
        if not all(op_family(node) == "convert" for node in group.nodes if value in node.inputs):
            return False
    return True


def concrete_shape(node: Node, shapes: Mapping[Node, Tuple[int, ...]]) -> Tuple[int, ...]:
    """The node's shape as ints: from `shapes`, or from the node if static."""
    if node in shapes:
        return tuple(int(d) for d in shapes[node])
    if node.shape.is_static:
        return tuple(int(d) for d in node.shape)
    raise ShapeError(f"compile_group: no concrete shape given for {node.op} {node.name} "
                     f"{node.type_str()}")


def group_shapes(group: FusedGroup, shapes: Mapping[Node, Tuple[int, ...]]
                 ) -> Tuple[Tuple[int, ...], Tuple[int, ...], int, int]:
    """(elementwise shape, output shape, outer, inner) of a group, as ints.

    outer is the number of output elements, inner the number of elementwise
    values each one reduces (1 without a reduction).
    """
    element_shape = concrete_shape(group.elementwise_output, shapes)
    out_shape = concrete_shape(group.output, shapes)
    size = 1
    for d in element_shape:
        size *= d
    if group.row is not None or group.row_dims:  # rows of the trailing dims, each in and out
        inner = 1
        dims = group.row_dims or len(group.row.attributes["axes"])  # type: ignore[union-attr]
        for d in element_shape[len(element_shape) - dims:]:
            inner *= d
        return element_shape, out_shape, size // inner if inner else 0, inner
    if group.reduction is None:
        return element_shape, out_shape, size, 1
    reduced = len(group.reduction.attributes["axes"])
    inner = 1
    for d in element_shape[len(element_shape) - reduced:]:
        inner *= d
    outer = 1
    for d in out_shape:
        outer *= d
    return element_shape, out_shape, outer, inner


def check_call(kernel_name: str, group: FusedGroup, in_shapes: Sequence[Tuple[int, ...]],
               out_shape: Tuple[int, ...], arrays: Sequence, out) -> list:
    """Argument checks shared by both engines (count, dtypes, shapes, `out`).

    Returns the input arrays, each of its node's shape: an array that only
    broadcasts to it (a size-1 stand-in for a broadcast value) becomes a
    zero-stride view, which the engines read as one element without copying.
    """
    import numpy as np

    if len(arrays) != len(group.inputs):
        raise ExecutionError(f"{kernel_name}: takes {len(group.inputs)} input array(s), got "
                             f"{len(arrays)}")
    checked = []
    for k, (array, node, shape) in enumerate(zip(arrays, group.inputs, in_shapes)):
        if not isinstance(array, (np.ndarray, np.generic)):
            raise ExecutionError(f"{kernel_name}: input {k} is {type(array).__name__}, not an "
                                 f"array")
        array = np.asarray(array)
        if array.shape != shape and array.dtype == node.element_type.dtype:
            try:
                array = np.broadcast_to(array, shape)
            except ValueError:
                pass
        if array.dtype != node.element_type.dtype or array.shape != shape:
            raise ExecutionError(f"{kernel_name}: input {k} ({node.name}) is {array.dtype}"
                                 f"{list(array.shape)}, expected "
                                 f"{node.element_type.dtype}{list(shape)}")
        checked.append(array)
    node = group.output
    if not isinstance(out, np.ndarray):
        raise ExecutionError(f"{kernel_name}: out= must be a NumPy array")
    if out.dtype != node.element_type.dtype or out.shape != out_shape:
        raise ExecutionError(f"{kernel_name}: out is {out.dtype}{list(out.shape)}, the output "
                             f"({node.name}) is {node.element_type.dtype}{list(out_shape)}")
    dense = out.flags.c_contiguous or (group.final is None and not group.row_dims
                                       and memory_order(out) is not None)
    if not dense or not out.flags.writeable:
        raise ExecutionError(f"{kernel_name}: out must be writeable and C-contiguous (an "
                             f"elementwise group also takes a transposed dense array)")
    return checked


def check_extras(kernel_name: str, group: FusedGroup, shapes: Sequence[Tuple[int, ...]],
                 extras: Sequence) -> None:
    """That `extras` are one C-contiguous writeable array per extra of the group, of its
    dtype and shape."""
    import numpy as np

    if len(extras) != len(group.extras):
        raise ExecutionError(f"{kernel_name}: takes {len(group.extras)} extra output(s), got "
                             f"{len(extras)}")
    for array, node, shape in zip(extras, group.extras, shapes):
        if type(array) is not np.ndarray or array.shape != shape or \
                array.dtype != node.element_type.dtype or not array.flags.c_contiguous or \
                not array.flags.writeable:
            raise ExecutionError(f"{kernel_name}: the extra output for {node.name} must be a "
                                 f"writeable C-contiguous {node.element_type.dtype}"
                                 f"{list(shape)} array")


def prepare_call(kernel_name: str, kernel, arrays: Sequence, out) -> Optional[tuple]:
    """What both engines do first: check the call (`check_call`), answer an empty one
    (`finish_empty`: None), else the operands and `out` in the order to walk them."""
    arrays = check_call(kernel_name, kernel.group, kernel.in_shapes, kernel.out_shape,
                        arrays, out)
    if finish_empty(kernel.group, kernel.outer, kernel.inner, out):
        return None
    return in_memory_order(arrays, out)


def memory_order(array) -> Optional[Tuple[int, ...]]:
    """Axes from outermost to innermost when `array` densely fills its bytes
    in some axis order (a transpose of a C-contiguous array), else None."""
    return dense_order(array.shape, array.strides, array.itemsize)


def in_memory_order(arrays: Sequence, out):
    """An elementwise group's operands transposed so that `out` is C-contiguous.

    Elementwise values do not depend on the axis order, so a kernel may walk a
    transposed output (a buffer the planner laid out like its inputs) in memory
    order, as long as every operand is walked in the same order.
    """
    if out.flags.c_contiguous:
        return arrays, out
    order = memory_order(out)
    return ([a.transpose(order) if a.shape == out.shape else a for a in arrays],
            out.transpose(order))


def finish_empty(group: FusedGroup, outer: int, inner: int, out) -> bool:
    """True when a call has no elements to visit; `out` then already holds the answer
    (an empty output, or a reduction over nothing, filled with its identity: 0 for a
    sum, 1 for a product)."""
    if outer * inner:
        return False
    if group.guard and not inner:  # the guard's Max over no values: the reference's error
        peak = next(n for n in group.guard if isinstance(n, core.Max))
        if all(out.shape[:out.ndim - len(peak.attributes["axes"])]):
            raise ExecutionError(f"{peak.op} {peak.name}: max over an empty dim", peak.location)
    if group.reduction is not None and outer:
        identity = reduction_identity(type(group.reduction))
        if identity is None:
            raise empty_reduction_error(group)
        out.fill(identity)
    return True


def empty_reduction_error(group: FusedGroup) -> ExecutionError:
    """The interpreter's error for Max/Min over an empty dim."""
    node = group.reduction
    assert node is not None  # called only for a group with a reduction
    return ExecutionError(f"{node.op} {node.name}: {node.op.lower()} over an empty dim",
                          node.location)

