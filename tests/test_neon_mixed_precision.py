"""Mixed precision: bfloat16 variables in the forward and backward pass, float32 masters.

The optimizer's ``master_weights=True`` keeps a float32 copy of each bfloat16 variable, updates
the copy and writes it back rounded. Checked on every transformer: training lowers the loss, the
masters stay float32, the variables equal their masters rounded after every step, and updates far
below bfloat16's rounding step accumulate in the master (where without it they vanish).
"""
from __future__ import annotations

import numpy as np
import pytest

import axgraph as ng
from axgraph.frontends.neon import AdamW, GradientDescentMomentum
from conftest import ENGINES

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)


@pytest.fixture(params=["numpy", "cpu", "jax"])
def transformer(request):
    name, options = ENGINES[request.param]
    with ng.make_transformer(name, **options) as transformer:
        yield transformer


def regression(seed=0):
    """A bfloat16 linear regression: y = x . true_w, fed in bfloat16."""
    rng = np.random.default_rng(seed)
    N, F = ng.make_axis(16, name="N"), ng.make_axis(4, name="F")
    true_w = np.array([1.5, -2.0, 0.5, 3.0], np.float32)
    xs = rng.standard_normal((16, 4)).astype(np.float32)
    x = ng.placeholder([N, F], dtype="bfloat16", name="x")
    y = ng.placeholder([N], dtype="bfloat16", name="y")
    w = ng.variable([F], initial_value=rng.standard_normal(4) * 0.1, dtype="bfloat16", name="w")
    loss = ng.mean(ng.square(ng.dot(x, w) - y), out_axes=())
    return x, y, w, loss, xs.astype(BF16), (xs @ true_w).astype(BF16)


def test_trains_with_float32_masters(transformer):
    x, y, w, loss, xs, ys = regression()
    optimizer = AdamW(0.05, weight_decay=0.01, master_weights=True)
    step = ng.sequential([optimizer(loss), loss])
    master = optimizer.slots[w]["master"]
    assert master.dtype == np.float32 and w.dtype == BF16
    assert all(state.dtype == np.float32 for state in optimizer.slots[w].values())
    train = transformer.computation([step, w, master], x, y)
    losses = []
    for _ in range(60):
        loss_value, w_value, master_value = train(xs, ys)
        losses.append(float(loss_value))
        assert w_value.dtype == BF16 and master_value.dtype == np.float32
        np.testing.assert_array_equal(w_value, master_value.astype(BF16))
    assert losses[-1] < 0.05 * losses[0]


def test_updates_below_the_rounding_step_accumulate(transformer):
    """w = 1 in bfloat16 (spacing 2**-7 near 1); gradient 1, steps of 1e-3 each."""
    w = ng.variable((), initial_value=1.0, dtype="bfloat16", name="w")
    cost = ng.add(w, 0, dtype=np.float32)                        # d cost / dw = 1

    def ten_steps(master_weights):
        optimizer = GradientDescentMomentum(1e-3, master_weights=master_weights)
        step = optimizer(cost)
        train = transformer.computation([step, w])
        return [train()[1] for _ in range(10)]

    assert [float(v) for v in ten_steps(False)] == [1.0] * 10     # each 1 - 0.001 rounds to 1
    master = np.float32(1.0)
    expected = []
    for _ in range(10):                   # the master in float32, rounded after each step
        master = master - np.float32(1e-3)
        expected.append(master.astype(BF16))
    with_masters = ten_steps(True)
    assert with_masters == expected
    assert float(with_masters[-1]) == 1.0 - 3 * 2.0 ** -8          # 0.990 rounded: it moved


def test_float32_variables_keep_no_master():
    F = ng.make_axis(3, name="F")
    v = ng.variable([F], initial_value=1.0, name="v")
    optimizer = AdamW(master_weights=True)
    optimizer(ng.sum(v * v, out_axes=()))
    assert "master" not in optimizer.slots[v]


def test_decay_filter_sees_the_variable_not_its_master():
    seen = []
    x, y, w, loss, xs, ys = regression()
    AdamW(0.05, master_weights=True, decay_filter=lambda v: seen.append(v) or True)(loss)
    assert seen == [w]
