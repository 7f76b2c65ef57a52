"""Element types and shapes of the core IR: the type of a tensor (axgraph.types is
another thing: the class names Nervana Graph v0.4 programs test ops against).

An `ElementType` wraps one NumPy dtype under nGraph's short name (`f32`,
`i64`, `boolean`). `bf16` exists only when `ml_dtypes` is importable, and is
looked up lazily (module `__getattr__`) so that importing the core never pays
for it. A `Shape` is an immutable tuple of dims: non-negative ints or
symbolic `Dim` expressions.
"""
from __future__ import annotations

from typing import Dict, FrozenSet, Iterable, Mapping, Tuple, Union

import numpy as np

from ..dims import Dim, DimLike, parse
from ..debug_info import user_location
from ..dtypes import bfloat16
from ..errors import AxgraphTypeError, AxgraphValueError, DTypeError


class ElementType:
    """One scalar type of the core: a short name, a NumPy dtype and a kind.

    The library makes one of each (`core.f32`, `core.i64`, `core.boolean`, ...;
    `element_type` finds them by name or dtype), and they compare by name.
    `kind` is stated, not derived from the dtype, because extension dtypes such
    as bfloat16 report kind "V".

    Parameters
    ----------
    name : str
        The short name, as printed: "f32", "i64", "boolean".
    dtype : numpy.dtype or type
        The NumPy dtype of arrays of this type.
    kind : str
        "float", "int" (signed), "uint" or "bool": what ops accept it.
    """

    __slots__ = ("name", "dtype", "kind")
    name: str
    dtype: np.dtype
    kind: str

    def __init__(self, name: str, dtype, kind: str):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "dtype", np.dtype(dtype))
        object.__setattr__(self, "kind", kind)

    def __setattr__(self, name, value):
        raise AttributeError("element types are immutable")

    @property
    def bitwidth(self) -> int:
        """Bits per element: 32 for f32."""
        return self.dtype.itemsize * 8

    @property
    def is_float(self) -> bool:
        """Floating-point (bf16 included)."""
        return self.kind == "float"

    @property
    def is_integral(self) -> bool:
        """Signed or unsigned integers (not boolean)."""
        return self.kind in ("int", "uint")

    @property
    def is_signed(self) -> bool:
        """Signed integers and floats."""
        return self.kind in ("int", "float")

    @property
    def is_boolean(self) -> bool:
        """The boolean type."""
        return self.kind == "bool"

    @property
    def is_numeric(self) -> bool:
        """Anything arithmetic accepts: floats and integers, not boolean."""
        return self.kind != "bool"

    def __eq__(self, other) -> bool:
        return isinstance(other, ElementType) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("ElementType", self.name))

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"core.{self.name}"

    def __reduce__(self):
        return (element_type, (self.name,))


f16 = ElementType("f16", np.float16, "float")
f32 = ElementType("f32", np.float32, "float")
f64 = ElementType("f64", np.float64, "float")
i8 = ElementType("i8", np.int8, "int")
i16 = ElementType("i16", np.int16, "int")
i32 = ElementType("i32", np.int32, "int")
i64 = ElementType("i64", np.int64, "int")
u8 = ElementType("u8", np.uint8, "uint")
u16 = ElementType("u16", np.uint16, "uint")
u32 = ElementType("u32", np.uint32, "uint")
u64 = ElementType("u64", np.uint64, "uint")
boolean = ElementType("boolean", np.bool_, "bool")

_BY_NAME: Dict[str, ElementType] = {t.name: t for t in
                                    (f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, boolean)}
_BY_DTYPE: Dict[np.dtype, ElementType] = {t.dtype: t for t in _BY_NAME.values()}


def _bf16() -> ElementType:
    """bfloat16 from ml_dtypes, made once on first use; DTypeError without ml_dtypes."""
    if "bf16" not in _BY_NAME:
        made = ElementType("bf16", bfloat16(), "float")
        _BY_NAME["bf16"] = made
        _BY_DTYPE[made.dtype] = made
    return _BY_NAME["bf16"]


def has_bf16() -> bool:
    """Whether the bf16 element type is available (the optional ml_dtypes is importable).

    Returns
    -------
    bool
        True when `core.bf16` can be used.
    """
    try:
        _bf16()
    except DTypeError:
        return False
    return True


