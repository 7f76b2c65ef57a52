"""Stored tensors, computations and their calling conventions, assigns and ordering,
transformer lifecycle, and element types."""
import numpy as np
import pytest

import axgraph as ng
import axgraph.transformers.nptransform as nptransform



def _axes():
    H = ng.make_axis(3, name="H")
    W = ng.make_axis(4, name="W")
    return H, W


# -- tensor kinds (seed 003) ----------------------------------------------------------

@pytest.mark.parametrize("make, flags", [
    (lambda axes: ng.constant(np.zeros((3, 4)), axes), (True, True, False, False)),
    (lambda axes: ng.placeholder(axes), (False, True, False, True)),
    (lambda axes: ng.persistent_tensor(axes), (False, True, False, False)),
    (lambda axes: ng.variable(axes), (False, True, True, False)),
    (lambda axes: ng.temporary(axes), (False, False, False, False)),
], ids=["constant", "placeholder", "persistent_tensor", "variable", "temporary"])
def test_tensor_kind_flags(make, flags):
    H, W = _axes()
    op = make([H, W])
    assert isinstance(op, ng.AssignableTensorOp)
    assert (op.constant, op.persistent, op.trainable, op.input) == flags
    assert op.axes == ng.make_axes([H, W])


def test_constant_cannot_be_assigned():
    H, W = _axes()
    c = ng.constant(np.zeros((3, 4)), [H, W])
    with pytest.raises(ng.GraphError):
        ng.assign(c, 1.0)


def test_temporary_is_reinitialized_every_call_persistent_is_not(transformer):
    H, _ = _axes()
    tmp = ng.temporary([H], initial_value=1.0)
    per = ng.persistent_tensor([H], initial_value=1.0)
    with ng.Op.saved_user_deps():
        seq_tmp = ng.sequential([ng.assign(tmp, tmp + 1.0), tmp])
    with ng.Op.saved_user_deps():
        seq_per = ng.sequential([ng.assign(per, per + 1.0), per])
    comp = transformer.computation([seq_tmp, seq_per])
    for call in range(1, 4):
        got_tmp, got_per = comp()
        np.testing.assert_array_equal(got_tmp, np.full(3, 2.0, np.float32))
        np.testing.assert_array_equal(got_per, np.full(3, 1.0 + call, np.float32))


# -- initial values -------------------------------------------------------------------

def test_initial_value_scalar_array_callable(transformer, rng):
    H, W = _axes()
    array = rng.standard_normal((3, 4)).astype(np.float32)
    seen = []

    def init(axes):
        seen.append(axes)
        h, w = axes.lengths
        return np.array([[10 * i + j for j in range(w)] for i in range(h)])

    scalar_v = ng.variable([H, W], initial_value=2.5)
    array_v = ng.variable([H, W], initial_value=array)
    callable_v = ng.persistent_tensor([H, W], initial_value=init)
    got = transformer.computation([scalar_v, array_v, callable_v])()
    np.testing.assert_array_equal(got[0], np.full((3, 4), 2.5, np.float32))
    np.testing.assert_array_equal(got[1], array)
    expected = np.array([[10 * i + j for j in range(4)] for i in range(3)], np.float32)
    np.testing.assert_array_equal(got[2], expected)
    assert got[2].dtype == np.float32
    assert len(seen) >= 1
    assert isinstance(seen[0], ng.Axes) and seen[0] == ng.make_axes([H, W])


def test_initial_value_array_with_wrong_shape_raises():
    H, W = _axes()
    with pytest.raises(ng.AxesError):
        ng.variable([H, W], initial_value=np.zeros((4, 3)))


def test_constant_without_axes_takes_shape(transformer):
    c = ng.constant(np.arange(6.0).reshape(2, 3))
    assert c.axes.lengths == (2, 3)
    np.testing.assert_array_equal(transformer.computation(c)(),
                                  np.array([[0, 1, 2], [3, 4, 5]], np.float32))


# -- calling conventions ---------------------------------------------------------------

