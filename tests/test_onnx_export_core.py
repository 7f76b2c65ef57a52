"""ONNX export of each core op: the file passes onnx.checker's full check and onnxruntime
computes what the core interpreter computes (and, for a few, NumPy written here).

Graphs are core Functions built op by op, so every rule of the export table is run on
its own, with symbolic dims where the op takes them.
"""
import numpy as np
import pytest

from axgraph import core
from axgraph.core.ops import elementwise as ew

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from axgraph.frontends.onnx import export  # noqa: E402
from axgraph.frontends.onnx.export_graph import OnnxExportError  # noqa: E402
from axgraph.frontends.onnx.export_rules import ELEMENTWISE, RULES, UNSUPPORTED  # noqa: E402

RNG = np.random.default_rng(7)


def run_onnx(model, arguments):
    """Check the model fully and run it in onnxruntime on `arguments` (the inputs, in order)."""
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, arguments)))


def check_function(function, *arguments, rtol=1e-5, atol=1e-6, opset=17):
    """Export `function`, run it, compare every result with the core interpreter's."""
    model = export(function, None, opset=opset)
    got = run_onnx(model, arguments)
    expected = core.compile(function, "interpreter")(*arguments)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == np.shape(e) and g.dtype == np.asarray(e).dtype
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
    return model, got


def op_types(model):
    return {node.op_type for node in model.graph.node}


def f32(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, shape).astype(np.float32)


def test_every_core_op_has_a_rule():
    assert RULES.missing(core.CORE_OPS) == []


# -- elementwise --------------------------------------------------------------------------

POSITIVE = {ew.Sqrt, ew.Log, ew.Log1p, ew.Rsqrt}
UNARY = [op for op in ew.OPS if issubclass(op, ew.UnaryElementwise) and op is not ew.Not]


@pytest.mark.parametrize("op", UNARY, ids=lambda op: op.__name__)
def test_unary_elementwise(op):
    x = core.Parameter(core.f32, ("N", 3), name="x")
    value = f32(4, 3, low=0.1, high=3.0) if op in POSITIVE else f32(4, 3)
    if op is ew.Tan:
        value = f32(4, 3, low=-1.2, high=1.2)
    model, _ = check_function(core.Function([op(x)], [x]), value)
    if op in ELEMENTWISE:
        assert ELEMENTWISE[op] in op_types(model)


BINARY = [op for op in ew.OPS if issubclass(op, ew.BinaryElementwise)
          and op not in (ew.And, ew.Or)]


@pytest.mark.parametrize("op", BINARY, ids=lambda op: op.__name__)
def test_binary_elementwise(op):
    a = core.Parameter(core.f32, ("N", 3), name="a")
    b = core.Parameter(core.f32, ("N", 3), name="b")
    left, right = f32(5, 3), f32(5, 3)
    right[0] = left[0]  # some equal pairs for the comparisons
    if op is ew.Power:
        left = np.abs(left) + 0.1
    check_function(core.Function([op(a, b)], [a, b]), left, right)


def test_log1p_keeps_small_arguments():
    x = core.Parameter(core.f32, (6,), name="x")
    value = np.array([1e-10, -3e-8, 1e-5, 0.0, np.inf, -1.0], np.float32)
    _, (got,) = check_function(core.Function([ew.Log1p(x)], [x]), value, rtol=1e-6, atol=0)
    with np.errstate(divide="ignore"):  # log1p(-1) is -inf
        expected = np.log1p(value.astype(np.float64))
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_logical_ops_select_and_integer_division():
    p = core.Parameter(core.boolean, (2, 3), name="p")
    q = core.Parameter(core.boolean, (2, 3), name="q")
    x = core.Parameter(core.f32, (2, 3), name="x")
    i = core.Parameter(core.i32, (2, 3), name="i")
    j = core.Parameter(core.i32, (2, 3), name="j")
    results = [ew.And(p, q), ew.Or(p, q), ew.Not(p), ew.Select(p, x, ew.Negative(x)),
               ew.Divide(i, j)]
    pv, qv = RNG.random((2, 3)) < 0.5, RNG.random((2, 3)) < 0.5
    iv = np.array([[-7, 7, 9], [-9, 3, 0]], np.int32)
    jv = np.array([[2, 2, -4], [4, -2, 5]], np.int32)
    _, got = check_function(core.Function(results, [p, q, x, i, j]), pv, qv, f32(2, 3), iv, jv)
    assert got[4].tolist() == [[-3, 3, -2], [-2, -1, 0]]  # truncated toward zero


