"""Lowering from the axes graph to the core IR: the printed IR, state, size variables.

(Every execution test of the suite also runs on the "interpreter" backend,
which is lowering plus the core interpreter; this file checks the IR itself.)
"""
import numpy as np
import pytest

import axgraph as ng
from axgraph.dims import Dim
from axgraph.lowering import lower
from axgraph.op_graph.execution_order import schedule


def lowered(*results):
    return lower(schedule(list(results)), list(results))


def test_broadcasting_by_axes_becomes_explicit_broadcasts():
    H, W, N = ng.make_axis(2, "H"), ng.make_axis(3, "W"), ng.make_axis(name="N")
    x = ng.placeholder([H, W], name="x")
    y = ng.placeholder([N, W], name="y")
    assert str(lowered(x + y).function) == """\
function(x, y):
  x = Parameter() : f32[2, 3]
  y = Parameter() : f32[N, 3]
  %0 = Broadcast(x, axes=(2,)) : f32[2, 3, N]
  %1 = Transpose(y, permutation=(1, 0)) : f32[3, N]
  %2 = Broadcast(%1, axes=(0,)) : f32[2, 3, N]
  %3 = Add(%0, %2) : f32[2, 3, N]
  return %3"""


def test_dot_with_dual_axes_contracts_the_paired_dims():
    H, W, N = ng.make_axis(2, "H"), ng.make_axis(3, "W"), ng.make_axis(4, "N")
    w = ng.placeholder([H, W - 1], name="w")
    x = ng.placeholder([N, W], name="x")
    assert str(lowered(ng.dot(w, x)).function) == """\
function(w, x):
  w = Parameter() : f32[2, 3]
  x = Parameter() : f32[4, 3]
  %0 = Dot(w, x, contract_a=(1,), contract_b=(1,)) : f32[2, 4]
  return %0"""


def test_assign_becomes_a_new_version_returned_as_state():
    W = ng.make_axis(3, "W")
    w = ng.variable([W], initial_value=1.0, name="w")
    with ng.Op.saved_user_deps():
        update = ng.assign(w, w * 0.5)
    result = lowered(update)
    assert result.state_inputs == [w] and result.state_outputs == [w]
    assert result.result_positions == [None]
    assert str(result.function) == """\
function(w):
  w = Parameter() : f32[3]
  %0 = Constant(value=0.5) : f32[]
  %1 = Broadcast(%0, axes=(0,)) : f32[3]
  %2 = Multiply(w, %1) : f32[3]
  return %2"""


def test_reads_after_an_assign_see_the_new_version():
    W = ng.make_axis(2, "W")
    x = ng.placeholder([W], initial_value=0.0, name="x")
    first = x + 1  # built before the assign: reads the old value
    ng.assign(x, ng.constant(5.0))
    second = x + 1  # built after it: depends on it, reads the new value
    with ng.make_transformer("interpreter") as t:
        before, after = t.computation([first, second])()
    np.testing.assert_array_equal(before, [1.0, 1.0])
    np.testing.assert_array_equal(after, [6.0, 6.0])


def test_unknown_batch_length_is_a_size_variable_bound_per_call():
    F, N = ng.make_axis(3, "F"), ng.make_axis(name="N")
    x = ng.placeholder([N, F], name="x")
    total = ng.sum(x, reduction_axes=[F])
    function = lowered(total).function
    assert function.parameters[0].shape == ng.core.Shape("N", 3)
    assert "N" in function.free_symbols
    with ng.make_transformer("interpreter") as t:
        compute = t.computation(total, x)
        for batch in (2, 5):
            value = np.arange(batch * 3, dtype=np.float32).reshape(batch, 3)
            np.testing.assert_allclose(compute(value), value.sum(axis=1))


def test_constants_become_constant_nodes_not_state():
    W = ng.make_axis(2, "W")
    c = ng.constant(np.array([1.0, 2.0]), [W])
    result = lowered(c * 2.0)
    assert result.state_inputs == []
    assert result.function.parameters == ()


def test_an_axis_without_length_anywhere_is_a_feed_error():
    L = ng.make_axis(name="Lonely")
    r = ng.uniform([L])
    with ng.make_transformer("interpreter") as t:
        computation = t.computation(r)
        with pytest.raises(ng.FeedError, match="Lonely"):
            computation()


def test_slices_with_negative_steps_and_their_adjoint():
    A = ng.make_axis(6, "A")
    x = ng.placeholder([A], dtype=np.float64, name="x")
    picked = x[4:0:-2]
    grad = ng.deriv(ng.sum(picked * ng.constant(np.array([10.0, 20.0]), picked.axes,
                                                 dtype=np.float64), out_axes=()), x)
    xv = np.arange(6.0)
    with ng.make_transformer("interpreter") as t:
        value, gradient = t.computation([picked, grad], x)(xv)
    np.testing.assert_array_equal(value, xv[4:0:-2])
    expected = np.zeros(6)
    expected[4], expected[2] = 10.0, 20.0
    np.testing.assert_array_equal(gradient, expected)


