"""Compiled Axon programs: values against NumPy written by hand on every backend, gradients
(`ng.deriv` of the compiled graph) against finite differences in float64, and the sizes
that stay symbolic."""
import numpy as np
import pytest

import axgraph as ng
from axgraph.dims import Dim
from axgraph.frontends import axon
from axgraph.frontends.axon import AxonShapeError, AxonTypeError


def softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def conv2d(x, w, stride, pad):
    """NCHW convolution (a cross-correlation, as in every framework), by loops."""
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, _, h, wd = x.shape
    k, _, r, s = w.shape
    rows, cols = (h - r) // stride + 1, (wd - s) // stride + 1
    out = np.zeros((n, k, rows, cols))
    for i in range(rows):
        for j in range(cols):
            patch = x[:, :, i * stride:i * stride + r, j * stride:j * stride + s]
            out[:, :, i, j] = np.einsum("ncrs,kcrs->nk", patch, w)
    return out


def maxpool(x, window, stride):
    n, c, h, w = x.shape
    rows, cols = (h - window) // stride + 1, (w - window) // stride + 1
    out = np.zeros((n, c, rows, cols))
    for i in range(rows):
        for j in range(cols):
            out[:, :, i, j] = x[:, :, i * stride:i * stride + window,
                                j * stride:j * stride + window].max(axis=(2, 3))
    return out


MLP = """
fun dense (x : f32[*b, k]) (w : f32[k, n]) = relu (x @ w)
fun mlp x w1 w2 = softmax (dense x w1 @ w2)
val y = mlp (input : f32[B, 784]) (param : f32[784, 512]) (param : f32[512, 10])
"""


def test_the_mlp_computes_what_numpy_does(backend, rng):
    program = axon.compile(MLP)
    w1 = rng.standard_normal((784, 512)).astype(np.float32) * 0.05
    w2 = rng.standard_normal((512, 10)).astype(np.float32) * 0.05
    x = rng.standard_normal((5, 784)).astype(np.float32)
    got = program.run({"y.input0": x}, backend, params={"y.param0": w1, "y.param1": w2})["y"]
    np.testing.assert_allclose(got, softmax(np.maximum(x @ w1, 0) @ w2), rtol=1e-4, atol=1e-6)


def test_one_graph_serves_every_batch_size_on_every_backend(backend, rng):
    program = axon.compile("val y = sum (-1) (x * x) + 1.0", x="f32[B, 3]")
    graph = program.graph()
    (B,) = {a.length for a in graph.inputs["x"].axes if a.name == "B"}
    assert str(B) == "B"  # the placeholder's batch length is the size variable itself
    with ng.make_transformer(backend) as t:
        f = t.computation(graph.values["y"], graph.inputs["x"])
        for batch in (4, 1, 7):
            x = rng.standard_normal((batch, 3)).astype(np.float32)
            np.testing.assert_allclose(f(x), (x * x).sum(-1) + 1, rtol=1e-5)


def test_equal_dims_share_one_axis_and_values_keep_their_axon_order():
    graph = axon.compile("val x = input : f32[B, 3]\nval t = input : f32[B, 10]\n"
                         "val y = transpose t").graph()
    assert graph.inputs["x"].axes[0] is graph.inputs["t"].axes[0]
    assert [a.name for a in graph.values["y"].axes] == ["10", "B"]
    square = axon.compile("val s = input : f32[n, n]").graph()
    first, second = square.inputs["s"].axes
    assert first is not second and first.length == second.length


SHAPES = """
val a = input : f32[B, 6]
val r = reshape [B, 2, 3] a
val c = concat 1 a (a * 2.0)
val s = slice 1 1 4 a
val t = transpose r
val m = reshape [B, 1] (mean (-1) (sum 1 r)) + max 0 a
val b = a + (input : f32[6]) * (input : f32[B, 1])
val n = ~a - 1.0
val q = log_softmax a
"""


