"""Im2Col and the ConvolutionAsMatmul pass: same results, one shared set of columns."""
import numpy as np
import pytest

from axgraph import core, passes
from axgraph import errors as core_errors


def naive_columns(x, window, strides, dilation, below, above):
    padded = np.pad(x, ((0, 0), (0, 0)) + tuple(zip(below, above)))
    positions = [(n + b + a - d * (w - 1) - 1) // s + 1 for n, w, s, d, b, a in
                 zip(x.shape[2:], window, strides, dilation, below, above)]
    out = np.zeros((x.shape[0],) + tuple(positions) + (x.shape[1],) + tuple(window), x.dtype)
    for index in np.ndindex(*out.shape):
        n, position, c, offset = (index[0], index[1:1 + len(window)], index[1 + len(window)],
                                  index[2 + len(window):])
        source = tuple(p * s + o * d for p, s, o, d in zip(position, strides, offset, dilation))
        out[index] = padded[(n, c) + source]
    return out


@pytest.mark.parametrize("shape, window, strides, dilation, below, above", [
    ((2, 3, 7), (3,), (2,), (1,), (1,), (0,)),
    ((2, 2, 6, 5), (3, 2), (1, 2), (2, 1), (1, 0), (1, 1)),
])
def test_im2col_matches_a_naive_loop(shape, window, strides, dilation, below, above):
    x = np.random.default_rng(0).normal(size=shape).astype(np.float32)
    p = core.Parameter(core.f32, shape)
    node = core.Im2Col(p, window, strides=strides, dilation=dilation, padding_below=below,
                       padding_above=above)
    (got,) = core.compile(core.Function([node], [p]))(x)
    np.testing.assert_array_equal(got, naive_columns(x, window, strides, dilation, below, above))
    (cpu,) = core.compile(core.Function([node], [p]), backend="cpu")(x)
    np.testing.assert_array_equal(cpu, got)


def _training_graph():
    x = core.Parameter(core.f64, (3, 2, 7, 6), name="x")
    w = core.Parameter(core.f64, (4, 2, 3, 3), name="w")
    geometry = dict(strides=(2, 1), dilation=(1, 2), padding_below=(1, 1), padding_above=(1, 0))
    y = core.Convolution(x, w, **geometry)
    delta = core.Tanh(y)
    dw = core.ConvolutionBackpropFilters(x, w.shape, delta, **geometry)
    return core.Function([y, dw], [x, w])


def test_rewrite_keeps_the_results_and_shares_the_columns():
    function = _training_graph()
    rewritten = passes.PassManager([passes.ConvolutionAsMatmul(),
                                    passes.CommonSubexpressionElimination(),
                                    passes.DeadCodeElimination()]).run(function)
    ops = [node.op for node in rewritten.nodes]
    assert "Convolution" not in ops and "ConvolutionBackpropFilters" not in ops
    assert ops.count("Im2Col") == 1 and ops.count("Dot") == 2
    rng = np.random.default_rng(1)
    x, w = rng.normal(size=(3, 2, 7, 6)), rng.normal(size=(4, 2, 3, 3))
    expected = core.compile(function)(x, w)
    for backend in ("interpreter", "cpu"):
        for got, want in zip(core.compile(rewritten, backend)(x, w), expected):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def naive_col2im(cols, x_shape, window, strides, dilation, below, above):
    """Every column entry added, by a scalar loop, at the input position it was read from."""
    nd = len(window)
    out = np.zeros(x_shape, cols.dtype)
    for index in np.ndindex(*cols.shape):
        n, position, c, offset = index[0], index[1:1 + nd], index[1 + nd], index[2 + nd:]
        source = tuple(p * s + o * d - b for p, s, o, d, b in
                       zip(position, strides, offset, dilation, below))
        if all(0 <= i < length for i, length in zip(source, x_shape[2:])):
            out[(n, c) + source] += cols[index]
    return out


