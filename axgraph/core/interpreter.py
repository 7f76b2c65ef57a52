"""The "interpreter" backend: each core op run by a NumPy kernel from a table.

A call checks every argument against its parameter (element type exactly,
rank, dims), binds the size variables of the parameters' shapes from the
arguments' shapes (solving `2*N + 1 == 7` where needed), runs the nodes in
order and checks each value against its node's type, so a kernel bug or a
symbolic bound gone negative fails at the node that caused it. Results go into
fresh arrays, or into the caller's `out=` arrays (distinct, and never one
of the argument arrays).
"""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from .. import dims
from ..dtypes import is_bfloat16, kind_of
from ..errors import AxgraphError, ExecutionError, no_kernel_error
from ..op_table import OpTable
from . import ops
from .backend import Backend, CacheInfo, bind_arguments, checked_outs, unspecialized_cache_info
from .function import Function
from .movement_kernels import movement_kernels, pad_spatial, window_positions
from .softmax_kernels import softmax_kernels
from .node import Node
from .traits import numpy_function, reduction_identity, reduction_ufunc
from .tensor_types import Shape

Kernel = Callable[..., np.ndarray]
#: The interpreter's kernel of each op: `kernel(node, ctx, *input_arrays) -> array`.
KERNELS: OpTable[Kernel] = OpTable("interpreter kernel")
kernel = KERNELS.register


class Context:
    """What a kernel may ask besides its inputs: concrete shapes and random streams."""

    def __init__(self, bindings: Mapping[str, int], generators: Mapping[Node, np.random.Generator]):
        self.bindings = bindings
        self.generators = generators
        #: Each symbolic dim's value under `bindings`: a graph over a batch of N asks for N
        #: (and 4*N, ...) at many nodes, and evaluating an expression is not free.
        self._dims: Dict[dims.Dim, int] = {}

    def shape(self, shape: Shape) -> Tuple[int, ...]:
        if not isinstance(shape, Shape):
            shape = Shape(shape)
        return tuple(self.dim(d) if isinstance(d, dims.Dim) else d for d in shape)

    def node_shape(self, node: Node) -> Tuple[int, ...]:
        """`node`'s concrete shape at these sizes; a negative dim (a symbolic slice or pad
        that does not fit the sizes bound) is an ExecutionError naming the node, on every
        backend, never an empty result."""
        shape = self.shape(node.shape)
        if any(d < 0 for d in shape):
            raise ExecutionError(f"{node.op} {node.name}: shape {node.shape} is {list(shape)} "
                                 f"with {bindings_text(self.bindings)}; dims cannot be negative",
                                 node.location)
        return shape

    def dim(self, value) -> int:
        if not isinstance(value, dims.Dim):
            return value
        found = self._dims.get(value)
        if found is None:
            found = self._dims[value] = value.evaluate(self.bindings)
        return found


# -- leaves ------------------------------------------------------------------------------

@kernel(ops.Constant)
def _constant(node, ctx):
    return np.broadcast_to(node.value, ctx.shape(node.shape))


@kernel(ops.DimValue)
def _dim_value(node, ctx):
    return np.asarray(ctx.dim(node.dim), dtype=node.element_type.dtype)


@kernel(ops.RandomUniform)
def _uniform(node, ctx):
    draw = ctx.generators[node].uniform(node.low, node.high, ctx.shape(node.shape))
    return draw.astype(node.element_type.dtype)


@kernel(ops.RandomNormal)
def _normal(node, ctx):
    draw = ctx.generators[node].normal(node.mean, node.stddev, ctx.shape(node.shape))
    return draw.astype(node.element_type.dtype)


# -- elementwise ---------------------------------------------------------------------------

@kernel(Node, when=lambda op_class: numpy_function(op_class) is not None)
def _elementwise(node: Node, ctx: "Context", *inputs: np.ndarray) -> np.ndarray:
    """Every elementwise op that declares its reference function (its `numpy` trait)."""
    return type(node).numpy(*inputs)  # type: ignore[misc]  # the entry's condition


@kernel(ops.Convert)
def _convert(node, ctx, x):
    return x.astype(node.element_type.dtype)


# -- data movement ---------------------------------------------------------------------------

for _op_class, _kernel in movement_kernels(np).items():
    kernel(_op_class)(_kernel)