def test_positional_values_and_feed_dict(transformer, rng):
    H, W = _axes()
    x = ng.placeholder([H, W])
    y = ng.placeholder([W])
    xv = rng.standard_normal((3, 4)).astype(np.float32)
    yv = rng.standard_normal(4).astype(np.float32)
    expected = xv * 2.0 - yv[None, :]
    z = x * 2.0 - y

    positional = transformer.computation(z, x, y)
    np.testing.assert_allclose(positional(xv, yv), expected, rtol=1e-6)

    by_dict = transformer.computation(z)
    np.testing.assert_allclose(by_dict(feed_dict={x: xv, y: yv}), expected, rtol=1e-6)

    mixed = transformer.computation(z, x)
    np.testing.assert_allclose(mixed(xv, feed_dict={y: yv}), expected, rtol=1e-6)


def test_missing_or_extra_feeds_raise(transformer):
    H, W = _axes()
    x = ng.placeholder([H, W])
    other = ng.placeholder([H])
    comp = transformer.computation(x * 1.0, x)
    with pytest.raises(ng.FeedError):
        comp()
    with pytest.raises(ng.FeedError):
        comp(np.zeros((3, 4)), np.zeros((3, 4)))
    with pytest.raises(ng.FeedError):
        comp(np.zeros((3, 4)), feed_dict={other: np.zeros(3)})
    with pytest.raises(ng.FeedError):
        comp(np.zeros((4, 3)))


def test_result_kinds(transformer, rng):
    H, W = _axes()
    x = ng.placeholder([H, W])
    xv = rng.standard_normal((3, 4)).astype(np.float32)
    a = x + 1.0
    b = x * 3.0

    single = transformer.computation(a, x)(xv)
    assert isinstance(single, np.ndarray)
    np.testing.assert_allclose(single, xv + 1.0, rtol=1e-6)

    as_list = transformer.computation([a, b], x)(xv)
    assert isinstance(as_list, tuple) and len(as_list) == 2
    np.testing.assert_allclose(as_list[0], xv + 1.0, rtol=1e-6)
    np.testing.assert_allclose(as_list[1], xv * 3.0, rtol=1e-6)

    as_tuple = transformer.computation((b, a), x)(xv)
    assert isinstance(as_tuple, tuple) and len(as_tuple) == 2
    np.testing.assert_allclose(as_tuple[0], xv * 3.0, rtol=1e-6)
    np.testing.assert_allclose(as_tuple[1], xv + 1.0, rtol=1e-6)

    as_set = transformer.computation({a, b}, x)(xv)
    assert isinstance(as_set, dict) and set(as_set) == {a, b}
    np.testing.assert_allclose(as_set[a], xv + 1.0, rtol=1e-6)
    np.testing.assert_allclose(as_set[b], xv * 3.0, rtol=1e-6)


def test_assign_result_is_none(transformer):
    H, _ = _axes()
    w = ng.variable([H], initial_value=0.0)
    with ng.Op.saved_user_deps():
        update = ng.assign(w, w + 2.0)
    assert transformer.computation(update)() is None
    got = transformer.computation([update, w])()
    assert got[0] is None
    np.testing.assert_array_equal(got[1], np.full(3, 4.0, np.float32))


def test_each_result_in_its_own_axes_order(transformer, rng):
    H, W = _axes()
    x = ng.placeholder([H, W])
    xv = rng.standard_normal((3, 4)).astype(np.float32)
    t = ng.axes_with_order(x, [W, H])
    row = ng.placeholder([W])
    rv = rng.standard_normal(4).astype(np.float32)
    s = row + x  # (W,) + (H, W) -> (W, H)
    assert s.axes == ng.make_axes([W, H])
    got_x, got_t, got_s = transformer.computation([x * 1.0, t, s], x, row)(xv, rv)
    assert got_x.shape == (3, 4) and got_t.shape == (4, 3) and got_s.shape == (4, 3)
    np.testing.assert_array_equal(got_x, xv)
    for h in range(3):
        for w in range(4):
            assert got_t[w, h] == xv[h, w]
            np.testing.assert_allclose(got_s[w, h], rv[w] + xv[h, w], rtol=1e-6)


def test_result_can_be_the_placeholder_itself(transformer, rng):
    H, W = _axes()
    x = ng.placeholder([H, W])
    xv = rng.standard_normal((3, 4))
    got = transformer.computation(x, x)(xv)
    np.testing.assert_array_equal(got, xv.astype(np.float32))


# -- persistence, initializers, multiple computations ----------------------------------

