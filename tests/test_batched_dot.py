"""ng.dot(x, y, reduction_axes=...): contract the axes named, keep other shared axes as batch.

Values against np.einsum written out by hand on every transformer, gradients against float64
finite differences, errors at the caller's line, and the core Dot's batch dims on the
interpreter, the cpu backend and jax.
"""
import numpy as np
import pytest

import axgraph as ng
from axgraph import core, passes
from axgraph.errors import IncompatibleAxesError, ShapeError
from axgraph.testing import ExecutorFactory, check_derivative

from conftest import BACKENDS


def axes():
    return {name: ng.make_axis(length, name=name)
            for name, length in (("D", 3), ("H", 2), ("T", 4), ("K", 5), ("N", 2))}


def values(rng, *shapes):
    return [rng.standard_normal(shape) for shape in shapes]


def test_named_reduction_keeps_the_other_shared_axes_as_batch_axes():
    a = axes()
    D, H, T, K = a["D"], a["H"], a["T"], a["K"]
    q, k = ng.placeholder([D, H, T]), ng.placeholder([K, D, H])
    assert list(ng.dot(q, k, reduction_axes=[D]).axes) == [H, T, K]
    assert list(ng.dot(q, k, reduction_axes=D).axes) == [H, T, K]
    assert list(ng.dot(q, k).axes) == [T, K]  # without reduction_axes: every shared axis


def test_per_head_scores_on_every_transformer(transformer, rng):
    """scores[n, h, t, k] = sum_d q[d, n, h, t] k[k, h, d, n]: N and H are batch axes."""
    a = axes()
    D, H, T, K, N = a["D"], a["H"], a["T"], a["K"], a["N"]
    q, k = ng.placeholder([D, N, H, T]), ng.placeholder([K, H, D, N])
    scores = ng.dot(q, k, reduction_axes=[D])
    qv, kv = values(rng, (3, 2, 2, 4), (5, 2, 3, 2))
    got = transformer.computation(scores, q, k)(qv.astype(np.float32), kv.astype(np.float32))
    assert list(scores.axes) == [N, H, T, K]
    np.testing.assert_allclose(got, np.einsum("dnht,khdn->nhtk", qv, kv), rtol=1e-5, atol=1e-5)


def test_several_reduction_axes_and_free_axes_on_both_sides(transformer, rng):
    a = axes()
    D, H, T, K, N = a["D"], a["H"], a["T"], a["K"], a["N"]
    x, y = ng.placeholder([T, D, N, H]), ng.placeholder([H, K, D, N])
    z = ng.dot(x, y, reduction_axes=[H, D])
    xv, yv = values(rng, (4, 3, 2, 2), (2, 5, 3, 2))
    got = transformer.computation(z, x, y)(xv, yv)
    assert list(z.axes) == [N, T, K]
    np.testing.assert_allclose(got, np.einsum("tdnh,hkdn->ntk", xv, yv), rtol=1e-6, atol=1e-6)


def test_no_reduction_axes_is_an_outer_product_per_batch_entry(transformer, rng):
    a = axes()
    H, T, K = a["H"], a["T"], a["K"]
    x, y = ng.placeholder([T, H]), ng.placeholder([H, K])
    z = ng.dot(x, y, reduction_axes=[])
    xv, yv = values(rng, (4, 2), (2, 5))
    got = transformer.computation(z, x, y)(xv, yv)
    assert list(z.axes) == [H, T, K]
    np.testing.assert_allclose(got, np.einsum("th,hk->htk", xv, yv), rtol=1e-6)


def test_a_named_axis_pairs_with_its_dual(transformer, rng):
    """W(H, D - 1) . x(D, N, H) with reduction_axes=[D - 1]: D - 1 meets D, H is kept."""
    a = axes()
    D, H, N = a["D"], a["H"], a["N"]
    w, x = ng.placeholder([H, D - 1]), ng.placeholder([D, N, H])
    z = ng.dot(w, x, reduction_axes=[D - 1])
    wv, xv = values(rng, (2, 3), (3, 2, 2))
    got = transformer.computation(z, w, x)(wv, xv)
    assert list(z.axes) == [H, N]
    np.testing.assert_allclose(got, np.einsum("hd,dnh->hn", wv, xv), rtol=1e-6)


