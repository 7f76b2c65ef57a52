"""What the "jax" transformer does beyond the semantics every backend shares (those run on
it through conftest.BACKENDS and ENGINES): device-resident results and state, donation,
programs per binding, the StableHLO and XLA's cost, bfloat16, and its errors."""
import subprocess
import sys

import numpy as np
import pytest

import axgraph as ng
from axgraph import core
from axgraph.errors import AxgraphError, ExecutionError, FeedError

jax = pytest.importorskip("jax")


def test_import_axgraph_does_not_import_jax():
    code = "import sys, axgraph; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_kept_results_are_device_arrays_that_feed_back_without_conversion(rng):
    N = ng.make_axis(length=5, name="N")
    x = ng.placeholder([N], name="x")
    xv = rng.standard_normal(5).astype(np.float32)
    with ng.make_transformer("jax") as t:
        step = t.computation(ng.tanh(x) * 2.0, x)
        once = step(xv, keep_on_device=True)
        assert isinstance(once, jax.Array)
        twice = step(once, keep_on_device=True)
        assert isinstance(twice, jax.Array)
        host = step(twice)  # the default: NumPy
    assert type(host) is np.ndarray and host.flags.writeable
    expected = xv
    for _ in range(3):
        expected = np.tanh(expected) * 2
    np.testing.assert_allclose(host, expected, rtol=1e-5)


def test_a_device_feed_of_another_type_is_checked_as_any_feed():
    N = ng.make_axis(length=3, name="N")
    x = ng.placeholder([N], dtype=np.int32, name="x")
    with ng.make_transformer("jax") as t:
        double = t.computation(x * 2, x)
        with pytest.raises(FeedError, match="int32"):
            double(jax.numpy.array([0.5, 1.5, 2.5], dtype=jax.numpy.float32))


def test_variables_stay_on_the_device_and_donated_updates_give_the_right_values(rng):
    """Gradient descent on w: state is a jax.Array after each step, the steps match NumPy
    by hand, and a stored value handed out with keep_on_device survives the next step's
    donation of w."""
    F = ng.make_axis(length=4, name="F")
    N = ng.make_axis(length=6, name="N")
    x = ng.placeholder([F, N], dtype=np.float64, name="x")
    w0 = np.array([0.3, -1.1, 2.0, 0.25])  # not float32 values: float64 must stay float64
    w = ng.variable([F], initial_value=w0, dtype=np.float64, name="w")
    cost = ng.sum(ng.tanh(ng.dot(w, x)) ** 2, out_axes=())
    update = ng.assign(w, w - 0.1 * ng.deriv(cost, w))
    xv = rng.standard_normal((4, 6))
    with ng.make_transformer("jax") as t:
        train = t.computation([cost, update, w], x)
        held = []
        for _ in range(3):
            before = t.state.get(w)
            _, _, weights = train(xv, keep_on_device=True)
            held.append(weights)
            assert isinstance(t.state[w], jax.Array)
            if isinstance(before, jax.Array):  # the step wrote w's new value over it
                assert before.is_deleted()
        final = w.value.get()
    wv = w0.copy()
    seen = []
    for _ in range(3):
        y = np.tanh(wv @ xv)
        wv = wv - 0.1 * (xv @ (2 * y * (1 - y ** 2)))
        seen.append(wv)
    for got, want in zip(held, seen):  # each still readable: none was donated away
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    np.testing.assert_allclose(final, seen[-1], rtol=1e-12)


def test_a_program_per_binding_of_the_lengths_fed():
    N = ng.make_axis(name="N")
    x = ng.placeholder([N], name="x")
    with ng.make_transformer("jax") as t:
        total = t.computation(ng.sum(x, out_axes=()), x)
        for n in (2, 3, 2):
            assert total(np.arange(n, dtype=np.float32)) == n * (n - 1) / 2
        info = total.cache_info()
    assert info == core.CacheInfo(hits=1, misses=2, maxsize=8, currsize=2,
                                  keys=({"N": 3}, {"N": 2}))
    with ng.make_transformer("jax", cache_size=1) as t:
        total = t.computation(ng.sum(x, out_axes=()), x)
        for n in (2, 3, 2):
            total(np.ones(n, np.float32))
        assert total.cache_info() == core.CacheInfo(hits=0, misses=3, maxsize=1, currsize=1,
                                                    keys=({"N": 2},))


