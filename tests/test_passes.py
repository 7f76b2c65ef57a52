"""Graph rewriting (`axgraph.passes`): patterns, the PassManager and its verifier,
each pass on small graphs (printed IR before and after, asserted exactly, and
results equal on the interpreter), the Gelu bridge op, a differential test on
random graphs, and the runnable example of docs/passes.md.
"""
from __future__ import annotations

import pathlib
import re
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from axgraph import core, passes
from axgraph.errors import DTypeError, ExecutionError, GraphError
from axgraph.passes import Any, Const, Op, RewriteRule

f32, f64, i32 = core.f32, core.f64, core.i32
DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs" / "passes.md"


# -- helpers ----------------------------------------------------------------------------------

def ir(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def assert_ir(function: core.Function, expected: str) -> None:
    assert str(function) == ir(expected)


def arguments(function: core.Function, seed: int = 0):
    """Random arguments; every size variable is 5."""
    rng = np.random.default_rng(seed)
    sizes = {name: 5 for name in function.free_symbols}
    arrays = []
    for p in function.parameters:
        shape = p.shape.evaluate(sizes)
        if p.element_type.is_float:
            arrays.append(rng.standard_normal(shape).astype(p.element_type.dtype))
        else:
            arrays.append(rng.integers(-5, 6, shape).astype(p.element_type.dtype))
    return arrays


def assert_same_results(before: core.Function, after: core.Function, seed: int = 0) -> None:
    """Both functions compiled for the interpreter give the same results."""
    arrays = arguments(before, seed)
    expected = core.compile(before)(*arrays)
    actual = core.compile(after)(*arrays)
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual):
        assert e.dtype == a.dtype and e.shape == a.shape
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-12)


def run_pass(pass_, function: core.Function) -> core.Function:
    """One pass under a PassManager (so the verifier checks it), results compared."""
    after = passes.PassManager([pass_]).run(function)
    assert_same_results(function, after)
    return after


def param(et, shape, name):
    return core.Parameter(et, shape, name=name)


def fill(et, shape, value):
    return core.Constant(et, shape, value)


# -- patterns ---------------------------------------------------------------------------------

def test_op_pattern_binds_labels_and_checks_children():
    x = param(f32, (2,), "x")
    one = fill(f32, (2,), 1.0)
    node = core.Multiply(x, one)
    pattern = Op(core.Multiply, Any("x"), Const("one", value=1))
    match = pattern.match(node)
    assert match is not None and match.root is node
    assert match["x"] is x and match["one"] is one
    assert pattern.match(core.Multiply(one, x)) is None  # order matters ...
    commutative = Op(core.Multiply, Any("x"), Const("one", value=1), commutative=True)
    assert commutative.match(core.Multiply(one, x))["x"] is x  # ... unless commutative
    assert pattern.match(core.Add(x, one)) is None
    assert Op(core.Multiply, Any("x"), Const(value=2)).match(node) is None


def test_a_label_used_twice_must_bind_one_node():
    x, y = param(f32, (2,), "x"), param(f32, (2,), "y")
    same = Op(core.Subtract, Any("a"), Any("a"))
    assert same.match(core.Subtract(x, x))["a"] is x
    assert same.match(core.Subtract(x, y)) is None


def test_predicates_attributes_and_class_tuples():
    x = param(f32, (2, 3), "x")
    t = core.Transpose(x, (1, 0))
    assert Op(core.Transpose, attrs={"permutation": (1, 0)}).match(t) is not None
    assert Op(core.Transpose, attrs={"permutation": lambda p: p == (0, 1)}).match(t) is None
    assert Op((core.Reshape, core.Transpose)).match(t) is not None
    rank2 = Any("v", predicate=lambda n: n.rank == 2)
    assert Op(core.Transpose, rank2).match(t)["v"] is x
    assert Op(core.Transpose, Any(predicate=lambda n: n.rank == 3)).match(t) is None
    # an Op pattern without children does not look at the inputs (any arity)
    c = core.Concat([x, x, x], 0)
    assert Op(core.Concat).match(c) is not None
    assert Op(core.Concat, Any(), Any()).match(c) is None


def test_patterns_reject_non_patterns():
    with pytest.raises(TypeError):
        Op(core.Add, "x")
    with pytest.raises(TypeError):
        Op(int)
    with pytest.raises(TypeError):
        Op(core.Negative, Any(), commutative=True)
    with pytest.raises(TypeError):
        RewriteRule("not a pattern", lambda m: None)


def test_rewrite_reaches_a_fixed_point_and_leaves_the_input_alone():
    x = param(f32, (3,), "x")
    nested = core.Negative(core.Negative(core.Negative(core.Negative(core.Exp(x)))))
    f = core.Function([nested], [x])
    text = str(f)
    rule = RewriteRule(Op(core.Negative, Op(core.Negative, Any("x"))), lambda m: m["x"],
                       "double-negative")
    g = passes.rewrite(f, [rule])
    assert str(f) == text
    assert_ir(g, """
        function(x):
          x = Parameter() : f32[3]
          %0 = Exp(x) : f32[3]
          return %0
    """)
    assert passes.rewrite(g, [rule]) is g  # nothing to do: the same function back


def test_a_replacement_of_another_type_names_the_rule():
    x = param(f32, (3,), "x")
    f = core.Function([core.Exp(x)], [x])
    bad = RewriteRule(Op(core.Exp, Any("x")), lambda m: core.Convert(m["x"], f64), "to-f64")
    with pytest.raises(GraphError, match="to-f64"):
        passes.rewrite(f, [bad])


def test_rules_that_undo_each_other_are_an_error_not_a_hang():
    x = param(f32, (3,), "x")
    f = core.Function([core.Exp(x)], [x])
    flip = RewriteRule(Op(core.Exp, Any("x")),
                       lambda m: core.Exp(core.Negative(core.Negative(m["x"]))), "flip")
    flop = RewriteRule(Op(core.Negative, Op(core.Negative, Any("x"))), lambda m: m["x"], "flop")
    with pytest.raises(GraphError, match="fixed point"):
        passes.rewrite(f, [flip, flop], max_sweeps=5)


# -- the PassManager and the verifier ---------------------------------------------------------

