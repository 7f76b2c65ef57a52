"""The strict core API (seed 004): types, every op, Function rules, printing, the interpreter."""
import inspect
import itertools

import numpy as np
import pytest

from axgraph import core
from axgraph.errors import AxgraphTypeError, DTypeError, ExecutionError, FeedError, GraphError, ShapeError

N, M = core.symbols("N M")


def run(results, parameters, *arrays, **kwargs):
    """Compile a Function of `results` over `parameters` and call it on `arrays`."""
    function = core.Function(results if isinstance(results, list) else [results], parameters)
    return core.compile(function, backend="interpreter")(*arrays, **kwargs)


def param(et, shape, name=None):
    return core.Parameter(et, shape, name=name)


@pytest.fixture
def rng():
    return np.random.default_rng(4)


def here() -> int:
    """The caller's line number."""
    return inspect.currentframe().f_back.f_lineno


# -- element types and shapes -------------------------------------------------------------

def test_element_types_wrap_numpy_dtypes():
    table = {core.f16: np.float16, core.f32: np.float32, core.f64: np.float64, core.i8: np.int8,
             core.i16: np.int16, core.i32: np.int32, core.i64: np.int64, core.u8: np.uint8,
             core.u16: np.uint16, core.u32: np.uint32, core.u64: np.uint64,
             core.boolean: np.bool_}
    for et, dtype in table.items():
        assert et.dtype == np.dtype(dtype)
        assert core.element_type(dtype) is et
        assert core.element_type(et.name) is et
        assert repr(et) == f"core.{et.name}"
    assert core.f32.is_float and core.f32.is_signed and core.f32.bitwidth == 32
    assert core.u8.is_integral and not core.u8.is_signed
    assert core.boolean.is_boolean and not core.boolean.is_numeric
    with pytest.raises(DTypeError):
        core.element_type(np.complex64)
    with pytest.raises(AttributeError):
        core.f32.name = "x"


def test_bf16_only_with_ml_dtypes():
    try:
        import ml_dtypes
    except ImportError:
        assert not core.has_bf16()
        with pytest.raises(AttributeError, match="ml_dtypes"):
            core.bf16
        return
    assert core.bf16.dtype == np.dtype(ml_dtypes.bfloat16) and core.bf16.is_float
    a = param(core.bf16, (2,))
    (result,) = run(core.Add(a, a), [a], np.ones(2, dtype=ml_dtypes.bfloat16))
    assert result.dtype == core.bf16.dtype and np.all(result.astype(np.float32) == 2)


def test_shape_forms():
    assert core.Shape(32, 32) == core.Shape((32, 32)) == core.Shape([32, 32]) == (32, 32)
    assert core.Shape() == () and core.Shape(5) == (5,)
    assert core.Shape("N", 3) == core.Shape(N, 3)
    assert core.Shape(np.int64(4)) == (4,)
    shape = core.Shape(N, 2 * N + 1)
    assert str(shape) == "[N, 2*N + 1]"
    assert shape.free_symbols == {"N"} and not shape.is_static
    assert shape.evaluate({"N": 3}) == (3, 7)
    assert shape.size == 2 * N * N + N
    assert isinstance(shape[1:], core.Shape)
    for bad in [(-1,), (True,), (1.5,)]:
        with pytest.raises((TypeError, ValueError)):
            core.Shape(bad)


# -- the seed's example ------------------------------------------------------------------------

def test_seed_example_runs(rng):
    shape = core.Shape(32, 32)
    a = core.Parameter(core.f32, shape)
    b = core.Parameter(core.f32, shape)
    c = core.Parameter(core.f32, shape)
    t0 = core.Add(a, b)
    t1 = core.Multiply(t0, c)
    f = core.Function([t1], [a, b, c])
    fn = core.compile(f, backend="interpreter")
    x, y, z = (rng.standard_normal((32, 32)).astype(np.float32) for _ in range(3))
    (result,) = fn(x, y, z)
    np.testing.assert_allclose(result, (x + y) * z, rtol=1e-6)
    assert result.dtype == np.float32
    assert str(f) == "\n".join([
        "function(%0, %1, %2):",
        "  %0 = Parameter() : f32[32, 32]",
        "  %1 = Parameter() : f32[32, 32]",
        "  %2 = Parameter() : f32[32, 32]",
        "  %3 = Add(%0, %1) : f32[32, 32]",
        "  %4 = Multiply(%3, %2) : f32[32, 32]",
        "  return %4",
    ])


def test_seed_mismatch_raises_naming_op_and_user_line():
    a = core.Parameter(core.f32, (32, 32))
    b = core.Parameter(core.f32, (32, 16))
    with pytest.raises(ShapeError) as info:
        line = here(); core.Add(a, b)  # noqa: E702 - the error must point at this line
    error = info.value
    assert error.location == (__file__, line)
    assert f"{__file__}:{line}" in str(error)
    assert "Add" in str(error) and "[32, 32]" in str(error) and "[32, 16]" in str(error)


def test_element_type_mismatch_raises_no_coercion():
    a, b = param(core.f32, (2,)), param(core.f64, (2,))
    with pytest.raises(DTypeError, match="Multiply: element types differ.*f32.*f64") as info:
        line = here(); core.Multiply(a, b)  # noqa: E702
    assert info.value.location == (__file__, line)


def test_python_values_are_not_inputs():
    a = param(core.f32, (2,))
    with pytest.raises(GraphError, match="input 1 is float.*Constant"):
        core.Add(a, 1.0)
    with pytest.raises(GraphError):
        core.Add(a, np.ones(2, np.float32))


# -- nodes -------------------------------------------------------------------------------------

def test_nodes_are_immutable_and_rebuilt_with_with_inputs():
    a, b = param(core.f32, (3,)), param(core.f32, (3,))
    c = param(core.f32, (4,))
    s = core.Add(a, b, name="s")
    with pytest.raises(AttributeError, match="immutable"):
        s.inputs = (b, a)
    with pytest.raises(AttributeError):
        s.shape = core.Shape(1)
    assert s.with_inputs([a, b]) is s
    swapped = s.with_inputs([b, a])
    assert swapped is not s and swapped.inputs == (b, a) and swapped.name == "s"
    assert swapped.location == s.location and type(swapped) is core.Add
    with pytest.raises(ShapeError):
        s.with_inputs([a, c])  # re-checked exactly like construction
    r = core.Sum(core.Reshape(a, (3, 1)), (1,))
    assert r.with_inputs([core.Reshape(b, (3, 1))]).axes == (1,)


