"""Import rules for writes at indices: ``x[i, j] = values`` and ``x[i, j] += values``
(`index_put`, with and without `accumulate`), a boolean mask's write of one value, and
`scatter` / `scatter_add` along one dim.

Each is a one-hot product (`indexed_writes`): the index becomes a one-hot over the
written dim's axis, one entry per source position. A repeated index keeps the last
value written there, as PyTorch's CPU kernels do.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Sequence

import torch

from ..indexed_writes import added_at, written_at
from ..positional import aligned, broadcast_axes, in_order, relabelled
from .errors import TorchBridgeError, node_location, node_source
from .exported_rules import import_rule
from .registry import Arguments, op_name

if TYPE_CHECKING:
    from .exported import Importer

aten = torch.ops.aten


def _fail(node: Any, why: str) -> TorchBridgeError:
    return TorchBridgeError(f"{op_name(node.target)} ({node_source(node) or node.name}): {why}",
                            node_location(node))


def _in_type(importer: Importer, value: Any, dtype: Any) -> Any:
    """`value` (an op or a number) as an op of element type `dtype`."""
    ng = importer.ng
    if not hasattr(value, "axes"):
        return ng.constant(value, dtype=dtype)
    return value if value.dtype == dtype else ng.multiply(value, 1, dtype=dtype)


def _positions(importer: Importer, index: Any, length: Any) -> Any:
    """Indices with negative ones counted from the end of a dim of `length`."""
    ng = importer.ng
    if not isinstance(length, int):
        return index
    return ng.where(ng.less(index, 0), index + length, index)


def _written_at(importer: Importer, node: Any, x: Any, hits: Any, values: Any,
                sources: Sequence[Any], accumulate: bool) -> Any:
    """`indexed_writes.written_at`, the values in x's type, a refusal naming the op."""
    try:
        return written_at(x, hits, _in_type(importer, values, x.dtype), sources, accumulate)
    except ValueError as error:
        raise _fail(node, str(error)) from None


# -- index_put -------------------------------------------------------------------------------


def _index_put_refusal(node: Any) -> Optional[str]:
    """Integer index tensors, or one boolean mask written with a single value."""
    present = [i for i in node.args[1] if i is not None]
    masks = [i for i in present if i.meta["val"].dtype in (torch.bool, torch.uint8)]
    if masks and len(present) > 1:
        return "a boolean mask beside other indices"
    if masks and node.args[2].meta["val"].numel() != 1:
        return "a boolean mask written with several values"
    return None


@import_rule(aten.index_put.default, check=_index_put_refusal)
def _index_put(importer: Importer, node: Any, args: Arguments) -> Any:
    """``x[..., i, j, ...] = values`` (or ``+=`` with `accumulate`): the index tensors
    broadcast together onto source axes, and each entry names one position of x along
    the indexed dims (a product of one-hots). The values are laid out as
    ``x[..., i, j, ...]`` reads: the sources in place of the indexed dims where these are
    adjacent, else first."""
    ng = importer.ng
    x = args.self
    axes = list(x.axes)
    indexed = [i for i, v in enumerate(args.indices) if v is not None]
    indices = [args.indices[i] for i in indexed]
    if indices[0].dtype.kind == "b":
        return _masked(importer, node, x, indexed[0], indices[0], args.values,
                       bool(args.accumulate))
    sources = [importer.axis(f"{node.name}_index_{i}", a.length)
               for i, a in enumerate(broadcast_axes(importer, indices, node.name))]
    if len(indices) == 1 and args.accumulate:  # (the gradient of an embedding)
        dim = indexed[0]
        index = _positions(importer, relabelled(indices[0], sources), axes[dim].length)
        values = aligned(args.values, axes[:dim] + sources + axes[dim + 1:])
        return added_at(x, axes[dim], index, _in_type(importer, values, x.dtype))
    hits = None
    for dim, index in zip(indexed, indices):
        index = _positions(importer, aligned(index, sources), axes[dim].length)
        one = ng.one_hot(index, axes[dim], dtype=x.dtype)
        hits = one if hits is None else hits * one
    if indexed == list(range(indexed[0], indexed[-1] + 1)):
        laid_out = axes[:indexed[0]] + sources + axes[indexed[-1] + 1:]
    else:
        laid_out = sources + [a for i, a in enumerate(axes) if i not in indexed]
    values = aligned(args.values, laid_out)
    return _written_at(importer, node, x, hits, values, sources, bool(args.accumulate))


def _masked(importer: Importer, node: Any, x: Any, dim: int, mask: Any, value: Any,
            accumulate: bool) -> Any:
    """``x[mask] = value`` for a mask over dims from `dim` on, and one value."""
    ng = importer.ng
    axes = list(x.axes)
    mask = aligned(mask, axes[:dim + len(mask.axes)]) if mask.axes else mask
    value = _in_type(importer, value, x.dtype)
    if value.axes:
        value = ng.tensor_slice(value, [0] * len(value.axes))
    if accumulate:
        return in_order(ng.where(mask, ng.add(x, value), x, dtype=x.dtype), axes)
    return in_order(ng.where(mask, value, x, dtype=x.dtype), axes)


# -- scatter ---------------------------------------------------------------------------------


def _scatter_refusal(node: Any) -> Optional[str]:
    """An index as large as x on every dim but the scattered one (src is at least as
    large as the index: torch checks it)."""
    x, dim, index = node.args[0].meta["val"], node.args[1], node.args[2].meta["val"]
    dim %= max(x.dim(), 1)
    if index.dim() != x.dim() or any(index.shape[d] != x.shape[d] for d in range(x.dim())
                                     if d != dim):
        return "an index not of x's size on the dims not scattered"
    return None


def _scatter_rule(accumulate: bool, *overloads: Any) -> None:
    def build(importer: Importer, node: Any, args: Arguments) -> Any:
        """``x.scatter(dim, index, src)``: x[.., index[.., k, ..], ..] = src[.., k, ..] (or
        ``+=``), each entry of the index naming its own position along `dim`."""
        ng = importer.ng
        x = args.self
        axes = list(x.axes)
        dim = args.dim % len(axes) if axes else 0
        index = args.index
        source = importer.axis(f"{node.name}_index", index.axes[dim].length)
        on = axes[:dim] + [source] + axes[dim + 1:]
        index = _positions(importer, relabelled(index, on), axes[dim].length)
        hits = ng.one_hot(index, axes[dim], dtype=x.dtype)
        src = getattr(args, "src", None)
        if src is None:
            values: Any = args.value
        else:
            values = ng.tensor_slice(src, [slice(0, a.length) for a in index.axes])
            values = relabelled(values, on)
        return _written_at(importer, node, x, hits, values, [source], accumulate)
    import_rule(*overloads, check=_scatter_refusal)(build)


_scatter_rule(False, aten.scatter.src, aten.scatter.value)
_scatter_rule(True, aten.scatter_add.default)


__all__: List[str] = []