def test_manager_runs_passes_in_order_and_reports_node_counts():
    x = param(f32, (2, 3), "x")
    y = core.Add(core.Multiply(x, fill(f32, (2, 3), 1.0)), core.Multiply(x, fill(f32, (2, 3), 1.0)))
    f = core.Function([y], [x])
    manager = passes.PassManager([passes.CommonSubexpressionElimination(),
                                  passes.AlgebraicSimplification()], max_rounds=3)
    g = manager.run(f)
    assert_ir(g, """
        function(x):
          x = Parameter() : f32[2, 3]
          %0 = Add(x, x) : f32[2, 3]
          return %0
    """)
    runs = [(r.round, r.name, r.nodes_before, r.nodes_after, r.changed) for r in manager.report]
    assert runs == [
        (1, "common-subexpression-elimination", 6, 4, True),
        (1, "algebraic-simplification", 4, 2, True),
        (2, "common-subexpression-elimination", 2, 2, False),
        (2, "algebraic-simplification", 2, 2, False),
    ]
    table = manager.format_report()
    assert "common-subexpression-elimination" in table and "(no change)" in table
    assert_same_results(f, g)


def test_plain_functions_are_passes_too():
    x = param(f32, (2,), "x")
    f = core.Function([core.Exp(x)], [x])

    def identity(function):
        return function

    manager = passes.PassManager([identity])
    assert manager.run(f) is f
    assert manager.report[0].name == "identity"


def test_verifier_names_the_pass_that_changed_the_parameters():
    x = param(f32, (2,), "x")
    f = core.Function([core.Exp(x)], [x])

    def swap_parameter(function):
        other = param(f32, (2,), "x")
        return core.Function([core.Exp(other)], [other])

    with pytest.raises(passes.VerificationError, match="swap_parameter.*parameters changed"):
        passes.PassManager([swap_parameter]).run(f)


def test_verifier_names_the_pass_that_changed_a_result_type():
    x = param(f32, (2,), "x")
    f = core.Function([core.Exp(x)], [x])

    def widen(function):
        (p,) = function.parameters
        return core.Function([core.Convert(core.Exp(p), f64)], [p])

    with pytest.raises(passes.VerificationError, match="widen.*result 0 is f64"):
        passes.PassManager([widen]).run(f)


def test_verifier_catches_a_type_that_no_longer_follows_from_the_inputs():
    x = param(f32, (2, 3), "x")
    node = core.Exp(x)
    object.__setattr__(node, "shape", core.Shape(3, 2))  # forge a drift no constructor allows
    f = core.Function([node], [x])
    with pytest.raises(passes.VerificationError, match="recorded as f32\\[3, 2\\] but infers"):
        passes.verify(f)


def test_verifier_refuses_a_pass_that_returns_no_function():
    x = param(f32, (2,), "x")
    f = core.Function([core.Exp(x)], [x])
    with pytest.raises(passes.VerificationError, match="not a Function"):
        passes.PassManager([lambda function: None]).run(f)


# -- dead code elimination ----------------------------------------------------------------------

def test_dce_keeps_the_taken_branch_of_a_constant_select():
    x, y = param(f32, (2,), "x"), param(f32, (2,), "y")
    taken = core.Select(fill(core.boolean, (2,), True), core.Exp(x), core.Log(y))
    skipped = core.Select(fill(core.boolean, (2,), False), core.Exp(x), core.Log(y))
    f = core.Function([taken, skipped], [x, y])
    g = run_pass(passes.DeadCodeElimination(), f)
    assert_ir(g, """
        function(x, y):
          x = Parameter() : f32[2]
          y = Parameter() : f32[2]
          %0 = Exp(x) : f32[2]
          %1 = Log(y) : f32[2]
          return %0, %1
    """)


def test_dce_drops_empty_concat_inputs_and_slices_inside_one_input():
    x, y, e = param(f32, (2, 3), "x"), param(f32, (4, 3), "y"), param(f32, (0, 3), "e")
    joined = core.Concat([core.Exp(x), e, core.Tanh(y)], 0)
    part = core.Slice(joined, (3, 0), (6, 3))  # rows 3..5: inside Tanh(y)
    single = core.Concat([e, core.Sin(x)], 0)
    f = core.Function([part, single], [x, y, e])
    assert_ir(f, """
        function(x, y, e):
          x = Parameter() : f32[2, 3]
          y = Parameter() : f32[4, 3]
          e = Parameter() : f32[0, 3]
          %0 = Exp(x) : f32[2, 3]
          %1 = Tanh(y) : f32[4, 3]
          %2 = Concat(%0, e, %1, axis=0) : f32[6, 3]
          %3 = Slice(%2, lower=(3, 0), upper=(6, 3), strides=(1, 1)) : f32[3, 3]
          %4 = Sin(x) : f32[2, 3]
          %5 = Concat(e, %4, axis=0) : f32[2, 3]
          return %3, %5
    """)
    g = run_pass(passes.DeadCodeElimination(), f)
    assert_ir(g, """
        function(x, y, e):
          x = Parameter() : f32[2, 3]
          y = Parameter() : f32[4, 3]
          e = Parameter() : f32[0, 3]
          %0 = Tanh(y) : f32[4, 3]
          %1 = Slice(%0, lower=(1, 0), upper=(4, 3), strides=(1, 1)) : f32[3, 3]
          %2 = Sin(x) : f32[2, 3]
          return %1, %2
    """)


def test_dce_keeps_unused_parameters():
    x, unused = param(f32, (2,), "x"), param(f32, (2,), "unused")
    f = core.Function([core.Exp(x)], [x, unused])
    g = passes.PassManager([passes.DeadCodeElimination()]).run(f)
    assert g.parameters == (x, unused)


# -- common subexpression elimination ------------------------------------------------------------

def test_cse_merges_equal_expressions_commutative_ones_too():
    x, y = param(f32, (2,), "x"), param(f32, (2,), "y")
    a = core.Multiply(core.Add(x, y), fill(f32, (2,), 2.0))
    b = core.Multiply(core.Add(y, x), fill(f32, (2,), 2.0))
    c = core.Subtract(core.Exp(x), core.Exp(x))
    f = core.Function([core.Add(a, b), c], [x, y])
    assert_ir(f, """
        function(x, y):
          x = Parameter() : f32[2]
          y = Parameter() : f32[2]
          %0 = Add(x, y) : f32[2]
          %1 = Constant(value=2.0) : f32[2]
          %2 = Multiply(%0, %1) : f32[2]
          %3 = Add(y, x) : f32[2]
          %4 = Constant(value=2.0) : f32[2]
          %5 = Multiply(%3, %4) : f32[2]
          %6 = Add(%2, %5) : f32[2]
          %7 = Exp(x) : f32[2]
          %8 = Exp(x) : f32[2]
          %9 = Subtract(%7, %8) : f32[2]
          return %6, %9
    """)
    g = run_pass(passes.CommonSubexpressionElimination(), f)
    assert_ir(g, """
        function(x, y):
          x = Parameter() : f32[2]
          y = Parameter() : f32[2]
          %0 = Add(x, y) : f32[2]
          %1 = Constant(value=2.0) : f32[2]
          %2 = Multiply(%0, %1) : f32[2]
          %3 = Add(%2, %2) : f32[2]
          %4 = Exp(x) : f32[2]
          %5 = Subtract(%4, %4) : f32[2]
          return %3, %5
    """)