@kernel(ops.Pad)
def _pad(node, ctx, x):
    result = np.full(ctx.shape(node.shape), node.value, dtype=x.dtype)
    if x.size:
        result[tuple(slice(b, b + (d - 1) * (i + 1) + 1, i + 1)
                     for b, d, i in zip(node.below, x.shape, node.interior))] = x
    return result


# -- contraction and reductions -----------------------------------------------------------

@kernel(ops.Dot)
def _dot(node, ctx, a, b):
    work = _computed_in(a.dtype)
    a, b = a.astype(work, copy=False), b.astype(work, copy=False)
    if not node.batch_a:
        result = np.tensordot(a, b, axes=(list(node.contract_a), list(node.contract_b)))
        return result.astype(node.element_type.dtype, copy=False)
    # a stack of matrix products: a as (batch, free, contracted), b as (batch, contracted, free)
    free_a = [i for i in range(a.ndim) if i not in node.contract_a + node.batch_a]
    free_b = [j for j in range(b.ndim) if j not in node.contract_b + node.batch_b]
    batch = [a.shape[i] for i in node.batch_a]
    m, k, n = (math.prod(a.shape[i] for i in free_a), math.prod(a.shape[i] for i in node.contract_a),
               math.prod(b.shape[j] for j in free_b))
    left = a.transpose(list(node.batch_a) + free_a + list(node.contract_a)).reshape(batch + [m, k])
    right = b.transpose(list(node.batch_b) + list(node.contract_b) + free_b).reshape(batch + [k, n])
    result = np.matmul(left, right).reshape(
        batch + [a.shape[i] for i in free_a] + [b.shape[j] for j in free_b])
    return result.astype(node.element_type.dtype, copy=False)


def _computed_in(dtype: np.dtype) -> np.dtype:
    """bfloat16 sums, products and dots run in float32 and round once at the end (as the
    reference's do); every other type in itself."""
    return np.dtype(np.float32) if is_bfloat16(dtype) else dtype


@kernel(ops.Reduction, when=lambda op_class: reduction_ufunc(op_class) is not None)
def _reduce(node, ctx, x):
    """Every reduction that declares its ufunc (its `reduce_ufunc` trait), in x's own type
    (no promotion of small ints); an empty dim without the ufunc's identity is an error."""
    if reduction_identity(type(node)) is None and any(x.shape[a] == 0 for a in node.axes):
        raise ExecutionError(f"{node.op.lower()} over an empty dim")
    result = node.reduce_ufunc.reduce(x, axis=node.axes, dtype=_computed_in(x.dtype))
    return np.asarray(result).astype(x.dtype, copy=False)


@kernel(ops.ArgMax, ops.ArgMin)
def _arg_reduce(node, ctx, x):
    kept = [i for i in range(x.ndim) if i not in node.axes]
    moved = np.transpose(x, kept + list(node.axes))
    moved = moved.reshape(moved.shape[:len(kept)] + (-1,))
    if moved.shape[-1] == 0:
        raise ExecutionError(f"{node.op.lower()} over an empty dim")
    pick = np.argmax if isinstance(node, ops.ArgMax) else np.argmin
    return pick(moved, axis=-1).astype(node.element_type.dtype)


for _op_class, _kernel in softmax_kernels(np).items():
    kernel(_op_class)(_kernel)


# -- windows ----------------------------------------------------------------------------------

def _conv_args(node):
    return node.strides, node.dilation, node.padding_below, node.padding_above


def columns(x, window, strides, dilation, below, above, out_spatial, out=None) -> np.ndarray:
    """im2col: (N, P..., C, R...) so that one reshape gives the (N*P, C*R) matrix for free."""
    padded = pad_spatial(np, x, below, above, 0)
    nd = len(window)
    shape = (x.shape[0],) + tuple(out_spatial) + (x.shape[1],) + tuple(window)
    result = np.empty(shape, dtype=x.dtype) if out is None else out
    for offset in np.ndindex(*window):
        patch = padded[window_positions(offset, strides, dilation, out_spatial)]  # (N, C, P...)
        result[(Ellipsis,) + offset] = np.moveaxis(patch, 1, 1 + nd)
    return result


@kernel(ops.Im2Col)
def _im2col(node, ctx, x):
    return columns(x, node.window, node.strides, node.dilation, node.padding_below,
                    node.padding_above, ctx.shape(node.shape)[1:1 + len(node.window)])


