"""Rules for ATen's data movement: views, permutations, slicing, joining, padding, and the
size arithmetic symbolic shapes trace."""
from __future__ import annotations

import operator
from typing import Any, List, Optional

import torch

from ... import core
from ...dims import DimLike, known
from .building import broadcast_to, convert, fill, tensor
from .errors import TorchBridgeError
from .registry import rule

aten = torch.ops.aten


@rule(aten.view.default, aten._unsafe_view.default, aten.reshape.default,
      aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.unsqueeze.default,
      aten.flatten.using_ints)
def _reshape(builder: Any, node: Any, args: Any) -> core.Node:
    """Every row-major view is a Reshape to the shape torch traced."""
    x = args.self
    shape = builder.out_type(node)[1]
    if tuple(x.shape) == tuple(shape):
        return x
    return core.Reshape(x, shape)


@rule(aten.permute.default)
def _permute(builder: Any, node: Any, args: Any) -> core.Node:
    x = args.self
    permutation = tuple(d % x.rank for d in args.dims)
    if permutation == tuple(range(x.rank)):
        return x
    return core.Transpose(x, permutation)


@rule(aten.t.default)
def _t(builder: Any, node: Any, args: Any) -> core.Node:
    x = args.self
    return x if x.rank < 2 else core.Transpose(x, (1, 0))


@rule(aten.transpose.int)
def _transpose(builder: Any, node: Any, args: Any) -> core.Node:
    x = args.self
    permutation = list(range(x.rank))
    a, b = args.dim0 % x.rank, args.dim1 % x.rank
    permutation[a], permutation[b] = permutation[b], permutation[a]
    return x if a == b else core.Transpose(x, tuple(permutation))


@rule(aten.expand.default)
def _expand(builder: Any, node: Any, args: Any) -> core.Node:
    return broadcast_to(args.self, builder.out_type(node)[1])


@rule(aten.cat.default)
def _cat(builder: Any, node: Any, args: Any) -> core.Node:
    et, shape = builder.out_type(node)
    pieces = [convert(t, et) for t in args.tensors if not (t.rank == 1 and known(t.shape[0], 1) == 0
                                                           and len(shape) != 1)]
    if len(pieces) == 1:
        return pieces[0]
    return core.Concat(pieces, args.dim % len(shape))


_LARGE = 2 ** 62


def _bound(value: Optional[DimLike], size: DimLike, default: DimLike) -> DimLike:
    """A torch slice bound (None, negative, past the end) as a position in [0, size]."""
    if value is None or (isinstance(value, int) and value >= _LARGE):
        return default
    if isinstance(value, int) and value < 0:
        counted = size + value
        return counted if known(counted, 0) >= 0 else 0
    length = known(size, -1)
    if length >= 0 and isinstance(value, int):
        return min(value, length)
    return value


def _slice(x: core.Node, dim: int, start: DimLike, end: DimLike, step: int = 1) -> core.Node:
    lower: List[DimLike] = [0] * x.rank
    upper: List[DimLike] = list(x.shape)
    strides = [1] * x.rank
    lower[dim], upper[dim], strides[dim] = start, end, step
    return core.Slice(x, lower, upper, strides)


def _step_one_or_more(node: Any) -> Optional[str]:
    step = node.args[4] if len(node.args) > 4 else node.kwargs.get("step", 1)
    return None if isinstance(step, int) and step >= 1 else "slices with steps below 1"


@rule(aten.slice.Tensor, check=_step_one_or_more)
def _slice_tensor(builder: Any, node: Any, args: Any) -> core.Node:
    x = args.self
    dim = args.dim % x.rank
    size = x.shape[dim]
    start = _bound(args.start, size, 0)
    end = _bound(args.end, size, size)
    if known(start, -1) == 0 and end == size and args.step == 1:
        return x
    return _slice(x, dim, start, end, args.step)


@rule(aten.select.int)
def _select(builder: Any, node: Any, args: Any) -> core.Node:
    x = args.self
    dim = args.dim % x.rank
    index = args.index
    if isinstance(index, int) and index < 0:
        index = x.shape[dim] + index
    picked = _slice(x, dim, index, index + 1)
    return core.Reshape(picked, builder.out_type(node)[1])