def test_cse_keeps_apart_what_only_looks_equal():
    x = param(f32, (2,), "x")
    plus, minus = fill(f32, (2,), 0.0), fill(f32, (2,), -0.0)  # equal, not the same bits
    u1 = core.RandomUniform(f32, (2,), seed=3)
    u2 = core.RandomUniform(f32, (2,), seed=3)  # two draws, even with one seed
    t1, t2 = core.Transpose(core.Reshape(x, (1, 2)), (1, 0)), core.Reshape(x, (2, 1))
    f = core.Function([core.Add(core.Add(x, plus), core.Add(x, minus)), core.Add(u1, u2),
                       core.Subtract(t1, t2)], [x])
    g = passes.PassManager([passes.CommonSubexpressionElimination()]).run(f)
    assert g is f


# -- constant folding ---------------------------------------------------------------------------

def test_constant_folding_evaluates_constant_subgraphs():
    x = param(f32, (2, 2), "x")
    w = core.Constant(f32, (2, 2), np.array([[1.0, 2.0], [3.0, 4.0]]))
    folded = core.Dot(core.Transpose(w, (1, 0)), w)  # every input constant
    bias = core.Add(fill(f32, (2, 2), 1.5), fill(f32, (2, 2), 2.5))  # uniform: stays a fill
    f = core.Function([core.Add(core.Dot(x, folded), bias)], [x])
    assert_ir(f, """
        function(x):
          x = Parameter() : f32[2, 2]
          %0 = Constant(value=[[1.0, 2.0], [3.0, 4.0]]) : f32[2, 2]
          %1 = Transpose(%0, permutation=(1, 0)) : f32[2, 2]
          %2 = Dot(%1, %0, contract_a=(1,), contract_b=(0,)) : f32[2, 2]
          %3 = Dot(x, %2, contract_a=(1,), contract_b=(0,)) : f32[2, 2]
          %4 = Constant(value=1.5) : f32[2, 2]
          %5 = Constant(value=2.5) : f32[2, 2]
          %6 = Add(%4, %5) : f32[2, 2]
          %7 = Add(%3, %6) : f32[2, 2]
          return %7
    """)
    g = run_pass(passes.ConstantFolding(), f)
    assert_ir(g, """
        function(x):
          x = Parameter() : f32[2, 2]
          %0 = Constant(value=[[10.0, 14.0], [14.0, 20.0]]) : f32[2, 2]
          %1 = Dot(x, %0, contract_a=(1,), contract_b=(0,)) : f32[2, 2]
          %2 = Constant(value=4.0) : f32[2, 2]
          %3 = Add(%1, %2) : f32[2, 2]
          return %3
    """)


def test_constant_folding_of_fills_works_on_symbolic_shapes():
    (n,) = core.symbols("N")
    x = param(f32, (n, 3), "x")
    scale = core.Sqrt(fill(f32, (n, 3), 4.0))
    f = core.Function([core.Multiply(x, scale)], [x])
    g = run_pass(passes.ConstantFolding(), f)
    assert_ir(g, """
        function(x):
          x = Parameter() : f32[N, 3]
          %0 = Constant(value=2.0) : f32[N, 3]
          %1 = Multiply(x, %0) : f32[N, 3]
          return %1
    """)


def test_constant_folding_never_folds_draws_and_respects_the_size_limit():
    noise = core.RandomNormal(f32, (2,), seed=1)
    doubled = core.Add(noise, noise)
    big = core.Constant(f32, (300, 300), np.ones((300, 300)) * np.arange(300))
    big_sum = core.Sum(core.Negative(big), (0, 1))
    f = core.Function([doubled, big_sum], [])
    assert passes.PassManager([passes.ConstantFolding()]).run(f) is f
    small_limit = passes.ConstantFolding(max_elements=100)
    medium = core.Negative(core.Constant(f32, (20, 20), np.arange(400.0).reshape(20, 20)))
    f2 = core.Function([medium], [])
    assert small_limit.run(f2) is f2
    assert isinstance(passes.ConstantFolding().run(f2).results[0], core.Constant)


def test_constant_folding_leaves_run_time_errors_to_run_time():
    zero = core.Divide(fill(i32, (2,), 7), fill(i32, (2,), 0))
    f = core.Function([zero], [])
    assert passes.ConstantFolding().run(f) is f
    with pytest.raises(ExecutionError, match="division by zero"):
        core.compile(f)()


# -- algebraic simplification -------------------------------------------------------------------

def test_algebraic_identities_of_arithmetic():
    x = param(f32, (2, 3), "x")
    k = x.shape
    expression = core.Divide(core.Subtract(core.Add(core.Multiply(fill(f32, k, 1.0), x),
                                                    fill(f32, k, 0.0)),
                                           fill(f32, k, 0.0)),
                             fill(f32, k, 1.0))
    expression = core.Negative(core.Negative(core.Convert(core.Power(expression, fill(f32, k, 1.0)),
                                                          f32)))
    expression = core.Abs(core.Abs(core.Negative(expression)))
    f = core.Function([expression], [x])
    g = run_pass(passes.AlgebraicSimplification(), f)
    assert_ir(g, """
        function(x):
          x = Parameter() : f32[2, 3]
          %0 = Abs(x) : f32[2, 3]
          return %0
    """)


def test_algebraic_identities_of_data_movement():
    x = param(f32, (2, 3, 4), "x")
    t = core.Transpose(core.Transpose(x, (2, 0, 1)), (0, 2, 1))  # -> one Transpose
    back = core.Transpose(core.Transpose(x, (1, 2, 0)), (2, 0, 1))  # -> x
    r = core.Reshape(core.Reshape(x, (6, 4)), (4, 6))  # -> one Reshape
    same = core.Reshape(x, (2, 3, 4))  # -> x
    whole = core.Slice(x, (0, 0, 0), (2, 3, 4))  # -> x
    summed = core.Sum(x, ())  # -> x
    flipped = core.Reverse(core.Reverse(x, (0, 1)), (1, 2))  # -> Reverse(x, (0, 2))
    padded = core.Pad(x, (0, 0, 0), (0, 0, 0))  # -> x
    broad = core.Broadcast(core.Broadcast(x, (2, 5, 3, 4), (1,)), (7, 2, 5, 3, 4), (0,))
    chosen = core.Select(core.Greater(x, x), x, x)  # -> x
    f = core.Function([t, core.Add(back, core.Add(same, core.Add(whole, core.Add(
        summed, core.Add(padded, chosen))))), r, flipped, broad], [x])
    g = run_pass(passes.AlgebraicSimplification(), f)
    assert_ir(g, """
        function(x):
          x = Parameter() : f32[2, 3, 4]
          %0 = Transpose(x, permutation=(2, 1, 0)) : f32[4, 3, 2]
          %1 = Add(x, x) : f32[2, 3, 4]
          %2 = Add(x, %1) : f32[2, 3, 4]
          %3 = Add(x, %2) : f32[2, 3, 4]
          %4 = Add(x, %3) : f32[2, 3, 4]
          %5 = Add(x, %4) : f32[2, 3, 4]
          %6 = Reshape(x) : f32[4, 6]
          %7 = Reverse(x, axes=(0, 2)) : f32[2, 3, 4]
          %8 = Broadcast(x, axes=(0, 2)) : f32[7, 2, 5, 3, 4]
          return %0, %5, %6, %7, %8
    """)


