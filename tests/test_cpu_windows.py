"""The cpu backend's windowed kernels (transformers/cpu/windows.py) against the interpreter.

Every kernel writes into a caller's `out`; the reference is the interpreter
running the matching core op. Max pools and their adjoint must match bit for
bit (same max, same first-max routing, NaN included); sums to rounding.
Operands come in several layouts: contiguous, transposed views of
channel-last buffers, reversed (negative strides) and broadcast (zero strides).
"""
import functools

import numpy as np
import pytest

from axgraph import core
from axgraph.transformers.cpu import windows

DTYPES = {np.float32: (core.f32, 1e-6), np.float64: (core.f64, 1e-12)}

# shape, window, strides, padding below, padding above (pools need padding < window)
POOLS = [
    ((2, 3, 37), (3,), (2,), (1,), (2,)),                          # 1-d, overlapping
    ((2, 5, 40), (2,), (2,), (0,), (0,)),                          # 1-d, tiling
    ((2, 3, 13, 29), (3, 2), (2, 1), (1, 1), (2, 0)),              # 2-d, overlapping
    ((2, 16, 9, 23), (2, 2), (2, 2), (0, 1), (1, 1)),              # 2-d, many channels
    ((3, 4, 24, 24), (2, 2), (2, 2), (0, 0), (0, 0)),              # the common 2x2/2
    ((2, 4, 9, 11), (2, 2), (2, 2), (0, 0), (0, 0)),               # 2x2/2, a side left over
    ((2, 3, 6, 17), (2, 2), (1, 1), (1, 1), (1, 1)),               # corners: one real input
    ((2, 4, 5, 7, 19), (2, 3, 2), (1, 2, 2), (1, 0, 1), (0, 2, 1)),  # 3-d
]

# shape, window, strides, dilation, padding below, padding above
COLUMNS = [
    ((2, 3, 30), (3,), (2,), (2,), (1,), (2,)),
    ((2, 3, 12, 25), (3, 2), (1, 2), (2, 1), (1, 0), (2, 1)),
    ((2, 6, 12, 12), (5, 5), (1, 1), (1, 1), (2, 2), (2, 2)),
    ((1, 2, 7, 9), (3, 3), (2, 3), (1, 1), (4, 0), (1, 5)),        # whole windows of padding
    ((2, 2, 5, 6, 14), (2, 3, 2), (2, 1, 1), (1, 2, 1), (1, 1, 0), (0, 2, 1)),
]

LAYOUTS = ["contiguous", "channels_last", "reversed"]


def _ids(cases):
    return [f"{len(case[1])}d-{'x'.join(map(str, case[0]))}" for case in cases]


# -- references -------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _compiled(kind, dtype, shape, window, strides, dilation, below, above, other_shape=None):
    """The interpreter's function for one op (compiled once per geometry)."""
    et = core.element_type(dtype)
    pool = dict(strides=strides, padding_below=below, padding_above=above)
    conv = dict(pool, dilation=dilation)
    if kind == "im2col":
        x = core.Parameter(et, shape)
        return core.compile(core.Function([core.Im2Col(x, window, **conv)], [x]))
    if kind == "col2im":
        cols = core.Parameter(et, other_shape)
        return core.compile(core.Function([core.Col2Im(cols, shape, window, **conv)], [cols]))
    if kind in ("max_pool", "avg_pool"):
        x = core.Parameter(et, shape)
        op = core.MaxPool if kind == "max_pool" else core.AvgPool
        return core.compile(core.Function([op(x, window, **pool)], [x]))
    if kind == "max_pool_backprop":
        x, delta = core.Parameter(et, shape), core.Parameter(et, other_shape)
        node = core.MaxPoolBackprop(x, delta, window, **pool)
        return core.compile(core.Function([node], [x, delta]))
    delta = core.Parameter(et, other_shape)
    node = core.AvgPoolBackprop(shape, delta, window, **pool)
    return core.compile(core.Function([node], [delta]))


def reference(kind, arrays, shape, window, strides, dilation=None, below=None, above=None,
              other_shape=None):
    dilation = tuple(dilation or (1,) * len(window))
    function = _compiled(kind, arrays[0].dtype.type, tuple(shape), tuple(window),
                         tuple(strides), dilation, tuple(below), tuple(above),
                         None if other_shape is None else tuple(other_shape))
    (result,) = function(*[np.ascontiguousarray(a) for a in arrays])
    return result


def pooled_shape(shape, window, strides, below, above):
    return tuple(shape[:2]) + windows.positions(shape[2:], window, strides, (1,) * len(window),
                                                below, above)


