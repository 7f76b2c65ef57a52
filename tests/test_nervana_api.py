"""Nervana Graph v0.4 public API that users wrote: each name, on every transformer.

Values are checked against NumPy computed here; errors against their class, the
names they must mention and the line of this file that caused them (a line ending
with `# @marker`).
"""
import io
import os
from contextlib import redirect_stdout

import numpy as np
import pytest

import axgraph as ng
from axgraph.frontends.neon import ar


def line_of(marker: str) -> int:
    with open(__file__) as source:
        for number, text in enumerate(source, 1):
            if text.rstrip().endswith("# " + marker):
                return number
    raise LookupError(marker)


def assert_location(error, marker: str) -> None:
    path, line = error.location
    assert os.path.realpath(path) == os.path.realpath(__file__)
    assert line == line_of(marker)


def printed(*pairs) -> str:
    """What `print` writes for each (prefix, array), made here with print itself."""
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        for prefix, value in pairs:
            if prefix is None:
                print(value)
            else:
                print(f"{prefix}:", value)
    return buffer.getvalue()


@pytest.fixture
def A():
    return ng.make_axis(length=3, name="A")


@pytest.fixture
def B():
    return ng.make_axis(length=2, name="B")


# -- Transformer.initialize ---------------------------------------------------------------

def test_initialize_fills_stored_tensors_before_any_call(transformer, A, B):
    w = ng.variable([A, B], initial_value=np.arange(6.0).reshape(3, 2))
    s = ng.persistent_tensor([B], initial_value=7.0)
    with ng.Op.saved_user_deps():  # updates that run only when named
        step = transformer.computation([ng.assign(w, w * 2), ng.assign(s, s + 1)])
    read = transformer.computation([w, s])
    assert w not in transformer.state
    transformer.initialize()
    np.testing.assert_array_equal(transformer.state[w], np.arange(6.0).reshape(3, 2))
    np.testing.assert_array_equal(transformer.state[s], [7.0, 7.0])
    step()
    transformer.initialize()  # never resets what is initialized
    w_value, s_value = read()
    np.testing.assert_array_equal(w_value, 2 * np.arange(6.0).reshape(3, 2))
    np.testing.assert_array_equal(s_value, [8.0, 8.0])


def test_initialize_without_stored_tensors_does_nothing(transformer, A):
    transformer.initialize()
    x = ng.placeholder([A])
    f = transformer.computation(x + x, x)
    transformer.initialize()
    assert transformer.state == {} and transformer.initialized == set()
    np.testing.assert_array_equal(f(np.arange(3.0)), [0.0, 2.0, 4.0])


def test_initialize_leaves_tensors_sized_by_fed_data_for_the_first_call(transformer, A):
    N = ng.make_axis(name="N", batch=True)
    x = ng.placeholder([A, N])
    fixed = ng.variable([A], initial_value=1.5)
    sized = ng.persistent_tensor([N], initial_value=4.0)
    f = transformer.computation([fixed * ng.sum(x, reduction_axes=[N]), sized], x)
    transformer.initialize()
    assert fixed in transformer.initialized and sized not in transformer.initialized
    product, held = f(np.ones((3, 5)))
    np.testing.assert_array_equal(product, [7.5, 7.5, 7.5])
    np.testing.assert_array_equal(held, [4.0] * 5)


def test_initialize_on_a_closed_transformer_is_refused(backend):
    transformer = ng.make_transformer(backend)
    transformer.close()
    with pytest.raises(ng.TransformerClosedError, match="closed"):
        transformer.initialize()


# -- initial_value given as an op -------------------------------------------------------------

def test_initial_value_op_of_a_constant(transformer, A, B):
    base = np.arange(6.0).reshape(3, 2)
    w = ng.variable([A, B], initial_value=ng.constant(base, [A, B]) * 2)
    f = transformer.computation(w)
    np.testing.assert_array_equal(f(), base * 2)


def test_initial_value_op_reads_other_variables_in_any_axis_order(transformer, A, B):
    first = ng.variable([A, B], initial_value=np.arange(6.0).reshape(3, 2))
    # [B, A]: reordered; [A, B] from a value over [A] only: repeated along B.
    second = ng.variable([B, A], initial_value=first + 1)
    third = ng.variable([A, B], dtype=np.float32,
                        initial_value=ng.sum(first, reduction_axes=[B]))
    f = transformer.computation([second, third])
    transformer.initialize()
    second_value, third_value = f()
    np.testing.assert_array_equal(second_value, np.arange(6.0).reshape(3, 2).T + 1)
    expected = np.repeat(np.arange(6.0).reshape(3, 2).sum(axis=1)[:, None], 2, axis=1)
    np.testing.assert_array_equal(third_value, expected)
    assert third_value.dtype == np.float32


