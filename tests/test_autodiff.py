"""Reverse-mode differentiation (seed 001 `deriv`): every adjoint rule, checked numerically.

Every gradient check builds a float64 graph, takes the full Jacobian that
`deriv` gives (through ExecutorFactory.derivative) and compares it with a
central-difference Jacobian computed here, in this file, from the forward
computation alone. Inputs stay away from kinks (ties, zero for relu/abs).
"""
import math

import numpy as np
import pytest

import axgraph as ng
from axgraph import autodiff
from axgraph.axes import FlattenedAxis
from axgraph.testing import ExecutorFactory

F64 = np.float64


# -- helpers ---------------------------------------------------------------------------

def central_jacobian(function, x, delta=1e-6):
    """d function / d x by central differences, shape f(x).shape + x.shape (float64)."""
    x = np.array(x, dtype=F64)
    f0 = np.asarray(function(x.copy()), dtype=F64)
    jac = np.zeros(f0.shape + x.shape)
    for index in np.ndindex(*x.shape):
        plus, minus = x.copy(), x.copy()
        plus[index] += delta
        minus[index] -= delta
        jac[(Ellipsis,) + index] = (np.asarray(function(plus), dtype=F64)
                                    - np.asarray(function(minus), dtype=F64)) / (2 * delta)
    return jac


def grad_check(backend, f, wrt, feeds, delta=1e-6, rtol=1e-6, atol=1e-8, nontrivial=True):
    """Assert deriv's Jacobian of f w.r.t. placeholder `wrt` equals central differences.

    `feeds` maps every placeholder f reads (including wrt) to its value.
    """
    others = [p for p in feeds if p is not wrt]
    other_values = [feeds[p] for p in others]
    with ExecutorFactory(backend) as ex:
        symbolic = np.asarray(ex.derivative(f, wrt, *others)(feeds[wrt], *other_values))
        forward = ex.executor(f, wrt, *others)
        numeric = central_jacobian(lambda v: forward(v, *other_values), feeds[wrt], delta)
        expected_shape = tuple(np.shape(forward(feeds[wrt], *other_values))) + np.shape(feeds[wrt])
    assert symbolic.shape == expected_shape
    assert numeric.shape == expected_shape
    assert np.all(np.isfinite(symbolic))
    if nontrivial:
        # A check against an all-zero Jacobian would prove little.
        assert np.abs(numeric).max() > 1e-3
    np.testing.assert_allclose(symbolic, numeric, rtol=rtol, atol=atol)
    return symbolic


def away_from_zero(rng, shape, low=0.3, high=2.0):
    """Values with |v| in [low, high) and random signs."""
    return rng.uniform(low, high, shape) * rng.choice([-1.0, 1.0], shape)


def run(backend, results, *params_and_values):
    """Compute `results` feeding (placeholder, value) pairs."""
    params = [p for p, _ in params_and_values]
    values = [v for _, v in params_and_values]
    with ExecutorFactory(backend) as ex:
        return ex.executor(results, *params)(*values)


