"""The jax backend's kernels: each core op as `jax.numpy` / `jax.lax`, from one table.

Mirrors the core interpreter (axgraph/core/interpreter.py) kernel for kernel,
with the same semantics, traced once per binding of the size variables:
`kernel(node, ctx, *input_values) -> value`. The elementwise ops and the
reductions are not named here: their kernels are derived from the traits the
ops declare (the NumPy ufunc of the `numpy` or `reduce_ufunc` trait is called
by name in `jax.numpy`, and each of the few reference functions that are not
a ufunc has its jax form in `REFERENCE_FORMS`), so a new op declared with a
ufunc trait runs here unchanged.

What the interpreter checks on the values (an index out of range, an integer
division by zero) cannot raise inside a traced program: the kernel records the
condition with `ctx.check`, the program returns it as an extra output, and the
executable raises the ExecutionError on the host after the call. What depends
only on shapes (an empty dim, a slice that does not fit) raises while tracing,
as the interpreter raises it.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import io_callback

from ... import dims
from ...core import ops
from ...core.host import HostCall
from ...core.interpreter import KERNELS as INTERPRETER_KERNELS, bindings_text
from ...core.movement_kernels import movement_kernels, pad_spatial, window_positions
from ...core.softmax_kernels import softmax_kernels
from ...core.node import Node
from ...core.ops import reference
from ...core.tensor_types import Shape
from ...core.traits import numpy_function, reduction_identity, reduction_ufunc
from ...errors import AxgraphError, ExecutionError
from ...op_table import OpTable

Kernel = Callable[..., Any]
#: The jax kernel of each op: `kernel(node, ctx, *input_values) -> jax value`.
KERNELS: OpTable[Kernel] = OpTable("jax kernel")
kernel = KERNELS.register

#: Float32 matmuls and convolutions at full precision on every device (GPUs and TPUs would
#: otherwise round their inputs to TF32 or bfloat16): float32 tolerances hold everywhere.
PRECISION = lax.Precision.HIGHEST


class Check:
    """A condition found while running: `flag` (traced bool) set means `message`, formatted
    with the traced `values` on the host, is the node's ExecutionError."""

    def __init__(self, node: Node, flag, message: str, values: Tuple = ()):
        self.node, self.flag, self.message, self.values = node, flag, message, values


class TraceContext:
    """What a kernel may ask besides its inputs: concrete shapes at the binding traced, the
    host's random draws, and where to record checks made on the values."""

    def __init__(self, bindings: Mapping[str, int], draws: Mapping[Node, Any],
                 platform: str = "cpu"):
        self.bindings = bindings
        self.draws = draws
        #: Whether float sums accumulate in float64: on a CPU, where it costs little. A GPU
        #: pays for it (a third of a small training step's time on an H200) and a TPU has no
        #: float64; there XLA's tree-shaped float32 sums stay within float32 tolerances.
        self.wide_floats = platform == "cpu"
        #: Whether float32 division and square roots go through float64: XLA's GPU forms
        #: of them are an ulp or two off the correctly rounded IEEE results the reference
        #: (and XLA on a CPU) gives, while float64's, rounded once to float32, are exact.
        self.rounds_via_float64 = platform == "gpu"
        #: Whether a matmul's left operand must have its contracted dims innermost: XLA's
        #: CPU dots are up to twice as slow when they are not (a feature-major network's
        #: backward pass, W^T @ delta), and one copy into that order costs far less. A GPU's
        #: matmul reads either order as fast.
        self.contracts_lhs_innermost = platform == "cpu"
        self.checks: List[Check] = []

    def shape(self, shape) -> Tuple[int, ...]:
        if not isinstance(shape, Shape):
            shape = Shape(shape)
        return tuple(self.dim(d) for d in shape)

    def dim(self, value) -> int:
        return dims.evaluate(value, self.bindings) if isinstance(value, dims.Dim) else value

    def check(self, node: Node, flag, message: str, *values) -> None:
        """Raise ExecutionError(`message`.format(*values)) after the call if `flag` holds."""
        self.checks.append(Check(node, flag, message, values))


def dtype_of(node: Node) -> np.dtype:
    return node.element_type.dtype


# -- leaves ------------------------------------------------------------------------------