def test_initializers_run_once(transformer):
    H, _ = _axes()
    w = ng.variable([H], initial_value=np.array([1.0, 2.0, 3.0]))
    read = transformer.computation(w)
    with ng.Op.saved_user_deps():
        step = transformer.computation(ng.assign(w, w * 3.0))
    np.testing.assert_array_equal(read(), [1.0, 2.0, 3.0])
    assert step() is None
    np.testing.assert_array_equal(read(), [3.0, 6.0, 9.0])
    step()
    np.testing.assert_array_equal(read(), [9.0, 18.0, 27.0])
    # a computation made now does not re-initialize w either
    np.testing.assert_array_equal(transformer.computation(w + 0.0)(), [9.0, 18.0, 27.0])


def test_main_stream_assign_runs_with_later_computation(transformer):
    """Seed 001: a computation of w made after assign(w, w + 1) runs the assign."""
    w = ng.variable((), initial_value=0)
    ng.assign(w, w + 1)
    w_comp = transformer.computation(w)
    assert [float(w_comp()) for _ in range(3)] == [1.0, 2.0, 3.0]


def test_saved_user_deps_keeps_assign_out_until_named(backend):
    """Seed 001: guarded assign does not run unless the computation names it."""
    w = ng.variable((), initial_value=0)
    with ng.Op.saved_user_deps():
        update_op = ng.assign(w, w + 1)
    with ng.make_transformer(backend) as t:
        w_comp = t.computation(w)
        assert [float(w_comp()) for _ in range(3)] == [0.0, 0.0, 0.0]
    with ng.make_transformer(backend) as t:
        both = t.computation([w, update_op])
        values = [both() for _ in range(3)]
        assert [float(v[0]) for v in values] == [1.0, 2.0, 3.0]
        assert all(v[1] is None for v in values)


def test_persistent_shared_in_transformer_independent_between(backend):
    H, _ = _axes()
    p = ng.persistent_tensor([H], initial_value=0.0)
    with ng.Op.saved_user_deps():
        inc = ng.assign(p, p + 1.0)
    with ng.make_transformer(backend) as t1, ng.make_transformer(backend) as t2:
        inc1, read1 = t1.computation(inc), t1.computation(p)
        inc1()
        inc1()
        np.testing.assert_array_equal(read1(), np.full(3, 2.0, np.float32))
        np.testing.assert_array_equal(t2.computation(p)(), np.zeros(3, np.float32))
        t2.computation(inc)()
        np.testing.assert_array_equal(t2.computation(p)(), np.ones(3, np.float32))
        np.testing.assert_array_equal(read1(), np.full(3, 2.0, np.float32))


def test_computations_added_after_others_ran(transformer):
    H, _ = _axes()
    w = ng.variable([H], initial_value=1.0)
    with ng.Op.saved_user_deps():
        double = ng.assign(w, w * 2.0)
    transformer.computation(double)()
    transformer.computation(double)()
    v = ng.variable([H], initial_value=np.array([1.0, 2.0, 3.0]))
    later = transformer.computation([w + v, v])
    got_sum, got_v = later()
    np.testing.assert_array_equal(got_sum, [5.0, 6.0, 7.0])
    np.testing.assert_array_equal(got_v, [1.0, 2.0, 3.0])


# -- sequential, value_of, set_item -----------------------------------------------------

def test_sequential_returns_value_of_last(transformer):
    w = ng.variable((), initial_value=0.0)
    with ng.Op.saved_user_deps():
        seq = ng.sequential([ng.assign(w, w + 1.0), w])
    comp = transformer.computation(seq)
    assert [float(comp()) for _ in range(3)] == [1.0, 2.0, 3.0]


def test_sequential_runs_in_given_order_not_creation_order(transformer):
    w = ng.variable((), initial_value=1.0)
    with ng.Op.saved_user_deps():
        doubled = ng.assign(w, w * 2.0)  # built first ...
    with ng.Op.saved_user_deps():
        set_five = ng.assign(w, 5.0)  # ... but run first
    with ng.Op.saved_user_deps():
        seq = ng.sequential([set_five, doubled, w * 1.0])
    assert float(transformer.computation(seq)()) == 10.0


