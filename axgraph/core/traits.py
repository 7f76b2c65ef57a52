"""Traits: the facts about a core op that backends and passes derive their tables from.

Each core op class states its traits once, as class attributes (inherited by
subclasses); nothing else names the op to say the same thing again. Which ops
fuse, which are commutative, the interpreter's elementwise kernels, the ufunc
the generated Python calls, the expression a fused C kernel computes, and
whether a kernel may write over an input are all read from here, so a new
elementwise op declared with its traits runs on every backend
(docs/architecture.md, "Adding an op").
"""
from __future__ import annotations

import functools
import inspect
import types
from typing import Any, Callable, ClassVar, Dict, FrozenSet, Optional, Tuple, Union

import numpy as np

#: The families of elementwise ops: each output element depends only on the inputs'
#: elements at the same position (fused by the cpu backend, folded on uniform constants).
ELEMENTWISE_FAMILIES: FrozenSet[str] = frozenset(
    {"unary", "binary", "compare", "logical", "select", "convert"})

#: A C trait: a format string over the operands or a function of a `CTerms`-like object
#: (axgraph/transformers/cpu/kernel_c.py) returning the C expression.
CCode = Union[str, Callable[..., str]]


class Traits:
    """The trait attributes of every core op, with their defaults (a mixin of Node).

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
    in_place: a kernel may write the output over an input of the same shape,
        type and layout that dies at this op (each element is read before it
        is written, or the result is computed aside first).
    """

    family: ClassVar[Optional[str]] = None
    commutative: ClassVar[bool] = False
    numpy: ClassVar[Optional[Callable[..., Any]]] = None
    c: ClassVar[Optional[CCode]] = None
    c_quotient: ClassVar[Optional[Callable[..., Tuple[str, str]]]] = None
    in_place: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # A plain function stored on a class would become a method of its nodes.
        for name in ("numpy", "c", "c_quotient"):
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


__all__ = ["CCode", "ELEMENTWISE_FAMILIES", "Traits", "c_code", "c_quotient", "is_elementwise",
           "name_in", "numpy_function", "takes_out", "ufunc_name"]
