"""Every example of seed 001 ("Building graphs")."""
import os
import sys

import numpy as np
import pytest

import axgraph as ng
import axgraph.op_graph.elementwise
import axgraph.op_graph.nn
from axgraph.frontends.neon import ax



def here() -> int:
    """The line number of the caller."""
    return sys._getframe(1).f_lineno


def same_file(a, b) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


# -- data dependencies ----------------------------------------------------------------

def test_add_args_and_type(transformer):
    x = ng.constant(0)
    y = ng.constant(1)
    mysum = ng.add(x, y)
    assert type(mysum) is ng.op_graph.elementwise.Add
    assert issubclass(type(mysum), ng.Op)
    assert issubclass(type(mysum), axgraph.op_graph.op.Op)
    assert isinstance(mysum, ng.Op)
    assert len(mysum.args) == 2
    assert mysum.args[0] is x and mysum.args[1] is y
    assert float(transformer.computation(mysum)()) == 1.0


def test_initializers():
    x = ng.constant(0)
    y = ng.constant(1)
    mysum = ng.add(x, y)
    assert len(mysum.initializers) == 0
    assert len(x.initializers) > 0
    assert all(isinstance(op, ng.Op) for op in x.initializers)
    assert len(ng.variable((), initial_value=2.0).initializers) > 0
    assert len(ng.placeholder(()).initializers) == 0


# -- non-data control dependencies ---------------------------------------------------

def test_other_deps_holds_the_assign():
    x = ng.placeholder((), initial_value=0)
    a = ng.assign(x, 5)
    z = x + 1
    assert len(z.other_deps) == 1
    assert a in z.other_deps
    assert z.other_deps.pop() is a
    assert len(z.other_deps) == 0


def test_ops_made_before_an_assign_do_not_depend_on_it():
    x = ng.placeholder((), initial_value=0)
    before = x + 2
    a = ng.assign(x, 5)
    assert a not in before.other_deps
    assert len(before.other_deps) == 0


def test_assign_happens_in_creation_order(transformer):
    x = ng.placeholder((), initial_value=0)
    before = x + 2
    a = ng.assign(x, 5)
    z = x + 1
    # `before` was built before the assign, so it reads x's initial value.
    before_val, z_val = transformer.computation([before, z])()
    assert float(before_val) == 2.0
    assert float(z_val) == 6.0


def test_z_evaluates_to_6(transformer):
    x = ng.placeholder((), initial_value=0)
    a = ng.assign(x, 5)
    z = x + 1
    assert float(transformer.computation(z)()) == 6.0


def test_variable_self_assign_counts_up(transformer):
    w = ng.variable((), initial_value=0)
    update_op = ng.assign(w, w + 1)
    w_comp = transformer.computation(w)
    assert [float(w_comp()) for _ in range(3)] == [1.0, 2.0, 3.0]


def test_saved_user_deps_keeps_assign_out_of_main_stream(transformer):
    w = ng.variable((), initial_value=0)
    with ng.Op.saved_user_deps():
        update_op = ng.assign(w, w + 1)
    after = w + 10
    assert update_op not in after.other_deps
    w_comp = transformer.computation(w)
    assert [float(w_comp()) for _ in range(3)] == [0.0, 0.0, 0.0]


def test_saved_user_deps_assign_runs_when_named(transformer):
    w = ng.variable((), initial_value=0)
    with ng.Op.saved_user_deps():
        update_op = ng.assign(w, w + 1)
    w_comp = transformer.computation([w, update_op])
    values = []
    for _ in range(3):
        w_val, update_val = w_comp()
        assert update_val is None
        values.append(float(w_val))
    assert values == [1.0, 2.0, 3.0]


# -- ops influencing evaluation -----------------------------------------------------

def test_placeholder_with_neon_axes(transformer, rng):
    x = ng.placeholder((ax.C, ax.W, ax.H, ax.N))
    assert isinstance(x, ng.AssignableTensorOp)
    assert list(x.axes) == [ax.C, ax.W, ax.H, ax.N]
    assert x.is_placeholder
    value = rng.standard_normal((2, 3, 4, 5))
    np.testing.assert_allclose(transformer.computation(x * 3, x)(value), value * 3, rtol=1e-6)


def test_x_equals_x_plus_x_does_not_change_the_placeholder(transformer, rng):
    x = ng.placeholder((ax.C, ax.W, ax.H, ax.N))
    placeholder = x
    x = x + x
    assert x is not placeholder
    assert isinstance(x, ng.op_graph.elementwise.Add)
    assert x.args[0] is placeholder and x.args[1] is placeholder
    assert list(x.axes) == [ax.C, ax.W, ax.H, ax.N]
    value = rng.standard_normal((2, 3, 4, 5))
    doubled, original = transformer.computation([x, placeholder], placeholder)(value)
    np.testing.assert_allclose(doubled, value + value, rtol=1e-6)
    np.testing.assert_allclose(original, value, rtol=1e-6)


def test_set_item_doubles_the_placeholder(transformer, rng):
    C = ng.make_axis(length=3, name="C")
    x = ng.placeholder([C])
    s = ng.SetItem(x, x + x)
    assert isinstance(s, ng.Op)
    value = rng.standard_normal(3)
    np.testing.assert_allclose(transformer.computation(x, x)(value), 2 * value, rtol=1e-6)


def test_set_item_doubles_a_variable_on_every_call(transformer):
    C = ng.make_axis(length=2, name="C")
    start = np.array([1.0, -3.0])
    w = ng.variable([C], initial_value=start)
    ng.SetItem(w, w + w)
    comp = transformer.computation(w)
    for k in (2, 4, 8):
        np.testing.assert_allclose(comp(), start * k)


