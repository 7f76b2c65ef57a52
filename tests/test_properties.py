"""Property-based tests (hypothesis) of the named-axes semantics of seed 000.

Every property is checked against a NumPy reference written independently of
the library's kernels: results are laid out by explicit einsum subscripts
built from the axes (one letter per axis), by per-index loops over the result
shape, or by np.transpose/reshape. Axes are compared by identity.

Covered:
1. every unary elementwise op (and the operators -x, abs(x));
2. every binary elementwise op and the Python operators + - * / ** < <= > >=
   between tensors on random ordered subsets of an axis pool (result axes =
   left's then right's new ones), plus Python-number operands;
3. commutativity (up to axis order), associativity, distributivity;
4. ng.dot with shared axes and dual pairs (A+k with A+k+1);
5. reductions sum/prod/max/min/mean/variance/argmax/argmin with
   reduction_axes=, out_axes= and the default (all but the batch axis).
"""
from __future__ import annotations

import operator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import axgraph as ng

PROPERTY_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

LETTERS = "abcdefghijklmnop"
POOL_SIZE = 4

seeds = st.integers(0, 2**32 - 1)
lengths_st = st.integers(1, 4)
dtypes_st = st.sampled_from([np.float32, np.float64])


# -- helpers ----------------------------------------------------------------------


@st.composite
def ordered_subset(draw, k, min_size=0, max_size=None):
    """A random subset of range(k) in a random order."""
    perm = draw(st.permutations(range(k)))
    size = draw(st.integers(min_size, k if max_size is None else max_size))
    return list(perm[:size])


def make_pool(lengths, prefix="P"):
    """Fresh axes (never named 'N', so none is a batch axis)."""
    return [ng.make_axis(length=n, name=f"{prefix}{i}") for i, n in enumerate(lengths)]


def same_axes(actual, expected) -> bool:
    """Same axes, by identity, in the same order."""
    actual, expected = list(actual), list(expected)
    return len(actual) == len(expected) and all(a is b for a, b in zip(actual, expected))


def same_axis_set(actual, expected) -> bool:
    actual, expected = list(actual), list(expected)
    return len(actual) == len(expected) and {id(a) for a in actual} == {id(a) for a in expected}


def union_order(*axes_lists):
    """Seed 000 broadcasting: left's axes, then each later operand's new ones."""
    out = []
    for axes in axes_lists:
        for axis in axes:
            if not any(axis is seen for seen in out):
                out.append(axis)
    return out


class Letters:
    """One einsum letter per axis, by identity."""

    def __init__(self):
        self._letters = {}

    def of(self, axes) -> str:
        out = []
        for axis in axes:
            if id(axis) not in self._letters:
                self._letters[id(axis)] = LETTERS[len(self._letters)]
            out.append(self._letters[id(axis)])
        return "".join(out)


class Graph:
    """Builds tensors as constants or placeholders and evaluates results."""

    def __init__(self, backend, use_placeholders: bool):
        self.backend = backend
        self.use_placeholders = use_placeholders
        self.feeds = {}

    def tensor(self, value: np.ndarray, axes):
        value = np.asarray(value)
        if self.use_placeholders:
            placeholder = ng.placeholder(axes, dtype=value.dtype)
            self.feeds[placeholder] = value
            return placeholder
        return ng.constant(value, axes, dtype=value.dtype)

    def run(self, *results):
        with ng.make_transformer(self.backend) as transformer:
            computation = transformer.computation(list(results))
            values = computation(feed_dict=dict(self.feeds))
        return [np.asarray(v) for v in values]


def transpose_to(value, from_axes, to_axes, letters: Letters):
    """`value` (dims in from_axes order) with dims in to_axes order (same set)."""
    return np.einsum(f"{letters.of(from_axes)}->{letters.of(to_axes)}", value)


def loop_reference(function, operands, out_axes, dtype):
    """function(*elements) at every index of out_axes; operands are (value, axes)."""
    shape = tuple(a.length for a in out_axes)
    out = np.empty(shape, dtype=dtype)
    for index in np.ndindex(*shape):
        where = {id(a): i for a, i in zip(out_axes, index)}
        elements = [value[tuple(where[id(a)] for a in axes)] for value, axes in operands]
        out[index] = function(*elements)
    return out