def test_algebraic_constants_moved_stay_constants():
    x = param(f32, (2, 3), "x")
    scalar = core.Constant(f32, (), 3.0)
    spread = core.Broadcast(scalar, (2, 3), (0, 1))  # Broadcast of a scalar Constant
    moved = core.Transpose(core.Reshape(fill(f32, (6,), 2.0), (3, 2)), (1, 0))
    joined = core.Concat([fill(f32, (1, 3), 5.0), fill(f32, (1, 3), 5.0)], 0)
    f = core.Function([core.Add(core.Multiply(x, spread), core.Add(moved, joined))], [x])
    g = run_pass(passes.AlgebraicSimplification(), f)
    assert_ir(g, """
        function(x):
          x = Parameter() : f32[2, 3]
          %0 = Constant(value=3.0) : f32[2, 3]
          %1 = Multiply(x, %0) : f32[2, 3]
          %2 = Constant(value=2.0) : f32[2, 3]
          %3 = Constant(value=5.0) : f32[2, 3]
          %4 = Add(%2, %3) : f32[2, 3]
          %5 = Add(%1, %4) : f32[2, 3]
          return %5
    """)


def test_an_idempotent_reduction_of_broadcast_copies_is_the_broadcast_value():
    x = param(f32, (3,), "x")
    wide = core.Broadcast(x, (2, 3, 4), (0, 2))  # x repeated over new dims 0 and 2
    whole = core.Max(wide, (0, 2))  # every added dim reduced -> x
    part = core.Min(wide, (2,))  # one added dim reduced -> x broadcast over the other
    summed = core.Sum(wide, (0, 2))  # a sum of copies is not the value: kept
    kept_dim = core.Max(wide, (1,))  # a dim of x reduced: kept
    empty = core.Max(core.Broadcast(x, (0, 3), (0,)), (0,))  # an empty dim is an error: kept
    f = core.Function([whole, part, summed, kept_dim, empty], [x])
    g = passes.PassManager([passes.AlgebraicSimplification()]).run(f)
    assert_ir(g, """
        function(x):
          x = Parameter() : f32[3]
          %0 = Broadcast(x, axes=(0,)) : f32[2, 3]
          %1 = Broadcast(x, axes=(0, 2)) : f32[2, 3, 4]
          %2 = Sum(%1, axes=(0, 2)) : f32[3]
          %3 = Max(%1, axes=(1,)) : f32[2, 4]
          %4 = Broadcast(x, axes=(0,)) : f32[0, 3]
          %5 = Max(%4, axes=(0,)) : f32[3]
          return x, %0, %2, %3, %5
    """)
    value = np.array([np.nan, -2.0, 7.5], np.float32)
    with pytest.raises(ExecutionError, match="empty dim"):
        core.compile(g)(value)
    kept = core.Function([whole, part, summed, kept_dim], [x])
    optimized = passes.PassManager([passes.AlgebraicSimplification()]).run(kept)
    for got, want in zip(core.compile(optimized)(value),
                         [value, np.broadcast_to(value, (2, 3)), value * 8,
                          np.full((2, 4), np.nan, np.float32)]):  # a NaN in every row
        np.testing.assert_array_equal(got, want)


def test_algebraic_keeps_ieee_semantics():
    x = param(f32, (4,), "x")
    times_zero = core.Multiply(x, fill(f32, (4,), 0.0))
    minus_self = core.Subtract(x, x)
    f = core.Function([times_zero, minus_self], [x])
    assert passes.AlgebraicSimplification().run(f) is f
    special = np.array([np.inf, -np.inf, np.nan, 1.0], np.float32)
    got = core.compile(passes.optimize(f))(special)
    assert np.isnan(got[0][:3]).all() and np.isnan(got[1][:3]).all()


def test_signed_zeros_are_kept_on_request():
    x = param(f32, (3,), "x")
    f = core.Function([core.Add(x, fill(f32, (3,), 0.0)), core.Add(x, fill(f32, (3,), -0.0)),
                       core.Subtract(x, fill(f32, (3,), 0.0))], [x])
    strict = passes.AlgebraicSimplification(keep_signed_zeros=True).run(f)
    assert_ir(strict, """
        function(x):
          x = Parameter() : f32[3]
          %0 = Constant(value=0.0) : f32[3]
          %1 = Add(x, %0) : f32[3]
          return %1, x, x
    """)
    negative_zero = np.array([-0.0, 1.0, -2.0], np.float32)
    got = core.compile(strict)(negative_zero)
    assert all(np.signbit(g[0]) == np.signbit(e[0]) for g, e in
               zip(got, core.compile(f)(negative_zero)))
    loose = passes.AlgebraicSimplification().run(f)
    assert loose.results == (x, x, x)


# -- layout sinking ------------------------------------------------------------------------------

