"""Misuse raises the documented error class, names the op/axes, and points at user code.

Every bad call below ends with a `# @marker` comment; `line_of(marker)` finds
that line in this file, and the error's `.location` must be (this file, that line).
"""
import os
import pathlib

import numpy as np
import pytest

import axgraph as ng



def line_of(marker: str) -> int:
    with open(__file__) as source:
        for number, text in enumerate(source, 1):
            if text.rstrip().endswith("# " + marker):
                return number
    raise LookupError(marker)


def assert_location(error, marker: str) -> None:
    assert error.location is not None, f"{type(error).__name__} has no location: {error}"
    path, line = error.location
    assert os.path.realpath(path) == os.path.realpath(__file__)
    assert line == line_of(marker)
    assert f"{line}" in str(error)


@pytest.fixture
def axes():
    return (ng.make_axis(length=2, name="H"), ng.make_axis(length=3, name="W"),
            ng.make_axis(length=4, name="N"))


# -- axes errors ----------------------------------------------------------------------

REDUCTIONS = [("sum", ng.sum), ("max", ng.max), ("min", ng.min), ("prod", ng.prod),
              ("argmax", ng.argmax), ("mean", ng.mean)]


@pytest.mark.parametrize("what, reduce", REDUCTIONS, ids=[w for w, _ in REDUCTIONS])
def test_unmatched_reduction_axes(axes, what, reduce):
    H, W, N = axes
    x = ng.placeholder([H, W], name="reduced_x")
    with pytest.raises(ng.UnmatchedAxesError) as info:
        reduce(x, reduction_axes=[N])  # @bad-reduction
    error = info.value
    assert isinstance(error, ng.AxesError) and isinstance(error, ValueError)
    assert what in error.message.lower()
    assert "reduced_x" in error.message
    assert "N" in error.message
    assert_location(error, "@bad-reduction")


def test_unmatched_out_axes(axes):
    H, W, N = axes
    x = ng.placeholder([H, W], name="out_x")
    with pytest.raises(ng.UnmatchedAxesError) as info:
        ng.sum(x, out_axes=[N])  # @bad-out-axes
    assert "out_x" in info.value.message and "N" in info.value.message
    assert_location(info.value, "@bad-out-axes")


def test_broadcast_to_axes_missing_some(axes):
    H, W, N = axes
    x = ng.placeholder([H, W], name="bcast_x")
    with pytest.raises(ng.UnmatchedAxesError) as info:
        ng.broadcast(x, [H, N])  # @bad-broadcast
    error = info.value
    assert "broadcast" in error.message
    assert "bcast_x" in error.message
    assert "W" in error.message  # the axis the new axes lack
    assert_location(error, "@bad-broadcast")


def test_cast_axes_with_wrong_lengths(axes):
    H, W, N = axes
    x = ng.placeholder([H, W], name="cast_x")
    A = ng.make_axis(length=3, name="Alpha")
    B = ng.make_axis(length=2, name="Beta")
    with pytest.raises(ng.IncompatibleAxesError) as info:
        ng.cast_axes(x, [A, B])  # @bad-cast-lengths
    error = info.value
    assert "cast_axes" in error.message
    assert "cast_x" in error.message
    assert "H" in error.message and "Alpha" in error.message
    assert_location(error, "@bad-cast-lengths")


def test_cast_axes_with_wrong_number_of_axes(axes):
    H, W, N = axes
    x = ng.placeholder([H, W], name="cast_y")
    with pytest.raises(ng.IncompatibleAxesError) as info:
        ng.cast_axes(x, [ng.make_axis(length=6, name="Flat")])  # @bad-cast-count
    assert "cast_y" in info.value.message
    assert_location(info.value, "@bad-cast-count")


def test_duplicate_axis_in_make_axes(axes):
    H, W, N = axes
    with pytest.raises(ng.DuplicateAxisError) as info:
        ng.make_axes([H, W, H])  # @bad-dup-axes
    assert isinstance(info.value, ValueError)
    assert "H" in info.value.message
    assert_location(info.value, "@bad-dup-axes")