@pytest.mark.parametrize("target", [core.i32, core.f64, core.boolean], ids=str)
def test_convert(target):
    x = core.Parameter(core.f32, (3, 2), name="x")
    value = np.array([[-1.7, 0.0], [2.5, 3.9], [0.2, -0.0]], np.float32)
    _, (got,) = check_function(core.Function([ew.Convert(x, target)], [x]), value)
    assert got.dtype == target.dtype


# -- leaves ---------------------------------------------------------------------------------

def test_constants_and_sizes():
    x = core.Parameter(core.f32, ("N", 2), name="x")
    table = core.Constant(core.f32, (2,), [1.5, -2.0])
    fill = core.Constant(core.f32, ("N", 2), 0.25)  # a scalar filling a symbolic shape
    n = core.DimValue(core.Dim("N") * 2 + 1, core.f32)
    row = core.Broadcast(table, ("N", 2), axes=(0,))
    total = ew.Add(ew.Add(x, row), ew.Multiply(fill, core.Broadcast(n, ("N", 2), axes=(0, 1))))
    for size in (1, 4):
        value = f32(size, 2)
        _, (got,) = check_function(core.Function([total], [x]), value)
        np.testing.assert_allclose(got, value + [1.5, -2.0] + 0.25 * (2 * size + 1), rtol=1e-6)


@pytest.mark.parametrize("op", [core.RandomUniform, core.RandomNormal], ids=lambda c: c.__name__)
def test_random_fills_draw_the_shape_and_distribution(op):
    x = core.Parameter(core.f32, ("N", 3), name="x")
    draws = op(core.f32, ("N", 3), 2.0, 3.0, seed=1)
    fixed = op(core.f32, (400, 50), 2.0, 3.0, seed=2)
    model = export(core.Function([ew.Add(x, draws), fixed], [x]), None)
    got, many = run_onnx(model, [np.zeros((6, 3), np.float32)])
    assert got.shape == (6, 3) and many.shape == (400, 50)
    if op is core.RandomUniform:
        assert 2.0 <= many.min() and many.max() <= 3.0 and abs(many.mean() - 2.5) < 0.02
    else:
        assert abs(many.mean() - 2.0) < 0.05 and abs(many.std() - 3.0) < 0.05


# -- data movement --------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [17, 21])
def test_movement_ops_over_symbolic_dims(opset):
    x = core.Parameter(core.f32, ("N", 6), name="x")
    reshaped = core.Reshape(x, (core.Dim("N") * 2, 3))
    transposed = core.Transpose(reshaped, (1, 0))
    sliced = core.Slice(x, lower=(1, 0), upper=("N", 6), strides=(1, 2))
    reversed_ = core.Reverse(x, axes=(0, 1))
    joined = core.Concat([x, reversed_, x], axis=0)
    padded = core.Pad(x, below=(1, 0), above=(0, 2), value=-1.0)
    spread = core.Pad(x, below=(0, 1), above=(2, 0), interior=(1, 2), value=0.5)
    results = [transposed, sliced, reversed_, joined, padded, spread]
    for size in (2, 5):
        value = f32(size, 6)
        _, got = check_function(core.Function(results, [x]), value, opset=opset)
        np.testing.assert_array_equal(got[0], value.reshape(2 * size, 3).T)
        np.testing.assert_array_equal(got[1], value[1:, ::2])
        np.testing.assert_array_equal(got[2], value[::-1, ::-1])
        np.testing.assert_array_equal(got[3], np.concatenate([value, value[::-1, ::-1], value]))
        np.testing.assert_array_equal(got[4], np.pad(value, ((1, 0), (0, 2)),
                                                     constant_values=-1.0))
        expected = np.full((2 * size - 1 + 2, 1 + 6 + 2 * 5), 0.5, np.float32)
        expected[0:2 * size - 1:2, 1::3] = value
        np.testing.assert_array_equal(got[5], expected)


# -- contraction and reductions ---------------------------------------------------------------

DOTS = {  # shapes of a and b, then the Dot's pairs
    "matrix": ((3, 4), (4, 5), {}),
    "matrix-vector": ((3, 4), (4,), {}),
    "stacked-left": ((2, 3, 4), (4, 5), {}),
    "batched-matmul": ((2, 3, 4), (2, 4, 5), dict(contract_a=(2,), contract_b=(1,),
                                                  batch_a=(0,), batch_b=(0,))),
    "transposed": ((3, 4), (5, 4), dict(contract_a=(1,), contract_b=(1,))),
    "batched-einsum": ((4, 2, 3), (4, 3, 5, 2), dict(contract_a=(0,), contract_b=(0,),
                                                     batch_a=(2, 1), batch_b=(1, 3))),
    "two-contracted": ((2, 3, 4), (4, 3, 5), dict(contract_a=(1, 2), contract_b=(1, 0))),
    "scalar": ((), (3, 2), {}),
}