def uncolumns(cols, window, strides, dilation, below, above, x_shape, out=None) -> np.ndarray:
    """col2im, the adjoint of `columns`: cols (N, P..., C, R...) summed back into (N, C, S...).

    One strided add per window offset into a zero-padded buffer, then the
    padding is cropped off (what fell on it had no input to go to).
    """
    nd = len(window)
    padded = np.zeros(tuple(x_shape[:2]) + tuple(n + b + a for n, b, a in
                                              zip(x_shape[2:], below, above)), dtype=cols.dtype)
    positions = cols.shape[1:1 + nd]
    for offset in np.ndindex(*window):
        padded[window_positions(offset, strides, dilation, positions)] += \
            np.moveaxis(cols[(Ellipsis,) + offset], 1 + nd, 1)
    crop = (slice(None), slice(None)) + tuple(slice(b, b + n) for b, n in zip(below, x_shape[2:]))
    if out is None:
        return padded[crop]
    np.copyto(out, padded[crop])
    return out


@kernel(ops.Col2Im)
def _col2im(node, ctx, cols):
    return uncolumns(cols, node.window, node.strides, node.dilation, node.padding_below,
                     node.padding_above, ctx.shape(node.shape))


@kernel(ops.Convolution)
def _convolution(node, ctx, x, w):
    # One BLAS matmul: (N*P, C*R) x (C*R, K).
    strides, dilation, below, above = _conv_args(node)
    out = ctx.shape(node.shape)
    gathered = columns(x, w.shape[2:], strides, dilation, below, above, out[2:])
    rows = int(np.prod(out[:1] + out[2:], dtype=np.int64))
    result = gathered.reshape(rows, -1) @ w.reshape(w.shape[0], -1).T  # (N*P, K)
    result = result.reshape(out[:1] + out[2:] + out[1:2])
    return np.ascontiguousarray(np.moveaxis(result, -1, 1))


@kernel(ops.ConvolutionBackpropData)
def _convolution_backprop_data(node, ctx, w, delta):
    # One matmul, delta (N*P, K) x filters (K, C*R), gives the columns' adjoint
    # (N, P..., C, R...); col2im adds each back where the forward read it.
    columns = np.tensordot(delta, w, axes=([1], [0]))
    return uncolumns(columns, w.shape[2:], *_conv_args(node), ctx.shape(node.shape))


@kernel(ops.ConvolutionBackpropFilters)
def _convolution_backprop_filters(node, ctx, x, delta):
    # One matmul: (K, N*P) x (N*P, C*R), over the same columns as the forward pass.
    strides, dilation, below, above = _conv_args(node)
    filters_shape = ctx.shape(node.shape)
    gathered = columns(x, filters_shape[2:], strides, dilation, below, above, delta.shape[2:])
    by_position = np.moveaxis(delta, 1, -1).reshape(-1, delta.shape[1])  # (N*P, K)
    result = by_position.T @ gathered.reshape(by_position.shape[0], -1)
    return result.reshape(filters_shape)


def _lowest(dtype: np.dtype):
    return -np.inf if kind_of(dtype) == "f" else np.iinfo(dtype).min


def _pool_geometry(node):
    ones = (1,) * len(node.window)
    return node.strides, ones, node.padding_below, node.padding_above


def _window_counts(x_shape, node, out_lengths) -> np.ndarray:
    """How many real (unpadded) inputs each window covers."""
    strides, dilation, below, above = _pool_geometry(node)
    ones = pad_spatial(np, np.ones((1, 1) + tuple(x_shape[2:])), below, above, 0)
    counts = np.zeros((1, 1) + tuple(out_lengths))
    for offset in np.ndindex(*node.window):
        counts += ones[window_positions(offset, strides, dilation, out_lengths)]
    return counts


@kernel(ops.MaxPool, ops.AvgPool)
def _pool(node, ctx, x):
    strides, dilation, below, above = _pool_geometry(node)
    out = ctx.shape(node.shape)
    is_max = isinstance(node, ops.MaxPool)
    padded = pad_spatial(np, x, below, above, _lowest(x.dtype) if is_max else 0)
    result = None
    for offset in np.ndindex(*node.window):
        patch = padded[window_positions(offset, strides, dilation, out[2:])]
        if result is None:
            result = patch.copy()
        elif is_max:
            np.maximum(result, patch, out=result)
        else:
            result += patch
    if not is_max:
        result /= _window_counts(x.shape, node, out[2:]).astype(result.dtype)
    return result


