"""Op docstrings are composed from the op's own text and its family's (axgraph/core/op_docs.py).

Each core op class states its formula; the Parameters, Returns and Raises entries it
leaves out come from its family's docstring, so every op must end up listing its own
constructor's parameters, in order, with the element types its `accepts` trait admits.
"""
from __future__ import annotations

import inspect
import re
from typing import Dict, List, Optional

import pytest

from axgraph import core
from axgraph.core.ops import nn

# The words each `accepts` kind must put in an op's docstring, written out here again.
ACCEPTED_WORDS = {"float": "floating-point", "numeric": "numeric (not boolean)",
                  "bool": "boolean", "any": "any"}


def section(doc: str, title: str) -> List[str]:
    """The lines under `title` and its underline, up to the next section."""
    lines = inspect.cleandoc(doc).splitlines()
    found: Optional[List[str]] = None
    for i, line in enumerate(lines):
        is_title = i + 1 < len(lines) and re.fullmatch(r"-{3,}", lines[i + 1].strip() or "x")
        if is_title and found is not None:
            break
        if is_title and line.strip() == title:
            found = []
        elif found is not None and not re.fullmatch(r"-{3,}", line.strip() or "x"):
            found.append(line)
    return found or []


def entries(doc: str, title: str) -> Dict[str, str]:
    """Entry name -> its text (a head ``a, b : Node`` gives two names the same text)."""
    result: Dict[str, str] = {}
    names: List[str] = []
    for line in section(doc, title):
        if line.strip() and not line[:1].isspace():
            names = [n.strip().lstrip("*") for n in line.split(" : ")[0].split(",")]
            for name in names:
                result[name] = line
        else:
            for name in names:
                result[name] += "\n" + line
    return result


def constructor(op: type) -> List[str]:
    return [p for p in inspect.signature(op).parameters]


@pytest.mark.parametrize("op", core.CORE_OPS, ids=lambda op: op.__name__)
def test_each_op_lists_its_own_parameters_in_order_and_what_it_returns(op):
    doc = op.__dict__["__doc__"]
    assert list(entries(doc, "Parameters")) == constructor(op)
    (returned, *description) = [line for line in section(doc, "Returns") if line.strip()]
    assert returned.strip() == op.__name__ and description
    assert "GraphError" in entries(doc, "Raises")
    assert not re.search(r"\{(op|accepts)\}", doc), "a family field left unfilled"


@pytest.mark.parametrize("op", [op for op in core.CORE_OPS if hasattr(op, "accepts")],
                         ids=lambda op: op.__name__)
def test_the_accepted_element_types_come_from_the_accepts_trait(op):
    words = ACCEPTED_WORDS[op.accepts]
    first_operand = constructor(op)[0]
    assert words in entries(op.__doc__, "Parameters")[first_operand]
    if op.accepts != "any":
        assert words in entries(op.__doc__, "Raises")["DTypeError"]


def test_each_op_keeps_its_own_summary_and_attributes_specific_to_it():
    assert core.Sqrt.__doc__.startswith("The square root of x")
    assert core.Exp.__doc__.startswith("e ** x")
    assert "ExecutionError" in entries(core.Divide.__doc__, "Raises")
    assert "ExecutionError" not in entries(core.Add.__doc__, "Raises")
    slice_parameters = entries(core.Slice.__doc__, "Parameters")
    assert {"lower", "upper", "strides"} <= set(slice_parameters)
    assert "ceil((upper[i] - lower[i]) / strides[i])" in core.Slice.__doc__
    assert "A boolean node" in "".join(section(core.Less.__doc__, "Returns"))


def test_shared_entries_come_from_the_fragment_unless_the_family_says_otherwise():
    convolution = entries(core.Convolution.__doc__, "Parameters")
    assert "The zeros added" in convolution["padding_below"]
    assert "dilation" in convolution
    pool = entries(core.MaxPool.__doc__, "Parameters")
    assert "smaller than the window" in pool["padding_below"]   # _Pool's, nearer than the fragment
    assert "dilation" not in pool
    assert nn._WINDOW_DOC.count("strides : ") == 1            # stated once for eight ops
    assert entries(core.Parameter.__doc__, "Raises")["GraphError"].count("input") == 0


def test_a_new_op_of_a_family_gets_the_family_sections_for_its_own_types():
    class Softplus(core.UnaryElementwise):
        """log(1 + exp(x)) at every element."""

        accepts = "float"

    doc = Softplus.__doc__
    assert doc.startswith("log(1 + exp(x)) at every element.")
    assert list(entries(doc, "Parameters")) == ["x", "name"]
    assert "floating-point" in entries(doc, "Parameters")["x"]
    assert [line.strip() for line in section(doc, "Returns")][0] == "Softplus"
    assert set(entries(doc, "Raises")) == {"DTypeError", "GraphError"}


def test_an_entry_an_op_states_replaces_the_inherited_one_of_that_name():
    class Halve(core.UnaryElementwise):
        """x / 2 at every element.

        Parameters
        ----------
        x : Node
            Integers are halved truncating toward zero.

        Raises
        ------
        DTypeError
            x is boolean (said by this op itself).
        """

    parameters, raises = entries(Halve.__doc__, "Parameters"), entries(Halve.__doc__, "Raises")
    assert "truncating toward zero" in parameters["x"] and "name" in parameters
    assert "said by this op itself" in raises["DTypeError"]
    assert Halve.__doc__.count("DTypeError") == 1
    assert "GraphError" in raises                                  # Node's, still inherited


def test_a_class_with_an_undocumented_parameter_keeps_its_docstring_as_written():
    class Scaled(core.Node):
        """x times factor."""

        def __init__(self, x, factor, name=None):
            super().__init__((x,), {}, name)

        def _infer(self):
            return self.inputs[0].element_type, self.inputs[0].shape

    assert Scaled.__doc__ == "x times factor."
    x = core.Parameter(core.f32, (2,))
    assert Scaled(x, 3).shape == core.Shape(2)