def test_shape_ops_reductions_and_broadcasting(backend, rng):
    a = rng.standard_normal((4, 6)).astype(np.float32)
    v, col = rng.standard_normal(6).astype(np.float32), rng.standard_normal((4, 1)).astype(np.float32)
    got = axon.compile(SHAPES).run({"a": a, "b.input0": v, "b.input1": col}, backend)
    r = a.reshape(4, 2, 3)
    expected = {"r": r, "c": np.concatenate([a, 2 * a], 1), "s": a[:, 1:4],
                "t": r.transpose(0, 2, 1), "m": r.sum(1).mean(-1)[:, None] + a.max(0),
                "b": a + v * col, "n": -a - 1, "q": np.log(softmax(a))}
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6, err_msg=name)


def test_a_convolution_and_pooling(backend, rng):
    source = ("val x = input : f32[N, 2, 9, 7]\n"
              "val y = pool 2 2 (relu (conv2d 1 1 x (param : f32[3, 2, 3, 3])))\n"
              "val z = conv2d 2 0 x (param : f32[4, 2, 3, 3])")
    x = rng.standard_normal((2, 2, 9, 7)).astype(np.float32)
    w1, w2 = rng.standard_normal((3, 2, 3, 3)) * 0.3, rng.standard_normal((4, 2, 3, 3)) * 0.3
    got = axon.compile(source).run({"x": x}, backend, params={"y.param0": w1, "z.param0": w2})
    np.testing.assert_allclose(got["y"], maxpool(np.maximum(conv2d(x, w1, 1, 1), 0), 2, 2),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got["z"], conv2d(x, w2, 2, 0), rtol=1e-4, atol=1e-5)



CONV_STACK = """
val x = input : f32[N, 2, H, W]
val f = input : f32[3, 2, 3, 3]
val y = pool 2 2 (relu (conv2d 1 1 x f))
val z = conv2d 2 0 x f
"""


def feed(graph, names, backend, *arrays):
    """The values `names` of one graph, fed `arrays` for its inputs in order."""
    with ng.make_transformer(backend) as transformer:
        values = [graph.values[name] for name in names]
        return transformer.computation(values, *graph.inputs.values())(*arrays)