def columns_shape(shape, window, strides, dilation, below, above):
    points = windows.positions(shape[2:], window, strides, dilation, below, above)
    return (shape[0],) + points + (shape[1],) + tuple(window)


# -- layouts ----------------------------------------------------------------------------------

def laid_out(values: np.ndarray, layout: str) -> np.ndarray:
    """`values` (N, C, S...) as a view with the layout's strides (same values)."""
    if layout == "contiguous":
        return values.copy()
    if layout == "channels_last":  # a (N, C, S...) view of an (N, S..., C) buffer
        order = (0,) + tuple(range(2, values.ndim)) + (1,)
        buffer = np.ascontiguousarray(values.transpose(order))
        return buffer.transpose(np.argsort(order))
    if layout == "batch_last":  # a (N, C, S...) view of a (C, S..., N) buffer
        order = tuple(range(1, values.ndim)) + (0,)
        return np.ascontiguousarray(values.transpose(order)).transpose(np.argsort(order))
    assert layout == "reversed"  # negative strides on the last two axes
    return np.ascontiguousarray(values[..., ::-1, ::-1])[..., ::-1, ::-1]


def empty_out(shape, dtype, layout: str) -> np.ndarray:
    """A writeable `out` of `shape`: contiguous, or a transposed view (channels last)."""
    if layout == "contiguous":
        return np.full(shape, 7, dtype)  # garbage the kernel must overwrite
    order = (0,) + tuple(range(2, len(shape))) + (1,)
    if layout == "batch_last":
        order = tuple(range(1, len(shape))) + (0,)
    buffer = np.full([shape[i] for i in order], 7, dtype)
    return buffer.transpose(np.argsort(order))


def columns_out(shape, dtype, layout: str) -> np.ndarray:
    """Columns (N, P..., C, R...) `out`: contiguous, channels outermost after N, or
    channels innermost (the cpu backend's (N, P..., R..., C) buffers)."""
    if layout == "contiguous":
        return np.full(shape, 7, dtype)
    nd = (len(shape) - 2) // 2
    if layout == "channels_innermost":
        order = tuple(i for i in range(len(shape)) if i != 1 + nd) + (1 + nd,)
    else:
        order = (0, 1 + nd) + tuple(i for i in range(1, len(shape)) if i != 1 + nd)
    buffer = np.full([shape[i] for i in order], 7, dtype)
    return buffer.transpose(np.argsort(order))


def check_sum(got, want, dtype):
    rtol = DTYPES[dtype][1]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max(initial=1))


# -- the kernels against the reference -----------------------------------------------------------

@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", POOLS, ids=_ids(POOLS))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_pools_match_the_interpreter(case, dtype, layout):
    shape, window, strides, below, above = case
    rng = np.random.default_rng(1)
    x = laid_out(rng.normal(size=shape).astype(dtype), layout)
    pooled = pooled_shape(shape, window, strides, below, above)
    delta = laid_out(rng.normal(size=pooled).astype(dtype), layout)
    out_layout = "channels_last" if layout == "contiguous" else "contiguous"
    geometry = (window, strides, below, above)

    got = windows.max_pool(x, *geometry, out=empty_out(pooled, dtype, out_layout))
    np.testing.assert_array_equal(got, reference("max_pool", [x], shape, window, strides,
                                                 below=below, above=above))
    got = windows.avg_pool(x, *geometry, out=empty_out(pooled, dtype, out_layout))
    check_sum(got, reference("avg_pool", [x], shape, window, strides, below=below,
                             above=above), dtype)
    got = windows.max_pool_backprop(x, delta, *geometry, out=empty_out(shape, dtype, out_layout))
    want = reference("max_pool_backprop", [x, delta], shape, window, strides, below=below,
                     above=above, other_shape=pooled)
    check_sum(got, want, dtype)
    got = windows.avg_pool_backprop(delta, *geometry, out=empty_out(shape, dtype, out_layout))
    check_sum(got, reference("avg_pool_backprop", [delta], shape, window, strides,
                             below=below, above=above, other_shape=pooled), dtype)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", POOLS, ids=_ids(POOLS))