def test_sequential_intermediate_value(transformer):
    H, _ = _axes()
    w = ng.variable([H], initial_value=np.array([1.0, 2.0, 3.0]))
    with ng.Op.saved_user_deps():
        seq = ng.sequential([ng.assign(w, w + 10.0), w * 2.0])
    np.testing.assert_array_equal(transformer.computation(seq)(), [22.0, 24.0, 26.0])
    np.testing.assert_array_equal(transformer.computation(seq)(), [42.0, 44.0, 46.0])


def test_value_of_keeps_value_before_later_assign(transformer):
    H, _ = _axes()
    w = ng.variable([H], initial_value=np.array([1.0, 2.0, 3.0]))
    before = ng.value_of(w)
    ng.assign(w, w * 10.0)
    comp = transformer.computation([before, w])
    got_before, got_after = comp()
    np.testing.assert_array_equal(got_before, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(got_after, [10.0, 20.0, 30.0])
    got_before, got_after = comp()
    np.testing.assert_array_equal(got_before, [10.0, 20.0, 30.0])
    np.testing.assert_array_equal(got_after, [100.0, 200.0, 300.0])


def test_setitem_whole_tensor(transformer, rng):
    H, W = _axes()
    xv = rng.standard_normal((3, 4)).astype(np.float32)
    x = ng.persistent_tensor([H, W], initial_value=xv)
    with ng.Op.saved_user_deps():
        op = ng.SetItem(x, x + x)
    assert isinstance(op, ng.AssignOp)
    assert transformer.computation(op)() is None
    np.testing.assert_allclose(transformer.computation(x)(), xv * 2, rtol=1e-6)


def test_setitem_region(transformer):
    H, W = _axes()
    base = np.arange(12.0).reshape(3, 4)
    x = ng.variable([H, W], initial_value=base)
    region = ng.constant(np.array([[-1.0, -2.0], [-3.0, -4.0]]))
    with ng.Op.saved_user_deps():
        write_block = ng.SetItem(x, (slice(1, 3), slice(0, 2)), region)
    with ng.Op.saved_user_deps():
        write_row = ng.set_item(x, 0, ng.constant(np.array([7.0, 8.0, 9.0, 10.0]), [W]))
    with ng.Op.saved_user_deps():
        write_column = ng.set_item(x, (slice(None), -1), 0.5)
    transformer.computation([write_block, write_row, write_column])()
    expected = base.copy()
    expected[1, 0], expected[1, 1], expected[2, 0], expected[2, 1] = -1, -2, -3, -4
    expected[0, :] = [7, 8, 9, 10]
    for h in range(3):
        expected[h, 3] = 0.5
    np.testing.assert_array_equal(transformer.computation(x)(), expected.astype(np.float32))


def test_assign_broadcasts_over_tensor_axes(transformer, rng):
    H, W = _axes()
    w = ng.variable([H, W], initial_value=0.0)
    row = ng.placeholder([W])
    rv = rng.standard_normal(4).astype(np.float32)
    with ng.Op.saved_user_deps():
        from_row = ng.assign(w, row)
    transformer.computation(from_row, row)(rv)
    np.testing.assert_array_equal(transformer.computation(w)(), np.tile(rv, (3, 1)))

    with ng.Op.saved_user_deps():
        from_scalar = ng.assign(w, 2.5)
    transformer.computation(from_scalar)()
    np.testing.assert_array_equal(transformer.computation(w)(), np.full((3, 4), 2.5, np.float32))

    t = ng.placeholder([W, H])  # same axes, other order
    tv = rng.standard_normal((4, 3)).astype(np.float32)
    with ng.Op.saved_user_deps():
        transposed = ng.assign(w, t)
    transformer.computation(transposed, t)(tv)
    np.testing.assert_array_equal(transformer.computation(w)(), tv.T)


def test_assign_value_with_extra_axis_raises():
    H, W = _axes()
    w = ng.variable([H], initial_value=0.0)
    with pytest.raises(ng.AxesError):
        ng.assign(w, ng.placeholder([H, W]))


# -- lengths bound from data, feeding dtypes ---------------------------------------------

def test_unknown_axis_length_bound_per_call(transformer, rng):
    C = ng.make_axis(3, name="C")
    N = ng.make_axis(name="N")
    bias = ng.constant(np.array([1.0, 2.0, 3.0]), [C])
    x = ng.placeholder([C, N])
    y = ng.sum((x + bias) * 2.0, reduction_axes=[C])
    assert y.axes == ng.make_axes([N])
    comp = transformer.computation([y, x + bias], x)
    for n in (4, 7, 4):
        xv = rng.standard_normal((3, n)).astype(np.float32)
        got_y, got_shifted = comp(xv)
        assert got_y.shape == (n,) and got_shifted.shape == (3, n)
        shifted = xv.astype(np.float64) + np.array([1.0, 2.0, 3.0])[:, None]
        np.testing.assert_allclose(got_shifted, shifted, rtol=1e-6)
        np.testing.assert_allclose(got_y, (shifted * 2).sum(axis=0), rtol=1e-5)
    assert N.length is None


def test_inconsistent_lengths_for_one_axis_raise(transformer):
    N = ng.make_axis(name="N")
    a = ng.placeholder([N])
    b = ng.placeholder([N])
    comp = transformer.computation(a + b, a, b)
    with pytest.raises(ng.FeedError):
        comp(np.zeros(3), np.zeros(4))


def test_repeat_calls_still_check_what_changed(transformer, rng):
    """A call with arrays like an earlier one skips the checks; any other is checked."""
    N = ng.make_axis(name="N")
    C = ng.make_axis(2, name="C")
    a, b = ng.placeholder([C, N]), ng.placeholder([N])
    comp = transformer.computation(a * b, a, b)
    av, bv = rng.standard_normal((2, 5)).astype(np.float32), np.ones(5, np.float32)
    for _ in range(2):
        np.testing.assert_allclose(comp(av, bv), av)
    with pytest.raises(ng.FeedError):
        comp(av, np.ones(4, np.float32))            # N bound to 5 by `a`
    with pytest.raises(ng.FeedError):
        comp(av, np.ones(5, np.float64)[None])       # wrong rank
    with pytest.raises(ng.FeedError):
        comp(av.astype(np.float64).astype(np.complex64), bv)
    np.testing.assert_allclose(comp(np.asfortranarray(av), 2 * bv), 2 * av)  # not C order
    np.testing.assert_allclose(comp(av.astype(np.float64), bv), av)         # converted
    np.testing.assert_allclose(comp(av[:, :3], bv[:3]), av[:, :3])           # a new length
    np.testing.assert_allclose(comp(av, bv), av)


def test_float64_fed_to_float32_placeholder(transformer):
    H, _ = _axes()
    x = ng.placeholder([H])
    values = np.array([0.1, 1e-3, 2.0], np.float64)
    got = transformer.computation(x * 1.0, x)(values)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, values.astype(np.float32))
    ints = transformer.computation(x * 1.0, x)(np.array([1, 2, 3], np.int64))
    np.testing.assert_array_equal(ints, np.array([1.0, 2.0, 3.0], np.float32))


