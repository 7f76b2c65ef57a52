"""axgraph.testing: the helpers users write their own tests with.

Every Jacobian below is compared with one written out by hand in NumPy, and
every failure path is provoked for real (a wrong adjoint rule, a float32 graph),
so that check_derivative is shown to be able to fail.
"""
import numpy as np
import pytest

import axgraph as ng
from axgraph import autodiff
from axgraph.op_graph import elementwise as ew
from axgraph.testing import (ExecutorFactory, RandomTensorGenerator, assert_allclose,
                             check_derivative, executor, numeric_derivative, numeric_jacobian)

F64 = np.float64


@pytest.fixture
def axes():
    return ng.make_axis(3, "A"), ng.make_axis(4, "B"), ng.make_axis(2, "C")


# -- ExecutorFactory ------------------------------------------------------------------------

def test_factory_is_a_context_manager_that_closes_its_transformer(backend):
    with ExecutorFactory(backend) as ex:
        assert isinstance(ex, ExecutorFactory)
        assert ex.backend == backend
        assert isinstance(ex.transformer, ng.NumPyTransformer) or backend != "numpy"
        assert ex.transformer.closed is False
    assert ex.transformer.closed is True
    with pytest.raises(RuntimeError):
        ex.transformer.computation(ng.constant(1.0))


def test_factory_closes_its_transformer_when_the_body_raises(backend):
    with pytest.raises(KeyError):
        with ExecutorFactory(backend) as ex:
            raise KeyError("boom")
    assert ex.transformer.closed


def test_factory_backend_defaults_to_the_environment(monkeypatch):
    monkeypatch.delenv("AXGRAPH_TRANSFORMER", raising=False)
    with ExecutorFactory() as ex:
        assert ex.backend == "numpy"
    monkeypatch.setenv("AXGRAPH_TRANSFORMER", "numpy")
    with ExecutorFactory() as ex:
        assert ex.backend == "numpy"
        assert ex.transformer.transformer_name == "numpy"


def test_executor_computes_results_positionally(backend, rng, axes):
    A, B, _ = axes
    x = ng.placeholder([A, B], dtype=F64)
    y = ng.placeholder([B], dtype=F64)
    xv, yv = rng.standard_normal((3, 4)), rng.standard_normal(4)
    with ExecutorFactory(backend) as ex:
        single = ex.executor(x * 2.0 + y, x, y)
        np.testing.assert_allclose(single(xv, yv), xv * 2 + yv, rtol=1e-15)
        pair = ex.executor([ng.sum(x, reduction_axes=[A]), ng.exp(y)], x, y)
        total, e = pair(xv, yv)
        np.testing.assert_allclose(total, xv.sum(axis=0), rtol=1e-14)
        np.testing.assert_allclose(e, np.exp(yv), rtol=1e-15)


def test_get_tensor_view_value_copies_a_stored_tensor(backend, axes):
    A = axes[0]
    v = ng.variable([A], dtype=F64, initial_value=np.array([1.0, 2.0, 3.0]))
    with ExecutorFactory(backend) as ex:
        value = ex.get_tensor_view_value(v)
        np.testing.assert_array_equal(value, [1.0, 2.0, 3.0])
        value[0] = 100.0
        np.testing.assert_array_equal(ex.get_tensor_view_value(v), [1.0, 2.0, 3.0])


# -- ExecutorFactory.derivative / numeric_derivative -----------------------------------------

def _broadcast_multiply_case(rng, axes):
    """f = x * w: x (A, B), w (B, C) -> f (A, B, C); J[a,b,c,a',b'] = w[b,c] d_aa' d_bb'."""
    A, B, C = axes
    x = ng.placeholder([A, B], dtype=F64)
    wv = rng.standard_normal((4, 2))
    f = x * ng.constant(wv, [B, C], dtype=F64)
    expected = np.zeros((3, 4, 2, 3, 4))
    for a, b, c in np.ndindex(3, 4, 2):
        expected[a, b, c, a, b] = wv[b, c]
    return x, f, rng.standard_normal((3, 4)), expected


def test_derivative_is_the_full_jacobian(backend, rng, axes):
    x, f, xv, expected = _broadcast_multiply_case(rng, axes)
    with ExecutorFactory(backend) as ex:
        jacobian = ex.derivative(f, x)(xv)
    assert jacobian.shape == (3, 4, 2) + (3, 4)
    np.testing.assert_allclose(jacobian, expected, rtol=1e-15)


