"""softmax and log_softmax as one op each: values and gradients on every engine against
NumPy written here (gradients by float64 central differences), masked rows, the fused cpu
kernels they become, and dropout's training switch."""
import numpy as np
import pytest

import axgraph as ng
from axgraph import core
from conftest import ENGINES

N, T, K = 2, 5, 6
CAUSAL = np.arange(K)[None, :] <= np.arange(T)[:, None]  # key k visible from query t


def np_softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_log_softmax(s):
    shifted = s - s.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def forward(kind, x, mask=None):
    """The hand-written reference of each case: (masked) softmax or log-softmax over K."""
    s = x * 0.5
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    return np_log_softmax(s) if kind == "log_softmax" else np_softmax(s)


def numeric_gradient(f, x, eps=1e-6):
    """d sum(f(x)) / dx by central differences (float64), where f is finite."""
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        grad[i] = (f(up) - f(down)) / (2 * eps)
    return grad


def build(kind, masked, dtype):
    """(y, dy/dx of sum(where(mask, y, 0) * g), placeholders x, g) over axes N, T, K."""
    Na, Ta, Ka = ng.make_axis(N, name="N"), ng.make_axis(T, name="T"), ng.make_axis(K, name="K")
    x, g = ng.placeholder([Na, Ta, Ka], dtype=dtype), ng.placeholder([Na, Ta, Ka], dtype=dtype)
    s = x * 0.5
    if masked:
        s = ng.where(ng.causal_mask(Ta, Ka), s, -np.inf)
    y = (ng.log_softmax if kind == "log_softmax" else ng.softmax)(s, Ka)
    picked = ng.where(ng.causal_mask(Ta, Ka), y, 0.0) if masked else y
    return y, ng.deriv(ng.sum(picked * g, out_axes=()), x), x, g


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("kind", ["softmax", "log_softmax"])
@pytest.mark.parametrize("masked", [False, True], ids=["plain", "causal"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_values_and_gradients(engine, kind, masked, dtype):
    rng = np.random.default_rng(7)
    xv, gv = rng.standard_normal((N, T, K)) * 4, rng.standard_normal((N, T, K))
    mask = CAUSAL if masked else None
    want = forward(kind, xv, mask)
    picked = CAUSAL if masked else np.ones((T, K), bool)

    def cost(x):
        return float(np.sum(np.where(picked, forward(kind, x, mask), 0.0) * gv))

    want_grad = numeric_gradient(cost, xv)
    name, options = ENGINES[engine]
    y, dx, x, g = build(kind, masked, dtype)
    with ng.make_transformer(name, **options) as t:
        got, got_grad = t.computation([y, dx], x, g)(xv.astype(dtype), gv.astype(dtype))
    tolerance = 1e-9 if dtype == np.float64 else 2e-5
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), finite)  # -inf exactly where masked
    np.testing.assert_allclose(got[finite], want[finite], rtol=tolerance, atol=tolerance)
    if kind == "softmax" and masked:
        assert np.all(got[..., ~CAUSAL] == 0)
    np.testing.assert_allclose(got_grad, want_grad, rtol=1e-5, atol=tolerance + 1e-7)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("kind", ["softmax", "log_softmax"])
def test_fully_masked_row_is_nan_with_zero_gradient(engine, kind):
    """A row with every key masked has no distribution: its values are NaN (exp(-inf - -inf)),
    as in the five-op formula, and where(mask, ...) passes it no gradient: 0."""
    mask = CAUSAL.copy()
    mask[2] = False
    Na, Ta, Ka = ng.make_axis(N, name="N"), ng.make_axis(T, name="T"), ng.make_axis(K, name="K")
    x = ng.placeholder([Na, Ta, Ka], dtype=np.float64)
    keep = ng.constant(mask, axes=[Ta, Ka], dtype=np.bool_)
    y = (ng.log_softmax if kind == "log_softmax" else ng.softmax)(ng.where(keep, x, -np.inf), Ka)
    dx = ng.deriv(ng.sum(ng.where(keep, y, 0.0), out_axes=()), x)
    xv = np.random.default_rng(3).standard_normal((N, T, K))
    name, options = ENGINES[engine]
    with ng.make_transformer(name, **options) as t:
        got, got_grad = t.computation([y, dx], x)(xv)
    assert np.isnan(got[:, 2]).all()
    others = np.delete(np.arange(T), 2)
    with np.errstate(invalid="ignore"):  # the reference's own fully masked row
        want = forward(kind, xv / 0.5, mask)  # forward scales by 0.5: undo it
    np.testing.assert_allclose(got[:, others][np.isfinite(want[:, others])],
                               want[:, others][np.isfinite(want[:, others])], rtol=1e-12)
    assert np.all(got_grad[:, 2] == 0)
    assert np.isfinite(got_grad).all()


