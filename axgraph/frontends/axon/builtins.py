"""The builtins of Axon, each declared once: its static arguments, its type scheme and
how it becomes axgraph ops.

A scheme is a function from the static arguments (a dim index, a stride, a target
shape) to a type and the constraints that come with it; inference instantiates it at
each use, and lowering instantiates it again against the dims of the actual arguments
to learn the result's dims. So the rule that says `x @ w` has shape `S ++ T` when `x` is
`S ++ [k]` and `w` is `[k] ++ T` is written once and serves both.

A lowering gets the lowering context, the static arguments, the argument values and the
result type, and returns the result value. Every tensor value it makes has the axes
the axis table gives its dims (`ctx.tensor` relabels to them).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ... import axes as axes_module
from ...dims import DimLike
from ...op_graph import (convolution, dot, elementwise, nn, pooling, reductions, shape_ops,
                         tensors)
from .conditions import AtLeast, Broadcast, SameSize
from .types import Fresh, FunctionType, Shape, TensorType, TupleType, Type
from ...op_graph.op import Op
from .values import TensorValue, TupleValue, relabel

#: A static argument: its name (for messages), its kind ("index": an int, negative
#: counting from the end; "int": an int at least `least`; "shape": a shape literal).
Static = Tuple[str, str, int]


@dataclass(frozen=True)
class Builtin:
    """One builtin: name, static arguments, scheme, lowering and a one-line summary."""

    name: str
    statics: Tuple[Static, ...]
    scheme: Callable[[Fresh, tuple], Tuple[Type, list]]
    lower: Optional[Callable]
    summary: str

    def arity(self, fresh: Fresh, statics: tuple) -> int:
        """How many arguments follow the static ones."""
        t, _ = self.scheme(fresh, statics)
        count = 0
        while isinstance(t, FunctionType):
            count, t = count + 1, t.result
        return count


BUILTINS: Dict[str, Builtin] = {}

#: Infix operators and the builtin each one is.
OPERATORS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "@": "matmul"}


def _define(name: str, summary: str, scheme, lower, statics: Sequence[Static] = ()) -> None:
    BUILTINS[name] = Builtin(name, tuple(statics), scheme, lower, summary)


def _arrows(*types: Type) -> Type:
    result = types[-1]
    for t in reversed(types[:-1]):
        result = FunctionType(t, result)
    return result


def _t(dtype, *shape) -> TensorType:
    return TensorType(dtype, tuple(shape))


# -- pointwise ------------------------------------------------------------------------------------

def _unary_scheme(fresh: Fresh, statics: tuple):
    d, s = fresh.dtype(), fresh.shape("s")
    return _arrows(_t(d, s), _t(d, s)), []


def _unary(op: Callable):
    def lower(ctx, statics, args, out):
        (x,) = args
        return ctx.tensor(op(x.op), x.dims, x.axes, x.dtype)
    return lower


def _binary_scheme(fresh: Fresh, statics: tuple):
    d = fresh.dtype()
    a, b, c = fresh.shape("s"), fresh.shape("s"), fresh.shape("s")
    return _arrows(_t(d, a), _t(d, b), _t(d, c)), [Broadcast((a,), (b,), (c,))]


def _binary(op: Callable):
    def lower(ctx, statics, args, out):
        dims = out.shape
        target = ctx.table.axes_for(dims)
        operands = [_aligned(ctx, value, dims, target) for value in args]
        return ctx.tensor(op(*operands), dims, target, out.dtype)
    return lower


def _aligned(ctx, value: TensorValue, dims, target):
    """`value`'s op on the result's axes, aligned at the last dim; a dim of 1 facing a
    longer one is dropped (the op broadcasts it back by axes). Inference made every other
    pair of dims one, except a dim marked `#` facing another: which of the two that is
    (drop it, or pair it) depends on whether it is 1, so its size must be known."""
    offset = len(dims) - len(value.dims)
    op, mapping = value.op, {}
    for i, (dim, axis) in enumerate(zip(value.dims, value.axes)):
        facing = dims[offset + i]
        if dim == 1 and facing != 1:
            op = shape_ops.slice_along_axis(op, axis, 0)
        elif dim != facing and not (isinstance(dim, int) and isinstance(facing, int)):
            ctx.needs_sizes("broadcasting a dim marked `#` (it may be 1)")
        else:
            mapping[axis] = target[offset + i]
    return relabel(op, mapping)


_Entry = Tuple[str, Callable[..., Op], str]
_UNARY: Tuple[_Entry, ...] = (
        ("neg", elementwise.negative, "`~x`: the negation, element by element"),
        ("exp", elementwise.exp, "e to the power of each element"),
        ("log", elementwise.log, "the natural logarithm of each element"),
        ("tanh", elementwise.tanh, "the hyperbolic tangent of each element"),
        ("sigmoid", nn.sigmoid, "1 / (1 + exp(-x)), element by element"),
        ("relu", elementwise.relu, "max(x, 0), element by element"),
        ("sqrt", elementwise.sqrt, "the square root of each element"),
        ("square", elementwise.square, "each element squared"),
        ("abs", elementwise.absolute, "the absolute value of each element"))
for _name, _op, _summary in _UNARY:
    _define(_name, _summary, _unary_scheme, _unary(_op))

_BINARY: Tuple[_Entry, ...] = (
        ("add", elementwise.add, "`x + y`, broadcasting where a dim is the literal 1 or missing"),
        ("sub", elementwise.subtract, "`x - y`, broadcasting as `+` does"),
        ("mul", elementwise.multiply, "`x * y`, broadcasting as `+` does"),
        ("div", elementwise.divide, "`x / y`, broadcasting as `+` does"),
        ("maximum", elementwise.maximum, "the larger of x and y, element by element"),
        ("minimum", elementwise.minimum, "the smaller of x and y, element by element"))
for _name, _op, _summary in _BINARY:
    _define(_name, _summary, _binary_scheme, _binary(_op))


# -- matmul -------------------------------------------------------------------------------------------

def _matmul_scheme(fresh: Fresh, statics: tuple):
    d, k = fresh.dtype(), fresh.dim("k")
    s, t = fresh.shape("s"), fresh.shape("t")
    return _arrows(_t(d, s, k), _t(d, k, t), _t(d, s, t)), []


def _matmul(ctx, statics, args, out):
    x, w = args
    dims = out.shape
    target = ctx.table.axes_for(dims)
    lead = len(x.dims) - 1
    inner = ctx.table.fresh(x.dims[-1], "k")
    xm = relabel(x.op, {**dict(zip(x.axes[:-1], target[:lead])), x.axes[-1]: inner})
    wm = relabel(w.op, {w.axes[0]: inner, **dict(zip(w.axes[1:], target[lead:]))})
    if set(x.extra_axes) & set(w.extra_axes):
        # both carry a map's element axis: a product per element, summed over k
        op = reductions.sum(elementwise.multiply(xm, wm), reduction_axes=[inner])
    else:
        op = dot.dot(xm, wm)
    return ctx.tensor(op, dims, target, out.dtype)


_define("matmul", "`x @ w`: contracts x's last dim with w's first; x's leading dims are "
                  "batch dims (`[*b, k] @ [k, *t]` is `[*b, *t]`)", _matmul_scheme, _matmul)


# -- reductions and normalisations --------------------------------------------------------------

def _around(fresh: Fresh, index: int, hint: str = "n"):
    """A shape with a dim picked by `index` (negative: from the end): the dims before it,
    the dim, and the dims after it, the unknown side being a shape variable."""
    n = fresh.dim(hint)
    if index >= 0:
        return tuple(fresh.dim("d") for _ in range(index)), n, (fresh.shape("s"),)
    return (fresh.shape("s"),), n, tuple(fresh.dim("d") for _ in range(-index - 1))


def _reduce_scheme(fresh: Fresh, statics: tuple):
    d = fresh.dtype()
    before, n, after = _around(fresh, statics[0])
    return _arrows(_t(d, *before, n, *after), _t(d, *before, *after)), []


def _reduce(op: Callable):
    def lower(ctx, statics, args, out):
        (x,) = args
        index = statics[0] % len(x.dims)
        kept = x.axes[:index] + x.axes[index + 1:]
        return ctx.tensor(op(x.op, reduction_axes=[x.axes[index]]), out.shape, kept, out.dtype)
    return lower


_DIM = ("dim", "index", 0)
_REDUCTIONS: Tuple[_Entry, ...] = (
        ("sum", reductions.sum, "`sum i x`: the sum over dim i (negative i counts from the end)"),
        ("mean", reductions.mean, "`mean i x`: the mean over dim i"),
        ("max", reductions.max, "`max i x`: the largest value over dim i"),
        ("min", reductions.min, "`min i x`: the smallest value over dim i"))
for _name, _op, _summary in _REDUCTIONS:
    _define(_name, _summary, _reduce_scheme, _reduce(_op), [_DIM])


def _last_dim_scheme(fresh: Fresh, statics: tuple):
    d, s, n = fresh.dtype(), fresh.shape("s"), fresh.dim("n")
    return _arrows(_t(d, s, n), _t(d, s, n)), []


def _softmax(ctx, statics, args, out):
    (x,) = args
    return ctx.tensor(nn.softmax(x.op, normalization_axes=[x.axes[-1]]), x.dims, x.axes, x.dtype)


def _log_softmax(ctx, statics, args, out):
    (x,) = args
    last = [x.axes[-1]]
    shifted = elementwise.subtract(
        x.op, elementwise.stop_gradient(reductions.max(x.op, reduction_axes=last)))
    total = reductions.sum(elementwise.exp(shifted), reduction_axes=last)
    return ctx.tensor(elementwise.subtract(shifted, elementwise.log(total)), x.dims, x.axes,
                      x.dtype)


_define("softmax", "exp(x) / sum(exp(x)) over the last dim", _last_dim_scheme, _softmax)
_define("log_softmax", "x - log(sum(exp(x))) over the last dim, computed stably",
        _last_dim_scheme, _log_softmax)


# -- shapes ---------------------------------------------------------------------------------------------

def _reshape_scheme(fresh: Fresh, statics: tuple):
    d, s = fresh.dtype(), fresh.shape("s")
    target: Shape = statics[0]
    return _arrows(_t(d, s), _t(d, *target)), [SameSize((s,), target)]


def _reshape(ctx, statics, args, out):
    (x,) = args
    dims = out.shape
    target = ctx.table.axes_for(dims)
    extras = list(x.extra_axes)
    if not x.dims:
        return ctx.tensor(shape_ops.broadcast(x.op, list(target) + extras), dims, target, x.dtype)
    if not dims:
        return ctx.tensor(reductions.sum(x.op, reduction_axes=list(x.axes)), dims, (), x.dtype)
    source = x.axes[0] if len(x.axes) == 1 else axes_module.FlattenedAxis(x.axes)
    flat = x.op if len(x.axes) == 1 else shape_ops.flatten(x.op, axes=[source] + extras)
    joined = target[0] if len(target) == 1 else axes_module.FlattenedAxis(target)
    # Lengths equal only under a divisibility check become a feed-time check of the cast.
    cast = relabel(flat, {source: joined})
    return ctx.tensor(shape_ops.unflatten(cast), dims, target, x.dtype)


_define("reshape", "`reshape [d, ...] x`: the same elements in another shape (`_` for a dim "
                   "to infer)", _reshape_scheme, _reshape, [("shape", "shape", 0)])


def _concat_scheme(fresh: Fresh, statics: tuple):
    d = fresh.dtype()
    before, a, after = _around(fresh, statics[0], "a")
    b = fresh.dim("b")
    return _arrows(_t(d, *before, a, *after), _t(d, *before, b, *after),
                   _t(d, *before, a + b, *after)), []


def _concat(ctx, statics, args, out):
    x, y = args
    dims = out.shape
    target = ctx.table.axes_for(dims)
    index = statics[0] % len(dims)
    ctx.table.count += 1
    name = f"concat.{ctx.table.count}"
    parts, part_axes = [], []
    for value in (x, y):
        part_axes.append(axes_module.make_axis(length=value.dims[index], name=name, batch=False))
        mapping = dict(zip(value.axes, target))
        mapping[value.axes[index]] = part_axes[-1]
        parts.append(relabel(value.op, mapping))
    joined = shape_ops.concat_along_axis(parts, part_axes[0])
    new_axis = next(a for a in joined.axes if a.name == name)
    return ctx.tensor(joined, dims, target[:index] + (new_axis,) + target[index + 1:], out.dtype)


_define("concat", "`concat i x y`: x and y end to end along dim i", _concat_scheme, _concat,
        [_DIM])


def _transpose_scheme(fresh: Fresh, statics: tuple):
    d, s, m, n = fresh.dtype(), fresh.shape("s"), fresh.dim("m"), fresh.dim("n")
    return _arrows(_t(d, s, m, n), _t(d, s, n, m)), []


def _transpose(ctx, statics, args, out):
    (x,) = args
    swapped = x.axes[:-2] + (x.axes[-1], x.axes[-2])
    return ctx.tensor(x.op, out.shape, swapped, x.dtype)


_define("transpose", "swaps the last two dims", _transpose_scheme, _transpose)


def _slice_scheme(fresh: Fresh, statics: tuple):
    index, start, stop = statics
    d = fresh.dtype()
    before, n, after = _around(fresh, index)
    return (_arrows(_t(d, *before, n, *after), _t(d, *before, stop - start, *after)),
            [AtLeast(n, stop, what=f"slice {start} {stop} runs past the end of its dim"),
             AtLeast(stop, start, what=f"slice {start} {stop} ends before it starts")])


def _slice(ctx, statics, args, out):
    index, start, stop = statics
    (x,) = args
    index %= len(x.dims)
    # The result's axis is named here, so the sliced dim may be symbolic: its length (an
    # int, stop - start) must then match the slice once the dim is fed, a feed-time check.
    axis = x.axes[index]
    sliced = ctx.table.fresh(out.shape[index], "slice", batch=False)
    picked = tuple(slice(start, stop) if a is axis else slice(None) for a in x.op.axes)
    op = shape_ops.tensor_slice(x.op, picked, axes=[sliced if a is axis else a for a in x.op.axes])
    return ctx.tensor(op, out.shape, x.axes[:index] + (sliced,) + x.axes[index + 1:], x.dtype)


_define("slice", "`slice i start stop x`: positions start to stop (not included) of dim i",
        _slice_scheme, _slice, [_DIM, ("start", "int", 0), ("stop", "int", 0)])


def _fill_scheme(value: float):
    def scheme(fresh: Fresh, statics: tuple):
        return _t("f32", *statics[0]), []
    return scheme


def _fill(value: float):
    def lower(ctx, statics, args, out):
        axes = ctx.table.axes_for(out.shape)
        return ctx.tensor(tensors.constant(value, list(axes)), out.shape, axes, "f32")
    return lower


_define("zeros", "`zeros [d, ...]`: an f32 tensor of zeros", _fill_scheme(0.0), _fill(0.0),
        [("shape", "shape", 0)])
_define("ones", "`ones [d, ...]`: an f32 tensor of ones", _fill_scheme(1.0), _fill(1.0),
        [("shape", "shape", 0)])


# -- convolution and pooling ------------------------------------------------------------------------

def _window_out(length: DimLike, window: DimLike, stride: int, padding: int) -> DimLike:
    return (length + 2 * padding - window) // stride + 1


def _conv_scheme(fresh: Fresh, statics: tuple):
    stride, padding = statics
    d = fresh.dtype()
    b, c, h, w = fresh.dim("b"), fresh.dim("c"), fresh.dim("h"), fresh.dim("w")
    k, r, s = fresh.dim("k"), fresh.dim("r"), fresh.dim("s")
    out = _t(d, b, k, _window_out(h, r, stride, padding), _window_out(w, s, stride, padding))
    fits = [AtLeast(h + 2 * padding, r, what="the filter is taller than the padded input"),
            AtLeast(w + 2 * padding, s, what="the filter is wider than the padded input")]
    return _arrows(_t(d, b, c, h, w), _t(d, k, c, r, s), out), fits


_ROLES = {name: axes_module.make_axis_role(name) for name in
          ("Channel", "Channelout", "Height", "Width")}


def _feature_axes(ctx, dims):
    batch, channel, height, width = dims
    return (ctx.table.fresh(batch, "N", batch=True),
            ctx.table.fresh(channel, "C", roles=[_ROLES["Channel"]]),
            ctx.table.fresh(height, "H", roles=[_ROLES["Height"]]),
            ctx.table.fresh(width, "W", roles=[_ROLES["Width"]]))


def _refuse_inside_map(ctx, x: TensorValue, what: str):
    if x.extra_axes:
        ctx.unsupported(f"{what} inside `map` (its input carries the mapped dim); apply it to "
                        f"the whole batch instead")


def _conv(ctx, statics, args, out):
    stride, padding = statics
    x, f = args
    _refuse_inside_map(ctx, x, "conv2d")
    batch, channel, height, width = _feature_axes(ctx, x.dims)
    k, _, r, s = f.dims
    filters = (ctx.table.fresh(k, "K", roles=[_ROLES["Channelout"]]), channel,
               ctx.table.fresh(r, "R", roles=[_ROLES["Height"]]),
               ctx.table.fresh(s, "S", roles=[_ROLES["Width"]]))
    xm = relabel(x.op, dict(zip(x.axes, (batch, channel, height, width))))
    fm = relabel(f.op, dict(zip(f.axes, filters)))
    op = convolution.convolution(None, xm, fm, strides=stride, padding=padding)
    rows, cols = _new_spatial(op, (filters[0], batch))
    return ctx.tensor(op, out.shape, (batch, filters[0], rows, cols), out.dtype)


def _new_spatial(op, kept):
    """The height and width axes a convolution or pooling made."""
    new = [a for a in op.axes if a not in set(kept)]
    height = next(a for a in new if "height" in convolution.role_names(a))
    width = next(a for a in new if "width" in convolution.role_names(a))
    return height, width


_define("conv2d", "`conv2d stride padding x f`: x [b, c, h, w] convolved with filters "
                  "[k, c, r, s] gives [b, k, (h + 2*padding - r)//stride + 1, ...]",
        _conv_scheme, _conv, [("stride", "int", 1), ("padding", "int", 0)])


def _pool_scheme(fresh: Fresh, statics: tuple):
    window, stride = statics
    d = fresh.dtype()
    b, c, h, w = fresh.dim("b"), fresh.dim("c"), fresh.dim("h"), fresh.dim("w")
    out = _t(d, b, c, _window_out(h, window, stride, 0), _window_out(w, window, stride, 0))
    fits = [AtLeast(h, window, what="the pooling window is taller than the input"),
            AtLeast(w, window, what="the pooling window is wider than the input")]
    return _arrows(_t(d, b, c, h, w), out), fits


def _pool(kind: str):
    def lower(ctx, statics, args, out):
        window, stride = statics
        (x,) = args
        _refuse_inside_map(ctx, x, "pool")
        layout = _feature_axes(ctx, x.dims)
        xm = relabel(x.op, dict(zip(x.axes, layout)))
        op = pooling.pooling(None, xm, window=window, strides=stride, pool_type=kind)
        rows, cols = _new_spatial(op, (layout[0], layout[1]))
        return ctx.tensor(op, out.shape, (layout[0], layout[1], rows, cols), out.dtype)
    return lower


_define("pool", "`pool window stride x`: the largest value of each window of x [b, c, h, w] "
                "over h and w", _pool_scheme, _pool("max"),
        [("window", "int", 1), ("stride", "int", 1)])
_define("avgpool", "`avgpool window stride x`: the mean of each window, as `pool` lays them",
        _pool_scheme, _pool("avg"), [("window", "int", 1), ("stride", "int", 1)])


# -- map and loops ---------------------------------------------------------------------------------

def _map_scheme(fresh: Fresh, statics: tuple):
    a, b = fresh.dtype(), fresh.dtype()
    n, s, t = fresh.dim("n"), fresh.shape("s"), fresh.shape("t")
    return _arrows(_arrows(_t(a, s), _t(b, t)), _t(a, n, s), _t(b, n, t)), []


def _map(ctx, statics, args, out):
    f, x = args
    element = ctx.table.fresh(x.dims[0], "each", batch=False)
    inner_dims = x.dims[1:]
    inner_axes = ctx.table.axes_for(inner_dims)
    op = relabel(x.op, {x.axes[0]: element, **dict(zip(x.axes[1:], inner_axes))})
    result = ctx.apply(f, TensorValue(op, inner_dims, inner_axes, x.dtype))
    body = result.op
    if element not in set(body.axes):
        body = shape_ops.broadcast(body, list(body.axes) + [element])
    # the result's dims come from the call (the scheme leaves f's result open)
    return ctx.tensor(body, (x.dims[0],) + result.dims, (element,) + result.axes, result.dtype)


_define("map", "`map f x`: f applied to each x[i] along the first dim", _map_scheme, _map)


def _fold_scheme(fresh: Fresh, statics: tuple):
    carry, a = fresh.type("c"), fresh.dtype()
    n, s = fresh.dim("n"), fresh.shape("s")
    step = _arrows(TupleType((carry, _t(a, s))), carry)
    return _arrows(step, carry, _t(a, n, s), carry), []


def _steps(ctx, xs: TensorValue, what: str):
    """xs[0], xs[1], ...: the values a loop runs over (the first dim must be known)."""
    count = xs.dims[0]
    if not isinstance(count, int):
        ctx.needs_sizes(f"{what} over a dim of length {count} (loops are unrolled)")
        return
    dims = xs.dims[1:]
    for i in range(count):
        op = shape_ops.slice_along_axis(xs.op, xs.axes[0], i)
        yield ctx.tensor(op, dims, xs.axes[1:], xs.dtype)


def _fold(ctx, statics, args, out):
    step, carry, xs = args
    for x in _steps(ctx, xs, "fold"):
        carry = ctx.apply(step, TupleValue((carry, x)))
    return carry


_define("fold", "`fold f init xs`: the carry after f (carry, xs[i]) for each i in order",
        _fold_scheme, _fold)


def _scan_scheme(fresh: Fresh, statics: tuple):
    carry, a, b = fresh.type("c"), fresh.dtype(), fresh.dtype()
    n, s, y = fresh.dim("n"), fresh.shape("s"), fresh.shape("y")
    step = _arrows(TupleType((carry, _t(a, s))), TupleType((carry, _t(b, y))))
    return _arrows(step, carry, _t(a, n, s), TupleType((carry, _t(b, n, y)))), []


def _scan(ctx, statics: tuple, args: list, out: TupleType) -> TupleValue:
    step, carry, xs = args
    outputs: List[TensorValue] = []
    for x in _steps(ctx, xs, "scan"):
        carry, y = ctx.apply(step, TupleValue((carry, x))).items
        outputs.append(y)
    dims = (xs.dims[0],) + outputs[0].dims  # from the calls (the scheme leaves them open)
    stacked_axis = ctx.table.fresh(len(outputs), "step", batch=False)
    parts = [relabel(y.op, dict(zip(y.axes, outputs[0].axes))) for y in outputs]
    stacked = shape_ops.stack(parts, stacked_axis, pos=0)
    ys = ctx.tensor(stacked, dims, (stacked_axis,) + outputs[0].axes, outputs[0].dtype)
    return TupleValue((carry, ys))


_define("scan", "`scan f init xs`: like fold, where f also gives an output per step; "
                "gives (the carry, the outputs stacked along a new first dim)",
        _scan_scheme, _scan)


# -- inputs and parameters ----------------------------------------------------------------------

def _anything(fresh: Fresh, statics: tuple):
    return fresh.type("a"), []


_define("input", "a value fed when the program runs; annotate it: `input : f32[B, 784]`",
        _anything, None)
_define("param", "a trainable variable (an axgraph variable), initialised from a seed; "
                 "annotate it: `param : f32[784, 512]`", _anything, None)