def softmax_np(x, axis=0):
    shifted = x - x.max(axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


@pytest.fixture
def axes3():
    return (ng.make_axis(3, "A"), ng.make_axis(4, "B"), ng.make_axis(2, "C"))


# -- unary elementwise ops ---------------------------------------------------------------

def _positive(rng, shape):
    return rng.uniform(0.5, 2.0, shape)


def _signed(rng, shape):
    return away_from_zero(rng, shape)


def _inside_quarter_turn(rng, shape):  # tan: away from its poles at +-pi/2
    return away_from_zero(rng, shape, high=1.2)


_erf = np.vectorize(math.erf)


UNARY_CASES = [
    ("negative", ng.negative, _signed),
    ("absolute", ng.absolute, _signed),
    ("square", ng.square, _signed),
    ("sqrt", ng.sqrt, _positive),
    ("exp", ng.exp, _signed),
    ("log", ng.log, _positive),
    ("safelog", ng.safelog, _positive),
    ("reciprocal", ng.reciprocal, _signed),
    ("tanh", ng.tanh, _signed),
    ("sigmoid", ng.sigmoid, _signed),
    ("sin", ng.sin, _signed),
    ("cos", ng.cos, _signed),
    ("relu", ng.relu, _signed),
    ("tan", ng.tan, _inside_quarter_turn),
    ("erf", ng.erf, _signed),
    ("rsqrt", ng.rsqrt, _positive),
]

UNARY_NUMPY = {
    "negative": (lambda v: -v, lambda v: -np.ones_like(v)),
    "absolute": (np.abs, np.sign),
    "square": (np.square, lambda v: 2 * v),
    "sqrt": (np.sqrt, lambda v: 0.5 / np.sqrt(v)),
    "exp": (np.exp, np.exp),
    "log": (np.log, lambda v: 1 / v),
    "safelog": (np.log, lambda v: 1 / v),
    "reciprocal": (lambda v: 1 / v, lambda v: -1 / v ** 2),
    "tanh": (np.tanh, lambda v: 1 - np.tanh(v) ** 2),
    "sigmoid": (lambda v: 1 / (1 + np.exp(-v)),
                lambda v: np.exp(-v) / (1 + np.exp(-v)) ** 2),
    "sin": (np.sin, np.cos),
    "cos": (np.cos, lambda v: -np.sin(v)),
    "relu": (lambda v: np.maximum(v, 0), lambda v: (v > 0).astype(F64)),
    "tan": (np.tan, lambda v: 1 / np.cos(v) ** 2),
    "erf": (_erf, lambda v: 2 / math.sqrt(math.pi) * np.exp(-v * v)),
    "rsqrt": (lambda v: 1 / np.sqrt(v), lambda v: -0.5 * v ** -1.5),
}


@pytest.mark.parametrize("name,function,sample", UNARY_CASES, ids=[c[0] for c in UNARY_CASES])
def test_unary_jacobian_matches_central_differences(backend, rng, axes3, name, function, sample):
    A, B, _ = axes3
    x = ng.placeholder([A, B], dtype=F64)
    xv = sample(rng, (3, 4))
    f = function(x)
    assert f.dtype == np.dtype(F64)
    jac = grad_check(backend, f, x, {x: xv})
    # Elementwise: the Jacobian is diagonal, with f'(x) on the diagonal.
    value, slope = UNARY_NUMPY[name]
    expected = np.zeros((3, 4, 3, 4))
    for a, b in np.ndindex(3, 4):
        expected[a, b, a, b] = slope(xv)[a, b]
    np.testing.assert_allclose(jac, expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(run(backend, f, (x, xv)), value(xv), rtol=1e-12)


@pytest.mark.parametrize("name,function,sample", UNARY_CASES, ids=[c[0] for c in UNARY_CASES])
def test_unary_gradient_of_a_scalar_cost(backend, rng, axes3, name, function, sample):
    """d sum(w * f(x)) / dx = w * f'(x), with x in another axis order than w."""
    A, B, _ = axes3
    x = ng.placeholder([B, A], dtype=F64)
    xv = sample(rng, (4, 3))
    wv = rng.uniform(-1, 1, (3, 4))
    w = ng.constant(wv, [A, B], dtype=F64)
    cost = ng.sum(w * function(x), reduction_axes=[A, B])
    grad = run(backend, ng.deriv(cost, x), (x, xv))
    assert grad.shape == (4, 3)
    np.testing.assert_allclose(grad, wv.T * UNARY_NUMPY[name][1](xv), rtol=1e-10, atol=1e-12)


def test_safelog_passes_no_gradient_below_its_floor(backend):
    A = ng.make_axis(3, "A")
    x = ng.placeholder([A], dtype=F64)
    cost = ng.sum(ng.safelog(x), reduction_axes=[A])
    xv = np.array([1e-30, 0.0, 2.0])
    grad = run(backend, ng.deriv(cost, x), (x, xv))
    np.testing.assert_allclose(grad, [0.0, 0.0, 0.5])


def test_gradient_accumulates_over_every_use(backend, rng, axes3):
    A, B, _ = axes3
    x = ng.placeholder([A, B], dtype=F64)
    xv = away_from_zero(rng, (3, 4))
    f = x * x + ng.sin(x) * x
    grad_check(backend, f, x, {x: xv})
    cost = ng.sum(f, reduction_axes=[A, B])
    grad = run(backend, ng.deriv(cost, x), (x, xv))
    np.testing.assert_allclose(grad, 2 * xv + np.cos(xv) * xv + np.sin(xv), rtol=1e-12)


# -- binary elementwise ops ------------------------------------------------------------

def _tie_free_pair(rng, x_shape, y_shape):
    """x on odd tenths, y on even tenths: no x element equals any y element.

    Each operand spans the range of the other, so that each wins somewhere
    in maximum and minimum (a scalar sits in the middle).
    """
    def spread(shape, low, high):
        size = int(np.prod(shape, dtype=int))
        if size == 1:
            return np.full(shape, (low + high) // 2)
        return rng.permutation(np.linspace(low, high, size).round().astype(int)).reshape(shape)

    xv = 0.1 * (2 * spread(x_shape, 0, 9) + 1)
    yv = 0.1 * (2 * spread(y_shape, 1, 9))
    return xv.astype(F64), yv.astype(F64)


BINARY_OPS = {
    "add": (ng.add, np.add),
    "subtract": (ng.subtract, np.subtract),
    "multiply": (ng.multiply, np.multiply),
    "divide": (ng.divide, np.divide),
    "power": (ng.power, np.power),
    "maximum": (ng.maximum, np.maximum),
    "minimum": (ng.minimum, np.minimum),
}

#: Axes of x and of y, by name: disjoint, partly shared, reordered, scalar.
LAYOUTS = {
    "AB_BC": ("AB", "BC"),
    "AB_BA": ("AB", "BA"),
    "A_C": ("A", "C"),
    "AB_scalar": ("AB", ""),
    "scalar_BC": ("", "BC"),
}


@pytest.mark.parametrize("operand", ["x", "y"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("op_name", list(BINARY_OPS))
def test_binary_jacobian_with_broadcasting(backend, rng, axes3, op_name, layout, operand):
    by_name = dict(zip("ABC", axes3))
    x_names, y_names = LAYOUTS[layout]
    x_axes = [by_name[n] for n in x_names]
    y_axes = [by_name[n] for n in y_names]
    x = ng.placeholder(x_axes, dtype=F64)
    y = ng.placeholder(y_axes, dtype=F64)
    xv, yv = _tie_free_pair(rng, tuple(a.length for a in x_axes), tuple(a.length for a in y_axes))
    function, np_function = BINARY_OPS[op_name]
    f = function(x, y)
    expected_axes = list(x_axes) + [a for a in y_axes if a not in x_axes]
    assert list(f.axes) == expected_axes
    # The forward value, by broadcasting in NumPy.
    letters = {by_name[n]: n.lower() for n in "ABC"}
    out = "".join(letters[a] for a in expected_axes)
    x_full = _broadcast_np(xv, x_names.lower(), out, f.axes.lengths)
    y_full = _broadcast_np(yv, y_names.lower(), out, f.axes.lengths)
    np.testing.assert_allclose(run(backend, f, (x, xv), (y, yv)), np_function(x_full, y_full),
                               rtol=1e-12)
    wrt = x if operand == "x" else y
    grad_check(backend, f, wrt, {x: xv, y: yv})


def _broadcast_np(value, letters, out, shape):
    """value (axes `letters`) transposed and broadcast to axes `out` of `shape`."""
    value = np.asarray(value)
    present = [c for c in out if c in letters]
    value = np.transpose(value, [letters.index(c) for c in present]) if letters else value
    expand = tuple(slice(None) if c in letters else None for c in out)
    return np.broadcast_to(value[expand] if letters else value, shape)


@pytest.mark.parametrize("op_name", list(BINARY_OPS))
def test_binary_gradients_by_hand(backend, rng, axes3, op_name):
    """d sum(f(x, y)) for x (A, B), y (B, C): the partials summed over the other's axes."""
    A, B, C = axes3
    x = ng.placeholder([A, B], dtype=F64)
    y = ng.placeholder([B, C], dtype=F64)
    xv, yv = _tie_free_pair(rng, (3, 4), (4, 2))
    cost = ng.sum(BINARY_OPS[op_name][0](x, y), reduction_axes=[A, B, C])
    gx, gy = run(backend, autodiff.deriv_many(cost, [x, y]), (x, xv), (y, yv))
    X, Y = xv[:, :, None], yv[None, :, :]
    partials = {
        "add": (np.ones_like(X * Y), np.ones_like(X * Y)),
        "subtract": (np.ones_like(X * Y), -np.ones_like(X * Y)),
        "multiply": (Y + 0 * X, X + 0 * Y),
        "divide": (1 / Y + 0 * X, -X / Y ** 2),
        "power": (Y * X ** (Y - 1), X ** Y * np.log(X)),
        "maximum": ((X > Y).astype(F64), (Y > X).astype(F64)),
        "minimum": ((X < Y).astype(F64), (Y < X).astype(F64)),
    }[op_name]
    np.testing.assert_allclose(gx, partials[0].sum(axis=2), rtol=1e-12)
    np.testing.assert_allclose(gy, partials[1].sum(axis=0), rtol=1e-12)


def test_where_routes_the_gradient_by_the_condition(backend, rng, axes3):
    """where(c, x*x, sin(y)), c (B), x (A, B), y (B, C): x's gradient flows where c holds,
    y's elsewhere, each summed over the axes it lacks; the condition gets none."""
    A, B, C = axes3
    c = ng.placeholder([B], dtype=F64)  # a number as the condition: true where nonzero
    x = ng.placeholder([A, B], dtype=F64)
    y = ng.placeholder([B, C], dtype=F64)
    cv = np.array([1.0, 0.0, -2.0, 0.0])
    xv, yv = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    f = ng.where(c, x * x, ng.sin(y))
    assert list(f.axes) == [A, B, C]
    feeds = {c: cv, x: xv, y: yv}
    picked = (cv != 0)[None, :, None]
    np.testing.assert_allclose(run(backend, f, *feeds.items()),
                               np.where(picked, (xv * xv)[:, :, None], np.sin(yv)[None]),
                               rtol=1e-12)
    grad_check(backend, f, x, feeds)
    grad_check(backend, f, y, feeds)
    cost = ng.sum(f, reduction_axes=[A, B, C])
    gc, gx, gy = run(backend, autodiff.deriv_many(cost, [c, x, y]), *feeds.items())
    np.testing.assert_array_equal(gc, np.zeros(4))
    np.testing.assert_allclose(gx, (cv != 0) * 2 * xv * C.length, rtol=1e-12)
    np.testing.assert_allclose(gy, (cv == 0)[:, None] * np.cos(yv) * A.length, rtol=1e-12)


def test_binary_op_with_a_python_number(backend, rng, axes3):
    A, B, _ = axes3
    x = ng.placeholder([A, B], dtype=F64)
    xv = rng.uniform(0.5, 2.0, (3, 4))
    f = 3.0 / x - x ** 2.5 + 2.0 * x - (1.0 - x)
    assert f.dtype == np.dtype(F64)
    jac = grad_check(backend, f, x, {x: xv})
    diag = -3.0 / xv ** 2 - 2.5 * xv ** 1.5 + 3.0
    np.testing.assert_allclose(np.einsum("abab->ab", jac), diag, rtol=1e-10)


def test_operand_used_twice_in_one_op(backend, rng, axes3):
    A, B, _ = axes3
    x = ng.placeholder([A, B], dtype=F64)
    xv = rng.uniform(0.5, 2.0, (3, 4))
    for f, slope in [(x * x, 2 * xv), (x / x, 0 * xv), (ng.power(x, x), xv ** xv * (np.log(xv) + 1))]:
        cost = ng.sum(f, reduction_axes=[A, B])
        np.testing.assert_allclose(run(backend, ng.deriv(cost, x), (x, xv)), slope, atol=1e-12,
                                   rtol=1e-10)


def test_power_with_a_negative_base_and_constant_exponent(backend, axes3):
    A = axes3[0]
    x = ng.placeholder([A], dtype=F64)
    xv = np.array([-1.5, -0.5, 2.0])
    cost = ng.sum(x ** 2.0 + ng.power(x, 3.0), reduction_axes=[A])
    grad = ng.deriv(cost, x)
    assert grad.dtype == np.dtype(F64)
    np.testing.assert_allclose(run(backend, grad, (x, xv)), 2 * xv + 3 * xv ** 2, rtol=1e-12)


def test_gradients_keep_float64(axes3):
    A, B, C = axes3
    x = ng.placeholder([A, B], dtype=F64)
    y = ng.placeholder([B, C], dtype=F64)
    f = ng.tanh(x) * 2.0 + ng.dot(x, y) / (1.0 + ng.exp(-y)) - ng.relu(x) ** 2
    cost = ng.sum(f, reduction_axes=f.axes)
    for gradient in autodiff.deriv_many(cost, [x, y]):
        assert gradient.dtype == np.dtype(F64)


# -- reductions -------------------------------------------------------------------------

REDUCTIONS = {
    "sum": (ng.sum, np.sum),
    "prod": (ng.prod, np.prod),
    "max": (ng.max, np.max),
    "min": (ng.min, np.min),
    "mean": (ng.mean, np.mean),
    "variance": (ng.variance, np.var),
}


def _reduction_spec(A, B, C, spec):
    """(kwargs for the op, reduced numpy axes of x (A, B, C), numpy order of the result)."""
    return {
        "reduce_B": (dict(reduction_axes=[B]), (1,), [0, 1]),
        "reduce_CA": (dict(reduction_axes=[C, A]), (0, 2), [0]),
        "out_CA": (dict(out_axes=[C, A]), (1,), [1, 0]),
        "out_B": (dict(out_axes=[B]), (0, 2), [0]),
        "reduce_all": (dict(reduction_axes=[A, B, C]), (0, 1, 2), []),
        "both": (dict(reduction_axes=[A], out_axes=[C, B]), (0,), [1, 0]),
    }[spec]


@pytest.mark.parametrize("spec", ["reduce_B", "reduce_CA", "out_CA", "out_B", "reduce_all", "both"])
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction_jacobian(backend, rng, axes3, name, spec):
    A, B, C = axes3
    x = ng.placeholder([A, B, C], dtype=F64)
    # Distinct values away from zero: no ties for max/min, no zero for prod.
    xv = away_from_zero(rng, (3, 4, 2), 0.5, 1.5) + 0.01 * np.arange(24).reshape(3, 4, 2)
    kwargs, np_axes, order = _reduction_spec(A, B, C, spec)
    function, np_function = REDUCTIONS[name]
    f = function(x, **kwargs)
    value = np.transpose(np_function(xv, axis=np_axes), order) if order else np_function(xv, axis=np_axes)
    np.testing.assert_allclose(run(backend, f, (x, xv)), value, rtol=1e-12)
    grad_check(backend, f, x, {x: xv})


def test_reduction_gradients_by_hand(backend, rng, axes3):
    A, B, C = axes3
    x = ng.placeholder([A, B, C], dtype=F64)
    xv = rng.uniform(0.5, 1.5, (3, 4, 2))
    ops = [ng.sum(ng.sum(x, reduction_axes=[B]), reduction_axes=[A, C]),
           ng.sum(ng.prod(x, reduction_axes=[B]), reduction_axes=[A, C]),
           ng.sum(ng.max(x, reduction_axes=[B]), reduction_axes=[A, C]),
           ng.sum(ng.min(x, reduction_axes=[B]), reduction_axes=[A, C]),
           ng.sum(ng.mean(x, reduction_axes=[B]), reduction_axes=[A, C]),
           ng.sum(ng.variance(x, reduction_axes=[B]) * ng.constant([1.0, 2.0], [C], dtype=F64),
                  reduction_axes=[A, C])]
    grads = run(backend, [ng.deriv(op, x) for op in ops], (x, xv))
    p = xv.prod(axis=1, keepdims=True)
    expected = [np.ones_like(xv), p / xv,
                (xv == xv.max(axis=1, keepdims=True)).astype(F64),
                (xv == xv.min(axis=1, keepdims=True)).astype(F64),
                np.full_like(xv, 1 / 4),
                2 * (xv - xv.mean(axis=1, keepdims=True)) / 4 * np.array([1.0, 2.0])]
    for got, want in zip(grads, expected):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_prod_gradient_with_a_zero_element(backend, axes3):
    """prod is a polynomial: d prod(x)/dx_i is the product of the others, zero or not."""
    A = axes3[0]
    x = ng.placeholder([A], dtype=F64)
    xv = np.array([0.0, 2.0, 3.0])
    grad = run(backend, ng.deriv(ng.prod(x, reduction_axes=[A]), x), (x, xv))
    np.testing.assert_allclose(grad, [6.0, 0.0, 0.0])


# -- dot -------------------------------------------------------------------------------

def _dot_case(backend, rng, x_axes, y_axes, subscripts):
    x = ng.placeholder(x_axes, dtype=F64)
    y = ng.placeholder(y_axes, dtype=F64)
    xv = rng.standard_normal([a.length for a in x_axes])
    yv = rng.standard_normal([a.length for a in y_axes])
    f = ng.dot(x, y)
    np.testing.assert_allclose(run(backend, f, (x, xv), (y, yv)), np.einsum(subscripts, xv, yv),
                               rtol=1e-10, atol=1e-12)
    grad_check(backend, f, x, {x: xv, y: yv})
    grad_check(backend, f, y, {x: xv, y: yv})
    # And the gradients of sum(g * dot(x, y)) by hand: einsum with g.
    inputs, out = subscripts.split("->")
    sx, sy = inputs.split(",")
    gv = rng.standard_normal(f.axes.lengths)
    g = ng.constant(gv, f.axes, dtype=F64)
    cost = ng.sum(g * f, reduction_axes=f.axes)
    dx, dy = run(backend, autodiff.deriv_many(cost, [x, y]), (x, xv), (y, yv))
    np.testing.assert_allclose(dx, np.einsum(f"{out},{sy}->{sx}", gv, yv), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dy, np.einsum(f"{sx},{out}->{sy}", xv, gv), rtol=1e-10, atol=1e-12)


def test_dot_shared_axis(backend, rng):
    A, B, C = ng.make_axis(3, "A"), ng.make_axis(4, "B"), ng.make_axis(2, "C")
    _dot_case(backend, rng, [A, B], [B, C], "ab,bc->ac")


def test_dot_shared_axes_in_other_orders(backend, rng):
    A, B, C, D = (ng.make_axis(n, s) for n, s in [(3, "A"), (4, "B"), (2, "C"), (2, "D")])
    _dot_case(backend, rng, [B, A, D], [C, D, B], "bad,cdb->ac")


def test_dot_vector_vector_to_scalar(backend, rng):
    A = ng.make_axis(5, "A")
    _dot_case(backend, rng, [A], [A], "a,a->")


def test_dot_dual_axis_on_the_left(backend, rng):
    """(H, W - 1) . (W, N) -> (H, N)."""
    H, W, N = ng.make_axis(3, "H"), ng.make_axis(4, "W"), ng.make_axis(2, "N")
    _dot_case(backend, rng, [H, W - 1], [W, N], "hw,wn->hn")


def test_dot_dual_axis_on_the_right(backend, rng):
    """(H, W) . (W + 1, N) -> (H, N)."""
    H, W, N = ng.make_axis(3, "H"), ng.make_axis(4, "W"), ng.make_axis(2, "N")
    _dot_case(backend, rng, [H, W], [W + 1, N], "hw,wn->hn")


def test_dot_shared_and_dual_axes_together(backend, rng):
    """(H, W - 1, K) . (W, H, N): H pairs with H and W - 1 with W -> (K, N)."""
    H, W, K, N = (ng.make_axis(n, s) for n, s in [(3, "H"), (4, "W"), (2, "K"), (3, "N")])
    _dot_case(backend, rng, [H, W - 1, K], [W, H, N], "hwk,whn->kn")


@pytest.mark.parametrize("order", ["CHW", "WHC"])
def test_dot_4d_with_dual_axes_on_the_left(backend, rng, order):
    """Seed 000: (M, C - 1, H - 1, W - 1) . (C, H, W, N) -> (M, N), any order on the left."""
    M, C, H, W, N = (ng.make_axis(n, s) for n, s in [(2, "M"), (2, "C"), (3, "H"), (2, "W"), (3, "N")])
    by = {"C": C, "H": H, "W": W}
    left = [M] + [by[c] - 1 for c in order]
    _dot_case(backend, rng, left, [C, H, W, N], f"m{order.lower()},chwn->mn")


def test_dot_4d_with_dual_axes_on_the_right(backend, rng):
    """Seed 000: (M, C, H, W) . (C + 1, H + 1, W + 1, N) -> (M, N)."""
    M, C, H, W, N = (ng.make_axis(n, s) for n, s in [(2, "M"), (2, "C"), (3, "H"), (2, "W"), (3, "N")])
    _dot_case(backend, rng, [M, C, H, W], [C + 1, H + 1, W + 1, N], "mchw,chwn->mn")


# -- shape ops -------------------------------------------------------------------------

def test_broadcast_gradient(backend, rng, axes3):
    A, B, C = axes3
    x = ng.placeholder([A], dtype=F64)
    xv = rng.standard_normal(3)
    f = ng.broadcast(x, [B, A, C])
    grad_check(backend, ng.sin(f), x, {x: xv})
    wv = rng.standard_normal((4, 3, 2))
    cost = ng.sum(f * ng.constant(wv, [B, A, C], dtype=F64), reduction_axes=[A, B, C])
    np.testing.assert_allclose(run(backend, ng.deriv(cost, x), (x, xv)), wv.sum(axis=(0, 2)),
                               rtol=1e-12)


def test_cast_axes_gradient(backend, rng, axes3):
    A, B, _ = axes3
    A2, B2 = ng.make_axis(3, "A2"), ng.make_axis(4, "B2")
    x = ng.placeholder([A, B], dtype=F64)
    xv = rng.standard_normal((3, 4))
    f = ng.cast_axes(x, [A2, B2])
    # Mixing with a tensor on the new axes proves the relabelling reaches the gradient.
    wv = rng.standard_normal((4, 3))
    g = ng.tanh(f) * ng.constant(wv, [B2, A2], dtype=F64)
    grad_check(backend, g, x, {x: xv})
    cost = ng.sum(g, reduction_axes=[A2, B2])
    np.testing.assert_allclose(run(backend, ng.deriv(cost, x), (x, xv)),
                               wv.T * (1 - np.tanh(xv) ** 2), rtol=1e-12)


def test_axes_with_order_gradient(backend, rng, axes3):
    A, B, C = axes3
    x = ng.placeholder([A, B, C], dtype=F64)
    xv = rng.standard_normal((3, 4, 2))
    f = ng.axes_with_order(x, [C, A, B])
    assert run(backend, f, (x, xv)).shape == (2, 3, 4)
    grad_check(backend, ng.sin(f), x, {x: xv})


def test_flatten_and_unflatten_gradients(backend, rng, axes3):
    A, B, C = axes3
    x = ng.placeholder([A, B, C], dtype=F64)
    xv = rng.standard_normal((3, 4, 2))
    flat = ng.flatten(x)
    assert run(backend, flat, (x, xv)).shape == (24,)
    grad_check(backend, ng.sin(flat), x, {x: xv})
    # Flatten in another order (B, A) x C, then back: unflatten's adjoint is flatten.
    regrouped = ng.flatten(x, [FlattenedAxis.of([B, A]), C])
    np.testing.assert_allclose(run(backend, regrouped, (x, xv)),
                               np.transpose(xv, (1, 0, 2)).reshape(12, 2), rtol=1e-12)
    back = ng.unflatten(ng.sin(regrouped) * 2.0)
    assert back.axes.is_equal_set([A, B, C])
    grad_check(backend, back, x, {x: xv})


def test_unflatten_of_a_flattened_placeholder(backend, rng):
    A, B = ng.make_axis(3, "A"), ng.make_axis(2, "B")
    AB = FlattenedAxis.of([A, B])
    z = ng.placeholder([AB], dtype=F64)
    zv = rng.standard_normal(6)
    f = ng.unflatten(z)
    assert list(f.axes) == [A, B]
    np.testing.assert_allclose(run(backend, f, (z, zv)), zv.reshape(3, 2))
    grad_check(backend, ng.exp(f), z, {z: zv})


@pytest.mark.parametrize("slices", [
    (slice(1, 3), 2, slice(None)),
    (slice(None, None, 2), slice(None), 1),
    (slice(None, None, -1), slice(3, 0, -2), slice(None)),
    (-1, slice(1, None, 2), slice(None, None, -1)),
    (Ellipsis, 0),
], ids=["range_int", "step_int", "negative_steps", "neg_int", "ellipsis_int"])
def test_tensor_slice_gradient(backend, rng, axes3, slices):
    A, B, C = axes3
    x = ng.placeholder([A, B, C], dtype=F64)
    xv = rng.standard_normal((3, 4, 2))
    f = ng.tensor_slice(x, slices)
    np.testing.assert_allclose(run(backend, f, (x, xv)), xv[slices], rtol=1e-12)
    grad_check(backend, ng.sin(f), x, {x: xv})
    # By hand: the cotangent lands in the sliced positions, zero elsewhere.
    gv = rng.standard_normal(xv[slices].shape)
    cost = ng.sum(f * ng.constant(gv, f.axes, dtype=F64), reduction_axes=f.axes)
    expected = np.zeros_like(xv)
    expected[slices] = gv
    np.testing.assert_allclose(run(backend, ng.deriv(cost, x), (x, xv)), expected, rtol=1e-12)


def test_getitem_slicing_gradient(backend, rng, axes3):
    A, B, _ = axes3
    x = ng.placeholder([A, B], dtype=F64)
    xv = rng.standard_normal((3, 4))
    grad_check(backend, ng.square(x[1:, ::3]), x, {x: xv})


@pytest.mark.parametrize("index", [2, -1, slice(1, 4), slice(0, 4, 2)])
def test_slice_along_axis_gradient(backend, rng, axes3, index):
    A, B, C = axes3
    x = ng.placeholder([A, B, C], dtype=F64)
    xv = rng.standard_normal((3, 4, 2))
    f = ng.slice_along_axis(x, B, index)
    np.testing.assert_allclose(run(backend, f, (x, xv)), xv[:, index, :], rtol=1e-12)
    grad_check(backend, ng.exp(f), x, {x: xv})


def test_second_derivative_through_slice_adjoint(backend, rng, axes3):
    """The gradient of a slice is itself differentiable (SliceAdjointOp's rule)."""
    A, B, _ = axes3
    x = ng.placeholder([A, B], dtype=F64)
    xv = rng.standard_normal((3, 4))
    sliced = ng.tensor_slice(x, (slice(None, None, 2), slice(1, 3)))
    cost = ng.sum(ng.sin(sliced), reduction_axes=sliced.axes)
    gradient = ng.deriv(cost, x)  # SliceAdjoint(cos(x[::2, 1:3]))
    wv = rng.standard_normal((3, 4))
    second = ng.sum(gradient * ng.constant(wv, [A, B], dtype=F64), reduction_axes=[A, B])
    hvp = run(backend, ng.deriv(second, x), (x, xv))
    expected = np.zeros_like(xv)
    expected[::2, 1:3] = -np.sin(xv[::2, 1:3]) * wv[::2, 1:3]
    np.testing.assert_allclose(hvp, expected, rtol=1e-12, atol=1e-14)
    grad_check(backend, gradient, x, {x: xv})


def test_concat_along_axis_gradient(backend, rng):
    A = ng.make_axis(3, "A")
    B1, B2, B3 = ng.make_axis(2, "B"), ng.make_axis(3, "B"), ng.make_axis(1, "B")
    x1 = ng.placeholder([A, B1], dtype=F64)
    x2 = ng.placeholder([B2, A], dtype=F64)  # another order: concat reorders it
    x3 = ng.placeholder([A, B3], dtype=F64)
    v1, v2, v3 = rng.standard_normal((3, 2)), rng.standard_normal((3, 3)), rng.standard_normal((3, 1))
    f = ng.concat_along_axis([x1, x2, x3], B1)
    feeds = {x1: v1, x2: v2, x3: v3}
    np.testing.assert_allclose(run(backend, f, *feeds.items()),
                               np.concatenate([v1, v2.T, v3], axis=1), rtol=1e-12)
    g = ng.sin(f) * ng.constant(np.arange(1.0, 19.0).reshape(3, 6), f.axes, dtype=F64)
    for wrt in (x1, x2, x3):
        grad_check(backend, g, wrt, feeds)


def test_stack_gradient(backend, rng, axes3):
    A, B, _ = axes3
    S = ng.make_axis(name="S")
    x1 = ng.placeholder([A, B], dtype=F64)
    x2 = ng.placeholder([B, A], dtype=F64)
    x3 = ng.placeholder([A, B], dtype=F64)
    v1, v2, v3 = rng.standard_normal((3, 4)), rng.standard_normal((4, 3)), rng.standard_normal((3, 4))
    f = ng.stack([x1, x2, x3], S, pos=1)
    assert S.length == 3
    feeds = {x1: v1, x2: v2, x3: v3}
    np.testing.assert_allclose(run(backend, f, *feeds.items()), np.stack([v1, v2.T, v3], axis=1),
                               rtol=1e-12)
    g = ng.sin(f) * ng.constant(np.arange(1.0, 4.0), [S], dtype=F64)
    for wrt in (x1, x2, x3):
        grad_check(backend, g, wrt, feeds)


@pytest.mark.parametrize("paddings", [[(1, 2), 0], [1, (0, 3)], [(2, 0), (1, 1)]])
def test_pad_gradient(backend, rng, axes3, paddings):
    A, B, _ = axes3
    x = ng.placeholder([A, B], dtype=F64)
    xv = rng.standard_normal((3, 4))
    f = ng.pad(x, paddings)
    np_pad = [(p, p) if isinstance(p, int) else p for p in paddings]
    np.testing.assert_allclose(run(backend, f, (x, xv)), np.pad(xv, np_pad), rtol=1e-12)
    g = ng.sin(f) * ng.constant(rng.standard_normal(f.axes.lengths), f.axes, dtype=F64)
    grad_check(backend, g, x, {x: xv})


# -- neural-network ops -------------------------------------------------------------------

def test_softmax_jacobian(backend, rng):
    C, N = ng.make_axis(4, "C"), ng.make_axis(3, "N")
    x = ng.placeholder([C, N], dtype=F64)
    xv = rng.standard_normal((4, 3))
    s = ng.softmax(x)
    sv = softmax_np(xv, axis=0)
    np.testing.assert_allclose(run(backend, s, (x, xv)), sv, rtol=1e-12)
    jac = grad_check(backend, s, x, {x: xv})
    # By hand: ds_i/dx_j = s_i (delta_ij - s_j) within each example, zero across examples.
    expected = np.zeros((4, 3, 4, 3))
    for n in range(3):
        expected[:, n, :, n] = np.diag(sv[:, n]) - np.outer(sv[:, n], sv[:, n])
    np.testing.assert_allclose(jac, expected, atol=1e-12)


def test_softmax_with_explicit_normalization_axes(backend, rng):
    C, D, N = ng.make_axis(3, "C"), ng.make_axis(2, "D"), ng.make_axis(2, "N")
    x = ng.placeholder([C, N, D], dtype=F64)
    xv = rng.standard_normal((3, 2, 2))
    s = ng.softmax(x, normalization_axes=[C, D])
    e = np.exp(xv - xv.max(axis=(0, 2), keepdims=True))
    np.testing.assert_allclose(run(backend, s, (x, xv)), e / e.sum(axis=(0, 2), keepdims=True),
                               rtol=1e-12)
    grad_check(backend, s, x, {x: xv})


def _one_hot_targets(rng, classes, examples):
    t = np.zeros((classes, examples))
    t[rng.integers(0, classes, examples), np.arange(examples)] = 1.0
    return t


def test_cross_entropy_multi_of_softmax(backend, rng):
    C, N = ng.make_axis(4, "C"), ng.make_axis(3, "N")
    x = ng.placeholder([C, N], dtype=F64)
    t = ng.placeholder([C, N], dtype=F64)
    xv = rng.standard_normal((4, 3))
    tv = rng.dirichlet(np.ones(4), 3).T  # soft targets: also differentiable in t
    ce = ng.cross_entropy_multi(ng.softmax(x), t)
    sv = softmax_np(xv)
    np.testing.assert_allclose(run(backend, ce, (x, xv), (t, tv)), -(tv * np.log(sv)).sum(axis=0),
                               rtol=1e-12)
    grad_check(backend, ce, x, {x: xv, t: tv})
    grad_check(backend, ce, t, {x: xv, t: tv})
    bits = ng.cross_entropy_multi(ng.softmax(x), t, usebits=True)
    grad_check(backend, bits, x, {x: xv, t: tv})


def test_cross_entropy_multi_of_plain_probabilities(backend, rng):
    C, N = ng.make_axis(4, "C"), ng.make_axis(3, "N")
    y = ng.placeholder([C, N], dtype=F64)
    t = ng.placeholder([C, N], dtype=F64)
    yv = rng.dirichlet(np.ones(4), 3).T
    tv = _one_hot_targets(rng, 4, 3) * 0.7 + 0.3 / 4
    ce = ng.cross_entropy_multi(y, t)
    np.testing.assert_allclose(run(backend, ce, (y, yv), (t, tv)), -(tv * np.log(yv)).sum(axis=0),
                               rtol=1e-12)
    grad_check(backend, ce, y, {y: yv, t: tv})
    total = ng.sum(ce, reduction_axes=[N])
    np.testing.assert_allclose(run(backend, ng.deriv(total, y), (y, yv), (t, tv)), -tv / yv,
                               rtol=1e-12)


def test_cross_entropy_binary_of_sigmoid(backend, rng):
    C, N = ng.make_axis(3, "C"), ng.make_axis(4, "N")
    x = ng.placeholder([C, N], dtype=F64)
    t = ng.placeholder([C, N], dtype=F64)
    xv = away_from_zero(rng, (3, 4), 0.2, 3.0)
    tv = rng.uniform(0, 1, (3, 4))
    ce = ng.cross_entropy_binary(ng.sigmoid(x), t)
    sv = 1 / (1 + np.exp(-xv))
    np.testing.assert_allclose(run(backend, ce, (x, xv), (t, tv)),
                               -(tv * np.log(sv) + (1 - tv) * np.log(1 - sv)).sum(axis=0), rtol=1e-10)
    grad_check(backend, ce, x, {x: xv, t: tv})
    grad_check(backend, ce, t, {x: xv, t: tv})
    total = ng.sum(ce, reduction_axes=[N])
    np.testing.assert_allclose(run(backend, ng.deriv(total, x), (x, xv), (t, tv)), sv - tv,
                               rtol=1e-10)


def test_cross_entropy_binary_of_plain_probabilities(backend, rng):
    C, N = ng.make_axis(3, "C"), ng.make_axis(4, "N")
    y = ng.placeholder([C, N], dtype=F64)
    t = ng.placeholder([C, N], dtype=F64)
    yv = rng.uniform(0.1, 0.9, (3, 4))
    tv = rng.uniform(0, 1, (3, 4))
    ce = ng.cross_entropy_binary(y, t, out_axes=[N])
    grad_check(backend, ce, y, {y: yv, t: tv})
    total = ng.sum(ce, reduction_axes=[N])
    np.testing.assert_allclose(run(backend, ng.deriv(total, y), (y, yv), (t, tv)),
                               -tv / yv + (1 - tv) / (1 - yv), rtol=1e-10)


def test_cross_entropy_multi_gradient_with_zero_probabilities(backend):
    """safelog keeps the cross entropy finite at probability 0; so must its gradient.

    Below safelog's floor the function is flat, so d/dy there is 0.
    """
    C, N = ng.make_axis(3, "C"), ng.make_axis(2, "N")
    y = ng.placeholder([C, N], dtype=F64)
    t = ng.placeholder([C, N], dtype=F64)
    yv = np.array([[0.0, 0.5], [0.25, 0.5], [0.75, 0.0]])
    tv = np.array([[0.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
    cost = ng.sum(ng.cross_entropy_multi(y, t), reduction_axes=[N])
    value, grad = run(backend, [cost, ng.deriv(cost, y)], (y, yv), (t, tv))
    np.testing.assert_allclose(value, -np.log(0.75) - np.log(0.5))
    expected = np.zeros((3, 2))
    expected[2, 0], expected[0, 1] = -1 / 0.75, -1 / 0.5
    np.testing.assert_allclose(grad, expected, rtol=1e-12)


def test_squared_L2_gradient(backend, rng, axes3):
    A, B, C = axes3
    x = ng.placeholder([A, B, C], dtype=F64)
    xv = rng.standard_normal((3, 4, 2))
    grad_check(backend, ng.squared_L2(x), x, {x: xv})
    grad_check(backend, ng.squared_L2(x, out_axes=[C, A]), x, {x: xv})
    grad_check(backend, ng.squared_L2(x, reduction_axes=[B]), x, {x: xv})
    np.testing.assert_allclose(run(backend, ng.deriv(ng.squared_L2(x), x), (x, xv)), 2 * xv,
                               rtol=1e-12)


def test_sequential_gradient_follows_the_last_op(backend, rng, axes3):
    A, B, _ = axes3
    x = ng.placeholder([A, B], dtype=F64)
    xv = rng.standard_normal((3, 4))
    seen = ng.persistent_tensor([A, B], dtype=F64, initial_value=0.0)
    f = ng.sequential([ng.assign(seen, x * 5.0), ng.exp(x) * 3.0, ng.sin(x)])
    grad_check(backend, f, x, {x: xv})
    cost = ng.sum(f, reduction_axes=[A, B])
    np.testing.assert_allclose(run(backend, ng.deriv(cost, x), (x, xv)), np.cos(xv), rtol=1e-12)


def test_value_of_gradient(backend, rng, axes3):
    A, B, _ = axes3
    x = ng.placeholder([A, B], dtype=F64)
    xv = rng.standard_normal((3, 4))
    f = ng.value_of(x) * ng.sin(x)
    grad_check(backend, f, x, {x: xv})
    cost = ng.sum(f, reduction_axes=[A, B])
    np.testing.assert_allclose(run(backend, ng.deriv(cost, x), (x, xv)),
                               np.sin(xv) + xv * np.cos(xv), rtol=1e-12)


def test_composite_network_gradient(backend, rng):
    """A small two-layer network: every rule together, w.r.t. weights and input."""
    D, H, Y, N = (ng.make_axis(n, s) for n, s in [(3, "D"), (4, "H"), (3, "Y"), (2, "N")])
    x = ng.placeholder([D, N], dtype=F64)
    w1 = ng.placeholder([H, D], dtype=F64)
    w2 = ng.placeholder([Y, H], dtype=F64)
    t = ng.placeholder([Y, N], dtype=F64)
    feeds = {x: rng.standard_normal((3, 2)), w1: rng.standard_normal((4, 3)),
             w2: rng.standard_normal((3, 4)), t: _one_hot_targets(rng, 3, 2)}
    hidden = ng.tanh(ng.dot(w1, x))
    cost = ng.mean(ng.cross_entropy_multi(ng.softmax(ng.dot(w2, hidden)), t), out_axes=())
    for wrt in (x, w1, w2):
        grad_check(backend, cost, wrt, feeds)


# -- seed 001's example ---------------------------------------------------------------------

def _seed_example(initial_w):
    C, W, H, Y, N = (ng.make_axis(n, s) for n, s in [(2, "C"), (3, "W"), (2, "H"), (4, "Y"), (5, "N")])
    x = ng.placeholder((C, W, H, N), dtype=F64)
    y0 = ng.placeholder((Y, N), dtype=F64)
    w = ng.variable((C, W, H, Y), dtype=F64, initial_value=initial_w)
    b = ng.variable((Y,), dtype=F64, initial_value=np.linspace(-0.3, 0.3, 4))
    y = ng.tanh(ng.dot(w, x) + b)
    c = ng.squared_L2(y - y0)
    return x, y0, w, b, y, c


def _seed_example_grads(wv, bv, xv, y0v):
    yv = np.tanh(np.einsum("cwhy,cwhn->yn", wv, xv) + bv[:, None])
    delta = 2 * (yv - y0v) * (1 - yv ** 2)
    return np.einsum("yn,cwhn->cwhy", delta, xv), delta.sum(axis=1)


def test_seed_example_variables_and_gradient(backend, rng):
    wv = rng.standard_normal((2, 3, 2, 4)) * 0.3
    x, y0, w, b, y, c = _seed_example(wv)
    assert c.variables() == [w, b]
    assert list(c.axes) == []
    d = ng.deriv(c, w)
    db = ng.deriv(c, b)
    assert isinstance(d, ng.Op)
    assert list(d.axes) == list(w.axes)
    assert list(db.axes) == list(b.axes)
    xv, y0v = rng.standard_normal((2, 3, 2, 5)), rng.standard_normal((4, 5))
    got_w, got_b = run(backend, [d, db], (x, xv), (y0, y0v))
    want_w, want_b = _seed_example_grads(wv, np.linspace(-0.3, 0.3, 4), xv, y0v)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_b, want_b, rtol=1e-10, atol=1e-12)


def test_seed_example_deriv_computes_nothing(backend, rng, monkeypatch):
    """deriv only adds ops: no transformer runs and no variable is initialized."""
    wv = rng.standard_normal((2, 3, 2, 4)) * 0.3
    initialized = []

    def initial_w(axes):
        initialized.append(tuple(axes.lengths))
        return wv

    runs = []
    original_run = ng.NumPyTransformer._run

    def counting_run(self, *args, **kwargs):
        runs.append(1)
        return original_run(self, *args, **kwargs)

    monkeypatch.setattr(ng.NumPyTransformer, "_run", counting_run)
    x, y0, w, b, y, c = _seed_example(initial_w)
    d = ng.deriv(c, w)
    assert runs == [] and initialized == []
    assert isinstance(d, ng.Op) and not d.is_assignable
    # The graph computes the gradient for whatever values are fed later.
    bv = np.linspace(-0.3, 0.3, 4)
    with ExecutorFactory(backend) as ex:
        gradient = ex.executor(d, x, y0)
        for _ in range(2):
            xv, y0v = rng.standard_normal((2, 3, 2, 5)), rng.standard_normal((4, 5))
            np.testing.assert_allclose(gradient(xv, y0v), _seed_example_grads(wv, bv, xv, y0v)[0],
                                       rtol=1e-10, atol=1e-12)
    assert initialized == [(2, 3, 2, 4)]
    if backend == "numpy":
        assert len(runs) == 2


# -- error seeds, deriv_many, unrelated variables ---------------------------------------------

def test_error_seed_gives_the_vector_jacobian_product(backend, rng, axes3):
    A, B, C = axes3
    x = ng.placeholder([A, B], dtype=F64)
    y = ng.placeholder([B, C], dtype=F64)
    e = ng.placeholder([C, A, B], dtype=F64)  # the cost's axes, in another order
    xv, yv = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    ev = rng.standard_normal((2, 3, 4))
    f = ng.tanh(x) * y  # axes (A, B, C)
    dx = ng.deriv(f, x, error=e)
    dy = ng.deriv(f, y, error=e)
    assert list(dx.axes) == [A, B] and list(dy.axes) == [B, C]
    gx, gy = run(backend, [dx, dy], (x, xv), (y, yv), (e, ev))
    E = np.transpose(ev, (1, 2, 0))  # (A, B, C)
    np.testing.assert_allclose(gx, (E * yv[None]).sum(axis=2) * (1 - np.tanh(xv) ** 2), rtol=1e-12)
    np.testing.assert_allclose(gy, (E * np.tanh(xv)[:, :, None]).sum(axis=0), rtol=1e-12)


def test_error_seed_on_a_dot(backend, rng):
    H, D, N = ng.make_axis(3, "H"), ng.make_axis(4, "D"), ng.make_axis(2, "N")
    w = ng.placeholder([H, D], dtype=F64)
    x = ng.placeholder([D, N], dtype=F64)
    e = ng.placeholder([H, N], dtype=F64)
    wv, xv, ev = rng.standard_normal((3, 4)), rng.standard_normal((4, 2)), rng.standard_normal((3, 2))
    f = ng.dot(w, x)
    gw, gx = run(backend, autodiff.deriv_many(f, [w, x], error=e), (w, wv), (x, xv), (e, ev))
    np.testing.assert_allclose(gw, ev @ xv.T, rtol=1e-12)
    np.testing.assert_allclose(gx, wv.T @ ev, rtol=1e-12)


def test_error_seed_on_a_scalar_cost_scales_the_gradient(backend, rng, axes3):
    A, B, _ = axes3
    x = ng.placeholder([A, B], dtype=F64)
    xv = rng.standard_normal((3, 4))
    cost = ng.sum(ng.sin(x), reduction_axes=[A, B])
    got = run(backend, ng.deriv(cost, x, error=ng.constant(2.5, dtype=F64)), (x, xv))
    np.testing.assert_allclose(got, 2.5 * np.cos(xv), rtol=1e-12)


def test_non_scalar_cost_without_error_raises(axes3):
    A, B, _ = axes3
    x = ng.placeholder([A, B], dtype=F64)
    with pytest.raises(ng.IncompatibleAxesError):
        ng.deriv(ng.sin(x), x)
    with pytest.raises(ng.IncompatibleAxesError):
        autodiff.deriv_many(ng.sum(x, reduction_axes=[A]), [x])


def test_error_with_other_axes_than_the_cost_raises(axes3):
    A, B, C = axes3
    x = ng.placeholder([A, B], dtype=F64)
    with pytest.raises(ng.IncompatibleAxesError):
        ng.deriv(ng.sin(x), x, error=ng.placeholder([A], dtype=F64))
    with pytest.raises(ng.IncompatibleAxesError):
        ng.deriv(ng.sin(x), x, error=ng.placeholder([A, B, C], dtype=F64))


def test_deriv_many_matches_separate_derivs(backend, rng, axes3):
    A, B, C = axes3
    x = ng.placeholder([A, B], dtype=F64)
    w = ng.variable([B, C], dtype=F64, initial_value=rng.standard_normal((4, 2)))
    b = ng.variable([C], dtype=F64, initial_value=rng.standard_normal(2))
    cost = ng.sum(ng.tanh(ng.dot(x, w) + b) * ng.sigmoid(x), reduction_axes=[A, B, C])
    many = autodiff.deriv_many(cost, [w, x, b])
    assert len(many) == 3
    for op, wrt in zip(many, [w, x, b]):
        assert list(op.axes) == list(wrt.axes)
    separate = [ng.deriv(cost, w), ng.deriv(cost, x), ng.deriv(cost, b)]
    xv = rng.standard_normal((3, 4))
    got_many = run(backend, many, (x, xv))
    got_separate = run(backend, separate, (x, xv))
    for a, s in zip(got_many, got_separate):
        assert np.all(a != 0)
        np.testing.assert_allclose(a, s, rtol=1e-12, atol=1e-14)


def test_derivative_wrt_an_unrelated_variable_is_zeros(backend, rng, axes3):
    A, B, C = axes3
    x = ng.placeholder([A, B], dtype=F64)
    unused = ng.variable([C, B], dtype=F64, initial_value=1.0)
    cost = ng.sum(ng.square(x), reduction_axes=[A, B])
    d = ng.deriv(cost, unused)
    assert list(d.axes) == [C, B]
    value = run(backend, d, (x, rng.standard_normal((3, 4))))
    assert value.shape == (2, 4)
    assert np.all(value == 0)
    # deriv_many too, next to a real gradient.
    xv = rng.standard_normal((3, 4))
    dz, dx = run(backend, autodiff.deriv_many(cost, [unused, x]), (x, xv))
    assert np.all(dz == 0) and dz.shape == (2, 4)
    np.testing.assert_allclose(dx, 2 * xv)


def test_derivative_wrt_itself(backend, rng):
    x = ng.placeholder((), dtype=F64)
    assert float(run(backend, ng.deriv(x, x), (x, 3.0))) == 1.0


# -- zero-derivative ops ---------------------------------------------------------------------

def test_zero_derivative_ops_are_registered():
    for op_class in autodiff.ZERO_DERIVATIVE_OPS:
        assert op_class in autodiff.ADJOINTS
    names = {c.__name__ for c in autodiff.ZERO_DERIVATIVE_OPS}
    assert {"Sign", "Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual",
            "ArgMax", "ArgMin", "OneHotOp"} <= names


@pytest.mark.parametrize("compare", [ng.equal, ng.not_equal, ng.less, ng.less_equal, ng.greater,
                                     ng.greater_equal])
def test_comparisons_pass_no_gradient(backend, rng, axes3, compare):
    A, B, _ = axes3
    x = ng.placeholder([A, B], dtype=F64)
    y = ng.placeholder([B], dtype=F64)
    xv, yv = rng.standard_normal((3, 4)), rng.standard_normal(4)
    mask = compare(x, y) * 1.0
    # x reaches the cost both through the mask (no gradient) and directly.
    cost = ng.sum(mask * x, reduction_axes=[A, B])
    gx, gy = run(backend, autodiff.deriv_many(cost, [x, y]), (x, xv), (y, yv))
    np_compare = {ng.equal: np.equal, ng.not_equal: np.not_equal, ng.less: np.less,
                  ng.less_equal: np.less_equal, ng.greater: np.greater,
                  ng.greater_equal: np.greater_equal}[compare]
    np.testing.assert_array_equal(gx, np_compare(xv, yv).astype(F64))
    np.testing.assert_array_equal(gy, np.zeros(4))


def test_sign_passes_no_gradient(backend, rng, axes3):
    A, B, _ = axes3
    x = ng.placeholder([A, B], dtype=F64)
    xv = away_from_zero(rng, (3, 4))
    only_sign = ng.sum(ng.sign(x) * 3.0, reduction_axes=[A, B])
    through_both = ng.sum(ng.sign(x) * x, reduction_axes=[A, B])  # = sum |x|
    g0, g1 = run(backend, [ng.deriv(only_sign, x), ng.deriv(through_both, x)], (x, xv))
    np.testing.assert_array_equal(g0, np.zeros((3, 4)))
    np.testing.assert_array_equal(g1, np.sign(xv))


def test_argmax_argmin_and_one_hot_pass_no_gradient(backend, rng):
    C, N = ng.make_axis(4, "C"), ng.make_axis(3, "N")
    x = ng.placeholder([C, N], dtype=F64)
    xv = rng.standard_normal((4, 3))
    picked = ng.one_hot(ng.argmax(x, reduction_axes=[C]), C, dtype=F64)
    cost = ng.sum(picked * x, reduction_axes=[C, N])  # sum of column maxima
    grad = run(backend, ng.deriv(cost, x), (x, xv))
    expected = np.zeros((4, 3))
    expected[xv.argmax(axis=0), np.arange(3)] = 1.0
    np.testing.assert_array_equal(grad, expected)
    indices = ng.argmin(x, reduction_axes=[C]) * 1.0 + ng.argmax(x, reduction_axes=[C]) * 1.0
    only_index = ng.sum(indices * 2.0, reduction_axes=[N])
    np.testing.assert_array_equal(run(backend, ng.deriv(only_index, x), (x, xv)), np.zeros((4, 3)))


def test_one_hot_of_integer_labels_passes_no_gradient(backend, rng):
    C, N = ng.make_axis(4, "C"), ng.make_axis(3, "N")
    labels = ng.placeholder([N], dtype=np.int32)
    x = ng.placeholder([C, N], dtype=F64)
    xv, lv = rng.standard_normal((4, 3)), np.array([2, 0, 3], dtype=np.int32)
    t = ng.one_hot(labels, C, dtype=F64)
    cost = ng.sum(ng.cross_entropy_multi(ng.softmax(x), t), reduction_axes=[N])
    grad = run(backend, ng.deriv(cost, x), (x, xv), (labels, lv))
    tv = np.zeros((4, 3))
    tv[lv, np.arange(3)] = 1.0
    np.testing.assert_allclose(grad, softmax_np(xv) - tv, rtol=1e-10, atol=1e-12)
    # One-hot codes of labels computed from x pass nothing back to x.
    code = ng.one_hot(ng.argmax(x * 2.0, reduction_axes=[C]), C, dtype=F64)
    zero = run(backend, ng.deriv(ng.sum(code * 5.0, reduction_axes=[C, N]), x), (x, xv))
    np.testing.assert_array_equal(zero, np.zeros((4, 3)))


# -- ops without a rule ---------------------------------------------------------------------

class Mystery(ng.Op):
    """An op with no entry in ADJOINTS."""

    def __init__(self, x, name=None):
        super().__init__(x, axes=x.axes, dtype=x.dtype, name=name)


def test_op_without_adjoint_raises_not_differentiable(axes3):
    A, B, _ = axes3
    x = ng.placeholder([A, B], dtype=F64)
    mystery = Mystery(ng.sin(x), name="riddle")
    cost = ng.sum(mystery, reduction_axes=[A, B])
    with pytest.raises(ng.NotDifferentiableError) as caught:
        ng.deriv(cost, x)
    assert "Mystery" in str(caught.value)
    assert "riddle" in str(caught.value)
    assert isinstance(caught.value, ng.AxgraphError)


def test_op_without_adjoint_off_the_path_is_not_needed(backend, rng, axes3):
    A, B, _ = axes3
    x = ng.placeholder([A, B], dtype=F64)
    other = ng.placeholder([A, B], dtype=F64)
    cost = ng.sum(Mystery(other) + ng.sin(x), reduction_axes=[A, B])
    grad = ng.deriv(cost, x)
    xv = rng.standard_normal((3, 4))
    with ExecutorFactory(backend) as ex:
        # The forward value needs Mystery's kernel; the gradient does not.
        np.testing.assert_allclose(ex.executor(grad, x)(xv), np.cos(xv), rtol=1e-12)


def test_subclass_of_a_differentiable_op_inherits_its_rule(axes3):
    A, _, _ = axes3

    class MyTanh(ng.op_graph.elementwise.Tanh):
        pass

    x = ng.placeholder([A], dtype=F64)
    cost = ng.sum(MyTanh(x), reduction_axes=[A])
    d = ng.deriv(cost, x)  # builds without NotDifferentiableError
    assert list(d.axes) == [A]
    # The rule found is Tanh's: d * (1 - op * op) with op the MyTanh node itself.
    assert autodiff._find_rule(MyTanh(x)) is autodiff.ADJOINTS[ng.op_graph.elementwise.Tanh]


# -- numerical stability -----------------------------------------------------------------

def test_softmax_cross_entropy_gradient_with_huge_logits(backend):
    C, N = ng.make_axis(3, "C"), ng.make_axis(4, "N")
    x = ng.placeholder([C, N], dtype=F64)
    t = ng.placeholder([C, N], dtype=F64)
    xv = np.array([[1000.0, -1000.0, 1000.0, 0.0],
                   [-1000.0, 1000.0, -1000.0, -1000.0],
                   [0.0, -1000.0, 999.0, 1000.0]])
    tv = np.array([[1.0, 0.0, 0.0, 0.0],
                   [0.0, 0.0, 1.0, 0.0],
                   [0.0, 1.0, 0.0, 1.0]])
    ce = ng.cross_entropy_multi(ng.softmax(x), t)
    cost = ng.sum(ce, reduction_axes=[N])
    value, grad = run(backend, [ce, ng.deriv(cost, x)], (x, xv), (t, tv))
    assert np.all(np.isfinite(value)) and np.all(np.isfinite(grad))
    log_s = xv - xv.max(axis=0) - np.log(np.exp(xv - xv.max(axis=0)).sum(axis=0))
    np.testing.assert_allclose(value, -(tv * log_s).sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(value[1], 2000.0)
    np.testing.assert_allclose(grad, softmax_np(xv) - tv, atol=1e-12)


def test_softmax_cross_entropy_gradient_is_softmax_minus_target(backend, rng):
    C, N = ng.make_axis(5, "C"), ng.make_axis(4, "N")
    x = ng.placeholder([C, N], dtype=F64)
    t = ng.placeholder([C, N], dtype=F64)
    xv = rng.uniform(-5, 5, (5, 4))
    tv = _one_hot_targets(rng, 5, 4)
    cost = ng.sum(ng.cross_entropy_multi(ng.softmax(x), t), reduction_axes=[N])
    grad = run(backend, ng.deriv(cost, x), (x, xv), (t, tv))
    np.testing.assert_allclose(grad, softmax_np(xv) - tv, rtol=1e-10, atol=1e-12)


def test_sigmoid_cross_entropy_gradient_is_right_where_naive_saturates(backend):
    """The schema path gives sigmoid(x) - t even where sigmoid rounds to exactly 0 or 1."""
    A = ng.make_axis(4, name="A")
    N = ng.make_axis(1, name="N")
    x = ng.placeholder([A, N])  # float32 on purpose: sigmoid(+-200) rounds to 1 or 0
    t = ng.constant(np.array([[0.0], [1.0], [1.0], [0.0]]), [A, N])
    xv = np.array([[200.0], [-200.0], [3.0], [-3.0]], dtype=np.float32)
    stable = ng.deriv(ng.sum(ng.cross_entropy_binary(ng.sigmoid(x), t), out_axes=()), x)
    naive = ng.deriv(ng.sum(ng.cross_entropy_binary(ng.sigmoid(x), t, enable_sig_opt=False),
                            out_axes=()), x)
    with ng.make_transformer(backend) as transformer:
        stable_value, naive_value = transformer.computation([stable, naive], x)(xv)
    sigmoid = 1.0 / (1.0 + np.exp(-xv.astype(np.float64)))
    expected = sigmoid - np.array([[0.0], [1.0], [1.0], [0.0]])
    np.testing.assert_allclose(stable_value, expected, rtol=1e-5, atol=1e-6)
    # The naive path takes safelog of a probability rounded to exactly 0 or 1: its gradient
    # there is lost (or infinite), never the true sigmoid(x) - t.
    assert not np.all(np.isfinite(naive_value)) or not np.allclose(naive_value, expected, atol=0.5)


def test_binary_cross_entropy_gradient_at_zero_logit_is_sigmoid_minus_target(transformer):
    # The stable form's derivative at x = 0 must be sigmoid(0) - t = 0.5 - t (a walk-through
    # starting from zero weights takes its first step there).
    C, N = ng.make_axis(length=3, name="C"), ng.make_axis(length=4, name="N")
    z = ng.placeholder([C, N], dtype=np.float64)
    t = ng.placeholder([C, N], dtype=np.float64)
    cost = ng.sum(ng.cross_entropy_binary(ng.sigmoid(z), t), out_axes=())
    targets = np.array([[0, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 1]], np.float64)
    logits = np.zeros((3, 4))
    logits[0, 0] = 1.5
    got = transformer.computation(ng.deriv(cost, z), z, t)(logits, targets)
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-logits)) - targets, rtol=1e-12)


def test_deriv_through_a_concat_along_an_unknown_length_says_what_to_do():
    N, A = ng.make_axis(name="N"), ng.make_axis(length=2, name="A")
    x = ng.placeholder([N, A], dtype=np.float64)
    joined = ng.concat_along_axis([x, -x], N)
    with pytest.raises(ng.NotDifferentiableError, match="length") as info:
        ng.deriv(ng.sum(joined, out_axes=()), x)
    assert "test_autodiff.py" in str(info.value)
