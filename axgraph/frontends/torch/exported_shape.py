"""Import rules for data movement: permutes, reshapes (dims paired by their traced
sizes, merges as flattened axes, splits onto new axes), broadcasts, slices, joins,
writes into slices and gathers."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

import torch

from ..positional import aligned, concatenated, in_order, index_slices, is_one, relabelled
from .building import positions
from .errors import TorchBridgeError, node_location, node_source
from .exported_pieces import symbolic_pieces
from .exported_rules import bridge_check, import_rule
from .registry import Arguments, op_name

if TYPE_CHECKING:
    from .exported import Importer

aten = torch.ops.aten


@import_rule(aten.permute.default)
def _permute(importer: Importer, node: Any, args: Arguments) -> Any:
    x = args.self
    axes = list(x.axes)
    return in_order(x, [axes[d % len(axes)] for d in args.dims])


@import_rule(aten.t.default)
def _t(importer: Importer, node: Any, args: Arguments) -> Any:
    x = args.self
    return in_order(x, list(x.axes)[::-1])


@import_rule(aten.transpose.int)
def _transpose(importer: Importer, node: Any, args: Arguments) -> Any:
    x = args.self
    axes = list(x.axes)
    a, b = args.dim0 % len(axes), args.dim1 % len(axes)
    axes[a], axes[b] = axes[b], axes[a]
    return in_order(x, axes)


# -- reshapes -----------------------------------------------------------------------------------


@import_rule(aten.view.default, aten._unsafe_view.default, aten.reshape.default,
            aten.squeeze.default, aten.squeeze.dims, aten.squeeze.dim, aten.unsqueeze.default,
            aten.flatten.using_ints)
def _reshape(importer: Importer, node: Any, args: Arguments) -> Any:
    """Any row-major reshape. Dims of 1 are dropped and added; the other dims are paired
    in runs of equal size (`_size_groups`): a run of several input dims becomes their
    `FlattenedAxis`, one input dim becoming several is split onto their axes (the parts
    of a flattened axis when they fit, which keeps a symbolic batch; else new axes)."""
    ng = importer.ng
    x = args.self
    source, target = _traced_shape(node.args[0]), _traced_shape(node)
    ones = [i for i, size in enumerate(source) if is_one(size)]
    if ones:
        x = ng.tensor_slice(x, [0 if i in ones else slice(None) for i in range(len(source))])
    kept = [i for i, size in enumerate(target) if not is_one(size)]
    groups = _size_groups(node, [source[i] for i in range(len(source)) if i not in ones],
                          [target[i] for i in kept])
    axes = list(x.axes)
    plain = [_stand_in(importer, node, a) for a in axes]  # flatten sees no flattened axis
    flat: List[Any] = []      # one axis per group: the group's input axes as one
    flat_plain: List[Any] = []
    wanted: List[Any] = []    # the group's output axes
    start = 0
    for count, sizes in groups:
        group, group_plain = axes[start:start + count], plain[start:start + count]
        start += count
        flat.append(group[0] if count == 1 else ng.FlattenedAxis.of(group_plain))
        flat_plain.append(group_plain[0] if count == 1 else flat[-1])
        wanted.append([flat[-1]] if len(sizes) == 1 else None)
    for index, (_, sizes) in enumerate(groups):
        if wanted[index] is None:
            taken = [a for other in wanted if other is not None for a in _parts(other)]
            wanted[index] = _split_axes(importer, node, flat[index], sizes, taken)
    if len(flat) != len(axes):
        x = relabelled(ng.flatten(relabelled(x, plain), flat_plain), flat)
    splits = [i for i, w in enumerate(wanted) if len(w) > 1]
    if splits:
        # the axes kept stand in as plain axes while the split ones unflatten
        held = [ng.FlattenedAxis.of(w) if i in splits else _stand_in(importer, node, flat[i])
                for i, w in enumerate(wanted)]
        x = ng.unflatten(relabelled(x, held))
        x = relabelled(x, [a for w in wanted for a in w])
    final = [a for w in wanted for a in w]
    for position in range(len(target)):
        if position not in kept:
            one = importer.axis(f"{node.name}_{position}", 1)
            x = ng.expand_dims(x, one, position)
            final.insert(position, one)
    return in_order(x, final)


def _stand_in(importer: Importer, node: Any, axis: Any) -> Any:
    """A plain axis standing in for a flattened one while `ng.flatten` or `ng.unflatten`
    works on the others (both see through every flattened axis); the axis itself if plain."""
    if not isinstance(axis, importer.ng.FlattenedAxis):
        return axis
    return importer.ng.make_axis(axis.length, name=importer.unique_name(node.name))


def _parts(axes: Sequence[Any]) -> List[Any]:
    """Axes and, for flattened ones, their parts too (none may come back twice)."""
    from ...axes import FlattenedAxis
    return list(axes) + [p for a in axes if isinstance(a, FlattenedAxis) for p in a.axes]


def _traced_shape(node: Any) -> List[Any]:
    """A node's traced sizes: ints, and sympy expressions for symbolic ones."""
    return [size.node.expr if isinstance(size, torch.SymInt) else int(size)
            for size in node.meta["val"].shape]


