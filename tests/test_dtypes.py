"""Element types: every transformer gives NumPy's values and dtypes, and no warning.

Expected values are NumPy's, computed here on the same arrays, with the
documented departures (docs/dtypes.md): a float made from bools or integers is
float32, indices are int32. NumPy's refusals (``-mask``, ``mask - mask``) are DTypeErrors. Every
case runs on the reference, the interpreter, and the cpu backend unfused and
with every group fused (C where it applies, and blocked NumPy), with any
RuntimeWarning an error.

The elementwise ops tested are every one declared (`ng.op_graph.elementwise.OPS`), so a
new op is tested here with nothing added. An op named as a NumPy ufunc (ng.exp, ng.add)
is compared with that ufunc on the raw arrays; any other (sigmoid, erf, relu) with the
reference transformer's own NumPy expression, on the arrays converted as its declared
element rule says.
"""
from __future__ import annotations

import numpy as np
import pytest

import axgraph as ng
from axgraph import dtypes
from axgraph.op_graph import elementwise as ew
from axgraph.transformers import reference_kernels
from conftest import ENGINES

pytestmark = pytest.mark.filterwarnings("error")

DTYPES = [np.bool_, np.int8, np.int32, np.int64, np.uint8, np.float32, np.float64]
DTYPE_IDS = [np.dtype(d).name for d in DTYPES]
TRANSFORMERS = ENGINES
SHAPE = (3, 5)


@pytest.fixture(params=list(TRANSFORMERS))
def any_transformer(request):
    name, options = TRANSFORMERS[request.param]
    with ng.make_transformer(name, **options) as transformer:
        yield transformer


def _axes():
    return ng.make_axis(SHAPE[0], name="I"), ng.make_axis(SHAPE[1], name="J")


def sample(dtype, rng, shape=SHAPE) -> np.ndarray:
    """Small values with zeros (and negatives where the type has them)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind == "u":
        return rng.integers(0, 7, shape).astype(dtype)
    if dtype.kind == "i":
        return rng.integers(-6, 7, shape).astype(dtype)
    return (rng.standard_normal(shape) * 3).round(1).astype(dtype)


def numpy_value(function, *arrays):
    """NumPy's result, with float32 as the float of bools and integers (docs/dtypes.md)."""
    with np.errstate(all="ignore"):
        result = np.asarray(function(*arrays))
        if result.dtype.kind == "f" and not any(np.asarray(a).dtype.kind == "f" for a in arrays):
            result = np.asarray(function(*(np.float32(a) if np.isscalar(a)
                                           else np.asarray(a).astype(np.float32)
                                           for a in arrays)))
    return result


def check(got: np.ndarray, expected: np.ndarray, exact: bool = True) -> None:
    """Same dtype and shape; equal values (NaN equal to NaN), floats within a few ulps
    where the engines may round differently (libm vs vector math, sum orders)."""
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape
    if exact or expected.dtype.kind != "f":
        np.testing.assert_array_equal(got, expected)
    else:
        rtol = 1e-6 if expected.dtype == np.float32 else 1e-13
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=0, equal_nan=True)


# -- elementwise ---------------------------------------------------------------------------------

#: ng's departures from the NumPy ufunc of the same name (docs/dtypes.md).
NOT_NUMPY = {"reciprocal"}  # true division: NumPy's reciprocal of integers is integer


def numpy_meaning(op_class):
    """The NumPy function whose meaning `op_class` has, on the raw (unconverted) arrays:
    the ufunc of the op's name, or else the reference's expression (reference_kernels), on
    the arrays converted to the type the op's element rule gives (TypeError if the rule
    refuses them, as NumPy refuses ``-mask``)."""
    name = op_class.ng.name
    ufunc = getattr(np, name, None)
    if isinstance(ufunc, np.ufunc) and name not in NOT_NUMPY:
        return ufunc
    expression = reference_kernels.ELEMENTWISE.lookup(op_class)

    def by_rule(*arrays):
        common = np.result_type(*arrays)
        try:
            operand, result = op_class.rule.types(common)
        except ng.DTypeError as refused:
            raise TypeError(refused.message) from None
        return np.asarray(expression(*(np.asarray(a).astype(operand) for a in arrays)),
                          dtype=result)

    return by_rule