@pytest.mark.parametrize("batch", [9, 16])
@pytest.mark.parametrize("out_layout", ["batch_last", "contiguous"])
def test_pools_over_batch_innermost_images(case, dtype, batch, out_layout):
    """(C, S..., N) buffers, as the neon layers lay images out: the batch serves as lanes."""
    shape, window, strides, below, above = case
    shape = (batch,) + tuple(shape[1:])
    rng = np.random.default_rng(2)
    x = laid_out(rng.normal(size=shape).astype(dtype), "batch_last")
    pooled = pooled_shape(shape, window, strides, below, above)
    delta = laid_out(rng.normal(size=pooled).astype(dtype), "batch_last")
    x[1, 0].flat[::3] = x[1, 0].flat[1::3][:x[1, 0].flat[::3].size]  # ties: first maximum wins
    assert windows._batch_lanes((x.shape, x.strides))
    geometry = (window, strides, below, above)
    options = dict(below=below, above=above)

    got = windows.max_pool(x, *geometry, out=empty_out(pooled, dtype, out_layout))
    np.testing.assert_array_equal(got, reference("max_pool", [x], shape, window, strides,
                                                 **options))
    got = windows.avg_pool(x, *geometry, out=empty_out(pooled, dtype, out_layout))
    check_sum(got, reference("avg_pool", [x], shape, window, strides, **options), dtype)
    got = windows.max_pool_backprop(x, delta, *geometry, out=empty_out(shape, dtype, out_layout))
    check_sum(got, reference("max_pool_backprop", [x, delta], shape, window, strides,
                             other_shape=pooled, **options), dtype)
    got = windows.avg_pool_backprop(delta, *geometry, out=empty_out(shape, dtype, out_layout))
    check_sum(got, reference("avg_pool_backprop", [delta], shape, window, strides,
                             other_shape=pooled, **options), dtype)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", COLUMNS, ids=_ids(COLUMNS))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_im2col_and_col2im_match_the_interpreter(case, dtype, layout):
    shape, window, strides, dilation, below, above = case
    rng = np.random.default_rng(2)
    x = laid_out(rng.normal(size=shape).astype(dtype), layout)
    cshape = columns_shape(shape, window, strides, dilation, below, above)
    out_layout = "channels_last" if layout == "contiguous" else "contiguous"
    geometry = (window, strides, dilation, below, above)

    got = windows.im2col(x, *geometry, out=columns_out(cshape, dtype, out_layout))
    np.testing.assert_array_equal(got, reference("im2col", [x], shape, window, strides,
                                                 dilation, below, above))
    cols = columns_out(cshape, dtype, "contiguous" if layout == "contiguous" else "transposed")
    cols[...] = rng.normal(size=cshape)
    got = windows.col2im(cols, *geometry, out=empty_out(shape, dtype, out_layout))
    check_sum(got, reference("col2im", [cols], shape, window, strides, dilation, below, above,
                             other_shape=cshape), dtype)


# Columns with channels innermost run with the channels as lanes from 4 channels up
# (col2im adds a window row's offsets and channels as one run where the channels fill
# the image's rows): lane counts off the vector width, odd sides, strides, dilation,
# padding, a 3-d case.
CHANNEL_COLUMNS = COLUMNS + [
    ((4, 20, 12, 12), (5, 5), (1, 1), (1, 1), (0, 0), (0, 0)),     # LeNet's second conv
    ((5, 12, 9, 7), (3, 3), (1, 2), (2, 1), (1, 1), (0, 2)),       # padding across the rows
    ((3, 9, 11, 10), (5, 3), (2, 1), (1, 2), (2, 0), (1, 2)),
    ((2, 4, 7, 9), (3, 3), (2, 3), (1, 1), (4, 0), (1, 5)),        # whole windows of padding
    ((2, 5, 5, 6, 7), (2, 3, 2), (2, 1, 1), (1, 2, 1), (1, 1, 0), (0, 2, 1)),
]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", CHANNEL_COLUMNS, ids=_ids(CHANNEL_COLUMNS))
def test_channels_innermost_columns_match_the_interpreter(case, dtype):
    """The cpu backend's layouts: NHWC images, (N, P..., R..., C) columns."""
    shape, window, strides, dilation, below, above = case
    rng = np.random.default_rng(3)
    x = laid_out(rng.normal(size=shape).astype(dtype), "channels_last")
    cshape = columns_shape(shape, window, strides, dilation, below, above)
    geometry = (window, strides, dilation, below, above)
    got = windows.im2col(x, *geometry, out=columns_out(cshape, dtype, "channels_innermost"))
    np.testing.assert_array_equal(got, reference("im2col", [x], shape, window, strides,
                                                 dilation, below, above))
    cols = columns_out(cshape, dtype, "channels_innermost")
    cols[...] = rng.normal(size=cshape)
    got = windows.col2im(cols, *geometry, out=empty_out(shape, dtype, "channels_last"))
    check_sum(got, reference("col2im", [cols], shape, window, strides, dilation, below, above,
                             other_shape=cshape), dtype)