def test_sinking_lets_transposes_cancel_through_elementwise_ops():
    x, y = param(f32, (2, 3, 4), "x"), param(f32, (2, 3, 4), "y")
    t = core.Transpose(x, (2, 0, 1))
    activated = core.Tanh(core.Exp(t))
    summed = core.Add(activated, core.Transpose(y, (2, 0, 1)))
    relu = core.Maximum(summed, fill(f32, summed.shape, 0.0))
    f = core.Function([core.Transpose(relu, (1, 2, 0))], [x, y])
    assert_ir(f, """
        function(x, y):
          x = Parameter() : f32[2, 3, 4]
          y = Parameter() : f32[2, 3, 4]
          %0 = Transpose(x, permutation=(2, 0, 1)) : f32[4, 2, 3]
          %1 = Exp(%0) : f32[4, 2, 3]
          %2 = Tanh(%1) : f32[4, 2, 3]
          %3 = Transpose(y, permutation=(2, 0, 1)) : f32[4, 2, 3]
          %4 = Add(%2, %3) : f32[4, 2, 3]
          %5 = Constant(value=0.0) : f32[4, 2, 3]
          %6 = Maximum(%4, %5) : f32[4, 2, 3]
          %7 = Transpose(%6, permutation=(1, 2, 0)) : f32[2, 3, 4]
          return %7
    """)
    g = run_pass(passes.LayoutSinking(), f)
    assert_ir(g, """
        function(x, y):
          x = Parameter() : f32[2, 3, 4]
          y = Parameter() : f32[2, 3, 4]
          %0 = Exp(x) : f32[2, 3, 4]
          %1 = Tanh(%0) : f32[2, 3, 4]
          %2 = Add(%1, y) : f32[2, 3, 4]
          %3 = Constant(value=0.0) : f32[2, 3, 4]
          %4 = Maximum(%2, %3) : f32[2, 3, 4]
          return %4
    """)


def test_sinking_reshapes_merge_and_cancel():
    x = param(f32, (2, 6), "x")
    flat = core.Reshape(x, (12,))
    f = core.Function([core.Reshape(core.Sigmoid(core.Negative(flat)), (2, 6))], [x])
    g = run_pass(passes.LayoutSinking(), f)
    assert_ir(g, """
        function(x):
          x = Parameter() : f32[2, 6]
          %0 = Negative(x) : f32[2, 6]
          %1 = Sigmoid(%0) : f32[2, 6]
          return %1
    """)


def test_dot_and_reductions_absorb_transposes():
    a, b, x = param(f32, (3, 2), "a"), param(f32, (3, 4), "b"), param(f32, (2, 3, 4), "x")
    product = core.Dot(core.Transpose(a, (1, 0)), b)
    total = core.Sum(core.Transpose(x, (1, 0, 2)), (0,))
    f = core.Function([product, total], [a, b, x])
    g = run_pass(passes.LayoutSinking(), f)
    assert_ir(g, """
        function(a, b, x):
          a = Parameter() : f32[3, 2]
          b = Parameter() : f32[3, 4]
          x = Parameter() : f32[2, 3, 4]
          %0 = Dot(a, b, contract_a=(0,), contract_b=(0,)) : f32[2, 4]
          %1 = Sum(x, axes=(1,)) : f32[2, 4]
          return %0, %1
    """)


def test_sinking_changes_nothing_when_no_copy_goes_away():
    x = param(f32, (2, 3), "x")
    t = core.Transpose(x, (1, 0))
    lonely = core.Exp(t)  # the transpose would only move
    shared = core.Add(core.Tanh(t), t)  # t has other users: sinking would add a copy
    f = core.Function([lonely], [x])
    assert passes.LayoutSinking().run(f) is f
    f2 = core.Function([shared, core.Sin(t)], [x])
    assert passes.LayoutSinking().run(f2) is f2
    read_by_caller = core.Function([core.Transpose(core.Exp(t), (1, 0)), t], [x])
    assert passes.LayoutSinking().run(read_by_caller) is read_by_caller  # the caller reads t


def test_sinking_goes_down_a_long_chain_in_one_pass():
    x = param(f32, (3, 4), "x")
    h = core.Transpose(x, (1, 0))
    for k in range(300):
        h = (core.Tanh if k % 2 else core.Sin)(h)
    f = core.Function([core.Transpose(h, (1, 0))], [x])
    g = run_pass(passes.LayoutSinking(), f)
    assert not any(isinstance(n, core.Transpose) for n in g.nodes)
    assert len(g.nodes) == len(f.nodes) - 2


# -- sums of padded pieces -----------------------------------------------------------------------

def _padded(x, dim, start, total, rank=3):
    below = tuple(start if i == dim else 0 for i in range(rank))
    above = tuple(total - start - x.shape[dim] if i == dim else 0 for i in range(rank))
    return core.Pad(x, below, above)


def test_disjoint_padded_pieces_are_joined_with_zeros_in_the_gaps():
    pieces = [param(f32, (4, 2, 3), "a"), param(f32, (4, 1, 3), "b"), param(f32, (4, 2, 3), "c")]
    rest = param(f32, (4, 9, 3), "rest")
    starts = (6, 0, 3)  # out of order, with gaps at 1..2, 5 and 8
    total = rest
    for piece, start in zip(pieces, starts):
        total = core.Add(_padded(piece, 1, start, 9), total)
    f = core.Function([core.Tanh(total)], pieces + [rest])
    g = run_pass(passes.PadSumToConcat(), f)
    ops = [node.op for node in g.nodes]
    assert "Pad" not in ops and ops.count("Concat") == 1 and ops.count("Add") == 1
    concat = next(node for node in g.nodes if node.op == "Concat")
    assert [tuple(i.shape)[1] for i in concat.inputs] == [1, 2, 2, 1, 2, 1]  # b 0 c 0 a 0


def test_overlapping_or_mixed_pads_are_left_or_partly_joined():
    a, b = param(f32, (3, 2), "a"), param(f32, (3, 2), "b")
    overlapping = core.Add(_padded(a, 1, 0, 3, rank=2), _padded(b, 1, 1, 3, rank=2))
    f = core.Function([overlapping], [a, b])
    assert passes.PadSumToConcat().run(f) is f  # overlapping pieces really add
    e = param(f32, (2, 4), "e")
    mixed = core.Add(core.Add(_padded(a, 1, 0, 4, rank=2), _padded(b, 1, 2, 4, rank=2)),
                     core.Pad(e, (1, 0), (0, 0)))  # a piece along dim 0: stays a term
    g = run_pass(passes.PadSumToConcat(), core.Function([mixed], [a, b, e]))
    assert [node.op for node in g.nodes].count("Pad") == 1


def test_a_recurrent_slice_gradient_has_no_pads_after_the_default_passes():
    import axgraph as ng

    T, N = ng.make_axis(6, "T"), ng.make_axis(3, "N")
    x = ng.placeholder([N, T], name="x")
    h = ng.constant(0.0, [N])
    for t in range(6):
        h = ng.tanh(h + ng.slice_along_axis(x, T, t))
    loss = ng.sum(h * h, out_axes=())
    with ng.make_transformer("interpreter", optimize=False) as t:
        function = t.lowered(t.computation(ng.autodiff.deriv(loss, x), x)).function
    after = passes.optimize(function)
    assert [n.op for n in function.nodes].count("Pad") >= 6
    assert [n.op for n in after.nodes].count("Pad") == 0
    assert_same_results(function, after)


# -- a Concat in its reader's layout ---------------------------------------------------------