def test_duplicate_axis_in_constant(axes):
    H, W, N = axes
    with pytest.raises(ng.DuplicateAxisError) as info:
        ng.constant(np.ones((2, 2)), [H, H])  # @bad-dup-constant
    assert "H" in info.value.message
    assert_location(info.value, "@bad-dup-constant")


def test_duplicate_axis_in_placeholder(axes):
    H, W, N = axes
    with pytest.raises(ng.DuplicateAxisError) as info:
        ng.placeholder([W, H, W])  # @bad-dup-placeholder
    assert "W" in info.value.message
    assert_location(info.value, "@bad-dup-placeholder")


# -- graph errors -----------------------------------------------------------------------

def test_assign_to_a_constant(axes):
    H, W, N = axes
    c = ng.constant(np.zeros(2), [H], name="the_constant")
    with pytest.raises(ng.GraphError) as info:
        ng.assign(c, 1.0)  # @bad-assign-constant
    error = info.value
    assert isinstance(error, ValueError)
    assert "the_constant" in error.message
    assert "constant" in error.message
    assert_location(error, "@bad-assign-constant")


def test_set_item_on_a_constant(axes):
    H, W, N = axes
    c = ng.constant(np.zeros(2), [H], name="the_constant_2")
    with pytest.raises(ng.GraphError) as info:
        ng.SetItem(c, c + c)  # @bad-setitem-constant
    assert "the_constant_2" in info.value.message
    assert_location(info.value, "@bad-setitem-constant")


# -- feed errors --------------------------------------------------------------------------

def test_feed_wrong_shape(transformer, axes):
    H, W, N = axes
    x = ng.placeholder([H, W], name="feed_x")
    comp = transformer.computation(x + 1, x)
    with pytest.raises(ng.FeedError) as info:
        comp(np.ones((3, 2)))  # @bad-feed-shape
    error = info.value
    assert isinstance(error, ValueError)
    assert "feed_x" in error.message
    assert "(3, 2)" in error.message
    assert_location(error, "@bad-feed-shape")
    np.testing.assert_array_equal(comp(np.ones((2, 3))), np.full((2, 3), 2.0))


def test_feed_wrong_number_of_dimensions(transformer, axes):
    H, W, N = axes
    x = ng.placeholder([H, W], name="feed_ndim")
    comp = transformer.computation(x + 1, x)
    with pytest.raises(ng.FeedError) as info:
        comp(np.ones(6))  # @bad-feed-ndim
    assert "feed_ndim" in info.value.message
    assert_location(info.value, "@bad-feed-ndim")


def test_feed_float_into_int_placeholder(transformer, axes):
    H, W, N = axes
    x = ng.placeholder([H], dtype=np.int32, name="int_x")
    comp = transformer.computation(x * 2, x)
    with pytest.raises(ng.FeedError) as info:
        comp(np.array([1.5, 2.0]))  # @bad-feed-dtype
    error = info.value
    assert isinstance(error, ValueError)
    assert "int_x" in error.message
    assert "int32" in error.message and "float64" in error.message
    assert_location(error, "@bad-feed-dtype")
    # ints are fine
    np.testing.assert_array_equal(comp(np.array([1, 3])), np.array([2, 6]))


def test_feed_missing_positional_argument(transformer, axes):
    H, W, N = axes
    x = ng.placeholder([H], name="needed_x")
    y = ng.placeholder([W], name="needed_y")
    comp = transformer.computation(x + y, x, y)
    with pytest.raises(ng.FeedError) as info:
        comp(np.ones(2))  # @bad-feed-missing
    error = info.value
    assert isinstance(error, ValueError)
    assert "needed_y" in error.message
    assert "needed_x" not in error.message
    assert_location(error, "@bad-feed-missing")


def test_feed_too_many_arguments(transformer, axes):
    H, W, N = axes
    x = ng.placeholder([H], name="only_x")
    comp = transformer.computation(x + 1, x)
    with pytest.raises(ng.FeedError) as info:
        comp(np.ones(2), np.ones(2))  # @bad-feed-too-many
    error = info.value
    assert isinstance(error, ValueError)
    assert "1" in error.message and "2" in error.message
    assert_location(error, "@bad-feed-too-many")