def assert_close(actual, expected, dtype, what=""):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    if expected.dtype == np.bool_ or expected.dtype.kind in "iu":
        np.testing.assert_array_equal(actual, expected, err_msg=what)
    elif np.dtype(dtype) == np.float32:
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6, err_msg=what)
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-10, atol=1e-12, err_msg=what)


def halves(rng, shape, low=-3, high=3, nonzero=False):
    """Exact float values k/2 (so ties and equalities happen)."""
    values = rng.integers(2 * low, 2 * high + 1, size=shape) / 2.0
    if nonzero:
        values = np.where(values == 0, 0.5, values)
    return values


# -- 1. unary elementwise ops -----------------------------------------------------


def _sigmoid_reference(a):
    return 1.0 / (1.0 + np.exp(-a))


UNARY = {
    # name: (axgraph function, NumPy reference on float64, input domain)
    "negative": (ng.negative, lambda a: -a, "any"),
    "absolute": (ng.absolute, lambda a: np.where(a < 0, -a, a), "any"),
    "sign": (ng.sign, lambda a: np.where(a > 0, 1.0, np.where(a < 0, -1.0, 0.0)), "any"),
    "square": (ng.square, lambda a: a * a, "any"),
    "sqrt": (ng.sqrt, np.sqrt, "positive"),
    "exp": (ng.exp, np.exp, "any"),
    "log": (ng.log, np.log, "positive"),
    "safelog": (ng.safelog, lambda a: np.log(np.maximum(a, np.exp(-50.0))), "nonnegative"),
    "reciprocal": (ng.reciprocal, lambda a: 1.0 / a, "positive"),
    "tanh": (ng.tanh, np.tanh, "any"),
    "sigmoid": (ng.sigmoid, _sigmoid_reference, "any"),
    "sin": (ng.sin, np.sin, "any"),
    "cos": (ng.cos, np.cos, "any"),
    "relu": (ng.relu, lambda a: np.where(a > 0, a, 0.0), "any"),
    "operator -x": (lambda x: -x, lambda a: -a, "any"),
    "operator abs(x)": (lambda x: abs(x), np.abs, "any"),
}


def unary_input(rng, shape, domain):
    if domain == "positive":
        return rng.uniform(0.05, 4.0, size=shape)
    if domain == "nonnegative":
        values = rng.uniform(0.0, 4.0, size=shape)
        pick = rng.integers(0, 3, size=shape)
        return np.where(pick == 0, 0.0, np.where(pick == 1, 1e-30, values))
    mixed = rng.uniform(-3.0, 3.0, size=shape)
    return np.where(rng.integers(0, 2, size=shape) == 0, halves(rng, shape), mixed)


@pytest.mark.parametrize("name", sorted(UNARY))
@PROPERTY_SETTINGS
@given(lengths=st.lists(lengths_st, min_size=1, max_size=3), dtype=dtypes_st, seed=seeds,
       use_placeholders=st.booleans())
def test_unary_matches_numpy(backend, name, lengths, dtype, seed, use_placeholders):
    function, reference, domain = UNARY[name]
    rng = np.random.default_rng(seed)
    axes = make_pool(lengths)
    value = unary_input(rng, tuple(lengths), domain).astype(dtype)
    graph = Graph(backend, use_placeholders)
    x = graph.tensor(value, axes)
    y = function(x)
    assert same_axes(y.axes, axes)
    assert y.dtype == np.dtype(dtype)
    (result,) = graph.run(y)
    assert result.dtype == np.dtype(dtype)
    assert_close(result, reference(value.astype(np.float64)), dtype, name)


# -- 2. binary elementwise ops and operators --------------------------------------

ARITH, COMPARE = "arith", "compare"

