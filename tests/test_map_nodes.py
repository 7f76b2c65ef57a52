"""`map_nodes` (core/function.py), the one rebuild loop of every pass, and what passes record
and trace: the same Function back when nothing changes, consumers rebuilt and the rest
shared, the user's line kept on what a rewrite builds, the rules fired (with counts) in
each PassRecord, and the trace lines (PassManager `trace=` and AXGRAPH_TRACE_PASSES).
"""
from __future__ import annotations

import numpy as np
import pytest

from axgraph import core, passes
from axgraph.passes import algebraic
from axgraph.core.function import map_nodes
from axgraph.errors import ShapeError

f32, f64 = core.f32, core.f64
MODEL = ("model.py", 7)  # where the "user" built the graph below


def param(shape, name, et=f32):
    return core.Parameter(et, shape, name=name)


def fill(shape, value, et=f32):
    return core.Constant(et, shape, value)


def exp_of_tanh():
    """x -> exp(tanh(x)), sin(x): built at MODEL."""
    with core.at_location(MODEL):
        x = param((3,), "x")
        t = core.Tanh(x)
        e = core.Exp(t)
        s = core.Sin(x)
        return core.Function([e, s], [x]), x, t, e, s


# -- map_nodes ----------------------------------------------------------------------------------

def test_nothing_changed_gives_the_same_function_back():
    f, *_ = exp_of_tanh()
    offered = []

    def keep(node, original):
        offered.append((node, original))
        return node if len(offered) % 2 else None  # "itself" and "None" both mean keep

    assert map_nodes(f, keep) is f
    assert [o for _, o in offered] == list(f.nodes)  # every node, parameters too, in order
    assert all(n is o for n, o in offered)  # nothing rebuilt: the inputs did not change


def test_consumers_are_rebuilt_and_the_rest_is_shared():
    f, x, t, e, s = exp_of_tanh()
    g = map_nodes(f, lambda node, original: core.Sigmoid(x) if original is t else None)
    assert g is not f and g.parameters == f.parameters
    new_e, new_s = g.results
    assert new_s is s  # not downstream of the replaced node: the same object
    assert isinstance(new_e, core.Exp) and new_e is not e
    assert isinstance(new_e.inputs[0], core.Sigmoid) and new_e.inputs[0].inputs[0] is x
    values = np.array([0.5, -1.0, 2.0], np.float32)
    got, _ = core.compile(g)(values)
    np.testing.assert_allclose(got, np.exp(1 / (1 + np.exp(-values.astype(np.float64)))),
                               rtol=1e-6)


def test_what_a_rewrite_builds_keeps_the_line_of_the_node_it_replaces():
    f, x, t, e, s = exp_of_tanh()
    outside = core.Sigmoid(x)  # built here, outside any rewrite: this file's line
    assert outside.location[0] == __file__

    def tanh_as_sigmoid(node, original):
        """tanh(x) = 2 sigmoid(2x) - 1, built by the 'pass' (this file)."""
        if not isinstance(node, core.Tanh):
            return None
        two = fill((3,), 2.0)
        return core.Subtract(core.Multiply(two, core.Sigmoid(core.Multiply(two, x))),
                             fill((3,), 1.0))

    g = map_nodes(f, tanh_as_sigmoid)
    new_nodes = [n for n in g.nodes if n not in set(f.nodes)]
    assert {type(n).__name__ for n in new_nodes} == {"Constant", "Multiply", "Sigmoid",
                                                     "Subtract", "Exp"}
    assert all(n.location == MODEL for n in new_nodes)  # the rebuilt Exp keeps its own too
    values = np.array([0.5, -1.0, 2.0], np.float32)
    np.testing.assert_allclose(core.compile(g)(values)[0], np.exp(np.tanh(values)), rtol=1e-6)


def test_a_rewrite_error_points_at_the_users_line():
    f, *_ = exp_of_tanh()

    def bad(node, original):
        return core.Add(node, fill((4,), 1.0)) if isinstance(node, core.Exp) else None

    with pytest.raises(ShapeError, match="Add") as error:
        map_nodes(f, bad)
    assert error.value.location == MODEL


# -- rules fired, per pass -----------------------------------------------------------------------

def records(manager):
    return [(r.name, r.rules_fired) for r in manager.report]


