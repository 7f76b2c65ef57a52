"""bfloat16 in the axes graph: the same small graphs on every engine agree with NumPy.

Each expected value is written here by hand in float32 from the same (bfloat16)
inputs and rounded to bfloat16 once; a graph rounds after every op, so the two
agree within bfloat16's tolerance (an 8-bit significand: about 1e-2 relative).
Mixed-type results are checked for the types docs/dtypes.md states.
"""
from __future__ import annotations

import numpy as np
import pytest

import axgraph as ng
from axgraph import dtypes
from axgraph.errors import DTypeError, FeedError, SerializationError
from conftest import ENGINES

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
pytestmark = pytest.mark.filterwarnings("error")
RTOL = ATOL = 1e-2


@pytest.fixture(params=list(ENGINES))
def engine(request):
    name, options = ENGINES[request.param]
    with ng.make_transformer(name, **options) as transformer:
        yield transformer


def bf16(array) -> np.ndarray:
    return np.asarray(array, dtype=np.float32).astype(BF16)


def assert_bf16_close(actual, expected_f32) -> None:
    """`actual` is bfloat16 and within bfloat16's tolerance of the float32 computation
    rounded to bfloat16."""
    assert actual.dtype == BF16
    np.testing.assert_allclose(actual.astype(np.float32),
                               bf16(expected_f32).astype(np.float32), rtol=RTOL, atol=ATOL)


def axes(*lengths_and_names):
    return [ng.make_axis(length=n, name=name) for n, name in lengths_and_names]


@pytest.mark.parametrize("spelling", ["bfloat16", "bf16", "ml_dtypes", "np.dtype"])
def test_every_spelling_gives_bfloat16(spelling):
    dtype = {"bfloat16": "bfloat16", "bf16": "bf16", "ml_dtypes": ml_dtypes.bfloat16,
             "np.dtype": BF16}[spelling]
    (K,) = axes((4, "K"))
    assert ng.placeholder([K], dtype=dtype).dtype == BF16
    assert ng.variable([K], initial_value=np.arange(4.0), dtype=dtype).dtype == BF16
    assert ng.constant([1.5, 2, 3, 4], [K], dtype=dtype).dtype == BF16