def test_one_graph_convolves_and_pools_images_of_every_size(backend, rng):
    program = axon.compile(CONV_STACK)
    graph = program.graph()
    n, h, w = (Dim(name) for name in "NHW")
    assert graph.shapes["y"] == (n, 3, h // 2, w // 2)
    assert graph.shapes["z"] == (n, 3, (h - 3) // 2 + 1, (w - 3) // 2 + 1)
    f = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    for size in [(2, 6, 7), (1, 9, 4), (3, 3, 5)]:
        x = rng.standard_normal((size[0], 2) + size[1:]).astype(np.float32)
        y, z = feed(graph, ["y", "z"], backend, x, f)
        np.testing.assert_allclose(y, maxpool(np.maximum(conv2d(x, f, 1, 1), 0), 2, 2),
                                   rtol=1e-4, atol=1e-5, err_msg=str(size))
        np.testing.assert_allclose(z, conv2d(x, f, 2, 0), rtol=1e-4, atol=1e-5, err_msg=str(size))
    assert program.graph() is graph


def test_an_image_smaller_than_the_filter_is_refused_when_fed(backend):
    graph = axon.compile(CONV_STACK).graph()
    small = np.ones((1, 2, 2, 5), np.float32)
    with pytest.raises(ng.ShapeCheckError, match=r"H = 2 from x fed .* H must be >= 3"):
        feed(graph, ["z"], backend, small, np.ones((3, 2, 3, 3), np.float32))


def test_a_slice_of_a_symbolic_dim_keeps_it_symbolic(backend, rng):
    program = axon.compile("val y = slice 1 1 3 x * 2.0", x="f32[B, T]")
    graph = program.graph()
    assert graph.shapes["y"] == (Dim("B"), 2)
    for shape in [(2, 3), (4, 7)]:
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(feed(graph, ["y"], backend, x)[0], x[:, 1:3] * 2)
    with pytest.raises(ng.ShapeCheckError) as info:
        feed(graph, ["y"], backend, np.ones((2, 2), np.float32))
    # The plain condition, not the clamped length of a Python slice.
    assert "T = 2 from x fed" in info.value.message
    assert "but T must be >= 3 (from slice" in info.value.message
    assert "takes 1:3 of T" in info.value.message
    assert "min(" not in info.value.message



def test_a_slice_that_ends_before_it_starts_is_a_shape_error():
    with pytest.raises(AxonShapeError, match="slice 2 1 ends before it starts") as info:
        axon.compile("val y = slice 1 2 1 x", x="f32[B, T]")
    assert info.value.positions == ((1, 9),)

def test_a_reshape_valid_under_a_divisibility_check_is_checked_when_fed(backend):
    program = axon.compile("val y = reshape [_, 4] x", x="f32[B, T]")
    assert [r.text for r in program.inference.residuals][0] == "B*T % 4 == 0"
    graph = program.graph()
    for shape in [(3, 4), (2, 6), (1, 8)]:
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        np.testing.assert_array_equal(feed(graph, ["y"], backend, x)[0], x.reshape(-1, 4))
    with pytest.raises(ng.ShapeCheckError, match=r"B\*T = 9"):
        feed(graph, ["y"], backend, np.ones((3, 3), np.float32))


POOLED = """val x = input : f32[N, 1, H, W]
val y = 2.0 * (pool 3 3 x)
val z = slice 3 2 5 y
"""


def test_a_check_failing_when_fed_quotes_the_axon_construct(backend):
    graph = axon.compile(POOLED).graph()
    with pytest.raises(ng.ShapeCheckError) as info:
        feed(graph, ["z"], backend, np.ones((1, 1, 2, 20), np.float32))
    message = info.value.message
    assert "but H must be >= 3 (from pooling at <axon>:2:15 (" in message
    assert message.endswith("\n  <axon>:2:15: pooling\n"
                            "    val y = 2.0 * (pool 3 3 x)\n"
                            "                  ^^^^^^^^^^^^")
    with pytest.raises(ng.ShapeCheckError) as info:  # W//3 = 4 columns, the slice needs 5
        feed(graph, ["z"], backend, np.ones((1, 1, 3, 14), np.float32))
    message = info.value.message
    assert "W = 14 from x fed" in message
    assert "but W must be >= 15 (from slice at <axon>:3:9 (takes 2:5 of W//3))" in message
    assert message.endswith("\n  <axon>:3:9: slice\n"
                            "    val z = slice 3 2 5 y\n"
                            "            ^^^^^^^^^^^^^")
    x = np.arange(15 * 6, dtype=np.float32).reshape(1, 1, 6, 15)
    pooled = x.reshape(1, 1, 2, 3, 5, 3).max(axis=(3, 5))
    np.testing.assert_array_equal(feed(graph, ["z"], backend, x)[0], 2 * pooled[..., 2:5])


def test_run_refuses_data_that_does_not_fit_with_an_axon_shape_error():
    program = axon.compile(POOLED)
    with pytest.raises(AxonShapeError) as info:
        program.run({"x": np.ones((1, 1, 2, 20), np.float32)})
    graph = program.graph()
    with pytest.raises(ng.ShapeCheckError) as fed:
        feed(graph, ["z"], "numpy", np.ones((1, 1, 2, 20), np.float32))
    # The same text, but for the Python line that fed the data.
    assert info.value.message.split(", but ")[1] == fed.value.message.split(", but ")[1]
    assert info.value.positions == ((2, 15),)


def test_a_parameter_of_symbolic_shape_still_asks_for_its_size():
    program = axon.compile("val w = param : f32[K, 3]\nval y = (input : f32[B, K]) @ w")
    with pytest.raises(AxonShapeError, match=r"parameter w has shape \[K, 3\]: parameters need"):
        program.graph()
    assert program.graph(sizes={"K": 2}).shapes["w"] == (2, 3)


RNN = """
val xs = input : f32[T, B, 4]
val w = param : f32[4, 5]
val u = param : f32[5, 5]
val h = fold (fn (h, x) => tanh (x @ w + h @ u)) (zeros [B, 5]) xs
val (last, outputs) = scan (fn (c, x) => (c + x, sum (-1) c)) (zeros [B, 4]) xs
"""


def test_loops_unroll_over_the_data_they_are_given(backend, rng):
    program = axon.compile(RNN)
    xs = rng.standard_normal((6, 3, 4)).astype(np.float32)
    w, u = rng.standard_normal((4, 5)) * 0.5, rng.standard_normal((5, 5)) * 0.5
    got = program.run({"xs": xs}, backend, params={"w": w, "u": u})
    h = np.zeros((3, 5))
    for x in xs:
        h = np.tanh(x @ w + h @ u)
    np.testing.assert_allclose(got["h"], h, rtol=1e-4, atol=1e-5)
    partial = np.concatenate([np.zeros((1, 3, 4)), np.cumsum(xs, 0)[:-1]]).sum(-1)
    np.testing.assert_allclose(got["outputs"], partial, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["last"], xs.sum(0), rtol=1e-5, atol=1e-5)


def test_a_loop_over_a_symbolic_length_asks_for_the_size():
    program = axon.compile(RNN)
    with pytest.raises(AxonShapeError) as info:
        program.graph()
    assert "fold over a dim of length T" in info.value.headline
    assert "graph(sizes={...})" in info.value.headline and info.value.positions == ((5, 9),)
    graph = program.graph(sizes={"T": 3})
    assert graph.shapes["h"][1] == 5 and graph.sizes == {"T": 3}
    assert program.graph(sizes={"T": 3}) is graph


ATTENTION = """
fun attend (q : f32[t, d]) (k : f32[t, d]) (v : f32[t, e]) =
  softmax (q @ transpose k / 2.0) @ v
val xs = input : f32[B, T, 4]
val wq = param : f32[4, 4]
val wk = param : f32[4, 4]
val wv = param : f32[4, 3]
val ys = map (fn x => attend (x @ wq) (x @ wk) (x @ wv)) xs
"""


@pytest.mark.parametrize("length", [2, 5])
def test_attention_over_a_symbolic_sequence_length(backend, rng, length):
    program = axon.compile(ATTENTION)
    assert str(program.inference["ys"]) == "f32[B, T, 3]"
    xs = rng.standard_normal((2, length, 4)).astype(np.float32)
    ws = {n: rng.standard_normal(s) for n, s in (("wq", (4, 4)), ("wk", (4, 4)), ("wv", (4, 3)))}
    got = program.run({"xs": xs}, backend, params=ws)["ys"]
    q, k, v = xs @ ws["wq"], xs @ ws["wk"], xs @ ws["wv"]
    expected = softmax(q @ k.transpose(0, 2, 1) / 2.0) @ v
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


MAPPED = """
val xs = input : f32[B, 3, 4]
val a = map (sum 0) xs
val b = map (fn x => map (fn r => r * 2.0) x) xs
val c = fold (fn (acc, x) => acc + fold (fn (i, r) => i + r) (zeros [4]) x) (zeros [4]) xs
val d = map (fn x => reshape [12] x) xs
val e = map (fn x => concat 0 x x) xs
val f = map (fn x => slice 1 0 2 x) xs
val g = map (fn x => transpose x @ x) xs
"""


def test_the_element_dim_of_map_rides_through_every_builtin(backend, rng):
    xs = rng.standard_normal((2, 3, 4)).astype(np.float32)
    got = axon.compile(MAPPED).run({"xs": xs}, backend)
    expected = {"a": xs.sum(1), "b": 2 * xs, "c": xs.sum((0, 1)), "d": xs.reshape(2, 12),
                "e": np.concatenate([xs, xs], 1), "f": xs[:, :, 0:2],
                "g": xs.transpose(0, 2, 1) @ xs}
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-5, err_msg=name)


# -- gradients by finite differences -----------------------------------------------------------

def central_difference(f, value, eps=1e-6):
    grad = np.zeros_like(value)
    for index in np.ndindex(value.shape):
        step = np.zeros_like(value)
        step[index] = eps
        grad[index] = (f(value + step) - f(value - step)) / (2 * eps)
    return grad


def derivatives(program, backend, inputs, params, sizes=None):
    graph = program.graph(sizes=sizes, params=params)
    loss = graph.values["loss"]
    names = list(graph.inputs)
    with ng.make_transformer(backend) as t:
        f = t.computation([loss] + [ng.deriv(loss, graph.params[p]) for p in params],
                          *[graph.inputs[n] for n in names])
        value, *grads = f(*[inputs[n] for n in names])
    return value, dict(zip(params, grads))


MLP_LOSS = """
fun dense (x : f64[*b, k]) (w : f64[k, n]) (b : f64[n]) = x @ w + b
val x = input : f64[B, 4]
val labels = input : f64[B, 3]
val w1 = param : f64[4, 5]
val b1 = param : f64[5]
val w2 = param : f64[5, 3]
val logits = dense (tanh (dense x w1 b1)) w2 (param : f64[3])
val loss = mean 0 (~ (sum (-1) (labels * log_softmax logits)))
"""


def test_mlp_gradients_match_finite_differences(backend, rng):
    x, labels = rng.standard_normal((6, 4)), np.eye(3)[rng.integers(0, 3, 6)]
    params = {"w1": rng.standard_normal((4, 5)), "b1": rng.standard_normal(5),
              "w2": rng.standard_normal((5, 3)), "logits.param0": rng.standard_normal(3)}

    def loss(p):
        logits = np.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["logits.param0"]
        return np.mean(-np.sum(labels * np.log(softmax(logits)), -1))

    value, grads = derivatives(axon.compile(MLP_LOSS), backend, {"x": x, "labels": labels}, params)
    np.testing.assert_allclose(value, loss(params), rtol=1e-10)
    for name in params:
        numeric = central_difference(lambda v: loss({**params, name: v}), params[name])
        np.testing.assert_allclose(grads[name], numeric, rtol=1e-6, atol=1e-8, err_msg=name)


CONV_LOSS = """
val x = input : f64[N, 2, 6, 6]
val f = param : f64[3, 2, 3, 3]
val h = pool 2 2 (tanh (conv2d 1 1 x f))
val flat = reshape [N, _] h
val w = param : f64[27, 2]
val loss = sum 0 (sum 0 (square (flat @ w)))
"""


def test_convolution_gradients_match_finite_differences(backend, rng):
    x = rng.standard_normal((2, 2, 6, 6))
    params = {"f": rng.standard_normal((3, 2, 3, 3)) * 0.5, "w": rng.standard_normal((27, 2))}

    def loss(p):
        h = maxpool(np.tanh(conv2d(x, p["f"], 1, 1)), 2, 2)
        return np.sum((h.reshape(2, -1) @ p["w"]) ** 2)

    value, grads = derivatives(axon.compile(CONV_LOSS), backend, {"x": x}, params)
    np.testing.assert_allclose(value, loss(params), rtol=1e-10)
    for name in params:
        numeric = central_difference(lambda v: loss({**params, name: v}), params[name])
        np.testing.assert_allclose(grads[name], numeric, rtol=1e-6, atol=1e-7, err_msg=name)



SYMBOLIC_CONV_LOSS = """
val x = input : f64[N, 2, H, W]
val f = param : f64[3, 2, 3, 3]
val top = slice 2 0 2 (pool 2 2 (tanh (conv2d 1 1 x f)))
val loss = sum 0 (sum 0 (sum 0 (sum 0 (square top))))
"""


def test_one_graph_differentiates_a_convolution_for_every_image_size(backend, rng):
    f = rng.standard_normal((3, 2, 3, 3)) * 0.5
    graph = axon.compile(SYMBOLIC_CONV_LOSS).graph(params={"f": f})
    loss_op = graph.values["loss"]
    with ng.make_transformer(backend) as t:
        compute = t.computation([loss_op, ng.deriv(loss_op, graph.params["f"])], graph.inputs["x"])
        for size in [(2, 4, 6), (1, 7, 5)]:
            x = rng.standard_normal((size[0], 2) + size[1:])

            def loss(filters):
                return np.sum(maxpool(np.tanh(conv2d(x, filters, 1, 1)), 2, 2)[:, :, :2] ** 2)

            value, grad = compute(x)
            np.testing.assert_allclose(value, loss(f), rtol=1e-10, err_msg=str(size))
            np.testing.assert_allclose(grad, central_difference(loss, f), rtol=1e-6, atol=1e-7,
                                       err_msg=str(size))


RNN_LOSS = """
val xs = input : f64[T, B, 3]
val w = param : f64[3, 4]
val u = param : f64[4, 4]
val v = param : f64[4, 2]
val h = fold (fn (h, x) => tanh (x @ w + h @ u)) (zeros [B, 4] * 1.0) xs
val parts = map (fn row => concat 0 (slice 0 0 1 row) (row * 2.0)) (h @ v)
val loss = sum 0 (sum 0 (parts * parts))
"""


def test_loop_and_map_gradients_match_finite_differences(backend, rng):
    xs = rng.standard_normal((4, 2, 3))
    params = {"w": rng.standard_normal((3, 4)) * 0.5, "u": rng.standard_normal((4, 4)) * 0.5,
              "v": rng.standard_normal((4, 2))}

    def loss(p):
        h = np.zeros((2, 4))
        for x in xs:
            h = np.tanh(x @ p["w"] + h @ p["u"])
        out = h @ p["v"]
        parts = np.concatenate([out[:, :1], out * 2.0], axis=1)
        return np.sum(parts * parts)

    program = axon.compile(RNN_LOSS.replace("(zeros [B, 4] * 1.0)", "(input : f64[B, 4])"))
    inputs = {"xs": xs, "h.input0": np.zeros((2, 4))}
    value, grads = derivatives(program, backend, inputs, params, sizes={"T": 4})
    np.testing.assert_allclose(value, loss(params), rtol=1e-10)
    for name in params:
        numeric = central_difference(lambda v: loss({**params, name: v}), params[name])
        np.testing.assert_allclose(grads[name], numeric, rtol=1e-6, atol=1e-8, err_msg=name)


# -- errors of lowering -------------------------------------------------------------------------

def test_sizes_given_are_checked_against_the_residual_checks():
    program = axon.compile("val x = input : f32[3*m]\nval y = reshape [_, 2] x")
    assert [r.text for r in program.inference.residuals] == ["3*m % 2 == 0"]
    with pytest.raises(AxonShapeError, match=r"2 does not divide 9 \(with m = 3\)") as info:
        program.graph(sizes={"m": 3})
    assert (2, 9) in info.value.positions
    assert program.graph(sizes={"m": 4}).shapes["y"] == (6, 2)
    with pytest.raises(AxonShapeError, match="q is not a size of this program"):
        program.graph(sizes={"q": 3})


def test_sizes_not_determined_by_the_inputs_are_an_error():
    with pytest.raises(AxonShapeError, match=r"the size\(s\) a, b of a result are not determined"):
        axon.compile("val y = reshape [a, b] (input : f32[12])")


def test_parameter_values_must_have_their_shape():
    program = axon.compile("val w = param : f32[2, 3]")
    with pytest.raises(AxonShapeError, match=r"parameter w has shape \(3, 2\), not \(2, 3\)"):
        program.graph(params={"w": np.zeros((3, 2))})


def test_a_convolution_inside_map_is_refused_clearly():
    with pytest.raises(AxonTypeError, match="cannot lower conv2d inside `map`"):
        axon.compile("val f = input : f32[2, 1, 2, 2]\n"
                     "val y = map (fn x => conv2d 1 0 x f) (input : f32[3, 4, 1, 5, 5])")


def test_inputs_get_names_of_their_own_even_when_a_name_is_bound_twice():
    graph = axon.compile("val x = input : f32[2]\nval x = input : f32[3]\nval y = x + (input : f32[3])\n"
                         "val y = y * (input : f32[3])", z="f32[2]").graph()
    assert list(graph.inputs) == ["z", "x", "x.input0", "y.input0", "y.input1"]
    assert [graph.shapes[n] for n in graph.inputs] == [(2,), (2,), (3,), (3,), (3,)]


def test_run_checks_its_inputs(rng):
    program = axon.compile("val y = x * 2.0", x="f32[n]")
    with pytest.raises(AxonShapeError, match=r"missing \['x'\], unknown \['z'\]"):
        program.run({"z": np.zeros(3)})


def test_a_source_position_relabels_only_the_ops_its_own_thread_builds():
    import threading

    from axgraph.debug_info import SourcePosition, source_position, user_location

    inside, outside = [], []
    entered, release = threading.Event(), threading.Event()

    def front_end():
        with source_position(SourcePosition("<axon>", 7, 3)):
            entered.set()
            release.wait(5)
            inside.append(user_location())

    worker = threading.Thread(target=front_end)
    worker.start()
    entered.wait(5)
    outside.append(user_location())          # another thread meanwhile: its own line
    release.set()
    worker.join(5)
    assert inside == [("<axon>", 7)]
    assert outside[0][0] == __file__