def test_feed_dict_of_an_unused_placeholder(transformer, axes):
    H, W, N = axes
    x = ng.placeholder([H], name="used_x")
    unused = ng.placeholder([W], name="unused_w")
    comp = transformer.computation(x + 1, x)
    with pytest.raises(ng.FeedError) as info:
        comp(np.ones(2), feed_dict={unused: np.ones(3)})  # @bad-feed-dict
    error = info.value
    assert isinstance(error, ValueError)
    assert "unused_w" in error.message
    assert_location(error, "@bad-feed-dict")


def test_axis_with_no_length_anywhere(transformer, axes):
    H, W, N = axes
    L = ng.make_axis(name="Lonely")
    x = ng.placeholder([H], name="short_x")
    b = ng.broadcast(x, [H, L], name="needs_lonely")  # @bad-no-length
    comp = transformer.computation(b, x)
    with pytest.raises(ng.FeedError) as info:
        comp(np.ones(2))
    error = info.value
    assert isinstance(error, ValueError)
    assert "Lonely" in error.message
    assert "needs_lonely" in error.message
    # The location is where the op needing the unknown length was built.
    assert_location(error, "@bad-no-length")


@pytest.mark.parametrize("error_class", [ng.FeedError])
def test_feed_errors_are_value_errors(error_class):
    assert issubclass(error_class, ValueError)
    assert issubclass(error_class, ng.AxgraphError)


def test_feed_error_caught_as_value_error(transformer, axes):
    H, W, N = axes
    x = ng.placeholder([H])
    comp = transformer.computation(x + 1, x)
    with pytest.raises(ValueError):
        comp(np.ones(5))


# -- reading a variable that has no value --------------------------------------------------

def test_reading_a_variable_with_no_initial_value_through_an_op(transformer, axes):
    H, W, N = axes
    v = ng.variable([H], name="no_init_var")  # @bad-no-init
    comp = transformer.computation(v + 1)
    with pytest.raises((ng.FeedError, ng.GraphError)) as info:
        comp()
    error = info.value
    assert isinstance(error, ValueError)
    assert "no_init_var" in error.message
    assert_location(error, "@bad-no-init")


def test_reading_a_variable_with_no_initial_value_directly(transformer, axes):
    H, W, N = axes
    v = ng.variable([H], name="no_init_var_2")  # @bad-no-init-direct
    comp = transformer.computation(v)
    with pytest.raises((ng.FeedError, ng.GraphError)) as info:
        comp()
    error = info.value
    assert "no_init_var_2" in error.message
    assert_location(error, "@bad-no-init-direct")


# -- arguments of the wrong kind (AxgraphTypeError, a TypeError) -----------------------------

def assert_error(error, error_class, builtin, marker: str, *words: str) -> None:
    """`error` is an `error_class`, also a `builtin`, names every word, points at `marker`."""
    assert isinstance(error, error_class) and isinstance(error, ng.AxgraphError)
    assert isinstance(error, builtin)
    for word in words:
        assert word in error.message, (word, error.message)
    assert_location(error, marker)


def test_numpy_array_as_an_operand(axes):
    H, W, N = axes
    x = ng.placeholder([W], name="array_x")
    with pytest.raises(ng.AxgraphTypeError) as info:
        x + np.ones(3)  # @bad-array-operand
    assert_error(info.value, ng.AxgraphTypeError, TypeError, "@bad-array-operand",
                 "NumPy array", "(3,)", "ng.constant")


def test_a_list_as_an_operand(axes):
    H, W, N = axes
    x = ng.placeholder([W])
    with pytest.raises(ng.AxgraphTypeError) as info:
        ng.multiply(x, [1, 2, 3])  # @bad-list-operand
    assert_error(info.value, ng.AxgraphTypeError, TypeError, "@bad-list-operand",
                 "list of 3 items", "ng.constant")