def test_initial_value_op_sees_the_value_a_variable_has_when_it_is_initialized(transformer, A):
    first = ng.variable([A], initial_value=1.0)
    later = ng.variable([A], initial_value=first * 10)
    with ng.Op.saved_user_deps():
        update = ng.assign(first, first + 1)
    transformer.computation(update)()  # `later` is not initialized yet
    np.testing.assert_array_equal(transformer.computation(later)(), [20.0] * 3)


def test_initial_value_op_of_random_draws_is_drawn_once(transformer, A, B):
    w = ng.variable([A, B], dtype=np.float32,
                    initial_value=ng.uniform([A, B], -2.0, -1.0, seed=11, dtype=np.float32))
    f = transformer.computation(w)
    first, again = f(), f()
    expected = np.random.default_rng(11).uniform(-2.0, -1.0, (3, 2)).astype(np.float32)
    np.testing.assert_array_equal(first, expected)
    np.testing.assert_array_equal(again, expected)


def test_initial_value_op_reading_a_placeholder_is_refused(A):
    x = ng.placeholder([A], name="fed_x")
    with pytest.raises(ng.FeedError) as info:
        ng.variable([A], initial_value=x * 2, name="from_fed")  # @from-placeholder
    assert "fed_x" in info.value.message and "from_fed" in info.value.message
    assert_location(info.value, "@from-placeholder")


def test_initial_value_op_reading_a_variable_without_value_is_refused(A):
    empty = ng.variable([A], name="empty_w")
    with pytest.raises(ng.GraphError) as info:
        ng.variable([A], initial_value=empty + 1)  # @from-empty
    assert "empty_w" in info.value.message and "no initial value" in info.value.message
    assert_location(info.value, "@from-empty")


def test_initial_value_op_that_writes_a_tensor_is_refused(A):
    stored = ng.persistent_tensor([A], initial_value=0.0, name="refilled")
    with pytest.raises(ng.GraphError) as info:
        ng.variable([A], initial_value=ng.uniform(stored))  # @from-refill
    assert "refilled" in info.value.message
    assert_location(info.value, "@from-refill")
    assigned = ng.variable([A], initial_value=1.0, name="assigned_w")
    ng.assign(assigned, assigned + 1)
    with pytest.raises(ng.GraphError, match="assigned_w"):
        ng.variable([A], initial_value=assigned * 2)


def test_initial_value_op_with_extra_axes_or_for_a_constant_is_refused(A, B):
    with pytest.raises(ng.IncompatibleAxesError) as info:
        ng.variable([A], initial_value=ng.constant(np.ones((3, 2)), [A, B]))  # @extra-axes
    assert "B" in info.value.message
    assert_location(info.value, "@extra-axes")
    with pytest.raises(ng.GraphError, match="constant"):
        ng.constant(ng.constant(1.0) * 2)


# -- shape functions ------------------------------------------------------------------------

def test_expand_dims_inserts_the_axis_at_the_position(transformer, A, B):
    C = ng.make_axis(length=4, name="C")
    xv = np.arange(6.0).reshape(3, 2)
    x = ng.placeholder([A, B])
    middle, last, before_last = (ng.expand_dims(x, C, 1), ng.expand_dims(x, C, 2),
                                 ng.expand_dims(x, C, -1))
    assert middle.axes == ng.make_axes([A, C, B]) and last.axes == ng.make_axes([A, B, C])
    assert before_last.axes == ng.make_axes([A, C, B])
    assert ng.expand_dims(x, A, 0) is x
    values = transformer.computation([middle, last], x)(xv)
    np.testing.assert_array_equal(values[0], np.repeat(xv[:, None, :], 4, axis=1))
    np.testing.assert_array_equal(values[1], np.repeat(xv[:, :, None], 4, axis=2))


def test_expand_dims_derivative_sums_over_the_new_axis(transformer, A):
    C = ng.make_axis(length=4, name="C")
    x = ng.placeholder([A], dtype=np.float64)
    weights = ng.constant(np.arange(12.0).reshape(4, 3), [C, A])
    cost = ng.sum(ng.expand_dims(x, C, 0) * weights, reduction_axes=[C, A])
    gradient = transformer.computation(ng.deriv(cost, x), x)(np.ones(3))
    np.testing.assert_array_equal(gradient, np.arange(12.0).reshape(4, 3).sum(axis=0))