def _size_groups(node: Any, source: Sequence[Any], target: Sequence[Any]
                 ) -> List[Any]:
    """[(input dims taken, output sizes)]: the shortest runs of equal total size,
    compared on the traced example and then exactly (a symbolic batch included)."""
    hints = _hints(node)
    value = [_example_size(size, hints) for size in source]
    wanted = [_example_size(size, hints) for size in target]
    groups: List[Any] = []
    i = j = 0
    while i < len(source) or j < len(target):
        if i == len(source) or j == len(target):
            raise _reshape_error(node, source, target)
        ins, outs = [i], [j]
        i, j = i + 1, j + 1
        have, need = value[ins[0]], wanted[outs[0]]
        while have != need:
            if have < need and i < len(source):
                ins.append(i)
                have *= value[i]
                i += 1
            elif have > need and j < len(target):
                outs.append(j)
                need *= wanted[j]
                j += 1
            else:
                raise _reshape_error(node, source, target)
        difference = math.prod(source[k] for k in ins) - math.prod(target[k] for k in outs)
        if (difference.expand() if hasattr(difference, "expand") else difference) != 0:
            raise _reshape_error(node, source, target)
        groups.append((len(ins), [target[k] for k in outs]))
    return groups


def _example_size(size: Any, hints: Dict[Any, int]) -> int:
    """A traced size (an int, or a sympy expression of size symbols) in the example."""
    return size if isinstance(size, int) else int(size.subs(hints))


def _hints(node: Any) -> Dict[Any, int]:
    """Each size symbol's value in the traced example."""
    for value in [node.meta["val"]] + [n.meta.get("val") for n in node.all_input_nodes]:
        for size in getattr(value, "shape", ()):
            if isinstance(size, torch.SymInt):
                env = size.node.shape_env
                values = getattr(env, "backed_var_to_val", None)
                if values is None:  # (torch before 2.13 names it var_to_val)
                    values = env.var_to_val
                return {symbol: int(found) for symbol, found in values.items()}
    return {}


def _reshape_error(node: Any, source: Sequence[Any], target: Sequence[Any]) -> TorchBridgeError:
    return TorchBridgeError(f"{op_name(node.target)} ({node_source(node) or node.name}): "
                            f"cannot pair the dims of {list(source)} with those of "
                            f"{list(target)}", node_location(node))