def test_non_axis_in_an_axes_list(axes):
    H, W, N = axes
    with pytest.raises(ng.AxgraphTypeError) as info:
        ng.placeholder([H, 3])  # @bad-non-axis
    assert_error(info.value, ng.AxgraphTypeError, TypeError, "@bad-non-axis",
                 "item 1", "H: 2", "int 3")


def test_computation_of_a_number(transformer):
    with pytest.raises(ng.AxgraphTypeError) as info:
        transformer.computation(5)  # @bad-computation
    assert_error(info.value, ng.AxgraphTypeError, TypeError, "@bad-computation",
                 "computation results", "int 5")


def test_computation_of_a_list_with_a_number(transformer, axes):
    H, W, N = axes
    x = ng.placeholder([H])
    with pytest.raises(ng.AxgraphTypeError) as info:
        transformer.computation([x, "y"], x)  # @bad-computation-item
    assert_error(info.value, ng.AxgraphTypeError, TypeError, "@bad-computation-item", "'y'")


def test_deriv_with_respect_to_a_number(axes):
    H, W, N = axes
    w = ng.variable([H], initial_value=1.0, name="deriv_w")
    cost = ng.sum(w * w)
    with pytest.raises(ng.AxgraphTypeError) as info:
        ng.deriv(cost, 5)  # @bad-deriv-wrt
    assert_error(info.value, ng.AxgraphTypeError, TypeError, "@bad-deriv-wrt", "wrt", "int 5")


def test_deriv_many_of_a_single_op(axes):
    H, W, N = axes
    w = ng.variable([H], initial_value=1.0, name="deriv_w2")
    with pytest.raises(ng.AxgraphTypeError) as info:
        ng.autodiff.deriv_many(ng.sum(w), w)  # @bad-deriv-many
    assert_error(info.value, ng.AxgraphTypeError, TypeError, "@bad-deriv-many", "list or tuple",
                 "deriv_w2")


def test_length_of_the_wrong_type():
    for bad in (2.5, "3"):
        with pytest.raises(ng.AxgraphTypeError) as info:
            ng.make_axis(length=bad, name="Wrong")  # @bad-length-type
        assert_error(info.value, ng.AxgraphTypeError, TypeError, "@bad-length-type",
                     "Wrong", repr(bad))


def test_complex_element_type(axes):
    H, W, N = axes
    with pytest.raises(ng.DTypeError) as info:
        ng.placeholder([H], dtype=np.complex64)  # @bad-complex
    assert_error(info.value, ng.AxgraphTypeError, TypeError, "@bad-complex", "complex64")


def test_a_name_that_is_not_a_string(axes):
    H, W, N = axes
    with pytest.raises(ng.AxgraphTypeError) as info:
        ng.placeholder([H], name=5)  # @bad-name
    assert_error(info.value, ng.AxgraphTypeError, TypeError, "@bad-name", "5")


def test_transformer_option_it_does_not_take():
    with pytest.raises(ng.AxgraphTypeError) as info:
        ng.make_transformer("interpreter", fast=True)  # @bad-transformer-option
    assert_error(info.value, ng.AxgraphTypeError, TypeError, "@bad-transformer-option",
                 "fast", "optimize")


# -- values that cannot be used (AxgraphValueError, a ValueError) ------------------------------

def test_unknown_transformer_name():
    with pytest.raises(ng.AxgraphValueError) as info:
        ng.make_transformer("nope")  # @bad-transformer
    assert_error(info.value, ng.AxgraphValueError, ValueError, "@bad-transformer",
                 "'nope'", *ng.transformer_choices())


def test_negative_axis_length():
    with pytest.raises(ng.AxisLengthError) as info:
        ng.make_axis(length=-1, name="Negative")  # @bad-length-negative
    assert_error(info.value, ng.AxesError, ValueError, "@bad-length-negative", "Negative", "-1")


def test_changing_the_length_of_an_axis():
    A = ng.make_axis(length=4, name="Fixed")
    with pytest.raises(ng.AxisLengthError) as info:
        A.length = 5  # @bad-length-change
    assert_error(info.value, ng.AxesError, ValueError, "@bad-length-change", "Fixed", "4", "5")
    assert A.length == 4
    B = ng.make_axis(name="Open")
    B.length = 5  # an axis without a length may get one
    assert B.length == 5


