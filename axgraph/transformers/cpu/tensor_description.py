"""Tensor descriptions (seed 003): what the backend knows about a tensor's storage.

The graph reasons about tensors long before anything is allocated, so the cpu
backend describes every tensor with metadata only: element type, shape, the
layout (strides and offset) through which its values are reached, the
allocated per-dimension sizes (which may exceed the shape, to align rows),
whether it is an r-tensor (read only) or an l-tensor (assignable), and the
linear storage it views.  Memory planning, view elimination and code
generation all work on these descriptions; NumPy arrays appear only when a
description is finally bound to a real buffer with :meth:`TensorDescription.as_array`.

Conventions
-----------
* Strides and offsets are counted in **elements**, not bytes, because the seed
  defines the linear index as ``offset + dot(strides, index)`` into a 1-d
  tensor of elements.  :attr:`TensorDescription.byte_strides` gives the NumPy
  (byte) convention where it is needed.
* Every view operation (``reshape``, ``transpose``, ``slice``, ``broadcast``,
  ``flatten``) returns a new, immutable description over the *same* buffer,
  or ``None`` when no strides can express the result (only ``reshape`` and
  ``flatten`` can fail).  The caller then inserts a copy, whose description
  :meth:`TensorDescription.copy_to_contiguous` provides; nothing here copies
  values behind the caller's back.
* :class:`PaddedView` is the seed's *complex view*: some values come from a
  source tensor, the rest from a constant, chosen by a selection function.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Iterator, Optional, Sequence, Tuple, Union

import numpy as np
from numpy.typing import DTypeLike

from ...errors import DTypeError, ShapeError

__all__ = [
    "LayoutError",
    "TensorIndexError",
    "BufferDescription",
    "TensorDescription",
    "PaddedView",
    "row_major_strides",
    "column_major_strides",
]

Shape = Tuple[int, ...]
SliceItem = Union[slice, int]

_names = itertools.count()


class LayoutError(ShapeError):
    """A layout that cannot exist: strides, sizes or offsets that do not fit."""


class TensorIndexError(LayoutError, IndexError):
    """An index outside a tensor description's shape.

    It is also an ``IndexError`` so generic code that guards indexing keeps
    working, but its message always names the tensor, the index and the shape.
    """


# --------------------------------------------------------------------------- helpers


def _as_int(value: object, what: str) -> int:
    """An exact Python int from an int-like value; bools and floats are rejected.

    Shapes and strides end up in generated code and arithmetic on offsets, so
    a float that happens to be integral (or True) is a bug in the caller.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise LayoutError(f"{what} must be an integer, got {value!r}")
    return int(value)


def _as_tuple(values: Sequence[object], what: str) -> Tuple[int, ...]:
    """A tuple of exact ints, with a message naming `what` on bad input."""
    if isinstance(values, (int, np.integer)):
        values = (values,)
    try:
        items = tuple(values)
    except TypeError:
        raise LayoutError(f"{what} must be a sequence of integers, got {values!r}") from None
    return tuple(_as_int(v, what) for v in items)


def _as_shape(shape: Sequence[object], what: str = "shape") -> Shape:
    """A shape: non-negative ints."""
    result = _as_tuple(shape, what)
    if any(n < 0 for n in result):
        raise LayoutError(f"{what} {result} has a negative length")
    return result


def _as_np_dtype(dtype: DTypeLike) -> np.dtype:
    """A NumPy dtype, with the library's DTypeError instead of NumPy's TypeError."""
    try:
        return np.dtype(dtype)
    except TypeError as error:
        raise DTypeError(f"{dtype!r} is not an element type: {error}") from None


def row_major_strides(sizes: Sequence[int]) -> Shape:
    """Element strides for row-major order: partial products of `sizes` from the right.

    For sizes (5, 3, 2) this is (6, 2, 1), the seed's example.
    """
    strides = []
    product = 1
    for n in reversed(tuple(sizes)):
        strides.append(product)
        product *= n
    return tuple(reversed(strides))


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