# -- max pool semantics ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", POOLS, ids=_ids(POOLS))
def test_max_pool_ties_nan_and_infinities(case, dtype):
    """Ties go to the first maximum; NaN wins and routes nothing; -inf meets padding."""
    shape, window, strides, below, above = case
    rng = np.random.default_rng(3)
    x = rng.integers(0, 3, size=shape).astype(dtype)  # many ties
    flat = x.reshape(-1)
    flat[rng.choice(flat.size, flat.size // 40, replace=False)] = np.nan
    flat[rng.choice(flat.size, flat.size // 40, replace=False)] = -np.inf
    flat[rng.choice(flat.size, flat.size // 40, replace=False)] = -0.0
    x[..., :3] = -np.inf  # whole windows of -inf next to the padding
    pooled = pooled_shape(shape, window, strides, below, above)
    delta = rng.integers(-4, 5, size=pooled).astype(dtype)
    delta.reshape(-1)[:5] = [np.inf, -np.inf, np.nan, 1, -1]  # non-finite deltas spread NaN
    geometry = (window, strides, below, above)
    for layout in ("contiguous", "channels_last"):
        xl = laid_out(x, layout)
        got = windows.max_pool(xl, *geometry, out=np.empty(pooled, dtype))
        want = reference("max_pool", [x], shape, window, strides, below=below, above=above)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))  # -0 vs +0 too
        got = windows.max_pool_backprop(xl, delta, *geometry, out=np.empty(shape, dtype))
        want = reference("max_pool_backprop", [x, delta], shape, window, strides, below=below,
                         above=above, other_shape=pooled)
        np.testing.assert_array_equal(got, want)


def test_max_pool_backprop_routes_to_the_first_maximum():
    x = np.array([[[[1, 3, 3, 0], [3, 2, 0, 0]]]], np.float32)  # (1, 1, 2, 4)
    delta = np.array([[[[10, 20]]]], np.float32)
    got = windows.max_pool_backprop(x, delta, (2, 2), (2, 2), (0, 0), (0, 0),
                                    out=np.empty_like(x))
    np.testing.assert_array_equal(got, [[[[0, 10, 20, 0], [0, 0, 0, 0]]]])
    x[0, 0, 0, 1] = np.nan  # a NaN max sends nothing
    got = windows.max_pool_backprop(x, delta, (2, 2), (2, 2), (0, 0), (0, 0),
                                    out=np.empty_like(x))
    np.testing.assert_array_equal(got, [[[[0, 0, 20, 0], [0, 0, 0, 0]]]])
    out = windows.max_pool(x, (2, 2), (2, 2), (0, 0), (0, 0), out=np.empty((1, 1, 1, 2),
                                                                           np.float32))
    np.testing.assert_array_equal(out, [[[[np.nan, 3]]]])


@pytest.mark.parametrize("shape, below, above", [((1, 2, 4, 18), (1, 0), (1, 0)),
                                                 ((1, 2, 4, 6), (0, 0), (0, 0))])
def test_signed_zeros_follow_the_reference(shape, below, above):
    """Avg pool of -0s is -0 without padding, +0 with (the reference adds padding zeros)."""
    window, strides = (2, 2), (2, 2)
    x = np.full(shape, -0.0, np.float32)
    pooled = pooled_shape(shape, window, strides, below, above)
    for name in ("avg_pool", "max_pool"):
        got = getattr(windows, name)(x, window, strides, below, above,
                                     out=np.empty(pooled, np.float32))
        want = reference(name, [x], shape, window, strides, below=below, above=above)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_broadcast_delta_and_zero_stride_inputs():
    shape, window, strides, below, above = (2, 8, 10, 18), (3, 3), (2, 2), (1, 1), (1, 1)
    rng = np.random.default_rng(4)
    x = rng.normal(size=shape).astype(np.float32)
    pooled = pooled_shape(shape, window, strides, below, above)
    delta = np.broadcast_to(np.float32(0.5), pooled)  # all strides zero
    got = windows.max_pool_backprop(x, delta, window, strides, below, above,
                                    out=np.empty(shape, np.float32))
    want = reference("max_pool_backprop", [x, delta], shape, window, strides, below=below,
                     above=above, other_shape=pooled)
    np.testing.assert_array_equal(got, want)
    got = windows.avg_pool_backprop(delta, window, strides, below, above,
                                    out=empty_out(shape, np.float32, "channels_last"))
    check_sum(got, reference("avg_pool_backprop", [delta], shape, window, strides,
                             below=below, above=above, other_shape=pooled), np.float32)
    row = np.broadcast_to(rng.normal(size=(1, 1, 1, 18)).astype(np.float32), shape)
    got = windows.max_pool(row, window, strides, below, above, out=np.empty(pooled, np.float32))
    np.testing.assert_array_equal(got, reference("max_pool", [row], shape, window, strides,
                                                 below=below, above=above))


# -- the NumPy fallback -------------------------------------------------------------------------

def test_int32_max_pool_uses_the_fallback():
    shape, window, strides, below, above = (2, 3, 9, 10), (3, 2), (2, 2), (1, 0), (1, 1)
    x = np.random.default_rng(5).integers(-50, 50, size=shape).astype(np.int32)
    pooled = pooled_shape(shape, window, strides, below, above)
    out = empty_out(pooled, np.int32, "channels_last")
    got = windows.max_pool(x, window, strides, below, above, out=out)
    assert got is out
    np.testing.assert_array_equal(got, reference("max_pool", [x], shape, window, strides,
                                                 below=below, above=above))
    delta = np.ones(pooled, np.int32)
    got = windows.max_pool_backprop(x, delta, window, strides, below, above,
                                    out=np.empty(shape, np.int32))
    np.testing.assert_array_equal(got, reference("max_pool_backprop", [x, delta], shape, window,
                                                 strides, below=below, above=above,
                                                 other_shape=pooled))


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_forced_fallback_gives_the_same_results(monkeypatch, dtype):
    rng = np.random.default_rng(6)
    pool_case, conv_case = POOLS[2], COLUMNS[1]

    def run_all():
        shape, window, strides, below, above = pool_case
        x = laid_out(rng.normal(size=shape).astype(dtype), "channels_last")
        pooled = pooled_shape(shape, window, strides, below, above)
        delta = rng.normal(size=pooled).astype(dtype)
        geometry = (window, strides, below, above)
        results = [windows.max_pool(x, *geometry, out=np.empty(pooled, dtype)),
                   windows.avg_pool(x, *geometry, out=empty_out(pooled, dtype, "channels_last")),
                   windows.max_pool_backprop(x, delta, *geometry, out=np.empty(shape, dtype)),
                   windows.avg_pool_backprop(delta, *geometry, out=np.empty(shape, dtype))]
        shape, window, strides, dilation, below, above = conv_case
        x = rng.normal(size=shape).astype(dtype)
        cshape = columns_shape(shape, window, strides, dilation, below, above)
        geometry = (window, strides, dilation, below, above)
        cols = windows.im2col(x, *geometry, out=columns_out(cshape, dtype, "transposed"))
        results += [cols, windows.col2im(cols, *geometry,
                                         out=empty_out(shape, dtype, "channels_last"))]
        return results

    state = rng.bit_generator.state
    fast = run_all()
    rng.bit_generator.state = state
    monkeypatch.setattr(windows, "_use_c", lambda: False)
    slow = run_all()
    for got, want in zip(fast, slow):
        check_sum(got, want, dtype)


def test_the_c_kernels_run_when_a_compiler_is_there():
    from axgraph.transformers.cpu import kernel_c
    if kernel_c.toolchain() is None:
        pytest.skip("no C compiler here")
    assert windows._use_c()


# -- properties ---------------------------------------------------------------------------------

@pytest.mark.parametrize("case", COLUMNS, ids=_ids(COLUMNS))
def test_col2im_is_the_adjoint_of_im2col(case):
    shape, window, strides, dilation, below, above = case
    rng = np.random.default_rng(7)
    x = rng.normal(size=shape)
    cshape = columns_shape(shape, window, strides, dilation, below, above)
    c = rng.normal(size=cshape)
    geometry = (window, strides, dilation, below, above)
    forward = windows.im2col(x, *geometry, out=np.empty(cshape))
    backward = windows.col2im(c, *geometry, out=np.empty(shape))
    assert np.isclose(np.sum(forward * c), np.sum(x * backward), rtol=1e-12)


def test_wrong_shapes_are_refused():
    x = np.zeros((1, 2, 8, 8), np.float32)
    with pytest.raises(ValueError, match="expected"):
        windows.max_pool(x, (2, 2), (2, 2), (0, 0), (0, 0), out=np.empty((1, 2, 3, 4),
                                                                        np.float32))
    with pytest.raises(ValueError, match="expected"):
        windows.col2im(np.zeros((1, 4, 4, 2, 3, 3), np.float32), (2, 2), (2, 2), (1, 1),
                       (0, 0), (0, 0), out=x)