@kernel(ops.MaxPoolBackprop)
def _max_pool_backprop(node, ctx, x, delta):
    # Each output's adjoint goes to the first position (in window order) holding the
    # window's maximum: whole-array comparisons per offset, no fancy indexing.
    strides, dilation, below, above = _pool_geometry(node)
    out = delta.shape[2:]
    padded = pad_spatial(np, x, below, above, _lowest(x.dtype))
    offsets = list(np.ndindex(*node.window))
    windows = [window_positions(offset, strides, dilation, out) for offset in offsets]
    best = padded[windows[0]].copy()
    for window in windows[1:]:
        np.maximum(best, padded[window], out=best)
    gradient = np.zeros(padded.shape, dtype=delta.dtype)
    taken = np.zeros(best.shape, dtype=bool)
    hit = np.empty(best.shape, dtype=bool)
    for window in windows:
        np.equal(padded[window], best, out=hit)
        hit &= ~taken
        taken |= hit
        gradient[window] += delta * hit
    crop = (slice(None), slice(None)) + tuple(slice(b, b + n) for b, n in zip(below, x.shape[2:]))
    return gradient[crop]


@kernel(ops.AvgPoolBackprop)
def _avg_pool_backprop(node, ctx, delta):
    strides, dilation, below, above = _pool_geometry(node)
    x_shape = ctx.shape(node.shape)
    out = delta.shape[2:]
    share = delta / _window_counts(x_shape, node, out).astype(delta.dtype)
    gradient = np.zeros(x_shape[:2] + tuple(n + b + a for n, b, a in zip(x_shape[2:], below, above)),
                        dtype=delta.dtype)
    for offset in np.ndindex(*node.window):
        gradient[window_positions(offset, strides, dilation, out)] += share
    crop = (slice(None), slice(None)) + tuple(slice(b, b + n) for b, n in zip(below, x_shape[2:]))
    return gradient[crop]


# -- indexing -----------------------------------------------------------------------------------

def check_indices(indices: np.ndarray, length: int, what: str) -> None:
    """Raise unless every index lies in [0, length): no silent wrap-around.

    Parameters
    ----------
    indices : np.ndarray
        Integer indices.
    length : int
        The length of the dim they index.
    what : str
        What the indices are, for the message.

    Raises
    ------
    ExecutionError
        An index is negative or not below `length`.
    """
    if indices.size and (indices.min() < 0 or indices.max() >= length):
        raise ExecutionError(f"{what} must lie in [0, {length}); got {indices.min()}.."
                             f"{indices.max()}")


def gather(params: np.ndarray, indices: np.ndarray, axis: int, out=None) -> np.ndarray:
    """Slices of params along `axis` picked by indices (checked: no silent wrap-around)."""
    check_indices(indices, params.shape[axis], "indices")
    # mode="clip" cannot clip after the check; it only spares np.take a buffered copy
    return np.take(params, indices, axis=axis, out=out, mode="clip")


def scatter_add(inputs: np.ndarray, indices: np.ndarray, updates: np.ndarray, axis: int,
                out=None) -> np.ndarray:
    """inputs with each update added at its index along `axis` (repeats accumulate)."""
    check_indices(indices, inputs.shape[axis], "indices")
    result = np.array(inputs, copy=True) if out is None else out
    if out is not None:
        np.copyto(out, inputs)
    target = np.moveaxis(result, axis, 0)  # a view: writes land in result
    k = indices.ndim
    moved = np.moveaxis(updates, list(range(axis, axis + k)), list(range(k)))
    np.add.at(target, indices, moved)
    return result


@kernel(ops.Gather)
def _gather(node, ctx, params, indices):
    return gather(params, indices, node.axis)


@kernel(ops.ScatterAdd)
def _scatter_add(node, ctx, inputs, indices, updates):
    return scatter_add(inputs, indices, updates, node.axis)


@kernel(ops.OneHot)
def _one_hot(node, ctx, x):
    shape = ctx.shape(node.shape)
    axis = node.one_hot_axis
    if kind_of(x.dtype) == "f" and not np.all(np.isfinite(x) & (x == np.round(x))):
        raise ExecutionError("one-hot values must be whole numbers")
    check_indices(x, shape[axis], "one-hot values")
    positions = np.arange(shape[axis]).reshape([-1 if i == axis else 1 for i in range(len(shape))])
    return (np.expand_dims(x, axis) == positions).astype(x.dtype)


