"""Initializers: values, fans from axes, seeding, and use as a variable's initial value."""
import math

import numpy as np
import pytest

import axgraph as ng
from axgraph.frontends.neon import initializers as init
from axgraph.frontends.neon.initializers import (Constant, Gaussian, GlorotUniform, Kaiming,
                                                 Uniform, fans, set_seed)


def axes(*lengths):
    return ng.make_axes([ng.make_axis(n) for n in lengths])


def test_constant_fills_in_axes_order():
    value = Constant(0.5)(axes(2, 3))
    assert value.shape == (2, 3) and np.all(value == 0.5)


def test_uniform_and_gaussian_statistics():
    u = Uniform(-2.0, 1.0, seed=0)(axes(300, 300))
    assert u.min() >= -2.0 and u.max() < 1.0
    assert abs(u.mean() + 0.5) < 0.02
    g = Gaussian(loc=1.0, scale=0.5, seed=0)(axes(300, 300))
    assert abs(g.mean() - 1.0) < 0.01 and abs(g.std() - 0.5) < 0.01


def test_fans_from_dual_axes_else_the_last_axis():
    Out, In1, In2 = ng.make_axis(4), ng.make_axis(3), ng.make_axis(5)
    assert fans([Out, In1 - 1, In2 - 1]) == (15, 4)
    assert fans([In1 - 1, Out]) == (3, 4)              # dual axes decide, not position
    assert fans([Out, In1]) == (3, 4)                  # no dual axis: the last is the input
    assert fans([Out]) == (4, 1)
    assert fans([]) == (1, 1)


def test_glorot_uniform_limit_and_kaiming_scale():
    Out, In = ng.make_axis(200), ng.make_axis(300)
    w = GlorotUniform(seed=1)([Out, In - 1])
    limit = math.sqrt(6.0 / (300 + 200))
    assert np.abs(w).max() <= limit and np.abs(w).max() > 0.99 * limit
    k = Kaiming(seed=1)([Out, In - 1])
    assert abs(k.std() - math.sqrt(2.0 / 300)) < 0.02 * math.sqrt(2.0 / 300)
    assert abs(k.mean()) < 0.01


@pytest.mark.parametrize("make", [lambda s: Uniform(seed=s), lambda s: Gaussian(seed=s),
                                  lambda s: GlorotUniform(seed=s), lambda s: Kaiming(seed=s)])
def test_seeded_initializers_repeat_and_successive_draws_differ(make):
    a, b = make(7), make(7)
    first, second = a(axes(3, 4)), a(axes(3, 4))
    assert not np.array_equal(first, second)
    np.testing.assert_array_equal(first, b(axes(3, 4)))
    np.testing.assert_array_equal(second, b(axes(3, 4)))
    assert not np.array_equal(first, make(8)(axes(3, 4)))


def test_set_seed_restarts_the_default_stream():
    set_seed(42)
    first = [Gaussian()(axes(4)), GlorotUniform()(axes(2, 2))]
    set_seed(42)
    second = [Gaussian()(axes(4)), GlorotUniform()(axes(2, 2))]
    for x, y in zip(first, second):
        np.testing.assert_array_equal(x, y)


def test_initializer_as_initial_value(transformer):
    H, F = ng.make_axis(3, name="H"), ng.make_axis(4, name="F")
    w = ng.variable([H, F - 1], initial_value=GlorotUniform(seed=5), name="w")
    expected = GlorotUniform(seed=5)(w.axes)
    value = transformer.computation(w)()
    assert value.dtype == np.float32
    np.testing.assert_allclose(value, expected.astype(np.float32))


def test_errors():
    with pytest.raises(ng.AxisLengthError, match="Uniform"):
        Uniform()([ng.make_axis(name="unset")])
    with pytest.raises(ValueError):
        Uniform(1.0, 0.0)
    with pytest.raises(ValueError):
        Gaussian(scale=-1.0)
    assert "seed=3" in repr(Uniform(seed=3)) and init.__all__