def test_node_name_must_be_a_string():
    with pytest.raises(GraphError, match="non-empty string"):
        core.Parameter(core.f32, (2,), name="")


def test_node_fields():
    a = param(core.i32, (N, 2), name="a")
    line = here(); t = core.Negative(a)  # noqa: E702
    assert t.inputs == (a,) and t.element_type is core.i32 and t.shape == (N, 2)
    assert t.location == (__file__, line)
    assert t.op == "Negative" and t.name.startswith("Negative_") and not t.has_user_name
    assert a.name == "a" and a.has_user_name
    assert repr(t) == f"<Negative {t.name}: i32[N, 2]>"


def test_at_location_overrides_recorded_line():
    a = param(core.f32, (2,))
    with core.at_location(("model.py", 7)):
        t = core.Exp(a)
        with pytest.raises(DTypeError) as info:
            core.Add(t, param(core.i32, (2,)))
    assert t.location == ("model.py", 7) and info.value.location == ("model.py", 7)
    assert core.Exp(a).location[0] == __file__


# -- elementwise -------------------------------------------------------------------------------

UNARY_CASES = [
    (core.Negative, core.f32, lambda x: -x),
    (core.Negative, core.i32, lambda x: -x),
    (core.Abs, core.f64, np.abs),
    (core.Abs, core.i8, np.abs),
    (core.Sign, core.f32, np.sign),
    (core.Sqrt, core.f32, lambda x: np.sqrt(np.abs(x))),
    (core.Exp, core.f64, np.exp),
    (core.Log, core.f32, lambda x: np.log(np.abs(x))),
    (core.Tanh, core.f32, np.tanh),
    (core.Sigmoid, core.f64, lambda x: 1 / (1 + np.exp(-x))),
    (core.Sin, core.f16, np.sin),
    (core.Cos, core.f32, np.cos),
    (core.Not, core.boolean, np.logical_not),
]


def _data(et, shape, rng, positive=False):
    if et.is_boolean:
        return rng.random(shape) < 0.5
    if et.is_integral:
        low = 1 if positive else (-5 if et.is_signed else 0)
        return rng.integers(low, 6, shape).astype(et.dtype)
    values = rng.standard_normal(shape)
    return (np.abs(values) + 0.5 if positive else values).astype(et.dtype)


@pytest.mark.parametrize("op, et, reference", UNARY_CASES,
                         ids=[f"{c[0].__name__}-{c[1]}" for c in UNARY_CASES])
def test_unary(op, et, reference, rng):
    x = _data(et, (3, 4), rng, positive=op in (core.Sqrt, core.Log))
    a = param(et, (3, 4))
    (result,) = run(op(a), [a], x)
    assert result.dtype == et.dtype and result.shape == (3, 4)
    expected = reference(x.astype(np.float64) if et.is_float else x)
    np.testing.assert_allclose(result.astype(np.float64), expected,
                               rtol=2e-3 if et is core.f16 else 1e-6)


BINARY_CASES = [
    (core.Add, core.f32, np.add), (core.Add, core.u8, lambda a, b: (a + b).astype(np.uint8)),
    (core.Subtract, core.i64, np.subtract), (core.Multiply, core.f64, np.multiply),
    (core.Divide, core.f32, np.divide),
    (core.Divide, core.i32, lambda a, b: np.trunc(a / b).astype(np.int32)),
    (core.Power, core.f64, lambda a, b: np.abs(a) ** b),
    (core.Maximum, core.i16, np.maximum), (core.Minimum, core.f32, np.minimum),
    (core.Equal, core.i32, np.equal), (core.NotEqual, core.f32, np.not_equal),
    (core.Less, core.f32, np.less), (core.LessEq, core.i8, np.less_equal),
    (core.Greater, core.u16, np.greater), (core.GreaterEq, core.f64, np.greater_equal),
    (core.Equal, core.boolean, np.equal),
    (core.And, core.boolean, np.logical_and), (core.Or, core.boolean, np.logical_or),
]


@pytest.mark.parametrize("op, et, reference", BINARY_CASES,
                         ids=[f"{c[0].__name__}-{c[1]}" for c in BINARY_CASES])
def test_binary(op, et, reference, rng):
    x = _data(et, (2, 5), rng, positive=op is core.Power)
    y = _data(et, (2, 5), rng, positive=op is core.Divide)
    if op is core.Divide and et.is_integral:
        y = y * np.where(rng.random((2, 5)) < 0.5, -1, 1).astype(et.dtype)  # mixed signs
    a, b = param(et, (2, 5)), param(et, (2, 5))
    node = op(a, b)
    (result,) = run(node, [a, b], x, y)
    is_comparison = issubclass(op, core.Comparison)
    assert node.element_type is (core.boolean if is_comparison else et)
    assert result.dtype == node.element_type.dtype
    np.testing.assert_allclose(result, reference(x, y), rtol=1e-6)


def test_integer_division_truncates_and_refuses_zero():
    a, b = param(core.i32, (4,)), param(core.i32, (4,))
    x = np.array([7, -7, 7, -7], np.int32)
    y = np.array([2, 2, -2, -2], np.int32)
    (result,) = run(core.Divide(a, b), [a, b], x, y)
    assert result.tolist() == [3, -3, -3, 3]
    with pytest.raises(ExecutionError, match="Divide.*division by zero"):
        run(core.Divide(a, b), [a, b], x, np.zeros(4, np.int32))


@pytest.mark.parametrize("op, et", [
    (core.Exp, core.i32), (core.Sqrt, core.boolean), (core.Negative, core.boolean),
    (core.Not, core.f32), (core.Add, core.boolean), (core.And, core.i32),
    (core.Softmax, core.i32),
])
def test_element_type_categories(op, et):
    a = param(et, (3,))
    with pytest.raises(DTypeError, match=op.__name__):
        op(a, (0,)) if op is core.Softmax else (op(a) if issubclass(op, core.UnaryElementwise)
                                               else op(a, a))