@rule(aten.split_with_sizes.default, aten.split.Tensor)
def _split(builder: Any, node: Any, args: Any) -> tuple:
    x = args.self
    dim = args.dim % x.rank
    pieces = []
    start: DimLike = 0
    for value in builder.meta(node):
        length = value.shape[dim]
        from .types import sym_dim
        end = start + sym_dim(length)
        pieces.append(_slice(x, dim, start, end))
        start = end
    return tuple(pieces)


def _constant_padding(node: Any) -> Optional[str]:
    return None if all(isinstance(p, int) for p in node.args[1]) else "symbolic padding"


@rule(aten.constant_pad_nd.default, check=_constant_padding)
def _pad(builder: Any, node: Any, args: Any) -> core.Node:
    """Torch lists padding from the last dim backwards, (before, after) for each; negative
    amounts crop (the gradient of padding is a crop)."""
    x = args.self
    below, above = [0] * x.rank, [0] * x.rank
    for i in range(len(args.pad) // 2):
        below[x.rank - 1 - i] = args.pad[2 * i]
        above[x.rank - 1 - i] = args.pad[2 * i + 1]
    if any(p < 0 for p in below + above):
        x = core.Slice(x, [max(-p, 0) for p in below],
                       [d - max(-p, 0) for d, p in zip(x.shape, above)])
        below, above = [max(p, 0) for p in below], [max(p, 0) for p in above]
    if not any(below + above):
        return x
    return core.Pad(x, below, above, None, args.value)


def _scatter_window(x: core.Node, src: core.Node, dim: int, start: DimLike, end: DimLike,
                    step: int) -> core.Node:
    """x with `src` written over the slice [start:end:step] of dim `dim` (a Select between
    x and src padded out to x's shape)."""
    below: List[DimLike] = [0] * x.rank
    above: List[DimLike] = [0] * x.rank
    interior = [0] * x.rank
    below[dim], interior[dim] = start, step - 1
    above[dim] = x.shape[dim] - start - ((src.shape[dim] - 1) * step + 1)
    spread = core.Pad(src, below, above, interior, 0)
    if isinstance(x, core.Constant) and not x.attributes["value"].ndim \
            and float(x.attributes["value"]) == 0.0:
        return spread  # the gradient of a slice: zeros around it
    inside = core.Pad(core.Constant(core.boolean, src.shape, True), below, above, interior,
                      False)
    return core.Select(inside, spread, x)


@rule(aten.slice_scatter.default, check=_step_one_or_more)
def _slice_scatter(builder: Any, node: Any, args: Any) -> core.Node:
    x = args.self
    dim = args.dim % x.rank
    size = x.shape[dim]
    return _scatter_window(x, convert(args.src, x.element_type), dim,
                           _bound(args.start, size, 0), _bound(args.end, size, size), args.step)


def _whole_index(node: Any) -> Optional[str]:
    index = node.args[3] if len(node.args) > 3 else node.kwargs.get("index")
    return None if isinstance(index, int) else "a symbolic index"


@rule(aten.select_scatter.default, check=_whole_index)
def _select_scatter(builder: Any, node: Any, args: Any) -> core.Node:
    x = args.self
    dim = args.dim % x.rank
    index = args.index + x.shape[dim] if args.index < 0 else args.index
    src = convert(args.src, x.element_type)
    widened = core.Reshape(src, core.Shape(tuple(x.shape[:dim]) + (1,) + tuple(x.shape[dim + 1:])))
    return _scatter_window(x, widened, dim, index, index + 1, 1)


@rule(aten.flip.default)
def _flip(builder: Any, node: Any, args: Any) -> core.Node:
    x = args.self
    return core.Reverse(x, tuple(sorted({d % x.rank for d in args.dims})))


@rule(aten.repeat.default)
def _repeat(builder: Any, node: Any, args: Any) -> core.Node:
    """Each dim d repeated r times: a new dim of r before it, broadcast, then merged."""
    x = args.self
    repeats = list(args.repeats)
    lead = len(repeats) - x.rank
    shape = [1] * lead + list(x.shape)
    x = core.Reshape(x, core.Shape(tuple(shape))) if lead else x
    widened: List[DimLike] = []
    for r, d in zip(repeats, shape):
        widened += [r, d]
    spread = core.Broadcast(x, core.Shape(tuple(widened)), tuple(range(0, len(widened), 2)))
    return core.Reshape(spread, builder.out_type(node)[1])


@rule(aten.index_select.default)
def _index_select(builder: Any, node: Any, args: Any) -> core.Node:
    return core.Gather(args.self, args.index, args.dim % args.self.rank)


def _one_index(node: Any) -> Optional[str]:
    """x[index] and x[..., index] along one dim: a single integer index tensor."""
    indices = node.args[1]
    present = [i for i in indices if i is not None]
    if len(present) != 1 or present[0].meta["val"].dtype in (torch.bool, torch.uint8):
        return "indexing by several tensors or by masks"
    return None


@rule(aten.index.Tensor, check=_one_index)
def _index(builder: Any, node: Any, args: Any) -> core.Node:
    (axis,) = [i for i, v in enumerate(args.indices) if v is not None]
    return core.Gather(args.self, args.indices[axis], axis)


def _one_index_accumulated(node: Any) -> Optional[str]:
    accumulate = node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False)
    return _one_index(node) or (None if accumulate else "index_put without accumulate")


