"""Types as Axon writes them: `f32[*b, k] -> f32[k, n] -> f32[*b, n]`.

Variables made by the inference get readable names when printed: a size or shape
variable takes the name the user wrote for it (its hint) unless that name is taken in
what is printed, in which case a digit is added (`n`, `n2`); type variables print as
`'a`, `'b`, ...; element-type variables as `'t`, `'u`, ...
"""
from __future__ import annotations

from typing import Dict, Iterable, Mapping, Set

from ...dims import Dim, DimLike, free_symbols, subs
from .types import (DTypeVar, FunctionType, ShapeVar, Shape, TensorType, TupleType, Type,
                    TypeVar, is_internal, type_vars)

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


class Namer:
    """Display names for the variables of some terms, consistent across calls.

    Parameters
    ----------
    hints : mapping of str to str
        The hint of each internal size variable (`Fresh.hints`).
    terms : iterable of Type
        Everything that will be printed with this namer: the user's own size names in
        them are reserved, so no variable is shown under a name already in use.
    """

    def __init__(self, hints: Mapping[str, str], terms: Iterable[Type] = ()):
        self.hints = hints
        self.taken: Set[str] = set()
        for term in terms:
            self.reserve(term)
        self.names: Dict[object, str] = {}
        self.type_count = 0
        self.dtype_count = 0

    def reserve(self, term: Type) -> None:
        """Keep the user's size names in `term` from being given to other variables."""
        for var in type_vars(term):
            if isinstance(var, str) and not is_internal(var):
                self.taken.add(var)

    def _unique(self, hint: str) -> str:
        name, number = hint, 2
        while name in self.taken:
            name, number = f"{hint}{number}", number + 1
        self.taken.add(name)
        return name

    def size(self, name: str) -> str:
        """The display name of size variable `name`."""
        if not is_internal(name):
            return name
        if name not in self.names:
            self.names[name] = self._unique(self.hints.get(name, "d"))
        return self.names[name]

    def shape_var(self, var: ShapeVar) -> str:
        """`*b`, the display of a shape variable."""
        if var not in self.names:
            self.names[var] = self._unique(var.hint)
        return "*" + self.names[var]

    def type_var(self, var: TypeVar) -> str:
        """`'a`, the display of a type variable."""
        if var not in self.names:
            self.names[var] = "'" + _letters(self.type_count)
            self.type_count += 1
        return self.names[var]

    def dtype_var(self, var: DTypeVar) -> str:
        """`'t`, the display of an element-type variable."""
        if var not in self.names:
            self.names[var] = "'" + _letters(self.dtype_count + 19)  # 't, 'u, ...
            self.dtype_count += 1
        return self.names[var]

    def dim(self, dim: DimLike) -> DimLike:
        """`dim` with internal size variables renamed to their display names."""
        renamed = {name: Dim(self.size(name)) for name in sorted(free_symbols(dim))
                   if is_internal(name)}
        return subs(dim, renamed) if renamed else dim


def _letters(index: int) -> str:
    letter = _LETTERS[index % 26]
    return letter if index < 26 else f"{letter}{index // 26}"


def format_dim(dim: DimLike, namer: Namer) -> str:
    """A dim as text, with display names."""
    return str(namer.dim(dim))


def format_shape(shape: Shape, namer: Namer) -> str:
    """`[*b, k]`."""
    items = [namer.shape_var(e) if isinstance(e, ShapeVar) else format_dim(e, namer) for e in shape]
    return "[" + ", ".join(items) + "]"


def format_type(t: Type, namer: Namer) -> str:
    """A type as Axon writes it; `->` associates to the right and `*` binds tighter."""
    if isinstance(t, TypeVar):
        return namer.type_var(t)
    if isinstance(t, TensorType):
        dtype = namer.dtype_var(t.dtype) if isinstance(t.dtype, DTypeVar) else t.dtype
        return dtype + format_shape(t.shape, namer)
    if isinstance(t, FunctionType):
        arg = format_type(t.arg, namer)
        if isinstance(t.arg, FunctionType):
            arg = f"({arg})"
        return f"{arg} -> {format_type(t.result, namer)}"
    if isinstance(t, TupleType):
        parts = []
        for item in t.items:
            text = format_type(item, namer)
            parts.append(f"({text})" if isinstance(item, (FunctionType, TupleType)) else text)
        return " * ".join(parts)
    raise TypeError(f"not a type: {t!r}")