def test_select(rng):
    c, a, b = param(core.boolean, (3, 2)), param(core.f32, (3, 2)), param(core.f32, (3, 2))
    cond, x, y = rng.random((3, 2)) < 0.5, _data(core.f32, (3, 2), rng), _data(core.f32, (3, 2), rng)
    (result,) = run(core.Select(c, a, b), [c, a, b], cond, x, y)
    np.testing.assert_array_equal(result, [[x[i, j] if cond[i, j] else y[i, j] for j in range(2)]
                                           for i in range(3)])
    with pytest.raises(DTypeError, match="condition"):
        core.Select(a, a, b)
    with pytest.raises(ShapeError):
        core.Select(param(core.boolean, (2, 3)), a, b)


def test_convert():
    a = param(core.f32, (4,))
    node = core.Convert(a, core.i32)
    (result,) = run(node, [a], np.array([1.7, -1.7, 0.2, 3.0], np.float32))
    assert node.element_type is core.i32 and result.tolist() == [1, -1, 0, 3]
    b = param(core.i64, (2,))
    (flags,) = run(core.Convert(b, core.boolean), [b], np.array([0, 5]))
    assert flags.tolist() == [False, True]


# -- leaves ------------------------------------------------------------------------------------

def test_constant():
    value = [[1, 2], [3, 4]]
    c = core.Constant(core.f32, (2, 2), value)
    a = param(core.f32, (2, 2))
    (result,) = run(core.Add(a, c), [a], np.ones((2, 2), np.float32))
    np.testing.assert_array_equal(result, [[2, 3], [4, 5]])
    fill = core.Constant(core.i32, (N, 3), 7)
    p = param(core.i32, (N, 3))
    (result,) = run(core.Add(p, fill), [p], np.zeros((2, 3), np.int32))
    assert result.tolist() == [[7, 7, 7]] * 2
    with pytest.raises(ValueError):
        c.value[0, 0] = 9  # constants are immutable too
    with pytest.raises(DTypeError, match="not all representable in i32"):
        core.Constant(core.i32, (), 1.5)
    with pytest.raises(DTypeError):
        core.Constant(core.u8, (), 300)
    with pytest.raises(DTypeError):
        core.Constant(core.boolean, (), 1)
    with pytest.raises(ShapeError, match=r"value has shape \[3\]"):
        core.Constant(core.f32, (2,), [1, 2, 3])


def test_dim_value_computes_a_mean_over_a_symbolic_batch(rng):
    x = param(core.f32, (N, 3))
    count = core.Convert(core.Broadcast(core.DimValue(N), (3,), (0,)), core.f32)
    mean = core.Divide(core.Sum(x, (0,)), count)
    data = rng.standard_normal((5, 3)).astype(np.float32)
    (result,) = run(mean, [x], data)
    np.testing.assert_allclose(result, data.mean(axis=0), rtol=1e-5)
    (size,) = run(core.DimValue(2 * N + 1, core.i32), [x], data)
    assert size.dtype == np.int32 and size == 11


def test_random_draws():
    shape = (200, 50)
    uniform = core.RandomUniform(core.f32, shape, -2.0, 3.0, seed=5)
    normal = core.RandomNormal(core.f64, shape, 1.0, 0.5, seed=5)
    fn = core.compile(core.Function([uniform, normal], []))
    u1, n1 = fn()
    u2, _ = fn()
    assert u1.dtype == np.float32 and u1.min() >= -2 and u1.max() < 3
    assert abs(u1.mean() - 0.5) < 0.05 and abs(n1.mean() - 1) < 0.02 and abs(n1.std() - 0.5) < 0.02
    assert not np.array_equal(u1, u2)  # a fresh draw per call
    again, _ = core.compile(core.Function([uniform, normal], []))()
    np.testing.assert_array_equal(u1, again)  # the same seed repeats the sequence
    with pytest.raises(DTypeError):
        core.RandomUniform(core.i32, (2,))
    with pytest.raises(ShapeError, match="low"):
        core.RandomUniform(core.f32, (2,), 1.0, 0.0)


# -- data movement -----------------------------------------------------------------------------

def test_broadcast(rng):
    a = param(core.f32, (3,))
    x = _data(core.f32, (3,), rng)
    (result,) = run(core.Broadcast(a, (2, 3, 4), (0, 2)), [a], x)
    expected = np.empty((2, 3, 4), np.float32)
    for i, j, k in itertools.product(range(2), range(3), range(4)):
        expected[i, j, k] = x[j]
    np.testing.assert_array_equal(result, expected)
    with pytest.raises(ShapeError, match="Broadcast.*remaining dims"):
        core.Broadcast(a, (3, 4), (0,))
    with pytest.raises(ShapeError, match="outside"):
        core.Broadcast(a, (3, 4), (2,))


def test_reshape(rng):
    a = param(core.i32, (2, 6))
    x = np.arange(12, dtype=np.int32).reshape(2, 6)
    (result,) = run(core.Reshape(a, (3, 2, 2)), [a], x)
    assert result.ravel().tolist() == list(range(12)) and result.shape == (3, 2, 2)
    with pytest.raises(ShapeError, match="12 elements.*10 elements"):
        core.Reshape(a, (5, 2))
    b = param(core.f32, (N, 6))
    assert core.Reshape(b, (N, 2, 3)).shape == (N, 2, 3)
    assert core.Reshape(b, (2 * N, 3)).shape == (2 * N, 3)
    with pytest.raises(ShapeError):
        core.Reshape(b, (N, 5))


def test_transpose(rng):
    a = param(core.f64, (2, 3, 4))
    x = _data(core.f64, (2, 3, 4), rng)
    (result,) = run(core.Transpose(a, (2, 0, 1)), [a], x)
    assert result.shape == (4, 2, 3)
    for i, j, k in itertools.product(range(2), range(3), range(4)):
        assert result[k, i, j] == x[i, j, k]
    for bad in [(0, 1), (0, 1, 1), (0, 1, 3)]:
        with pytest.raises(ShapeError, match="Transpose"):
            core.Transpose(a, bad)


def test_slice(rng):
    a = param(core.f32, (6, 7))
    x = _data(core.f32, (6, 7), rng)
    node = core.Slice(a, (1, 0), (6, 7), (2, 3))
    (result,) = run(node, [a], x)
    assert node.shape == (3, 3)
    np.testing.assert_array_equal(result, [[x[i, j] for j in (0, 3, 6)] for i in (1, 3, 5)])
    with pytest.raises(ShapeError, match="past the end"):
        core.Slice(a, (0, 0), (7, 7))
    with pytest.raises(ShapeError, match="below lower"):
        core.Slice(a, (3, 0), (2, 7))
    with pytest.raises(ShapeError, match="strides"):
        core.Slice(a, (0, 0), (6, 7), (0, 1))


