"""The abstract syntax of Axon programs: expressions, patterns, declarations and types.

Every node records its span. Nodes compare by identity (`eq=False`): inference keys
facts by node, and two equal-looking sub-expressions at different places are different.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple, Union

from .source import Span

# -- dims and types, as written in annotations -------------------------------------------------


@dataclass(eq=False)
class DimName:
    """A size named in an annotation (`k`); `#k` marks it as one that may be 1 and then
    broadcasts."""

    name: str
    span: Span
    marked: bool = False


@dataclass(eq=False)
class DimInt:
    """A literal size (`784`)."""

    value: int
    span: Span


@dataclass(eq=False)
class DimWild:
    """`_`: a size to be inferred, different from every other."""

    span: Span


@dataclass(eq=False)
class DimBinary:
    """`a + b`, `a - b` or `a * b` over sizes."""

    op: str
    left: "DimExpr"
    right: "DimExpr"
    span: Span


DimExpr = Union[DimName, DimInt, DimWild, DimBinary]


@dataclass(eq=False)
class ShapeSplat:
    """`*b`: a shape variable spliced into a shape (any number of dims)."""

    name: str
    span: Span


ShapeItem = Union[DimExpr, ShapeSplat]


@dataclass(eq=False)
class TensorTypeExpr:
    """`f32[d, ...]`, or `'t[d, ...]` with an element-type variable."""

    dtype: str
    shape: Tuple[ShapeItem, ...]
    span: Span


@dataclass(eq=False)
class TypeVarExpr:
    """`'a`: any type."""

    name: str
    span: Span


@dataclass(eq=False)
class FunctionTypeExpr:
    """`t1 -> t2`."""

    arg: "TypeExpr"
    result: "TypeExpr"
    span: Span


@dataclass(eq=False)
class TupleTypeExpr:
    """`t1 * t2 * ...`."""

    items: Tuple["TypeExpr", ...]
    span: Span


@dataclass(eq=False)
class ForallTypeExpr:
    """`forall n m. t`: the sizes named are rigid in the declaration (never made a
    particular size), `t` the type."""

    names: Tuple[DimName, ...]
    body: "TypeExpr"
    span: Span


TypeExpr = Union[TensorTypeExpr, TypeVarExpr, FunctionTypeExpr, TupleTypeExpr, ForallTypeExpr]

# -- patterns -------------------------------------------------------------------------------------


@dataclass(eq=False)
class PVar:
    """A name bound by a pattern."""

    name: str
    span: Span


@dataclass(eq=False)
class PWild:
    """`_`: matches anything, binds nothing."""

    span: Span


@dataclass(eq=False)
class PTuple:
    """`(p1, p2, ...)`."""

    items: Tuple["Pattern", ...]
    span: Span


@dataclass(eq=False)
class PAnnot:
    """`(p : t)`."""

    pattern: "Pattern"
    type: TypeExpr
    span: Span


Pattern = Union[PVar, PWild, PTuple, PAnnot]

# -- expressions ---------------------------------------------------------------------------------


@dataclass(eq=False)
class Var:
    """A name: a binding, a builtin, or an input given to `infer`/`compile`."""

    name: str
    span: Span


@dataclass(eq=False)
class Num:
    """A number: a scalar of any element type (`2.0`, `1`)."""

    value: Union[int, float]
    span: Span


@dataclass(eq=False)
class ShapeLiteral:
    """`[d, ...]`: a shape given to a builtin (`reshape [n, 28, 28] x`)."""

    shape: Tuple[ShapeItem, ...]
    span: Span


@dataclass(eq=False)
class App:
    """`f x`: application."""

    function: "Expr"
    arg: "Expr"
    span: Span


@dataclass(eq=False)
class BinOp:
    """`a op b` for the infix operators + - * / @."""

    op: str
    left: "Expr"
    right: "Expr"
    span: Span
    op_span: Span


@dataclass(eq=False)
class Neg:
    """`~x` (or `-x` where an operand starts): negation."""

    operand: "Expr"
    span: Span


@dataclass(eq=False)
class Lambda:
    """`fn p1 p2 ... => body`."""

    params: Tuple[Pattern, ...]
    body: "Expr"
    span: Span


@dataclass(eq=False)
class Let:
    """`let decls in body end`."""

    decls: Tuple["Decl", ...]
    body: "Expr"
    span: Span


@dataclass(eq=False)
class TupleExpr:
    """`(e1, e2, ...)`."""

    items: Tuple["Expr", ...]
    span: Span


@dataclass(eq=False)
class Annot:
    """`e : t`."""

    expr: "Expr"
    type: TypeExpr
    span: Span


Expr = Union[Var, Num, ShapeLiteral, App, BinOp, Neg, Lambda, Let, TupleExpr, Annot]

# -- declarations ----------------------------------------------------------------------------------


@dataclass(eq=False)
class ValDecl:
    """`val p = e`."""

    pattern: Pattern
    expr: Expr
    span: Span


@dataclass(eq=False)
class FunDecl:
    """`fun f p1 p2 ... [: t] = e`: a named function (not recursive)."""

    name: str
    name_span: Span
    params: Tuple[Pattern, ...]
    result_type: Optional[TypeExpr]
    body: Expr
    span: Span


Decl = Union[ValDecl, FunDecl]


@dataclass(eq=False)
class Program:
    """A whole program: declarations in order."""

    decls: Tuple[Decl, ...]


def pattern_names(pattern: Pattern):
    """The (name, span) pairs a pattern binds, left to right."""
    if isinstance(pattern, PVar):
        yield pattern.name, pattern.span
    elif isinstance(pattern, PTuple):
        for item in pattern.items:
            yield from pattern_names(item)
    elif isinstance(pattern, PAnnot):
        yield from pattern_names(pattern.pattern)


def is_value(expr: Expr) -> bool:
    """Whether `expr` is a syntactic value (Standard ML's value restriction).

    Only values are generalized: a function, a name, a number, or a tuple or annotation
    of values. An application (or `input`, which reads data) is not: its type stays
    one type, so `val h = dense x w` has one shape, not a family of them.
    """
    if isinstance(expr, (Lambda, Num)):
        return True
    if isinstance(expr, Var):
        return expr.name not in ("input", "param")
    if isinstance(expr, TupleExpr):
        return all(is_value(item) for item in expr.items)
    if isinstance(expr, Annot):
        return is_value(expr.expr)
    return False