def test_float_fed_to_int_placeholder_raises(transformer):
    H, _ = _axes()
    x = ng.placeholder([H], dtype=np.int32)
    comp = transformer.computation(x + 1, x)
    with pytest.raises(ng.FeedError):
        comp(np.array([0.5, 1.0, 2.0]))


# -- transformer registry and lifecycle ---------------------------------------------------

def test_make_transformer_and_choices():
    assert "numpy" in ng.transformer_choices()
    assert ng.NumPyTransformer is nptransform.NumPyTransformer
    t = ng.make_transformer("numpy")
    try:
        assert isinstance(t, nptransform.NumPyTransformer)
        assert not t.closed
        c = ng.constant(np.array([1.0, 2.0]))
        np.testing.assert_array_equal(t.computation(c * 3.0)(), [3.0, 6.0])
    finally:
        t.close()
    assert t.closed
    with pytest.raises(ValueError):
        ng.make_transformer("no-such-backend")


def test_transformer_context_manager_and_close():
    c = ng.constant(np.array([1.0, 2.0]))
    with nptransform.NumPyTransformer() as t:
        np.testing.assert_array_equal(t.computation(c + 1.0)(), [2.0, 3.0])
        assert not t.closed
    assert t.closed
    with pytest.raises(RuntimeError):
        t.computation(c)
    direct = ng.make_transformer()
    direct.close()
    assert direct.closed
    with pytest.raises(RuntimeError):
        direct.computation(c)


# -- element types -------------------------------------------------------------------------