BINARY = {
    # name: (axgraph function, scalar reference, kind, x domain, y domain)
    "add": (ng.add, operator.add, ARITH, "any", "any"),
    "subtract": (ng.subtract, operator.sub, ARITH, "any", "any"),
    "multiply": (ng.multiply, operator.mul, ARITH, "any", "any"),
    "divide": (ng.divide, operator.truediv, ARITH, "any", "nonzero"),
    "power": (ng.power, operator.pow, ARITH, "positive", "any"),
    "maximum": (ng.maximum, lambda a, b: a if a >= b else b, ARITH, "any", "any"),
    "minimum": (ng.minimum, lambda a, b: a if a <= b else b, ARITH, "any", "any"),
    "equal": (ng.equal, operator.eq, COMPARE, "any", "any"),
    "not_equal": (ng.not_equal, operator.ne, COMPARE, "any", "any"),
    "less": (ng.less, operator.lt, COMPARE, "any", "any"),
    "less_equal": (ng.less_equal, operator.le, COMPARE, "any", "any"),
    "greater": (ng.greater, operator.gt, COMPARE, "any", "any"),
    "greater_equal": (ng.greater_equal, operator.ge, COMPARE, "any", "any"),
    "operator +": (operator.add, operator.add, ARITH, "any", "any"),
    "operator -": (operator.sub, operator.sub, ARITH, "any", "any"),
    "operator *": (operator.mul, operator.mul, ARITH, "any", "any"),
    "operator /": (operator.truediv, operator.truediv, ARITH, "any", "nonzero"),
    "operator **": (operator.pow, operator.pow, ARITH, "positive", "any"),
    "operator <": (operator.lt, operator.lt, COMPARE, "any", "any"),
    "operator <=": (operator.le, operator.le, COMPARE, "any", "any"),
    "operator >": (operator.gt, operator.gt, COMPARE, "any", "any"),
    "operator >=": (operator.ge, operator.ge, COMPARE, "any", "any"),
}


def binary_input(rng, shape, domain):
    if domain == "positive":
        return halves(rng, shape, 0, 3, nonzero=True)
    return halves(rng, shape, nonzero=(domain == "nonzero"))


@pytest.mark.parametrize("name", sorted(BINARY))
@PROPERTY_SETTINGS
@given(lengths=st.lists(lengths_st, min_size=POOL_SIZE, max_size=POOL_SIZE),
       x_pick=ordered_subset(POOL_SIZE, max_size=3), y_pick=ordered_subset(POOL_SIZE, max_size=3),
       seed=seeds, use_placeholders=st.booleans())
def test_binary_broadcasts_by_axes(backend, name, lengths, x_pick, y_pick, seed,
                                   use_placeholders):
    function, reference, kind, x_domain, y_domain = BINARY[name]
    rng = np.random.default_rng(seed)
    pool = make_pool(lengths)
    x_axes, y_axes = [pool[i] for i in x_pick], [pool[i] for i in y_pick]
    xv = binary_input(rng, tuple(a.length for a in x_axes), x_domain)
    yv = binary_input(rng, tuple(a.length for a in y_axes), y_domain)
    graph = Graph(backend, use_placeholders)
    x, y = graph.tensor(xv, x_axes), graph.tensor(yv, y_axes)
    z = function(x, y)

    expected_axes = x_axes + [a for a in y_axes if not any(a is b for b in x_axes)]
    assert same_axes(z.axes, expected_axes), (z.axes, expected_axes)
    expected_dtype = np.bool_ if kind == COMPARE else np.float64
    assert z.dtype == np.dtype(expected_dtype)

    (result,) = graph.run(z)
    expected = loop_reference(reference, [(xv, x_axes), (yv, y_axes)], expected_axes,
                              expected_dtype)
    assert_close(result, expected, np.float64, name)
    if reference is operator.mul:
        letters = Letters()
        einsum = np.einsum(f"{letters.of(x_axes)},{letters.of(y_axes)}->"
                           f"{letters.of(expected_axes)}", xv, yv)
        assert_close(result, einsum, np.float64, name + " (einsum)")