@kernel(ops.Constant)
def _constant(node, ctx):
    return jnp.broadcast_to(jnp.asarray(node.value, dtype_of(node)), ctx.shape(node.shape))


@kernel(ops.DimValue)
def _dim_value(node, ctx):
    return jnp.asarray(ctx.dim(node.dim), dtype_of(node))


@kernel(ops.RandomUniform, ops.RandomNormal)
def _random(node, ctx):
    """Drawn on the host by the node's own NumPy generator, as on every backend (the same
    stream, call after call), and passed in as an argument of the program."""
    return ctx.draws[node]


# -- elementwise ---------------------------------------------------------------------------

def _sigmoid(x):
    e = jnp.exp(-jnp.abs(x))
    return jnp.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype)


def _divide(a, b):
    if not jnp.issubdtype(a.dtype, jnp.integer):
        return jnp.true_divide(a, _as_computed(b))
    safe = jnp.where(b == 0, jnp.ones_like(b), b)  # (a zero divisor fails its check)
    return lax.div(a, safe)  # truncation toward zero, the core rule


def _as_computed(value):
    """`value`, hidden from XLA's algebraic rewrites of what uses it: XLA turns `a / c`
    into `a * (1 / c)` for a constant c, `1 / sqrt(x)` into `rsqrt(x)` and `(1 + x) - 1`
    into `x`, each an ulp (or all digits) away from the IEEE operations the reference
    performs (Divide and Rsqrt declare "correct" rounding: the same bits on every
    backend). A division by a constant still fuses with its operands."""
    return lax.optimization_barrier(value)


def _rsqrt(x):
    return jnp.divide(jnp.ones((), x.dtype), _as_computed(jnp.sqrt(x)))


def _erf(x):
    """XLA's erf in x's own type (float32 and wider; narrower floats go through float32).
    Its float32 erf is an ulp off the reference's float64-rounded value at some inputs
    (erf(-1) among them): within float32 tolerances, and computing in float64 instead
    costs ten times the time on a CPU (docs/jax.md)."""
    if x.dtype in (np.float32, np.float64):
        return lax.erf(x)
    return lax.erf(x.astype(np.float32)).astype(x.dtype)


def _log1p(x):
    """log(1 + x) within a few ulps in every float type: XLA's float64 log1p is ~100 ulps
    off around -0.4, so float64 takes Kahan's form, log(u) * x / (u - 1) with u = 1 + x
    (x itself where u rounds to 1, u where it is +inf)."""
    if x.dtype != np.float64:
        return jnp.log1p(x)
    u = _as_computed(1 + x)  # XLA would simplify (1 + x) - 1 to x
    kahan = jnp.log(u) * x / _as_computed(u - 1)
    return jnp.where(u == 1, x, jnp.where(u == np.inf, u, kahan))


#: The jax form of each reference function that jax.numpy's function of the same name
#: does not match (the other ufuncs are called by name in jax.numpy), and of each reference
#: function that is not a ufunc.
REFERENCE_FORMS: Dict[Callable, Callable] = {
    np.log1p: _log1p,
    reference.sigmoid: _sigmoid,
    reference.divide: _divide,
    reference.select: jnp.where,
    reference.erf: _erf,
    reference.rsqrt: _rsqrt,
}


def elementwise_form(op_class: type) -> Optional[Callable]:
    """The jax function computing an elementwise op, from its `numpy` trait, else None."""
    function = numpy_function(op_class)
    if function is None:
        return None
    if function in REFERENCE_FORMS:
        return REFERENCE_FORMS[function]
    if isinstance(function, np.ufunc):
        return getattr(jnp, function.__name__, None)
    return None


@kernel(Node, when=lambda op_class: numpy_function(op_class) is not None)
def _elementwise(node: Node, ctx: TraceContext, *inputs):
    """Every elementwise op that declares its reference function: its jax form, or else
    the reference itself, run on the host (an op added outside the library runs here as
    declared, at the cost of a round trip)."""
    form = elementwise_form(type(node))
    if form is None:
        return _on_host(node, numpy_function(type(node)), inputs)
    check = INTEGER_CHECKS.get(form)
    if check is not None and jnp.issubdtype(inputs[0].dtype, jnp.integer):
        fails, message = check
        ctx.check(node, fails(*inputs), message)
    if ctx.rounds_via_float64 and form in VIA_FLOAT64 and dtype_of(node) == np.float32:
        form = VIA_FLOAT64[form]
    return form(*inputs).astype(dtype_of(node))


