"""Tensor descriptions: what is known about a tensor's storage before it exists.

One class serves two users. Nervana Graph v0.4 code builds descriptions from
axes (`ng.TensorDescription(axes, dtype=...)`, `op.tensor_description()`) and
derives views by axes (`broadcast`, `flatten`, `slice`, ...). The cpu
backend's planner builds them from shapes (`TensorDescription.row_major(shape)`)
and derives views by positions. Both are the same metadata: element type,
shape, the layout (strides and offset) through which the values are reached,
the allocated per-dimension sizes (which may exceed the shape, to align rows),
whether it is an r-tensor (read only) or an l-tensor (assignable), and the
linear storage it views. NumPy arrays appear only when a description is bound
to real memory: ``np.ndarray(td.shape, td.dtype, buffer=b, offset=td.offset,
strides=td.strides)`` or :meth:`TensorDescription.as_array`.

Conventions
-----------
* ``strides`` and ``offset`` count **bytes**, as NumPy's do and as v0.4's did;
  ``element_strides`` and ``element_offset`` count elements, the seed's linear
  index ``offset + dot(strides, index)`` into a 1-d buffer of elements. The
  element versions are stored; the byte versions follow from the item size.
* A description made from a shape has no axes of its own: ``axes`` makes
  anonymous ones the first time it is read, so the planner's many
  descriptions never pay for axes nobody looks at.
* Every view returns a new, immutable description over the *same* buffer
  whose ``base`` is the description owning the storage. Where no strides can
  express a view, ``reshape`` returns None and ``flatten`` raises LayoutError
  (v0.4 silently returned a wrong view); the caller copies, see
  :meth:`TensorDescription.copy_to_contiguous`. Nothing here copies values.
* :class:`PaddedView` is the seed's *complex view*: some values come from a
  source tensor, the rest from a constant, chosen by a selection function.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Iterator, List, Optional, Sequence, Tuple, Type, Union

import numpy as np
from numpy.typing import DTypeLike

from .axes import Axes, AxesLike, Axis, FlattenedAxis, SlicedAxis
from .debug_info import user_location
from .errors import (AxesError, AxgraphError, AxgraphTypeError, AxisLengthError, DTypeError,
                     IncompatibleAxesError, LayoutError, ShapeError, TensorIndexError)
from .strides import (Nested, Shape, aligned_length, column_major_strides, leaves,
                      merged_stride, nest_like, nocopy_reshape_strides, reduce_strides,
                      row_major_strides, same_structure)

__all__ = ["BufferDescription", "TensorDescription", "PaddedView", "reduce_strides"]

SliceItem = Union[slice, int]
#: A slice kept by a selection: (dimension, slice); named outside the class, whose
#: `slice` method hides the builtin.
KeptSlice = Tuple[int, slice]
#: Per dim: None, or the (strides, sizes) of a FlattenedAxis's parts, nested like them.
NestedLayout = Optional[Tuple[Optional[Tuple[Nested, Nested]], ...]]

_names = itertools.count()


def _error(kind: Type[AxgraphError], message: str) -> AxgraphError:
    """An error of `kind` located at the user's line."""
    return kind(message, user_location())


# --------------------------------------------------------------------------- input checks


def _as_int(value: object, what: str) -> int:
    """An exact Python int from an int-like value; bools and floats are rejected.

    Shapes and strides end up in generated code and arithmetic on offsets, so
    a float that happens to be integral (or True) is a bug in the caller.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise _error(LayoutError, f"{what} must be an integer, got {value!r}")
    return int(value)


def _as_tuple(values: Any, what: str) -> Tuple[int, ...]:
    """A tuple of exact ints, with a message naming `what` on bad input."""
    if isinstance(values, (int, np.integer)):
        values = (values,)
    try:
        items = tuple(values)
    except TypeError:
        raise _error(LayoutError, f"{what} must be a sequence of integers, got {values!r}") from None
    return tuple(_as_int(v, what) for v in items)


def _as_shape(shape: object, what: str = "shape") -> Shape:
    """A shape: non-negative ints."""
    result = _as_tuple(shape, what)
    if any(n < 0 for n in result):
        raise _error(LayoutError, f"{what} {result} has a negative length")
    return result


def _as_nested(value: object, what: str) -> Nested:
    """An int, or nested tuples (lists) of ints, as v0.4's full_strides / full_sizes."""
    if isinstance(value, (tuple, list)):
        return tuple(_as_nested(v, what) for v in value)
    return _as_int(value, what)


def _as_np_dtype(dtype: DTypeLike) -> np.dtype:
    """A NumPy dtype, with the library's DTypeError instead of NumPy's TypeError."""
    try:
        return np.dtype(dtype)
    except TypeError as error:
        raise _error(DTypeError, f"{dtype!r} is not an element type: {error}") from None


def _axis_lengths(axes: Axes, name: str) -> Shape:
    """The lengths of `axes`, or an AxisLengthError naming the axis (or part) without one."""
    for axis in axes:
        for part in _leaf_axes(axis):
            length = part.length
            if length is None or not isinstance(length, int):
                missing = "no length" if length is None else f"the symbolic length {length}"
                raise _error(AxisLengthError,
                             f"tensor description {name!r} of axes {axes!r}: axis {part.name} "
                             f"has {missing}; a description needs every length (set "
                             f"{part.name}.length first)")
    return tuple(axis.length for axis in axes)


def _leaf_axes(axis: Axis) -> List[Axis]:
    """The axes a FlattenedAxis stands for, expanded recursively; [axis] for any other."""
    if isinstance(axis, FlattenedAxis):
        return [leaf for part in axis.axes for leaf in _leaf_axes(part)]
    return [axis]


def _zeros_like(structure: Nested) -> Nested:
    """A nested entry of zero strides shaped like `structure`."""
    return nest_like([0] * len(tuple(leaves(structure))), structure)