SCALAR_CASES = {
    "x + 2": (lambda x: x + 2, lambda a: a + 2),
    "2 + x": (lambda x: 2 + x, lambda a: 2 + a),
    "x - 1.5": (lambda x: x - 1.5, lambda a: a - 1.5),
    "1.5 - x": (lambda x: 1.5 - x, lambda a: 1.5 - a),
    "x * 3": (lambda x: x * 3, lambda a: a * 3),
    "0.5 * x": (lambda x: 0.5 * x, lambda a: 0.5 * a),
    "x / 4": (lambda x: x / 4, lambda a: a / 4),
    "2 / x": (lambda x: 2 / x, lambda a: 2 / a),
    "x ** 2": (lambda x: x ** 2, lambda a: a ** 2),
    "2 ** x": (lambda x: 2 ** x, lambda a: 2.0 ** a),
}


@pytest.mark.parametrize("case", sorted(SCALAR_CASES))
@PROPERTY_SETTINGS
@given(lengths=st.lists(lengths_st, min_size=1, max_size=3), dtype=dtypes_st, seed=seeds)
def test_python_number_operands(backend, case, lengths, dtype, seed):
    """A number meets a tensor: result axes are the tensor's, dtype the tensor's."""
    function, reference = SCALAR_CASES[case]
    rng = np.random.default_rng(seed)
    axes = make_pool(lengths)
    value = halves(rng, tuple(lengths), 0, 3, nonzero=True).astype(dtype)
    graph = Graph(backend, False)
    z = function(graph.tensor(value, axes))
    assert same_axes(z.axes, axes)
    assert z.dtype == np.dtype(dtype)
    (result,) = graph.run(z)
    assert_close(result, reference(value.astype(np.float64)), dtype, case)


# -- 3. algebraic laws --------------------------------------------------------------

COMMUTATIVE = {
    "add": ng.add, "multiply": ng.multiply, "maximum": ng.maximum, "minimum": ng.minimum,
    "equal": ng.equal, "not_equal": ng.not_equal, "operator +": operator.add,
    "operator *": operator.mul,
}


@pytest.mark.parametrize("name", sorted(COMMUTATIVE))
@PROPERTY_SETTINGS
@given(lengths=st.lists(lengths_st, min_size=POOL_SIZE, max_size=POOL_SIZE),
       x_pick=ordered_subset(POOL_SIZE, max_size=3), y_pick=ordered_subset(POOL_SIZE, max_size=3),
       seed=seeds)
def test_commutative_up_to_axis_order(backend, name, lengths, x_pick, y_pick, seed):
    function = COMMUTATIVE[name]
    rng = np.random.default_rng(seed)
    pool = make_pool(lengths)
    x_axes, y_axes = [pool[i] for i in x_pick], [pool[i] for i in y_pick]
    graph = Graph(backend, False)
    x = graph.tensor(halves(rng, tuple(a.length for a in x_axes)), x_axes)
    y = graph.tensor(halves(rng, tuple(a.length for a in y_axes)), y_axes)
    xy, yx = function(x, y), function(y, x)
    assert same_axes(xy.axes, union_order(x_axes, y_axes))
    assert same_axes(yx.axes, union_order(y_axes, x_axes))
    assert same_axis_set(xy.axes, yx.axes)
    xy_value, yx_value = graph.run(xy, yx)
    letters = Letters()
    np.testing.assert_array_equal(xy_value, transpose_to(yx_value, yx.axes, xy.axes, letters))


ASSOCIATIVE = {"add": operator.add, "multiply": operator.mul, "maximum": ng.maximum,
               "minimum": ng.minimum}


@pytest.mark.parametrize("name", sorted(ASSOCIATIVE))
@PROPERTY_SETTINGS
@given(lengths=st.lists(lengths_st, min_size=POOL_SIZE, max_size=POOL_SIZE),
       picks=st.lists(ordered_subset(POOL_SIZE, max_size=3), min_size=3, max_size=3),
       seed=seeds)
def test_associative_same_axes_order(backend, name, lengths, picks, seed):
    function = ASSOCIATIVE[name]
    rng = np.random.default_rng(seed)
    pool = make_pool(lengths)
    axes = [[pool[i] for i in pick] for pick in picks]
    graph = Graph(backend, False)
    x, y, z = (graph.tensor(halves(rng, tuple(a.length for a in ax)), ax) for ax in axes)
    left, right = function(function(x, y), z), function(x, function(y, z))
    expected_axes = union_order(*axes)
    assert same_axes(left.axes, expected_axes)
    assert same_axes(right.axes, expected_axes)
    left_value, right_value = graph.run(left, right)
    assert_close(left_value, right_value, np.float64, name)


