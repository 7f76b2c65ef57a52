"""Traits: the facts about a core op that backends and passes derive their tables from.

Each core op class states its traits once, as class attributes (inherited by
subclasses); nothing else names the op to say the same thing again. Which ops
fuse, which are commutative, the interpreter's elementwise kernels, the ufunc
the generated Python calls, the expression a fused C kernel computes, and
whether a kernel may write over an input are all read from here, so a new
elementwise op declared with its traits runs on every backend
(docs/architecture.md, "Adding an op"). Its `ng` trait says how the axes graph
offers it (the function `ng.exp`, NumPy's typing of it, what the tests may
assume of its values), and the axes op, its lowering and the function are
derived from that (axgraph/op_graph/elementwise.py). Reductions declare how they combine
elements (`ReductionTraits`) and data-movement ops what they move
(`MovementTraits`): the interpreter's, the cpu backend's and the fused
kernels' reductions, the views of the cpu schedule and what algebraic
simplification, layout sinking and fusion may do with these ops follow.
"""
from __future__ import annotations

import collections.abc
import functools
import inspect
import types
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Dict, FrozenSet, Optional, Tuple, Union

import numpy as np

from ..dtypes import SAME, ElementRule
from ..errors import AxgraphValueError

#: The families of elementwise ops: each output element depends only on the inputs'
#: elements at the same position (fused by the cpu backend, folded on uniform constants).
ELEMENTWISE_FAMILIES: FrozenSet[str] = frozenset(
    {"unary", "binary", "compare", "logical", "select", "convert"})

#: A C trait: a format string over the operands or a function of a `CTerms`-like object
#: (axgraph/transformers/cpu/kernel_c.py) returning the C expression.
CCode = Union[str, Callable[..., str]]

#: The values of `NgFunction`'s test-facing facts.
SMOOTHNESS = ("smooth", "kinked", "step", "blocked")
DOMAINS = ("real", "positive", "unit")
ROUNDINGS = ("exact", "correct", "approximate")


@dataclass(frozen=True)
class NgFunction:
    """How the axes graph offers an elementwise op: the function `ng.<name>` building it.

    A core op declares one as its `ng` trait; `axgraph.op_graph.elementwise` then makes
    from it the axes op (a class named after the core op, lowered to it over its args
    converted to the operand type and aligned by axes) and the function, with a
    NumPy-style docstring whose Parameters, Returns and Raises sections follow from the
    op's arity and `rule`. An axes op that is a composition of core ops (square, relu)
    declares one on its own class instead.

    Parameters
    ----------
    name : str
        The function's name: "exp" makes `ng.exp`.
    rule : ElementRule, optional
        NumPy's typing of the op (`axgraph.dtypes`: SAME, FLOAT, NO_BOOLEANS,
        BOOLEANS_AS_INT8, COMPARISON).
    doc : str, optional
        The function's summary line and description, and any further sections
        (Examples). None: the function is written by hand beside its op (safelog
        takes a limit).
    op_name : str, optional
        The axes op class's name; None: the core op's (`core.Abs` gives "Absolute").
    logical : type, optional
        The core op computing it on booleans, which the core op does not take
        (NumPy's add of booleans is `core.Or`).
    identity_for : str, optional
        The NumPy dtype kinds ("b", "biu") on which the op gives its operand back
        (abs of booleans, floor of integers), with no core op.
    smoothness : str, optional
        "smooth"; "kinked" (continuous, with corners: abs, maximum); "step"
        (piecewise constant: sign, comparisons); "blocked" (deriv passes no gradient
        through it: stop_gradient).
    domain : str, optional
        Where the op is smooth and finite, so tests and the fuzzer draw its operand
        there: "real", "positive" (x > 0) or "unit" (-1 < x < 1).
    rounding : str, optional
        "exact" (no rounding on small multiples of 1/2: add, abs, maximum); "correct"
        (correctly rounded IEEE operations, the same bits on every engine: sqrt,
        divide); "approximate" (libm or the kernels' own math, a few ulps apart).

    Raises
    ------
    AxgraphValueError
        If `smoothness`, `domain` or `rounding` is not one of the values above.
    """

    name: str
    rule: ElementRule = SAME
    doc: Optional[str] = None
    op_name: Optional[str] = None
    logical: Optional[type] = None
    identity_for: str = ""
    smoothness: str = "smooth"
    domain: str = "real"
    rounding: str = "approximate"

    def __post_init__(self):
        for field, allowed in (("smoothness", SMOOTHNESS), ("domain", DOMAINS),
                               ("rounding", ROUNDINGS)):
            if getattr(self, field) not in allowed:
                raise AxgraphValueError(f"NgFunction {self.name!r}: {field} "
                                        f"{getattr(self, field)!r} is not one of {allowed}")


