"""Stride arithmetic: where the elements of a strided tensor sit in linear memory.

Pure functions on tuples of ints. They work in whatever unit the caller counts
in: tensor descriptions pass element strides, NumPy arrays byte strides; only
`dense_order` needs to know the unit of one element. Kept apart from
`tensor_description` because the cpu backend applies the same rules to real
arrays.

Nested strides are Nervana Graph v0.4's way to describe a FlattenedAxis: one
entry per part, nested as the parts are (`(12, 4)` for a flattened (A, B)).
"""
from __future__ import annotations

import math
from typing import Iterator, List, Optional, Sequence, Tuple, Union

from .debug_info import user_location
from .errors import LayoutError

Shape = Tuple[int, ...]
#: An int, or a tuple of nested entries (one per part of a FlattenedAxis).
Nested = Union[int, Tuple["Nested", ...]]


def row_major_strides(sizes: Sequence[int], unit: int = 1) -> Shape:
    """Strides for row-major order: partial products of `sizes` from the right, the
    innermost dim stepping by `unit`.

    For sizes (5, 3, 2) this is (6, 2, 1), the seed's example.
    """
    strides = []
    product = unit
    for n in reversed(tuple(sizes)):
        strides.append(product)
        product *= n
    return tuple(reversed(strides))


def column_major_strides(sizes: Sequence[int]) -> Shape:
    """Strides for column-major order: partial products of `sizes` from the left.

    For sizes (5, 3, 2) this is (1, 5, 15), the seed's example.
    """
    strides = []
    product = 1
    for n in tuple(sizes):
        strides.append(product)
        product *= n
    return tuple(strides)