def _wide(x):
    return x.astype(np.float64)


def _rsqrt_via_float64(x):
    """rsqrt rounded as its two steps are (to float32 after each), each step exact in float64."""
    root = _as_computed(jnp.sqrt(_wide(x)).astype(np.float32))
    return _divide(jnp.ones((), np.float64), _wide(root))


#: The forms whose float32 results are correctly rounded IEEE operations in the reference,
#: by their form through float64, for devices whose own float32 forms are approximate (GPUs):
#: one float64 operation rounded once to float32 is the correctly rounded float32 result.
VIA_FLOAT64: Dict[Callable, Callable] = {
    _divide: lambda a, b: _divide(_wide(a), _wide(b)),
    jnp.sqrt: lambda x: jnp.sqrt(_wide(x)),
    _rsqrt: _rsqrt_via_float64,
}

#: What the reference refuses of integer operands (NumPy's and its own errors), by jax form:
#: (the traced condition over the operands, the message).
INTEGER_CHECKS: Dict[Callable, Tuple[Callable, str]] = {
    _divide: (lambda a, b: jnp.any(b == 0), "integer division by zero"),
    jnp.power: (lambda a, b: jnp.any(b < 0), "Integers to negative integer powers are not "
                                             "allowed."),
}


def _on_host(node: Node, function, inputs):
    """`function` of the inputs' values, computed by NumPy on the host during the call."""
    def run(*values):
        with np.errstate(all="ignore"):
            result = np.asarray(function(*[np.asarray(v) for v in values]))
        return result.astype(dtype_of(node), copy=False)

    shape = jax.ShapeDtypeStruct(tuple(inputs[0].shape), dtype_of(node))
    return jax.pure_callback(run, shape, *inputs, vmap_method="broadcast_all")


@kernel(ops.Convert)
def _convert(node, ctx, x):
    return x.astype(dtype_of(node))


# -- data movement ---------------------------------------------------------------------------

for _op_class, _kernel in movement_kernels(jnp).items():
    kernel(_op_class)(_kernel)


@kernel(ops.Pad)
def _pad(node, ctx, x):
    shape = ctx.shape(node.shape)
    value = jnp.asarray(node.value, x.dtype)
    if x.size == 0:
        return jnp.full(shape, value, x.dtype)
    config = [(ctx.dim(b), ctx.dim(a), i) for b, a, i in zip(node.below, node.above,
                                                              node.interior)]
    return lax.pad(x, value, config)


# -- contraction and reductions -----------------------------------------------------------

@kernel(ops.Dot)
def _dot(node, ctx, a, b):
    # result dims: batch, a's free, b's free: the order of the core Dot
    contract_a, batch_a = tuple(node.contract_a), tuple(node.batch_a)
    if ctx.contracts_lhs_innermost:
        a, contract_a, batch_a = _contracted_innermost(a, contract_a, batch_a)
    dimensions = ((contract_a, tuple(node.contract_b)), (batch_a, tuple(node.batch_b)))
    result = lax.dot_general(a, b, dimensions, precision=PRECISION)
    return result.astype(dtype_of(node))


def _contracted_innermost(a, contract, batch):
    """`a` copied into (batch, free, contracted) order where its contracted dims are not
    already innermost, with the dims' new positions. The copy is behind an optimization
    barrier: XLA would otherwise fold the transpose back into the dot."""
    if contract == tuple(range(a.ndim - len(contract), a.ndim)):
        return a, contract, batch
    free = [d for d in range(a.ndim) if d not in contract and d not in batch]
    order = list(batch) + free + list(contract)
    moved = lax.optimization_barrier(jnp.transpose(a, order))
    place = {d: i for i, d in enumerate(order)}
    return moved, tuple(place[d] for d in contract), tuple(place[d] for d in batch)


def _empty_reduction(node, x, axes) -> bool:
    return any(x.shape[a] == 0 for a in axes)