@rule(aten.index_put.default, check=_one_index_accumulated)
def _index_put(builder: Any, node: Any, args: Any) -> core.Node:
    """x[index] += values (the gradient of indexing): a ScatterAdd."""
    x = args.self
    (axis,) = [i for i, v in enumerate(args.indices) if v is not None]
    index = args.indices[axis]
    shape = tuple(x.shape[:axis]) + tuple(index.shape) + tuple(x.shape[axis + 1:])
    values = broadcast_to(convert(args.values, x.element_type), shape)
    return core.ScatterAdd(x, index, values, axis)


def _one_per_row(node: Any) -> Optional[str]:
    """scatter with one index per row along its dim (the gradient of max over a dim)."""
    x, dim, index = node.args[0].meta["val"], node.args[1], node.args[2].meta["val"]
    dim %= x.dim()
    same = all(index.shape[i] == x.shape[i] for i in range(x.dim()) if i != dim)
    return None if same and index.shape[dim] == 1 else "scatter of several values per row"


@rule(aten.scatter.src, aten.scatter.value, check=_one_per_row)
def _scatter(builder: Any, node: Any, args: Any) -> core.Node:
    x = args.self
    dim = args.dim % x.rank
    index = args.index
    squeezed = core.Reshape(index, core.Shape(tuple(d for i, d in enumerate(index.shape)
                                                    if i != dim)))
    hit = core.Equal(core.OneHot(squeezed, x.shape, dim), fill(index.element_type, x.shape, 1))
    source = getattr(args, "src", None)
    values = (broadcast_to(convert(source, x.element_type), x.shape) if source is not None
              else fill(x.element_type, x.shape, args.value))
    return core.Select(hit, values, x)


@rule(operator.getitem)
def _getitem(builder: Any, node: Any, args: Any) -> Any:
    """One result of an op with several (the rules return them as a tuple)."""
    source, index = args.arg0, args.arg1
    return source[index]


@rule(aten.sym_size.int)
def _sym_size(builder: Any, node: Any, args: Any) -> DimLike:
    return args.self.shape[args.dim % args.self.rank]


def _on_sizes(node: Any) -> Optional[str]:
    value = node.meta.get("val")
    numbers = (int, float, torch.SymInt, torch.SymFloat)
    return None if isinstance(value, numbers) else "only arithmetic on sizes is compiled"


def _size_arithmetic(op: Any) -> None:
    """Sizes combine as dims while they stay integers (`s0 * 4`); a quotient, or anything
    with a quotient in it (batch norm's n / (n - 1)), is a float64 scalar node."""
    core_op = {operator.add: core.Add, operator.sub: core.Subtract, operator.mul: core.Multiply,
               operator.truediv: core.Divide}.get(op)

    def build(builder: Any, node: Any, args: Any) -> Any:
        a, b = args.arg0, args.arg1
        if op is not operator.truediv and not any(isinstance(v, (core.Node, float))
                                                  for v in (a, b)):
            return op(a, b)
        if core_op is None:
            raise TorchBridgeError(f"{op.__name__} of sizes that are not integers")
        return core_op(*(tensor(v, core.f64) for v in (a, b)))
    rule(op, check=_on_sizes)(build)


for _op in (operator.add, operator.sub, operator.mul, operator.floordiv, operator.truediv):
    _size_arithmetic(_op)


@rule(aten.sym_numel.default)
def _sym_numel(builder: Any, node: Any, args: Any) -> DimLike:
    total: DimLike = 1
    for size in args.self.shape:
        total = total * size
    return total


__all__: list = []