def aligned_length(length: int, itemsize: int, alignment: int) -> int:
    """The smallest length >= `length` whose byte size is a multiple of `alignment`.

    Rounding the innermost allocated size this way makes every row start on an
    `alignment`-byte boundary (given an aligned buffer). The element count must
    be a multiple of alignment / gcd(alignment, itemsize); when the item size is
    already a multiple of the alignment nothing changes.
    """
    unit = alignment // math.gcd(alignment, itemsize)
    return -(-length // unit) * unit


def dense_order(shape: Sequence[int], strides: Sequence[int],
                unit: int = 1) -> Optional[Tuple[int, ...]]:
    """Axes from outermost to innermost when `strides` (in multiples of `unit`: 1 for
    element strides, the itemsize for NumPy's byte strides) lay `shape` out densely in
    some axis order, i.e. as a transpose of a row-major tensor; else None.

    Dims of length 1 may have any stride; an empty tensor is dense in any order.
    """
    if any(s < 0 for s in strides):
        return None
    order = tuple(sorted(range(len(shape)), key=lambda i: (-strides[i], i)))
    if 0 in shape:
        return order
    expected = unit
    for i in reversed(order):
        if shape[i] != 1 and strides[i] != expected:
            return None
        expected *= shape[i]
    return order


def merged_stride(lengths: Sequence[int], strides: Sequence[int]) -> Optional[int]:
    """The one stride that walks consecutive dims as a single dim, or None if none does.

    The dims must be contiguous with respect to each other: each dim's stride is
    the next one's stride times its length (dims of length 1 never move, so their
    stride does not matter). The merged stride is then the innermost one that
    moves; it is negative for reversed dims. Empty dims reach nothing, so any
    stride serves.
    """
    if 0 in lengths:
        return strides[-1] if strides else 0
    moving = [(n, s) for n, s in zip(lengths, strides) if n != 1]
    if not moving:
        return strides[-1] if strides else 0
    for (_, outer), (n, inner) in zip(moving, moving[1:]):
        if outer != inner * n:
            return None
    return moving[-1][1]


def nocopy_reshape_strides(old_shape: Shape, old_strides: Shape,
                           new_shape: Shape) -> Optional[Shape]:
    """Strides that show a (C-order) reshape as a view, or None when none exist.

    This is NumPy's rule (``_attempt_nocopy_reshape``), so the answer agrees
    with ``np.reshape(..., copy=False)``: size-1 dimensions are dropped, then
    the old and new shapes are cut into the shortest groups with equal
    products; each group of old dimensions must be contiguous with respect to
    each other (stride[k] == shape[k+1] * stride[k+1]) to be merged or split.
    The strides of dimensions inside a group follow from the group's last stride.
    """
    old = [(n, s) for n, s in zip(old_shape, old_strides) if n != 1]
    old_dims = [n for n, _ in old]
    old_str = [s for _, s in old]
    new_strides = [0] * len(new_shape)
    old_nd, new_nd = len(old_dims), len(new_shape)
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < new_nd and oi < old_nd:
        new_product = new_shape[ni]
        old_product = old_dims[oi]
        while new_product != old_product:
            if new_product < old_product:
                new_product *= new_shape[nj]
                nj += 1
            else:
                old_product *= old_dims[oj]
                oj += 1
        for ok in range(oi, oj - 1):
            if old_str[ok] != old_dims[ok + 1] * old_str[ok + 1]:
                return None
        new_strides[nj - 1] = old_str[oj - 1]
        for nk in range(nj - 1, ni, -1):
            new_strides[nk - 1] = new_strides[nk] * new_shape[nk]
        ni, nj = nj, nj + 1
        oi, oj = oj, oj + 1
    last = new_strides[ni - 1] if ni >= 1 else 1
    for nk in range(ni, new_nd):
        new_strides[nk] = last
    return tuple(new_strides)


# --------------------------------------------------------------------------- nested strides


def leaves(nested: Nested) -> Iterator[int]:
    """The ints of a nested entry, innermost parts in order."""
    if isinstance(nested, tuple):
        for part in nested:
            yield from leaves(part)
    else:
        yield nested


def nest_like(values: Sequence[int], structure: Nested) -> Nested:
    """`values` (one per leaf of `structure`, in order) nested as `structure` is."""
    it = iter(values)

    def build(shape: Nested) -> Nested:
        if isinstance(shape, tuple):
            return tuple(build(part) for part in shape)
        return next(it)

    return build(structure)


def same_structure(a: Nested, b: Nested) -> bool:
    """Whether two nested entries nest alike (ints where ints are, tuples of equal length)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same_structure(x, y) for x, y in zip(a, b))
    return not isinstance(a, tuple) and not isinstance(b, tuple)


def reduce_strides(full_strides: Sequence[Nested],
                   full_lengths: Optional[Sequence[Nested]] = None) -> Shape:
    """One stride per dim from nested strides (Nervana Graph v0.4's `reduce_strides`).

    A flattened axis has one stride per part; walking it as one dimension
    needs a single stride. Without `full_lengths` this is v0.4's rule, the
    smallest stride of each nested entry: right for the non-negative strides
    of contiguous parts. With the lengths (nested alike) it is exact: the
    stride that walks the parts as one dim, also for reversed parts and parts
    of length 1, and a LayoutError where no single stride does.

    Parameters
    ----------
    full_strides : sequence
        One entry per dim: an int, or nested tuples of the parts' strides.
    full_lengths : sequence, optional
        The parts' lengths, nested like `full_strides` (None: v0.4's rule).

    Returns
    -------
    tuple of int
        One stride per dim.

    Raises
    ------
    LayoutError
        If `full_lengths` has another rank or nesting than `full_strides`, or
        the parts of a dim are not contiguous with respect to each other.

    Examples
    --------
    >>> from axgraph import reduce_strides
    >>> reduce_strides([(48, 16), 4])
    (16, 4)
    >>> reduce_strides([(12, 4), 4], [(2, 3), 5])
    (4, 4)
    """
    if full_lengths is None:
        return tuple(min(leaves(entry), default=0) for entry in full_strides)
    if len(full_lengths) != len(full_strides):
        raise LayoutError(f"full_strides {tuple(full_strides)} and full_lengths "
                          f"{tuple(full_lengths)} have different ranks", user_location())
    result: List[int] = []
    for strides, lengths in zip(full_strides, full_lengths):
        if not same_structure(strides, lengths):
            raise LayoutError(f"strides {strides} are not nested like lengths {lengths}",
                              user_location())
        stride = merged_stride(tuple(leaves(lengths)), tuple(leaves(strides)))
        if stride is None:
            raise LayoutError(f"parts of lengths {lengths} with strides {strides} are not "
                              f"contiguous with respect to each other: no single stride walks "
                              f"them", user_location())
        result.append(stride)
    return tuple(result)