@kernel(ops.Reduction, when=lambda op_class: reduction_ufunc(op_class) is not None)
def _reduce(node, ctx, x):
    """Every reduction that declares its ufunc, in x's own type (no promotion of small
    ints); an empty dim without the ufunc's identity is an error."""
    if reduction_identity(type(node)) is None and _empty_reduction(node, x, node.axes):
        raise ExecutionError(f"{node.op.lower()} over an empty dim")
    ufunc = getattr(jnp, node.reduce_ufunc.__name__)
    if node.wide_accumulator and jnp.issubdtype(x.dtype, jnp.floating) and ctx.wide_floats:
        # rounding errors add up over many values: XLA adds them in order, where NumPy
        # sums pairwise, so floats accumulate in float64 and round once
        x = x.astype(np.float64)
    # integers wrap and booleans saturate alike in a wider type: the same values as NumPy's
    # reduction in x's own type
    return ufunc.reduce(x, axis=tuple(node.axes)).astype(dtype_of(node))


@kernel(ops.ArgMax, ops.ArgMin)
def _arg_reduce(node, ctx, x):
    kept = [i for i in range(x.ndim) if i not in node.axes]
    moved = jnp.transpose(x, kept + list(node.axes))
    moved = moved.reshape(moved.shape[:len(kept)] + (-1,))
    if moved.shape[-1] == 0:
        raise ExecutionError(f"{node.op.lower()} over an empty dim")
    pick = jnp.argmax if isinstance(node, ops.ArgMax) else jnp.argmin
    return pick(moved, axis=-1).astype(dtype_of(node))


for _op_class, _kernel in softmax_kernels(jnp).items():
    kernel(_op_class)(_kernel)


# -- windows ----------------------------------------------------------------------------------

def _placed(values, offset, strides, dilation, padded_spatial):
    """`values` (N, C, P...) where `window_positions(offset, ...)` reads them from an array of
    spatial shape `padded_spatial`, zeros elsewhere: the adjoint of that read, as one pad
    (interior padding spreads the positions by the strides), not a scatter."""
    config = [(0, 0, 0), (0, 0, 0)]
    for o, d, s, n, total in zip(offset, dilation, strides, values.shape[2:], padded_spatial):
        start = o * d
        span = s * (n - 1) + 1 if n else 0
        config.append((start, total - start - span, s - 1))
    return lax.pad(values, jnp.zeros((), values.dtype), config)


def _crop(x, below, lengths):
    return x[(slice(None), slice(None)) + tuple(slice(b, b + n) for b, n in zip(below, lengths))]


def _columns(x, window, strides, dilation, below, above, out_spatial):
    """im2col: (N, P..., C, R...), as the interpreter's `columns`."""
    padded = pad_spatial(jnp, x, below, above, 0)
    nd = len(window)
    patches = [jnp.moveaxis(padded[window_positions(offset, strides, dilation, out_spatial)],
                            1, 1 + nd)
               for offset in np.ndindex(*window)]
    stacked = jnp.stack(patches, axis=-1)  # (N, P..., C, prod(R))
    return stacked.reshape(stacked.shape[:-1] + tuple(window))


def _uncolumns(cols, window, strides, dilation, below, above, x_shape):
    """col2im, the adjoint of `_columns`: each window offset's columns added back."""
    nd = len(window)
    padded_spatial = [n + b + a for n, b, a in zip(x_shape[2:], below, above)]
    total = jnp.zeros(tuple(x_shape[:2]) + tuple(padded_spatial), cols.dtype)
    for offset in np.ndindex(*window):
        values = jnp.moveaxis(cols[(Ellipsis,) + offset], 1 + nd, 1)
        total = total + _placed(values, offset, strides, dilation, padded_spatial)
    return _crop(total, below, x_shape[2:])


@kernel(ops.Im2Col)
def _im2col(node, ctx, x):
    return _columns(x, node.window, node.strides, node.dilation, node.padding_below,
                    node.padding_above, ctx.shape(node.shape)[1:1 + len(node.window)])


@kernel(ops.Col2Im)
def _col2im(node, ctx, cols):
    return _uncolumns(cols, node.window, node.strides, node.dilation, node.padding_below,
                      node.padding_above, ctx.shape(node.shape))