def test_symbolic_slice_is_checked_at_call_time(rng):
    a = param(core.f32, (N,))
    node = core.Slice(a, (1,), (N - 1,))
    assert node.shape == (N - 2,)
    x = _data(core.f32, (5,), rng)
    (result,) = run(node, [a], x)
    np.testing.assert_array_equal(result, x[1:4])
    with pytest.raises(ExecutionError, match="Slice"):
        run(node, [a], x[:1])


def test_reverse(rng):
    a = param(core.i64, (2, 3))
    x = np.arange(6).reshape(2, 3)
    (result,) = run(core.Reverse(a, (1,)), [a], x)
    assert result.tolist() == [[2, 1, 0], [5, 4, 3]]
    (same,) = run(core.Reverse(a, ()), [a], x)
    assert same.tolist() == x.tolist()


def test_concat(rng):
    a, b = param(core.f32, (2, 3)), param(core.f32, (4, 3))
    x, y = _data(core.f32, (2, 3), rng), _data(core.f32, (4, 3), rng)
    (result,) = run(core.Concat([a, b], 0), [a, b], x, y)
    assert result.tolist() == x.tolist() + y.tolist()
    with pytest.raises(ShapeError, match="Concat"):
        core.Concat([a, b], 1)
    with pytest.raises(DTypeError):
        core.Concat([a, param(core.f64, (2, 3))], 0)
    with pytest.raises(GraphError):
        core.Concat([], 0)
    with pytest.raises(GraphError):
        core.Concat(a, 0)
    p, q = param(core.f32, (N, 3)), param(core.f32, (M, 3))
    assert core.Concat([p, q, p], 0).shape == (2 * N + M, 3)


def test_pad():
    a = param(core.i32, (2, 3))
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    node = core.Pad(a, (1, 0), (0, 2), (0, 1), value=-1)
    (result,) = run(node, [a], x)
    assert node.shape == (3, 3 + 2 + 2)
    assert result.tolist() == [[-1] * 7,
                               [1, -1, 2, -1, 3, -1, -1],
                               [4, -1, 5, -1, 6, -1, -1]]
    with pytest.raises(DTypeError):
        core.Pad(a, (0, 0), (0, 0), value=0.5)
    with pytest.raises(ShapeError):
        core.Pad(a, (0,), (0, 0))


# -- contraction and reductions ----------------------------------------------------------------

def test_dot_matrix_product_by_default(rng):
    a, b = param(core.f32, (3, 4)), param(core.f32, (4, 5))
    x, y = _data(core.f32, (3, 4), rng), _data(core.f32, (4, 5), rng)
    (result,) = run(core.Dot(a, b), [a, b], x, y)
    expected = [[sum(float(x[i, k]) * float(y[k, j]) for k in range(4)) for j in range(5)]
                for i in range(3)]
    np.testing.assert_allclose(result, expected, rtol=1e-5)


def test_dot_general_contraction(rng):
    a, b = param(core.f64, (2, 3, 4)), param(core.f64, (4, 5, 2))
    x, y = _data(core.f64, (2, 3, 4), rng), _data(core.f64, (4, 5, 2), rng)
    node = core.Dot(a, b, contract_a=(0, 2), contract_b=(2, 0))
    assert node.shape == (3, 5)
    (result,) = run(node, [a, b], x, y)
    np.testing.assert_allclose(result, np.einsum("ajk,kla->jl", x, y), rtol=1e-12)
    s = param(core.f64, ())
    outer = core.Dot(s, a)
    assert outer.shape == (2, 3, 4)
    (scaled,) = run(outer, [s, a], np.float64(2.0), x)
    np.testing.assert_allclose(scaled, 2 * x)


def test_dot_checks(rng):
    a, b = param(core.f32, (3, 4)), param(core.f32, (5, 4))
    with pytest.raises(ShapeError, match="Dot: contracted dims differ"):
        core.Dot(a, b)
    with pytest.raises(ShapeError, match="one to one"):
        core.Dot(a, b, (1,), (0, 1))
    with pytest.raises(ShapeError, match="both"):
        core.Dot(a, b, (1,))
    assert core.Dot(a, b, (1,), (1,)).shape == (3, 5)
    p, q = param(core.f32, (N, 4)), param(core.f32, (4, M))
    assert core.Dot(p, q).shape == (N, M)
    with pytest.raises(ShapeError):
        core.Dot(q, p)  # M vs N: different variables


@pytest.mark.parametrize("op, reference", [
    (core.Sum, np.sum), (core.Prod, np.prod), (core.Max, np.max), (core.Min, np.min)])
def test_reductions(op, reference, rng):
    a = param(core.f64, (2, 3, 4))
    x = _data(core.f64, (2, 3, 4), rng)
    for axes in [(), (1,), (0, 2), (0, 1, 2)]:
        node = op(a, axes)
        (result,) = run(node, [a], x)
        assert node.shape == tuple(d for i, d in enumerate((2, 3, 4)) if i not in axes)
        np.testing.assert_allclose(result, reference(x, axis=axes) if axes else x)


def test_integer_sum_keeps_element_type():
    a = param(core.i8, (4,))
    (result,) = run(core.Sum(a, (0,)), [a], np.array([100, 100, -50, 1], np.int8))
    assert result.dtype == np.int8


def test_max_over_empty_dim_fails_at_run_time():
    a = param(core.f32, (N, 2))
    with pytest.raises(ExecutionError, match="Max"):
        run(core.Max(a, (0,)), [a], np.zeros((0, 2), np.float32))
    (total,) = run(core.Sum(a, (0,)), [a], np.zeros((0, 2), np.float32))
    assert total.tolist() == [0, 0]


def test_arg_reductions(rng):
    a = param(core.f32, (3, 4, 5))
    x = _data(core.f32, (3, 4, 5), rng)
    (result,) = run(core.ArgMax(a, (1,)), [a], x)
    assert result.dtype == np.int64
    np.testing.assert_array_equal(result, [[max(range(4), key=lambda j: x[i, j, k])
                                            for k in range(5)] for i in range(3)])
    node = core.ArgMin(a, (2, 0), core.i32)
    (result,) = run(node, [a], x)
    assert node.shape == (4,) and result.dtype == np.int32
    for j in range(4):
        flat = [x[i, j, k] for k in range(5) for i in range(3)]  # row-major over (2, 0)
        assert result[j] == int(np.argmin(flat))
    with pytest.raises(ShapeError):
        core.ArgMax(a, ())
    with pytest.raises(DTypeError):
        core.ArgMax(a, (0,), core.f32)