@PROPERTY_SETTINGS
@given(lengths=st.lists(lengths_st, min_size=POOL_SIZE, max_size=POOL_SIZE),
       picks=st.lists(ordered_subset(POOL_SIZE, max_size=3), min_size=3, max_size=3),
       seed=seeds)
def test_distributive(backend, lengths, picks, seed):
    rng = np.random.default_rng(seed)
    pool = make_pool(lengths)
    x_axes, y_axes, z_axes = ([pool[i] for i in pick] for pick in picks)
    graph = Graph(backend, False)
    xv, yv, zv = (halves(rng, tuple(a.length for a in ax)) for ax in (x_axes, y_axes, z_axes))
    x, y, z = graph.tensor(xv, x_axes), graph.tensor(yv, y_axes), graph.tensor(zv, z_axes)
    left = x * (y + z)
    right = x * y + x * z
    assert same_axis_set(left.axes, right.axes)
    assert same_axes(left.axes, union_order(x_axes, union_order(y_axes, z_axes)))
    assert same_axes(right.axes, union_order(union_order(x_axes, y_axes),
                                             union_order(x_axes, z_axes)))
    left_value, right_value = graph.run(left, right)
    letters = Letters()
    assert_close(left_value, transpose_to(right_value, right.axes, left.axes, letters),
                 np.float64, "distributive")
    # and against einsum: x * (y + z) = einsum(x, y) + einsum(x, z) laid out as left
    out = letters.of(left.axes)
    x_l, y_l, z_l = letters.of(x_axes), letters.of(y_axes), letters.of(z_axes)
    ones = {a: np.ones(a.length) for a in left.axes}
    missing_y = [a for a in left.axes if not any(a is b for b in list(x_axes) + list(y_axes))]
    missing_z = [a for a in left.axes if not any(a is b for b in list(x_axes) + list(z_axes))]
    xy = np.einsum(",".join([x_l, y_l] + [letters.of([a]) for a in missing_y]) + "->" + out,
                   xv, yv, *[ones[a] for a in missing_y])
    xz = np.einsum(",".join([x_l, z_l] + [letters.of([a]) for a in missing_z]) + "->" + out,
                   xv, zv, *[ones[a] for a in missing_z])
    assert_close(left_value, xy + xz, np.float64, "distributive (einsum)")


# -- 4. dot ---------------------------------------------------------------------

# How each pool axis A takes part in a dot (k is a dual offset):
#   ("x", k): only x has A+k;      ("y", k): only y has A+k;
#   ("pair", k): x has A+k and y has A+k+1, a dual pair (k=-1: A-1 with A);
#   ("shared", 0): both have A;    ("none", 0): neither has it.
dot_roles = st.one_of(
    st.tuples(st.sampled_from(["x", "y"]), st.integers(-1, 1)),
    st.tuples(st.just("pair"), st.integers(-2, 1)),
    st.tuples(st.sampled_from(["shared", "none"]), st.just(0)),
)


@PROPERTY_SETTINGS
@given(lengths=st.lists(lengths_st, min_size=5, max_size=5),
       roles=st.lists(dot_roles, min_size=5, max_size=5),
       x_order=st.permutations(range(5)), y_order=st.permutations(range(5)),
       dtype=dtypes_st, seed=seeds, use_placeholders=st.booleans())