def test_the_default_rule_still_contracts_every_shared_axis(transformer, rng):
    a = axes()
    D, H, T, K = a["D"], a["H"], a["T"], a["K"]
    q, k = ng.placeholder([D, H, T]), ng.placeholder([D, H, K])
    z = ng.dot(q, k)
    qv, kv = values(rng, (3, 2, 4), (3, 2, 5))
    got = transformer.computation(z, q, k)(qv, kv)
    np.testing.assert_allclose(got, np.einsum("dht,dhk->tk", qv, kv), rtol=1e-6)


def test_integer_batched_dot_is_exact(transformer, rng):
    a = axes()
    D, H, T = a["D"], a["H"], a["T"]
    x = ng.placeholder([H, T, D], dtype=np.int64)
    y = ng.placeholder([D, H], dtype=np.int64)
    z = ng.dot(x, y, reduction_axes=[D])
    xv, yv = rng.integers(-5, 5, (2, 4, 3)), rng.integers(-5, 5, (3, 2))
    got = transformer.computation(z, x, y)(xv, yv)
    np.testing.assert_array_equal(got, np.einsum("htd,dh->ht", xv, yv))


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradients_match_finite_differences(backend, rng):
    a = axes()
    D, H, T, K, N = a["D"], a["H"], a["T"], a["K"], a["N"]
    q = ng.placeholder([D, N, H, T], dtype=np.float64)
    k = ng.placeholder([K, H, D, N], dtype=np.float64)
    qv, kv = values(rng, (3, 2, 2, 4), (5, 2, 3, 2))
    scores = ng.dot(q, k, reduction_axes=[D])
    with ExecutorFactory(backend):
        check_derivative(scores, q, 1e-6, qv, [k], [kv], rtol=1e-6, atol=1e-8)
        check_derivative(scores, k, 1e-6, kv, [q], [qv], rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_of_a_weighted_batched_product(backend, rng):
    """A scalar cost through a batched dot with free axes on both sides and a dual pair."""
    a = axes()
    D, H, T, N = a["D"], a["H"], a["T"], a["N"]
    w = ng.placeholder([H, D - 1, T], dtype=np.float64)
    x = ng.placeholder([D, N, H], dtype=np.float64)
    u = ng.placeholder([H, T, N], dtype=np.float64)
    wv, xv, uv = values(rng, (2, 3, 4), (3, 2, 2), (2, 4, 2))
    cost = ng.sum(ng.tanh(ng.dot(w, x, reduction_axes=[D - 1])) * u, out_axes=())
    with ExecutorFactory(backend):
        check_derivative(cost, w, 1e-6, wv, [x, u], [xv, uv], rtol=1e-6, atol=1e-9)
        check_derivative(cost, x, 1e-6, xv, [w, u], [wv, uv], rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("case", ["missing_from_x", "missing_from_y"])
def test_a_reduction_axis_either_operand_lacks_is_an_error_at_the_callers_line(case):
    a = axes()
    D, H, T, K = a["D"], a["H"], a["T"], a["K"]
    x, y = ng.placeholder([D, H, T]), ng.placeholder([D, H, K])
    named = T if case == "missing_from_y" else K
    with pytest.raises(IncompatibleAxesError) as caught:
        ng.dot(x, y, reduction_axes=[named])
    message = str(caught.value)
    assert "dot" in message and named.name in message and "test_batched_dot.py" in message


def test_explicit_pairs_of_different_lengths_are_refused():
    a = axes()
    D, K = a["D"], a["K"]
    with pytest.raises(IncompatibleAxesError) as caught:
        ng.op_graph.dot.DotOp(ng.placeholder([D]), ng.placeholder([K]), pairs=[(D, K)])
    assert "lengths differ" in str(caught.value) and "test_batched_dot.py" in str(caught.value)


def test_a_batch_axis_must_belong_to_both_operands():
    a = axes()
    D, H, T = a["D"], a["H"], a["T"]
    with pytest.raises(IncompatibleAxesError) as caught:
        ng.op_graph.dot.DotOp(ng.placeholder([D, H]), ng.placeholder([D, T]), pairs=[(D, D)],
                              batch=[H])
    assert "batch" in str(caught.value) and "H" in str(caught.value)


# -- the core Dot's batch dims ------------------------------------------------------------------

def run_core(function, backend, *arrays):
    result = core.compile(function, backend=backend)(*arrays)
    return result[0] if isinstance(result, (list, tuple)) else result


@pytest.mark.parametrize("backend", ["interpreter", "cpu", "jax"])
def test_core_dot_with_batch_dims_anywhere(backend, rng):
    """Batch dims out of order on both sides: result (batch..., a's free, b's free)."""
    a = core.Parameter(core.f64, (3, 4, 5, 6), name="a")
    b = core.Parameter(core.f64, (6, 5, 7, 3), name="b")
    product = core.Dot(a, b, (3,), (0,), batch_a=(0, 2), batch_b=(3, 1))
    assert product.shape == core.Shape([3, 5, 4, 7])
    av, bv = values(rng, (3, 4, 5, 6), (6, 5, 7, 3))
    got = run_core(core.Function([product], [a, b]), backend, av, bv)
    np.testing.assert_allclose(got, np.einsum("xiyk,kyjx->xyij", av, bv), rtol=1e-12)


@pytest.mark.parametrize("backend", ["interpreter", "cpu", "jax"])
def test_core_batched_matrix_products_in_float32(backend, rng):
    a = core.Parameter(core.f32, (8, 16, 32), name="a")
    b = core.Parameter(core.f32, (8, 32, 16), name="b")
    product = core.Dot(a, b, (2,), (1,), batch_a=(0,), batch_b=(0,))
    av, bv = (v.astype(np.float32) for v in values(rng, (8, 16, 32), (8, 32, 16)))
    got = run_core(core.Function([product], [a, b]), backend, av, bv)
    np.testing.assert_allclose(got, av.astype(np.float64) @ bv, rtol=1e-4, atol=1e-4)


def test_core_batch_dims_are_checked():
    a = core.Parameter(core.f32, (3, 4, 5))
    b = core.Parameter(core.f32, (5, 2))
    with pytest.raises(ShapeError, match="batch dims differ"):
        core.Dot(a, b, (2,), (0,), batch_a=(0,), batch_b=(1,))
    with pytest.raises(ShapeError, match="both contracted and batch"):
        core.Dot(a, a, (0, 2), (0, 2), batch_a=(0,), batch_b=(0,))
    with pytest.raises(ShapeError, match="pair up"):
        core.Dot(a, b, (2,), (0,), batch_a=(0,), batch_b=())


def test_printing_shows_batch_dims_only_where_there_are_some():
    a = core.Parameter(core.f32, (3, 4, 5), name="a")
    plain = str(core.Function([core.Dot(a, a, (2,), (2,))], [a]))
    batched = str(core.Function([core.Dot(a, a, (2,), (2,), (0,), (0,))], [a]))
    assert "batch_a" not in plain
    assert "batch_a=(0,), batch_b=(0,)" in batched


def test_a_batched_dot_absorbs_a_transpose_of_its_operand(rng):
    """Dot(Transpose(a), b) with batch dims becomes Dot(a, b) with mapped positions."""
    a = core.Parameter(core.f64, (5, 3, 4), name="a")  # (K, B, M) in memory
    b = core.Parameter(core.f64, (3, 5, 2), name="b")
    moved = core.Transpose(a, (1, 2, 0))  # (B, M, K)
    product = core.Dot(moved, b, (2,), (1,), batch_a=(0,), batch_b=(0,))
    function = core.Function([product], [a, b])
    sunk = passes.LayoutSinking().run(function)
    assert not any(isinstance(n, core.Transpose) for n in sunk.nodes)
    av, bv = values(rng, (5, 3, 4), (3, 5, 2))
    want = np.einsum("kbm,bkn->bmn", av, bv)
    np.testing.assert_allclose(run_core(sunk, "interpreter", av, bv), want, rtol=1e-12)


# -- the cpu backend's batched GEMM ------------------------------------------------------------

@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_batched_matmul_gives_the_same_values_on_any_thread_count(monkeypatch, rng, threads):
    from axgraph.transformers.cpu import runtime

    monkeypatch.setenv("AXGRAPH_NUM_THREADS", threads)
    monkeypatch.setattr(runtime, "BATCHED_SPLIT_MIN", 0)  # split even this small stack
    left, right = (v.astype(np.float32) for v in values(rng, (5, 3, 7, 4), (5, 3, 4, 6)))
    out = np.empty((5, 3, 7, 6), np.float32)
    runtime.batched_matmul(left, right, out=out)
    want = np.einsum("bhmk,bhkn->bhmn", left.astype(np.float64), right)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_a_small_stack_of_products_stays_on_the_calling_thread(monkeypatch, rng):
    """Handing part of a small stack to a pool thread costs more than its products (the
    NumPy path: the C kernel of batched.py, which splits stacks over OpenMP, kept out)."""
    from axgraph.transformers.cpu import batched, parallel, runtime

    monkeypatch.setattr(batched, "available", lambda: False)
    monkeypatch.setenv("AXGRAPH_NUM_THREADS", "2")
    handed = []
    monkeypatch.setattr(parallel, "run_spans", lambda work, spans: handed.append(spans))
    left, right = (v.astype(np.float32) for v in values(rng, (32, 32, 16), (32, 16, 32)))
    out = np.empty((32, 32, 32), np.float32)
    runtime.batched_matmul(left, right, out=out)  # 32 * 32 * 32 * 16: under the minimum
    assert handed == []
    want = np.einsum("bmk,bkn->bmn", left.astype(np.float64), right)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    big_left, big_right = np.ones((8, 128, 64), np.float32), np.ones((8, 64, 128), np.float32)
    runtime.batched_matmul(big_left, big_right, out=np.empty((8, 128, 128), np.float32))
    assert handed, "a stack of 8M multiply-adds is split over the workers"


def test_blas_runs_single_threaded_inside_the_block_and_is_restored_after():
    from axgraph.transformers.cpu import blas_threads

    if not blas_threads.available():
        pytest.skip("this NumPy's BLAS is not an OpenBLAS whose threads can be set")
    get, put = blas_threads.controls()
    before = get()
    put(2)
    try:
        with blas_threads.single_threaded():
            with blas_threads.single_threaded():
                assert get() == 1
            assert get() == 1
        assert get() == 2
    finally:
        put(before)


def test_an_axis_free_in_x_and_contracted_in_y(transformer, rng):
    """(H, H - 1) . (H, N): H - 1 pairs with y's H; x's own H stays, a matrix times a matrix."""
    H, N = ng.make_axis(3, name="H"), ng.make_axis(2, name="N")
    w, x = ng.placeholder([H, H - 1]), ng.placeholder([H, N])
    wv, xv = values(rng, (3, 3), (3, 2))
    got = transformer.computation(ng.dot(w, x), w, x)(wv, xv)
    np.testing.assert_allclose(got, wv @ xv, rtol=1e-6)


@pytest.mark.parametrize("named", ["twice", "a_string"])
def test_reduction_axes_that_are_not_distinct_axes_are_errors_naming_dot(named):
    from axgraph.errors import AxgraphTypeError, DuplicateAxisError

    a = axes()
    D, T = a["D"], a["T"]
    x, y = ng.placeholder([D, T]), ng.placeholder([D])
    reduction_axes, error = {"twice": ([D, D], DuplicateAxisError),
                             "a_string": (["D"], AxgraphTypeError)}[named]
    with pytest.raises(error) as caught:
        ng.dot(x, y, reduction_axes=reduction_axes)
    assert "dot reduction_axes" in str(caught.value)
    assert "test_batched_dot.py" in str(caught.value)


def test_a_batched_dot_lowers_to_one_core_dot_and_runs_as_a_batched_gemm(rng):
    """No broadcast product over every axis: one Dot with batch dims, one batched matmul."""
    a = axes()
    D, H, T, K, N = a["D"], a["H"], a["T"], a["K"], a["N"]
    q, k = ng.placeholder([N, H, T, D]), ng.placeholder([N, H, K, D])
    scores = ng.dot(q, k, reduction_axes=[D])
    with ng.make_transformer("cpu") as t:
        computation = t.computation(scores, q, k)
        qv, kv = (v.astype(np.float32) for v in values(rng, (2, 2, 4, 3), (2, 2, 5, 3)))
        got = computation(qv, kv)
        dots = [n for n in computation.function.nodes if isinstance(n, core.Dot)]
        assert len(dots) == 1 and dots[0].batch_a == (0, 1) and dots[0].batch_b == (0, 1)
        assert not any(isinstance(n, core.Broadcast) for n in computation.function.nodes)
        assert computation.source.count("rt.batched_matmul(") == 1
    np.testing.assert_allclose(got, np.einsum("nhtd,nhkd->nhtk", qv, kv), rtol=1e-5, atol=1e-6)