def test_dependency_cycle(transformer, axes):
    H, W, N = axes
    x = ng.placeholder([H], name="cycle_x")
    a = ng.exp(x, name="cycle_a")  # @cycle-first
    b = ng.log(a, name="cycle_b")
    a.other_deps.add(b)
    with pytest.raises(ng.GraphError) as info:
        transformer.computation(b, x)
    assert_error(info.value, ng.GraphError, ValueError, "@cycle-first",
                 "cycle", "cycle_a", "cycle_b")


# -- the same-name trap and derived axes ---------------------------------------------------------

def test_distinct_axes_with_one_name_in_an_elementwise_op():
    H1 = ng.make_axis(length=3, name="H")  # @first-H
    H2 = ng.make_axis(length=3, name="H")  # @second-H
    x = ng.placeholder([H1], name="left")
    y = ng.placeholder([H2], name="right")
    with pytest.raises(ng.IncompatibleAxesError) as info:
        x + y  # @bad-same-name
    error = info.value
    assert_error(error, ng.AxesError, ValueError, "@bad-same-name",
                 "Add", "left", "right", "ng.cast_axes", "ng.broadcast")
    # where each H was made
    name = os.path.basename(__file__)
    for marker in ("@first-H", "@second-H"):
        assert f"{name}:{line_of(marker)}" in error.message


def test_slices_of_one_axis_in_an_elementwise_op():
    A = ng.make_axis(length=4, name="A")
    x = ng.placeholder([A], name="series")
    with pytest.raises(ng.IncompatibleAxesError) as info:
        x[1:] - x[:-1]  # @bad-shifted-slices
    assert_error(info.value, ng.AxesError, ValueError, "@bad-shifted-slices",
                 "Subtract", "A[1:]: 3", "A[:3]: 3")


def test_assigning_a_reversed_slice_names_the_sliced_axis():
    A = ng.make_axis(length=4, name="A")
    w = ng.variable([A], initial_value=0.0, name="reversed_w")
    with pytest.raises(ng.IncompatibleAxesError) as info:
        ng.assign(w, w[::-1])  # @bad-assign-slice
    assert_error(info.value, ng.AxesError, ValueError, "@bad-assign-slice",
                 "reversed_w", "Axes(A: 4)", "Axes(A[::-1]: 4)")


# -- core IR arguments -------------------------------------------------------------------------

@pytest.fixture(params=["interpreter", "cpu"])
def core_add(request):
    from axgraph import core

    scale = core.Parameter(core.f32, ())
    x = core.Parameter(core.f32, (3, 4), name="x")
    function = core.Function([core.Multiply(core.Broadcast(scale, (3, 4), (0, 1)), x)],
                             [scale, x], name="scaled")
    return core.compile(function, backend=request.param)


def test_core_argument_of_the_wrong_shape(core_add):
    with pytest.raises(ng.FeedError) as info:
        core_add(np.float32(2), np.zeros((3, 5)))  # @bad-core-shape
    assert_error(info.value, ng.FeedError, ValueError, "@bad-core-shape",
                 "parameter 1 (x: f32[3, 4]) takes f32[3, 4]; got float64 (3, 5)")


def test_core_argument_of_the_wrong_dims(core_add):
    with pytest.raises(ng.FeedError) as info:
        core_add(np.float32(2), np.zeros((3, 5), np.float32))  # @bad-core-dims
    assert_error(info.value, ng.FeedError, ValueError, "@bad-core-dims",
                 "parameter 1 (x: f32[3, 4]) takes f32[3, 4]; got shape (3, 5): dim 1",
                 "4 vs 5")


def test_core_argument_of_the_wrong_rank(core_add):
    with pytest.raises(ng.FeedError) as info:
        core_add(np.float32(2), np.zeros(12, np.float32))  # @bad-core-rank
    assert_error(info.value, ng.FeedError, ValueError, "@bad-core-rank",
                 "parameter 1 (x: f32[3, 4])", "shape (12,)", "rank 1, not 2")