def test_softmax(rng):
    a = param(core.f32, (2, 5))
    x = _data(core.f32, (2, 5), rng) * 30
    (result,) = run(core.Softmax(a, (1,)), [a], x)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(result, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-30)
    with pytest.raises(ShapeError):
        core.Softmax(a, ())


# -- windows -------------------------------------------------------------------------------------

def _conv_reference(x, w, strides, dilation, below, above):
    """Direct loops, 2-d: out[n, k, p, q] = sum x_padded[n, c, p*s + r*d, q*s + t*d] w[k, c, r, t]."""
    xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(below, above)))
    n_, c_, h, wd = xp.shape
    k_, _, r_, t_ = w.shape
    out_h = (h - (dilation[0] * (r_ - 1) + 1)) // strides[0] + 1
    out_w = (wd - (dilation[1] * (t_ - 1) + 1)) // strides[1] + 1
    out = np.zeros((n_, k_, out_h, out_w))
    for n, k, p, q in itertools.product(range(n_), range(k_), range(out_h), range(out_w)):
        for c, r, t in itertools.product(range(c_), range(r_), range(t_)):
            out[n, k, p, q] += (xp[n, c, p * strides[0] + r * dilation[0],
                                   q * strides[1] + t * dilation[1]] * w[k, c, r, t])
    return out


GEOMETRIES = [((1, 1), (1, 1), (0, 0), (0, 0)), ((2, 1), (1, 2), (1, 0), (2, 1)),
              ((2, 3), (2, 1), (0, 1), (1, 0))]


@pytest.mark.parametrize("strides, dilation, below, above", GEOMETRIES)
def test_convolution_and_its_adjoints(strides, dilation, below, above, rng):
    x = rng.standard_normal((2, 3, 7, 6))
    w = rng.standard_normal((4, 3, 3, 2))
    data, filters = param(core.f64, x.shape), param(core.f64, w.shape)
    geometry = dict(strides=strides, dilation=dilation, padding_below=below, padding_above=above)
    conv = core.Convolution(data, filters, **geometry)
    expected = _conv_reference(x, w, strides, dilation, below, above)
    assert conv.shape == expected.shape
    (result,) = run(conv, [data, filters], x, w)
    np.testing.assert_allclose(result, expected, rtol=1e-10)

    # the adjoints are the transposes of the linear maps x -> conv and w -> conv:
    # <conv(x, w), delta> == <x, dx(delta)> == <w, dw(delta)>
    delta_value = rng.standard_normal(expected.shape)
    delta = param(core.f64, expected.shape)
    dx = core.ConvolutionBackpropData(x.shape, filters, delta, **geometry)
    dw = core.ConvolutionBackpropFilters(data, w.shape, delta, **geometry)
    gx, gw = run([dx, dw], [data, filters, delta], x, w, delta_value)
    inner = float(np.sum(expected * delta_value))
    assert np.isclose(np.sum(x * gx), inner) and np.isclose(np.sum(w * gw), inner)
    assert gx.shape == x.shape and gw.shape == w.shape


def test_convolution_checks():
    data = param(core.f32, (1, 3, 5, 5))
    with pytest.raises(ShapeError, match="channels differ"):
        core.Convolution(data, param(core.f32, (2, 4, 3, 3)))
    with pytest.raises(ShapeError, match="window spans 7"):
        core.Convolution(data, param(core.f32, (2, 3, 7, 1)))
    with pytest.raises(ShapeError, match="strides"):
        core.Convolution(data, param(core.f32, (2, 3, 3, 3)), strides=(1,))
    with pytest.raises(ShapeError, match="delta"):
        core.ConvolutionBackpropData((1, 3, 5, 5), param(core.f32, (2, 3, 3, 3)),
                                     param(core.f32, (1, 2, 4, 4)))
    batch = param(core.f32, (N, 3, 5, 5))
    assert core.Convolution(batch, param(core.f32, (2, 3, 3, 3)), strides=(2, 2)).shape == (N, 2, 2, 2)
    sized = param(core.f32, (1, 3, M, 4))
    assert core.Convolution(sized, param(core.f32, (2, 3, 3, 3))).shape == (1, 2, M - 2, 2)


def _pool_reference(x, window, strides, below, above, kind):
    n_, c_, h, w = x.shape
    out_h = (h + below[0] + above[0] - window[0]) // strides[0] + 1
    out_w = (w + below[1] + above[1] - window[1]) // strides[1] + 1
    out = np.zeros((n_, c_, out_h, out_w))
    for n, c, p, q in itertools.product(range(n_), range(c_), range(out_h), range(out_w)):
        values = [x[n, c, i, j]
                  for i in range(p * strides[0] - below[0], p * strides[0] - below[0] + window[0])
                  for j in range(q * strides[1] - below[1], q * strides[1] - below[1] + window[1])
                  if 0 <= i < h and 0 <= j < w]
        out[n, c, p, q] = max(values) if kind == "max" else sum(values) / len(values)
    return out


@pytest.mark.parametrize("window, strides, below, above", [
    ((2, 2), (2, 2), (0, 0), (0, 0)), ((3, 2), (1, 2), (1, 0), (2, 1))])
def test_pooling(window, strides, below, above, rng):
    x = rng.standard_normal((2, 2, 5, 6))
    a = param(core.f64, x.shape)
    geometry = dict(strides=strides, padding_below=below, padding_above=above)
    for op, kind in [(core.MaxPool, "max"), (core.AvgPool, "avg")]:
        node = op(a, window, **geometry)
        (result,) = run(node, [a], x)
        np.testing.assert_allclose(result, _pool_reference(x, window, strides, below, above, kind))

    # adjoints: numeric derivative of <pool(x), delta> along a random direction
    out_shape = core.MaxPool(a, window, **geometry).shape
    delta_value, direction = rng.standard_normal(out_shape), rng.standard_normal(x.shape)
    delta = param(core.f64, out_shape)
    max_grad = core.MaxPoolBackprop(a, delta, window, **geometry)
    avg_grad = core.AvgPoolBackprop(x.shape, delta, window, **geometry)
    gmax, gavg = run([max_grad, avg_grad], [a, delta], x, delta_value)
    for gradient, kind in [(gmax, "max"), (gavg, "avg")]:
        eps = 1e-6
        plus = _pool_reference(x + eps * direction, window, strides, below, above, kind)
        minus = _pool_reference(x - eps * direction, window, strides, below, above, kind)
        numeric = np.sum((plus - minus) * delta_value) / (2 * eps)
        assert np.isclose(np.sum(gradient * direction), numeric, rtol=1e-5)