class ReductionTraits:
    """The traits of a reduction (a `core.Reduction`), with their defaults.

    reduce_ufunc: the binary NumPy ufunc whose `reduce` the reduction is
        (`np.add` for Sum): the interpreter, the cpu backend's generated code
        and its blocked-NumPy kernels call it, and its `identity` is the value
        over an empty dim (None: there is none, and reducing an empty dim is an
        error, as for Max). A reduction that declares one fuses with the
        elementwise ops before it. None: not a reduction backends know.
    c_accumulate: the C expression of the accumulator after it takes in one more
        value, over `{acc}` and `{x}` (`"{acc} + {x}"`; `{x}` may be read twice,
        it is a plain variable). Fused C kernels fold each element in with it
        and combine partial results with it. None: groups ending in this
        reduction use the blocked-NumPy engine.
    c_start: the C expression of the accumulator before any value (`"0"`;
        `"-INFINITY"` for Max: the C engine reduces floats only).
    wide_accumulator: the fused kernels accumulate float values in double,
        because rounding errors add up over many values (sums, products); an extremum
        is exact in the values' own type.
    order_free: the result does not depend on the order in which the elements
        are combined (up to rounding), so a reduction of a Transpose may reduce
        the Transpose's input over the mapped axes instead (layout sinking).
    idempotent: combining a value with itself gives that value (max, min), so
        reducing only dims that a Broadcast added gives back the broadcast
        value (algebraic simplification).
    """

    reduce_ufunc: ClassVar[Optional[np.ufunc]] = None
    c_accumulate: ClassVar[Optional[str]] = None
    c_start: ClassVar[Optional[str]] = None
    wide_accumulator: ClassVar[bool] = False
    order_free: ClassVar[bool] = False
    idempotent: ClassVar[bool] = False


class MovementTraits:
    """The traits of the data-movement ops, with their defaults.

    movement: each element of the result is a copy of one element of the one
        input, at a position the attributes alone decide: no arithmetic
        (Broadcast, Reshape, Transpose, Slice, Reverse). So a uniform input gives
        a uniform result (algebraic simplification), fusion looks through it for
        the broadcast it moves, and a backend can give the result as a strided
        view of the input's memory instead of a copy (the cpu schedule: always,
        but for a Reshape of a layout that no strides can show).
    layout_change: every element of the input appears once in the result, in
        another shape or dim order (Transpose, Reshape): elementwise ops commute
        with it, so layout sinking moves it below them until it cancels another
        or an op that takes positions absorbs it.
    """

    movement: ClassVar[bool] = False
    layout_change: ClassVar[bool] = False


class Traits(ReductionTraits, MovementTraits):
    """The trait attributes of every core op, with their defaults (a mixin of Node): the
    elementwise ops' below, the reductions' and the movement ops' in the bases.

    family: None, or the elementwise family ("unary", "binary", "compare",
        "logical", "select", "convert"): ELEMENTWISE_FAMILIES.
    commutative: f(a, b) == f(b, a), so CSE merges `a + b` with `b + a`.
    numpy: the reference NumPy function of an elementwise op, taking the
        input arrays (of the node's input types) and returning the output
        (of the node's type): the interpreter runs it, constant folding
        folds with it. A ufunc is called by name (`np.exp(x, out=...)`) in
        generated code; another function is called with `out=` if it takes
        that keyword, else its result is copied into the output.
    c: the C expression of one output element in fused kernels, over the
        operands' C expressions: a format string, where `{0}`, `{1}`, `{2}`
        are the operands, `{one}`, `{zero}` and `{ctype}` the value type's
        literals and name, and any other name a libm function for the value
        type (`{exp}` is `expf` for f32, `exp` for f64); or a function of a
        `CTerms` object (`.args`, `.one`, `.zero`, `.ctype`, `.boolean`,
        `.math(name)`, `.let(expression)`, `.quotient(i)`) returning the
        expression. None:
        groups with this op use the blocked-NumPy engine.
    c_quotient: where an op's value is naturally a quotient with a bounded
        denominator (tanh's rational, sigmoid's 1 / (1 + e)), a function of a
        `CTerms` returning C expressions (numerator, denominator) with the
        denominator in [1, 2^16] and the numerator at most the denominator in
        magnitude: a product of two such values then divides once, without
        overflow (Multiply's C code does). None: no such form.
    numpy_denominator: where an op's value is 1 / d(x) for a d cheaper than the
        reference (sigmoid's 1 + exp(-x)), a NumPy function computing d into
        `out=` (`d(x, out=array)`, out may be x itself): the cpu backend computes
        the op as d then one division, and its blocked-NumPy kernels divide a
        product by d instead of multiplying by 1 / d (one pass fewer). None: no
        such form.
    in_place: a kernel may write the output over an input of the same shape,
        type and layout that dies at this op (each element is read before it
        is written, or the result is computed aside first).
    ng: None, or an elementwise op's `NgFunction`: the function of the axes graph
        that builds it (`ng.exp`), from which its axes op and lowering are made.
    """

    family: ClassVar[Optional[str]] = None
    commutative: ClassVar[bool] = False
    numpy: ClassVar[Optional[Callable[..., Any]]] = None
    c: ClassVar[Optional[CCode]] = None
    c_quotient: ClassVar[Optional[Callable[..., Tuple[str, str]]]] = None
    numpy_denominator: ClassVar[Optional[Callable[..., Any]]] = None
    in_place: ClassVar[bool] = False
    ng: ClassVar[Optional[NgFunction]] = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # A plain function stored on a class would become a method of its nodes.
        for name in ("numpy", "c", "c_quotient", "numpy_denominator"):
            value = cls.__dict__.get(name)
            if isinstance(value, types.FunctionType):
                setattr(cls, name, staticmethod(value))