def test_core_wrong_number_of_arguments(core_add):
    with pytest.raises(ng.FeedError) as info:
        core_add(np.zeros((3, 4), np.float32))  # @bad-core-count
    assert_error(info.value, ng.FeedError, ValueError, "@bad-core-count",
                 "scaled takes 2 argument(s) (f32[], x: f32[3, 4]); got 1")


def test_core_argument_that_is_not_an_array(core_add):
    with pytest.raises(ng.FeedError) as info:
        core_add(2.0, np.zeros((3, 4), np.float32))  # @bad-core-type
    assert_error(info.value, ng.FeedError, ValueError, "@bad-core-type",
                 "parameter 0 (f32[]) takes a NumPy array; got float")


# -- the hierarchy ------------------------------------------------------------------------------

def test_every_public_error_is_an_axgraph_error_and_a_builtin():
    classes = [value for value in vars(ng).values()
               if isinstance(value, type) and issubclass(value, Exception)]
    assert ng.FeedError in classes and ng.AxgraphTypeError in classes
    for error_class in classes:
        assert issubclass(error_class, ng.AxgraphError)
        if error_class is ng.AxgraphError:
            continue  # the root: each subclass adds its builtin
        builtins = [base for base in error_class.__mro__
                    if base.__module__ == "builtins" and base not in (Exception, BaseException,
                                                                      object)]
        assert builtins, error_class
        # every TypeError is an AxgraphTypeError, every ValueError an AxgraphValueError
        assert issubclass(error_class, TypeError) == issubclass(error_class, ng.AxgraphTypeError)
        assert issubclass(error_class, ValueError) == issubclass(error_class,
                                                                 ng.AxgraphValueError)


def test_an_array_on_the_left_of_an_op_is_refused_too():
    A = ng.make_axis(length=3, name="A")
    x = ng.placeholder([A])
    with pytest.raises(ng.AxgraphTypeError) as info:
        np.ones(3) + x
    assert "test_errors.py" in str(info.value)
    assert (np.float32(2.0) * x).axes == ng.make_axes([A])  # NumPy scalars stay numbers


def test_a_set_of_non_ops_as_results_is_a_type_error(transformer):
    with pytest.raises(ng.AxgraphTypeError, match="must be ops"):
        transformer.computation({5})


def test_core_compile_refuses_bad_arguments_with_the_line():
    with pytest.raises(ng.AxgraphTypeError, match="core Function") as info:
        ng.core.compile(5)
    assert "test_errors.py" in str(info.value)
    a = ng.core.Parameter(ng.core.f32, (2,))
    f = ng.core.Function([ng.core.Negative(a)], [a])
    with pytest.raises(ng.AxgraphValueError, match="nope"):
        ng.core.compile(f, backend="nope")


def test_cpu_out_errors_name_the_line():
    A = ng.make_axis(length=3, name="A")
    x = ng.placeholder([A])
    with ng.make_transformer("cpu") as t:
        f = t.computation(x * 2.0, x)
        with pytest.raises(ng.FeedError) as info:
            f(np.ones(3, np.float32), out=np.empty(4, np.float32))
    assert "test_errors.py" in str(info.value)


def test_compile_options_a_backend_does_not_take_are_named_with_those_it_takes():
    from axgraph import core

    x = core.Parameter(core.f32, ("N",))
    f = core.Function([core.Multiply(x, x)], [x])
    with pytest.raises(ng.AxgraphTypeError, match=r"(?s)compile\(backend='cpu'\).*'foo'.*fuse.*"
                                                  r"test_errors"):
        core.compile(f, "cpu", foo=1)


