"""The ``>>>`` examples in the neon frontend's docstrings run and print what they show.

Each example runs with the public names of ``axgraph.frontends.neon`` in scope, as after
``from axgraph.frontends.neon import *`` (the examples import ``axgraph as ng`` and NumPy
themselves), so a reader can paste one after that import. Every docstring with examples is
one test, so a failure names the class or function whose example went wrong.
"""
from __future__ import annotations

import doctest
import importlib
import pkgutil
from typing import Dict, List

import pytest

import axgraph.frontends.neon as neon
from axgraph import transformers


def neon_modules() -> List[str]:
    return sorted(f"{neon.__name__}.{info.name}" for info in pkgutil.iter_modules(neon.__path__))


def example_docstrings() -> Dict[str, doctest.DocTest]:
    """Every docstring of a neon module that holds an example, by qualified name."""
    finder = doctest.DocTestFinder(exclude_empty=True)
    found: Dict[str, doctest.DocTest] = {}
    for module_name in [neon.__name__] + neon_modules():
        module = importlib.import_module(module_name)
        for test in finder.find(module, globs={}):
            if test.examples:
                found[test.name] = test
    return found


EXAMPLES = example_docstrings()


def test_the_public_api_has_examples_to_run():
    # The parametrized test below would pass vacuously if the finder found nothing.
    assert len(EXAMPLES) >= 15, sorted(EXAMPLES)


@pytest.fixture
def unchanged_transformer_factory():
    """NgraphArgparser.parse_args sets the default transformer; put it back afterwards."""
    factory = transformers.get_transformer_factory()
    yield
    transformers.set_transformer_factory(factory)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_docstring_example_runs_as_shown(name, unchanged_transformer_factory):
    test = EXAMPLES[name]
    test.globs = {key: getattr(neon, key) for key in neon.__all__}
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    output: List[str] = []
    runner.run(test, out=output.append, clear_globs=True)
    failed, attempted = runner.summarize(verbose=False)
    assert attempted > 0
    assert failed == 0, "".join(output)