@kernel(ops.Fused)
def _fused(node, ctx, *inputs):
    """The body, node by node, over the inputs (sizes bound by the enclosing function)."""
    values: Dict[Node, np.ndarray] = dict(zip(node.function.parameters, inputs))
    for member in node.body:
        values[member] = np.asarray(find_kernel(type(member))(
            member, ctx, *[values[i] for i in member.inputs]))
    return values[node.output]


# -- running ------------------------------------------------------------------------------------

def find_kernel(op_class: type, node: Optional[Node] = None) -> Kernel:
    """The kernel of `op_class` or of its nearest registered base class.

    Parameters
    ----------
    op_class : type
        The core op's class.
    node : Node, optional
        The node to run, named (with the user's line) if no kernel serves it.

    Returns
    -------
    callable
        ``kernel(node, ctx, *input_arrays)``.

    Raises
    ------
    ExecutionError
        No kernel serves `op_class`; the message says what to register.
    """
    found = KERNELS.lookup(op_class)
    if found is None:
        raise no_kernel_error(ExecutionError, f"the core op {op_class.__name__}",
                              None if node is None else node.location,
                              "core interpreter kernel for it",
                              f"register a kernel with @axgraph.core.interpreter.kernel("
                              f"{op_class.__name__})")
    return found


class InterpretedFunction:
    """A Function ready to call: `fn(*arrays, out=None, donate=None)` returns a tuple of
    result arrays (fresh ones, or the caller's `out=` arrays filled; donations are not
    taken)."""

    def __init__(self, function: Function):
        self.function = function
        self._kernels = [(node, find_kernel(type(node), node)) for node in function.nodes
                         if not isinstance(node, ops.Parameter)]
        self._generators: Dict[Node, np.random.Generator] = {
            node: np.random.default_rng(node.seed) for node in function.nodes
            if isinstance(node, (ops.RandomUniform, ops.RandomNormal))}
        #: Calls whose arguments passed the checks: each ran the one program (cache_info).
        self._calls = 0

    def cache_info(self) -> CacheInfo:
        """No program per binding: sizes are evaluated per call, so nothing is ever rebuilt.

        Returns
        -------
        CacheInfo
            Every call run so far as a hit, no misses, `maxsize` 0 and no keys.
        """
        return unspecialized_cache_info(self._calls)

    # -- the call --------------------------------------------------------------------------------
    def __call__(self, *arrays, out=None, donate=None) -> Tuple[np.ndarray, ...]:
        arrays, bindings = bind_arguments(self.function, arrays)
        self._calls += 1
        ctx = Context(bindings, self._generators)
        if out is not None:  # checked before anything runs (each node checks its own shape)
            out = checked_outs(self.function, out, arrays,
                               [ctx.node_shape(node) for node in self.function.results])
        values: Dict[Node, np.ndarray] = dict(zip(self.function.parameters, arrays))
        with np.errstate(all="ignore"):
            for node, run in self._kernels:
                values[node] = self._run(node, run, ctx, [values[i] for i in node.inputs])
        if out is None:
            out = (None,) * len(self.function.results)
        results = []
        for array, node in zip(out, self.function.results):
            if array is None:
                results.append(np.array(values[node], copy=True))
            else:
                np.copyto(array, values[node])
                results.append(array)
        return tuple(results)

    def _run(self, node: Node, run: Kernel, ctx: Context, inputs: List[np.ndarray]) -> np.ndarray:
        expected = ctx.node_shape(node)
        try:
            value = np.asarray(run(node, ctx, *inputs))
        except AxgraphError as error:
            raise ExecutionError(f"{node.op} {node.name}: {error.message}", node.location) from None
        except (ArithmeticError, ValueError, IndexError, TypeError) as error:
            raise ExecutionError(f"{node.op} {node.name}: {error}", node.location) from error
        if value.shape != expected or value.dtype != node.element_type.dtype:
            raise ExecutionError(f"{node.op} {node.name}: computed {value.dtype}"
                                 f"{list(value.shape)}, but the node is {node.type_str()} = "
                                 f"{node.element_type.dtype}{list(expected)} with "
                                 f"{bindings_text(ctx.bindings)}", node.location)
        return value


def bindings_text(bindings: Mapping[str, int]) -> str:
    if not bindings:
        return "no size variables"
    return ", ".join(f"{k} = {v}" for k, v in sorted(bindings.items()))


class InterpreterBackend(Backend):
    """The "interpreter" backend: runs any binding of sizes without recompiling."""

    def compile(self, function: Function) -> InterpretedFunction:
        return InterpretedFunction(function)