@pytest.mark.parametrize("case", DOTS, ids=str)
def test_dot(case):
    shape_a, shape_b, pairs = DOTS[case]
    a = core.Parameter(core.f32, shape_a, name="a")
    b = core.Parameter(core.f32, shape_b, name="b")
    node = core.Dot(a, b, **pairs)
    values = [f32(*a.shape), f32(*b.shape)]
    model, (got,) = check_function(core.Function([node], [a, b]), *values)
    assert op_types(model) & {"MatMul", "Einsum"}


def test_batched_dot_is_numpy_matmul():
    a = core.Parameter(core.f32, ("N", 3, 4), name="a")
    b = core.Parameter(core.f32, ("N", 4, 2), name="b")
    dot = core.Dot(a, b, contract_a=(2,), contract_b=(1,), batch_a=(0,), batch_b=(0,))
    av, bv = f32(5, 3, 4), f32(5, 4, 2)
    model, (got,) = check_function(core.Function([dot], [a, b]), av, bv)
    assert "MatMul" in op_types(model)
    np.testing.assert_allclose(got, av @ bv, rtol=1e-5)


@pytest.mark.parametrize("opset", [17, 18, 21])
def test_reductions(opset):
    x = core.Parameter(core.f32, ("N", 3, 4), name="x")
    results = [core.Sum(x, (0, 2)), core.Prod(x, (1,)), core.Max(x, (0,)), core.Min(x, (2, 1)),
               core.Sum(x, ()), core.ArgMax(x, (2,)), core.ArgMin(x, (2, 0), core.i32),
               core.Softmax(x, (1,)), core.LogSoftmax(x, (0, 2)), core.Softmax(x, (2, 0))]
    value = f32(3, 3, 4)
    _, got = check_function(core.Function(results, [x]), value, opset=opset)
    np.testing.assert_allclose(got[0], value.sum(axis=(0, 2)), rtol=1e-5)
    assert got[5].tolist() == value.argmax(axis=2).tolist()
    flat = value.transpose(1, 2, 0).reshape(3, 12)  # axes (2, 0) flattened in that order
    assert got[6].tolist() == flat.argmin(axis=1).tolist()
    shifted = value - value.max(axis=(0, 2), keepdims=True)
    np.testing.assert_allclose(
        got[8], shifted - np.log(np.exp(shifted).sum(axis=(0, 2), keepdims=True)), atol=1e-5)


def test_softmax_backprops():
    dy = core.Parameter(core.f32, (3, 4), name="dy")
    y = core.Parameter(core.f32, (3, 4), name="y")
    results = [core.SoftmaxBackprop(dy, y, (1,)), core.LogSoftmaxBackprop(dy, y, (0, 1))]
    check_function(core.Function(results, [dy, y]), f32(3, 4), f32(3, 4))


# -- windows ---------------------------------------------------------------------------------

GEOMETRY = dict(strides=(2, 1), dilation=(1, 2), padding_below=(1, 0), padding_above=(0, 2))


@pytest.mark.parametrize("opset", [17, 21])
def test_convolution_and_its_adjoints(opset):
    data = core.Parameter(core.f32, ("N", 3, 7, 6), name="data")
    filters = core.Parameter(core.f32, (4, 3, 3, 2), name="filters")
    conv = core.Convolution(data, filters, **GEOMETRY)
    delta = core.Parameter(core.f32, conv.shape, name="delta")
    back_data = core.ConvolutionBackpropData(data.shape, filters, delta, **GEOMETRY)
    back_filters = core.ConvolutionBackpropFilters(data, filters.shape, delta, **GEOMETRY)
    function = core.Function([conv, back_data, back_filters], [data, filters, delta])
    size = 2
    delta_shape = [size] + list(conv.shape[1:])
    check_function(function, f32(size, 3, 7, 6), f32(4, 3, 3, 2), f32(*delta_shape), atol=1e-5,
                   opset=opset)


def test_pools_and_max_pool_backprop():
    x = core.Parameter(core.f32, ("N", 2, 5, 6), name="x")
    window = dict(window=(3, 2), strides=(2, 2), padding_below=(1, 0), padding_above=(1, 1))
    pooled = core.MaxPool(x, **window)
    averaged = core.AvgPool(x, **window)
    delta = core.Parameter(core.f32, pooled.shape, name="delta")
    back = core.MaxPoolBackprop(x, delta, **window)
    # (a Slice of all of delta, whose batch is N, gives it the batch 2 that x_shape names)
    back_average = core.AvgPoolBackprop((2, 2, 5, 6), core.Slice(delta, (0, 0, 0, 0),
                                                                 (2,) + pooled.shape[1:]),
                                        **window)
    function = core.Function([pooled, averaged, back, back_average], [x, delta])
    check_function(function, f32(2, 2, 5, 6), f32(2, *pooled.shape[1:]))