def declared(base):
    """ng name -> (its function, its NumPy meaning, exact on every engine) of every
    declared elementwise op of `base`'s arity."""
    return {op.ng.name: (getattr(ng, op.ng.name), numpy_meaning(op),
                         op.ng.rounding != "approximate")
            for op in ew.OPS if issubclass(op, base)}


UNARY = declared(ew.UnaryElementWiseOp)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("op", list(UNARY))
def test_unary(op, dtype, any_transformer, rng):
    make, reference, exact = UNARY[op]
    I, J = _axes()
    x = ng.placeholder([I, J], dtype=dtype)
    xv = sample(dtype, rng)
    try:
        expected = numpy_value(reference, xv)
    except TypeError:  # NumPy refuses: so does the graph, naming op and type
        with pytest.raises(ng.DTypeError, match=rf"(?i){op.replace('_', '')}.*bool") as error:
            make(x)
        assert error.value.location[0] == __file__
        return
    got = any_transformer.computation(make(x), x)(xv)
    check(got, expected, exact)


BINARY = declared(ew.BinaryElementWiseOp)
#: Operand pairs: each type with itself, then NumPy promotions across kinds and widths.
PAIRS = [(d, d) for d in DTYPES] + [
    (np.bool_, np.int32), (np.int8, np.uint8), (np.uint8, np.int32), (np.int8, np.int64),
    (np.int32, np.float32), (np.bool_, np.float32), (np.float32, np.float64),
    (np.uint8, np.float64)]
PAIR_IDS = [f"{np.dtype(a).name}-{np.dtype(b).name}" for a, b in PAIRS]


def expect(make, numpy_of, exact, transformer, placeholders, arrays):
    """The graph of `make` gives `numpy_of(*arrays)`; where NumPy refuses the types, building
    it is a DTypeError naming the booleans; where NumPy refuses the values (an integer to a
    negative power), running it is an ExecutionError."""
    try:
        expected = numpy_of(*arrays)
    except TypeError:
        with pytest.raises(ng.DTypeError, match=r"(?i)bool and bool") as error:
            make(*placeholders)
        assert error.value.location[0] == __file__
        return
    except ValueError:
        computation = transformer.computation(make(*placeholders), *placeholders)
        with pytest.raises(ng.ExecutionError):
            computation(*arrays)
        return
    got = transformer.computation(make(*placeholders), *placeholders)(*arrays)
    check(got, expected, exact)