def test_without_ml_dtypes_a_clear_error(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # makes `import ml_dtypes` fail
    (K,) = axes((4, "K"))
    with pytest.raises(DTypeError, match=r"ml_dtypes.*axgraph\[jax\]"):
        ng.placeholder([K], dtype="bfloat16")


def test_elementwise(engine, rng):
    B, J = axes((3, "B"), (5, "J"))
    xv, yv = bf16(rng.standard_normal((3, 5))), bf16(rng.standard_normal(5))
    x, y = ng.placeholder([B, J], dtype="bfloat16"), ng.placeholder([J], dtype="bfloat16")
    result = engine.computation(ng.tanh(x * y + 1.5) + ng.exp(-x) / (2 + ng.square(y)), x, y)(
        xv, yv)
    x32, y32 = xv.astype(np.float32), yv.astype(np.float32)
    assert_bf16_close(result, np.tanh(x32 * y32 + 1.5) + np.exp(-x32) / (2 + y32 * y32))


def test_dot(engine, rng):
    B, K, J = axes((3, "B"), (40, "K"), (4, "J"))
    xv, wv = bf16(rng.standard_normal((3, 40))), bf16(rng.standard_normal((40, 4)) / 4)
    x, w = ng.placeholder([B, K], dtype="bfloat16"), ng.placeholder([K, J], dtype="bfloat16")
    result = engine.computation(ng.dot(x, w), x, w)(xv, wv)
    assert_bf16_close(result, xv.astype(np.float32) @ wv.astype(np.float32))


def test_reductions(engine, rng):
    B, K = axes((3, "B"), (200, "K"))
    xv = bf16(rng.uniform(0.5, 1.5, (3, 200)))
    x = ng.placeholder([B, K], dtype="bfloat16")
    total, biggest, average = engine.computation(
        [ng.sum(x, reduction_axes=[K]), ng.max(x, reduction_axes=[K]), ng.mean(x, out_axes=())],
        x)(xv)
    x32 = xv.astype(np.float32)
    assert_bf16_close(total, x32.sum(axis=1))
    assert_bf16_close(biggest, x32.max(axis=1))
    assert_bf16_close(average, x32.mean())


def test_softmax(engine, rng):
    B, C = axes((3, "B"), (6, "C"))
    xv = bf16(rng.standard_normal((3, 6)) * 3)
    x = ng.placeholder([B, C], dtype="bfloat16")
    result = engine.computation(ng.softmax(x, normalization_axes=[C]), x)(xv)
    e = np.exp(xv.astype(np.float32) - xv.astype(np.float32).max(axis=1, keepdims=True))
    assert_bf16_close(result, e / e.sum(axis=1, keepdims=True))


def mlp_by_hand(xv, tv, w1, w2, rate, steps):
    """Losses and final weights of `steps` gradient steps in float32, the weights rounded
    to bfloat16 after each step (they are stored in bfloat16)."""
    x, t = xv.astype(np.float32), tv.astype(np.float32)
    losses = []
    for _ in range(steps):
        w1_32, w2_32 = w1.astype(np.float32), w2.astype(np.float32)
        hidden = np.tanh(x @ w1_32)
        error = hidden @ w2_32 - t
        losses.append(np.mean(error * error))
        d_out = 2 * error / error.size
        d_w2 = hidden.T @ d_out
        d_hidden = np.outer(d_out, w2_32) * (1 - hidden * hidden)
        d_w1 = x.T @ d_hidden
        w1, w2 = bf16(w1_32 - rate * d_w1), bf16(w2_32 - rate * d_w2)
    return np.array(losses), w1, w2


def test_mlp_training_steps(engine, rng):
    N, F, H = axes((8, "N"), (5, "F"), (6, "H"))
    xv, tv = bf16(rng.standard_normal((8, 5))), bf16(rng.standard_normal(8))
    w1_start, w2_start = bf16(rng.standard_normal((5, 6)) / 2), bf16(rng.standard_normal(6) / 2)
    x, t = ng.placeholder([N, F], dtype="bfloat16"), ng.placeholder([N], dtype="bfloat16")
    w1 = ng.variable([F, H], initial_value=w1_start, dtype="bfloat16")
    w2 = ng.variable([H], initial_value=w2_start, dtype="bfloat16")
    error = ng.dot(ng.tanh(ng.dot(x, w1)), w2) - t
    loss = ng.mean(error * error, out_axes=())
    rate = 0.1
    gradients = [ng.deriv(loss, w) for w in (w1, w2)]
    assert all(g.dtype == BF16 for g in gradients)
    updates = [ng.assign(w, w - rate * g) for w, g in zip((w1, w2), gradients)]
    step = engine.computation([loss, ng.doall(updates)], x, t)
    losses = [step(xv, tv)[0] for _ in range(3)]
    expected_losses, expected_w1, expected_w2 = mlp_by_hand(xv, tv, w1_start, w2_start, rate, 3)
    assert_bf16_close(np.array(losses, dtype=BF16), expected_losses)
    assert losses[2] < losses[0]
    trained = ng.serialization.get_values(engine, [w1, w2])
    assert_bf16_close(trained[w1], expected_w1.astype(np.float32))
    assert_bf16_close(trained[w2], expected_w2.astype(np.float32))


PROMOTIONS = [  # (other operand: a dtype, or a Python number), expected type of bf16 + it
    (BF16, BF16), (np.float32, np.float32), (np.float64, np.float64),
    (np.float16, np.float32), (np.bool_, BF16), (np.int8, BF16), (np.uint8, BF16),
    (np.int16, np.float32), (np.int32, np.float64), (np.int64, np.float64),
    (2.5, BF16), (3, BF16), (True, BF16)]


@pytest.mark.parametrize("other, expected", PROMOTIONS,
                         ids=[str(o) if not isinstance(o, type) else np.dtype(o).name
                              for o, _ in PROMOTIONS])
def test_promotion(engine, other, expected):
    (K,) = axes((3, "K"))
    xv = bf16([0.5, -1.25, 3.0])
    x = ng.placeholder([K], dtype="bfloat16")
    if isinstance(other, (int, float)):
        y, yv, feeds = other, np.float32(other), (xv,)
    else:
        yv = np.array([1, 0, 2]).astype(other)
        y = ng.placeholder([K], dtype=other)
        feeds = (xv, yv)
    args = (x,) if len(feeds) == 1 else (x, y)
    for z in (x + y, y * x):
        assert z.dtype == np.dtype(expected)
        value = engine.computation(z, *args)(*feeds)
        assert value.dtype == np.dtype(expected)
        want = xv.astype(np.float32) + np.float32(yv) if z.args[0] is x else \
            np.float32(yv) * xv.astype(np.float32)
        np.testing.assert_allclose(value.astype(np.float32), want, rtol=RTOL)


def test_promotion_table_is_symmetric():
    for other, expected in PROMOTIONS:
        if isinstance(other, type) or isinstance(other, np.dtype):
            other = np.dtype(other)
            assert dtypes.promote(BF16, other) == dtypes.promote(other, BF16) == expected


def test_float_valued_ops_keep_bfloat16_and_dtype_converts(engine, rng):
    (K,) = axes((4, "K"))
    xv = bf16(rng.uniform(0.5, 2.0, 4))
    x = ng.placeholder([K], dtype="bfloat16")
    ops = [ng.sqrt(x), ng.mean(x), ng.sum(x, dtype=np.float32), ng.multiply(x, 3, dtype=np.float32)]
    assert [op.dtype for op in ops] == [BF16, BF16, np.float32, np.float32]
    root, average, total, tripled = engine.computation(ops, x)(xv)
    x32 = xv.astype(np.float32)
    assert_bf16_close(root, np.sqrt(x32))
    assert_bf16_close(average, x32.mean())
    assert total.dtype == tripled.dtype == np.float32
    np.testing.assert_allclose(total, x32.sum(), rtol=1e-6)
    np.testing.assert_array_equal(tripled, x32 * 3)


def test_integer_operands_of_a_float_op_give_float32_not_bfloat16():
    (K,) = axes((4, "K"))
    labels = ng.placeholder([K], dtype=np.int32)
    assert (labels / 2).dtype == np.float32


def test_feeds_convert_as_float64_into_float32(engine):
    (K,) = axes((3, "K"))
    x = ng.placeholder([K], dtype="bfloat16")
    f32 = ng.placeholder([K], dtype=np.float32)
    as_bf16 = engine.computation(x * 1, x)
    fed = np.array([1.0, 1.00390625 + 1e-4, -3.14159], np.float32)  # rounds to bfloat16
    np.testing.assert_array_equal(as_bf16(fed), fed.astype(BF16))
    np.testing.assert_array_equal(as_bf16(fed.astype(np.float64)), fed.astype(BF16))
    np.testing.assert_array_equal(as_bf16(np.array([1, 2, 3], np.int32)), bf16([1, 2, 3]))
    np.testing.assert_array_equal(engine.computation(f32 * 1, f32)(fed.astype(BF16)),
                                  fed.astype(BF16).astype(np.float32))
    with pytest.raises(FeedError, match="does not fit"):
        as_bf16(np.array([1.0, 1e39, 0.0]))
    labels = ng.placeholder([K], dtype=np.int32)
    with pytest.raises(FeedError, match="bfloat16"):
        engine.computation(labels + 1, labels)(fed.astype(BF16))


def test_set_values_round_into_a_bfloat16_variable(engine):
    (K,) = axes((3, "K"))
    w = ng.variable([K], initial_value=[0.0, 0.0, 0.0], dtype="bfloat16")
    engine.computation(w)
    written = np.array([1.5, 1.00390625 + 1e-4, -2.0])
    ng.serialization.set_values(engine, {w: written})
    read = ng.serialization.get_values(engine, [w])[w]
    assert read.dtype == BF16
    np.testing.assert_array_equal(read, written.astype(BF16))
    np.testing.assert_array_equal(engine.computation(w * 2)(), written.astype(BF16) * 2)
    with pytest.raises(SerializationError, match="1e[+]39 .beyond the largest bfloat16"):
        ng.serialization.set_values(engine, {w: np.array([0.0, 1e39, 0.0])})


# -- every declared elementwise op ---------------------------------------------------------
# NumPy's ufuncs on bfloat16 arrays (ml_dtypes) compute each element in float32 and round:
# each op of the graph does the same, so they agree within an ulp or two.

def test_every_elementwise_op_on_bfloat16(engine, rng):
    from test_dtypes import BINARY, UNARY, numpy_value
    B, J = axes((3, "B"), (5, "J"))
    xv = bf16((rng.standard_normal((3, 5)) * 3).round(1))
    yv = bf16(rng.uniform(0.5, 2.0, (3, 5)))
    x, y = ng.placeholder([B, J], dtype="bfloat16"), ng.placeholder([B, J], dtype="bfloat16")
    cases = [(name, make(x), numpy_value(numpy_of, xv)) for name, (make, numpy_of, _)
             in UNARY.items()]
    cases += [(name, make(x, y), numpy_value(numpy_of, xv, yv)) for name, (make, numpy_of, _)
              in BINARY.items()]
    values = engine.computation([op for _, op, _ in cases], x, y)(xv, yv)
    for (name, op, expected), got in zip(cases, values):
        assert got.dtype == op.dtype == expected.dtype, name
        if expected.dtype == np.bool_:
            np.testing.assert_array_equal(got, expected, err_msg=name)
        else:
            np.testing.assert_allclose(got.astype(np.float32), expected.astype(np.float32),
                                       rtol=RTOL, atol=ATOL, equal_nan=True, err_msg=name)


def test_variables_files_hold_bfloat16(engine, tmp_path):
    from axgraph.serialization import read_manifest, restore_variables, save_variables
    K, H = axes((3, "K"), (2, "H"))
    saved = bf16([[1.5, -2.25], [3.0e38, 1e-3], [0.0, 1.00390625]])
    w = ng.variable([K, H], initial_value=saved, dtype="bfloat16", name="w")
    engine.computation(w)
    path = save_variables(tmp_path / "bf16.npz", [w], engine)
    assert read_manifest(path)["variables"][0]["dtype"] == "bfloat16"
    fresh = ng.variable([K, H], initial_value=0.0, dtype="bfloat16", name="w")
    engine.computation(fresh)
    restored = restore_variables(path, [fresh], engine)[fresh]
    assert restored.dtype == BF16
    np.testing.assert_array_equal(restored, saved)
    np.testing.assert_array_equal(ng.serialization.get_values(engine, [fresh])[fresh], saved)
    as_f32 = ng.variable([K, H], initial_value=0.0, name="w")
    with pytest.raises(SerializationError, match="w: the file holds bfloat16 but the variable "
                                                 "is float32"):
        restore_variables(path, [as_f32], engine)


def test_adam_on_bfloat16_variables_keeps_float32_state(engine):
    """beta_2 = 0.999 is 1 in bfloat16: the optimizer's state and scalars are float32, and
    each update is rounded once into the bfloat16 variable (docs/dtypes.md)."""
    from axgraph.frontends.neon import Adam
    N, K = axes((3, "N"), (4, "K"))
    data = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    start = np.array([0.5, -1.0, 0.25, 2.0], np.float32)
    x = ng.placeholder([N, K], dtype="bfloat16")
    w = ng.variable([K], initial_value=start, dtype="bfloat16")
    cost = ng.mean(ng.square(ng.dot(x, w)), out_axes=())
    step = engine.computation([cost, Adam(0.01)(cost)], x)
    for _ in range(3):
        step(data)
    # Adam by hand in float32; the weights stored in bfloat16 after each step
    xs, weights, m, v = bf16(data).astype(np.float32), start, np.zeros(4), np.zeros(4)
    for t in range(1, 4):
        y = xs @ weights
        g = 2 * xs.T @ y / y.size
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        m_hat, v_hat = m / (1 - 0.9 ** t), v / (1 - 0.999 ** t)
        weights = bf16(weights - 0.01 * m_hat / (np.sqrt(v_hat) + 1e-8)).astype(np.float32)
    trained = ng.serialization.get_values(engine, [w])[w]
    assert_bf16_close(trained, weights)
    assert not np.array_equal(trained.astype(np.float32), bf16(start).astype(np.float32))