def test_lowered_text_is_stablehlo_and_cost_counts_a_dots_flops():
    M, K, P = (ng.make_axis(length=n, name=name) for n, name in ((4, "M"), (5, "K"), (6, "P")))
    a = ng.placeholder([M, K], name="a")
    b = ng.placeholder([K, P], name="b")
    with ng.make_transformer("jax") as t:
        product = t.computation(ng.dot(a, b), a, b)
        text = product.lowered_text()
        cost = product.cost()
        value = product(np.ones((4, 5), np.float32), np.full((5, 6), 2, np.float32))
    assert "func.func" in text and "stablehlo.dot_general" in text
    assert cost.flops >= 2 * 4 * 5 * 6 and cost.bytes_accessed >= 4 * (20 + 30 + 24)
    np.testing.assert_array_equal(value, np.full((4, 6), 10, np.float32))


def test_lowered_text_needs_the_lengths_fed_data_decides():
    N = ng.make_axis(name="N")
    x = ng.placeholder([N], name="x")
    with ng.make_transformer("jax") as t:
        double = t.computation(x * 2, x)
        with pytest.raises(ExecutionError, match="nothing has run yet"):
            double.lowered_text()
        assert "tensor<7xf32>" in double.lowered_text({"N": 7})
        assert double.cache_info().misses == 0  # looking compiles nothing for the calls
        double(np.ones(3, np.float32))
        assert "tensor<3xf32>" in double.lowered_text()


def test_gpu_names_the_devices_jax_sees_when_it_has_no_gpu():
    try:
        jax.devices("gpu")
    except RuntimeError:
        pass
    else:
        pytest.skip("this machine has a GPU")
    assert "gpu" in ng.transformer_choices() and "jax" in ng.transformer_choices()
    with pytest.raises(AxgraphError, match=r"no gpu device: JAX sees only cpu:0"):
        ng.make_transformer("gpu")