def test_derivative_of_a_matrix_product_is_the_matrix(backend, rng, axes):
    A, B, _ = axes
    x = ng.placeholder([B], dtype=F64)
    mv = rng.standard_normal((3, 4))
    f = ng.dot(ng.constant(mv, [A, B], dtype=F64), x)
    xv = rng.standard_normal(4)
    with ExecutorFactory(backend) as ex:
        np.testing.assert_allclose(ex.derivative(f, x)(xv), mv, rtol=1e-15)
        np.testing.assert_allclose(ex.numeric_derivative(f, x, 1e-6)(xv), mv, rtol=1e-8)


def test_derivative_of_a_nonlinear_function_with_parameters(backend, rng, axes):
    """f = sin(x) * y over (A, B) x (B,), differentiated w.r.t. y with x as parameter."""
    A, B, _ = axes
    x = ng.placeholder([A, B], dtype=F64)
    y = ng.placeholder([B], dtype=F64)
    xv, yv = rng.standard_normal((3, 4)), rng.standard_normal(4)
    f = ng.sin(x) * ng.exp(y)
    expected_dy = np.zeros((3, 4, 4))
    expected_dx = np.zeros((3, 4, 3, 4))
    for a, b in np.ndindex(3, 4):
        expected_dy[a, b, b] = np.sin(xv[a, b]) * np.exp(yv[b])
        expected_dx[a, b, a, b] = np.cos(xv[a, b]) * np.exp(yv[b])
    with ExecutorFactory(backend) as ex:
        np.testing.assert_allclose(ex.derivative(f, y, x)(yv, xv), expected_dy, rtol=1e-14)
        np.testing.assert_allclose(ex.derivative(f, x, y)(xv, yv), expected_dx, rtol=1e-14)
        np.testing.assert_allclose(ex.numeric_derivative(f, y, 1e-6, x)(yv, xv), expected_dy,
                                   rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(ex.numeric_derivative(f, x, 1e-6, y)(xv, yv), expected_dx,
                                   rtol=1e-7, atol=1e-9)


def test_derivative_of_a_scalar_is_the_gradient(backend, rng, axes):
    A, B, _ = axes
    x = ng.placeholder([A, B], dtype=F64)
    xv = rng.standard_normal((3, 4))
    f = ng.sum(x * x * x, reduction_axes=[A, B])
    with ExecutorFactory(backend) as ex:
        gradient = ex.derivative(f, x)(xv)
        numeric = ex.numeric_derivative(f, x, 1e-5)(xv)
    assert gradient.shape == (3, 4) and numeric.shape == (3, 4)
    np.testing.assert_allclose(gradient, 3 * xv ** 2, rtol=1e-14)
    np.testing.assert_allclose(numeric, 3 * xv ** 2, rtol=1e-7, atol=1e-9)


def test_derivative_binds_unset_lengths_from_the_values(backend, rng):
    A, N = ng.make_axis(3, "A"), ng.make_axis(name="N")
    x = ng.placeholder([A, N], dtype=F64)
    f = ng.tanh(x)
    xv = rng.standard_normal((3, 2))
    with ExecutorFactory(backend) as ex:
        jacobian = ex.derivative(f, x)(xv)
    assert N.length is None  # feeding binds the length for that call only
    expected = np.zeros((3, 2, 3, 2))
    for a, n in np.ndindex(3, 2):
        expected[a, n, a, n] = 1 - np.tanh(xv[a, n]) ** 2
    # 1 - tanh² near tanh = ±1 magnifies the last-place rounding of tanh (libm's, XLA's)
    # a hundredfold
    np.testing.assert_allclose(jacobian, expected, rtol=1e-13)


def test_numeric_derivative_is_the_full_jacobian(backend, rng, axes):
    x, f, xv, expected = _broadcast_multiply_case(rng, axes)
    with ExecutorFactory(backend) as ex:
        numeric = ex.numeric_derivative(f, x, 1e-4)(xv)
    assert numeric.shape == (3, 4, 2, 3, 4)
    np.testing.assert_allclose(numeric, expected, rtol=1e-9, atol=1e-10)


def test_module_numeric_derivative_inside_and_outside_a_factory(backend, rng, axes):
    A, _, _ = axes
    x = ng.placeholder([A], dtype=F64)
    f = ng.exp(x)
    xv = rng.standard_normal(3)
    with ExecutorFactory(backend):
        inside = numeric_derivative(f, x, 1e-6)(xv)
    outside = numeric_derivative(f, x, 1e-6)(xv)
    for numeric in (inside, outside):
        np.testing.assert_allclose(numeric, np.diag(np.exp(xv)), rtol=1e-8, atol=1e-10)


def test_numeric_jacobian_of_a_numpy_function():
    m = np.array([[1.0, 2.0, 0.0], [0.5, -1.0, 3.0]])
    x = np.array([0.2, -0.7, 1.5])
    saved = x.copy()
    np.testing.assert_allclose(numeric_jacobian(lambda v: m @ v, x, 1e-3), m, rtol=1e-10)
    np.testing.assert_array_equal(x, saved)  # x is not modified
    # A square: the Jacobian of v**2 is diag(2 v); integer input is differentiated as float.
    jacobian = numeric_jacobian(lambda v: v ** 2, np.array([1, 2, 3]), 1e-3)
    assert jacobian.dtype.kind == "f"
    np.testing.assert_allclose(jacobian, np.diag([2.0, 4.0, 6.0]), rtol=1e-9)
    # Shape: f(x).shape + x.shape.
    y = np.arange(6.0).reshape(2, 3)
    assert numeric_jacobian(lambda v: v.sum(axis=0), y, 1e-3).shape == (3, 2, 3)


# -- executor() ---------------------------------------------------------------------------

def test_executor_context_manager_closes_its_transformer(backend, rng, axes):
    A, _, _ = axes
    x = ng.placeholder([A], dtype=F64)
    xv = rng.standard_normal(3)
    with executor(ng.square(x) - 1.0, x, backend=backend) as computation:
        np.testing.assert_allclose(computation(xv), xv ** 2 - 1, rtol=1e-15)
        transformer = computation.transformer
        assert not transformer.closed
    assert transformer.closed
    with pytest.raises(RuntimeError):
        transformer.computation(x)


def test_executor_context_manager_closes_on_error(backend, axes):
    x = ng.placeholder([axes[0]], dtype=F64)
    with pytest.raises(ValueError):
        with executor(x * 2.0, x, backend=backend) as computation:
            transformer = computation.transformer
            raise ValueError("boom")
    assert transformer.closed


def test_executor_without_parameters(backend):
    with executor(ng.constant(2.0) * 3.0, backend=backend) as computation:
        assert float(computation()) == 6.0


# -- check_derivative -----------------------------------------------------------------------

def test_check_derivative_passes_for_correct_graphs(backend, rng, axes):
    A, B, C = axes
    x = ng.placeholder([A, B], dtype=F64)
    y = ng.placeholder([B, C], dtype=F64)
    xv, yv = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    with ExecutorFactory(backend):
        check_derivative(ng.tanh(x) * ng.sin(y), x, 1e-6, xv, [y], [yv])
        check_derivative(ng.tanh(x) * ng.sin(y), y, 1e-6, yv, [x], [xv])
        check_derivative(ng.sum(ng.dot(x, y) ** 2, reduction_axes=[A, C]), x, 1e-6, xv, [y], [yv])
        check_derivative(ng.exp(x), x, 1e-6, xv, rtol=1e-6, atol=1e-9)


def test_check_derivative_outside_a_factory(rng, axes):
    A, _, _ = axes
    x = ng.placeholder([A], dtype=F64)
    check_derivative(ng.cos(x) * x, x, 1e-6, rng.standard_normal(3))


def test_check_derivative_fails_for_a_wrong_adjoint_rule(backend, rng, axes, monkeypatch):
    A, B, _ = axes
    x = ng.placeholder([A, B], dtype=F64)
    xv = rng.uniform(0.5, 1.5, (3, 4))
    f = ng.sin(x) * 2.0
    with ExecutorFactory(backend):
        check_derivative(f, x, 1e-6, xv)  # the true rule passes
    # d sin(x) = -cos(x) instead of cos(x): a sign error in the table.
    monkeypatch.setitem(autodiff.ADJOINTS, ew.Sin, lambda op, d: [-d * ew.cos(op.args[0])])
    with ExecutorFactory(backend):
        with pytest.raises(AssertionError):
            check_derivative(f, x, 1e-6, xv)


def test_check_derivative_tolerances_decide_a_slightly_wrong_rule(backend, rng, axes, monkeypatch):
    A, _, _ = axes
    x = ng.placeholder([A], dtype=F64)
    xv = rng.uniform(0.5, 1.5, 3)
    monkeypatch.setitem(autodiff.ADJOINTS, ew.Exp, lambda op, d: [d * op * 1.001])
    f = ng.exp(x)
    with ExecutorFactory(backend):
        with pytest.raises(AssertionError):
            check_derivative(f, x, 1e-6, xv)  # default rtol 1e-4
        check_derivative(f, x, 1e-6, xv, rtol=1e-2)


@pytest.mark.parametrize("x_dtype,f_dtype,named", [
    (np.float32, np.float32, "f sin_x is float32 and px x is float32"),
    (F64, np.float32, "f sin_x is float32"),
    (np.float32, F64, "px x is float32"),
])
def test_check_derivative_refuses_a_graph_that_is_not_float64(backend, axes, x_dtype, f_dtype,
                                                               named):
    """Central differences in float32 are mostly rounding: a DTypeError at the caller's line
    says to build the graph in float64, instead of a numeric assertion."""
    A, _, _ = axes
    x = ng.placeholder([A], dtype=x_dtype, name="x")
    f = ng.sum(ng.sin(x) * 1000.0, out_axes=(), dtype=f_dtype, name="sin_x")
    xv = np.array([0.3, 1.1, 2.0], dtype=x_dtype)
    with ExecutorFactory(backend):
        with pytest.raises(ng.DTypeError) as info:
            check_derivative(f, x, 1e-2, xv, rtol=1e-3, atol=1e-3)
    message = str(info.value)
    assert "check_derivative of sin_x with respect to x needs a float64 graph" in message
    assert named in message
    assert "dtype=np.float64 on its placeholders and variables" in message
    assert info.value.location == (__file__, info.tb.tb_lineno)
    assert not isinstance(info.value, AssertionError)


def test_check_derivative_compares_a_float64_graph_that_float32_could_not(backend, axes):
    """The graph refused in float32 passes in float64 with a step float32 cannot resolve."""
    A, _, _ = axes
    x = ng.placeholder([A], dtype=F64)
    f = ng.sin(x) * 1000.0
    with ExecutorFactory(backend):
        check_derivative(f, x, 1e-7, np.array([0.3, 1.1, 2.0]), rtol=1e-6, atol=0)


# -- assert_allclose ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,rtol,atol", [(np.float16, 1e-2, 1e-3), (np.float32, 1e-5, 1e-6),
                                             (np.float64, 1e-10, 1e-12)])