def _contiguous_parts(stride: int, lengths: Nested) -> Nested:
    """Nested strides of parts walked by one `stride`: the innermost part steps by it,
    each outer part by the inner part's stride times its length (row-major)."""
    return nest_like(row_major_strides(tuple(leaves(lengths)), unit=stride), lengths)


def _check_index(index: Sequence[object], shape: Shape, name: str) -> Tuple[int, ...]:
    """`index` as ints within `shape`, or a TensorIndexError naming tensor, index and shape."""
    try:
        items = tuple(index)
    except TypeError:
        items = (index,)
    if len(items) != len(shape):
        raise _error(TensorIndexError, f"index {items} has {len(items)} entries but tensor "
                                       f"{name!r} has rank {len(shape)} (shape {shape})")
    result = []
    for dim, (i, n) in enumerate(zip(items, shape)):
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise _error(TensorIndexError, f"index {items} of tensor {name!r}: entry {dim} is "
                                           f"{i!r}, not an integer")
        if not 0 <= i < n:
            raise _error(TensorIndexError, f"index {items} is out of bounds for tensor {name!r} "
                                           f"of shape {shape}: entry {dim} must be in [0, {n})")
        result.append(int(i))
    return tuple(result)


def _is_shape(target: object) -> bool:
    """Whether a broadcast target is a shape (ints) rather than axes."""
    return isinstance(target, (tuple, list)) and all(
        isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_)) for n in target)


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
            raise _error(LayoutError, f"buffer {self.name!r} has negative length {elements}")
        object.__setattr__(self, "elements", elements)
        if self.alignment is not None:
            alignment = _as_int(self.alignment, "alignment")
            if alignment <= 0:
                raise _error(LayoutError, f"alignment must be a positive number of bytes, "
                                          f"got {alignment}")
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


