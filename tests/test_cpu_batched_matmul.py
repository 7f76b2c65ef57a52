"""The cpu backend's C kernel for stacks of small matrix products (transformers/cpu/batched.py).

The kernel sums each element's products in k order, one rounded multiply and one rounded
add per term, starting from 0: the same steps in NumPy (`_in_order`, written out here)
give the same bits, whatever the strides, the thread count or the vector width of the
build (native, x86-64-v3 and x86-64-v2). Its answers are also checked against float64,
and where it declines (`batched.matmul` returns False, writing nothing)
`rt.batched_matmul` gives np.matmul's result.
"""
import platform

import numpy as np
import pytest

from axgraph.transformers.cpu import batched, kernel_c
from axgraph.transformers.cpu import runtime as rt

#: Targets of other vector widths: AVX2 (x86-64-v3), SSE (x86-64-v2), this CPU's (AVX-512 here).
TARGETS = ["native"] + (["x86-64-v3", "x86-64-v2"] if platform.machine() in ("x86_64", "AMD64")
                        else [])


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A kernel cache of this file's own (each target's library built once)."""
    return tmp_path_factory.mktemp("batched-kernels")


@pytest.fixture(params=TARGETS)
def kernel(request, monkeypatch, cache):
    """The kernel built for each target."""
    monkeypatch.setenv("AXGRAPH_CACHE_DIR", str(cache))
    monkeypatch.setenv(kernel_c.MARCH_VARIABLE, request.param)
    try:
        kernel_c.toolchain()
    except kernel_c.KernelCompileError as error:
        pytest.skip(str(error))  # this CPU cannot run the target
    monkeypatch.setattr(batched, "MIN_VECTOR_BYTES", 0)  # every build's kernel checked
    batched._kernels.cache_clear()
    if not batched.available():
        pytest.skip("no C compiler, or NumPy's array struct is laid out otherwise")
    yield request.param
    batched._kernels.cache_clear()  # the next user builds for its own settings


def _in_order(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b over stacks as the kernel computes it: for p = 0..k-1, s = s + a[..., p] b[p, ...],
    each multiply and add rounded in a's type."""
    total = np.zeros(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2],
                                                                        b.shape[-1]), a.dtype)
    for p in range(a.shape[-1]):
        total = total + a[..., :, p, None] * b[..., None, p, :]
    return total


def _check(out, a, b):
    """out is the in-order sum exactly, and within k rounding errors of the float64 product."""
    np.testing.assert_array_equal(out, _in_order(a, b))
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    bound = 2 * a.shape[-1] * np.finfo(a.dtype).eps * np.matmul(np.abs(a), np.abs(b))
    assert np.all(np.abs(out - want) <= bound + 1e-300)


def _laid_out(x: np.ndarray, layout: str) -> np.ndarray:
    """x's values in another memory layout (the same values, other strides)."""
    if layout == "transposed":  # the last two dims swapped in memory
        return np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
    if layout == "batch inside" and x.ndim == 3:  # memory ordered (rows, batch, columns)
        return np.ascontiguousarray(x.transpose(1, 0, 2)).transpose(1, 0, 2)
    if layout == "reversed":  # negative strides everywhere
        return np.ascontiguousarray(x[..., ::-1, ::-1])[..., ::-1, ::-1]
    if layout == "strided":  # every other element of a wider array
        wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
        wide[..., ::2] = x
        return wide[..., ::2]
    return x