def __getattr__(name: str):
    if name == "bf16":
        try:
            return _bf16()
        except DTypeError as error:
            raise AttributeError(error.message) from None
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def element_type(value) -> ElementType:
    """The ElementType for an ElementType, its name or a NumPy dtype.

    Parameters
    ----------
    value : ElementType, str or numpy.dtype
        `core.f32`, "f32", `numpy.float32` or `numpy.dtype("float32")`.

    Returns
    -------
    ElementType
        The library's element type.

    Raises
    ------
    DTypeError
        `value` names no core element type (a complex or string dtype, say), or
        is bf16 without ml_dtypes.

    Examples
    --------
    >>> import numpy as np
    >>> from axgraph import core
    >>> core.element_type("f32") is core.f32, core.element_type(np.int64)
    (True, core.i64)
    """
    if isinstance(value, ElementType):
        return value
    if isinstance(value, str):
        if value == "bf16":
            return _bf16()
        if value in _BY_NAME:
            return _BY_NAME[value]
    try:
        dtype = np.dtype(value)
    except TypeError:
        raise DTypeError(f"{value!r} is not an element type; use core.f32, core.i64, ...") from None
    if dtype not in _BY_DTYPE and dtype.name == "bfloat16":
        _bf16()
    try:
        return _BY_DTYPE[dtype]
    except KeyError:
        raise DTypeError(f"NumPy dtype {dtype} has no core element type") from None


def element_types() -> Tuple[ElementType, ...]:
    """Every element type available here (bf16 only with ml_dtypes).

    Returns
    -------
    tuple of ElementType
        The floats, signed and unsigned integers and boolean, bf16 last when
        present.
    """
    has_bf16()
    return tuple(_BY_NAME.values())


# -- shapes ---------------------------------------------------------------------------

def as_dim(value, what: str = "dim") -> DimLike:
    """A dim from an int (np.integer too), a Dim, or an expression string ("2*N + 1")."""
    if isinstance(value, str):
        value = parse(value)
    if isinstance(value, Dim):
        return value
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise AxgraphTypeError(f"{what} must be an int or a Dim expression, not {value!r}", user_location())
    value = int(value.__index__())
    if value < 0:
        raise AxgraphValueError(f"{what} must be non-negative, not {value}", user_location())
    return value


class Shape(tuple):
    """The dims of a tensor, outermost first (row-major): ints and Dim expressions.

    Equality is tuple equality, so dims compare symbolically: `N == N` and
    `2*N != N`. A Shape is immutable; slicing one gives a Shape. It is built by
    `__new__` (a tuple), whose docstring lists the parameters.

    Examples
    --------
    >>> from axgraph import core
    >>> N = core.Dim("N")
    >>> shape = core.Shape(N, "2*N + 1")
    >>> shape, shape.size, shape.evaluate({"N": 3})
    (Shape([N, 2*N + 1]), Dim('N + 2*N*N'), (3, 7))
    """

    def __new__(cls, *dims):
        """A Shape of `dims`.

        Parameters
        ----------
        *dims : int, Dim or str, or one sequence of them
            The dims: ints >= 0 (NumPy integers too), `Dim` expressions, or their
            text ("2*N + 1"). `Shape(32, 32)`, `Shape((32, 32))` and
            `Shape(["N", 3])` are alike.

        Raises
        ------
        AxgraphTypeError
            A dim is not an int, a Dim or a string.
        AxgraphValueError
            A dim is negative, or a string is not a dim expression.
        """
        if len(dims) == 1 and not isinstance(dims[0], (str, Dim)) and hasattr(dims[0], "__iter__"):
            dims = tuple(dims[0])
        return super().__new__(cls, (as_dim(d, f"dim {i}") for i, d in enumerate(dims)))

    @property
    def rank(self) -> int:
        """The number of dims."""
        return len(self)

    @property
    def size(self) -> DimLike:
        """Number of elements: the product of the dims (an int or a Dim)."""
        total: DimLike = 1
        for d in self:
            total = total * d
        return total

    @property
    def is_static(self) -> bool:
        """Whether every dim is an int."""
        return not any(isinstance(d, Dim) for d in self)

    @property
    def free_symbols(self) -> FrozenSet[str]:
        """Size variables used by any dim."""
        return frozenset().union(*(d.free_symbols for d in self if isinstance(d, Dim)))

    def subs(self, bindings: Mapping[str, DimLike]) -> "Shape":
        """This shape with the bound size variables replaced.

        Parameters
        ----------
        bindings : mapping of str to int or Dim
            Values (or other expressions) for some size variables, by name.

        Returns
        -------
        Shape
            The dims with those variables replaced; others stay symbolic.
        """
        return Shape(d.subs(bindings) if isinstance(d, Dim) else d for d in self)

    def evaluate(self, bindings: Mapping[str, DimLike]) -> Tuple[int, ...]:
        """The concrete dims under `bindings`.

        Parameters
        ----------
        bindings : mapping of str to int
            A value for every size variable of the shape, by name.

        Returns
        -------
        tuple of int
            The dims.

        Raises
        ------
        ShapeError
            A size variable is not bound; the message names it.
        """
        return tuple(d.evaluate(bindings) if isinstance(d, Dim) else d for d in self)

    def __add__(self, other) -> "Shape":
        return Shape(tuple(self) + tuple(Shape(other)))

    def __getitem__(self, item):
        result = super().__getitem__(item)
        return Shape(result) if isinstance(item, slice) else result

    def __str__(self) -> str:
        return "[" + ", ".join(str(d) for d in self) + "]"

    def __repr__(self) -> str:
        return f"Shape({str(self)})"


ShapeLike = Union[Shape, Iterable]