def test_assert_allclose_default_tolerances_by_dtype(dtype, rtol, atol):
    one = np.array([1.0], dtype=dtype)
    zero = np.array([0.0], dtype=dtype)
    # Within the relative tolerance (desired kept in float64 so no rounding blurs it).
    assert_allclose(one, np.array([1.0 + rtol / 2]))
    with pytest.raises(AssertionError):
        assert_allclose(one, np.array([1.0 + rtol * 3]))
    # Within the absolute tolerance near zero.
    assert_allclose(zero, np.array([atol / 2]))
    with pytest.raises(AssertionError):
        assert_allclose(zero, np.array([atol * 3]))


def test_assert_allclose_float64_is_tighter_than_float32():
    desired = np.array([1.0 + 1e-8])
    assert_allclose(np.array([1.0], dtype=np.float32), desired)
    with pytest.raises(AssertionError):
        assert_allclose(np.array([1.0], dtype=np.float64), desired)


def test_assert_allclose_explicit_tolerances_and_message():
    assert_allclose(np.array([1.0]), np.array([1.1]), rtol=0.2)
    assert_allclose(np.array([0.0]), np.array([0.05]), atol=0.1)
    with pytest.raises(AssertionError, match="my context"):
        assert_allclose(np.array([1.0]), np.array([2.0]), err_msg="my context")