def test_dot_contracts_shared_and_dual_axes(backend, lengths, roles, x_order, y_order, dtype,
                                           seed, use_placeholders):
    rng = np.random.default_rng(seed)
    pool = make_pool(lengths, prefix="D")
    x_of, y_of = {}, {}  # pool index -> the axis each operand has
    contracted = set()
    for i, (role, k) in enumerate(roles):
        base = pool[i]
        if role == "x":
            x_of[i] = base + k
        elif role == "y":
            y_of[i] = base + k
        elif role == "pair":
            x_of[i], y_of[i] = base + k, base + (k + 1)
            contracted.add(i)
        elif role == "shared":
            x_of[i] = y_of[i] = base
            contracted.add(i)
    x_axes = [x_of[i] for i in x_order if i in x_of]
    y_axes = [y_of[i] for i in y_order if i in y_of]
    xv = rng.uniform(-2, 2, size=tuple(a.length for a in x_axes)).astype(dtype)
    yv = rng.uniform(-2, 2, size=tuple(a.length for a in y_axes)).astype(dtype)
    graph = Graph(backend, use_placeholders)
    x, y = graph.tensor(xv, x_axes), graph.tensor(yv, y_axes)
    z = ng.dot(x, y)

    x_free = [x_of[i] for i in x_order if i in x_of and i not in contracted]
    y_free = [y_of[i] for i in y_order if i in y_of and i not in contracted]
    expected_axes = x_free + y_free
    assert same_axes(z.axes, expected_axes), (x_axes, y_axes, z.axes, expected_axes)
    assert z.dtype == np.dtype(dtype)

    # One einsum letter per pool axis: a contracted pair shares its letter.
    letter = {i: LETTERS[i] for i in range(5)}
    x_sub = "".join(letter[i] for i in x_order if i in x_of)
    y_sub = "".join(letter[i] for i in y_order if i in y_of)
    out_sub = "".join(letter[i] for i in x_order if i in x_of and i not in contracted) + \
        "".join(letter[i] for i in y_order if i in y_of and i not in contracted)
    expected = np.einsum(f"{x_sub},{y_sub}->{out_sub}", xv.astype(np.float64),
                         yv.astype(np.float64))
    (result,) = graph.run(z)
    if np.dtype(dtype) == np.float32:
        # A float32 sum of products is accurate relative to the sum of their magnitudes,
        # not to its (possibly cancelling) result.
        magnitude = np.einsum(f"{x_sub},{y_sub}->{out_sub}", np.abs(xv.astype(np.float64)),
                              np.abs(yv.astype(np.float64)))
        assert np.all(np.abs(np.asarray(result) - expected) <= 1e-5 * magnitude + 1e-6), "dot"
    else:
        assert_close(result, expected, dtype, "dot")


@PROPERTY_SETTINGS
@given(lengths=st.lists(lengths_st, min_size=4, max_size=4), seed=seeds,
       x_order=st.permutations(range(4)), y_order=st.permutations(range(4)),
       n_contracted=st.integers(1, 3), left_dual=st.booleans())
def test_dot_seed_dual_examples(backend, lengths, seed, x_order, y_order, n_contracted,
                                left_dual):
    """(M, C-1, H-1, W-1) . (C, H, W, N) -> (M, N), in any axis order (seed 000)."""
    rng = np.random.default_rng(seed)
    M, C, H, W = make_pool(lengths, prefix="S")
    Nb = ng.make_axis(length=2, name="N")
    inner = [C, H, W][:n_contracted]
    if left_dual:  # x has A - 1, y has A
        x_axes = [M] + [a - 1 for a in inner]
        y_axes = list(inner) + [Nb]
    else:  # x has A, y has A + 1
        x_axes = [M] + list(inner)
        y_axes = [a + 1 for a in inner] + [Nb]
    x_axes = [x_axes[i] for i in x_order if i < len(x_axes)]
    y_axes = [y_axes[i] for i in y_order if i < len(y_axes)]
    xv = rng.uniform(-1, 1, size=tuple(a.length for a in x_axes))
    yv = rng.uniform(-1, 1, size=tuple(a.length for a in y_axes))
    graph = Graph(backend, False)
    z = ng.dot(graph.tensor(xv, x_axes), graph.tensor(yv, y_axes))
    assert same_axes(z.axes, [M, Nb])
    letters = {id(a.base): l for a, l in zip([M, C, H, W, Nb], "mchwn")}
    x_sub = "".join(letters[id(a.base)] for a in x_axes)
    y_sub = "".join(letters[id(a.base)] for a in y_axes)
    (result,) = graph.run(z)
    assert_close(result, np.einsum(f"{x_sub},{y_sub}->mn", xv, yv), np.float64, "dot")