def fused_kernels(y, dx, x, g, **options):
    with ng.make_transformer("cpu", **options) as t:
        computation = t.computation([y, dx], x, g)
        computation(np.zeros((N, T, K), np.float32), np.zeros((N, T, K), np.float32))
        return computation._compiled().last_program.function


@pytest.mark.parametrize("kind", ["softmax", "log_softmax"])
def test_masked_softmax_is_two_fused_kernels(kind):
    """Forward: mask, scale, max, exp, sum and normalise in one kernel; backward: the
    adjoint in one more, and the mask's and scale's adjoints (a Select reading the mask's
    broadcast, a Multiply) in a third. No reduction, exp or select is left outside them."""
    y, dx, x, g = build(kind, True, np.float32)
    function = fused_kernels(y, dx, x, g, fuse_min_elements=1)
    fused = [n for n in function.nodes if isinstance(n, core.Fused)]
    finals = sorted(type(n.output).__name__ for n in fused
                    if isinstance(n.output, (core.Softmax, core.SoftmaxBackprop)))
    forward_op = "LogSoftmax" if kind == "log_softmax" else "Softmax"
    assert finals == sorted([forward_op, forward_op + "Backprop"])
    (first,) = [n for n in fused if type(n.output).__name__ == forward_op]
    assert {type(m).__name__ for m in first.body} >= {"Multiply", "Select", forward_op}
    loose = [n for n in function.nodes if isinstance(n, (core.Reduction, core.Exp, core.Log,
                                                         core.Softmax, core.SoftmaxBackprop,
                                                         core.Select))]
    assert loose == []


def test_softmax_over_leading_axis_stays_correct_unfused():
    """Rows must be the trailing dims for the fused kernel; another axis runs unfused."""
    C, B = ng.make_axis(7, name="C"), ng.make_axis(3, name="B")
    x, g = ng.placeholder([C, B], dtype=np.float64), ng.placeholder([C, B], dtype=np.float64)
    y = ng.softmax(x, C)
    dx = ng.deriv(ng.sum(y * g, out_axes=()), x)
    rng = np.random.default_rng(5)
    xv, gv = rng.standard_normal((7, 3)), rng.standard_normal((7, 3))
    p = np_softmax(xv.T).T
    for name, options in ENGINES.values():
        with ng.make_transformer(name, **options) as t:
            got, got_grad = t.computation([y, dx], x, g)(xv, gv)
        np.testing.assert_allclose(got, p, rtol=1e-12)
        np.testing.assert_allclose(got_grad, p * (gv - (gv * p).sum(axis=0)), rtol=1e-10,
                                   atol=1e-14)


def test_cross_entropy_on_softmax_uses_log_softmax():
    C, B = ng.make_axis(4, name="C"), ng.make_axis(3, name="B")
    x = ng.placeholder([C, B], dtype=np.float64)
    t_ = ng.placeholder([C, B], dtype=np.float64)
    loss = ng.cross_entropy_multi(ng.softmax(x, C), t_, out_axes=[B])
    xv = np.array([[800.0, 0, 1], [0, 0, 2], [-800.0, 0, 3], [0, 0, 4]])
    tv = np.eye(4)[:, :3]
    with ng.make_transformer("cpu") as t:
        got = t.computation(loss, x, t_)(xv, tv)
    want = -(tv * np_log_softmax(xv.T).T).sum(axis=0)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=1e-12)