def test_assert_allclose_takes_the_active_transformers_tolerances(backend):
    with ExecutorFactory(backend) as outer:
        outer.transformer.default_rtol = 0.5
        outer.transformer.default_atol = 0.0
        assert_allclose(np.array([1.0]), np.array([1.2]))
        with ExecutorFactory(backend):
            with pytest.raises(AssertionError):
                assert_allclose(np.array([1.0]), np.array([1.2]))  # inner states none
        assert_allclose(np.array([1.0]), np.array([1.2]))  # outer is active again
        with pytest.raises(AssertionError):
            assert_allclose(np.array([1.0]), np.array([1.2]), rtol=1e-3)
    with pytest.raises(AssertionError):
        assert_allclose(np.array([1.0]), np.array([1.2]))  # none active


# -- RandomTensorGenerator ----------------------------------------------------------------------

@pytest.fixture
def big():
    return ng.make_axis(200, "P"), ng.make_axis(250, "Q")


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("low,high", [(0.0, 1.0), (-3.0, 2.0), (10.0, 10.5)])
def test_uniform_lies_in_the_half_open_interval(big, dtype, low, high):
    values = RandomTensorGenerator(7).uniform(low, high, big, dtype=dtype)
    assert values.shape == (200, 250)
    assert values.dtype == np.dtype(dtype)
    assert values.min() >= low
    assert values.max() < high, f"{np.sum(values >= high)} samples equal high"
    # Spread over the interval: both tenths at the ends are hit, mean in the middle.
    span = high - low
    assert values.min() < low + 0.1 * span and values.max() > high - 0.1 * span
    assert abs(values.astype(F64).mean() - (low + high) / 2) < 0.02 * span