class TensorDescription:
    """Immutable description of a dense tensor as a view of a linear buffer.

    What is known about a tensor's storage before any memory exists: element
    type, shape, strides and offset into a buffer, allocated sizes and
    whether it may be written. Views (`broadcast`, `flatten`, `slice`,
    `transpose`, ...) are new descriptions over the same buffer, so memory
    planning and code generation reason about aliasing without touching
    values. Nervana Graph v0.4 code builds one from axes, as below;
    :meth:`row_major` and :meth:`column_major` make one from a shape.

    Element ``index`` lives at element ``element_offset + dot(element_strides,
    index)`` of the buffer, i.e. at byte ``offset + dot(strides, index)``.

    Parameters
    ----------
    axes : Axes, Axis or iterable of Axis, optional
        The tensor's axes, as ``ng.make_axes`` takes them (a tuple inside is a
        FlattenedAxis); every length must be known.
    base : TensorDescription, optional
        A description whose storage this one views (None: storage of its own).
    dtype : dtype-like, optional
        The element type (None: base's, else float32).
    full_strides : sequence, optional
        Byte strides, one entry per axis, nested like a FlattenedAxis's parts
        where one is flattened (None: row-major over `full_sizes`).
    full_sizes : sequence, optional
        Allocated lengths per axis, >= the lengths, nested alike (None: the lengths).
    offset : int, optional
        The byte offset of index (0, ..., 0) in the buffer.
    name : str, optional
        A name for messages and generated code (automatic if None).
    read_only : bool, optional
        True for an r-tensor, whose values can only be read (a view of one is
        read only too).

    Attributes
    ----------
    dtype : numpy.dtype
        The element type.
    shape : tuple of int
        The lengths the tensor's values span; ``len(shape)`` is the rank.
    element_strides : tuple of int
        Strides in elements, one per dimension.
    element_offset : int
        Element offset of index (0, ..., 0) in the buffer.
    sizes : tuple of int
        Allocated length per dimension, >= shape (padding for alignment).
        Views keep the sizes of dimensions they pass through unchanged
        (a transpose permutes them); dimensions a view creates or cuts get
        sizes equal to their shape, since the view owns no padding there.
    read_only : bool
        True for an r-tensor (values can only be read), False for an
        l-tensor (values can be assigned).
    buffer : BufferDescription
        The storage viewed.
    name : str
        For messages and generated code.

    Raises
    ------
    AxisLengthError
        If an axis (or a part of a flattened one) has no length.
    LayoutError
        If strides or sizes do not fit the axes (not one entry per axis, not
        nested like a flattened axis's parts, sizes below the lengths, byte
        values that are not whole elements, parts no single stride walks), or
        the layout reaches outside the buffer.
    AxgraphTypeError
        If `base` is not a TensorDescription or `axes` are not Axis objects.
    DTypeError
        If `dtype` is not an element type, or differs from the buffer's.
    DuplicateAxisError
        If an axis occurs twice.

    Examples
    --------
    >>> import numpy as np
    >>> import axgraph as ng
    >>> C, N = ng.make_axis(length=3, name="C"), ng.make_axis(length=4, name="N")
    >>> td = ng.TensorDescription([C, N], dtype=np.float32)
    >>> td.shape, td.strides, td.sizes
    ((3, 4), (16, 4), (3, 4))
    """

    __slots__ = ("dtype", "shape", "element_strides", "element_offset", "sizes", "read_only",
                 "buffer", "name", "_base", "_axes", "_nested")
    dtype: np.dtype
    shape: Shape
    element_strides: Shape
    element_offset: int
    sizes: Shape
    read_only: bool
    buffer: BufferDescription
    name: str
    _base: Optional["TensorDescription"]
    _axes: Optional[Axes]
    _nested: NestedLayout

    #: v0.4 reached it as ``TensorDescription.reduce_strides``.
    reduce_strides = staticmethod(reduce_strides)

    def __init__(self, axes: AxesLike = (), base: Optional["TensorDescription"] = None,
                 dtype: Optional[DTypeLike] = None, full_strides: Optional[Sequence[Any]] = None,
                 full_sizes: Optional[Sequence[Any]] = None, offset: int = 0,
                 name: Optional[str] = None, *, read_only: bool = False):
        """Nervana Graph v0.4's constructor; see the class docstring."""
        axes = Axes(axes)
        name = name or f"t{next(_names)}"
        shape = _axis_lengths(axes, name)
        if base is not None and not isinstance(base, TensorDescription):
            raise _error(AxgraphTypeError, f"base of tensor description {name!r} must be a "
                                           f"TensorDescription, not {type(base).__name__}")
        np_dtype = _as_np_dtype(dtype if dtype is not None else
                                np.float32 if base is None else base.dtype)
        itemsize = np_dtype.itemsize
        sizes_given = axes.full_lengths if full_sizes is None else \
            self._per_axis(full_sizes, axes, "full_sizes", name)
        if full_strides is None:
            strides_given = self._row_major_nested(sizes_given)
        else:
            in_bytes = self._per_axis(full_strides, axes, "full_strides", name)
            strides_given = tuple(self._in_elements(entry, itemsize, name) for entry in in_bytes)
        element_strides: List[int] = []
        sizes: List[int] = []
        nested: List[Optional[Tuple[Nested, Nested]]] = []
        for axis, stride, size in zip(axes, strides_given, sizes_given):
            if isinstance(stride, int) and isinstance(size, int):
                element_strides.append(stride)
                sizes.append(size)
                nested.append(None)
            else:
                merged, entry = self._parts_layout(axis, stride, size, name, itemsize)
                element_strides.append(merged)
                sizes.append(math.prod(leaves(entry[1])))
                nested.append(entry)
        element_offset = self._in_elements(_as_int(offset, "offset"), itemsize, name)
        assert isinstance(element_offset, int)
        if any(size < n for n, size in zip(shape, sizes)):
            raise _error(LayoutError, f"tensor description {name!r}: allocated sizes "
                                      f"{tuple(sizes)} must be >= the lengths {shape}")
        root = None if base is None else base.base
        self._init(np_dtype, shape, tuple(element_strides), element_offset,
                   tuple(sizes), bool(read_only) or (root is not None and root.read_only),
                   None if root is None else root.buffer, root, name, axes,
                   tuple(nested) if any(entry is not None for entry in nested) else None)

    @staticmethod
    def _per_axis(values: Sequence[Any], axes: Axes, what: str, name: str) -> Tuple[Nested, ...]:
        """v0.4's full_strides or full_sizes as nested ints, one entry per axis."""
        result = _as_nested(tuple(values), what)
        assert isinstance(result, tuple)
        if len(result) != len(axes):
            raise _error(LayoutError, f"{what} {result} of tensor description {name!r} has "
                                      f"{len(result)} entries for the {len(axes)} axes {axes!r}")
        return result

    def _parts_layout(self, axis: Axis, stride: Nested, size: Nested, name: str,
                      itemsize: int) -> Tuple[int, Tuple[Nested, Nested]]:
        """The one stride walking a FlattenedAxis, and the nested (element strides, sizes)
        of its parts, checked: they nest like the parts and are contiguous."""
        if not isinstance(axis, FlattenedAxis):
            raise _error(LayoutError, f"tensor description {name!r}: axis {axis.name} is not a "
                                      f"FlattenedAxis, so its full stride and size are single "
                                      f"ints, not {stride} and {size}")
        lengths = axis.axes.full_lengths
        if isinstance(stride, int):
            stride = _contiguous_parts(stride, lengths)
        if isinstance(size, int):
            size = lengths
        if not (same_structure(stride, lengths) and same_structure(size, lengths)):
            raise _error(LayoutError, f"tensor description {name!r}: the full stride {stride} "
                                      f"and size {size} of {axis.name} must nest like its "
                                      f"parts' lengths {lengths}")
        merged = merged_stride(tuple(leaves(lengths)), tuple(leaves(stride)))
        if merged is None:
            raise _error(LayoutError, f"tensor description {name!r}: the parts of {axis.name} "
                                      f"(lengths {lengths}, strides "
                                      f"{self._bytes(stride, itemsize)} bytes) are not "
                                      f"contiguous with respect to each other, so no single "
                                      f"stride walks {axis.name}")
        return merged, (stride, size)

    @staticmethod
    def _row_major_nested(sizes: Tuple[Nested, ...]) -> Tuple[Nested, ...]:
        """v0.4's default layout: row-major element strides over the (nested) sizes."""
        return tuple(nest_like(row_major_strides(tuple(leaves(sizes))), sizes))  # type: ignore[arg-type]

    @staticmethod
    def _in_elements(value: Nested, itemsize: int, name: str) -> Nested:
        """Byte strides or offsets as element counts; they must be whole elements."""
        if any(v % itemsize for v in leaves(value)):
            raise _error(LayoutError, f"tensor description {name!r}: strides and offsets count "
                                      f"bytes and must be multiples of the item size "
                                      f"{itemsize}, got {value}")
        return nest_like([v // itemsize for v in leaves(value)], value)

    @staticmethod
    def _bytes(value: Nested, itemsize: int) -> Nested:
        """Element strides (nested or not) in bytes."""
        return nest_like([v * itemsize for v in leaves(value)], value)

    def _init(self, dtype: np.dtype, shape: Shape, element_strides: Shape, element_offset: int,
              sizes: Shape, read_only: bool, buffer: Optional[BufferDescription],
              base: Optional["TensorDescription"], name: str, axes: Optional[Axes] = None,
              nested: NestedLayout = None) -> None:
        """Set every field, make a buffer if none is given, and refuse layouts that reach
        outside the buffer. Callers pass exact ints."""
        set_ = object.__setattr__
        set_(self, "dtype", dtype)
        set_(self, "shape", shape)
        set_(self, "element_strides", element_strides)
        set_(self, "element_offset", element_offset)
        set_(self, "sizes", sizes)
        set_(self, "read_only", read_only)
        set_(self, "name", name)
        set_(self, "_base", base)
        if axes is not None:  # they name its dims: they must not change under it
            axes = Axes(axes).hold(f"the axes of tensor description {name!r}")
        set_(self, "_axes", axes)
        set_(self, "_nested", nested)
        if element_offset < 0:
            raise _error(LayoutError, f"tensor {name!r}: offset must be >= 0, got "
                                      f"{element_offset} elements")
        low, high = self.extent
        if buffer is None:
            buffer = BufferDescription(name, dtype, max(high + 1, math.prod(sizes), 0))
        set_(self, "buffer", buffer)
        if buffer.dtype != dtype:
            raise _error(DTypeError, f"tensor {name!r} of {dtype} cannot view buffer "
                                     f"{buffer.name!r} of {buffer.dtype}")
        if self.size and (low < 0 or high >= buffer.elements):
            raise _error(LayoutError,
                         f"tensor {name!r} (shape {shape}, strides {self.strides} bytes, offset "
                         f"{self.offset} bytes) reaches elements {low}..{high}, outside buffer "
                         f"{buffer.name!r} of {buffer.elements} elements")

    @classmethod
    def _make(cls, *fields, **optional) -> "TensorDescription":
        """A description from exact fields (see `_init`), without the v0.4 constructor."""
        self = cls.__new__(cls)
        self._init(*fields, **optional)
        return self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"tensor description {self.name!r} is immutable; its views "
                             f"(slice, broadcast, ...) are new descriptions")

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
                  alignment: Optional[int], read_only: bool, name: str, column_major: bool,
                  axes: Optional[Axes] = None) -> "TensorDescription":
        """Shared body of the two constructors: sizes, padding, strides, buffer."""
        shape_t = _as_shape(shape)
        np_dtype = _as_np_dtype(dtype)
        sizes_t = shape_t if sizes is None else _as_shape(sizes, "sizes")
        if len(sizes_t) != len(shape_t):
            raise _error(LayoutError, f"sizes {sizes_t} and shape {shape_t} have different ranks")
        if any(a < n for a, n in zip(sizes_t, shape_t)):
            raise _error(LayoutError, f"allocated sizes {sizes_t} must be >= shape {shape_t} in "
                                      f"every dimension")
        if alignment is not None:
            alignment = _as_int(alignment, "alignment")
            if alignment <= 0:
                raise _error(LayoutError, f"alignment must be a positive number of bytes, "
                                          f"got {alignment}")
            if sizes_t:
                inner = 0 if column_major else len(sizes_t) - 1
                padded = list(sizes_t)
                padded[inner] = aligned_length(padded[inner], np_dtype.itemsize, alignment)
                sizes_t = tuple(padded)
        strides = column_major_strides(sizes_t) if column_major else row_major_strides(sizes_t)
        name = name or f"t{next(_names)}"
        buffer = BufferDescription(name, np_dtype, math.prod(sizes_t), alignment)
        return cls._make(np_dtype, shape_t, strides, 0, sizes_t, bool(read_only), buffer, None,
                         name, axes)

    # ---------------------------------------------------------------- properties

    @property
    def axes(self) -> Axes:
        """The axes naming the dimensions; anonymous ones, made on first use, for a
        description made from a shape."""
        if self._axes is None:
            object.__setattr__(self, "_axes", Axes([Axis(length=n) for n in self.shape]).hold(
                f"the axes of tensor description {self.name!r}"))
        assert self._axes is not None
        return self._axes

    @property
    def rank(self) -> int:
        """Number of dimensions (the seed's word)."""
        return len(self.shape)

    @property
    def ndim(self) -> int:
        """Number of dimensions (v0.4's and NumPy's word)."""
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
    def strides(self) -> Shape:
        """Strides in bytes, NumPy's convention (``element_strides`` times the item size)."""
        itemsize = self.dtype.itemsize
        return tuple(s * itemsize for s in self.element_strides)

    @property
    def offset(self) -> int:
        """Byte offset of index (0, ..., 0) in the buffer."""
        return self.element_offset * self.dtype.itemsize

    @property
    def full_strides(self) -> Tuple[Nested, ...]:
        """Byte strides with a nested entry per FlattenedAxis, one stride per part (v0.4)."""
        return tuple(self._bytes(entry[0], self.itemsize) for entry in self._full_layout())

    @property
    def full_sizes(self) -> Tuple[Nested, ...]:
        """Allocated sizes with a nested entry per FlattenedAxis, one size per part (v0.4)."""
        return tuple(entry[1] for entry in self._full_layout())

    def _full_layout(self) -> List[Tuple[Nested, Nested]]:
        """(element strides, sizes) per dim, nested for a FlattenedAxis: as stored, or, for
        one walked by a single stride, the row-major parts that stride implies."""
        result = []
        for dim, (stride, size) in enumerate(zip(self.element_strides, self.sizes)):
            entry = self._nested[dim] if self._nested is not None else None
            axis = self._axes[dim] if self._axes is not None else None
            if entry is None and isinstance(axis, FlattenedAxis):
                lengths = axis.axes.full_lengths
                entry = (_contiguous_parts(stride, lengths), lengths)
            result.append(entry if entry is not None else (stride, size))
        return result

    @property
    def allocated_elements(self) -> int:
        """Elements the allocated sizes span (product of `sizes`), padding included."""
        return math.prod(self.sizes)

    @property
    def tensor_size(self) -> int:
        """Bytes the allocated sizes span, padding included (v0.4's name)."""
        return self.allocated_elements * self.itemsize

    @property
    def base(self) -> "TensorDescription":
        """The description owning the storage this one views: itself unless a view."""
        return self._base if self._base is not None else self

    def is_base(self) -> bool:
        """True when this description owns its storage rather than viewing another's."""
        return self._base is None

    @property
    def extent(self) -> Tuple[int, int]:
        """Lowest and highest buffer element the tensor can reach (high < low when empty)."""
        offset = self.element_offset
        if 0 in self.shape:
            return offset, offset - 1
        low = high = offset
        for n, s in zip(self.shape, self.element_strides):
            reach = (n - 1) * s
            if reach < 0:
                low += reach
            else:
                high += reach
        return low, high

    def _dense_in(self, strides: Shape) -> bool:
        """Element strides equal `strides` wherever a dim moves (NumPy's relaxed rule:
        dims of length 1 may have any stride, an empty tensor is dense)."""
        return 0 in self.shape or all(
            n == 1 or s == c for n, s, c in zip(self.shape, self.element_strides, strides))

    @property
    def c_contiguous(self) -> bool:
        """Dense row-major: strides are row-major strides of the *shape* (no padding)."""
        return self._dense_in(row_major_strides(self.shape))

    @property
    def f_contiguous(self) -> bool:
        """Dense column-major, with the same relaxations as :attr:`c_contiguous`."""
        return self._dense_in(column_major_strides(self.shape))

    @property
    def broadcast_contiguous(self) -> bool:
        """Row-major once the dims of stride 0 (broadcast ones) are left out (v0.4)."""
        kept = [(n, s) for n, s in zip(self.shape, self.element_strides) if s != 0]
        lengths = tuple(n for n, _ in kept)
        return 0 in self.shape or all(
            n == 1 or s == c for (n, s), c in zip(kept, row_major_strides(lengths)))

    # ---------------------------------------------------------------- comparisons

    def _key(self) -> tuple:
        return (id(self.buffer), self.dtype, self.shape, self.element_strides,
                self.element_offset, self.sizes, self.read_only)

    def __eq__(self, other: object) -> bool:
        """Equal when the same values of the same buffer are reached the same way (name,
        axes and history ignored)."""
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
        index i sits at ``self.element_offset + k`` and ``other.element_offset + k``
        for the same k, so the linear offsets of one tensor serve both.
        """
        return self.shape == other.shape and self.element_strides == other.element_strides

    # ---------------------------------------------------------------- indexing

    def index_of(self, index: Sequence[int]) -> int:
        """Buffer element of `index`: ``element_offset + dot(element_strides, index)``.

        Indices are non-negative (the seed's rectangle of non-negative integers);
        NumPy's wrap-around of negative indices would hide off-by-one bugs in
        generated code, so it is an error here.
        """
        checked = _check_index(index, self.shape, self.name)
        return self.element_offset + sum(s * i for s, i in zip(self.element_strides, checked))

    def iter_element_offsets(self) -> Iterator[int]:
        """Buffer elements of all the tensor's elements in row-major index order."""
        for index in np.ndindex(*self.shape):
            yield self.element_offset + sum(s * i for s, i in zip(self.element_strides, index))

    def element(self, index: Sequence[int], buffer: np.ndarray) -> object:
        """The value at `index` read from `buffer` (the 1-d storage)."""
        return buffer[self.index_of(index)]

    def _check_buffer(self, buffer: np.ndarray) -> None:
        """The array must be a contiguous 1-d buffer of our dtype, big enough."""
        if not isinstance(buffer, np.ndarray) or buffer.ndim != 1:
            raise _error(LayoutError, f"tensor {self.name!r} needs a 1-d NumPy buffer, got "
                                      f"{type(buffer).__name__} of shape "
                                      f"{getattr(buffer, 'shape', None)}")
        if buffer.dtype != self.dtype:
            raise _error(DTypeError, f"tensor {self.name!r} of {self.dtype} cannot view a "
                                     f"buffer of {buffer.dtype}")
        if buffer.strides != (buffer.itemsize,) and buffer.size > 1:
            raise _error(LayoutError, f"tensor {self.name!r} needs a contiguous buffer, got "
                                      f"strides {buffer.strides}")
        low, high = self.extent
        if self.size and (low < 0 or high >= buffer.size):
            raise _error(LayoutError, f"tensor {self.name!r} reaches elements {low}..{high} but "
                                      f"the buffer has {buffer.size}")

    def as_array(self, buffer: np.ndarray) -> np.ndarray:
        """A NumPy view (never a copy) of `buffer` with this shape and layout.

        `buffer` is the 1-d storage (e.g. from ``self.buffer.allocate()``). The
        result is writeable only for l-tensors, so an r-tensor cannot be
        assigned through by accident.
        """
        self._check_buffer(buffer)
        start = buffer[:0] if self.size == 0 else buffer[self.element_offset:]
        return np.lib.stride_tricks.as_strided(start, shape=self.shape, strides=self.strides,
                                               writeable=not self.read_only)

    # ---------------------------------------------------------------- views by position

    def _view(self, shape: Sequence[int], strides: Sequence[int], element_offset: int,
              sizes: Sequence[int], what: str, axes: Optional[Axes] = None,
              nested: NestedLayout = None) -> "TensorDescription":
        """A new description over the same buffer, with self's base as its base."""
        return TensorDescription._make(self.dtype, tuple(shape), tuple(strides), element_offset,
                                       tuple(sizes), self.read_only, self.buffer, self.base,
                                       f"{self.name}.{what}", axes, nested)

    def as_read_only(self) -> "TensorDescription":
        """The same values as an r-tensor (there is no way back: views never gain write access)."""
        if self.read_only:
            return self
        return TensorDescription._make(self.dtype, self.shape, self.element_strides,
                                       self.element_offset, self.sizes, True, self.buffer,
                                       self.base, f"{self.name}.r", self._axes, self._nested)

    def clone(self) -> "TensorDescription":
        """A new description of the same view (v0.4): same axes, layout and storage."""
        return self._view(self.shape, self.element_strides, self.element_offset, self.sizes,
                          "clone", self._axes, self._nested)

    def _resolve_shape(self, shape: Sequence[int]) -> Shape:
        """A reshape target with at most one -1 filled in, checked against our size."""
        target = _as_tuple(shape, "shape")
        unknown = [i for i, n in enumerate(target) if n == -1]
        if len(unknown) > 1 or any(n < -1 for n in target):
            raise _error(ShapeError, f"cannot reshape tensor {self.name!r} to {target}: lengths "
                                     f"must be >= 0 with at most one -1")
        if unknown:
            known = math.prod(n for n in target if n != -1)
            if known == 0 or self.size % known:
                raise _error(ShapeError, f"cannot reshape tensor {self.name!r} of shape "
                                         f"{self.shape} (size {self.size}) to {target}")
            target = tuple(self.size // known if n == -1 else n for n in target)
        if math.prod(target) != self.size:
            raise _error(ShapeError, f"cannot reshape tensor {self.name!r} of shape {self.shape} "
                                     f"(size {self.size}) to {target} (size {math.prod(target)})")
        return target

    def reshape(self, shape: Sequence[int]) -> Optional["TensorDescription"]:
        """The same values in row-major order with a new shape, as a view, or None.

        None means no strides can express it (NumPy's copy=False would fail):
        the dimensions merged or split are not contiguous with respect to
        each other, e.g. a transposed matrix flattened. The caller then
        copies, see :meth:`copy_to_contiguous` / :meth:`reshape_or_copy`.
        Allocated sizes survive only where the shape is unchanged; the result
        is described by shape (axes are not carried over).
        """
        target = self._resolve_shape(shape)
        if target == self.shape:
            return self._view(target, self.element_strides, self.element_offset, self.sizes,
                              "reshape")
        if self.size == 0:
            return self._view(target, row_major_strides(target), self.element_offset, target,
                              "reshape")
        strides = nocopy_reshape_strides(self.shape, self.element_strides, target)
        if strides is None:
            return None
        return self._view(target, strides, self.element_offset, target, "reshape")

    def copy_to_contiguous(self, name: str = "") -> "TensorDescription":
        """Description of the copy that replaces an impossible view.

        A fresh dense row-major allocation of the same shape, dtype and axes. It
        is an l-tensor even if self is an r-tensor: the seed converts r-tensors to
        l-tensors exactly by allocating storage and writing the values into it.
        """
        return TensorDescription._allocate(self.shape, self.dtype, None, None, False,
                                           name or f"{self.name}.copy", False, self._axes)

    def reshape_or_copy(self, shape: Sequence[int]) -> Tuple["TensorDescription", bool]:
        """The reshape as a view when possible; otherwise a reshaped contiguous copy.

        Returns (description, copied). When `copied` is True the values must be
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
        """Dimensions (and their axes) reordered: always a view.

        Result dimension ``k`` is dimension ``permutation[k]`` of self; the default
        reverses the dimensions, like NumPy and v0.4.
        """
        if permutation is None:
            perm = tuple(reversed(range(self.rank)))
        else:
            perm = _as_tuple(permutation, "permutation")
        if sorted(perm) != list(range(self.rank)):
            raise _error(ShapeError, f"{perm} is not a permutation of the {self.rank} dimensions "
                                     f"of tensor {self.name!r} (shape {self.shape}); expected "
                                     f"each of 0..{self.rank - 1} exactly once")
        axes = None if self._axes is None else Axes([self._axes[p] for p in perm])
        nested = None if self._nested is None else tuple(self._nested[p] for p in perm)
        return self._view([self.shape[p] for p in perm], [self.element_strides[p] for p in perm],
                          self.element_offset, [self.sizes[p] for p in perm], "transpose",
                          axes, nested)

    def slice(self, slices: Union[SliceItem, Sequence[SliceItem]],
              new_axes: AxesLike = None) -> "TensorDescription":
        """A basic-indexing selection: always a view.

        One slice or int per dimension (missing trailing entries mean ``:``).
        Slices follow Python semantics, negative steps included (the offset
        moves to the first selected element and the stride changes sign);
        an int selects one position and drops the dimension.

        `new_axes` (v0.4) labels the result: one axis per slice entry. An axis
        without a length gets the slice's; one with a length must match it.
        Without them a description with axes labels the result with
        ``SlicedAxis.of(axis, slice)`` (the axis itself where all of it is kept).
        """
        items = slices if isinstance(slices, tuple) else (
            tuple(slices) if isinstance(slices, list) else (slices,))
        if len(items) > self.rank:
            raise _error(TensorIndexError, f"{len(items)} slice entries for tensor {self.name!r} "
                                           f"of rank {self.rank} (shape {self.shape})")
        items = items + (slice(None),) * (self.rank - len(items))
        shape: List[int] = []
        strides: List[int] = []
        sizes: List[int] = []
        kept: List[KeptSlice] = []
        offset = self.element_offset
        empty = False
        for dim, (item, n, s, a) in enumerate(zip(items, self.shape, self.element_strides,
                                                  self.sizes)):
            if isinstance(item, slice):
                try:
                    start, stop, step = item.indices(n)
                except (TypeError, ValueError) as error:
                    raise _error(LayoutError, f"bad slice {item} for dimension {dim} of tensor "
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
                kept.append((dim, item))
            else:
                i = _as_int(item, f"slice entry {dim}")
                if not -n <= i < n:
                    raise _error(TensorIndexError, f"index {i} is out of bounds for dimension "
                                                   f"{dim} of tensor {self.name!r} (length {n})")
                offset += (i % n) * s
        if empty:
            offset = self.element_offset  # nothing is reached; keep the offset inside the buffer
        axes = self._sliced_axes(items, kept, tuple(shape), new_axes)
        nested = None
        if axes is not None and self._nested is not None:
            nested = tuple(self._nested[dim] if axis is self.axes[dim] else None
                           for (dim, _), axis in zip(kept, axes))
        return self._view(shape, strides, offset, sizes, "slice", axes, nested)

    def _sliced_axes(self, items: Tuple[SliceItem, ...], kept: List[KeptSlice],
                     shape: Shape, new_axes: AxesLike) -> Optional[Axes]:
        """The axes of a slice: `new_axes` checked (lengths set where missing), or sliced
        axes of self's, or None for a description made from a shape."""
        if new_axes is None:
            if self._axes is None:
                return None
            return Axes([SlicedAxis.of(self._axes[dim], item) for dim, item in kept])
        axes = Axes(new_axes)
        if len(axes) != len(kept):
            raise _error(AxesError, f"slicing tensor {self.name!r} with {items} keeps "
                                    f"{len(kept)} dimensions, but {len(axes)} new axes {axes!r} "
                                    f"were given (one per slice, none per int)")
        for axis, length in zip(axes, shape):
            if axis.length is not None and axis.length != length:
                raise _error(AxisLengthError, f"slicing tensor {self.name!r} with {items}: new "
                                              f"axis {axis.name} has length {axis.length}, but "
                                              f"its slice selects {length} positions")
        for axis, length in zip(axes, shape):
            if axis.length is None:
                axis.length = length
        return axes

    def broadcast(self, target: Union[Sequence[int], AxesLike],
                  new_axes: Optional[Sequence[int]] = None) -> "TensorDescription":
        """Values repeated along new dimensions: a view with stride 0 there.

        Given axes (v0.4), the result has those axes: each of self's axes must be
        among them, in any order (it keeps its stride), and the others are new
        (stride 0; a FlattenedAxis gets a zero stride for each part).

        Given a shape (the planner), `new_axes` are the positions in it that are
        new dimensions, the other positions take self's dimensions in order
        (default: NumPy's rule, self's dimensions right-aligned); each of self's
        dimensions must equal its target length or be 1 (stretched with
        stride 0). The result is described by shape.
        """
        if not _is_shape(target):
            if new_axes is not None:
                raise _error(AxgraphTypeError, f"broadcasting tensor {self.name!r} to axes "
                                               f"takes no new_axes positions (the axes say "
                                               f"where each dimension goes)")
            return self._arranged(Axes(target), "broadcast")  # type: ignore[arg-type]
        shape = _as_shape(target)
        if new_axes is None:
            if len(shape) < self.rank:
                raise _error(ShapeError, f"cannot broadcast tensor {self.name!r} of shape "
                                         f"{self.shape} to the lower-rank shape {shape}")
            new = tuple(range(len(shape) - self.rank))
        else:
            raw = _as_tuple(new_axes, "new_axes")
            if any(not -len(shape) <= a < len(shape) for a in raw) or \
                    len({a % len(shape) for a in raw}) != len(raw):
                raise _error(ShapeError, f"new_axes {raw} are not distinct positions in shape "
                                         f"{shape}")
            new = tuple(sorted(a % len(shape) for a in raw))
            if len(shape) - len(new) != self.rank:
                raise _error(ShapeError, f"broadcasting tensor {self.name!r} of shape "
                                         f"{self.shape} to {shape} with new axes {new} leaves "
                                         f"{len(shape) - len(new)} old positions for "
                                         f"{self.rank} dimensions")
        old = iter(zip(self.shape, self.element_strides, self.sizes))
        strides, sizes = [], []
        for position, length in enumerate(shape):
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
                raise _error(ShapeError, f"cannot broadcast dimension of length {n} of tensor "
                                         f"{self.name!r} (shape {self.shape}) to length {length} "
                                         f"in shape {shape}; only length-1 dimensions stretch")
        return self._view(shape, strides, self.element_offset, sizes, "broadcast")

    def pad(self, below: Union[int, Sequence[int]], above: Union[int, Sequence[int]],
            value: object = 0) -> "PaddedView":
        """This tensor surrounded by a constant: the seed's complex view, see :class:`PaddedView`."""
        # (the ignore: PaddedView's __post_init__ turns int pads into tuples)
        return PaddedView(self, below, above, value)  # type: ignore[arg-type]

    # ---------------------------------------------------------------- views by axes (v0.4)

    def reorder(self, new_axes: AxesLike) -> "TensorDescription":
        """The same axes in the order of `new_axes`: a view (a transpose by axes)."""
        new = Axes(new_axes)
        if not self.axes.is_equal_set(new):
            raise _error(IncompatibleAxesError, f"reorder of tensor {self.name!r} can only change "
                                                f"the order of its axes {self.axes!r}, not make "
                                                f"them {new!r}")
        return self._arranged(new, "reorder")

    def _arranged(self, new_axes: Axes, what: str) -> "TensorDescription":
        """Self's axes put where they occur in `new_axes` (keeping their strides), the
        other axes of `new_axes` added with stride 0."""
        own = self.axes
        missing = [axis for axis in own if axis not in new_axes]
        if missing:
            raise _error(IncompatibleAxesError,
                         f"{what} of tensor {self.name!r} with axes {own!r} to {new_axes!r} "
                         f"leaves out {Axes(missing)!r}; a broadcast keeps every axis (in any "
                         f"order) and adds new ones")
        lengths = _axis_lengths(new_axes, self.name)
        strides, sizes, nested = [], [], []
        for axis, length in zip(new_axes, lengths):
            if axis in own:
                dim = own.index(axis)
                strides.append(self.element_strides[dim])
                sizes.append(self.sizes[dim])
                nested.append(self._nested[dim] if self._nested is not None else None)
            else:
                strides.append(0)
                sizes.append(length)
                if isinstance(axis, FlattenedAxis):
                    parts = axis.axes.full_lengths
                    nested.append((_zeros_like(parts), parts))
                else:
                    nested.append(None)
        return self._view(lengths, strides, self.element_offset, sizes, what, new_axes,
                          tuple(nested) if any(e is not None for e in nested) else None)

    def cast(self, new_axes: AxesLike) -> "TensorDescription":
        """The same layout labelled with other axes of the same lengths (v0.4's axes cast);
        a scalar is repeated over any axes."""
        new = Axes(new_axes)
        if self.rank == 0:
            return self._arranged(new, "cast")
        lengths = _axis_lengths(new, self.name)
        if lengths != self.shape:
            raise _error(IncompatibleAxesError, f"cannot cast tensor {self.name!r} with axes "
                                                f"{self.axes!r} to {new!r}: the lengths "
                                                f"{self.shape} and {lengths} differ")
        nested = None
        if self._nested is not None and self._axes is not None:
            nested = tuple(entry if axis is old else None
                           for entry, axis, old in zip(self._nested, new, self._axes))
        return self._view(self.shape, self.element_strides, self.element_offset, self.sizes,
                          "cast", new, nested)

    def flatten(self, new_axes: AxesLike) -> "TensorDescription":
        """Runs of consecutive axes merged into FlattenedAxes: a view (v0.4).

        `new_axes` are self's axes with runs replaced by a FlattenedAxis of them
        (``[FlattenedAxis([A, B]), C]`` or ``[(A, B), C]``). Merged axes must be
        contiguous with respect to each other in memory; otherwise (a transposed
        or padded tensor) no strides describe the merged axis and a LayoutError
        says so: copy first (:meth:`copy_to_contiguous`).
        """
        return self._regrouped(Axes(new_axes), "flatten")

    def unflatten(self, new_axes: AxesLike) -> "TensorDescription":
        """FlattenedAxes split back into their parts: a view (v0.4).

        `new_axes` are self's axes with FlattenedAxes replaced by their parts.
        A flattened axis walked by one stride splits into row-major parts.
        """
        return self._regrouped(Axes(new_axes), "unflatten")

    def _regrouped(self, new_axes: Axes, what: str) -> "TensorDescription":
        """Self's axes regrouped as `new_axes`: both expand to the same axes in order."""
        layout = self._full_layout()
        parts: List[Tuple[Axis, int, int]] = []
        for axis, (full_stride, full_size) in zip(self.axes, layout):
            parts.extend(zip(_leaf_axes(axis), leaves(full_stride), leaves(full_size)))
        new_parts = [leaf for axis in new_axes for leaf in _leaf_axes(axis)]
        if [id(a) for a, _, _ in parts] != [id(a) for a in new_parts]:
            raise _error(IncompatibleAxesError,
                         f"cannot {what} tensor {self.name!r} with axes {self.axes!r} to "
                         f"{new_axes!r}: expanding flattened axes must give the same axes in "
                         f"the same order ({[a.name for a, _, _ in parts]} vs "
                         f"{[a.name for a in new_parts]})")
        shape: List[int] = []
        strides: List[int] = []
        sizes: List[int] = []
        nested: List[Optional[Tuple[Nested, Nested]]] = []
        position = 0
        for axis in new_axes:
            count = len(_leaf_axes(axis))
            group = parts[position:position + count]
            position += count
            shape.append(axis.length)
            if not isinstance(axis, FlattenedAxis):
                strides.append(group[0][1])
                sizes.append(group[0][2])
                nested.append(None)
                continue
            structure = axis.axes.full_lengths
            group_strides = [s for _, s, _ in group]
            group_sizes = [z for _, _, z in group]
            stride = merged_stride([a.length for a, _, _ in group], group_strides)
            if stride is None and 0 in self.shape:
                stride = group_strides[-1]      # an empty tensor reaches no element
            if stride is None:
                raise _error(LayoutError,
                             f"cannot {what} tensor {self.name!r} to {new_axes!r}: axes "
                             f"{[a.name for a, _, _ in group]} (lengths "
                             f"{[a.length for a, _, _ in group]}, strides "
                             f"{[s * self.itemsize for s in group_strides]} bytes) are not "
                             f"contiguous with respect to each other in memory, so no strides "
                             f"describe {axis.name}; a copy is needed (copy_to_contiguous() "
                             f"describes one that flattens)")
            strides.append(stride)
            sizes.append(math.prod(group_sizes))
            nested.append((nest_like(group_strides, structure), nest_like(group_sizes, structure)))
        return self._view(shape, strides, self.element_offset, sizes, what, new_axes,
                          tuple(nested) if any(e is not None for e in nested) else None)

    def __repr__(self) -> str:
        extra = ""
        if self._axes is not None:
            extra += f", axes={self._axes!r}"
        if self.sizes != self.shape:
            extra += f", sizes={self.sizes}"
        if self.read_only:
            extra += ", read_only"
        if not self.is_base():
            extra += f", view of {self.base.name!r}"
        return (f"TensorDescription({self.name!r}, {self.dtype}, shape={self.shape}, "
                f"strides={self.strides}, offset={self.offset}{extra})")


# --------------------------------------------------------------------------- complex views


@dataclass(frozen=True, eq=False)
class PaddedView:
    """A complex view: `source` surrounded by a constant (padding, the classic complex view).

    Two tensors take part: x[0] is `source`, x[1] the rank-0 constant `value`.
    The selection function s picks x[0] inside the interior and x[1] outside,
    with index translations f[0](i) = i - below and f[1](i) = (), so
    ``y[i] == x[s(i)][f[s(i)](i)]`` as in the seed. No strides describe this,
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
            pads = (_as_int(raw, what),) * rank if isinstance(raw, (int, np.integer)) \
                else _as_tuple(raw, what)
            if len(pads) != rank:
                raise _error(ShapeError, f"{what} {pads} has {len(pads)} entries for tensor "
                                         f"{self.source.name!r} of rank {rank}")
            if any(p < 0 for p in pads):
                raise _error(ShapeError, f"{what} {pads} has a negative pad length")
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