def test_gpu_trains_on_the_gpu_when_jax_sees_one(rng):
    """On a machine with a GPU, v0.4's "gpu" name runs there: the state lives on the GPU and a
    few SGD steps of a small regression match NumPy's float64 steps."""
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        pytest.skip("this machine has no GPU")
    N, F = ng.make_axis(length=16, name="N"), ng.make_axis(length=5, name="F")
    x, y = ng.placeholder([N, F], name="x"), ng.placeholder([N], name="y")
    w = ng.variable([F], initial_value=0.0, name="w")
    loss = ng.sum((ng.dot(x, w) - y) ** 2, out_axes=()) / 16
    update = ng.assign(w, w - 0.1 * ng.deriv(loss, w))
    xv, yv = rng.standard_normal((16, 5)).astype(np.float32), rng.standard_normal(16).astype(np.float32)
    with ng.make_transformer("gpu") as t:
        step = t.computation([loss, update], x, y)
        for _ in range(5):
            step(xv, yv)
        got = np.asarray(t.state[w])
        assert t.state[w].devices() <= set(gpus)
    expected = np.zeros(5)
    for _ in range(5):
        expected -= 0.1 * 2 * xv.astype(np.float64).T @ (xv @ expected - yv) / 16
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_bfloat16_values_agree_with_float32_numpy_within_bfloat16_rounding(rng):
    pytest.importorskip("ml_dtypes")
    a = core.Parameter(core.bf16, ("N", 8))
    b = core.Parameter(core.bf16, (8, 3))
    result = core.Tanh(core.Dot(a, b, (1,), (0,)))
    f = core.compile(core.Function([result, core.Sum(a, (1,))], [a, b]), backend="jax")
    av = rng.standard_normal((5, 8)).astype(core.bf16.dtype)
    bv = rng.standard_normal((8, 3)).astype(core.bf16.dtype)
    got, sums = f(av, bv)
    assert got.dtype == core.bf16.dtype and got.shape == (5, 3)
    a32, b32 = av.astype(np.float32), bv.astype(np.float32)
    np.testing.assert_allclose(got.astype(np.float32), np.tanh(a32 @ b32), rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(sums.astype(np.float32), a32.sum(axis=1), rtol=2e-2, atol=5e-2)


def test_float64_is_exact_and_jaxs_own_setting_is_left_alone():
    x = core.Parameter(core.f64, (3,))
    n = core.Parameter(core.i64, (3,))
    f = core.compile(core.Function([core.Multiply(x, x), core.Add(n, n)], [x, n]),
                     backend="jax")
    before = jax.config.jax_enable_x64
    squares, doubled = f(np.array([1 + 2 ** -40, 3.0, -0.5]), np.array([2 ** 40, -3, 0]))
    assert jax.config.jax_enable_x64 == before
    assert squares.dtype == np.float64 and doubled.dtype == np.int64
    assert squares[0] == (1 + 2 ** -40) ** 2 and doubled[0] == 2 ** 41


def test_indices_out_of_range_and_integer_division_by_zero_raise_after_the_call():
    table = core.Parameter(core.f32, (4, 2))
    ids = core.Parameter(core.i32, (3,))
    gather = core.compile(core.Function([core.Gather(table, ids)], [table, ids]), backend="jax")
    values = np.arange(8, dtype=np.float32).reshape(4, 2)
    np.testing.assert_array_equal(gather(values, np.array([3, 0, 3], np.int32))[0],
                                  values[[3, 0, 3]])
    with pytest.raises(ExecutionError, match=r"indices must lie in \[0, 4\); got -1\.\.4"):
        gather(values, np.array([-1, 4, 0], np.int32))
    a, b = core.Parameter(core.i32, (2,)), core.Parameter(core.i32, (2,))
    divide = core.compile(core.Function([core.Divide(a, b)], [a, b]), backend="jax")
    np.testing.assert_array_equal(divide(np.array([-7, 7], np.int32),
                                         np.array([2, -2], np.int32))[0], [-3, -3])
    with pytest.raises(ExecutionError, match="integer division by zero"):
        divide(np.array([1, 2], np.int32), np.array([1, 0], np.int32))


def test_prints_run_in_program_order(capsys):
    N = ng.make_axis(length=2, name="N")
    x = ng.placeholder([N], name="x")
    first = ng.PrintOp(x * 2, "first")
    second = ng.PrintOp(first + 1, "second")
    with ng.make_transformer("jax") as t:
        t.computation(second, x)(np.array([1.0, 2.0], np.float32))
        out = capsys.readouterr().out
    assert out.index("first: [2. 4.]") < out.index("second: [3. 5.]")


def test_a_failed_check_leaves_the_stored_values_as_they_were():
    """A call that raises after running (a label out of range) still donates the variable
    (its old array is gone) but hands its value back unchanged, and the next call updates
    it."""
    C = ng.make_axis(length=3, name="C")
    N = ng.make_axis(length=2, name="N")
    labels = ng.placeholder([N], dtype=np.int32, name="labels")
    counts = ng.variable([C], initial_value=np.zeros(3), dtype=np.float64, name="counts")
    tally = ng.assign(counts, counts + ng.sum(ng.one_hot(labels, axis=C), out_axes=[C]))
    with ng.make_transformer("jax") as t:
        step = t.computation(tally, labels)
        step(np.array([0, 2], np.int32))
        before = t.state[counts]
        with pytest.raises(ExecutionError, match=r"one-hot values must lie in \[0, 3\)"):
            step(np.array([1, 3], np.int32))
        assert before.is_deleted()  # donated, not copied
        np.testing.assert_array_equal(counts.value.get(), [1.0, 0.0, 1.0])
        step(np.array([2, 2], np.int32))
        np.testing.assert_array_equal(counts.value.get(), [1.0, 0.0, 3.0])


@pytest.mark.parametrize("op_class", ["Divide", "Sqrt", "Rsqrt"])
def test_the_gpu_route_of_float32_division_and_roots_is_correctly_rounded(op_class, rng):
    """On GPUs XLA's float32 division and square roots are approximate, so the kernels take
    float64 and round once; traced here for the "gpu" platform (on this machine's CPU) and
    compared bit for bit with NumPy's IEEE float32 results."""
    from axgraph.transformers.jax.kernels import TraceContext, run_kernel

    a = (rng.random(4096) * 100 + 1e-3).astype(np.float32)
    b = (rng.random(4096) * 10 + 1e-3).astype(np.float32)
    op = getattr(core, op_class)
    pa = core.Parameter(core.f32, (4096,))
    pb = core.Parameter(core.f32, (4096,))
    node = op(pa, pb) if op_class == "Divide" else op(pa)
    inputs = [a, b] if op_class == "Divide" else [a]
    ctx = TraceContext({}, {}, "gpu")
    assert ctx.rounds_via_float64
    with jax.enable_x64(True):
        got = np.asarray(run_kernel(node, ctx, [jax.numpy.asarray(v) for v in inputs]))
    expected = {"Divide": lambda: a / b, "Sqrt": lambda: np.sqrt(a),
                "Rsqrt": lambda: np.float32(1) / np.sqrt(a)}  # rounded as its two steps
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, expected[op_class]())


