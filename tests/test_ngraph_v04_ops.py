"""Op behaviours Nervana Graph v0.4's own programs rely on: initial values that NumPy would
assign, softmax's older keyword, and no-op slices that keep their axis."""
import numpy as np
import pytest

import axgraph as ng

CONSTRUCTORS = {
    "constant": lambda axes, value: ng.constant(value, axes=axes, name="t"),
    "placeholder": lambda axes, value: ng.placeholder(axes, initial_value=value, name="t"),
    "persistent_tensor": lambda axes, value: ng.persistent_tensor(axes, initial_value=value,
                                                                  name="t"),
    "variable": lambda axes, value: ng.variable(axes, initial_value=value, name="t"),
}


def _axes(*lengths):
    return [ng.make_axis(n, name=f"A{i}") for i, n in enumerate(lengths)]


def numpy_assigned(shape, value):
    """What NumPy puts in an array of `shape` by ``a[...] = value``."""
    array = np.zeros(shape, dtype=np.float32)
    array[...] = value
    return array


# -- initial values -------------------------------------------------------------------

@pytest.mark.parametrize("kind", sorted(CONSTRUCTORS))
def test_cifar_mean_as_v04_wrote_it(transformer, kind):
    """cifar10's preprocessing: a row of three means for a tensor of one axis of length 3."""
    (C,) = _axes(3)
    mean = CONSTRUCTORS[kind](C, np.array([[104., 119., 127.]]))
    assert mean.axes == ng.make_axes([C])
    np.testing.assert_array_equal(transformer.computation(mean)(), [104., 119., 127.])


SHAPES = [
    ((3,), (1, 3)),          # a leading length-1 dimension
    ((3,), (1, 1, 3)),
    ((2, 3), (3,)),          # repeated over the first axis
    ((2, 3), (2, 1)),        # repeated over the second
    ((2, 3), (1, 3)),
    ((2, 3), (1, 1, 1)),
    ((2, 3), ()),
    ((2, 3, 4), (3, 1)),
    ((2, 3, 4), (1, 2, 3, 4)),
]


@pytest.mark.parametrize("kind", sorted(CONSTRUCTORS))
@pytest.mark.parametrize("shape, value_shape", SHAPES)
def test_initial_values_fit_as_numpy_assignment_fits_them(transformer, kind, shape,
                                                          value_shape):
    value = np.arange(1.0, 1.0 + np.prod(value_shape)).reshape(value_shape)
    tensor = CONSTRUCTORS[kind](_axes(*shape), value)
    np.testing.assert_array_equal(transformer.computation(tensor)(),
                                  numpy_assigned(shape, value))


def test_callable_initial_values_fit_the_same_way(transformer):
    C, N = _axes(3, 2)
    w = ng.variable([N, C], initial_value=lambda axes: np.array([[[1.0], [2.0]]]))
    np.testing.assert_array_equal(transformer.computation(w)(),
                                  numpy_assigned((2, 3), np.array([[[1.0], [2.0]]])))


def test_an_axis_without_length_takes_the_dimension_set_against_it(transformer):
    (C,) = _axes(3)
    B = ng.make_axis(name="B")
    w = ng.variable([B, C], initial_value=np.arange(12.0).reshape(1, 4, 3))
    assert B.length == 4
    np.testing.assert_array_equal(transformer.computation(w)(), np.arange(12.0).reshape(4, 3))


@pytest.mark.parametrize("kind", sorted(CONSTRUCTORS))
@pytest.mark.parametrize("shape, value_shape", [((3,), (2,)), ((3,), (2, 3)), ((2, 3), (3, 2)),
                                                ((2, 3), (2, 2, 3)), ((2, 3), (4,))])
def test_values_numpy_would_not_assign_are_refused_naming_tensor_axes_and_shape(
        kind, shape, value_shape):
    with pytest.raises(ValueError):  # NumPy refuses them too
        numpy_assigned(shape, np.zeros(value_shape))
    axes = _axes(*shape)
    with pytest.raises(ng.AxisLengthError) as caught:
        CONSTRUCTORS[kind](axes, np.zeros(value_shape))
    message = str(caught.value)
    assert message.startswith("t: ")                              # the tensor's name
    assert f"of shape {value_shape}" in message
    assert str(ng.make_axes(axes)) in message
    assert caught.value.location[0] == __file__


def test_a_callable_whose_value_does_not_fit_is_refused_when_initialized():
    (C,) = _axes(3)
    w = ng.variable([C], initial_value=lambda axes: np.zeros(2), name="w")
    with pytest.raises(ng.AxisLengthError, match=r"w: initial value of shape \(2,\)"):
        ng.NumPyTransformer().computation(w)()


# -- softmax ----------------------------------------------------------------------------

def numpy_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_softmax_takes_v04s_softmax_axes_keyword(transformer, rng):
    Y, T, N = _axes(4, 3, 2)
    data = rng.normal(size=(4, 3, 2))
    x = ng.placeholder([Y, T, N])
    for axes, numpy_axis in (([Y], 0), ([T], 1), ([Y, T], (0, 1))):
        old = ng.softmax(x, softmax_axes=axes)
        new = ng.softmax(x, normalization_axes=axes)
        got_old, got_new = transformer.computation([old, new], x)(data)
        np.testing.assert_allclose(got_old, numpy_softmax(data, numpy_axis), rtol=1e-5)
        np.testing.assert_array_equal(got_old, got_new)


def test_softmax_refuses_both_keywords():
    (Y,) = _axes(4)
    with pytest.raises(ng.AxgraphTypeError, match="not both"):
        ng.softmax(ng.placeholder([Y]), normalization_axes=[Y], softmax_axes=[Y])


# -- no-op slices -----------------------------------------------------------------------

def test_a_no_op_slice_keeps_the_axis_itself(transformer):
    H, W, N = _axes(3, 4, 2)
    x = ng.placeholder([H, W, N])
    data = np.arange(24.0).reshape(3, 4, 2)
    picked = x[:, 0]
    assert picked.axes[0] is H and picked.axes[1] is N
    whole = ng.tensor_slice(x, [slice(None), slice(None), slice(None)])
    assert all(a is b for a, b in zip(whole.axes, [H, W, N]))
    stepped = ng.tensor_slice(x, (slice(None), slice(1, 3), slice(None, None, 1)))
    assert stepped.axes[0] is H and stepped.axes[2] is N and stepped.axes[1] is not W
    assert stepped.axes[1].length == 2
    got = transformer.computation([picked, whole, stepped], x)(data)
    for value, expected in zip(got, [data[:, 0], data, data[:, 1:3]]):
        np.testing.assert_array_equal(value, expected)
    # The kept axis is the same axis, so the slice combines with x without a cast.
    np.testing.assert_array_equal(transformer.computation(picked + x[:, 1], x)(data),
                                  data[:, 0] + data[:, 1])