@pytest.mark.parametrize("x_dtype, y_dtype", PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize("op", list(BINARY))
def test_binary(op, x_dtype, y_dtype, any_transformer, rng):
    make, reference, exact = BINARY[op]
    I, J = _axes()
    x = ng.placeholder([I, J], dtype=x_dtype)
    y = ng.placeholder([I, J], dtype=y_dtype)
    expect(make, lambda *arrays: numpy_value(reference, *arrays), exact, any_transformer,
           (x, y), (sample(x_dtype, rng), sample(y_dtype, rng)))


#: A Python number takes the tensor's type unless of a higher kind (NumPy's weak scalars),
#: and a Python float meeting integers gives float32 (docs/dtypes.md).
SCALARS = [(np.int8, 3), (np.uint8, 2), (np.bool_, 1), (np.bool_, True), (np.int32, 2.5),
           (np.float32, 3), (np.float64, 0.1)]


@pytest.mark.parametrize("dtype, number", SCALARS,
                         ids=[f"{np.dtype(d).name}-{n!r}" for d, n in SCALARS])
@pytest.mark.parametrize("op", list(BINARY))
def test_binary_with_python_number(op, dtype, number, any_transformer, rng):
    make, reference, exact = BINARY[op]
    I, J = _axes()
    x = ng.placeholder([I, J], dtype=dtype)
    xv = sample(dtype, rng)

    def numpy_with_number(array):  # a Python float meeting integers gives float32
        expected = numpy_value(reference, array, number)
        if expected.dtype == np.float64 and np.dtype(dtype) != np.float64:
            expected = numpy_value(reference, array.astype(np.float32), np.float32(number))
        return expected

    expect(lambda x: make(x, number), numpy_with_number, exact, any_transformer, (x,), (xv,))


def test_refusals_name_op_and_types():
    I, J = _axes()
    mask = ng.placeholder([I, J], dtype=np.bool_)
    with pytest.raises(ng.DTypeError, match="Subtract of bool and bool") as error:
        mask - mask
    assert error.value.location[0] == __file__
    with pytest.raises(ng.DTypeError, match="Negative of bool"):
        -mask
    with pytest.raises(ng.DTypeError, match="Sqrt of int32.*dtype=int32 is not a float"):
        ng.sqrt(ng.placeholder([I], dtype=np.int32), dtype=np.int32)
    # an explicit integer dtype computes with 0 and 1, as NumPy's dtype= does
    difference = ng.subtract(mask, mask, dtype=np.int8)
    assert difference.dtype == np.int8


# -- reductions ----------------------------------------------------------------------------------

REDUCTIONS = {  # name: (axgraph function, NumPy function)
    "sum": (ng.sum, np.sum), "prod": (ng.prod, np.prod), "max": (ng.max, np.max),
    "min": (ng.min, np.min), "argmax": (ng.argmax, np.argmax), "argmin": (ng.argmin, np.argmin),
    "mean": (ng.mean, np.mean),
}


@pytest.mark.parametrize("over", ["J", "all"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("op", list(REDUCTIONS))
def test_reduction(op, dtype, over, any_transformer, rng):
    make, reference = REDUCTIONS[op]
    I, J = _axes()
    x = ng.placeholder([I, J], dtype=dtype)
    xv = sample(dtype, rng)
    axis = 1 if over == "J" else None
    expected = np.asarray(reference(xv, axis=axis))
    if op.startswith("arg"):
        expected = expected.astype(dtypes.INDEX_DTYPE)  # the index type (int32)
    elif op == "mean" and np.dtype(dtype).kind != "f":
        expected = expected.astype(np.float32)  # float32 from ints (docs/dtypes.md)
    result = make(x, reduction_axes=[J] if over == "J" else [I, J])
    got = any_transformer.computation(result, x)(xv)
    check(got, expected, exact=op not in ("sum", "prod", "mean"))


def test_sum_of_a_mask_counts():
    I, J = _axes()
    mask = ng.placeholder([I, J], dtype=np.bool_)
    assert ng.sum(mask).dtype == np.int64 and ng.max(mask).dtype == np.bool_
    assert ng.mean(mask).dtype == np.float32
    assert ng.sum(ng.placeholder([I], dtype=np.uint8)).dtype == np.uint64


# -- fused chains ---------------------------------------------------------------------------------

def _true_divide(a, b):
    return numpy_value(np.true_divide, a, b)


CHAINS = {  # name: (axgraph expression, NumPy expression), both of (x, y)
    "max-mul-add": (lambda x, y: ng.maximum(x * y, x) + y,
                    lambda x, y: np.maximum(x * y, x) + y),
    "less-mul-add": (lambda x, y: ng.less(x * y, x + y), lambda x, y: np.less(x * y, x + y)),
    "floor-abs": (lambda x, y: ng.floor(x) * ng.absolute(y),
                  lambda x, y: np.floor(x) * np.absolute(y)),
    "divide-plus-one": (lambda x, y: x / (y + 1), lambda x, y: _true_divide(x, y + 1)),
    "sum-mul": (lambda x, y: ng.sum(x * y, reduction_axes=x.axes[-1:]),
                lambda x, y: np.sum(x * y, axis=-1)),
    "max-add": (lambda x, y: ng.max(x + y, reduction_axes=x.axes),
                lambda x, y: np.max(x + y)),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("chain", list(CHAINS))
def test_fused_chain(chain, dtype, any_transformer, rng):
    make, reference = CHAINS[chain]
    I, J = _axes()
    x = ng.placeholder([I, J], dtype=dtype)
    y = ng.placeholder([I, J], dtype=dtype)
    xv, yv = sample(dtype, rng), sample(dtype, rng)
    with np.errstate(all="ignore"):
        expected = np.asarray(reference(xv, yv))
    got = any_transformer.computation(make(x, y), x, y)(xv, yv)
    check(got, expected, exact=not chain.startswith("sum"))


# -- IEEE values and wrapping, without warnings -------------------------------------------------------

SPECIAL = {  # name: (axgraph function, NumPy function, argument)
    "log(0)": (ng.log, np.log, 0.0),
    "1/0": (lambda x: 1 / x, lambda x: 1 / x, 0.0),
    "-1/0": (lambda x: -1 / x, lambda x: -1 / x, 0.0),
    "0/0": (lambda x: x / x, lambda x: x / x, 0.0),
    "sqrt(-1)": (ng.sqrt, np.sqrt, -1.0),
    "exp(1000)": (ng.exp, np.exp, 1000.0),
    "exp(-1000)": (ng.exp, np.exp, -1000.0),
    "log(-1)": (ng.log, np.log, -1.0),
    "inf-inf": (lambda x: x - x, lambda x: x - x, np.inf),
    "sigmoid(-1000)": (ng.sigmoid, lambda x: 1 / (1 + np.exp(-x)), -1000.0),
    "tanh(inf)": (ng.tanh, np.tanh, np.inf),
}


@pytest.mark.parametrize("fused", [False, True], ids=["alone", "in-a-chain"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("case", list(SPECIAL))
def test_ieee_special_values(case, dtype, fused, any_transformer):
    make, reference, argument = SPECIAL[case]
    I, J = _axes()
    x = ng.placeholder([I, J], dtype=dtype)
    zero = ng.placeholder([I, J], dtype=dtype)
    xv = np.full(SHAPE, argument, dtype)
    with np.errstate(all="ignore"):
        expected = reference(xv)
    result = make(x) + zero if fused else make(x)  # a second op makes a fusible group
    got = any_transformer.computation(result, x, zero)(xv, np.zeros(SHAPE, dtype))
    check(got, expected.astype(dtype))


WRAPPING = {  # name: (dtype, axgraph function, NumPy function, argument)
    "int8 127 + 1": (np.int8, lambda x: x + 1, lambda x: x + 1, 127),
    "uint8 0 - 1": (np.uint8, lambda x: x - 1, lambda x: x - np.uint8(1), 0),
    "int32 max * 2": (np.int32, lambda x: x * 2, lambda x: x * 2, 2 ** 31 - 1),
    "-int8 min": (np.int8, ng.negative, np.negative, -128),
    "abs int8 min": (np.int8, ng.absolute, np.absolute, -128),
    "int64 sum": (np.int64, lambda x: ng.sum(x, reduction_axes=x.axes),
                  lambda x: np.sum(x), 2 ** 62),
    "int8 prod": (np.int8, lambda x: ng.prod(x, reduction_axes=x.axes),
                  lambda x: np.prod(x), 100),
    "int 1/0": (np.int32, lambda x: 1 / x, lambda x: _true_divide(np.ones_like(x), x), 0),
    "int 0/0": (np.int32, lambda x: x / x, lambda x: _true_divide(x, x), 0),
}


@pytest.mark.parametrize("case", list(WRAPPING))
def test_integers_wrap_silently(case, any_transformer):
    dtype, make, reference, argument = WRAPPING[case]
    I, J = _axes()
    x = ng.placeholder([I, J], dtype=dtype)
    xv = np.full(SHAPE, argument, dtype)
    with np.errstate(all="ignore"):
        expected = np.asarray(reference(xv))
    got = any_transformer.computation(make(x), x)(xv)
    check(got, expected)


def test_weak_python_int_meeting_bool_is_int64():
    I, _ = _axes()
    mask = ng.placeholder([I], dtype=np.bool_)
    assert (mask + 1).dtype == np.result_type(np.bool_, np.int64)
    assert dtypes.promote(np.dtype(np.int8), np.dtype(np.int64), y_weak=True) == np.int8
    assert dtypes.promote(np.dtype(np.int8), np.dtype(np.float64), y_weak=True) == np.float32


def test_explicit_reduction_dtype_computes_in_it(any_transformer):
    """dtype= as in NumPy: a boolean sum is any, a boolean product all (not a count
    that wraps at 256), an int8 sum wraps in int8."""
    K = ng.make_axis(300, name="K")
    mask = ng.placeholder([K], dtype=np.bool_)
    small = ng.placeholder([K], dtype=np.int8)
    results = [ng.sum(mask, reduction_axes=[K], dtype=np.bool_),
               ng.prod(mask, reduction_axes=[K], dtype=np.bool_),
               ng.sum(small, reduction_axes=[K], dtype=np.int8),
               ng.sum(small, reduction_axes=[K], dtype=np.float64)]
    computation = any_transformer.computation(results, mask, small)
    for maskv in (np.ones(300, bool), np.arange(300) < 256, np.zeros(300, bool)):
        smallv = np.full(300, 100, np.int8)
        expected = [np.sum(maskv, dtype=np.bool_), np.prod(maskv, dtype=np.bool_),
                    np.sum(smallv, dtype=np.int8), np.sum(smallv, dtype=np.float64)]
        for got, want in zip(computation(maskv, smallv), expected):
            check(got, np.asarray(want))


def test_float64_beyond_float32_range_rounds_to_inf(any_transformer):
    """Initial values and Python numbers convert as IEEE rounding does (what NumPy's
    astype gives, without its warning); fed data that would overflow is refused
    instead (tests/test_calls.py)."""
    I, _ = _axes()
    x = ng.placeholder([I])
    big = np.array([1e300, -1e300, 1.0])
    with np.errstate(over="ignore"):
        expected = big.astype(np.float32)
    initial = ng.variable([I], initial_value=big)
    results = [initial * 1.0, ng.constant(1e300), x * 1e300]
    got = any_transformer.computation(results, x)(np.array([1.0, -1.0, 0.5]))
    check(got[0], expected)
    check(got[1], np.asarray(np.inf, np.float32))
    check(got[2], np.array([np.inf, -np.inf, np.inf], np.float32))
    with pytest.raises(ng.FeedError, match="1e\\+300"):
        any_transformer.computation(x * 1.0, x)(big)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_dot(dtype, any_transformer, rng):
    I, J = _axes()
    x = ng.placeholder([I, J], dtype=dtype)
    y = ng.placeholder([I], dtype=dtype)
    xv, yv = sample(dtype, rng), sample(dtype, rng, SHAPE[:1])
    got = any_transformer.computation(ng.dot(x, y), x, y)(xv, yv)
    check(got, np.dot(yv, xv), exact=np.dtype(dtype).kind != "f")


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_power(dtype, any_transformer, rng):
    """x ** y with non-negative exponents (booleans as int8, integers wrapping, as NumPy)."""
    I, J = _axes()
    x = ng.placeholder([I, J], dtype=dtype)
    y = ng.placeholder([I, J], dtype=dtype)
    xv = sample(dtype, rng)
    yv = np.abs(sample(dtype, rng)) if np.dtype(dtype).kind != "b" else sample(dtype, rng)
    got = any_transformer.computation([x ** y, x ** 2], x, y)(xv, yv)
    check(got[0], numpy_value(np.power, xv, yv), exact=np.dtype(dtype).kind != "f")
    check(got[1], numpy_value(np.power, xv, 2), exact=np.dtype(dtype).kind != "f")


@pytest.mark.parametrize("value", [2.5, np.nan, np.inf, [1.0, 2.5, 3.0]])
def test_non_integer_float_initial_values_are_refused_for_int_tensors(value):
    I = ng.make_axis(length=3, name="I")
    with pytest.raises(ng.DTypeError, match="truncated"):
        ng.variable([I], dtype=np.int32, initial_value=value)


def test_integral_float_initial_values_fill_int_tensors(any_transformer):
    I = ng.make_axis(length=3, name="I")
    v = ng.variable([I], dtype=np.int32, initial_value=[1.0, -2.0, 3.0])
    got = any_transformer.computation(v * 1)()
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [1, -2, 3])