SHAPES = [  # (batch dims, m, k, n)
    ((32,), 32, 16, 32),    # the transformer block's attention heads
    ((32,), 32, 32, 16),
    ((32,), 16, 32, 32),
    ((3,), 1, 1, 9),       # one row, one term
    ((5,), 9, 7, 17),       # rows and columns past whole tiles and vectors
    ((2, 3), 11, 40, 13),   # two batch dims
    ((2,), 70, 3, 33),
    ((4,), 5, 37, 16),      # a transposed right: whole blocks transposed, then the rest
    ((64,), 24, 24, 32),    # enough work to split over the threads
]
LAYOUTS = ["plain", "transposed", "batch inside", "reversed", "strided"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch, m, k, n", SHAPES)
def test_stacks_of_any_layout_are_summed_in_order(kernel, rng, dtype, batch, m, k, n):
    a = rng.standard_normal(batch + (m, k)).astype(dtype)
    b = rng.standard_normal(batch + (k, n)).astype(dtype)
    for left, right, target in zip(LAYOUTS, LAYOUTS[1:] + LAYOUTS[:1], LAYOUTS[2:] + LAYOUTS[:2]):
        x, y = _laid_out(a, left), _laid_out(b, right)
        out = _laid_out(np.full(batch + (m, n), np.nan, dtype), target)
        assert batched.matmul(x, y, out), (left, right, target)
        _check(out, a, b)
        out[...] = np.nan
        assert rt.batched_matmul(x, y, out=out) is out
        _check(out, a, b)


def test_a_batch_dim_of_one_is_broadcast(kernel, rng):
    a = rng.standard_normal((1, 4, 6, 5)).astype(np.float32)
    b = rng.standard_normal((3, 1, 5, 12)).astype(np.float32)
    out = np.empty((3, 4, 6, 12), np.float32)
    assert batched.matmul(a, b, out)
    _check(out, a, b)


def test_the_values_do_not_depend_on_the_thread_count(kernel, rng):
    """A stack large enough to be split over the threads, computed on one thread and on two."""
    openmp = kernel_c._OPENMP
    if openmp is None:
        pytest.skip("no OpenMP runtime loaded")
    a = rng.standard_normal((48, 32, 24)).astype(np.float32)  # 48 x 27 K multiply-adds
    b = rng.standard_normal((48, 24, 36)).astype(np.float32)
    results = []
    before = openmp.omp_get_max_threads()
    try:
        for threads in (1, 2):
            openmp.omp_set_num_threads(threads)
            out = np.empty((48, 32, 36), np.float32)
            assert batched.matmul(a, b, out)
            results.append(out)
    finally:
        openmp.omp_set_num_threads(before)
    np.testing.assert_array_equal(results[0], results[1])
    _check(results[0], a, b)


class _Subclass(np.ndarray):
    pass


def _declined(rng):
    """(what, left, right, out) the kernel must not take."""
    f32 = np.float32
    a, b = rng.standard_normal((4, 6, 6)).astype(f32), rng.standard_normal((4, 6, 6)).astype(f32)
    unaligned = np.frombuffer(bytearray(4 * 36 * 4 + 1), np.uint8)[1:].view(f32).reshape(4, 6, 6)
    unaligned[...] = a
    wide = np.zeros((4, 6, 7), f32)
    readonly = np.empty((4, 6, 6), f32)
    readonly.flags.writeable = False
    return [
        ("integers", a.astype(np.int32), b.astype(np.int32), np.empty((4, 6, 6), np.int32)),
        ("float16", a.astype(np.float16), b.astype(np.float16), np.empty((4, 6, 6), np.float16)),
        ("mixed types", a, b.astype(np.float64), np.empty((4, 6, 6), np.float64)),
        ("byte-swapped", a.astype(">f4"), b.astype(">f4"), np.empty((4, 6, 6), ">f4")),
        ("out is the left operand", a.copy(), b, None),
        ("out overlaps the right operand", a, wide[:, :, :6], wide[:, :, 1:]),
        ("out repeats elements", a, b,
         np.lib.stride_tricks.as_strided(np.empty(36, f32), (4, 6, 6), (0, 24, 4))),
        ("unaligned", unaligned, b, np.empty((4, 6, 6), f32)),
        ("strides not whole elements", a, np.lib.stride_tricks.as_strided(
            np.zeros(200, f32), (4, 6, 6), (144, 24, 2)), np.empty((4, 6, 6), f32)),
        ("read-only out", a, b, readonly),
        ("a subclass", a.view(_Subclass), b, np.empty((4, 6, 6), f32)),
        ("rank 2", a[0], b[0], np.empty((6, 6), f32)),
        ("ranks differ", a, b[0], np.empty((4, 6, 6), f32)),
        ("empty", a[:0], b[:0], np.empty((0, 6, 6), f32)),
        ("too deep", rng.standard_normal((2, 3, 1100)).astype(f32),
         rng.standard_normal((2, 1100, 2)).astype(f32), np.empty((2, 3, 2), f32)),
        ("one column (mostly padding)", rng.standard_normal((4, 6, 3)).astype(f32),
         rng.standard_normal((4, 3, 1)).astype(f32), np.empty((4, 6, 1), f32)),
        ("too large", rng.standard_normal((2, 128, 128)).astype(f32),
         rng.standard_normal((2, 128, 128)).astype(f32), np.empty((2, 128, 128), f32)),
    ]


def test_what_the_kernel_does_not_take_goes_to_numpy(kernel, rng):
    for what, a, b, out in _declined(rng):
        out = a if out is None else out
        want = np.matmul(a.copy(), b.copy())
        before = out.copy()
        assert not batched.matmul(a, b, out), what
        np.testing.assert_array_equal(out, before, err_msg=what)  # nothing written
        if out.flags.writeable and what != "out repeats elements":
            rt.batched_matmul(a, b, out=out)  # (BLAS may sum in another order)
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5, err_msg=what)


def test_the_kernel_runs_only_where_it_is_built_with_wide_vectors(monkeypatch, cache):
    monkeypatch.setenv("AXGRAPH_CACHE_DIR", str(cache))
    batched._kernels.cache_clear()
    try:
        handle = kernel_c.optional_library(batched.source())
        if handle is None or batched.array_fields() is None:
            pytest.skip("no C compiler, or NumPy's array struct is laid out otherwise")
        wide = handle.axg_batched_vector_bytes() >= batched.MIN_VECTOR_BYTES
        assert batched.available() == wide
    finally:
        batched._kernels.cache_clear()


def test_without_the_kernel_numpy_computes_the_stack(monkeypatch, rng):
    monkeypatch.setattr(batched, "available", lambda: False)
    a = rng.standard_normal((5, 3, 4)).astype(np.float32)
    b = rng.standard_normal((5, 4, 2)).astype(np.float32)
    out = np.empty((5, 3, 2), np.float32)
    assert not batched.matmul(a, b, out)
    np.testing.assert_array_equal(rt.batched_matmul(a, b, out=out), np.matmul(a, b))