def test_average_pool_adjoint_is_numpy_spreading_over_real_inputs():
    delta = core.Parameter(core.f32, (1, 1, 2, 2), name="delta")
    back = core.AvgPoolBackprop((1, 1, 3, 3), delta, window=(2, 2), strides=(2, 2),
                                padding_below=(0, 1), padding_above=(1, 0))
    value = np.array([[[[1.0, 2.0], [3.0, 4.0]]]], np.float32)
    _, (got,) = check_function(core.Function([back], [delta]), value)
    expected = np.zeros((3, 3))
    for p in range(2):
        for q in range(2):
            rows = [i for i in range(2 * p, 2 * p + 2) if 0 <= i < 3]
            cols = [j for j in range(2 * q - 1, 2 * q + 1) if 0 <= j < 3]
            for i in rows:
                for j in cols:
                    expected[i, j] += value[0, 0, p, q] / (len(rows) * len(cols))
    np.testing.assert_allclose(got[0, 0], expected, rtol=1e-6)


# -- indexing --------------------------------------------------------------------------------

def test_gather_scatter_add_and_one_hot():
    table = core.Parameter(core.f32, (5, 3), name="table")
    ids = core.Parameter(core.i32, ("N", 2), name="ids")
    gathered = core.Gather(table, ids)
    along_1 = core.Gather(table, ids, axis=1)
    updates = core.Parameter(core.f32, ("N", 2, 3), name="updates")
    scattered = core.ScatterAdd(table, ids, updates)
    wide = core.Parameter(core.f32, (2, 4, 3), name="wide")
    picks = core.Parameter(core.i64, (5,), name="picks")
    spread = core.Parameter(core.f32, (2, 5, 3), name="spread")
    scattered_1 = core.ScatterAdd(wide, picks, spread, axis=1)
    labels = core.Parameter(core.f32, ("N",), name="labels")
    hot = core.OneHot(labels, (4, "N"), one_hot_axis=0)
    function = core.Function([gathered, along_1, scattered, scattered_1, hot],
                             [table, ids, updates, wide, picks, spread, labels])
    ids_value = np.array([[0, 2], [2, 1], [4, 0]], np.int32)
    ids_small = np.minimum(ids_value, 2)
    picks_value = np.array([3, 0, 3, 1, 3])
    labels_value = np.array([3.0, 0.0, 1.0], np.float32)
    tv, uv, wv, sv = f32(5, 3), f32(3, 2, 3), f32(2, 4, 3), f32(2, 5, 3)
    model, got = check_function(function, tv, ids_small, uv, wv, picks_value, sv, labels_value)
    expected = tv.copy()
    np.add.at(expected, ids_small, uv)
    np.testing.assert_allclose(got[2], expected, rtol=1e-6)
    assert got[4].tolist() == np.eye(4, dtype=np.float32)[[3, 0, 1]].T.tolist()


def test_fused_body_is_written_inline():
    a = core.Parameter(core.f32, (2, 3), name="a")
    b = core.Parameter(core.f32, (2, 3), name="b")
    pa, pb = core.Parameter(core.f32, (2, 3)), core.Parameter(core.f32, (2, 3))
    body = core.Function([ew.Tanh(ew.Multiply(pa, pb))], [pa, pb])
    fused = core.Fused([a, ew.Exp(b)], body)
    av, bv = f32(2, 3), f32(2, 3)
    _, (got,) = check_function(core.Function([fused], [a, b]), av, bv)
    np.testing.assert_allclose(got, np.tanh(av * np.exp(bv)), rtol=1e-5)


# -- what ONNX cannot express -----------------------------------------------------------------

def test_ops_onnx_cannot_express_name_the_op_and_the_line():
    x = core.Parameter(core.f32, (1, 2, 4, 4), name="x")
    columns = core.Im2Col(x, window=(2, 2))
    c = core.Parameter(core.f32, columns.shape, name="c")
    cases = [
        (core.Function([columns], [x]), "Im2Col"),
        (core.Function([core.Col2Im(c, x.shape, window=(2, 2))], [c]), "Col2Im"),
    ]
    for function, words in cases:
        with pytest.raises(OnnxExportError, match=words) as info:
            export(function, None)
        assert info.value.location[0] == __file__
    assert set(UNSUPPORTED) == {core.Im2Col, core.Col2Im}
