"""The ``Examples`` in the public docstrings run as written and print what they show.

The modules checked are those defining the names of ``axgraph.__all__``, found from the
names themselves, so a module that comes to define a public name is checked too. Every
``>>>`` line in those modules runs under doctest; ``...`` in an expected output stands for
text that varies (a file:line, the tail of a long error message).
"""
from __future__ import annotations

import doctest
import importlib
import inspect

import pytest

import axgraph as ng
from axgraph import transformers


def defining_modules():
    """The modules whose classes and functions `axgraph.__all__` re-exports, sorted."""
    return sorted({getattr(ng, name).__module__ for name in ng.__all__
                   if inspect.isclass(getattr(ng, name)) or inspect.isfunction(getattr(ng, name))})


@pytest.fixture
def numpy_by_default():
    """`ng.make_transformer()` in the examples is the NumPy reference, whatever ran before."""
    previous = transformers.get_transformer_factory()
    transformers.set_transformer_factory(transformers.make_transformer_factory("numpy"))
    yield
    transformers.set_transformer_factory(previous)


@pytest.mark.parametrize("module_name", defining_modules())
def test_docstring_examples_run_as_written(module_name, numpy_by_default):
    module = importlib.import_module(module_name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in doctest.DocTestFinder().find(module, module_name):
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, f"{results.failed} of {results.attempted} examples failed"


def test_the_public_functions_carry_examples():
    # Not every name needs one, but the reference's main entry points do; a refactor that
    # drops their examples (and so this file's reason to exist) shows up here.
    for function in (ng.make_axis, ng.make_axes, ng.placeholder, ng.variable, ng.dot, ng.sum,
                     ng.deriv, ng.softmax, ng.make_transformer, ng.tensor_slice):
        assert ">>>" in (function.__doc__ or ""), function.__name__


def test_a_wrong_example_fails():
    # The runner really compares output: a docstring claiming 1 + 1 is 3 is caught.
    def claims_three():
        """>>> 1 + 1
        3
        """

    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in doctest.DocTestFinder().find(claims_three, "claims_three"):
        runner.run(test, out=lambda text: None)
    assert runner.summarize(verbose=False).failed == 1