@pytest.mark.parametrize("make", [lambda core: core.Shape(-1), lambda core: core.Shape(1.5),
                                  lambda core: core.Dim("1x"), lambda core: core.Dim("N") // 0])
def test_bad_dims_are_axgraph_errors_at_the_users_line(make):
    from axgraph import core

    with pytest.raises(ng.AxgraphError, match="test_errors"):
        make(core)


# -- two axes with one name, a renamed model, an op no transformer runs -------------------------

def test_reducing_over_another_axis_named_like_one_of_x_says_so_and_how_to_fix(transformer):
    H, W = ng.make_axis(3, name="H"), ng.make_axis(4, name="W")  # @x-height
    x = ng.placeholder([H, W], name="image")
    other_h = ng.make_axis(3, name="H")  # @other-height
    with pytest.raises(ng.UnmatchedAxesError) as info:
        ng.sum(x, reduction_axes=[other_h])  # @sum-other-height
    error = info.value
    assert_error(error, ng.UnmatchedAxesError, ValueError, "@sum-other-height",
                 "different axes named H", "pair by identity",
                 "reduction_axes=image.axes.find_by_name('H')", "ng.cast_axes")
    for marker in ("@x-height", "@other-height"):  # where each H was made
        assert f"H: 3 made at {__file__}:{line_of(marker)}" in error.message
    # The fix the message names works, and gives the sum over x's own H.
    fixed = ng.sum(x, reduction_axes=x.axes.find_by_name("H"))
    data = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(transformer.computation(fixed, x)(data), data.sum(axis=0))
    with pytest.raises(ng.UnmatchedAxesError, match="out_axes .*different axes named H"):
        ng.sum(x, out_axes=[other_h, W])
    with pytest.raises(ng.UnmatchedAxesError) as info:
        ng.sum(x, reduction_axes=[ng.make_axis(2, name="Z")])
    assert "different axes named" not in info.value.message  # a plain miss says no more


def test_elementwise_and_reduction_name_clashes_share_their_words():
    H = ng.make_axis(3, name="H")
    other_h = ng.make_axis(3, name="H")
    x, y = ng.placeholder([H]), ng.placeholder([other_h])
    with pytest.raises(ng.IncompatibleAxesError) as elementwise:
        x + y
    with pytest.raises(ng.UnmatchedAxesError) as reduction:
        ng.sum(x, reduction_axes=[other_h])
    from axgraph.axes import NameClash

    shared = NameClash.describe(NameClash.between(x.axes, y.axes))
    assert shared.startswith("different axes named H (H: 3 made at ")
    assert shared in elementwise.value.message and shared in reduction.value.message


def test_restoring_a_rebuilt_model_of_unnamed_layers_names_the_real_fix(tmp_path):
    from axgraph.frontends.neon import Affine, UniformInit
    from axgraph.serialization import restore_variables, save_variables

    F, N = ng.make_axis(3, name="F"), ng.make_axis(2, name="N")

    def build(name=None):
        x = ng.placeholder([F, N])
        layer = Affine(nout=2, weight_init=UniformInit(-1, 1), bias_init=0.5, name=name)
        return layer, layer(x)

    path = tmp_path / "model.npz"
    first, y = build()
    with ng.make_transformer() as transformer:
        save_variables(path, y.variables(), transformer)
        saved_w = transformer.computation(first.W)()
    again, y_again = build()  # the same model, built a second time: numbered anew
    with pytest.raises(ng.SerializationError) as info:
        restore_variables(path, y_again.variables())
    message = str(info.value)
    assert "strict=False does not help" in message
    assert "pass strict=False to ignore" not in message
    assert "name=" in message and "{name in the file: variable}" in message
    assert f"'{first.name}_W': <{again.name}_W>" in message  # the mapping, spelled out
    # ... and both fixes work: the mapping the message gives,
    restored = restore_variables(path, {f"{first.name}_W": again.W, f"{first.name}_b": again.b})
    np.testing.assert_array_equal(restored[again.W], saved_w)
    # and naming the layers, so every build names its variables alike.
    named, z = build("hidden")
    with ng.make_transformer() as transformer:
        save_variables(path, z.variables(), transformer)
        value = transformer.computation(named.W)()
    rebuilt, z_again = build("hidden")
    np.testing.assert_array_equal(restore_variables(path, z_again.variables())[rebuilt.W], value)
    # Extra entries alone still suggest strict=False, which does help there.
    with pytest.raises(ng.SerializationError, match="pass strict=False to ignore them"):
        restore_variables(path, [rebuilt.W])


class NoKernelOp(ng.Op):
    """An op a user defined without registering anything for it."""

    dtype_of_arg = 0

    def __init__(self, x):
        super().__init__(x)

    def infer_axes(self):
        return self.args[0].axes


def test_an_op_without_a_kernel_names_itself_the_line_and_how_to_add_one(transformer):
    A = ng.make_axis(3, name="A")
    x = ng.placeholder([A])
    y = NoKernelOp(x)  # @no-kernel-op
    computation = transformer.computation(y * 2.0, x)
    with pytest.raises(ng.AxgraphError) as info:
        computation(np.ones(3, np.float32))
    error = info.value
    assert "cannot run NoKernelOp (" + y.name + ")" in error.message
    assert 'docs/architecture.md, section "Adding an op"' in error.message
    assert "register" in error.message and "NoKernelOp" in error.message.split("To add one")[1]
    assert_location(error, "@no-kernel-op")
    section = (pathlib.Path(__file__).parent.parent / "docs" / "architecture.md").read_text()
    assert "\n## Adding an op\n" in section


def test_a_core_op_without_a_kernel_names_itself_and_how_to_add_one():
    class NoKernelNode(ng.core.UnaryElementwise):
        numpy = None
        c = None

    x = ng.core.Parameter(ng.core.f32, (3,))
    node = NoKernelNode(x)  # @no-kernel-node
    function = ng.core.Function([node], [x])
    for backend, register in (("interpreter", "axgraph.core.interpreter.kernel"),
                              ("cpu", "axgraph.transformers.cpu.codegen.CODE.register")):
        with pytest.raises(ng.ExecutionError) as info:
            ng.core.compile(function, backend=backend)
        assert "cannot run the core op NoKernelNode" in info.value.message
        assert f"@{register}(NoKernelNode)" in info.value.message
        assert_location(info.value, "@no-kernel-node")


# -- running out of memory ---------------------------------------------------------------------

@pytest.mark.parametrize("name", ["numpy", "interpreter", "cpu", "jax"])
def test_a_call_that_needs_more_memory_than_exists_is_an_axgraph_error(name):
    """A value of 10^14 elements (beyond any address space) is refused as an axgraph error
    naming the call's line (OutOfMemoryError where the backend reports an allocation;
    XLA may report it otherwise), and the transformer still runs the next computation."""
    if name == "jax":
        pytest.importorskip("jax")
    big_a = ng.make_axis(length=10 ** 7, name="A")
    big_b = ng.make_axis(length=10 ** 7, name="B")
    x = ng.placeholder([big_a])
    op_line = _line() + 1
    outer = ng.broadcast(x, [big_a, big_b]) * 2.0 + ng.exp(ng.broadcast(x, [big_b, big_a]))
    small = ng.make_axis(length=3, name="S")
    y = ng.placeholder([small])
    with ng.make_transformer(name) as transformer:
        # XLA fuses the sum of the outer product into one pass that needs no memory (on a
        # GPU it then just computes it): the jax transformer must return the 10^14 values
        huge = transformer.computation(outer if name == "jax" else ng.sum(outer), x)
        expected = ng.OutOfMemoryError
        call_line = _line() + 2
        with pytest.raises(expected) as raised:
            huge(np.ones(10 ** 7, np.float32))
        # the numpy transformer names the op that failed, the others the call
        assert raised.value.location == (__file__, op_line if name == "numpy" else call_line)
        if isinstance(raised.value, ng.OutOfMemoryError):
            assert isinstance(raised.value, MemoryError)
            assert "memory" in raised.value.message
        doubled = transformer.computation(y * 2.0, y)(np.array([1.0, 2.0, 3.0], np.float32))
        np.testing.assert_array_equal(doubled, [2.0, 4.0, 6.0])


def _line() -> int:
    """The caller's line number (the line a raise in the same statement reports)."""
    import sys

    return sys._getframe(1).f_lineno