def column_major_strides(sizes: Sequence[int]) -> Shape:
    """Element strides for column-major order: partial products of `sizes` from the left.

    For sizes (5, 3, 2) this is (1, 5, 15), the seed's example.
    """
    strides = []
    product = 1
    for n in tuple(sizes):
        strides.append(product)
        product *= n
    return tuple(strides)


def _aligned_length(length: int, itemsize: int, alignment: int) -> int:
    """The smallest length >= `length` whose byte size is a multiple of `alignment`.

    Rounding the innermost allocated size this way makes every row start on an
    `alignment`-byte boundary (given an aligned buffer).  The element count must
    be a multiple of alignment / gcd(alignment, itemsize); when the item size is
    already a multiple of the alignment nothing changes.
    """
    unit = alignment // math.gcd(alignment, itemsize)
    return -(-length // unit) * unit


def _check_index(index: Sequence[object], shape: Shape, name: str) -> Tuple[int, ...]:
    """`index` as ints within `shape`, or a TensorIndexError naming tensor, index and shape."""
    try:
        items = tuple(index)
    except TypeError:
        items = (index,)
    if len(items) != len(shape):
        raise TensorIndexError(f"index {items} has {len(items)} entries but tensor {name!r} has "
                               f"rank {len(shape)} (shape {shape})")
    result = []
    for dim, (i, n) in enumerate(zip(items, shape)):
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise TensorIndexError(f"index {items} of tensor {name!r}: entry {dim} is {i!r}, "
                                   f"not an integer")
        if not 0 <= i < n:
            raise TensorIndexError(f"index {items} is out of bounds for tensor {name!r} of shape "
                                   f"{shape}: entry {dim} must be in [0, {n})")
        result.append(int(i))
    return tuple(result)


def _nocopy_reshape_strides(old_shape: Shape, old_strides: Shape,
                            new_shape: Shape) -> Optional[Shape]:
    """Strides that show a (C-order) reshape as a view, or None when none exist.

    This is NumPy's rule (``_attempt_nocopy_reshape``), so our answer agrees
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


# --------------------------------------------------------------------------- buffers


@dataclass(frozen=True, eq=False)
class BufferDescription:
    """The 1-d linear storage that tensor descriptions view.

    Equality is identity: two buffers with the same size are still different
    memory, and "are these tensors views of each other" is exactly "do they
    describe the same buffer object".

    Attributes:
        name: for messages and generated code.
        dtype: element type of the storage.
        elements: length of the storage in elements.
        alignment: byte boundary the storage's first element must sit on, or None.
    """

    name: str
    dtype: np.dtype
    elements: int
    alignment: Optional[int] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", _as_np_dtype(self.dtype))
        elements = _as_int(self.elements, "buffer length")
        if elements < 0:
            raise LayoutError(f"buffer {self.name!r} has negative length {elements}")
        object.__setattr__(self, "elements", elements)
        if self.alignment is not None:
            alignment = _as_int(self.alignment, "alignment")
            if alignment <= 0:
                raise LayoutError(f"alignment must be a positive number of bytes, got {alignment}")
            object.__setattr__(self, "alignment", alignment)

    @property
    def nbytes(self) -> int:
        """Bytes of storage."""
        return self.elements * self.dtype.itemsize

    def allocate(self) -> np.ndarray:
        """A zero-filled 1-d NumPy array for this buffer, aligned as requested.

        Zero fill keeps alignment padding deterministic, so a padded tensor
        never exposes garbage to code that (wrongly) reads its padding.
        """
        if self.alignment is None:
            return np.zeros(self.elements, dtype=self.dtype)
        raw = np.zeros(self.nbytes + self.alignment, dtype=np.uint8)
        shift = (-raw.ctypes.data) % self.alignment
        return raw[shift:shift + self.nbytes].view(self.dtype)

    def __repr__(self) -> str:
        align = f", alignment={self.alignment}" if self.alignment is not None else ""
        return f"BufferDescription({self.name!r}, {self.dtype}, elements={self.elements}{align})"


# --------------------------------------------------------------------------- tensors


@dataclass(frozen=True, eq=False)
class TensorDescription:
    """Immutable description of a dense tensor as a view of a linear buffer.

    Element ``index`` lives at ``buffer[offset + dot(strides, index)]``
    (strides and offset in elements, see the module docstring).

    Attributes:
        dtype: element type.
        shape: the lengths the tensor's values span; ``len(shape)`` is the rank.
        strides: element strides, one per dimension; default row-major over `sizes`.
        offset: element offset of index (0, ..., 0) in the buffer.
        sizes: allocated length per dimension, >= shape (padding for alignment).
            Views keep the sizes of dimensions they pass through unchanged
            (a transpose permutes them); dimensions a view creates or cuts get
            sizes equal to their shape, since the view owns no padding there.
        read_only: True for an r-tensor (values can only be read), False for an
            l-tensor (values can be assigned).
        buffer: the storage viewed; a fresh one just big enough when omitted.
        base: the description this one is a view of; None for the allocation itself.
        name: for messages and generated code.
    """

    dtype: np.dtype
    shape: Shape
    strides: Shape = None  # type: ignore[assignment]  # None: __post_init__ makes it row-major
    offset: int = 0
    sizes: Shape = None  # type: ignore[assignment]  # None: __post_init__ makes it the shape
    read_only: bool = False
    buffer: BufferDescription = None  # type: ignore[assignment]  # None: __post_init__ allocates
    base: Optional["TensorDescription"] = field(default=None, repr=False)
    name: str = ""

    def __post_init__(self) -> None:
        """Normalise to exact ints and reject layouts that could reach outside the buffer."""
        setattr_ = object.__setattr__
        setattr_(self, "dtype", _as_np_dtype(self.dtype))
        shape = _as_shape(self.shape)
        setattr_(self, "shape", shape)
        sizes = shape if self.sizes is None else _as_shape(self.sizes, "sizes")
        if len(sizes) != len(shape):
            raise LayoutError(f"sizes {sizes} and shape {shape} have different ranks")
        if any(a < n for a, n in zip(sizes, shape)):
            raise LayoutError(f"allocated sizes {sizes} must be >= shape {shape} in every dimension")
        setattr_(self, "sizes", sizes)
        strides = row_major_strides(sizes) if self.strides is None else _as_tuple(self.strides, "strides")
        if len(strides) != len(shape):
            raise LayoutError(f"strides {strides} and shape {shape} have different ranks")
        setattr_(self, "strides", strides)
        offset = _as_int(self.offset, "offset")
        if offset < 0:
            raise LayoutError(f"offset must be >= 0, got {offset}")
        setattr_(self, "offset", offset)
        setattr_(self, "read_only", bool(self.read_only))
        if not self.name:
            setattr_(self, "name", f"t{next(_names)}")
        low, high = self.extent
        if self.buffer is None:
            setattr_(self, "buffer", BufferDescription(self.name, self.dtype, max(high + 1, 0)))
        if self.buffer.dtype != self.dtype:
            raise DTypeError(f"tensor {self.name!r} of {self.dtype} cannot view buffer "
                             f"{self.buffer.name!r} of {self.buffer.dtype}")
        if self.size and (low < 0 or high >= self.buffer.elements):
            raise LayoutError(
                f"tensor {self.name!r} (shape {shape}, strides {strides}, offset {offset}) reaches "
                f"elements {low}..{high}, outside buffer {self.buffer.name!r} of "
                f"{self.buffer.elements} elements")

    # ---------------------------------------------------------------- constructors

    @classmethod
    def row_major(cls, shape: Sequence[int], dtype: DTypeLike = np.float32,
                  sizes: Optional[Sequence[int]] = None, alignment: Optional[int] = None,
                  read_only: bool = False, name: str = "") -> "TensorDescription":
        """A fresh allocation in row-major order (strides from the allocated sizes).

        Args:
            shape: the tensor's lengths.
            dtype: element type.
            sizes: allocated lengths per dimension (>= shape); default = shape.
            alignment: if given, a byte boundary: the innermost allocated size is
                padded so every row starts on it, and the buffer is aligned too.
            read_only: r-tensor (True) or l-tensor (False).
            name: for messages.
        """
        return cls._allocate(shape, dtype, sizes, alignment, read_only, name, column_major=False)

    @classmethod
    def column_major(cls, shape: Sequence[int], dtype: DTypeLike = np.float32,
                     sizes: Optional[Sequence[int]] = None, alignment: Optional[int] = None,
                     read_only: bool = False, name: str = "") -> "TensorDescription":
        """A fresh allocation in column-major order; `alignment` pads the first dimension.

        See :meth:`row_major` for the arguments; in column-major order the first
        dimension is the innermost, so it is the one padded for alignment.
        """
        return cls._allocate(shape, dtype, sizes, alignment, read_only, name, column_major=True)

    @classmethod
    def _allocate(cls, shape: Sequence[int], dtype: DTypeLike, sizes: Optional[Sequence[int]],
                  alignment: Optional[int], read_only: bool, name: str,
                  column_major: bool) -> "TensorDescription":
        """Shared body of the two constructors: sizes, padding, strides, buffer."""
        shape_t = _as_shape(shape)
        np_dtype = _as_np_dtype(dtype)
        sizes_t = shape_t if sizes is None else _as_shape(sizes, "sizes")
        if len(sizes_t) != len(shape_t):
            raise LayoutError(f"sizes {sizes_t} and shape {shape_t} have different ranks")
        if alignment is not None:
            alignment = _as_int(alignment, "alignment")
            if alignment <= 0:
                raise LayoutError(f"alignment must be a positive number of bytes, got {alignment}")
            if sizes_t:
                inner = 0 if column_major else len(sizes_t) - 1
                padded = list(sizes_t)
                padded[inner] = _aligned_length(padded[inner], np_dtype.itemsize, alignment)
                sizes_t = tuple(padded)
        strides = column_major_strides(sizes_t) if column_major else row_major_strides(sizes_t)
        name = name or f"t{next(_names)}"
        buffer = BufferDescription(name, np_dtype, math.prod(sizes_t), alignment)
        return cls(np_dtype, shape_t, strides, 0, sizes_t, read_only, buffer, None, name)

    # ---------------------------------------------------------------- properties

    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements (values) the tensor has."""
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor's values (NumPy's meaning: size * itemsize, no padding)."""
        return self.size * self.itemsize

    @property
    def allocated_elements(self) -> int:
        """Elements the allocated sizes span (product of `sizes`), padding included."""
        return math.prod(self.sizes)

    @property
    def allocated_nbytes(self) -> int:
        """Bytes the allocated sizes span, padding included."""
        return self.allocated_elements * self.itemsize

    @property
    def byte_strides(self) -> Shape:
        """Strides in bytes (NumPy's convention)."""
        return tuple(s * self.itemsize for s in self.strides)

    @property
    def is_view(self) -> bool:
        """True when derived from another description rather than being the allocation."""
        return self.base is not None

    @property
    def root(self) -> "TensorDescription":
        """The allocation at the end of the chain of views."""
        desc = self
        while desc.base is not None:
            desc = desc.base
        return desc

    @property
    def extent(self) -> Tuple[int, int]:
        """Lowest and highest buffer element the tensor can reach (high < low when empty)."""
        if self.size == 0:
            return self.offset, self.offset - 1
        low = high = self.offset
        for n, s in zip(self.shape, self.strides):
            reach = (n - 1) * s
            if reach < 0:
                low += reach
            else:
                high += reach
        return low, high

    @property
    def is_contiguous(self) -> bool:
        """Dense row-major: strides are row-major strides of the *shape* (no padding).

        Dimensions of length 1 may have any stride (NumPy's relaxed rule) since
        they never move the index; an empty tensor is trivially contiguous.
        """
        return self.size == 0 or all(
            n == 1 or s == c for n, s, c in zip(self.shape, self.strides, row_major_strides(self.shape)))

    @property
    def is_column_major_contiguous(self) -> bool:
        """Dense column-major, with the same relaxations as :attr:`is_contiguous`."""
        return self.size == 0 or all(
            n == 1 or s == c for n, s, c in zip(self.shape, self.strides, column_major_strides(self.shape)))

    # ---------------------------------------------------------------- comparisons

    def _key(self) -> tuple:
        return (id(self.buffer), self.dtype, self.shape, self.strides, self.offset, self.sizes,
                self.read_only)

    def __eq__(self, other: object) -> bool:
        """Equal when the same values of the same buffer are reached the same way (name and history ignored)."""
        if not isinstance(other, TensorDescription):
            return NotImplemented
        return self.buffer is other.buffer and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def shares_buffer(self, other: "TensorDescription") -> bool:
        """Whether both describe the same storage, i.e. may be views of each other."""
        return self.buffer is other.buffer

    def same_layout(self, other: "TensorDescription") -> bool:
        """Same shape and same strides.

        This is the seed's condition for walking two tensors with one iterator:
        index i sits at ``self.offset + k`` and ``other.offset + k`` for the same
        k, so the linear offsets of one tensor serve both (offsets may differ).
        """
        return self.shape == other.shape and self.strides == other.strides

    # ---------------------------------------------------------------- indexing

    def _check_index(self, index: Sequence[object]) -> Tuple[int, ...]:
        """The index as ints, or a TensorIndexError that names tensor, index and shape."""
        return _check_index(index, self.shape, self.name)

    def index_of(self, index: Sequence[int]) -> int:
        """Linear element offset of `index`: ``offset + dot(strides, index)``, bounds-checked.

        Indices are non-negative (the seed's rectangle of non-negative integers);
        NumPy's wrap-around of negative indices would hide off-by-one bugs in
        generated code, so it is an error here.
        """
        checked = self._check_index(index)
        return self.offset + sum(s * i for s, i in zip(self.strides, checked))

    def iter_offsets(self) -> Iterator[int]:
        """Linear offsets of all elements in row-major index order."""
        for index in np.ndindex(*self.shape):
            yield self.offset + sum(s * i for s, i in zip(self.strides, index))

    def element(self, index: Sequence[int], buffer: np.ndarray) -> object:
        """The value at `index` read from `buffer` (the 1-d storage)."""
        return buffer[self.index_of(index)]

    def _check_buffer(self, buffer: np.ndarray) -> None:
        """The array must be a contiguous 1-d buffer of our dtype, big enough."""
        if not isinstance(buffer, np.ndarray) or buffer.ndim != 1:
            raise LayoutError(f"tensor {self.name!r} needs a 1-d NumPy buffer, got "
                              f"{type(buffer).__name__} of shape {getattr(buffer, 'shape', None)}")
        if buffer.dtype != self.dtype:
            raise DTypeError(f"tensor {self.name!r} of {self.dtype} cannot view a buffer of {buffer.dtype}")
        if buffer.strides != (buffer.itemsize,) and buffer.size > 1:
            raise LayoutError(f"tensor {self.name!r} needs a contiguous buffer, got strides {buffer.strides}")
        low, high = self.extent
        if self.size and (low < 0 or high >= buffer.size):
            raise LayoutError(f"tensor {self.name!r} reaches elements {low}..{high} but the buffer "
                              f"has {buffer.size}")

    def as_array(self, buffer: np.ndarray) -> np.ndarray:
        """A NumPy view (never a copy) of `buffer` with this shape and layout.

        `buffer` is the 1-d storage (e.g. from ``self.buffer.allocate()``).  The
        result is writeable only for l-tensors, so an r-tensor cannot be
        assigned through by accident.
        """
        self._check_buffer(buffer)
        if self.size == 0:
            start = buffer[:0]
        else:
            start = buffer[self.offset:]
        return np.lib.stride_tricks.as_strided(start, shape=self.shape, strides=self.byte_strides,
                                               writeable=not self.read_only)

    # ---------------------------------------------------------------- views

    def _view(self, shape: Sequence[int], strides: Sequence[int], offset: int,
              sizes: Sequence[int], what: str) -> "TensorDescription":
        """A new description over the same buffer, recording self as its base."""
        return TensorDescription(self.dtype, tuple(shape), tuple(strides), offset, tuple(sizes),
                                 self.read_only, self.buffer, self, f"{self.name}.{what}")

    def as_read_only(self) -> "TensorDescription":
        """The same values as an r-tensor (there is no way back: views never gain write access)."""
        if self.read_only:
            return self
        return TensorDescription(self.dtype, self.shape, self.strides, self.offset, self.sizes,
                                 True, self.buffer, self, f"{self.name}.r")

    def _resolve_shape(self, shape: Sequence[int]) -> Shape:
        """A reshape target with at most one -1 filled in, checked against our size."""
        target = _as_tuple(shape, "shape")
        unknown = [i for i, n in enumerate(target) if n == -1]
        if len(unknown) > 1 or any(n < -1 for n in target):
            raise ShapeError(f"cannot reshape tensor {self.name!r} to {target}: lengths must be "
                             f">= 0 with at most one -1")
        if unknown:
            known = math.prod(n for n in target if n != -1)
            if known == 0 or self.size % known:
                raise ShapeError(f"cannot reshape tensor {self.name!r} of shape {self.shape} "
                                 f"(size {self.size}) to {target}")
            target = tuple(self.size // known if n == -1 else n for n in target)
        if math.prod(target) != self.size:
            raise ShapeError(f"cannot reshape tensor {self.name!r} of shape {self.shape} "
                             f"(size {self.size}) to {target} (size {math.prod(target)})")
        return target

    def reshape(self, shape: Sequence[int]) -> Optional["TensorDescription"]:
        """The same values in row-major order with a new shape, as a view, or None.

        None means no strides can express it (NumPy's copy=False would fail):
        the dimensions merged or split are not contiguous with respect to
        each other, e.g. a transposed matrix flattened.  The caller then
        copies, see :meth:`copy_to_contiguous` / :meth:`reshape_or_copy`.
        Allocated sizes survive only where the shape is unchanged.
        """
        target = self._resolve_shape(shape)
        if target == self.shape:
            return self._view(target, self.strides, self.offset, self.sizes, "reshape")
        if self.size == 0:
            return self._view(target, row_major_strides(target), self.offset, target, "reshape")
        strides = _nocopy_reshape_strides(self.shape, self.strides, target)
        if strides is None:
            return None
        return self._view(target, strides, self.offset, target, "reshape")

    def flatten(self) -> Optional["TensorDescription"]:
        """The values as a 1-d view in row-major order, or None when that needs a copy."""
        return self.reshape((self.size,))

    def copy_to_contiguous(self, name: str = "") -> "TensorDescription":
        """Description of the copy that replaces an impossible view.

        A fresh dense row-major allocation of the same shape and dtype.  It is
        an l-tensor even if self is an r-tensor: the seed converts r-tensors to
        l-tensors exactly by allocating storage and writing the values into it.
        """
        return TensorDescription.row_major(self.shape, self.dtype, name=name or f"{self.name}.copy")

    def reshape_or_copy(self, shape: Sequence[int]) -> Tuple["TensorDescription", bool]:
        """The reshape as a view when possible; otherwise a reshaped contiguous copy.

        Returns (description, copied).  When `copied` is True the values must be
        copied from self into the new description's buffer first (the result's
        ``base`` is that copy's description).
        """
        view = self.reshape(shape)
        if view is not None:
            return view, False
        copy = self.copy_to_contiguous()
        result = copy.reshape(shape)
        assert result is not None  # a dense row-major tensor reshapes to anything of its size
        return result, True

    def transpose(self, permutation: Optional[Sequence[int]] = None) -> "TensorDescription":
        """Dimensions reordered: always a view (permute shape, strides and sizes together).

        Result dimension ``k`` is dimension ``permutation[k]`` of self; the default
        reverses the dimensions, like NumPy.
        """
        if permutation is None:
            perm = tuple(reversed(range(self.rank)))
        else:
            perm = _as_tuple(permutation, "permutation")
        if sorted(perm) != list(range(self.rank)):
            raise ShapeError(f"{perm} is not a permutation of the {self.rank} dimensions of "
                             f"tensor {self.name!r} (shape {self.shape}); expected each of "
                             f"0..{self.rank - 1} exactly once")
        return self._view([self.shape[p] for p in perm], [self.strides[p] for p in perm],
                          self.offset, [self.sizes[p] for p in perm], "transpose")

    def slice(self, slices: Union[SliceItem, Sequence[SliceItem]]) -> "TensorDescription":
        """A basic-indexing selection: always a view.

        One slice or int per dimension (missing trailing entries mean ``:``).
        Slices follow Python semantics, negative steps included (the offset
        moves to the first selected element and the stride changes sign);
        an int selects one position and drops the dimension.
        """
        items = slices if isinstance(slices, tuple) else (
            tuple(slices) if isinstance(slices, list) else (slices,))
        if len(items) > self.rank:
            raise TensorIndexError(f"{len(items)} slice entries for tensor {self.name!r} of rank "
                                   f"{self.rank} (shape {self.shape})")
        items = items + (slice(None),) * (self.rank - len(items))
        shape, strides, sizes = [], [], []
        offset = self.offset
        empty = False
        for dim, (item, n, s, a) in enumerate(zip(items, self.shape, self.strides, self.sizes)):
            if isinstance(item, slice):
                try:
                    start, stop, step = item.indices(n)
                except (TypeError, ValueError) as error:
                    raise LayoutError(f"bad slice {item} for dimension {dim} of tensor "
                                      f"{self.name!r}: {error}") from None
                length = len(range(start, stop, step))
                if length == 0:
                    empty = True
                else:
                    offset += start * s
                shape.append(length)
                strides.append(s * step)
                full = start == 0 and step == 1 and length == n
                sizes.append(a if full else length)
            else:
                i = _as_int(item, f"slice entry {dim}")
                if not -n <= i < n:
                    raise TensorIndexError(f"index {i} is out of bounds for dimension {dim} of "
                                           f"tensor {self.name!r} (length {n})")
                offset += (i % n) * s
        if empty:
            offset = self.offset  # nothing is reached; keep the offset inside the buffer
        return self._view(shape, strides, offset, sizes, "slice")

    def broadcast(self, shape: Sequence[int],
                  new_axes: Optional[Sequence[int]] = None) -> "TensorDescription":
        """Values repeated along new or length-1 dimensions: a view with stride 0 there.

        Args:
            shape: the result shape.
            new_axes: positions in `shape` that are new dimensions; the other
                positions take self's dimensions in order.  Default: NumPy's rule
                (self's dimensions right-aligned, new ones in front).
        Each of self's dimensions must equal its target length or be 1
        (stretched with stride 0).
        """
        target = _as_shape(shape)
        if new_axes is None:
            if len(target) < self.rank:
                raise ShapeError(f"cannot broadcast tensor {self.name!r} of shape {self.shape} "
                                 f"to the lower-rank shape {target}")
            new = tuple(range(len(target) - self.rank))
        else:
            raw = _as_tuple(new_axes, "new_axes")
            if any(not -len(target) <= a < len(target) for a in raw) or \
                    len({a % len(target) for a in raw}) != len(raw):
                raise ShapeError(f"new_axes {raw} are not distinct positions in shape {target}")
            new = tuple(sorted(a % len(target) for a in raw))
            if len(target) - len(new) != self.rank:
                raise ShapeError(f"broadcasting tensor {self.name!r} of shape {self.shape} to "
                                 f"{target} with new axes {new} leaves {len(target) - len(new)} "
                                 f"old positions for {self.rank} dimensions")
        old = iter(zip(self.shape, self.strides, self.sizes))
        strides, sizes = [], []
        for position, length in enumerate(target):
            if position in new:
                strides.append(0)
                sizes.append(length)
                continue
            n, s, a = next(old)
            if n == length:
                strides.append(s)
                sizes.append(a)
            elif n == 1:
                strides.append(0)
                sizes.append(length)
            else:
                raise ShapeError(f"cannot broadcast dimension of length {n} of tensor "
                                 f"{self.name!r} (shape {self.shape}) to length {length} in "
                                 f"shape {target}; only length-1 dimensions stretch")
        return self._view(target, strides, self.offset, sizes, "broadcast")

    def pad(self, below: Union[int, Sequence[int]], above: Union[int, Sequence[int]],
            value: object = 0) -> "PaddedView":
        """This tensor surrounded by a constant: the seed's complex view, see :class:`PaddedView`."""
        # (the ignore: PaddedView's __post_init__ turns int pads into tuples)
        return PaddedView(self, below, above, value)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        extra = ""
        if self.sizes != self.shape:
            extra += f", sizes={self.sizes}"
        if self.read_only:
            extra += ", read_only"
        if self.is_view:
            extra += f", view of {self.root.name!r}"
        return (f"TensorDescription({self.name!r}, {self.dtype}, shape={self.shape}, "
                f"strides={self.strides}, offset={self.offset}{extra})")


# --------------------------------------------------------------------------- complex views


@dataclass(frozen=True, eq=False)
class PaddedView:
    """A complex view: `source` surrounded by a constant (seed 003's padding example).

    Two tensors take part: x[0] is `source`, x[1] the rank-0 constant `value`.
    The selection function s picks x[0] inside the interior and x[1] outside,
    with index translations f[0](i) = i - below and f[1](i) = (), so
    ``y[i] == x[s(i)][f[s(i)](i)]`` as in the seed.  No strides describe this,
    so it is an r-tensor: values can be read (or materialised) but not
    assigned through it.

    Attributes:
        source: the tensor supplying the interior values.
        below: pad length before each dimension (an int means the same for all).
        above: pad length after each dimension.
        value: the constant outside, cast to the source's dtype.
    """

    source: TensorDescription
    below: Shape
    above: Shape
    value: object = 0

    def __post_init__(self) -> None:
        rank = self.source.rank
        for what in ("below", "above"):
            raw = getattr(self, what)
            pads = (_as_int(raw, what),) * rank if isinstance(raw, (int, np.integer)) else _as_tuple(raw, what)
            if len(pads) != rank:
                raise ShapeError(f"{what} {pads} has {len(pads)} entries for tensor "
                                 f"{self.source.name!r} of rank {rank}")
            if any(p < 0 for p in pads):
                raise ShapeError(f"{what} {pads} has a negative pad length")
            object.__setattr__(self, what, pads)
        object.__setattr__(self, "value", np.asarray(self.value, dtype=self.source.dtype)[()])

    @property
    def dtype(self) -> np.dtype:
        """Element type (the source's)."""
        return self.source.dtype

    @property
    def shape(self) -> Shape:
        """Source shape plus the padding on both sides."""
        return tuple(b + n + a for b, n, a in zip(self.below, self.source.shape, self.above))

    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return self.source.rank

    @property
    def read_only(self) -> bool:
        """Always True: a complex view is an r-tensor."""
        return True

    def select(self, index: Sequence[int]) -> Tuple[int, Tuple[int, ...]]:
        """The seed's selection s and translation f: (tensor number, index into it).

        Returns (0, source index) inside the interior, (1, ()) in the padding.
        """
        checked = _check_index(index, self.shape, f"{self.source.name}.pad")
        inner = tuple(i - b for i, b in zip(checked, self.below))
        if all(0 <= i < n for i, n in zip(inner, self.source.shape)):
            return 0, inner
        return 1, ()

    def element(self, index: Sequence[int], buffer: np.ndarray) -> object:
        """The value at `index`: from the source's `buffer` inside, the pad value outside."""
        which, inner = self.select(index)
        if which == 0:
            return self.source.element(inner, buffer)
        return self.value

    def materialize(self, buffer: np.ndarray) -> np.ndarray:
        """A new array holding the padded values (the copy that turns this r-tensor into an l-tensor)."""
        out = np.full(self.shape, self.value, dtype=self.dtype)
        interior = tuple(slice(b, b + n) for b, n in zip(self.below, self.source.shape))
        out[interior] = self.source.as_array(buffer)
        return out
