"""The cpu backend's own float32 matrix product (transformers/cpu/gemm.py) against float64.

Shapes cross the kernel's blocking edges: rows not a multiple of its 8-row
tile or of its 64-row blocks, columns not a multiple of its 32-column panels (AVX-512; 6 and
16 with AVX2),
depths past one 512-deep block and not a multiple of it; operands come
transposed, reversed and as strided slices, and `out` as a transposed view.
"""
import ctypes

import numpy as np
import pytest

from axgraph.transformers.cpu import gemm

needs_kernel = pytest.mark.skipif(not gemm.available(),
                                  reason="no AVX-512 or AVX2 build of the kernels here")

SHAPES = [  # (m, k, n)
    (1, 1, 1),
    (7, 33, 31),
    (65, 513, 33),        # one past a block, a depth block and a panel
    (130, 1100, 97),      # three depth blocks, the last partial
    (50, 700, 500),       # LeNet's filter gradient, smaller
    (300, 50, 130),       # a short sum
]


def _reference(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def _check(got, a, b):
    want = _reference(a, b)
    # float32 sums of k terms: within k ulps of the largest partial sums
    bound = 2 * a.shape[1] * np.finfo(np.float32).eps * (np.abs(a) @ np.abs(b))
    assert np.all(np.abs(got - want) <= bound + 1e-30)


def _operands(m, k, n, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(m, k)).astype(np.float32),
            rng.normal(size=(k, n)).astype(np.float32))


@needs_kernel
@pytest.mark.parametrize("m, k, n", SHAPES)
def test_products_match_float64(monkeypatch, m, k, n):
    monkeypatch.setattr(gemm, "MIN_MULTIPLY_ADDS", 0)
    monkeypatch.setattr(gemm, "MIN_DEPTH", 0)
    monkeypatch.setattr(gemm, "MIN_OUTPUT", 0)
    a, b = _operands(m, k, n)
    out = np.full((m, n), np.nan, np.float32)
    assert gemm.matmul(a, b, out=out) is out
    _check(out, a, b)


@needs_kernel
@pytest.mark.parametrize("layout", ["transposed", "reversed", "strided", "out_transposed"])
def test_operands_of_any_strides(monkeypatch, layout):
    monkeypatch.setattr(gemm, "MIN_MULTIPLY_ADDS", 0)
    m, k, n = 70, 600, 45
    a, b = _operands(m, k, n, seed=1)
    out = np.full((m, n), np.nan, np.float32)
    if layout == "transposed":
        a, b = np.asfortranarray(a), np.asfortranarray(b)
    elif layout == "reversed":
        a, b = a[::-1, ::-1].copy()[::-1, ::-1], b[::-1].copy()[::-1]
    elif layout == "strided":
        a = np.repeat(a, 2, axis=1)[:, ::2]
        b = np.repeat(b, 3, axis=1)[:, ::3]
    else:
        out = np.full((n, m), np.nan, np.float32).T
    assert gemm.matmul(a, b, out=out) is out
    _check(out, a, b)


def test_what_the_kernel_does_not_take_goes_to_numpy(monkeypatch):
    """float64, small products and an unavailable kernel: np.matmul's result exactly."""
    a, b = _operands(40, 70, 50, seed=2)
    for x, y in ((a.astype(np.float64), b.astype(np.float64)), (a, b)):
        out = np.empty((40, 50), x.dtype)
        np.testing.assert_array_equal(gemm.matmul(x, y, out=out), np.matmul(x, y))
    monkeypatch.setattr(gemm, "MIN_MULTIPLY_ADDS", 0)
    monkeypatch.setattr(gemm, "available", lambda: False)
    out = np.empty((40, 50), np.float32)
    np.testing.assert_array_equal(gemm.matmul(a, b, out=out), np.matmul(a, b))


def test_suits_asks_for_float32_and_size():
    big = (4096, 500, 50)
    assert not gemm.suits(*big, np.float64)
    assert not gemm.suits(8, 8, 8, np.float32)
    assert not gemm.suits(36864, 25, 20, np.float32)  # too short a sum
    assert gemm.suits(*big, np.float32) == gemm.available()


@needs_kernel
def test_a_compiled_product_runs_in_the_kernel():
    """A float32 Dot big enough runs as gemm.matmul in the generated code, and agrees."""
    import axgraph as ng

    M, K, N = (ng.make_axis(length, name=name) for length, name in
               ((260, "M"), (300, "K"), (70, "N")))
    x, w = ng.placeholder([M, K]), ng.placeholder([K, N])
    a, b = _operands(260, 300, 70, seed=3)
    with ng.make_transformer("cpu") as t:
        product = t.computation(ng.dot(x, w), x, w)
        got = product(a, b)
        assert "gemm.matmul(" in product.source
    _check(got, a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m, k, n, transposed", [(1027, 300, 45, False), (515, 64, 129, True),
                                                 (2048, 17, 20, False)])
def test_blas_products_in_parts_match_float64(monkeypatch, dtype, m, k, n, transposed):
    """What the kernel does not take, large enough, runs as blocks of rows (here not a
    multiple of the parts), one BLAS call each: the float64 product's values."""
    monkeypatch.setattr(gemm, "available", lambda: False)
    monkeypatch.setattr(gemm, "PARTS_MIN_MULTIPLY_ADDS", 1 << 16)
    a, b = (x.astype(dtype) for x in _operands(m, k, n, seed=4))
    if transposed:
        a = np.asfortranarray(a)
    ranges = gemm.parts(m, k, n, dtype)
    assert ranges is not None and len(ranges) == gemm.PARTS and ranges[-1][0].stop == m
    assert gemm.takes(m, k, n, dtype)
    out = np.full((m, n), np.nan, dtype)
    assert gemm.matmul(a, b, out=out) is out
    if dtype == np.float32:
        _check(out, a, b)
    else:
        np.testing.assert_allclose(out, _reference(a, b), rtol=1e-12, atol=1e-12)