def _split_axes(importer: Importer, node: Any, single: Any, sizes: Sequence[Any],
                taken: Sequence[Any]) -> List[Any]:
    """The axes one dim splits into: the parts of a flattened axis when their sizes are
    these (a symbolic batch comes back as itself), else new axes (a size symbol's own
    axis for a plain symbolic size)."""
    ng = importer.ng
    if isinstance(single, ng.FlattenedAxis) and len(single.axes) == len(sizes) and all(
            _is_size_of(importer, part, size) for part, size in zip(single.axes, sizes)) and \
            not any(part in taken for part in single.axes):
        return list(single.axes)
    made = []
    for position, size in enumerate(sizes):
        if isinstance(size, int):
            made.append(importer.axis(f"{node.name}_{position}", size))
            continue
        found = importer.symbol_axis(size) if size.is_Symbol else None
        if found is None or found in taken or found in made:
            raise TorchBridgeError(f"{op_name(node.target)} ({node_source(node) or node.name}): "
                                   f"splits a dim into one of symbolic size {size} that is "
                                   f"not an input's torch.export.Dim", node_location(node))
        made.append(found)
    return made


def _is_size_of(importer: Importer, axis: Any, size: Any) -> bool:
    if isinstance(size, int):
        return axis.length == size
    return size.is_Symbol and importer.symbol_axis(size) is axis


# -- slicing, joining, broadcasting ----------------------------------------------------------


@import_rule(aten.expand.default)
def _expand(importer: Importer, node: Any, args: Arguments) -> Any:
    """A dim of 1 (or a new leading one) broadcast to the traced size."""
    x = args.self
    target = _traced_shape(node)
    own = [None] * (len(target) - len(x.axes)) + list(x.axes)
    out_axes: List[Any] = []
    for position, (axis, size) in enumerate(zip(own, target)):
        if axis is not None and (not is_one(axis.length) or is_one(size)):
            out_axes.append(axis)
        elif not isinstance(size, int) and size.is_Symbol and importer.symbol_axis(size) \
                is not None and importer.symbol_axis(size) not in own:
            out_axes.append(importer.symbol_axis(size))
        elif isinstance(size, int):
            out_axes.append(importer.axis(f"{node.name}_{position}", size))
        else:
            raise TorchBridgeError(f"{op_name(node.target)} ({node_source(node) or node.name}) "
                                   f"to the symbolic size {size}", node_location(node))
    return in_order(importer.ng.broadcast(aligned(x, out_axes), out_axes), out_axes)


def _sliced(importer: Importer, node: Any, x: Any, dim: int, start: Any, end: Any,
            step: int = 1) -> Any:
    """x[..., start:end:step, ...] along `dim`, on a new axis of the traced length."""
    picked = importer.ng.tensor_slice(x, index_slices(len(x.axes), dim, slice(start, end, step)))
    axes = list(picked.axes)
    traced = _traced_shape(node) if isinstance(node.meta["val"], torch.Tensor) else None
    length = picked.axes[dim].length if traced is None else traced[dim]
    axes[dim] = importer.axis(f"{node.name}_{dim}", length if isinstance(length, int) else None)
    return relabelled(picked, axes)


@import_rule(aten.slice.Tensor, check=bridge_check(aten.slice.Tensor))
def _slice(importer: Importer, node: Any, args: Arguments) -> Any:
    x = args.self
    dim = args.dim % len(x.axes)
    source = _traced_shape(node.args[0])[dim]
    if _traced_shape(node)[dim] == source:
        return x
    end = args.end if isinstance(args.end, int) and args.end < 2 ** 62 else None
    return _sliced(importer, node, x, dim, args.start, end, args.step)


@import_rule(aten.select.int)
def _select(importer: Importer, node: Any, args: Arguments) -> Any:
    x = args.self
    return importer.ng.tensor_slice(x, index_slices(len(x.axes), args.dim % len(x.axes),
                                                    args.index))


@import_rule(aten.split_with_sizes.default, aten.split.Tensor)
def _split(importer: Importer, node: Any, args: Arguments) -> Any:
    """Pieces along one dim: slices, or where a size is symbolic `exported_pieces`."""
    x = args.self
    dim = args.dim % len(x.axes)
    symbolic = symbolic_pieces(importer, node, x, dim)
    if symbolic is not None:
        return symbolic
    pieces: List[Any] = []
    start = 0
    for value in node.meta["val"]:
        length = value.shape[dim]
        picked = importer.ng.tensor_slice(
            x, index_slices(len(x.axes), dim, slice(start, start + length)))
        axes = list(picked.axes)
        axes[dim] = importer.axis(f"{node.name}_{len(pieces)}", length)
        pieces.append(relabelled(picked, axes))
        start += length
    return tuple(pieces)