def test_shared_subexpression(transformer, rng):
    C = ng.make_axis(length=4, name="C")
    x = ng.placeholder([C])
    x1 = x + x
    y = x1 * x1 - x
    assert isinstance(y, ng.op_graph.elementwise.Subtract)
    product, rest = y.args
    assert isinstance(product, ng.op_graph.elementwise.Multiply)
    assert product.args[0] is x1 and product.args[1] is x1
    assert rest is x
    comp = transformer.computation(y, x)
    adds = [op for op in comp.ops if isinstance(op, ng.op_graph.elementwise.Add)]
    assert adds == [x1]  # x + x is one op, computed once
    value = rng.standard_normal(4)
    np.testing.assert_allclose(comp(value), (2 * value) ** 2 - value, rtol=1e-5)
    # Later needing the intermediate value too.
    y_val, x1_val = transformer.computation([y, x1], x)(value)
    np.testing.assert_allclose(x1_val, 2 * value, rtol=1e-6)
    np.testing.assert_allclose(y_val, (2 * value) ** 2 - value, rtol=1e-5)


# -- general properties of ops --------------------------------------------------------

def test_metadata_name_file_lineno():
    C = ng.make_axis(length=2)
    line = here() + 1
    op = ng.placeholder([C], name="seed001_metadata_op", metadata={"stochastic": "dropout"})
    assert op.metadata == {"stochastic": "dropout"}
    assert op.name == "seed001_metadata_op"
    op.name = "seed001_metadata_op_renamed"
    assert op.name == "seed001_metadata_op_renamed"
    assert same_file(op.file, __file__)
    assert op.lineno == line
    assert op.file_info == f'File "{op.file}", line {line}'
    assert isinstance(op.axes, ng.Axes) and list(op.axes) == [C]


def test_file_and_lineno_of_ops_built_by_operators_and_helpers():
    C = ng.make_axis(length=3)
    x = ng.placeholder([C])
    line = here() + 1
    y = x + x
    assert same_file(y.file, __file__) and y.lineno == line
    line = here() + 1
    s = ng.softmax(x)
    assert same_file(s.file, __file__) and s.lineno == line
    assert str(line) in s.file_info


def test_auto_names_are_unique():
    ops = [ng.constant(0) for _ in range(5)] + [ng.placeholder(()) for _ in range(5)]
    names = [op.name for op in ops]
    assert all(isinstance(n, str) and n for n in names)
    assert len(set(names)) == len(names)


def test_default_metadata_is_empty_dict():
    op = ng.constant(1.0)
    assert op.metadata == {}


def test_variables_of_the_deriv_example():
    x = ng.placeholder((ax.C, ax.W, ax.H, ax.N))
    y0 = ng.placeholder((ax.Y, ax.N))
    w = ng.variable((ax.C, ax.W, ax.H, ax.Y))
    b = ng.variable((ax.Y,))
    y = ng.tanh(ng.dot(w, x) + b)
    c = ng.squared_L2(y - y0)
    assert list(y.axes) == [ax.Y, ax.N]
    assert list(c.axes) == []
    found = c.variables()
    assert len(found) == 2
    assert found[0] is w and found[1] is b


def test_deriv_of_the_deriv_example(transformer, rng):
    if not hasattr(ng, "deriv"):
        pytest.skip("ng.deriv does not exist yet")
    C = ng.make_axis(length=2, name="C")
    W = ng.make_axis(length=3, name="W")
    H = ng.make_axis(length=2, name="H")
    Y = ng.make_axis(length=4, name="Y")
    N = ng.make_axis(length=5, name="N")
    xv = rng.standard_normal((2, 3, 2, 5))
    y0v = rng.standard_normal((4, 5))
    wv = rng.standard_normal((2, 3, 2, 4)) * 0.3
    bv = rng.standard_normal(4) * 0.3
    x = ng.placeholder((C, W, H, N))
    y0 = ng.placeholder((Y, N))
    w = ng.variable((C, W, H, Y), initial_value=wv)
    b = ng.variable((Y,), initial_value=bv)
    y = ng.tanh(ng.dot(w, x) + b)
    c = ng.squared_L2(y - y0)
    d = ng.deriv(c, w)
    assert isinstance(d, ng.Op)
    assert d.axes.is_equal_set(w.axes)
    d = ng.axes_with_order(d, w.axes)
    got = transformer.computation(d, x, y0)(xv, y0v)
    yv = np.tanh(np.einsum('cwhy,cwhn->yn', wv, xv) + bv[:, None])
    expected = np.einsum('yn,cwhn->cwhy', 2 * (yv - y0v) * (1 - yv ** 2), xv)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


# -- schemas ------------------------------------------------------------------------

def test_softmax_schema(transformer, rng):
    x = ng.placeholder((ng.make_axis(20, 'C')))
    s = ng.softmax(x)
    # one op (Nervana Graph v0.4 returned the Divide of its five-op composition)
    assert isinstance(s, ng.op_graph.nn.SoftmaxOp)
    assert isinstance(s.schemas, list)
    assert len(s.schemas) == 1
    schema = s.schemas[0]
    assert isinstance(schema, ng.op_graph.nn.Softmax)
    assert schema.x is x
    assert list(schema.normalization_axes) == list(x.axes)
    value = rng.standard_normal(20)
    expected = np.exp(value) / np.exp(value).sum()
    np.testing.assert_allclose(transformer.computation(s, x)(value), expected, rtol=1e-5)


def test_plain_ops_have_no_schemas():
    x = ng.placeholder((ng.make_axis(20, 'C')))
    assert (x / 2).schemas == []