# -- dropout's training switch ----------------------------------------------------------------

@pytest.mark.parametrize("engine", ENGINES)
def test_dropout_training_placeholder(engine):
    C = ng.make_axis(2000, name="C")
    x, training = ng.placeholder([C], dtype=np.float64), ng.placeholder((), dtype=np.bool_)
    y = ng.dropout(x, keep=0.75, seed=11, training=training)
    dx = ng.deriv(ng.sum(y * 3.0, out_axes=()), x)
    xv = np.random.default_rng(2).standard_normal(2000)
    name, options = ENGINES[engine]
    with ng.make_transformer(name, **options) as t:
        step = t.computation([y, dx], x, training)
        on, d_on = step(xv, True)
        off, d_off = step(xv, False)
    np.testing.assert_array_equal(off, xv)
    np.testing.assert_array_equal(d_off, np.full(2000, 3.0))
    kept = on != 0
    assert 0.7 < kept.mean() < 0.8
    np.testing.assert_allclose(on[kept], xv[kept] / 0.75, rtol=1e-15)
    np.testing.assert_allclose(d_on, np.where(kept, 3.0 / 0.75, 0.0), rtol=1e-15)


def test_dropout_training_flag_values():
    C = ng.make_axis(100, name="C")
    x = ng.placeholder([C])
    assert ng.dropout(x, training=False) is x
    numeric = ng.placeholder(())
    y = ng.dropout(x, keep=0.5, training=numeric)
    with ng.make_transformer("cpu") as t:
        step = t.computation(y, x, numeric)
        np.testing.assert_array_equal(step(np.ones(100, np.float32), 0.0), np.ones(100))
        assert set(step(np.ones(100, np.float32), 1.0).tolist()) <= {0.0, 2.0}
    for bad in (1, "yes", x):
        with pytest.raises(ng.AxgraphTypeError, match="training"):
            ng.dropout(x, training=bad)


def test_mask_fed_per_call_runs_the_backward_in_three_kernels():
    """A mask given as a placeholder over T and K stays a Broadcast over N in the
    program. Its adjoint (a Select on that broadcast) and the scale's join one fused
    kernel after the backprop's; values and gradients match NumPy written here."""
    rng = np.random.default_rng(11)
    xv, gv = rng.standard_normal((N, T, K)) * 4, rng.standard_normal((N, T, K))
    Na, Ta, Ka = ng.make_axis(N, name="N"), ng.make_axis(T, name="T"), ng.make_axis(K, name="K")
    x, g = ng.placeholder([Na, Ta, Ka], dtype=np.float32), ng.placeholder([Na, Ta, Ka],
                                                                            dtype=np.float32)
    keep = ng.placeholder([Ta, Ka], dtype=np.bool_)
    y = ng.softmax(ng.where(keep, x * 0.5, -np.inf), Ka)
    dx = ng.deriv(ng.sum(y * g, out_axes=()), x)
    with ng.make_transformer("cpu", fuse_min_elements=1) as t:
        computation = t.computation([y, dx], x, g, keep)
        got, got_grad = computation(xv.astype(np.float32), gv.astype(np.float32), CAUSAL)
        function = computation._compiled().last_program.function
    want = forward("softmax", xv, CAUSAL)
    # d/dx of sum(y * g): y (g - sum(y g)) through the mask, times the scale 0.5
    want_grad = np.where(CAUSAL, want * (gv - (want * gv).sum(-1, keepdims=True)), 0.0) * 0.5
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(got_grad, want_grad, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(want_grad, numeric_gradient(
        lambda v: float(np.sum(forward("softmax", v, CAUSAL) * gv)), xv), atol=1e-7)
    fused = [n for n in function.nodes if isinstance(n, core.Fused)]
    assert len(fused) == 3
    assert any({type(m).__name__ for m in n.body} >= {"Select", "Multiply"}
               and not isinstance(n.output, (core.Softmax, core.SoftmaxBackprop))
               for n in fused)
    loose = [n for n in function.nodes if isinstance(n, (core.Select, core.Multiply,
                                                         core.Reduction, core.Exp))]
    assert loose == []