def test_uniform_default_dtype_is_the_generators(big):
    assert RandomTensorGenerator(1).uniform(0, 1, big).dtype == np.float32
    assert RandomTensorGenerator(1, dtype=np.float64).uniform(0, 1, big).dtype == np.float64


def test_normal_mean_and_std(big):
    values = RandomTensorGenerator(3, dtype=np.float64).normal(2.0, 0.5, big)
    assert values.shape == (200, 250)
    assert abs(values.mean() - 2.0) < 0.01
    assert abs(values.std() - 0.5) < 0.01
    # Roughly normal: about 68% within one standard deviation.
    assert abs(np.mean(np.abs(values - 2.0) < 0.5) - 0.6827) < 0.01


@pytest.mark.parametrize("low,high,quantum,grid", [
    (-1.0, 1.0, 0.25, np.arange(-1.0, 1.0001, 0.25)),
    (0.0, 1.0, 0.3, np.array([0.0, 0.3, 0.6, 0.9])),
    (2.0, 5.0, 1.0, np.array([2.0, 3.0, 4.0, 5.0])),
])
def test_discrete_uniform_values_lie_on_the_grid(big, low, high, quantum, grid):
    values = RandomTensorGenerator(11, dtype=np.float64).discrete_uniform(low, high, quantum, big)
    assert values.shape == (200, 250)
    assert values.min() >= low and values.max() <= high
    k = (values - low) / quantum
    np.testing.assert_allclose(k, np.round(k), atol=1e-9)  # low + k * quantum
    np.testing.assert_allclose(np.unique(values), grid, atol=1e-12)  # every grid point drawn
    # Uniform over the grid: each value about equally often.
    counts = np.unique(values, return_counts=True)[1]
    assert counts.min() > 0.9 * values.size / len(grid)


def test_random_integers_include_both_ends(big):
    values = RandomTensorGenerator(5).random_integers(-2, 3, big)
    assert values.dtype == np.int32
    assert values.shape == (200, 250)
    assert values.min() == -2 and values.max() == 3
    assert set(np.unique(values).tolist()) == {-2, -1, 0, 1, 2, 3}
    assert RandomTensorGenerator(5).random_integers(0, 9, big, dtype=np.int64).dtype == np.int64


def test_random_integers_single_value(axes):
    values = RandomTensorGenerator(0).random_integers(4, 4, axes)
    np.testing.assert_array_equal(values, np.full((3, 4, 2), 4))


def test_generator_is_reproducible_by_seed(axes):
    a, b = RandomTensorGenerator(42), RandomTensorGenerator(42)
    first = [a.uniform(0, 1, axes), a.normal(0, 1, axes), a.random_integers(0, 100, axes),
             a.discrete_uniform(0, 1, 0.1, axes)]
    second = [b.uniform(0, 1, axes), b.normal(0, 1, axes), b.random_integers(0, 100, axes),
              b.discrete_uniform(0, 1, 0.1, axes)]
    for x, y in zip(first, second):
        np.testing.assert_array_equal(x, y)
    # The stream moves on; reset() restarts it; another seed gives other values.
    assert not np.array_equal(a.uniform(0, 1, axes), first[0])
    a.reset()
    np.testing.assert_array_equal(a.uniform(0, 1, axes), first[0])
    assert not np.array_equal(RandomTensorGenerator(43).uniform(0, 1, axes), first[0])
    a.reset(43)
    np.testing.assert_array_equal(a.uniform(0, 1, axes), RandomTensorGenerator(43).uniform(0, 1, axes))


def test_shapes_follow_the_axes_order(axes):
    A, B, C = axes
    g = RandomTensorGenerator(0)
    assert g.uniform(0, 1, [C, A, B]).shape == (2, 3, 4)
    assert g.normal(0, 1, ng.make_axes([B, C])).shape == (4, 2)
    assert g.random_integers(0, 1, A).shape == (3,)
    assert g.discrete_uniform(0, 1, 0.5, [B]).shape == (4,)
    assert g.uniform(0, 1, []).shape == ()


@pytest.mark.parametrize("method,args", [("uniform", (0, 1)), ("normal", (0, 1)),
                                         ("discrete_uniform", (0, 1, 0.5)),
                                         ("random_integers", (0, 5))])
def test_unset_axis_length_raises(axes, method, args):
    unset = ng.make_axis(name="U")
    with pytest.raises(ng.AxisLengthError):
        getattr(RandomTensorGenerator(0), method)(*args, [axes[0], unset])