@import_rule(aten.cat.default)
def _cat(importer: Importer, node: Any, args: Arguments) -> Any:
    tensors = [t for t in args.tensors if len(t.axes) != 1 or t.axes[0].length != 0]
    dim = args.dim % len(tensors[0].axes)
    try:
        return concatenated(tensors, dim, importer.unique_name(node.name))
    except ValueError as error:
        raise TorchBridgeError(f"{op_name(node.target)} ({node_source(node) or node.name}): "
                               f"{error}", node_location(node)) from None


def _known_padding(node: Any) -> Optional[str]:
    return None if all(isinstance(p, int) for p in node.args[1]) else "symbolic padding"


@import_rule(aten.constant_pad_nd.default, check=_known_padding)
def _pad(importer: Importer, node: Any, args: Arguments) -> Any:
    """Padding with `value` (torch lists it from the last dim backwards, before and after
    each); negative amounts crop, as a slice first."""
    ng = importer.ng
    x = args.self
    rank = len(x.axes)
    pairs = [(0, 0)] * rank
    for i in range(len(args.pad) // 2):
        pairs[rank - 1 - i] = (args.pad[2 * i], args.pad[2 * i + 1])
    if any(p < 0 for pair in pairs for p in pair):
        crops = [slice(max(-before, 0), a.length - max(-after, 0))
                 if min(before, after) < 0 else slice(None)
                 for a, (before, after) in zip(x.axes, pairs)]
        cropped = ng.tensor_slice(x, crops)
        x = relabelled(cropped, [importer.axis(f"{node.name}_crop_{i}", b.length)
                                 if crops[i] != slice(None) else a
                                 for i, (a, b) in enumerate(zip(x.axes, cropped.axes))])
        pairs = [(max(before, 0), max(after, 0)) for before, after in pairs]
    if all(pair == (0, 0) for pair in pairs):
        return x
    axes = [a if pair == (0, 0) else importer.axis(f"{node.name}_{i}",
                                                   a.length + pair[0] + pair[1])
            for i, (a, pair) in enumerate(zip(x.axes, pairs))]
    padded = ng.pad(x, pairs, axes=axes)
    if args.value == 0:
        return padded
    inside = ng.pad(ng.broadcast(ng.constant(1, dtype=x.dtype), list(x.axes)), pairs, axes=axes)
    return ng.where(ng.not_equal(inside, 0), padded, args.value, dtype=x.dtype)


@import_rule(aten.flip.default)
def _flip(importer: Importer, node: Any, args: Arguments) -> Any:
    x = args.self
    flipped = set(positions(args.dims, len(x.axes)))
    reversed_ = importer.ng.tensor_slice(x, [slice(None, None, -1) if i in flipped else slice(None)
                                             for i in range(len(x.axes))])
    return relabelled(reversed_, [importer.axis(f"{node.name}_{i}", a.length) if i in flipped
                                  else a for i, a in enumerate(reversed_.axes)])


@import_rule(aten.repeat.default)
def _repeat(importer: Importer, node: Any, args: Arguments) -> Any:
    """Tiles: each dim d repeated r times is (r, d) flattened, a new axis of r before it."""
    ng = importer.ng
    x = args.self
    repeats = list(args.repeats)
    lead = len(repeats) - len(x.axes)
    own = [None] * lead + list(x.axes)
    copies = [importer.axis(f"{node.name}_copies_{i}", r) if r != 1 or a is None else None
              for i, (r, a) in enumerate(zip(repeats, own))]
    spread = ng.broadcast(x, [a for pair in zip(copies, own) for a in pair if a is not None])
    groups = [[a for a in (c, o) if a is not None] for c, o in zip(copies, own)]
    flat = ng.flatten(spread, [g[0] if len(g) == 1 else ng.FlattenedAxis.of(g) for g in groups])
    return relabelled(flat, [g[0] if len(g) == 1 else importer.axis(
        f"{node.name}_{i}", math.prod(a.length for a in g)) for i, g in enumerate(groups)])


@import_rule(aten.copy.default)
def _copy(importer: Importer, node: Any, args: Arguments) -> Any:
    """`src` written over all of `self`: broadcast to its axes, in its element type."""
    ng = importer.ng
    x, src = args.self, args.src
    if not hasattr(src, "axes"):
        src = ng.constant(src)
    axes = list(x.axes)
    return in_order(ng.broadcast(ng.multiply(aligned(src, axes), 1, dtype=x.dtype), axes), axes)


def _written(importer: Importer, node: Any, x: Any, dim: int, start: int, end: int,
             src: Any) -> Any:
    """x with `src` in place of x[start:end] along `dim`: the pieces joined."""
    ng = importer.ng
    length = x.axes[dim].length
    pieces = [importer.ng.tensor_slice(x, index_slices(len(x.axes), dim, slice(0, start)))
              if start > 0 else None,
              relabelled(ng.multiply(src, 1, dtype=x.dtype), list(x.axes)[:dim]
                         + [src.axes[dim]] + list(x.axes)[dim + 1:]),
              importer.ng.tensor_slice(x, index_slices(len(x.axes), dim, slice(end, length)))
              if end < length else None]
    joined = concatenated([p for p in pieces if p is not None], dim,
                          importer.unique_name(node.name), reference=x)
    return relabelled(joined, list(x.axes))


def _unit_step(node: Any) -> Optional[str]:
    step = node.args[5] if len(node.args) > 5 else node.kwargs.get("step", 1)
    return None if step == 1 else "slices with steps other than 1"


@import_rule(aten.slice_scatter.default, check=_unit_step)
def _slice_scatter(importer: Importer, node: Any, args: Arguments) -> Any:
    x = args.self
    dim = args.dim % len(x.axes)
    length = x.axes[dim].length
    start = 0 if args.start is None else args.start
    end = length if args.end is None or args.end >= length else args.end
    start, end = (start + length if start < 0 else start), (end + length if end < 0 else end)
    return _written(importer, node, x, dim, start, end, args.src)


@import_rule(aten.select_scatter.default)
def _select_scatter(importer: Importer, node: Any, args: Arguments) -> Any:
    x = args.self
    dim = args.dim % len(x.axes)
    index = args.index + x.axes[dim].length if args.index < 0 else args.index
    widened = importer.ng.expand_dims(args.src, importer.axis(f"{node.name}_row", 1), dim)
    return _written(importer, node, x, dim, index, index + 1, widened)


def _gathered(importer: Importer, node: Any, x: Any, dim: int, index: Any) -> Any:
    """x's entries at `index` along dim `dim`: index's dims take that dim's place (negative
    indices count from the end, as torch's indexing allows)."""
    ng = importer.ng
    picked = x.axes[dim]
    fresh = [importer.axis(f"{node.name}_{i}", a.length) for i, a in enumerate(index.axes)]
    index = relabelled(index, fresh)  # its axes may be among x's own
    if isinstance(picked.length, int):
        index = ng.where(ng.less(index, 0), index + picked.length, index)
    rows = ng.lookuptable(x, index, vocab_axis=picked)
    return in_order(rows, list(x.axes)[:dim] + fresh + list(x.axes)[dim + 1:])


@import_rule(aten.embedding.default)
def _embedding(importer: Importer, node: Any, args: Arguments) -> Any:
    return _gathered(importer, node, args.weight, 0, args.indices)


@import_rule(aten.index_select.default)
def _index_select(importer: Importer, node: Any, args: Arguments) -> Any:
    x = args.self
    return _gathered(importer, node, x, args.dim % len(x.axes), args.index)


@import_rule(aten.index.Tensor, check=bridge_check(aten.index.Tensor))
def _index(importer: Importer, node: Any, args: Arguments) -> Any:
    (dim,) = [i for i, v in enumerate(args.indices) if v is not None]
    return _gathered(importer, node, args.self, dim, args.indices[dim])


__all__: list = []