def test_a_transpose_of_a_concat_moves_into_its_pieces():
    a, b = param(f32, (2, 3, 4), "a"), param(f32, (2, 5, 4), "b")
    joined = core.Transpose(core.Concat([core.Tanh(a), core.Tanh(b)], 1), (2, 0, 1))
    f = core.Function([core.Exp(joined)], [a, b])
    g = run_pass(passes.ConcatAbsorbsLayout(), f)
    concat = next(n for n in g.nodes if n.op == "Concat")
    assert concat.attributes["axis"] == 2 and tuple(concat.shape) == (4, 2, 8)
    assert [n.op for n in concat.inputs] == ["Transpose", "Transpose"]
    assert concat in g.nodes[-1].inputs  # nothing moves the Concat's result any more


def test_a_reshape_of_a_concat_moves_in_where_the_joined_dim_stays_whole():
    a, b = param(f32, (2, 1, 3, 4), "a"), param(f32, (2, 2, 3, 4), "b")
    joined = core.Concat([core.Tanh(a), core.Tanh(b)], 1)  # (2, 3, 3, 4)
    merged = core.Reshape(joined, (2, 36))  # the dims after the joined one merge into it
    f = core.Function([core.Exp(merged)], [a, b])
    g = run_pass(passes.ConcatAbsorbsLayout(), f)
    concat = next(n for n in g.nodes if n.op == "Concat")
    assert concat.attributes["axis"] == 1
    assert [tuple(n.shape) for n in concat.inputs] == [(2, 12), (2, 24)]
    mixed = core.Reshape(core.Concat([core.Tanh(a), core.Tanh(b)], 1), (6, 12))  # 2 x 3 mixed
    f = core.Function([core.Exp(mixed)], [a, b])
    assert passes.ConcatAbsorbsLayout().run(f) is f
    read_twice = core.Concat([core.Tanh(a), core.Tanh(b)], 1)
    f = core.Function([core.Reshape(read_twice, (2, 36)), read_twice], [a, b])
    assert passes.ConcatAbsorbsLayout().run(f) is f  # else it would be written twice


@pytest.mark.parametrize("shape, axis, target, found", [
    ((3, 32, 8, 64), 0, (3, 32, 8, 1, 64), (0, 1)),
    ((1, 32, 8, 3, 64), 3, (256, 192), (1, 64)),
    ((4, 6, 5), 1, (2, 2, 6, 5), (2, 1)),
    ((4, 6, 5), 1, (4, 3, 10), None),  # the joined dim split
    ((4, 6, 5), 1, (24, 5), None),  # mixed with the dim before it
    ((4, 6, 6), 1, (4, 4, 9), None),  # the joined dim and the next merge unevenly
])
def test_joined_dim_finds_where_the_concat_dim_lands(shape, axis, target, found):
    from axgraph.passes.concat_layout import joined_dim
    assert joined_dim(shape, axis, target) == found


def test_a_transpose_moving_only_unit_dims_is_a_reshape():
    x = param(f32, (1, 3, 1, 4), "x")
    f = core.Function([core.Exp(core.Transpose(x, (1, 0, 3, 2)))], [x])
    g = run_pass(passes.AlgebraicSimplification(), f)
    assert [n.op for n in g.nodes] == ["Parameter", "Reshape", "Exp"]
    assert tuple(g.nodes[1].shape) == (3, 1, 4, 1)
    swapped = core.Function([core.Exp(core.Transpose(x, (0, 3, 2, 1)))], [x])
    assert passes.AlgebraicSimplification().run(swapped) is swapped  # 3 and 4 swap places


def test_the_gradient_of_a_split_projection_is_one_concat_in_its_layout():
    """The stacked query/key/value projection: three slices read, their gradients padded,
    summed and moved back: after the default passes, one Concat in the product's layout."""
    x = param(f32, (6, 5, 12), "x")
    grads = [param(f32, (6, 5, 4), f"g{i}") for i in range(3)]
    pieces = [core.Pad(core.Reshape(g, (6, 5, 1, 4)), (0, 0, i, 0), (0, 0, 2 - i, 0))
              for i, g in enumerate(grads)]
    total = core.Add(core.Add(pieces[0], pieces[1]), pieces[2])  # (6, 5, 3, 4)
    moved = core.Reshape(core.Transpose(total, (1, 0, 2, 3)), (5, 72))
    f = core.Function([core.Dot(moved, core.Reshape(x, (72, 5)), (1,), (0,))], [x] + grads)
    g = passes.optimize(f)
    assert_same_results(f, g)
    ops = [n.op for n in g.nodes]
    assert ops.count("Concat") == 1 and "Pad" not in ops and "Add" not in ops
    concat = next(n for n in g.nodes if n.op == "Concat")
    (reader,) = [n for n in g.nodes if concat in n.inputs]
    assert tuple(concat.shape) == (5, 6, 3, 4) and reader.op == "Reshape"  # a view of it


# -- the bridge op: Gelu ---------------------------------------------------------------------

def numpy_gelu(x: np.ndarray) -> np.ndarray:
    """GELU, tanh approximation (Hendrycks & Gimpel), written from the formula."""
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def test_gelu_is_checked_and_printed_like_any_node():
    x = param(f32, (2, 3), "x")
    g = passes.Gelu(x, name="g")
    assert g.type_str() == "f32[2, 3]"
    with pytest.raises(DTypeError, match="Gelu: input n has element type i32"):
        passes.Gelu(param(i32, (2,), "n"))
    assert_ir(core.Function([g], [x]), """
        function(x):
          x = Parameter() : f32[2, 3]
          g = Gelu(x) : f32[2, 3]
          return g
    """)


def test_interpreter_refuses_an_unlowered_bridge_op():
    x = param(f32, (4,), "x")
    f = core.Function([passes.Gelu(x)], [x])
    with pytest.raises(ExecutionError,
                       match="cannot run the core op Gelu .*no core interpreter kernel"):
        core.compile(f)
    with pytest.raises(GraphError, match="Gelu .* is not a core op"):
        passes.BridgeLowering(rules=[], strict=True).run(f)


