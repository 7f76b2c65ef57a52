"""The docstring of an elementwise function made from its op's declaration (`NgFunction`).

The declaration states what is the function's own: its summary, a sentence on
its meaning, and any further section (Examples). Its Parameters, Returns and
Raises sections follow from the op's arity and element rule, in the words every
elementwise function of `ng` uses, so `ng.exp` and `ng.add` are documented in
full with nothing restated per op.
"""
from __future__ import annotations

import inspect
import re
import textwrap
from typing import List, Tuple

import numpy as np

from ..core.traits import NgFunction
from ..dtypes import LOGICAL, ElementRule

_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")
_WIDTH = 88


def _split(doc: str) -> Tuple[str, str]:
    """(summary and description, the sections after them) of a cleaned docstring."""
    lines = doc.splitlines()
    for i in range(len(lines) - 1):
        if lines[i].strip() and _UNDERLINE.match(lines[i + 1]):
            return "\n".join(lines[:i]).rstrip(), "\n".join(lines[i:])
    return doc, ""


def _entry(head: str, text: str) -> str:
    """A Parameters/Returns/Raises entry: its head, then `text` wrapped and indented."""
    return head + "\n" + textwrap.fill(text, _WIDTH, initial_indent="    ",
                                       subsequent_indent="    ")


def _section(title: str, entries: List[str]) -> str:
    return f"{title}\n{'-' * len(title)}\n" + "\n".join(entries)


def _dtype_parameter(rule: ElementRule, unary: bool) -> str:
    common = "x's type" if unary else "the operands' common type"
    if rule.result == "float":
        text = (f"The float type to compute in and return; None: {common} if it is a float, "
                f"else float32.")
    else:
        text = f"The type to compute in and return, as NumPy's ``dtype=`` (None: {common})."
    return _entry("dtype : dtype-like, optional", text)


def _dtype_error(rule: ElementRule, unary: bool) -> str:
    if rule.result == "float":
        text = "If `dtype` is not a float type."
    elif rule.booleans is None:
        holds = "x holds booleans" if unary else "the operands are booleans"
        text = (f"If {holds} and no `dtype` is given (NumPy refuses them too), if `dtype` is "
                f"bool, or if it is not a supported element type.")
    elif rule.booleans != LOGICAL:
        text = (f"If `dtype` is bool (booleans are computed as {np.dtype(rule.booleans)}, as "
                f"NumPy does) or not a supported element type.")
    else:
        text = "If `dtype` is not a supported element type."
    return _entry("DTypeError", text)


def compose(ng: NgFunction, arity: int) -> str:
    """The docstring of the function `ng` declares, for an op of `arity` operands (1 or 2).

    A comparison (the rule's result is boolean) takes no `dtype` and raises no DTypeError.
    """
    unary, compares = arity == 1, ng.rule.result == "bool"
    head, rest = _split(inspect.cleandoc(ng.doc or ""))
    if unary:
        parameters = [_entry("x : Op or number", "The operand.")]
        returned = "The result, with x's axes."
        not_an_op = "If `x` is not an op or a number"
    else:
        parameters = [_entry("x, y : Op or number", "The operands; a Python number takes the "
                             "other's element type (if of no higher kind).")]
        returned = ("A boolean tensor with" if compares else "The result, with") + \
            " x's axes, then y's axes that x lacks."
        not_an_op = "If an operand is not an op or a number"
    parameters.append(_entry("name : str, optional", "A name for the result (automatic if None)."))
    raises = [_entry("AxgraphTypeError", f"{not_an_op} (an array needs ng.constant and axes).")]
    if not compares:
        parameters.append(_dtype_parameter(ng.rule, unary))
        raises.append(_dtype_error(ng.rule, unary))
    if not unary:
        raises.append(_entry("IncompatibleAxesError", (
            "If x and y hold different axes with the same name (the result would be an outer "
            "product), or an axis made up for an array could pair with several axes of the "
            "other operand.")))
    parts = [head, _section("Parameters", parameters),
             _section("Returns", [_entry("Op", returned)]), _section("Raises", raises)]
    return "\n\n".join(parts + ([rest] if rest else [])) + "\n"


__all__ = ["compose"]
