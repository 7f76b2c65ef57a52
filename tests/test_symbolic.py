"""Sizes known only when data is fed: axes graphs with a batch axis of unknown length (or
of a symbolic length), differentiated and run on every backend against the NumPy
reference, and the one binding path every backend shares."""
import numpy as np
import pytest

import axgraph as ng

COMPILED = ["interpreter", "cpu"]


def _run(backend, results, placeholders, values):
    with ng.make_transformer(backend) as t:
        return t.computation(results, *placeholders)(*values)


@pytest.mark.parametrize("backend", COMPILED)
@pytest.mark.parametrize("batch", [4, 1])
def test_slice_in_a_gradient_with_an_unknown_batch_size(backend, batch, rng):
    # The slice's adjoint pads the gradient back to the sliced axis; with the batch
    # length unknown the padded region's count along N is the size variable N, and
    # lowering once asked `if count:` of it (TypeError: the truth of symbolic dim N).
    N = ng.make_axis(name="N")
    F = ng.make_axis(length=6, name="F")
    x = ng.placeholder([F, N], dtype=np.float64)
    w = ng.variable([F], initial_value=np.linspace(-1, 1, 6), dtype=np.float64)
    cost = ng.sum(ng.tanh(x * w)[1:4, :], out_axes=())
    results = [cost, ng.deriv(cost, x), ng.deriv(cost, w)]
    xv = rng.standard_normal((6, batch))
    got = _run(backend, results, [x], [xv])
    expected = _run("numpy", results, [x], [xv])
    wv = np.linspace(-1, 1, 6)
    # by hand: d/dx tanh(x w) = w (1 - tanh^2), on rows 1..3 only
    inside = np.zeros((6, 1))
    inside[1:4] = 1
    dx = inside * wv[:, None] * (1 - np.tanh(xv * wv[:, None]) ** 2)
    dw = np.sum(inside * xv * (1 - np.tanh(xv * wv[:, None]) ** 2), axis=1)
    np.testing.assert_allclose(expected[1], dx, rtol=1e-12)
    np.testing.assert_allclose(expected[2], dw, rtol=1e-12)
    for value, reference in zip(got, expected):
        np.testing.assert_allclose(value, reference, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("backend", ["numpy"] + COMPILED)
def test_a_batch_axis_of_symbolic_length_is_bound_from_the_data(backend, rng):
    # ng.make_axis(length=Dim("N")): the length is the size variable N, unified with
    # the fed shapes as every backend unifies a core Function's parameter shapes.
    N = ng.make_axis(length=ng.core.Dim("N"), name="N")
    F = ng.make_axis(length=5, name="F")
    x = ng.placeholder([F, N], dtype=np.float64)
    y = ng.placeholder([N], dtype=np.float64)
    cost = ng.sum(ng.tanh(x)[0:2, :] * y, out_axes=())
    results = [cost, ng.deriv(cost, x)]
    xv, yv = rng.standard_normal((5, 3)), rng.standard_normal(3)
    with ng.make_transformer(backend) as t:
        f = t.computation(results, x, y)
        value, gradient = f(xv, yv)
        expected = np.zeros((5, 3))
        expected[0:2] = (1 - np.tanh(xv[0:2]) ** 2) * yv
        np.testing.assert_allclose(value, np.sum(np.tanh(xv[0:2]) * yv), rtol=1e-12)
        np.testing.assert_allclose(gradient, expected, rtol=1e-12)
        assert f(xv[:, :1], yv[:1])[1].shape == (5, 1)  # another batch length, same computation
        with pytest.raises(ng.FeedError) as info:
            f(xv, yv[:2])
    message = info.value.message
    assert "dim 0: dims differ: N vs 2 (with N = 3)" in message and "takes shape (N)" in message
    assert "test_symbolic.py" in str(info.value)


@pytest.mark.parametrize("backend", ["numpy"] + COMPILED)
def test_axis_lengths_that_are_expressions_solve_for_their_variable(backend, rng):
    T = ng.core.Dim("T")
    whole = ng.make_axis(length=2 * T + 1, name="S")
    half = ng.make_axis(length=T, name="H")
    x = ng.placeholder([whole], dtype=np.float64)
    y = ng.placeholder([half], dtype=np.float64)
    with ng.make_transformer(backend) as t:
        f = t.computation([ng.sum(x, out_axes=()), y * 2.0], x, y)
        total, doubled = f(np.arange(7.0), np.arange(3.0))  # T = 3
        assert total == 21.0 and doubled.tolist() == [0.0, 2.0, 4.0]
        with pytest.raises(ng.FeedError, match="T would have to be 5/2"):
            f(np.arange(6.0), np.arange(3.0))
        with pytest.raises(ng.FeedError, match=r"dims differ: T vs 4 \(with T = 3\)"):
            f(np.arange(7.0), np.arange(4.0))


def test_slicing_an_axis_of_symbolic_length_asks_for_a_known_length():
    N = ng.make_axis(length=ng.core.Dim("N"), name="N")
    x = ng.placeholder([N], name="xs")
    with pytest.raises(ng.AxisLengthError, match=r"axis N needs a known length .*\(it has N\)"):
        x[1:3]
    assert x[:].axes == x.axes  # taking all of it needs no length


@pytest.mark.parametrize("backend", COMPILED)
def test_passes_decide_questions_about_symbolic_sizes(backend, rng):
    # Each rewrite below asks about a dim that is N: is the slice everything
    # (upper == N), is the pad empty, is a concat input empty (0 rows: dropped; N rows:
    # kept, N may be 0 only at run time)? None may ask `bool(N)`.
    from axgraph import core, passes

    N = core.Dim("N")
    x = core.Parameter(core.f64, (N, 3), name="x")
    everything = core.Slice(x, (0, 0), (N + 1 - 1, 3))
    unpadded = core.Pad(core.Exp(everything), (0, 0), (0, 0), (0, 0))
    empty = core.Constant(core.f64, (0, 3), 0.0)
    joined = core.Concat([empty, unpadded, empty], 0)
    f = core.Function([joined], [x])
    optimized = passes.optimize(f)
    assert [node.op for node in optimized.nodes] == ["Parameter", "Exp"]
    for rows in (4, 0):
        xv = rng.standard_normal((rows, 3))
        (got,) = core.compile(optimized, backend)(xv)
        np.testing.assert_allclose(got, np.exp(xv), rtol=1e-15)


@pytest.mark.parametrize("backend", ["numpy"] + COMPILED)
def test_an_axis_without_length_is_not_a_symbolic_length_of_the_same_name(backend):
    # The axis N without a length gets a size variable of its own, not the user's N.
    unset = ng.make_axis(name="N")
    symbolic = ng.make_axis(length=ng.core.Dim("N"), name="B")
    x = ng.placeholder([unset], dtype=np.float64)
    y = ng.placeholder([symbolic], dtype=np.float64)
    with ng.make_transformer(backend) as t:
        f = t.computation([ng.sum(x, out_axes=()), ng.sum(y, out_axes=())], x, y)
        assert [float(v) for v in f(np.ones(2), np.ones(5))] == [2.0, 5.0]


@pytest.mark.parametrize("backend", COMPILED)
def test_a_placeholder_on_a_joined_axis_binds_the_parts_lengths_together(backend, rng):
    # The joined axis of a concat along B (no length) is as long as the parts together,
    # 2*B: a placeholder on it, read before the concat is computed (`sequential` puts
    # y * y first), must bind that sum, not a size variable of its own that the concat's
    # result then fails to match (found by the fuzzer: seed 2029, example 352).
    batch, column = ng.make_axis(name="B"), ng.make_axis(length=3, name="C")
    x = ng.placeholder([column, batch], dtype=np.float64)
    joined = ng.concat_along_axis([x, ng.tanh(x)], batch)
    wide = next(a for a in joined.axes if a.name == "B")
    y = ng.placeholder([wide], dtype=np.float64)
    extra = ng.make_axis(length=2, name="D")
    shifted = joined + ng.constant(np.ones(2), [extra], dtype=np.float64)  # a broadcast
    squares = y * y
    results = [squares, ng.sequential([squares, shifted * y])]
    for n in (4, 1):
        a, b = rng.standard_normal((3, n)), rng.standard_normal(2 * n)
        squared, total = _run(backend, results, [x, y], [a, b])
        reference = np.concatenate([a, np.tanh(a)], axis=1)[:, :, None] + np.ones(2)
        np.testing.assert_allclose(squared, b * b)
        np.testing.assert_allclose(total, reference * b[None, :, None])
    with pytest.raises(ng.FeedError):
        _run(backend, results, [x, y], [rng.standard_normal((3, 4)), rng.standard_normal(7)])


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_a_symbolic_slice_that_does_not_fit_the_sizes_is_an_error_not_an_empty_result(backend):
    from axgraph import core

    N = core.Dim("N")
    x = core.Parameter(core.f32, core.Shape(N))
    executable = core.compile(core.Function([core.Slice(x, [2], [N])], [x]), backend=backend)
    with pytest.raises(ng.ExecutionError, match=r"(?s)Slice.*N - 2.*\[-1\].*N = 1.*test_symbolic"):
        executable(np.ones(1, np.float32))
    (values,) = executable(np.arange(5, dtype=np.float32))     # a later call that fits runs
    np.testing.assert_array_equal(values, np.arange(5, dtype=np.float32)[2:])


@pytest.mark.parametrize("backend", ["numpy"] + COMPILED)
def test_a_scalar_constant_over_an_axis_without_length_fills_the_fed_length(backend):
    M = ng.make_axis(name="M")
    x = ng.placeholder([M])
    fed = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    (values,) = _run(backend, [ng.constant(2.0, [M]) * x], [x], [fed])
    np.testing.assert_array_equal(values, 2.0 * fed)


STORED_KINDS = {
    "constant": lambda value, axes: ng.constant(value, axes),
    "variable": lambda value, axes: ng.variable(axes, initial_value=value),
    "persistent_tensor": lambda value, axes: ng.persistent_tensor(axes, initial_value=value),
}


@pytest.mark.parametrize("backend", ["numpy"] + COMPILED)
@pytest.mark.parametrize("kind", sorted(STORED_KINDS))
@pytest.mark.parametrize("initial", ["array", "callable"])
def test_an_array_initial_value_over_an_axis_without_length_takes_the_fed_length(
        backend, kind, initial):
    # The value is made at the first call, once the fed data has bound M; a constant
    # whose lengths are known is still folded while lowering (a fixed-length graph).
    M = ng.make_axis(name="M")
    K = ng.make_axis(length=2, name="K")
    x = ng.placeholder([M, K])
    rows = np.array([[1.0], [2.0], [3.0]], np.float32)  # broadcast over K
    stored = STORED_KINDS[kind](rows if initial == "array" else (lambda: rows), [M, K])
    fed = np.arange(6, dtype=np.float32).reshape(3, 2)
    (values,) = _run(backend, [stored * x + x], [x], [fed])
    np.testing.assert_array_equal(values, rows * fed + fed)


@pytest.mark.parametrize("backend", ["numpy"] + COMPILED)
def test_a_constant_made_from_fed_lengths_refuses_a_call_with_other_lengths(backend):
    M = ng.make_axis(name="M")
    x = ng.placeholder([M])
    made = ng.constant(lambda: np.arange(4.0), [M])
    with ng.make_transformer(backend) as t:
        add = t.computation(made + x, x)
        np.testing.assert_array_equal(add(np.ones(4, np.float32)), np.arange(4.0) + 1.0)
        with pytest.raises(ng.FeedError, match=r"(?s)holds axis M = 4.*feeds M = 3"):
            add(np.ones(3, np.float32))
        np.testing.assert_array_equal(add(np.full(4, 2.0, np.float32)), np.arange(4.0) + 2.0)


@pytest.mark.parametrize("backend", ["numpy"] + COMPILED)
def test_a_callable_initial_value_of_the_wrong_shape_for_the_fed_length_is_one_error(backend):
    M = ng.make_axis(name="M")
    x = ng.placeholder([M])
    made = ng.constant(lambda: np.arange(5.0), [M])
    with pytest.raises(ng.AxgraphError) as raised:
        _run(backend, [made + x], [x], [np.ones(4, np.float32)])
    assert type(raised.value) is type(_wrong_shape_error_on_numpy())
    assert "test_symbolic" in str(raised.value)


def _wrong_shape_error_on_numpy() -> Exception:
    M = ng.make_axis(name="M")
    x = ng.placeholder([M])
    try:
        _run("numpy", [ng.constant(lambda: np.arange(5.0), [M]) + x], [x],
             [np.ones(4, np.float32)])
    except ng.AxgraphError as error:
        return error
    raise AssertionError("the reference accepted an initial value of the wrong shape")


def test_only_a_constant_waiting_for_fed_lengths_becomes_a_state_input():
    # A constant whose lengths are all known is folded while lowering, as before.
    M = ng.make_axis(name="M")
    K = ng.make_axis(length=3, name="K")
    x = ng.placeholder([M, K])
    folded = ng.constant(lambda: np.arange(3.0), [K])
    waiting = ng.constant(lambda: np.arange(2.0).reshape(2, 1), [M, K])
    with ng.make_transformer("interpreter") as t:
        lowered = t.lowered(t.computation(x * folded + waiting, x))
    assert waiting in lowered.state_inputs and folded not in lowered.state_inputs