def test_default_and_explicit_dtypes(transformer):
    H, _ = _axes()
    assert ng.placeholder([H]).dtype == np.float32
    assert ng.variable([H]).dtype == np.float32
    assert ng.constant(np.array([1, 2, 3])).dtype == np.float32
    v64 = ng.variable([H], dtype=np.float64, initial_value=np.array([1.0, 2.0, 3.0]))
    c32 = ng.constant(np.array([1, 2, 3]), [H], dtype=np.int32)
    assert v64.dtype == np.float64 and c32.dtype == np.int32
    x = ng.placeholder([H])
    added = ng.add(x, x, dtype=np.float64)
    assert added.dtype == np.float64
    got_v, got_c, got_add = transformer.computation([v64, c32, added], x)(
        np.array([0.5, 1.5, 2.5]))
    assert got_v.dtype == np.float64 and got_c.dtype == np.int32 and got_add.dtype == np.float64
    np.testing.assert_array_equal(got_c, [1, 2, 3])
    np.testing.assert_array_equal(got_add, [1.0, 3.0, 5.0])


def test_argmax_int32_and_comparisons_bool(transformer):
    C = ng.make_axis(3, name="C")
    N = ng.make_axis(4, name="N")
    x = ng.placeholder([C, N])
    xv = np.array([[0.0, 5.0, -1.0, 2.0],
                   [3.0, 1.0, -2.0, 2.5],
                   [1.0, 0.0, -3.0, 9.0]], np.float32)
    am = ng.argmax(x, reduction_axes=[C])
    gt = x > 1.0
    eq = ng.equal(x, 2.0)
    assert am.dtype == np.int32 and gt.dtype == np.bool_ and eq.dtype == np.bool_
    got_am, got_gt, got_eq = transformer.computation([am, gt, eq], x)(xv)
    assert got_am.dtype == np.int32 and got_gt.dtype == np.bool_ and got_eq.dtype == np.bool_
    np.testing.assert_array_equal(got_am, [1, 0, 0, 2])
    np.testing.assert_array_equal(got_gt, [[v > 1.0 for v in row] for row in xv])
    np.testing.assert_array_equal(got_eq, [[v == 2.0 for v in row] for row in xv])


def test_python_numbers_adopt_tensor_dtype(transformer):
    H, _ = _axes()
    x = ng.placeholder([H])
    i = ng.placeholder([H], dtype=np.int32)
    fx = x + 1
    fi = i + 1
    gi = 2 * i - 3
    hi = i + 0.5
    assert fx.dtype == np.float32
    assert fi.dtype == np.int32 and gi.dtype == np.int32
    assert hi.dtype == np.float32
    got = transformer.computation([fx, fi, gi, hi], x, i)(
        np.array([0.25, 1.0, 2.0], np.float32), np.array([1, 2, 3], np.int32))
    assert [g.dtype for g in got] == [np.float32, np.int32, np.int32, np.float32]
    np.testing.assert_array_equal(got[0], [1.25, 2.0, 3.0])
    np.testing.assert_array_equal(got[1], [2, 3, 4])
    np.testing.assert_array_equal(got[2], [-1, 1, 3])
    np.testing.assert_array_equal(got[3], [1.5, 2.5, 3.5])


# -- variables() -----------------------------------------------------------------------------

def test_variables_in_creation_order():
    H, W = _axes()
    first = ng.variable([H], initial_value=0.0)
    second = ng.variable([W], initial_value=0.0)
    third = ng.variable([H, W], initial_value=0.0)
    velocity = ng.persistent_tensor([H], initial_value=0.0)
    x = ng.placeholder([H, W])
    cost = ng.squared_L2(third * x + second + first + velocity)  # uses them out of order
    assert cost.variables() == [first, second, third]
    assert (second * x).variables() == [second]
    assert (x * 2.0).variables() == []


def test_a_computation_with_nothing_to_do_returns_none(transformer):
    """An init op of no variables (doall of nothing), alone or beside a value: it runs,
    returns None, and computes nothing (on every transformer, as on numpy)."""
    H, _ = _axes()
    x = ng.placeholder([H])
    assert transformer.computation(ng.doall([]))() is None
    nothing, doubled = transformer.computation([ng.doall([]), x * 2.0], x)(
        np.arange(3, dtype=np.float32))
    assert nothing is None
    np.testing.assert_array_equal(doubled, [0.0, 2.0, 4.0])