def test_the_adjoint_of_a_slice_keeps_an_unknown_length_whole():
    """Found by the fuzzer: the region's symbolic count was tested for truth."""
    A, N = ng.make_axis(3, "A"), ng.make_axis(name="N")
    x = ng.placeholder([N, A], dtype=np.float64, name="x")
    w = ng.placeholder([N], dtype=np.float64, name="w")
    grad = ng.deriv(ng.sum(x[:, 1] * w, out_axes=()), x)
    with ng.make_transformer("interpreter") as t:
        compute = t.computation(grad, x, w)
        for batch in (2, 5):
            wv = np.arange(1.0, batch + 1)
            expected = np.zeros((batch, 3))
            expected[:, 1] = wv
            np.testing.assert_array_equal(compute(np.ones((batch, 3)), wv), expected)



def test_a_forward_slice_of_a_symbolic_length_needs_no_length_and_its_adjoint_runs():
    T = ng.make_axis(Dim("T"), "T")
    S, rest = ng.make_axis(2, "S"), ng.make_axis(Dim("T") - 1, "R")
    x = ng.placeholder([T], dtype=np.float64, name="x")
    middle = ng.tensor_slice(x, [slice(1, 3)], axes=[S])
    tail = ng.tensor_slice(x, [slice(1, None)], axes=[rest])
    grad = ng.deriv(ng.sum(middle * ng.constant(np.array([10.0, 20.0]), [S], dtype=np.float64),
                           out_axes=()), x)
    with ng.make_transformer("interpreter") as t:
        compute = t.computation([middle, tail, grad], x)
        for length in (3, 6):
            xv = np.arange(float(length))
            expected = np.zeros(length)
            expected[1:3] = [10.0, 20.0]
            for got, want in zip(compute(xv), (xv[1:3], xv[1:], expected)):
                np.testing.assert_array_equal(got, want)
        with pytest.raises(ng.ShapeCheckError, match=r"its dim 0 \(T\) is 2\), but T must be >= 3 \(from slice at"):
            compute(np.zeros(2))
    backwards = ng.tensor_slice(x, [slice(None, None, -1)], axes=[ng.make_axis(Dim("T"), "V")])
    with pytest.raises(ng.AxisLengthError, match="only forward slices"):
        lowered(backwards)


def test_a_fed_placeholder_gives_its_lengths_though_its_values_are_not_read():
    """Found by the fuzzer: the gradient of a sum needs x's axes, not x; N must still bind."""
    A, N = ng.make_axis(3, "A"), ng.make_axis(name="N")
    x = ng.placeholder([N, A], dtype=np.float64, name="x")
    grad = ng.deriv(ng.sum(x, out_axes=()), x)
    with pytest.raises(ng.FeedError, match="axis N has no length"):
        lowered(grad)  # nothing fed: nothing to bind N from
    result = lower(schedule([grad]), [grad], [x])
    assert [p.name for p in result.function.parameters] == ["x"]
    assert result.state_inputs == [x]
    with ng.make_transformer("interpreter") as t:
        compute = t.computation(grad, x)
        for batch in (2, 4):
            np.testing.assert_array_equal(compute(np.zeros((batch, 3))), np.ones((batch, 3)))


def test_a_concat_along_an_unknown_length_joins_its_dims():
    """Found by the fuzzer: the joined axis got a size variable of its own, unbindable."""
    A, N = ng.make_axis(2, "A"), ng.make_axis(name="N")
    x = ng.placeholder([N, A], dtype=np.float64, name="x")
    joined = ng.concat_along_axis([x, -x], N)
    flat = ng.flatten(joined)
    spread = ng.broadcast(ng.sum(joined, reduction_axes=[A]), [A, joined.axes[0]])
    assert "2*N" in str(lowered(flat, spread).function)
    with ng.make_transformer("interpreter") as t:
        compute = t.computation([flat, spread], x)
        for batch in (1, 3):
            xv = np.arange(batch * 2.0).reshape(batch, 2)
            both = np.concatenate([xv, -xv])
            flat_value, spread_value = compute(xv)
            np.testing.assert_array_equal(flat_value, both.reshape(-1))
            np.testing.assert_array_equal(spread_value,
                                          np.broadcast_to(both.sum(1), (2, 2 * batch)))


def test_lowered_function_is_cached_per_computation():
    W = ng.make_axis(2, "W")
    x = ng.placeholder([W], name="x")
    with ng.make_transformer("interpreter") as t:
        computation = t.computation(x * 2.0, x)
        computation(np.ones(2, np.float32))
        first = t.lowered(computation)
        computation(np.ones(2, np.float32))
        assert t.lowered(computation) is first