def test_expand_dims_position_out_of_range_is_refused(A):
    C = ng.make_axis(length=4, name="C")
    x = ng.placeholder([A], name="short_x")
    with pytest.raises(ng.IncompatibleAxesError) as info:
        ng.expand_dims(x, C, 3)  # @expand-far
    assert "short_x" in info.value.message
    assert_location(info.value, "@expand-far")
    with pytest.raises(ng.AxesError):
        ng.expand_dims(x, "C", 0)


def test_dimshuffle_reorders_axes(transformer, A, B):
    xv = np.arange(6.0).reshape(3, 2)
    x = ng.placeholder([A, B])
    y = ng.dimshuffle(x, [B, A])
    assert y.axes == ng.make_axes([B, A])
    np.testing.assert_array_equal(transformer.computation(y, x)(xv), xv.T)


def test_tensor_slice_takes_a_list_of_per_axis_slices(transformer, A, B):
    xv = np.arange(6.0).reshape(3, 2)
    x = ng.placeholder([A, B])
    flipped = ng.tensor_slice(x, [slice(None), slice(None, None, -1)])
    row = x[[1, slice(None)]]
    values = transformer.computation([flipped, row], x)(xv)
    np.testing.assert_array_equal(values[0], xv[:, ::-1])
    np.testing.assert_array_equal(values[1], xv[1, :])


# -- fill and init_tensor -----------------------------------------------------------------

def test_fill_sets_every_element(transformer, A, B):
    t = ng.persistent_tensor([A, B], initial_value=np.arange(6.0).reshape(3, 2))
    fill = ng.fill(t, 2.5)
    assert fill.scalar == 2.5 and not fill.is_tensor_op
    assert transformer.computation(fill)() is None
    np.testing.assert_array_equal(transformer.computation(t)(), np.full((3, 2), 2.5))
    ng.fill(t, ng.constant(-1.0))
    np.testing.assert_array_equal(transformer.computation(t * 1)(), np.full((3, 2), -1.0))


def test_fill_refuses_constants_arrays_and_non_numbers(A):
    constant = ng.constant(np.ones(3), [A], name="fixed_c")
    with pytest.raises(ng.GraphError) as info:
        ng.fill(constant, 0.0)  # @fill-constant
    assert "fixed_c" in info.value.message
    assert_location(info.value, "@fill-constant")
    t = ng.persistent_tensor([A], initial_value=0.0, name="filled_t")
    with pytest.raises(ng.GraphError, match="filled_t"):
        ng.fill(t, np.ones(3))
    with pytest.raises(ng.DTypeError, match="filled_t"):
        ng.fill(t, "1")
    with pytest.raises(ng.GraphError, match="constant scalar"):
        ng.fill(t, ng.placeholder(()))


def test_init_tensor_writes_a_host_value(transformer, A, B):
    t = ng.persistent_tensor([A, B], dtype=np.float32)
    seen = []

    def valfun(tensor):
        seen.append(tensor)
        return np.arange(6.0).reshape(tensor.axes.lengths)

    init = ng.init_tensor(t, valfun)
    value = transformer.computation(init)()
    np.testing.assert_array_equal(value, np.arange(6.0).reshape(3, 2))
    assert value.dtype == np.float32 and seen and all(s is t for s in seen)
    np.testing.assert_array_equal(transformer.computation(t)(), np.arange(6.0).reshape(3, 2))


# -- random draws into a stored tensor -------------------------------------------------------

def test_uniform_of_a_stored_tensor_fills_it(transformer, A, B):
    t = ng.persistent_tensor([A, B], dtype=np.float32, initial_value=10.0)
    u = ng.uniform(t, 0.5, 0.75, seed=5)
    assert u.axes == t.axes and u.dtype == np.float32
    f = transformer.computation([u, t])
    rng = np.random.default_rng(5)
    for _ in range(2):  # fresh draws on every call
        expected = rng.uniform(0.5, 0.75, (3, 2)).astype(np.float32)
        drawn, stored = f()
        np.testing.assert_array_equal(drawn, expected)
        np.testing.assert_array_equal(stored, expected)