def is_elementwise(op_class: type) -> bool:
    """Whether nodes of `op_class` are elementwise (by their declared family)."""
    return getattr(op_class, "family", None) in ELEMENTWISE_FAMILIES


def numpy_function(op_class: type) -> Optional[Callable[..., Any]]:
    """The reference NumPy function an elementwise op declares, else None."""
    return getattr(op_class, "numpy", None) if is_elementwise(op_class) else None


def c_code(op_class: type) -> Optional[CCode]:
    """The C expression an elementwise op declares, else None."""
    return getattr(op_class, "c", None) if is_elementwise(op_class) else None


def c_quotient(op_class: type) -> Optional[Callable[..., Tuple[str, str]]]:
    """The (numerator, denominator) C form an elementwise op declares, else None."""
    return getattr(op_class, "c_quotient", None) if is_elementwise(op_class) else None


def ufunc_name(op_class: type) -> Optional[str]:
    """The NumPy ufunc's name (`"exp"`) when an elementwise op's reference is a ufunc."""
    function = numpy_function(op_class)
    return function.__name__ if isinstance(function, np.ufunc) else None


def numpy_denominator(op_class: type) -> Optional[Callable[..., Any]]:
    """The denominator function an elementwise op declares (its value is 1 / d), else None."""
    return getattr(op_class, "numpy_denominator", None) if is_elementwise(op_class) else None


def reduction_ufunc(op_class: type) -> Optional[np.ufunc]:
    """The NumPy ufunc a reduction declares it reduces with (`np.add` for Sum), else None."""
    return getattr(op_class, "reduce_ufunc", None)


def reduction_identity(op_class: type) -> Any:
    """The value of a reduction over an empty dim (its ufunc's identity: 0 for a sum, 1 for
    a product), or None where there is none (a maximum) or the op declares no
    `reduce_ufunc`."""
    ufunc = reduction_ufunc(op_class)
    return None if ufunc is None else ufunc.identity


def ops_with(trait: str, op_classes: collections.abc.Iterable) -> Tuple[type, ...]:
    """The classes among `op_classes` whose `trait` is set (true, or not None), in order:
    what a pass matches (`ops_with("movement", core.CORE_OPS)`)."""
    return tuple(cls for cls in op_classes if getattr(cls, trait, None) not in (None, False))


@functools.lru_cache(maxsize=None)
def takes_out(function: Callable) -> bool:
    """Whether `function` writes its result into an `out=` array it is given."""
    if isinstance(function, np.ufunc):
        return True
    try:
        return "out" in inspect.signature(function).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False


def name_in(namespace: Dict[str, Any], function: Callable) -> str:
    """The name generated code calls a reference function by, put in its `namespace`
    (the function's own name, numbered if another function has it there)."""
    name = base = getattr(function, "__name__", "function")
    count = 0
    while namespace.get(name, function) is not function:
        count += 1
        name = f"{base}_{count}"
    namespace[name] = function
    return name


__all__ = ["CCode", "DOMAINS", "ELEMENTWISE_FAMILIES", "NgFunction", "ROUNDINGS", "SMOOTHNESS",
           "Traits", "c_code", "c_quotient", "is_elementwise", "name_in", "numpy_function",
           "takes_out", "ufunc_name"]
# the traits of reductions and of data movement (kept apart from the elementwise ones above)
__all__ += ["MovementTraits", "ReductionTraits", "numpy_denominator", "ops_with",
            "reduction_identity", "reduction_ufunc"]
