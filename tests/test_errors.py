"""Misuse raises the documented error class, names the op/axes, and points at user code.

Every bad call below ends with a `# @marker` comment; `line_of(marker)` finds
that line in this file, and the error's `.location` must be (this file, that line).
"""
import os

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