def _convolve(x, w, node):
    return lax.conv_general_dilated(
        x, w, window_strides=tuple(node.strides),
        padding=list(zip(node.padding_below, node.padding_above)),
        rhs_dilation=tuple(node.dilation), precision=PRECISION)


@kernel(ops.Convolution)
def _convolution(node, ctx, x, w):
    return _convolve(x, w, node).astype(dtype_of(node))


@kernel(ops.ConvolutionBackpropData)
def _convolution_backprop_data(node, ctx, w, delta):
    """The adjoint of the convolution in its data: XLA's own transpose of it."""
    zeros = jnp.zeros(ctx.shape(node.shape), delta.dtype)
    _, adjoint = jax.vjp(lambda x: _convolve(x, w, node), zeros)
    return adjoint(delta)[0]


@kernel(ops.ConvolutionBackpropFilters)
def _convolution_backprop_filters(node, ctx, x, delta):
    """The adjoint of the convolution in its filters: XLA's own transpose of it."""
    zeros = jnp.zeros(ctx.shape(node.shape), delta.dtype)
    _, adjoint = jax.vjp(lambda w: _convolve(x, w, node), zeros)
    return adjoint(delta)[0]


def _lowest(dtype: np.dtype):
    return -np.inf if jnp.issubdtype(dtype, jnp.floating) else np.iinfo(dtype).min


def _window_counts(x_shape, node, out_lengths) -> np.ndarray:
    """How many real (unpadded) inputs each window covers: fixed by the shapes, so
    computed with NumPy while tracing."""
    ones = np.pad(np.ones(tuple(x_shape[2:])), list(zip(node.padding_below, node.padding_above)))
    counts = np.zeros(tuple(out_lengths))
    unit = (1,) * len(node.window)
    for offset in np.ndindex(*node.window):
        counts += ones[window_positions(offset, node.strides, unit, out_lengths)[2:]]
    return counts


@kernel(ops.MaxPool, ops.AvgPool)
def _pool(node, ctx, x):
    is_max = isinstance(node, ops.MaxPool)
    padding = ((0, 0), (0, 0)) + tuple(zip(node.padding_below, node.padding_above))
    window = (1, 1) + tuple(node.window)
    strides = (1, 1) + tuple(node.strides)
    if is_max:
        return lax.reduce_window(x, jnp.asarray(_lowest(x.dtype), x.dtype), lax.max, window,
                                 strides, padding)
    total = lax.reduce_window(x, jnp.zeros((), x.dtype), lax.add, window, strides, padding)
    counts = _window_counts(x.shape, node, total.shape[2:])
    return total / jnp.asarray(counts, x.dtype)


@kernel(ops.MaxPoolBackprop)
def _max_pool_backprop(node, ctx, x, delta):
    """Each output's adjoint goes to the first position (in window order) holding the
    window's maximum, as on every backend."""
    unit = (1,) * len(node.window)
    out = delta.shape[2:]
    padded = pad_spatial(jnp, x, node.padding_below, node.padding_above, _lowest(x.dtype))
    offsets = list(np.ndindex(*node.window))
    windows = [window_positions(offset, node.strides, unit, out) for offset in offsets]
    best = padded[windows[0]]
    for window in windows[1:]:
        best = jnp.maximum(best, padded[window])
    gradient = jnp.zeros(padded.shape, delta.dtype)
    taken = jnp.zeros(best.shape, bool)
    for offset, window in zip(offsets, windows):
        hit = (padded[window] == best) & ~taken
        taken = taken | hit
        gradient = gradient + _placed(jnp.where(hit, delta, jnp.zeros((), delta.dtype)),
                                      offset, node.strides, unit, padded.shape[2:])
    return _crop(gradient, node.padding_below, x.shape[2:])


@kernel(ops.AvgPoolBackprop)
def _avg_pool_backprop(node, ctx, delta):
    unit = (1,) * len(node.window)
    x_shape = ctx.shape(node.shape)
    out = delta.shape[2:]
    share = delta / jnp.asarray(_window_counts(x_shape, node, out), delta.dtype)
    padded_spatial = [n + b + a for n, b, a in zip(x_shape[2:], node.padding_below,
                                                   node.padding_above)]
    gradient = jnp.zeros(tuple(x_shape[:2]) + tuple(padded_spatial), delta.dtype)
    for offset in np.ndindex(*node.window):
        gradient = gradient + _placed(share, offset, node.strides, unit, padded_spatial)
    return _crop(gradient, node.padding_below, x_shape[2:])