def test_gelu_lowers_to_core_ops_and_matches_numpy():
    x = param(f32, (3, 5), "x")
    f = core.Function([passes.Gelu(core.Multiply(x, fill(f32, (3, 5), 2.0)))], [x])
    lowered = passes.PassManager([passes.BridgeLowering(strict=True)]).run(f)
    assert_ir(lowered, """
        function(x):
          x = Parameter() : f32[3, 5]
          %0 = Constant(value=0.5) : f32[3, 5]
          %1 = Constant(value=2.0) : f32[3, 5]
          %2 = Multiply(x, %1) : f32[3, 5]
          %3 = Multiply(%0, %2) : f32[3, 5]
          %4 = Constant(value=1.0) : f32[3, 5]
          %5 = Constant(value=0.7978845834732056) : f32[3, 5]
          %6 = Constant(value=0.044714998453855515) : f32[3, 5]
          %7 = Multiply(%2, %2) : f32[3, 5]
          %8 = Multiply(%2, %7) : f32[3, 5]
          %9 = Multiply(%6, %8) : f32[3, 5]
          %10 = Add(%2, %9) : f32[3, 5]
          %11 = Multiply(%5, %10) : f32[3, 5]
          %12 = Tanh(%11) : f32[3, 5]
          %13 = Add(%4, %12) : f32[3, 5]
          %14 = Multiply(%3, %13) : f32[3, 5]
          return %14
    """)
    values = np.linspace(-4, 4, 15, dtype=np.float32).reshape(3, 5)
    (got,) = core.compile(lowered)(values)
    np.testing.assert_allclose(got, numpy_gelu(2.0 * values.astype(np.float64)), rtol=1e-5,
                               atol=1e-6)
    (optimized,) = core.compile(passes.optimize(f))(values)
    np.testing.assert_allclose(optimized, got, rtol=1e-6)


def test_register_bridge_takes_a_function_and_refuses_core_ops():
    class Swish(core.Node):
        """x * sigmoid(x): a bridge op for this test only."""

        def __init__(self, x, name=None):
            super().__init__((x,), {}, name)

        def _infer(self):
            (x,) = self.inputs
            return x.element_type, x.shape

    rule = passes.register_bridge(Swish, lambda node: core.Multiply(node.inputs[0],
                                                                    core.Sigmoid(node.inputs[0])))
    assert Swish in passes.bridge_ops() and rule in passes.bridge_rules()
    x = param(f64, (4,), "x")
    f = passes.BridgeLowering(strict=True).run(core.Function([Swish(x)], [x]))
    values = np.array([-2.0, -0.5, 0.0, 3.0])
    np.testing.assert_allclose(core.compile(f)(values)[0], values / (1 + np.exp(-values)))
    with pytest.raises(TypeError, match="core op"):
        passes.register_bridge(core.Exp, lambda node: node)
    with pytest.raises(TypeError, match="does not match"):
        passes.register_bridge(Swish, RewriteRule(Op(core.Exp), lambda m: None))


# -- the whole pipeline ---------------------------------------------------------------------------

def test_default_pipeline_on_a_small_model():
    x = param(f32, (4, 3), "x")
    w = core.Constant(f32, (3, 2), np.arange(6.0).reshape(3, 2) / 10)
    ones = core.Broadcast(core.Constant(f32, (), 1.0), (3, 4), (0, 1))
    xt = core.Multiply(core.Transpose(x, (1, 0)), ones)  # a layout the framework chose
    hidden = core.Dot(core.Transpose(xt, (1, 0)), w)
    activated = passes.Gelu(core.Add(hidden, fill(f32, (4, 2), 0.0)))
    f = core.Function([activated, core.Transpose(core.Transpose(hidden, (1, 0)), (1, 0))], [x])
    manager = passes.PassManager(passes.default_passes(), max_rounds=4)
    g = manager.run(f)
    assert all(isinstance(n, core.CORE_OPS) for n in g.nodes)
    assert not any(isinstance(n, core.Transpose) for n in g.nodes)
    dot = g.results[1]
    assert isinstance(dot, core.Dot) and dot.inputs[0] is x
    assert manager.report[-1].changed is False
    assert_same_results(passes.BridgeLowering().run(f), g)  # the reference runs lowered Gelu


def test_default_pipeline_on_symbolic_shapes():
    (n,) = core.symbols("N")
    x = param(f32, (n, 3), "x")
    joined = core.Concat([core.Slice(x, (0, 0), (n, 3)), core.Multiply(x, fill(f32, (n, 3), 1.0))],
                         0)
    lower_half = core.Slice(joined, (n, 0), (2 * n, 3))  # inside the second input
    activated = core.Transpose(core.Exp(core.Transpose(lower_half, (1, 0))), (1, 0))
    flat = core.Reshape(core.Reshape(activated, (3 * n,)), (n, 3))
    f = core.Function([core.Sum(flat, (0,))], [x])
    g = passes.optimize(f)
    assert_ir(g, """
        function(x):
          x = Parameter() : f32[N, 3]
          %0 = Exp(x) : f32[N, 3]
          %1 = Sum(%0, axes=(0,)) : f32[3]
          return %1
    """)
    assert_same_results(f, g)


# -- differential test on random graphs ----------------------------------------------------------

UNARY = (core.Negative, core.Abs, core.Tanh, core.Sigmoid, core.Sin, core.Cos)
BINARY = (core.Add, core.Subtract, core.Multiply, core.Maximum, core.Minimum)
FILLS = (0.0, -0.0, 1.0, 2.0, 0.5, -1.5)


