"""NumPy kernels for the reference transformer: op class -> function.

Every value is an ndarray whose dimensions follow its op's `axes` in order.
A kernel gets the op, the run context and its args' values, and returns the
op's value (or None for ops run for effect). Kernels are plain and obviously
correct; speed is the business of the other backends.

The reference is what every other transformer is compared with, so it is
written on its own: it reads nothing from the core ops' traits and nothing from
the lowering (tests/test_reference_independence.py checks), and computes each
axes op from NumPy expressions written here. A wrong mapping in the core or in
the lowering then shows up as a disagreement instead of being shared.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from ..axes import Axes
from ..dtypes import is_bfloat16, kind_of
from ..errors import ExecutionError, no_kernel_error
from ..op_graph import control, debug, dot, elementwise as ew, nn, random, reductions as red
from ..op_graph import shape_ops as so
from ..op_graph.tensors import AssignableTensorOp, InitializeOp
from ..op_table import OpTable

Kernel = Callable[..., np.ndarray]
#: The reference kernel of each axes op: `kernel(op, ctx, *arg_values) -> value or None`.
KERNELS: OpTable[Kernel] = OpTable("numpy transformer kernel")
kernel = KERNELS.register


def align(value: np.ndarray, from_axes: Axes, to_axes: Axes) -> np.ndarray:
    """View `value` (dims in `from_axes` order) with dims in `to_axes` order.

    Axes of `to_axes` missing from `from_axes` become dims of length 1, so the
    result broadcasts against any array laid out in `to_axes` order.
    """
    present = [a for a in to_axes if a in from_axes]
    value = np.transpose(value, [from_axes.index(a) for a in present]) if present else value
    shape, source = [], iter(value.shape)
    for axis in to_axes:
        shape.append(next(source) if axis in from_axes else 1)
    return value.reshape(shape)


# -- elementwise ----------------------------------------------------------------
# Each function gets its args already converted to the op's operand type and returns the
# op's value. NumPy's own ufuncs on that type give the op's meaning for every type
# (axgraph/dtypes.py): np.add of booleans is or, np.maximum of booleans is or.

_math_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(x):
    e = np.exp(-np.abs(x))  # never overflows; 1/(1+e) for x >= 0, e/(1+e) below
    return (np.where(x >= 0, np.ones_like(x), e) / (1 + e)).astype(x.dtype)


def _safelog(x):
    return np.log(np.maximum(x, np.asarray(np.exp(-50.0), x.dtype)))  # in x's precision


def _floor(x):
    return np.floor(x) if kind_of(x.dtype) == "f" else x  # integers and booleans are whole


def _relu(x):
    return np.maximum(x, np.zeros((), x.dtype))


#: NumPy's expression of each elementwise axes op, for the reference alone.
ELEMENTWISE: OpTable[Callable] = OpTable("reference elementwise function", {
    ew.Negative: np.negative, ew.Absolute: np.absolute, ew.Sign: np.sign,
    ew.Square: np.square, ew.Sqrt: np.sqrt, ew.Exp: np.exp, ew.Log: np.log, ew.Log1p: np.log1p,
    ew.Safelog: _safelog, ew.Reciprocal: lambda x: 1 / x, ew.Tanh: np.tanh,
    ew.Sigmoid: _sigmoid, ew.Sin: np.sin, ew.Cos: np.cos, ew.Tan: np.tan,
    ew.Erf: lambda x: _math_erf(x).astype(x.dtype), ew.Rsqrt: lambda x: 1 / np.sqrt(x),
    ew.Relu: _relu, ew.Floor: _floor, ew.StopGradient: lambda x: x,
    ew.Add: np.add, ew.Subtract: np.subtract, ew.Multiply: np.multiply,
    ew.Divide: np.true_divide, ew.Power: np.power, ew.Maximum: np.maximum,
    ew.Minimum: np.minimum, ew.Equal: np.equal, ew.NotEqual: np.not_equal, ew.Less: np.less,
    ew.LessEqual: np.less_equal, ew.Greater: np.greater, ew.GreaterEqual: np.greater_equal,
})


def _has_function(op_class: type) -> bool:
    return ELEMENTWISE.lookup(op_class) is not None


@kernel(ew.UnaryElementWiseOp, when=_has_function)
def _unary(op, ctx, x):
    return ELEMENTWISE.lookup(type(op))(x.astype(op.operand_dtype, copy=False))


@kernel(ew.BinaryElementWiseOp, when=_has_function)
def _binary(op, ctx, x, y):
    x_arg, y_arg = op.args
    function = ELEMENTWISE.lookup(type(op))
    x, y = x.astype(op.operand_dtype, copy=False), y.astype(op.operand_dtype, copy=False)
    result = function(align(x, x_arg.axes, op.axes), align(y, y_arg.axes, op.axes))
    return np.broadcast_to(result, ctx.lengths(op.axes, op))


@kernel(ew.Where)
def _where(op, ctx, condition, x, y):
    condition_arg, x_arg, y_arg = op.args
    x, y = x.astype(op.operand_dtype, copy=False), y.astype(op.operand_dtype, copy=False)
    result = np.where(align(condition, condition_arg.axes, op.axes),
                      align(x, x_arg.axes, op.axes), align(y, y_arg.axes, op.axes))
    return np.broadcast_to(result, ctx.lengths(op.axes, op))


# -- reductions -----------------------------------------------------------------

REDUCTIONS: OpTable[Callable] = OpTable("reference reduction", {
    red.Sum: np.sum, red.Prod: np.prod, red.Max: np.max, red.Min: np.min})


def _computed_in(dtype: np.dtype) -> np.dtype:
    """The type a sum, product or dot of `dtype` values is computed in: bfloat16's in
    float32, rounded once to bfloat16 at the end (the reference's definition, and what
    accelerators do); every other type in itself, as NumPy computes it."""
    return np.dtype(np.float32) if is_bfloat16(dtype) else dtype


@kernel(*REDUCTIONS)
def _reduce(op, ctx, x):
    (arg,) = op.args
    positions = tuple(arg.axes.index(a) for a in op.reduction_axes)
    if op.reduction_axes and 0 in x.shape and isinstance(op, (red.Max, red.Min)):
        raise ExecutionError(f"{op.name}: {type(op).__name__.lower()} over an empty axis",
                             op.location)
    work = _computed_in(op.dtype)
    result = REDUCTIONS.lookup(type(op))(x.astype(work, copy=False), axis=positions)
    kept = arg.axes - op.reduction_axes
    return align(np.asarray(result).astype(op.dtype, copy=False), kept, op.axes)


@kernel(red.ArgMax, red.ArgMin)
def _arg_reduce(op, ctx, x):
    (arg,) = op.args
    kept = arg.axes - op.reduction_axes
    order = [arg.axes.index(a) for a in kept] + [arg.axes.index(a) for a in op.reduction_axes]
    moved = np.transpose(x, order)
    moved = moved.reshape(moved.shape[:len(kept)] + (-1,))
    if moved.shape[-1] == 0:
        raise ExecutionError(f"{op.name}: arg-reduction over an empty axis", op.location)
    pick = np.argmax if isinstance(op, red.ArgMax) else np.argmin
    return align(pick(moved, axis=-1).astype(op.dtype), kept, op.axes)


@kernel(red.TensorSize)
def _tensor_size(op, ctx):
    return np.asarray(np.prod(ctx.lengths(op.size_axes, op), dtype=np.int64), dtype=op.dtype)


@kernel(dot.DotOp)
def _dot(op, ctx, x, y):
    """np.einsum with one letter per dim: a pair shares its x axis's letter, a batch axis
    appears in both operands and the result, a free axis in one and the result. Letters go
    by side, as one axis may be free in x and contracted in y (``(H, H - 1) . (H, N)``)."""
    x_arg, y_arg = op.args
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    x_letters = {id(a): letters[i] for i, a in enumerate(x_arg.axes)}
    partner = {id(b): x_letters[id(a)] for a, b in op.pairs}
    partner.update((id(a), x_letters[id(a)]) for a in op.batch_axes)
    fresh = iter(letters[len(x_arg.axes):])
    y_letters = {id(b): partner[id(b)] if id(b) in partner else next(fresh) for b in y_arg.axes}
    kept = [x_letters[id(a)] for a in op.batch_axes] + [x_letters[id(a)] for a in op.x_free]
    kept += [y_letters[id(b)] for b in op.y_free]
    spec = (f"{''.join(x_letters[id(a)] for a in x_arg.axes)},"
            f"{''.join(y_letters[id(b)] for b in y_arg.axes)}->{''.join(kept)}")
    work = _computed_in(op.dtype)
    result = np.einsum(spec, x.astype(work, copy=False), y.astype(work, copy=False),
                       optimize=True)
    return np.asarray(result).astype(op.dtype, copy=False)


# -- shape ops ------------------------------------------------------------------

@kernel(so.BroadcastOp)
def _broadcast(op, ctx, x):
    return np.broadcast_to(align(x, op.args[0].axes, op.axes), ctx.lengths(op.axes, op))


@kernel(so.AxesCastOp, so.Unflatten, so.Flatten)
def _reshape(op, ctx, x):
    return x.reshape(ctx.lengths(op.axes, op))


@kernel(so.ReorderAxes)
def _reorder(op, ctx, x):
    arg_axes = op.args[0].axes
    return np.transpose(x, [arg_axes.index(a) for a in op.axes])


@kernel(so.TensorSliceOp)
def _slice(op, ctx, x):
    return x[op.slices]


@kernel(so.SliceAdjointOp)
def _slice_adjoint(op, ctx, delta):
    result = np.zeros(ctx.lengths(op.axes, op), dtype=op.dtype)
    result[op.slices] = delta
    return result


@kernel(so.ConcatOp)
def _concat(op, ctx, *xs):
    position = op.args[0].axes.index(op.concat_axes[0])
    return np.concatenate(xs, axis=position)


@kernel(so.StackOp)
def _stack(op, ctx, *xs):
    return np.stack(xs, axis=op.pos)


@kernel(so.PadOp)
def _pad(op, ctx, x):
    return np.pad(x, op.paddings)


# -- nn, random -----------------------------------------------------------------

@kernel(nn.OneHotOp)
def _one_hot(op, ctx, x):
    classes = ctx.length(op.axis, op)
    labels = np.asarray(x)
    if kind_of(labels.dtype) == "f" and not np.all(np.isfinite(labels) & (labels == np.round(labels))):
        raise ExecutionError(f"{op.name}: one_hot labels must be whole numbers", op.location)
    labels = labels.astype(np.int64)
    if labels.size and (labels.min() < 0 or labels.max() >= classes):
        raise ExecutionError(f"{op.name}: labels must lie in [0, {classes}) for axis "
                             f"{op.axis.name}; got {labels.min()}..{labels.max()}", op.location)
    return (labels[np.newaxis] == np.arange(classes).reshape((-1,) + (1,) * labels.ndim)).astype(op.dtype)


def _positions(op) -> tuple:
    """Where a softmax's normalization axes are among its (and its value's) axes."""
    return tuple(op.axes.index(a) for a in op.normalization_axes)


@kernel(nn.SoftmaxOp)
def _softmax(op, ctx, x):
    x = x.astype(op.dtype, copy=False)
    if x.size == 0:
        return x.copy()
    axis = _positions(op)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@kernel(nn.LogSoftmaxOp)
def _log_softmax(op, ctx, x):
    x = x.astype(op.dtype, copy=False)
    if x.size == 0:
        return x.copy()
    axis = _positions(op)
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


@kernel(nn.SoftmaxBackpropOp)
def _softmax_backprop(op, ctx, delta, y):
    delta_op, y_op = op.args
    delta = align(delta, delta_op.axes, op.axes).astype(op.dtype, copy=False)
    axis = _positions(op)
    if op.log:  # y = log softmax(x): dx = delta - softmax(x) * sum(delta)
        return delta - np.exp(y) * delta.sum(axis=axis, keepdims=True)
    return y * (delta - (delta * y).sum(axis=axis, keepdims=True))


@kernel(random.UniformOp)
def _uniform(op, ctx):
    return ctx.rng(op).uniform(op.low, op.high, ctx.lengths(op.axes, op)).astype(op.dtype)


@kernel(random.NormalOp)
def _normal(op, ctx):
    return ctx.rng(op).normal(op.loc, op.scale, ctx.lengths(op.axes, op)).astype(op.dtype)


# -- stored tensors and control -------------------------------------------------

@kernel(AssignableTensorOp)
def _read_tensor(op, ctx):
    return ctx.read(op)


@kernel(InitializeOp)
def _initialize(op, ctx, *computed):
    tensor = op.tensor
    lengths = ctx.lengths(tensor.axes, tensor)
    if computed:  # the initial value was given as an op: its value, placed
        ctx.write(tensor, tensor.array_from_initial_op(computed[0], lengths))
    else:
        ctx.write(tensor, tensor.initial_array(lengths))


@kernel(control.AssignOp)
def _assign(op, ctx, _current, value):
    tensor, value_op = op.tensor, op.value
    shape = ctx.lengths(tensor.axes, tensor)
    if op.item is None:
        new = np.broadcast_to(align(value, value_op.axes, tensor.axes), shape)
        ctx.write(tensor, np.array(new, dtype=tensor.dtype))
        return None
    new = np.array(ctx.read(tensor), dtype=tensor.dtype)
    region_axes = Axes(a for a, item in zip(tensor.axes, op.item) if isinstance(item, slice))
    if value_op.axes.issubset(region_axes):
        value = align(value, value_op.axes, region_axes)
    try:
        new[op.item] = value
    except ValueError as error:
        raise ExecutionError(f"{op.name}: cannot write {value_op.name} {value_op.axes} into "
                             f"{tensor.name}{list(op.item)}: {error}", op.location) from None
    ctx.write(tensor, new)
    return None


@kernel(control.SequentialOp)
def _sequential(op, ctx, *values):
    last = op.args[-1]
    return ctx.read(last) if last.is_assignable else values[-1]


@kernel(control.DoAllOp)
def _do_all(op, ctx, *values):
    return None


@kernel(control.ValueOfOp)
def _value_of(op, ctx, x):
    return np.array(x, copy=True)


@kernel(debug.PrintOp)
def _print(op, ctx, x):
    from ..core.host import print_value  # the text every backend prints

    print_value(op.prefix, x, op.show_value)
    return x


def find_kernel(op) -> Kernel:
    """The kernel of `op`'s class or of its nearest registered base class.

    Parameters
    ----------
    op : Op
        The op to run.

    Returns
    -------
    callable
        ``kernel(op, ctx, *arg_values)``.

    Raises
    ------
    ExecutionError
        No kernel serves the op's class: the message names the op, the user's line
        that built it, and what to register.
    """
    found = KERNELS.lookup(type(op))
    if found is not None:
        return found
    kind = type(op).__name__
    raise no_kernel_error(ExecutionError, f"{kind} ({op.name})", op.location,
                          "numpy transformer kernel for it", f"register a reference kernel with "
                          f"@axgraph.transformers.reference_kernels.kernel({kind}) (and a lowering "
                          f"rule, @axgraph.lowering.rules.rule({kind}), for the other "
                          f"transformers)")


def run_kernel(op, ctx, values: Sequence[np.ndarray | None]):
    """Apply op's kernel to its args' values."""
    return find_kernel(op)(op, ctx, *values)