def test_pooling_checks():
    a = param(core.f32, (1, 1, 4, 4))
    with pytest.raises(ShapeError, match="smaller than the window"):
        core.MaxPool(a, (2, 2), padding_below=(2, 0))
    with pytest.raises(ShapeError, match="window"):
        core.MaxPool(a, (2,))
    with pytest.raises(DTypeError):
        core.AvgPool(param(core.i32, (1, 1, 4, 4)), (2, 2))
    with pytest.raises(ShapeError, match="N, C, spatial"):
        core.MaxPool(param(core.f32, (4, 4)), (2,))
    ints = param(core.i32, (1, 1, 3, 3))
    (result,) = run(core.MaxPool(ints, (2, 2), (2, 2), padding_below=(1, 1)), [ints],
                    -np.arange(9, dtype=np.int32).reshape(1, 1, 3, 3) - 1)
    assert result[0, 0].tolist() == [[-1, -2], [-4, -5]]  # padding never wins


# -- indexing ----------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_gather_is_a_lookup_table(rng, backend):
    table = param(core.f32, (5, 3))
    ids = param(core.i32, (2, 4))
    t, i = _data(core.f32, (5, 3), rng), rng.integers(0, 5, (2, 4)).astype(np.int32)
    node = core.Gather(table, ids)
    assert node.shape == (2, 4, 3)
    columns = core.Gather(table, core.Subtract(ids, core.Constant(core.i32, (2, 4), 2)), axis=1)
    assert columns.shape == (5, 2, 4)
    compiled = core.compile(core.Function([node, columns], [table, ids]), backend)
    i[i > 4] = 4  # within both tables: rows 0..4, and columns 0..2 after subtracting 2
    i[i < 2] = 2
    result, by_column = compiled(t, i)
    for a, b in itertools.product(range(2), range(4)):
        np.testing.assert_array_equal(result[a, b], t[i[a, b]])
        np.testing.assert_array_equal(by_column[:, a, b], t[:, i[a, b] - 2])
    with pytest.raises(ExecutionError, match=r"Gather.*\[0, 5\)"):
        compiled(t, np.full((2, 4), 5, np.int32))
    with pytest.raises(DTypeError, match="indices"):
        core.Gather(table, param(core.f32, (2,)))


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_scatter_add_accumulates_repeats(rng, backend):
    base, ids, upd = param(core.f64, (4, 2)), param(core.i64, (3,)), param(core.f64, (3, 2))
    b, u = _data(core.f64, (4, 2), rng), _data(core.f64, (3, 2), rng)
    i = np.array([1, 3, 1])
    twice = core.Multiply(base, core.Constant(core.f64, (4, 2), 2.0))  # a planned buffer
    compiled = core.compile(core.Function([core.ScatterAdd(twice, ids, upd)], [base, ids, upd]),
                            backend)
    expected = 2 * b
    for row, index in enumerate(i):
        expected[index] += u[row]
    for _ in range(2):  # the second call starts again from the inputs
        (result,) = compiled(b, i, u)
        np.testing.assert_allclose(result, expected)
    with pytest.raises(ExecutionError, match=r"ScatterAdd.*\[0, 4\)") as raised:
        compiled(b, np.array([0, 4, 1]), u)
    assert "test_core.py" in str(raised.value)  # the line that built the op
    with pytest.raises(ShapeError, match="updates"):
        core.ScatterAdd(base, ids, param(core.f64, (2, 2)))
    inner = core.ScatterAdd(param(core.f64, (2, 5)), param(core.i32, (3,)), param(core.f64, (2, 3)),
                            axis=1)
    assert inner.shape == (2, 5)


def test_one_hot():
    labels = param(core.i32, (3,))
    node = core.OneHot(labels, (3, 4), 1)
    (result,) = run(node, [labels], np.array([0, 3, 1], np.int32))
    assert result.dtype == np.int32
    assert result.tolist() == [[1, 0, 0, 0], [0, 0, 0, 1], [0, 1, 0, 0]]
    (columns,) = run(core.OneHot(labels, (2, 3), 0), [labels], np.array([0, 1, 1], np.int32))
    assert columns.tolist() == [[1, 0, 0], [0, 1, 1]]
    with pytest.raises(ExecutionError, match="OneHot"):
        run(node, [labels], np.array([0, 4, 1], np.int32))
    float_labels = param(core.f32, (3,))
    (floats,) = run(core.OneHot(float_labels, (3, 4), 1), [float_labels],
                    np.array([2.0, 0.0, 3.0], np.float32))
    assert floats.tolist() == [[0, 0, 1, 0], [1, 0, 0, 0], [0, 0, 0, 1]]
    with pytest.raises(ExecutionError, match="whole numbers"):
        run(core.OneHot(float_labels, (3, 4), 1), [float_labels], np.array([0.5, 0, 1], np.float32))
    with pytest.raises(DTypeError):
        core.OneHot(param(core.boolean, (3,)), (3, 4), 1)
    with pytest.raises(ShapeError):
        core.OneHot(labels, (4, 4), 1)


# -- Function rules ----------------------------------------------------------------------------

def test_function_rejects_duplicate_parameter():
    a = param(core.f32, (2,))
    with pytest.raises(GraphError, match="appears twice") as info:
        line = here(); core.Function([a], [a, a])  # noqa: E702
    assert info.value.location == (__file__, line)


def test_function_rejects_unlisted_parameter():
    a, b = param(core.f32, (2,), "a"), param(core.f32, (2,), "b")
    with pytest.raises(GraphError, match="parameter b .*not in parameters"):
        core.Function([core.Add(a, b)], [a])


