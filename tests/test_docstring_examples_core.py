"""The ``>>>`` examples in the docstrings of the core API, axgraph.dims and axgraph.testing
run as written, and give what they show.

The API reference renders these docstrings, so an example that drifted from the code
would teach the wrong thing; running them here keeps every one honest.
"""
from __future__ import annotations

import doctest
import importlib
import pkgutil
from typing import List

import pytest

import axgraph.core


def documented_modules() -> List[str]:
    core = ["axgraph.core"] + [info.name for info in
                               pkgutil.walk_packages(axgraph.core.__path__, "axgraph.core.")]
    return sorted(core) + ["axgraph.dims", "axgraph.testing"]


def run_examples(module_name: str):
    """(examples tried, failure reports) for every docstring the module defines."""
    module = importlib.import_module(module_name)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    report: List[str] = []
    for test in doctest.DocTestFinder(exclude_empty=True).find(module, module_name):
        runner.run(test, out=report.append)
    return runner.summarize(verbose=False).attempted, report


@pytest.mark.parametrize("module_name", documented_modules())
def test_docstring_examples_run_as_written(module_name):
    _, report = run_examples(module_name)
    assert report == [], "\n".join(report)


def test_the_examples_are_found_and_run():
    # a finder that saw nothing would pass the test above for every module
    examples = {name: run_examples(name)[0] for name in documented_modules()}
    assert examples["axgraph.core.ops.shape"] >= 4          # Broadcast and Slice
    assert examples["axgraph.core.function"] >= 4
    assert examples["axgraph.testing"] >= 6
    for name in ("Function", "Slice", "Dot", "Gather", "compile", "Shape", "Dim",
                 "element_type", "at_location"):
        assert ">>>" in getattr(axgraph.core, name).__doc__, name


def test_a_failing_example_is_reported():
    doc = '''Two.

    >>> 1 + 1
    3
    '''
    test = doctest.DocTestParser().get_doctest(doc, {}, "two", "two.py", 0)
    runner = doctest.DocTestRunner()
    report: List[str] = []
    runner.run(test, out=report.append)
    assert runner.failures == 1 and "Expected:\n    3\nGot:\n    2" in "".join(report)