class GraphBuilder:
    """Random core graphs over float64 from hypothesis draws."""

    def __init__(self, draw):
        self.draw = draw
        self.parameters = []
        self.pool = []
        self.rng = np.random.default_rng(draw(st.integers(0, 2**16)))

    def shape(self, max_rank: int = 3):
        rank = self.draw(st.integers(1, max_rank))
        return tuple(self.draw(st.integers(1, 4)) for _ in range(rank))

    def parameter(self, shape):
        p = core.Parameter(f64, shape, name=f"p{len(self.parameters)}")
        self.parameters.append(p)
        self.pool.append(p)
        return p

    def constant(self, shape):
        if self.draw(st.booleans()):
            return core.Constant(f64, shape, self.draw(st.sampled_from(FILLS)))
        return core.Constant(f64, shape, self.rng.standard_normal(shape))

    def partner(self, x):
        """Something of x's shape: a pool node, a constant, or a fresh parameter."""
        same = [n for n in self.pool if n.shape == x.shape] or [x]
        choice = self.draw(st.integers(0, 2))
        if choice == 0:
            return self.draw(st.sampled_from(same))
        if choice == 1:
            return self.constant(x.shape)
        return self.parameter(x.shape)

    # -- one builder per kind of node ------------------------------------------------------
    def unary(self, x):
        return self.draw(st.sampled_from(UNARY))(x)

    def binary(self, x):
        op, other = self.draw(st.sampled_from(BINARY)), self.partner(x)
        return op(x, other) if self.draw(st.booleans()) else op(other, x)

    def identity(self, x):
        kind = self.draw(st.integers(0, 9))
        one, zero = core.Constant(f64, x.shape, 1.0), core.Constant(f64, x.shape, 0.0)
        return [lambda: core.Multiply(one, x), lambda: core.Add(x, zero),
                lambda: core.Subtract(x, zero), lambda: core.Divide(x, one),
                lambda: core.Negative(core.Negative(x)), lambda: core.Convert(x, f64),
                lambda: core.Reshape(x, x.shape), lambda: core.Sum(x, ()),
                lambda: core.Slice(x, (0,) * x.rank, x.shape),
                lambda: core.Select(core.Greater(x, zero), x, x)][kind]()

    def transpose(self, x):
        return core.Transpose(x, self.draw(st.permutations(range(x.rank))))

    def reshape(self, x):
        dims = list(x.shape)
        options = [(int(np.prod(dims)),), (1,) + tuple(dims), tuple(reversed(dims))]
        if len(dims) >= 2:
            options.append((dims[0] * dims[1],) + tuple(dims[2:]))
        return core.Reshape(x, self.draw(st.sampled_from(options)))

    def broadcast(self, x):
        if x.rank >= 4 or self.draw(st.booleans()):
            scalar = core.Constant(f64, (), self.draw(st.sampled_from(FILLS)))
            return core.Add(x, core.Broadcast(scalar, x.shape, tuple(range(x.rank))))
        position = self.draw(st.integers(0, x.rank))
        shape = list(x.shape)
        shape.insert(position, self.draw(st.integers(1, 3)))
        return core.Broadcast(x, shape, (position,))

    def dot(self, x):
        k = self.draw(st.integers(1, 3))
        w_shape = (x.shape[-1], k)
        w = self.constant(w_shape) if self.draw(st.booleans()) else self.parameter(w_shape)
        if x.rank >= 2 and self.draw(st.booleans()):  # a transposed operand to absorb
            return core.Dot(core.Transpose(core.Transpose(x, (1, 0) + tuple(range(2, x.rank))),
                                           (1, 0) + tuple(range(2, x.rank))), w)
        return core.Dot(x, w)

    def reduce(self, x):
        op = self.draw(st.sampled_from((core.Sum, core.Max, core.Min)))
        axes = self.draw(st.lists(st.integers(0, x.rank - 1), unique=True, max_size=x.rank - 1))
        return op(x, tuple(axes))

    def softmax(self, x):
        axes = self.draw(st.lists(st.integers(0, x.rank - 1), unique=True, min_size=1))
        return core.Softmax(x, tuple(axes))

    def sandwich(self, x):
        """U(x^T) transposed back (or an elementwise op on two transposes): sinking's food."""
        p = self.draw(st.permutations(range(x.rank)))
        inverse = tuple(int(i) for i in np.argsort(p))
        t = core.Transpose(x, p)
        inner = self.unary(t) if self.draw(st.booleans()) else self.binary(t)
        return core.Transpose(inner, inverse)

    def constant_subgraph(self, x):
        c = self.constant(x.shape)
        return core.Add(x, core.Multiply(core.Negative(c), core.Tanh(c)))

    KINDS = ("unary", "binary", "identity", "transpose", "reshape", "broadcast", "dot",
             "reduce", "softmax", "constant_subgraph", "sandwich")

    def build(self):
        self.parameter(self.shape())
        for _ in range(self.draw(st.integers(2, 14))):
            x = self.draw(st.sampled_from(self.pool))
            kind = self.draw(st.sampled_from(self.KINDS))
            if x.rank == 0 and kind in ("dot", "reduce", "softmax", "transpose", "reshape",
                                        "sandwich"):
                kind = "unary"
            if x.rank >= 4 and kind in ("broadcast", "dot"):
                kind = "unary"
            self.pool.append(getattr(self, kind)(x))
        results = [self.pool[-1], self.draw(st.sampled_from(self.pool))]
        return core.Function(results, self.parameters)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.data())
def test_passes_keep_results_of_random_graphs(data):
    f = GraphBuilder(data.draw).build()
    g = passes.PassManager(passes.default_passes(), max_rounds=4).run(f)
    arrays = arguments(f, seed=data.draw(st.integers(0, 1000)))
    expected = core.compile(f)(*arrays)
    actual = core.compile(g)(*arrays)
    for e, a in zip(expected, actual):
        assert e.shape == a.shape and e.dtype == a.dtype
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-12)
    assert len(g.nodes) <= len(f.nodes) + 2


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.data())
def test_the_cpu_backend_agrees_on_random_graphs(data):
    """Generated code, planned layouts and every group fused (both engines) on random graphs."""
    from axgraph.transformers.cpu.backend import CpuFunction
    from axgraph.transformers.cpu.fusion import available_engines

    f = GraphBuilder(data.draw).build()
    g = passes.optimize(f)
    arrays = arguments(f, seed=data.draw(st.integers(0, 1000)))
    expected = core.compile(f)(*arrays)
    for engine in available_engines():
        for function in (f, g):
            compiled = CpuFunction(function, fuse=True, engine=engine, fuse_min_elements=1)
            for _ in range(2):  # the second call reuses the program and its arena
                actual = compiled(*arrays)
                for e, a in zip(expected, actual):
                    assert e.shape == a.shape and e.dtype == a.dtype
                    np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-12)


# -- the documentation's example runs ------------------------------------------------------------

def test_docs_example_runs():
    text = DOCS.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "docs/passes.md has no python example"
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(DOCS), "exec"), namespace)


def test_transpose_sinks_through_an_add_of_a_broadcast_bias():
    """Transpose(x) + Broadcast(b) == Transpose(x + Broadcast'(b)): the transposes cancel."""
    x = core.Parameter(core.f32, (2, 3, 4), name="x")
    bias = core.Parameter(core.f32, (3,), name="bias")
    moved = core.Transpose(x, (2, 0, 1))  # (4, 2, 3)
    total = core.Add(moved, core.Broadcast(bias, (4, 2, 3), (0, 1)))
    back = core.Transpose(total, (1, 2, 0))  # (2, 3, 4) again
    function = core.Function([back], [x, bias])
    optimized = passes.PassManager([passes.LayoutSinking(), passes.AlgebraicSimplification(),
                                    passes.DeadCodeElimination()]).run(function)
    assert not any(node.op == "Transpose" for node in optimized.nodes)
    rng = np.random.default_rng(0)
    xv, bv = rng.normal(size=(2, 3, 4)).astype(np.float32), rng.normal(size=3).astype(np.float32)
    (expected,) = core.compile(function)(xv, bv)
    (got,) = core.compile(optimized)(xv, bv)
    np.testing.assert_allclose(got, expected)
    np.testing.assert_allclose(got, xv + bv[None, :, None])