@pytest.mark.parametrize("platform", ["cpu", "gpu"])
@pytest.mark.parametrize("contract_a, contract_b, batch_a, batch_b", [
    ((0,), (0,), (), ()),            # W^T @ delta: the left operand contracted on its outer dim
    ((2, 0), (0, 1), (), ()),        # two contracted dims, out of order
    ((1,), (2,), (2,), (0,)),        # a batch dim behind the contracted one
    ((2,), (1,), (0,), (0,)),        # already innermost: used as is
    ((1,), (0,), (), ()),            # three free dims around the contracted one
])
def test_a_dot_contracting_its_left_operand_outside_its_innermost_dims(
        platform, contract_a, contract_b, batch_a, batch_b, rng):
    """On a CPU the left operand is copied into (batch, free, contracted) order first (XLA's
    CPU dots are slow otherwise); the values are the contraction's, worked out by einsum."""
    from axgraph.transformers.jax.kernels import TraceContext, run_kernel

    shapes = {((0,), (0,)): ((6, 5), (6, 4)), ((2, 0), (0, 1)): ((3, 5, 2), (2, 3, 4)),
              ((1,), (2,)): ((4, 3, 2), (2, 5, 3)), ((2,), (1,)): ((2, 4, 3), (2, 3, 5)),
              ((1,), (0,)): ((3, 4, 2, 5), (4, 6))}
    a_shape, b_shape = shapes[(contract_a, contract_b)]
    a = rng.standard_normal(a_shape)
    b = rng.standard_normal(b_shape)
    node = core.Dot(core.Parameter(core.f64, a_shape), core.Parameter(core.f64, b_shape),
                    contract_a, contract_b, batch_a, batch_b)
    letters = iter("ijklmnop")
    a_sub = [next(letters) for _ in a_shape]
    b_sub = [next(letters) for _ in b_shape]
    for i, j in zip(contract_a + batch_a, contract_b + batch_b):
        b_sub[j] = a_sub[i]
    out = ([a_sub[i] for i in batch_a]
           + [s for d, s in enumerate(a_sub) if d not in contract_a + batch_a]
           + [s for d, s in enumerate(b_sub) if d not in contract_b + batch_b])
    expected = np.einsum(f"{''.join(a_sub)},{''.join(b_sub)}->{''.join(out)}", a, b)
    ctx = TraceContext({}, {}, platform)
    assert ctx.contracts_lhs_innermost == (platform == "cpu")
    with jax.enable_x64(True):
        got = np.asarray(run_kernel(node, ctx, [jax.numpy.asarray(a), jax.numpy.asarray(b)]))
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