# -- 5. reductions --------------------------------------------------------------


def _flat_reduce(function):
    def reduce(moved):  # moved: kept dims, then one flattened reduction dim
        return function(moved, axis=-1)
    return reduce


REDUCTIONS = {
    # name: (axgraph function, reference over the last (flattened) dim, value kind)
    "sum": (ng.sum, _flat_reduce(np.sum), "uniform"),
    "prod": (ng.prod, _flat_reduce(np.prod), "near_one"),
    "max": (ng.max, _flat_reduce(np.max), "ties"),
    "min": (ng.min, _flat_reduce(np.min), "ties"),
    "mean": (ng.mean, _flat_reduce(np.mean), "uniform"),
    "variance": (ng.variance, _flat_reduce(np.var), "uniform"),
    "argmax": (ng.argmax, _flat_reduce(np.argmax), "ties"),
    "argmin": (ng.argmin, _flat_reduce(np.argmin), "ties"),
}


def reduction_input(rng, shape, kind):
    if kind == "near_one":
        return rng.uniform(0.5, 1.5, size=shape)
    if kind == "ties":
        return rng.integers(0, 3, size=shape).astype(np.float64)
    return rng.uniform(-2.0, 2.0, size=shape)


def reduction_reference(function, value, x_axes, reduction_axes, out_axes):
    """Transpose to (out_axes..., reduction_axes...), flatten the reduction dims
    (in reduction_axes order) and reduce that one dim."""
    order = [x_axes.index(a) for a in out_axes] + [x_axes.index(a) for a in reduction_axes]
    moved = np.transpose(value, order)
    moved = moved.reshape(tuple(a.length for a in out_axes) + (-1,))
    return function(moved)


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("form", ["reduction_axes", "out_axes", "default"])
@PROPERTY_SETTINGS
@given(lengths=st.lists(lengths_st, min_size=1, max_size=4), with_batch=st.booleans(),
       data=st.data(), seed=seeds, use_placeholders=st.booleans())
def test_reductions_match_numpy(backend, name, form, lengths, with_batch, data, seed,
                                use_placeholders):
    function, reference, kind = REDUCTIONS[name]
    rng = np.random.default_rng(seed)
    axes = make_pool(lengths, prefix="R")
    if with_batch:
        axes[-1] = ng.make_axis(length=axes[-1].length, name="N")
        assert axes[-1].is_batch
    x_axes = [axes[i] for i in data.draw(st.permutations(range(len(axes))), label="x order")]
    value = reduction_input(rng, tuple(a.length for a in x_axes), kind)
    graph = Graph(backend, use_placeholders)
    x = graph.tensor(value, x_axes)

    if form == "reduction_axes":
        pick = data.draw(ordered_subset(len(x_axes)), label="reduction_axes")
        reduction_axes = [x_axes[i] for i in pick]
        out_axes = [a for a in x_axes if not any(a is r for r in reduction_axes)]
        y = function(x, reduction_axes=reduction_axes)
    elif form == "out_axes":
        pick = data.draw(ordered_subset(len(x_axes)), label="out_axes")
        out_axes = [x_axes[i] for i in pick]
        reduction_axes = [a for a in x_axes if not any(a is o for o in out_axes)]
        y = function(x, out_axes=out_axes)
    else:
        reduction_axes = [a for a in x_axes if not a.is_batch]
        out_axes = [a for a in x_axes if a.is_batch]
        y = function(x)

    assert same_axes(y.axes, out_axes), (y.axes, out_axes)
    (result,) = graph.run(y)
    expected = reduction_reference(reference, value, x_axes, reduction_axes, out_axes)
    if name.startswith("arg"):
        assert result.dtype.kind in "iu"
        np.testing.assert_array_equal(result, expected, err_msg=name)
    else:
        assert result.dtype == np.float64
        assert_close(result, expected, np.float64, name)
    if name == "sum":  # and once more with einsum: sum over the letters not kept
        letters = Letters()
        einsum = np.einsum(f"{letters.of(x_axes)}->{letters.of(out_axes)}", value)
        assert_close(result, einsum, np.float64, "sum (einsum)")