def test_function_rejects_non_parameters_and_non_nodes():
    a = param(core.f32, (2,))
    with pytest.raises(GraphError, match="not a Parameter"):
        core.Function([a], [core.Negative(a)])
    with pytest.raises(GraphError, match="not a core node"):
        core.Function([1.0], [a])
    with pytest.raises(GraphError, match="at least one result"):
        core.Function([], [a])


def test_function_rejects_unbindable_size_variable():
    a = param(core.f32, (N,))
    with pytest.raises(ShapeError, match="M"):
        core.Function([core.Broadcast(a, (M, N), (0,))], [a])


def test_function_nodes_are_topological():
    a, b = param(core.f32, (2,)), param(core.f32, (2,))
    unused = param(core.f32, (3,))
    s = core.Add(a, b)
    t = core.Multiply(s, s)
    u = core.Subtract(t, a)
    f = core.Function([u, s], [a, b, unused])
    nodes = list(f.nodes)
    assert nodes[:3] == [a, b, unused]
    for node in nodes:
        assert all(nodes.index(i) < nodes.index(node) for i in node.inputs)
    assert f.users()[s] == [t]


def test_deep_graph_does_not_recurse():
    a = param(core.f32, (1,))
    x = a
    for _ in range(3000):
        x = core.Negative(x)
    (result,) = run(x, [a], np.ones(1, np.float32))
    assert result[0] == 1


# -- calling: arguments and results ----------------------------------------------------------------

@pytest.fixture
def axpy():
    a, x, y = param(core.f32, ()), param(core.f32, (3,), "x"), param(core.f32, (3,), "y")
    scaled = core.Multiply(core.Broadcast(a, (3,), (0,)), x)
    f = core.Function([core.Add(scaled, y), scaled], [a, x, y], name="axpy")
    return core.compile(f)


def test_results_are_fresh_arrays(axpy):
    x = np.arange(3, dtype=np.float32)
    y = np.ones(3, np.float32)
    first, second = axpy(np.float32(2), x, y)
    assert first.tolist() == [1, 3, 5] and second.tolist() == [0, 2, 4]
    assert not np.shares_memory(first, x) and not np.shares_memory(first, second)


def test_same_array_for_several_arguments():
    a, b = param(core.f32, (2,)), param(core.f32, (2,))
    x = np.array([1, 2], np.float32)
    (result,) = run(core.Add(a, b), [a, b], x, x)
    assert result.tolist() == [2, 4]


def test_result_that_is_a_parameter_is_copied():
    a = param(core.f32, (2,))
    x = np.array([1, 2], np.float32)
    first, second = run([a, a], [a], x)
    assert first.tolist() == [1, 2] and first is not x and first is not second


def test_argument_checks(axpy):
    x, y = np.zeros(3, np.float32), np.zeros(3, np.float32)
    with pytest.raises(FeedError, match="takes 3 argument"):
        axpy(x, y)
    with pytest.raises(FeedError, match=r"parameter 1 \(x: f32\[3\]\) takes f32\[3\]; got float64"):
        axpy(np.float32(1), np.zeros(3), y)
    with pytest.raises(FeedError, match="rank"):
        axpy(np.float32(1), np.zeros((3, 1), np.float32), y)
    with pytest.raises(FeedError, match="dims differ: 3 vs 4"):
        axpy(np.float32(1), np.zeros(4, np.float32), y)
    with pytest.raises(FeedError, match="NumPy array"):
        axpy(1.0, x, y)


def test_out_arrays_receive_results(axpy):
    x, y = np.arange(3, dtype=np.float32), np.ones(3, np.float32)
    out = (np.empty(3, np.float32), np.empty(3, np.float32))
    returned = axpy(np.float32(2), x, y, out=out)
    assert returned[0] is out[0] and returned[1] is out[1]
    assert out[0].tolist() == [1, 3, 5] and out[1].tolist() == [0, 2, 4]
    a = param(core.f32, (2,))
    single = np.empty(2, np.float32)
    (result,) = run(core.Negative(a), [a], np.ones(2, np.float32), out=single)
    assert result is single and single.tolist() == [-1, -1]


def test_out_rules(axpy):
    x, y = np.arange(3, dtype=np.float32), np.ones(3, np.float32)
    two = np.float32(2)
    good = np.empty(3, np.float32)
    with pytest.raises(FeedError, match="argument arrays cannot be used as result arrays"):
        axpy(two, x, y, out=(y, good))
    with pytest.raises(FeedError, match="overlaps"):
        axpy(two, x, y, out=(good, x[:]))
    shared = np.empty(3, np.float32)
    with pytest.raises(FeedError, match="distinct"):
        axpy(two, x, y, out=(shared, shared))
    with pytest.raises(FeedError, match=r"out\[1\] is float64\[3\]"):
        axpy(two, x, y, out=(good, np.empty(3)))
    with pytest.raises(FeedError, match=r"out\[0\] is float32\[4\]"):
        axpy(two, x, y, out=(np.empty(4, np.float32), good))
    with pytest.raises(FeedError, match="2 result"):
        axpy(two, x, y, out=(good,))
    readonly = np.empty(3, np.float32)
    readonly.setflags(write=False)
    with pytest.raises(FeedError, match="read-only"):
        axpy(two, x, y, out=(good, readonly))
    before = y.copy()
    assert np.array_equal(y, before)  # nothing was written by the failed calls


# -- symbolic dims at call time --------------------------------------------------------------------

def test_batch_dim_bound_per_call(rng):
    x = param(core.f32, (N, 4), "x")
    w = param(core.f32, (4, 2), "w")
    fn = core.compile(core.Function([core.Dot(x, w)], [x, w]))
    weights = _data(core.f32, (4, 2), rng)
    for batch in (1, 3, 0):
        data = _data(core.f32, (batch, 4), rng)
        (result,) = fn(data, weights)
        assert result.shape == (batch, 2)
        np.testing.assert_allclose(result, data @ weights, rtol=1e-5)


def test_inconsistent_size_variable_is_a_feed_error():
    a, b = param(core.f32, (N, 2), "a"), param(core.f32, (N, 2), "b")
    fn = core.compile(core.Function([core.Add(a, b)], [a, b]))
    with pytest.raises(FeedError, match=r"parameter 1 \(b: f32\[N, 2\]\) takes f32\[N, 2\]; got "
                                        r"shape \(5, 2\): dim 0: dims differ: N vs 5 "
                                        r"\(with N = 4\)"):
        fn(np.zeros((4, 2), np.float32), np.zeros((5, 2), np.float32))