def test_parts_do_not_depend_on_the_thread_count(monkeypatch):
    monkeypatch.setattr(gemm, "available", lambda: False)
    a, b = _operands(2000, 300, 50, seed=5)  # 30M multiply-adds: cut in parts
    assert gemm.parts(2000, 300, 50, np.float32) is not None
    results = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("AXGRAPH_NUM_THREADS", threads)
        results.append(gemm.matmul(a, b, out=np.empty((2000, 50), np.float32)))
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])


def test_a_product_with_few_rows_is_cut_into_blocks_of_columns(monkeypatch):
    """A weight gradient (few output rows, a long sum): its columns are shared instead."""
    monkeypatch.setattr(gemm, "available", lambda: False)
    ranges = gemm.parts(50, 4096, 500, np.float32)
    assert ranges is not None and len(ranges) == gemm.PARTS
    assert all(rows == slice(None) for rows, _ in ranges) and ranges[-1][1].stop == 500
    a, b = _operands(50, 4096, 500, seed=6)
    out = np.full((50, 500), np.nan, np.float32)
    assert gemm.matmul(a, b, out=out) is out
    _check(out, a, b)


def test_few_rows_and_columns_or_a_small_product_is_one_call():
    assert gemm.parts(50, 100000, 50, np.float32) is None  # too few rows and columns to cut
    assert gemm.parts(600, 10, 10, np.float32) is None  # too small to be worth it
    assert gemm.parts(4096, 500, 50, np.int64) is None  # not BLAS's
    assert not gemm.takes(600, 10, 10, np.float64)


@pytest.mark.parametrize("kernel", [True, False])
@pytest.mark.parametrize("m, k, n", [(7, 33, 31), (65, 513, 33), (130, 1100, 97), (64, 64, 64)])
@pytest.mark.parametrize("addend_shape", ["row", "column", "full", "full_transposed"])
def test_an_addend_is_added_as_a_separate_add_would(monkeypatch, kernel, m, k, n,
                                                    addend_shape):
    """A bias added as the kernel stores its last depth block (past one 512-deep block
    too) rounds each element exactly as the product followed by np.add."""
    if kernel and not gemm.available():
        pytest.skip("no AVX-512 or AVX2 build of the kernels here")
    monkeypatch.setattr(gemm, "MIN_MULTIPLY_ADDS", 0)
    monkeypatch.setattr(gemm, "MIN_DEPTH", 0)
    monkeypatch.setattr(gemm, "MIN_OUTPUT", 0)
    if not kernel:
        monkeypatch.setattr(gemm, "available", lambda: False)
    a, b = _operands(m, k, n, seed=6)
    rng = np.random.default_rng(7)
    addend = {"row": lambda: rng.normal(size=(1, n)),
              "column": lambda: rng.normal(size=(m, 1)),
              "full": lambda: rng.normal(size=(m, n)),
              "full_transposed": lambda: rng.normal(size=(n, m)).T}[addend_shape]()
    addend = addend.astype(np.float32)
    product = gemm.matmul(a, b, out=np.empty((m, n), np.float32))
    got = gemm.matmul(a, b, out=np.full((m, n), np.nan, np.float32), addend=addend)
    np.testing.assert_array_equal(got, product + addend)
    _check(got - addend, a, b)


def test_avx512_and_avx2_builds_give_the_same_bits(monkeypatch):
    """The kernel built for AVX-512 (8 x 32 tiles) and for x86-64-v3 (AVX2: 6 x 16) sums
    each element in the same order with one fused multiply-add per term: the same bits,
    with a bias and a ReLU too, on shapes that end in partial tiles and blocks."""
    from pathlib import Path

    from axgraph.transformers.cpu import kernel_c

    chain = kernel_c.toolchain()
    macros = chain and kernel_c.feature_macros(chain.compiler, "native")
    if not macros or "__AVX512F__" not in macros:
        pytest.skip("this CPU has no AVX-512 to compare with")
    source = Path(gemm.__file__).with_name("gemm.c").read_text()
    handles = {}
    for march in ("native", "x86-64-v3"):
        monkeypatch.setenv(kernel_c.MARCH_VARIABLE, march)
        handles[march] = kernel_c.optional_library(source)
        assert handles[march] is not None and handles[march].axg_gemm_available()
    address = kernel_c.address
    for m, k, n, relu in ((130, 1100, 97, 0), (37, 600, 70, 1), (128, 784, 512, 1)):
        a, b = _operands(m, k, n, seed=m)
        b = np.ascontiguousarray(b.T).T  # a transposed weight, as a layer reads it
        bias = np.random.default_rng(n).normal(size=(1, n)).astype(np.float32)
        outs = []
        for handle in handles.values():
            out = np.empty((m, n), np.float32)
            status = handle.axg_gemm_f32(
                *[ctypes.c_int64(v) for v in (m, n, k)],
                *[ctypes.c_void_p(address(x)) if j == 0 else ctypes.c_int64(x)
                  for array in (a, b, out) for j, x in
                  enumerate((array, array.strides[0] // 4, array.strides[1] // 4))],
                ctypes.c_void_p(address(bias)), ctypes.c_int64(0), ctypes.c_int64(1),
                ctypes.c_int(relu))
            assert status == 0
            outs.append(out)
        np.testing.assert_array_equal(outs[0], outs[1])
        want = _reference(a, b) + bias
        np.testing.assert_allclose(outs[0], np.maximum(want, 0) if relu else want,
                                   rtol=1e-4, atol=1e-3)