def test_each_pass_record_lists_the_rules_that_fired_with_counts():
    x = param((2, 2), "x")
    w = core.Constant(f32, (2, 2), np.array([[1.0, 2.0], [3.0, 4.0]]))
    product = core.Dot(core.Transpose(w, (1, 0)), w)  # two array folds: Transpose, then Dot
    bias = core.Add(fill((2, 2), 1.5), fill((2, 2), 2.5))  # one fill fold
    a = core.Multiply(core.Exp(x), fill((2, 2), 1.0))  # mul-one
    b = core.Multiply(fill((2, 2), 1.0), core.Tanh(core.Exp(x)))  # mul-one, either way round
    y = core.Add(core.Add(core.Add(a, b), fill((2, 2), 0.0)), core.Dot(x, product))  # add-zero
    f = core.Function([core.Add(y, bias)], [x])  # CSE merges the second Exp(x) and 1.0
    manager = passes.PassManager([passes.CommonSubexpressionElimination(),
                                  passes.ConstantFolding(), passes.AlgebraicSimplification(),
                                  passes.DeadCodeElimination()], max_rounds=2)
    g = manager.run(f)
    assert records(manager) == [
        ("common-subexpression-elimination", (("merge-equal-expressions", 2),)),
        ("constant-folding", (("fold-arrays", 2), ("fold-fills", 1))),
        ("algebraic-simplification", (("mul-one", 2), ("add-zero", 1))),
        ("dead-code-elimination", ()),
        ("common-subexpression-elimination", ()),
        ("constant-folding", ()),
        ("algebraic-simplification", ()),
        ("dead-code-elimination", ()),
    ]
    table = manager.format_report()
    assert "fold-arrays x2, fold-fills x1" in table and "mul-one x2, add-zero x1" in table
    values = np.array([[0.5, -1.0], [2.0, 0.25]], np.float32)
    v, m = values.astype(np.float64), np.array([[1.0, 2.0], [3.0, 4.0]])
    want = np.exp(v) + np.tanh(np.exp(v)) + v @ (m.T @ m) + 4.0
    np.testing.assert_allclose(core.compile(g)(values)[0], want, rtol=1e-5)


def test_convolution_and_pad_sum_rules_are_recorded():
    x = param((2, 2, 5, 5), "x", f64)
    w = param((3, 2, 3, 3), "w", f64)
    y = core.Convolution(x, w)
    dw = core.ConvolutionBackpropFilters(x, w.shape, core.Tanh(y))
    v = param((4, 3), "v", f64)
    pieces = [core.Pad(core.Slice(v, (k, 0), (k + 1, 3)), (k, 0), (3 - k, 0)) for k in range(4)]
    total = core.Add(core.Add(pieces[0], pieces[1]), core.Add(pieces[2], pieces[3]))
    f = core.Function([y, dw, total], [x, w, v])
    manager = passes.PassManager([passes.ConvolutionAsMatmul(), passes.PadSumToConcat()])
    manager.run(f)
    assert records(manager) == [
        ("convolution-as-matmul", (("convolution-as-dot", 1), ("filter-gradient-as-dot", 1))),
        ("pad-sum-to-concat", (("pad-sum-to-concat", 1),)),  # at the root Add only
    ]


def test_a_log_records_rules_run_outside_a_manager_and_a_plain_pass_records_none():
    f, x, t, e, s = exp_of_tanh()
    twice = core.Function([core.Negative(core.Negative(e)), core.Abs(core.Abs(s))], [x])
    rules = algebraic.rules()
    assert passes.rewrite(twice, rules).results[0] is e  # no log open: nothing recorded
    with passes.RewriteLog("by hand").active() as log:
        g = passes.rewrite(twice, rules)
    assert log.fired() == (("double-negative", 1), ("abs-abs", 1))
    assert g.results[0] is e and isinstance(g.results[1], core.Abs) and g.results[1].inputs[0] is s
    manager = passes.PassManager([lambda function: function])
    manager.run(f)
    assert manager.report[0].rules_fired == ()


# -- the trace ----------------------------------------------------------------------------------

def test_the_trace_names_pass_rule_and_the_users_line():
    with core.at_location(MODEL):
        x = param((3,), "x")
        f = core.Function([core.Multiply(core.Exp(x), fill((3,), 1.0))], [x])
    lines = []
    passes.PassManager([passes.AlgebraicSimplification()], trace=lines.append).run(f)
    assert len(lines) == 1
    assert lines[0].startswith("axgraph pass algebraic-simplification: mul-one at model.py:7 (")
    assert "Multiply" in lines[0] and "-> Exp" in lines[0]


def test_the_environment_variable_traces_to_stderr(monkeypatch, capsys):
    with core.at_location(MODEL):
        x = param((3,), "x")
        f = core.Function([core.Negative(core.Negative(x))], [x])
    monkeypatch.setenv(passes.TRACE_VARIABLE, "1")
    passes.PassManager([passes.AlgebraicSimplification()]).run(f)
    err = capsys.readouterr().err.splitlines()
    assert err == [line for line in err if line.startswith("axgraph pass ")] and len(err) == 1
    assert "double-negative at model.py:7" in err[0]
    passes.PassManager([passes.AlgebraicSimplification()], trace=False).run(f)  # silenced
    monkeypatch.setenv(passes.TRACE_VARIABLE, "0")
    passes.PassManager([passes.AlgebraicSimplification()]).run(f)
    assert capsys.readouterr().err == ""


def test_trace_must_be_a_switch_or_a_callable():
    f, *_ = exp_of_tanh()
    with pytest.raises(TypeError, match="trace must be"):
        passes.PassManager([passes.AlgebraicSimplification()], trace="yes").run(f)