# -- indexing -----------------------------------------------------------------------------------

def _check_indices(node, ctx, indices, length: int, what: str) -> None:
    if indices.size == 0:
        return
    # one pass decides (the bounds the message shows are computed only after it failed)
    outside = jnp.any((indices < 0) | (indices >= length))
    ctx.check(node, outside, f"{what} must lie in [0, {length}); got {{}}..{{}}",
              jnp.min(indices), jnp.max(indices))


@kernel(ops.Gather)
def _gather(node, ctx, params, indices):
    _check_indices(node, ctx, indices, params.shape[node.axis], "indices")
    return jnp.take(params, indices, axis=node.axis, mode="clip")


@kernel(ops.ScatterAdd)
def _scatter_add(node, ctx, inputs, indices, updates):
    axis = node.axis
    _check_indices(node, ctx, indices, inputs.shape[axis], "indices")
    target = jnp.moveaxis(inputs, axis, 0)
    k = indices.ndim
    moved = jnp.moveaxis(updates, list(range(axis, axis + k)), list(range(k)))
    return jnp.moveaxis(target.at[indices].add(moved, mode="drop"), 0, axis)


@kernel(ops.OneHot)
def _one_hot(node, ctx, x):
    shape = ctx.shape(node.shape)
    axis = node.one_hot_axis
    if jnp.issubdtype(x.dtype, jnp.floating) and x.size:
        ctx.check(node, ~jnp.all(jnp.isfinite(x) & (x == jnp.round(x))),
                  "one-hot values must be whole numbers")
    _check_indices(node, ctx, x, shape[axis], "one-hot values")
    positions = jnp.arange(shape[axis]).reshape(
        [-1 if i == axis else 1 for i in range(len(shape))])
    return (jnp.expand_dims(x, axis) == positions).astype(x.dtype)


@kernel(ops.Fused)
def _fused(node, ctx, *inputs):
    """The body, node by node, over the inputs (sizes bound by the enclosing function)."""
    values: Dict[Node, Any] = dict(zip(node.function.parameters, inputs))
    for member in node.body:
        values[member] = run_kernel(member, ctx, [values[i] for i in member.inputs])
    return values[node.output]


# -- host calls ---------------------------------------------------------------------------------

@kernel(HostCall)
def _host_call(node, ctx, x, *after):
    """Run on the host by the interpreter's kernel of the call, in program order (an ordered
    callback: a print shows when the program reaches it, on a mesh too); the value passes
    through."""
    run_on_host = INTERPRETER_KERNELS.lookup(type(node))

    def effect(*values):
        run_on_host(node, None, *[np.asarray(v) for v in values])

    # io_callback, unlike jax.debug.callback, stays ordered in a program split over several
    # devices: the callback gets each value whole, once.
    io_callback(effect, None, x, *after, ordered=True)
    return x


# -- running ------------------------------------------------------------------------------------

def run_kernel(node: Node, ctx: TraceContext, inputs: List[Any]):
    """`node`'s value from its inputs' (traced), checked against its type as the interpreter
    checks it; an error names the node and the user's line."""
    expected = ctx.shape(node.shape)
    if any(d < 0 for d in expected):
        raise ExecutionError(f"{node.op} {node.name}: shape {node.shape} is {list(expected)} "
                             f"with {bindings_text(ctx.bindings)}; dims cannot be negative",
                             node.location)
    found = KERNELS.lookup(type(node))
    try:
        value = found(node, ctx, *inputs)  # type: ignore[misc]  # checked at compile
    except AxgraphError as error:
        if isinstance(error, ExecutionError) and error.location is not None:
            raise
        raise ExecutionError(f"{node.op} {node.name}: {error.message}", node.location) from None
    if tuple(value.shape) != expected or value.dtype != dtype_of(node):
        raise ExecutionError(f"{node.op} {node.name}: the jax kernel computed {value.dtype}"
                             f"{list(value.shape)}, but the node is {node.type_str()} = "
                             f"{dtype_of(node)}{list(expected)}", node.location)
    return value