def test_function_bind_unifies_parameter_shapes_with_the_given_shapes():
    a, b = param(core.f32, (2 * N + 1, 3), "a"), param(core.f32, (N,), "b")
    f = core.Function([core.Add(core.Slice(a, (0, 0), (N, 1)), core.Reshape(b, (N, 1)))],
                      [a, b], name="f")
    assert f.bind([(7, 3), (3,)]) == {"N": 3}
    assert core.Function([core.Negative(b)], [b]).bind([(0,)]) == {"N": 0}
    with pytest.raises(ShapeError) as info:
        f.bind([(7, 3), (4,)])
    assert info.value.message == ("parameter 1 (b: f32[N]) takes f32[N]; got shape (4,): dim 0: "
                                  "dims differ: N vs 4 (with N = 3)")
    assert "test_core.py" in str(info.value)
    with pytest.raises(ShapeError, match=r"parameter 0 \(a: f32\[2\*N \+ 1, 3\]\) .* dim 1: "
                                         r"dims differ: 3 vs 4"):
        f.bind([(7, 4), (3,)])
    with pytest.raises(ShapeError, match="f.bind: 2 parameter"):
        f.bind([(7, 3)])


def test_size_variable_solved_from_expression(rng):
    a = param(core.f32, (2 * N + 1,), "a")
    b = param(core.f32, (N,), "b")
    left = core.Slice(a, (0,), (N,))
    fn = core.compile(core.Function([core.Add(left, b)], [a, b]))
    x, y = _data(core.f32, (7,), rng), _data(core.f32, (3,), rng)
    (result,) = fn(x, y)
    np.testing.assert_allclose(result, x[:3] + y)
    with pytest.raises(FeedError, match="not a whole number"):
        fn(_data(core.f32, (6,), rng), y)


def test_negative_dim_at_call_time_is_an_error():
    a = param(core.f32, (N,))
    node = core.Slice(a, (2,), (N,))
    fn = core.compile(core.Function([node], [a]))
    with pytest.raises(ExecutionError, match=r"Slice.*N = 1"):
        fn(np.zeros(1, np.float32))


# -- printing and replace ---------------------------------------------------------------------------

def test_printing_shows_names_attributes_and_symbolic_shapes():
    x = param(core.f32, (N, 3), "x")
    w = param(core.f32, (3, 2), "w")
    h = core.Dot(x, w, name="h")
    s = core.Sum(h, (1,))
    c = core.Constant(core.f32, (N,), 0.5)
    out = core.Maximum(s, c)
    f = core.Function([out, h], [x, w], name="layer")
    assert str(f) == "\n".join([
        "layer(x, w):",
        "  x = Parameter() : f32[N, 3]",
        "  w = Parameter() : f32[3, 2]",
        "  h = Dot(x, w, contract_a=(1,), contract_b=(0,)) : f32[N, 2]",
        "  %0 = Sum(h, axes=(1,)) : f32[N]",
        "  %1 = Constant(value=0.5) : f32[N]",
        "  %2 = Maximum(%0, %1) : f32[N]",
        "  return %2, h",
    ])
    assert repr(f) == "<Function layer(f32[N, 3], f32[3, 2]) -> (f32[N], f32[N, 2]), 6 nodes>"


def test_replace_rebuilds_consumers_and_keeps_the_original(rng):
    a, b = param(core.f32, (3,)), param(core.f32, (3,))
    s = core.Add(a, b)
    t = core.Multiply(s, s)
    f = core.Function([t], [a, b])
    g = f.replace(s, core.Subtract(a, b))
    x, y = _data(core.f32, (3,), rng), _data(core.f32, (3,), rng)
    (before,) = core.compile(f)(x, y)
    (after,) = core.compile(g)(x, y)
    np.testing.assert_allclose(before, (x + y) ** 2, rtol=1e-6)
    np.testing.assert_allclose(after, (x - y) ** 2, rtol=1e-6)
    assert f.results == (t,) and g.results[0] is not t and type(g.results[0]) is core.Multiply
    assert g.parameters == (a, b)


def test_replace_may_wrap_the_replaced_node():
    a = param(core.f32, (2,))
    e = core.Exp(a)
    f = core.Function([core.Negative(e)], [a])
    g = f.replace(e, core.Log(e))  # uses of e inside the new node stay
    (result,) = core.compile(g)(np.array([1, 2], np.float32))
    np.testing.assert_allclose(result, [-1, -2], rtol=1e-6)


def test_replace_checks():
    a = param(core.f32, (2,))
    n = core.Negative(a)
    f = core.Function([n], [a])
    with pytest.raises(ShapeError):
        f.replace(n, core.Reshape(core.Broadcast(a, (2, 2), (0,)), (4,)))
    with pytest.raises(DTypeError):
        f.replace(n, core.Convert(a, core.f64))
    with pytest.raises(GraphError, match="not a node"):
        f.replace(core.Exp(a), n)
    with pytest.raises(GraphError, match="only be replaced by a Parameter"):
        f.replace(a, core.Exp(a))
    b = param(core.f32, (2,), "b")
    g = f.replace(a, b)
    assert g.parameters == (b,) and g.results[0].inputs == (b,)


# -- compile -----------------------------------------------------------------------------------------

def test_backend_registry(monkeypatch):
    monkeypatch.setattr(core.backend, "_BACKENDS", dict(core.backend._BACKENDS))  # undone after
    assert "interpreter" in core.backends()
    a = param(core.f32, (1,))
    f = core.Function([a], [a])
    with pytest.raises(ValueError, match="no core backend named 'nope'"):
        core.compile(f, backend="nope")
    calls = []

    class Recording(core.Backend):
        def compile(self, function, scale=1):
            calls.append((function, scale))
            return lambda *arrays, out=None, donate=None: arrays

    core.register_backend("recording", Recording)
    core.compile(f, backend="recording", scale=2)
    assert calls == [(f, 2)] and "recording" in core.backends()
    with pytest.raises(TypeError):
        core.compile(a)
    with pytest.raises(AxgraphTypeError, match="takes a Backend"):
        core.register_backend("plain function", lambda function: function)


def test_core_op_count_and_namespace():
    assert len(core.CORE_OPS) == len(set(core.CORE_OPS))
    for op in core.CORE_OPS:
        assert getattr(core, op.__name__) is op
        assert op.__doc__