@pytest.mark.parametrize("x_shape, window, strides, dilation, below, above", [
    ((2, 3, 7), (3,), (2,), (1,), (1,), (0,)),
    ((2, 2, 6, 5), (3, 2), (1, 2), (2, 1), (1, 0), (1, 1)),
    ((1, 2, 4, 3, 5), (2, 2, 3), (1, 1, 2), (1, 1, 1), (0, 1, 1), (1, 0, 1)),
])
def test_col2im_matches_a_naive_loop_and_is_the_adjoint_of_im2col(x_shape, window, strides,
                                                                   dilation, below, above):
    geometry = dict(strides=strides, dilation=dilation, padding_below=below, padding_above=above)
    x = core.Parameter(core.f64, x_shape)
    columns_shape = core.Im2Col(x, window, **geometry).shape
    cols = core.Parameter(core.f64, columns_shape)
    node = core.Col2Im(cols, x_shape, window, **geometry)
    assert tuple(node.shape) == x_shape
    rng = np.random.default_rng(2)
    c = rng.normal(size=tuple(columns_shape))
    expected = naive_col2im(c, x_shape, window, strides, dilation, below, above)
    for backend in ("interpreter", "cpu"):
        (got,) = core.compile(core.Function([node], [cols]), backend)(c)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    xv = rng.normal(size=x_shape)
    columns = naive_columns(xv, window, strides, dilation, below, above)
    assert np.isclose(np.sum(columns * c), np.sum(xv * expected), rtol=1e-12)


def test_col2im_rejects_columns_of_the_wrong_shape():
    cols = core.Parameter(core.f32, (2, 4, 4, 3, 3, 3))
    with pytest.raises(core_errors.ShapeError, match=r"Col2Im.*columns has shape"):
        core.Col2Im(cols, (2, 3, 7, 7), (3, 3))  # 7 - 3 + 1 = 5 positions, not 4


def test_data_gradient_becomes_one_product_and_a_col2im():
    x = core.Parameter(core.f64, (3, 2, 7, 6), name="x")
    w = core.Parameter(core.f64, (4, 2, 3, 3), name="w")
    geometry = dict(strides=(2, 1), dilation=(1, 2), padding_below=(1, 1), padding_above=(1, 0))
    delta = core.Tanh(core.Convolution(x, w, **geometry))
    dx = core.ConvolutionBackpropData(x.shape, w, delta, **geometry)
    function = core.Function([dx], [x, w])
    rewritten = passes.PassManager([passes.ConvolutionAsMatmul(),
                                    passes.DeadCodeElimination()]).run(function)
    ops = [node.op for node in rewritten.nodes]
    assert "ConvolutionBackpropData" not in ops and ops.count("Col2Im") == 1
    rng = np.random.default_rng(3)
    xv, wv = rng.normal(size=(3, 2, 7, 6)), rng.normal(size=(4, 2, 3, 3))
    (expected,) = core.compile(function)(xv, wv)
    for backend in ("interpreter", "cpu"):
        (got,) = core.compile(rewritten, backend)(xv, wv)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("batch, geometry", [
    (5, dict(strides=(2, 1), dilation=(1, 2), padding_below=(1, 1), padding_above=(1, 0))),
    (7, dict(strides=(1, 1), dilation=(1, 1), padding_below=(0, 0), padding_above=(0, 0))),
])
@pytest.mark.parametrize("dtype", [core.f64, core.f32])
def test_cpu_data_gradient_runs_a_block_of_images_at_a_time(monkeypatch, batch, geometry,
                                                            dtype):
    """The cpu backend computes the data gradient's product and its col2im together, a
    few images at a time (here 2, so the last block is short): same values."""
    from axgraph.transformers.cpu import backend as cpu_backend, codegen

    x_shape, w_shape = (batch, 6, 9, 7), (5, 6, 3, 3)
    x = core.Parameter(dtype, x_shape, name="x")
    w = core.Parameter(dtype, w_shape, name="w")
    delta = core.Tanh(core.Convolution(x, w, **geometry))
    dx = core.ConvolutionBackpropData(x.shape, w, delta, **geometry)
    function = core.Function([core.Multiply(dx, dx)], [x, w])  # dx read by a later op
    rng = np.random.default_rng(4)
    xv = rng.normal(size=x_shape).astype(dtype.dtype)
    wv = rng.normal(size=w_shape).astype(dtype.dtype)
    (expected,) = core.compile(function)(xv, wv)
    # the columns of one image, as the product writes them
    per_image = int(np.prod(core.Im2Col(x, (3, 3), **geometry).shape[1:])) * dtype.dtype.itemsize
    for images in (1, 2):
        monkeypatch.setattr(codegen, "COLUMN_BLOCK_BYTES", images * per_image)
        compiled = cpu_backend.CpuFunction(
            passes.PassManager([passes.ConvolutionAsMatmul(),
                                passes.DeadCodeElimination()]).run(function))
        (got,) = compiled(xv, wv)
        assert f"block={images})" in compiled.last_program.source
        tolerance = 1e-12 if dtype == core.f64 else 1e-4
        np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance)
