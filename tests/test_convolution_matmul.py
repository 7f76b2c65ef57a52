"""Im2Col and the ConvolutionAsMatmul pass: same results, one shared set of columns."""
import numpy as np
import pytest

from axgraph import core, passes


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
