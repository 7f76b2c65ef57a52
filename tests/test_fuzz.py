"""Differential fuzzing (axgraph.testing_graphs): random axes graphs on every backend.

Each configuration (every backend but the reference; default, unoptimized,
each pass left out, cpu fusion forced on each engine) runs a few random
graphs and must agree with the NumPy reference; smooth graphs' deriv must
match float64 central differences. The budget here is small (a few examples
per configuration, derandomized under CI); `python benchmarks/fuzz.py
--examples 10000` is the long run. The last tests check that the fuzzer can
fail: a deliberately broken pass is caught.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, HealthCheck, given, reject, settings

from axgraph import core
from axgraph import testing_graphs as menus
from axgraph.passes import Any, Op, RewriteRule, RulePass
from axgraph.testing_graphs import (Configuration, RandomChoices, UnsuitableGraph,
                                    check_derivatives, compare, configurations, differences,
                                    graphs, random_graph)
from axgraph.transformers.lowering_transformer import LoweringTransformer

CONFIGURATIONS = configurations()

FUZZ_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                           HealthCheck.data_too_large])


def agreement(graph, configs) -> list:
    """The disagreements, or a hypothesis rejection when the reference overflows."""
    try:
        return compare(graph, configs)
    except UnsuitableGraph:
        reject()


def explain(graph, problems) -> str:
    return f"\n{graph}\n" + "\n".join(f"  {p}" for p in problems)


@pytest.mark.parametrize("configuration", CONFIGURATIONS, ids=str)
@settings(max_examples=5, **FUZZ_SETTINGS)
@given(graph=graphs())
def test_random_graphs_agree_with_the_reference(configuration, graph):
    problems = agreement(graph, [configuration])
    assert not problems, explain(graph, problems)


@settings(max_examples=3, **FUZZ_SETTINGS)
@given(graph=graphs(assigns=True))
def test_assigns_agree_on_every_configuration(graph):
    """Values returned by two calls of an updating computation, and the variables read after."""
    # (a graph whose every axis takes its length from data has no variable to assign)
    assume(graph.assigned)
    assert "assign" in graph.constructs
    problems = agreement(graph, CONFIGURATIONS)
    assert not problems, explain(graph, problems)


@settings(max_examples=2, **FUZZ_SETTINGS)
@given(graph=graphs(unknown_length=True, smooth=False))
def test_unknown_lengths_agree_on_every_configuration(graph):
    """An axis without a length: two calls with different lengths bound from the feeds."""
    assert graph.rebound_feeds is not None
    problems = agreement(graph, CONFIGURATIONS)
    assert not problems, explain(graph, problems)


@pytest.mark.parametrize("seed", [0, 2])
def test_a_large_graph_agrees_where_kernels_block_and_thread(seed):
    """Axes of 64K+ elements: fused kernels split into blocks and threads."""
    graph = random_graph(RandomChoices(seed), large=True)
    configs = [c for c in CONFIGURATIONS if c.name in ("cpu", "cpu fused",
                                                         "cpu fused engine=numpy")]
    problems = compare(graph, configs)
    assert not problems, explain(graph, problems)


@settings(max_examples=8, **FUZZ_SETTINGS)
@given(graph=graphs(smooth=True))
def test_deriv_matches_finite_differences(graph):
    problems = check_derivatives(graph)
    assert not problems, explain(graph, problems)


# -- the fuzzer itself ------------------------------------------------------------------------

def test_every_construct_is_generated():
    seen = set()
    for seed in range(200):
        graph = random_graph(RandomChoices(seed))
        seen |= graph.constructs
        text = str(graph)
        assert all(label.split("(")[0] in text for label in graph.labels), text
    assert seen >= {"placeholder", "constant", "variable", "elementwise", "comparison",
                    "broadcast", "reorder", "cast", "reduction", "argreduce", "dot", "dual",
                    "slice", "concat", "stack", "pad", "flatten", "unflatten", "softmax",
                    "assign", "set_item", "deriv", "unknown length", "large"}


def test_smooth_graphs_are_float64_with_gradients_of_every_placeholder():
    for seed in range(20):
        graph = random_graph(RandomChoices(seed), smooth=True)
        assert graph.dtype == np.float64 and not graph.assigned
        gradients = [label for label in graph.labels if label.startswith("deriv(cost, ")]
        assert len(gradients) == len(graph.placeholders) and graph.cost is not None
        assert not graph.constructs & {"comparison", "argreduce", "assign"}


def test_every_declared_elementwise_op_is_on_a_menu():
    """The menus come from the ops' declarations: only an op deriv passes no gradient
    through (stop_gradient) is left off, as its gradient is not its derivative."""
    on_menus = set(menus.SMOOTH_UNARY + menus.KINKED_UNARY + menus.STEP_UNARY
                   + menus.POSITIVE_UNARY + menus.BOUNDED_UNARY + menus.SMOOTH_BINARY
                   + menus.KINKED_BINARY + menus.COMPARISONS)
    declared = {**menus.UNARY_OPS, **menus.BINARY_OPS}
    assert on_menus == {name for name, d in declared.items() if d.smoothness != "blocked"}
    # the order written by hand before the menus were derived comes first (seeds replay)
    assert menus.SMOOTH_UNARY[:3] == ("negative", "square", "exp")
    assert menus.COMPARISONS[:2] == ("greater", "less")


def test_the_same_seed_builds_the_same_program():
    assert str(random_graph(RandomChoices(11))) == str(random_graph(RandomChoices(11)))
    assert str(random_graph(RandomChoices(11))) != str(random_graph(RandomChoices(12)))


def test_configurations_toggle_each_pass_of_each_backend():
    names = {c.name for c in CONFIGURATIONS}
    assert {"interpreter", "interpreter optimize=False", "cpu", "cpu fuse=False",
            "cpu fused", "cpu optimize=False"} <= names
    without = {c.without for c in CONFIGURATIONS if c.backend == "interpreter" and c.without}
    with LoweringTransformer("interpreter") as transformer:
        assert without == {type(p).__name__ for p in transformer.passes()}
    config = next(c for c in CONFIGURATIONS if c.without == "ConstantFolding")
    with config.make() as transformer:
        assert "ConstantFolding" not in {type(p).__name__ for p in transformer.passes()}
        assert len(transformer.passes()) >= 5


@pytest.mark.parametrize("actual, expected_problem", [
    (np.ones((2, 3)), None),
    (np.ones((2, 3)) + 1e-12, None),
    (np.ones((3, 2)), "shape"),
    (np.ones((2, 3), np.float32), "dtype"),
    (np.full((2, 3), 1.01), "max abs error"),
    (np.full((2, 3), np.nan), "max abs error"),
])
def test_differences_from_the_reference(actual, expected_problem):
    problem = differences("t1", np.ones((2, 3)), actual)
    if expected_problem is None:
        assert problem is None
    else:
        assert problem is not None and expected_problem in problem.problem


class BrokenPass(Configuration):
    """The interpreter with a pass that rewrites every transpose as a reshape (wrong)."""

    def make(self):
        transformer = LoweringTransformer("interpreter")
        pipeline = transformer.passes
        wrong = RewriteRule(Op(core.Transpose, Any("x")),
                            lambda match: core.Reshape(match["x"], match.root.shape),
                            "transpose-as-reshape")
        transformer.passes = lambda: pipeline() + [RulePass([wrong])]
        return transformer


BROKEN = BrokenPass("interpreter with a broken pass", "interpreter")


def test_the_fuzzer_catches_a_broken_pass():
    caught = 0
    for seed in range(40):
        graph = random_graph(RandomChoices(seed), smooth=False)
        try:
            problems = compare(graph, [BROKEN])
        except UnsuitableGraph:
            continue
        caught += bool(problems)
        assert all(p.configuration == BROKEN.name for p in problems)
    assert caught >= 3


def test_fuzz_script_reports_disagreements_and_exits_non_zero(monkeypatch, capsys, tmp_path):
    from benchmarks import fuzz

    monkeypatch.setenv("AXGRAPH_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(fuzz, "_CONFIGURATIONS", [BROKEN])
    assert fuzz.main(["--examples", "12", "--seed", "3", "--memory-gb", "0"]) == 1
    out = capsys.readouterr().out
    assert "disagrees (replay: python benchmarks/fuzz.py --seed 3 --example" in out
    assert "interpreter with a broken pass" in out and "results:" in out
    monkeypatch.setattr(fuzz, "_CONFIGURATIONS",
                        [c for c in CONFIGURATIONS if c.name == "interpreter"])
    assert fuzz.main(["--examples", "4", "--seed", "3", "--memory-gb", "0"]) == 0
    assert "disagreements: 0" in capsys.readouterr().out
