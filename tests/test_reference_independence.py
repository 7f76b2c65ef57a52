"""The NumPy reference transformer computes every op from its own code.

Every other transformer is compared with the reference, so the reference must not share
what it checks: if it read the core ops' traits (their `numpy` functions) or the
lowering's tables, a wrong mapping there would give the same wrong values on both sides
of every differential test. Its modules import nothing from the lowering or the core op
declarations, and compute each elementwise op from a NumPy expression of their own
(`reference_kernels.ELEMENTWISE`), which here still works with every core op's `numpy`
trait broken.
"""
from __future__ import annotations

import ast
import importlib
import inspect
from typing import List, Set

import numpy as np
import pytest

import axgraph as ng
from axgraph.core.ops import elementwise as core_elementwise
from axgraph.op_graph import elementwise as ew
from axgraph.transformers import reference_kernels

#: The modules of the reference transformer.
REFERENCE = ("axgraph.transformers.reference_kernels", "axgraph.transformers.reference_nn_kernels",
             "axgraph.transformers.nptransform")
#: What the reference may not import: the lowering, and the core ops with their traits.
FORBIDDEN = ("axgraph.lowering", "axgraph.core")
#: Shared on purpose: the text a print op writes is the same on every backend.
ALLOWED = ("axgraph.core.host",)
#: Attributes through which an axes op leads to the declarations the reference checks.
FORBIDDEN_ATTRIBUTES = {"core_op", "ng"}


def imports_of(module_name: str) -> Set[str]:
    """Every module (and module.name) the source of `module_name` imports, made absolute."""
    module = importlib.import_module(module_name)
    package = module_name.rsplit(".", 1)[0]
    found: Set[str] = set()
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) \
                if node.level else node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def forbidden_imports(module_name: str) -> List[str]:
    return sorted(name for name in imports_of(module_name)
                  if name.startswith(FORBIDDEN) and not name.startswith(ALLOWED))


def test_the_import_reader_resolves_relative_imports():
    found = imports_of("axgraph.lowering.rules")  # which does import the core
    assert "axgraph.core" in found and "axgraph.op_graph.elementwise" in found
    assert forbidden_imports("axgraph.lowering.rules")


@pytest.mark.parametrize("module_name", REFERENCE)
def test_the_reference_imports_neither_the_lowering_nor_the_core_ops(module_name):
    assert forbidden_imports(module_name) == []


@pytest.mark.parametrize("module_name", REFERENCE)
def test_the_reference_reads_no_declaration_of_the_ops_it_checks(module_name):
    source = inspect.getsource(importlib.import_module(module_name))
    read = {node.attr for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Attribute)}
    assert read & FORBIDDEN_ATTRIBUTES == set()


def _broken(*args, **kwargs):
    raise AssertionError("the reference called a core op's numpy trait")


def _build(op_class, x, y, mask):
    if op_class is ew.Where:
        return ng.where(mask, x, y)
    if issubclass(op_class, ew.UnaryElementWiseOp):
        return op_class(x)
    return op_class(x, y)


@pytest.mark.parametrize("op_class", ew.OPS, ids=lambda op: op.__name__)
def test_every_elementwise_op_computes_with_the_core_traits_broken(op_class, monkeypatch):
    A = ng.make_axis(5, name="A")
    x, y = ng.placeholder([A], dtype=np.float64), ng.placeholder([A], dtype=np.float64)
    mask = ng.placeholder([A], dtype=np.bool_)
    feeds = (np.array([0.25, 0.5, 0.75, 1.5, 0.1]), np.array([1.25, 0.5, 0.3, 2.0, 0.9]),
             np.array([True, False, True, True, False]))
    result = _build(op_class, x, y, mask)
    with ng.make_transformer("interpreter") as transformer:  # the core ops' own traits
        expected = transformer.computation(result, x, y, mask)(*feeds)
    for core_op in core_elementwise.OPS:
        monkeypatch.setattr(core_op, "numpy", staticmethod(_broken))
    with ng.make_transformer("numpy") as transformer:
        got = transformer.computation(result, x, y, mask)(*feeds)
    np.testing.assert_allclose(got, expected, rtol=1e-15, atol=0)


def test_a_new_op_needs_a_reference_entry_of_its_own():
    class Halve(core_elementwise.UnaryElementwise):
        """x / 2 at every element."""

        accepts = "float"
        numpy = staticmethod(lambda x, out=None: np.multiply(x, 0.5, out=out))
        c = "({0} * 0.5)"
        ng = core_elementwise.NgFunction("halve", ew.FLOAT, "x / 2 at every element of x.")

    op_class = ew.axes_op(Halve)
    assert reference_kernels.KERNELS.missing([op_class]) == [op_class]