def test_uniform_of_a_tensor_without_value_works_as_a_dropout_mask(transformer, A):
    mask = ng.persistent_tensor([A])
    keep = ng.uniform(mask, 0.0, 1.0, seed=3) <= 0.5
    expected = np.random.default_rng(3).uniform(0.0, 1.0, 3).astype(np.float32) <= 0.5
    np.testing.assert_array_equal(transformer.computation(keep)(), expected)


def test_normal_and_uniform_of_a_computed_op_take_its_axes(transformer, A, B):
    x = ng.placeholder([B, A], dtype=np.float64)
    n = ng.normal(x * 2, 1.0, 0.5, seed=9)
    assert n.axes == x.axes and n.dtype == np.float64
    value = transformer.computation(n, x)(np.zeros((2, 3)))
    np.testing.assert_array_equal(value, np.random.default_rng(9).normal(1.0, 0.5, (2, 3)))


def test_uniform_of_an_integer_tensor_is_refused(A):
    t = ng.persistent_tensor([A], dtype=np.int32, name="counts")
    with pytest.raises(ng.DTypeError, match="counts"):
        ng.uniform(t)


# -- spatial_axis --------------------------------------------------------------------------

def test_spatial_axis_matches_the_convolution_output(transformer):
    C = ng.make_axis(length=2, name="C", roles=[ar.Channel])
    H = ng.make_axis(length=7, name="H", roles=[ar.Height])
    W = ng.make_axis(length=6, name="W", roles=[ar.Width])
    N = ng.make_axis(length=1, name="N", batch=True)
    R = ng.make_axis(length=3, name="R", roles=[ar.Height])
    S = ng.make_axis(length=2, name="S", roles=[ar.Width])
    K = ng.make_axis(length=1, name="K", roles=[ar.Channelout])
    P = ng.spatial_axis([C, H, W, N], [C, R, S, K], 1, 2, role=ar.Height)
    Q = ng.spatial_axis([C, H, W, N], 2, 0, 1, role=ar.Width)
    assert (P.length, Q.length) == ((7 + 2 - 3) // 2 + 1, 6 - 2 + 1)
    assert ar.Height in P.roles and ar.Width in Q.roles
    x = ng.constant(np.ones((2, 7, 6, 1)), [C, H, W, N])
    w = ng.constant(np.ones((2, 3, 2, 1)), [C, R, S, K])
    y = ng.convolution({"pad_h": 1, "str_h": 2, "pad_w": 0, "str_w": 1}, x, w,
                       axes=[K, P, Q, N])
    value = transformer.computation(y)()
    assert value.shape == (1, 4, 5, 1)
    # Output row p reads input rows 2p - 1 .. 2p + 1 of 0..6: rows 0 and 3 hang one row
    # into the padding (2 channels x 2 rows x 2 columns of ones), rows 1 and 2 do not.
    np.testing.assert_array_equal(value[0, :, :, 0], np.repeat([[8.0], [12.0], [12.0], [8.0]],
                                                               5, axis=1))


def test_spatial_axis_errors(A):
    H = ng.make_axis(length=4, name="H", roles=[ar.Height])
    with pytest.raises(ng.UnmatchedAxesError) as info:
        ng.spatial_axis([A], 2, 0, 1, role=ar.Height)  # @no-role
    assert "Height" in info.value.message
    assert_location(info.value, "@no-role")
    with pytest.raises(ng.IncompatibleAxesError, match="padding"):
        ng.spatial_axis([H], 2, "1", 1, role=ar.Height)
    with pytest.raises(ng.IncompatibleAxesError, match="does not fit"):
        ng.spatial_axis([H], 7, 1, 1, role=ar.Height)
    with pytest.raises(ng.AxisLengthError, match="length"):
        ng.spatial_axis([ng.make_axis(name="U", roles=[ar.Height])], 2, 0, 1, role=ar.Height)


# -- constants and small helpers ---------------------------------------------------------------

def test_constant_helpers(transformer, A):
    c = ng.constant(np.arange(3.0), [A])
    scalar = ng.constant(2.0)
    stored = ng.constant_storage([A], dtype=np.float32, initial_value=lambda axes: np.ones(3) * 4)
    v = ng.variable([A], initial_value=1.0)
    assert ng.is_constant(c) and ng.is_constant(stored) and ng.is_constant(scalar)
    assert not ng.is_constant(v) and not ng.is_constant(3.0)
    assert ng.is_constant_scalar(scalar) and not ng.is_constant_scalar(c)
    np.testing.assert_array_equal(ng.constant_value(c), np.arange(3.0))
    np.testing.assert_array_equal(ng.constant_value(stored), np.full(3, 4.0))
    assert ng.constant_value(scalar) == 2.0
    np.testing.assert_array_equal(transformer.computation(stored + c)(), 4.0 + np.arange(3.0))
    with pytest.raises(ng.GraphError) as info:
        ng.constant_value(v)  # @not-constant
    assert v.name in info.value.message
    assert_location(info.value, "@not-constant")
    with pytest.raises(ng.GraphError, match="initial_value"):
        ng.constant_storage([A])


def test_as_op_as_ops_and_named(A):
    x = ng.placeholder([A])
    assert ng.as_op(x) is x
    three = ng.as_op(3)
    assert ng.is_constant_scalar(three) and ng.constant_value(three) == 3
    ops = ng.as_ops([x, 1.5])
    assert isinstance(ops, tuple) and ops[0] is x and ng.constant_value(ops[1]) == 1.5
    with pytest.raises(TypeError, match="ng.constant"):
        ng.as_op(np.ones(3))
    y = (x * 2).named("doubled")
    assert y.name == "doubled" and isinstance(y, ng.Op)


def test_full_lengths_nest_flattened_axes(A, B):
    C = ng.make_axis(length=4, name="C")
    axes = ng.make_axes([ng.FlattenedAxis.of([A, B]), C])
    assert axes.full_lengths == ((3, 2), 4)
    assert axes.lengths == (6, 4)
    assert ng.make_axes([A, B]).full_lengths == (3, 2)


# -- PrintOp -------------------------------------------------------------------------------

def test_print_op_prints_and_passes_the_value(transformer, capsys, A):
    xv = np.array([1.0, -2.0, 3.5])
    x = ng.placeholder([A])
    shown = ng.PrintOp(x * 2, "doubled")
    f = transformer.computation(shown + 1, x)
    capsys.readouterr()
    for _ in range(2):
        np.testing.assert_array_equal(f(xv), xv * 2 + 1)
        assert capsys.readouterr().out == printed(("doubled", xv * 2))


def test_print_ops_print_in_program_order_even_when_unused(transformer, capsys, A):
    xv = np.arange(3.0)
    x = ng.placeholder([A])
    first = ng.PrintOp(ng.constant(5.0), "five")          # a constant: nothing folds it
    again = ng.PrintOp(ng.constant(5.0), "five")          # identical: nothing merges them
    unused = ng.PrintOp(x, "only for its effect")
    f = transformer.computation(first + again + x, x)
    capsys.readouterr()
    for _ in range(2):  # printed when run, on every call (not once when compiled)
        np.testing.assert_array_equal(f(xv), xv + 10)
        assert capsys.readouterr().out == printed(("five", np.float32(5.0)),
                                                  ("five", np.float32(5.0)))
    # sequential runs its first op (whose value nobody uses) before the rest
    g = transformer.computation(ng.sequential([unused, first + again + x]), x)
    np.testing.assert_array_equal(g(xv), xv + 10)
    assert capsys.readouterr().out == printed(("only for its effect", xv), ("five", np.float32(5.0)),
                                              ("five", np.float32(5.0)))


def test_print_op_without_prefix_and_as_a_result(transformer, capsys, A):
    x = ng.placeholder([A], dtype=np.int32)
    f = transformer.computation(ng.PrintOp(x), x)
    capsys.readouterr()
    np.testing.assert_array_equal(f(np.array([4, 5, 6], dtype=np.int32)), [4, 5, 6])
    assert capsys.readouterr().out == printed((None, np.array([4, 5, 6], dtype=np.int32)))


def test_print_op_derivative_passes_through(transformer, capsys, A):
    xv = np.array([0.5, 1.0, -1.5])
    x = ng.placeholder([A], dtype=np.float64)
    cost = ng.sum(ng.PrintOp(x * x, "square") * 3, reduction_axes=[A])
    f = transformer.computation([cost, ng.deriv(cost, x)], x)
    capsys.readouterr()
    value, gradient = f(xv)
    assert value == pytest.approx(3 * np.sum(xv * xv))
    np.testing.assert_array_equal(gradient, 6 * xv)
    assert capsys.readouterr().out == printed(("square", xv * xv))


def test_print_op_inside_a_large_fused_expression(transformer, capsys):
    L = ng.make_axis(length=1 << 16, name="L")
    xv = np.linspace(-1.0, 1.0, 1 << 16, dtype=np.float32)
    x = ng.placeholder([L])
    inner = ng.PrintOp(x * 2 + 1, "inner")  # exact in float32: the same text everywhere
    f = transformer.computation(ng.tanh(inner * inner - x), x)
    capsys.readouterr()
    expected_inner = xv * 2 + 1
    ng.testing.assert_allclose(f(xv), np.tanh(expected_inner * expected_inner - xv))
    assert capsys.readouterr().out == printed(("inner", expected_inner))


def test_print_op_needs_a_value(A):
    t = ng.variable([A], initial_value=0.0)
    with pytest.raises(ng.GraphError) as info:
        ng.PrintOp(ng.assign(t, 1.0))  # @print-assign
    assert "AssignOp" in info.value.message
    assert_location(info.value, "@print-assign")


def test_print_op_is_a_host_call_in_the_cpu_program(capsys, A):
    x = ng.placeholder([A])
    with ng.make_transformer("cpu") as t:
        f = t.computation(ng.PrintOp(ng.exp(x), "e") * 2, x)
        f(np.zeros(3, dtype=np.float32))
        assert [n.op for n in f.function.nodes].count("Print") == 1
        assert "Print" in f.source


# -- testing.assert_allclose ---------------------------------------------------------------------

def test_assert_allclose_uses_the_looser_type_in_either_order():
    single = np.float32(1.0) + np.float32(2.0 ** -22)  # off by 2.4e-7: fine for float32
    double = np.float64(1.0)
    ng.testing.assert_allclose(single, double)
    ng.testing.assert_allclose(double, single)
    for a, b in ((np.float32(1.001), double), (double, np.float32(1.001))):
        with pytest.raises(AssertionError):
            ng.testing.assert_allclose(a, b)
    with pytest.raises(AssertionError):  # two float64s are held to float64's tolerance
        ng.testing.assert_allclose(np.float64(1.0 + 1e-7), double)


def test_passes_keep_host_prints(capsys):
    from axgraph import core, passes
    from axgraph.core.host import Print

    x = core.Parameter(core.f64, (2,))
    c = core.Constant(core.f64, (2,), np.array([1.0, 2.0]))
    twice = core.Add(Print(x, "p"), Print(x, "p"))  # identical: CSE must not merge them
    folded = Print(c, "c")                            # constant: folding must not run it
    function = core.Function([core.Add(twice, folded)], [x])
    optimized = passes.optimize(function)
    assert capsys.readouterr().out == ""  # nothing printed while compiling
    assert [n.op for n in optimized.nodes].count("Print") == 3
    for backend in ("interpreter", "cpu"):
        (value,) = core.compile(optimized, backend)(np.array([3.0, 4.0]))
        np.testing.assert_array_equal(value, [7.0, 10.0])
        out = capsys.readouterr().out
        assert sorted(out.splitlines()) == sorted(
            printed(("p", np.array([3.0, 4.0])), ("p", np.array([3.0, 4.0])),
                    ("c", np.array([1.0, 2.0]))).splitlines())


# -- tensor ops: shape, has_axes, shape_dict, value, generate_add_delta --------------------------

def test_shape_is_the_axes_and_has_axes_is_a_property(A, B):
    x = ng.placeholder([A, B])
    assert x.shape is x.axes and isinstance(x.shape, ng.Axes) and x.shape.lengths == (3, 2)
    assert x.has_axes and ng.sum(x, out_axes=()).has_axes  # a scalar's axes are empty, but set
    w = ng.variable([A], initial_value=0)
    assert not ng.assign(w, 1.0).has_axes
    scoped = ng.placeholder([ng.make_axis(4, name="ax.C"), B])
    assert scoped.shape_dict() == {"C": 4, "B": 2} and x.shape_dict() == {"A": 3, "B": 2}


def test_value_reads_and_writes_a_stored_tensor(transformer, A, B):
    start = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    w = ng.variable([A, B], initial_value=start)
    double = transformer.computation(w * 2.0)
    np.testing.assert_array_equal(w.value.get(None), start)  # initialized on first use
    w.value[()] = np.ones((3, 2))
    np.testing.assert_array_equal(double(), 2 * np.ones((3, 2)))
    w.value[1] = np.array([5, 7], dtype=np.int64)  # ints into a float tensor: same_kind
    expected = np.ones((3, 2), np.float32)
    expected[1] = [5, 7]
    np.testing.assert_array_equal(np.asarray(w.value), expected)
    assert w.value[1, 1] == 7.0 and w.value.dtype == np.float32
    into = np.zeros((3, 2), np.float32)
    assert w.value.get(into) is into and np.array_equal(into, expected)
    np.testing.assert_array_equal(double(), 2 * expected)
    update = ng.assign(w, w + 1.0)
    transformer.computation(update)()
    np.testing.assert_array_equal(w.value.get(None), expected + 1)


def test_value_refuses_what_does_not_fit(transformer, A, B):
    counts = ng.variable([A], dtype=np.int32, initial_value=0)
    transformer.computation(counts + 1)
    with pytest.raises(ng.FeedError, match="int32"):
        counts.value[()] = np.array([0.5, 1.5, 2.5])
    with pytest.raises(ng.FeedError, match="does not fit"):
        counts.value[()] = np.array([2 ** 40, 0, 0])
    with pytest.raises(ng.FeedError, match="counts|variable") as info:
        counts.value[()] = np.ones((2, 2), np.int32)
    assert "test_nervana_api.py" in str(info.value)
    with pytest.raises(ng.FeedError):
        counts.value.get(np.zeros(3, np.float32))
    np.testing.assert_array_equal(counts.value.get(None), [0, 0, 0])


def test_value_of_what_no_single_transformer_stores_is_refused(backend, A):
    x = ng.placeholder([A])
    w = ng.variable([A], initial_value=1.0)
    total = w + x
    with pytest.raises(ng.GraphError, match="only a stored tensor") as info:
        total.value  # noqa: B018 - the property raises
    assert info.value.location == total.location
    with pytest.raises(ng.GraphError, match="no open transformer"):
        w.value  # noqa: B018
    with ng.make_transformer(backend) as first, ng.make_transformer(backend) as second:
        first.computation(total, x)
        np.testing.assert_array_equal(w.value.get(None), np.ones(3))
        second.computation(w * 3.0)
        with pytest.raises(ng.GraphError, match="2 open transformers"):
            w.value  # noqa: B018
        second.close()
        np.testing.assert_array_equal(w.value.get(None), np.ones(3))
    with pytest.raises(ng.GraphError, match="only a stored tensor"):
        x.value  # noqa: B018 - a fed value lasts one call


def test_generate_add_delta_stores_then_sums_contributions(transformer, A, B):
    x = ng.placeholder([A, B])
    adjoints = {}
    first = ng.constant(np.arange(6.0).reshape(3, 2), [A, B])
    second = ng.constant(np.full((2, 3), 10.0), [B, A])  # any order of the same axes
    assert x.generate_add_delta(adjoints, first) is None and adjoints[x] is first
    x.generate_add_delta(adjoints, second)
    got = transformer.computation(ng.axes_with_order(adjoints[x], [A, B]))()
    np.testing.assert_allclose(got, np.arange(6.0).reshape(3, 2) + 10.0)
    with pytest.raises(ng.IncompatibleAxesError, match="generate_add_delta") as info:
        x.generate_add_delta(adjoints, ng.constant(np.ones(3), [A]))  # @bad-delta
    assert_location(info.value, "@bad-delta")


# -- computations and transformers --------------------------------------------------------------

class Unrunnable(ng.Op):
    """An op no transformer has a kernel for."""

    dtype_of_arg = 0

    def __init__(self, x):
        super().__init__(x)

    def infer_axes(self):
        return self.args[0].axes


def test_computation_returns_what_it_was_given(transformer, A):
    x = ng.placeholder([A])
    y, z = x + 1.0, x * 2.0
    assert transformer.computation(y, x).returns is y
    assert transformer.computation([y, z], x).returns == (y, z)
    assert transformer.computation((z, y), x).returns == (z, y)
    assert transformer.computation({y, z}, x).returns == {y, z}


def test_transform_prepares_a_computation_and_reports_a_missing_kernel_before_a_call(
        transformer, A):
    x = ng.placeholder([A])
    computation = transformer.computation(ng.exp(x) * 2.0, x)
    assert computation.transform() is None
    computation.transform()  # again: nothing more to do
    data = np.array([0.0, 1.0, -1.0], np.float32)
    np.testing.assert_allclose(computation(data), np.exp(data) * 2.0, rtol=1e-6)
    broken = transformer.computation(Unrunnable(x) + 1.0, x)  # @unrunnable
    with pytest.raises(ng.AxgraphError, match="cannot run Unrunnable") as info:
        broken.transform()
    assert_location(info.value, "@unrunnable")
    assert 'docs/architecture.md, section "Adding an op"' in str(info.value)
    transformer.close()
    with pytest.raises(ng.TransformerClosedError):
        computation.transform()


def test_computations_and_all_results(transformer, A):
    x = ng.placeholder([A])
    w = ng.variable([A], initial_value=0.0)
    y = x + w
    first = transformer.computation(y, x)
    update = ng.assign(w, w + 1.0)
    second = transformer.computation(w)
    assert transformer.computations == [first, second]
    assert list(transformer.all_results) == [y, x, w, update]
    assert transformer.all_results is not transformer.all_results  # a fresh set each time
    np.testing.assert_array_equal(second(), np.ones(3))  # w's pending update ran


def test_nameable_value_is_the_base_of_ops(A):
    from axgraph.types import NameableValue

    x = ng.placeholder([A])
    assert isinstance(x, NameableValue) and isinstance(ng.exp(x), NameableValue)
    assert ng.types.NameableValue is NameableValue
    assert ng.exp(x).name.startswith("Exp_") and ng.exp(x).name != ng.exp(x).name


# -- sizes known while the graph is built ----------------------------------------------------------

def test_batch_size_and_tensor_size_of_known_lengths_are_constants(transformer, A):
    N = ng.make_axis(4, name="N")
    x = ng.placeholder([A, N])
    batch, size, both = ng.batch_size(x), ng.tensor_size(x), ng.tensor_size(x, out_axes=())
    assert all(ng.is_constant(op) for op in (batch, size, both))
    assert [float(v) for v in transformer.computation([batch, size, both])()] == [4, 3, 12]
    assert ng.batch_size(x, dtype=np.int32).dtype == np.int32
    M = ng.make_axis(name="N")  # its length comes from the data fed
    y = ng.placeholder([A, M])
    unknown = ng.batch_size(y)
    assert not ng.is_constant(unknown)
    got = transformer.computation(unknown, y)(np.zeros((3, 7), np.float32))
    assert float(got) == 7.0


# -- cross entropies: v0.4's enable_diff_opt ------------------------------------------------------

def _softmax(values):
    shifted = np.exp(values - values.max(axis=0))
    return shifted / shifted.sum(axis=0)


@pytest.mark.parametrize("diff_opt", [True, False])
def test_cross_entropy_multi_with_either_enable_diff_opt(transformer, rng, diff_opt):
    C, N = ng.make_axis(4, name="C"), ng.make_axis(3, name="N")
    x, t = ng.placeholder([C, N], dtype=np.float64), ng.placeholder([C, N], dtype=np.float64)
    loss = ng.cross_entropy_multi(ng.softmax(x), t, enable_diff_opt=diff_opt)
    cost = ng.sum(loss, out_axes=())
    xv = rng.normal(size=(4, 3))
    tv = np.eye(4)[:, [2, 0, 3]]
    got_loss, got_grad = transformer.computation([loss, ng.deriv(cost, x)], x, t)(xv, tv)
    probabilities = _softmax(xv)
    np.testing.assert_allclose(got_loss, -(tv * np.log(probabilities)).sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(got_grad, probabilities - tv, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("diff_opt", [True, False])
def test_cross_entropy_binary_with_either_enable_diff_opt(transformer, rng, diff_opt):
    F, N = ng.make_axis(2, name="F"), ng.make_axis(5, name="N")
    x, t = ng.placeholder([F, N], dtype=np.float64), ng.placeholder([F, N], dtype=np.float64)
    loss = ng.cross_entropy_binary(ng.sigmoid(x), t, out_axes=[N], enable_diff_opt=diff_opt)
    cost = ng.sum(loss, out_axes=())
    xv, tv = rng.normal(size=(2, 5)), rng.uniform(size=(2, 5))
    got_loss, got_grad = transformer.computation([loss, ng.deriv(cost, x)], x, t)(xv, tv)
    y = 1.0 / (1.0 + np.exp(-xv))
    expected = -(tv * np.log(y) + (1 - tv) * np.log(1 - y)).sum(axis=0)
    np.testing.assert_allclose(got_loss, expected, rtol=1e-12)
    np.testing.assert_allclose(got_grad, y - tv, rtol=1e-10, atol=1e-14)


def test_enable_diff_opt_must_be_a_bool(A):
    y = ng.softmax(ng.placeholder([A]))
    with pytest.raises(ng.AxgraphTypeError, match="enable_diff_opt"):
        ng.cross_entropy_multi(y, y, enable_diff_opt="yes")
    with pytest.raises(ng.AxgraphTypeError, match="enable_diff_opt"):
        ng.cross_entropy_binary(y, y, enable_diff_opt=None)
