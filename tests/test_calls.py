"""Calling computations: out= arrays, closed transformers, the feeding rule, bad indices."""
import numpy as np
import pytest

import axgraph as ng


def _axis(length, name):
    return ng.make_axis(length=length, name=name)


# -- out= ------------------------------------------------------------------------------

def test_repeated_calls_with_out_fill_the_same_arrays(transformer):
    F = _axis(3, "F")
    x = ng.placeholder([F])
    f = transformer.computation([x * 2.0, x + 1.0], x)
    doubled, shifted = np.empty(3, np.float32), np.empty(3, np.float32)
    for k in range(3):
        data = np.arange(3, dtype=np.float32) + k
        got = f(data, out=[doubled, shifted])
        assert got[0] is doubled and got[1] is shifted
        np.testing.assert_array_equal(doubled, data * 2)
        np.testing.assert_array_equal(shifted, data + 1)


def test_out_of_the_wrong_dtype_is_refused_on_every_call(transformer):
    F = _axis(3, "F")
    x = ng.placeholder([F])
    f = transformer.computation(x * 2.0, x)
    data = np.ones(3, np.float32)
    good = np.empty(3, np.float32)
    f(data, out=good)
    for _ in range(2):
        with pytest.raises(ng.FeedError, match="float64"):
            f(data, out=np.empty(3, np.float64))
    np.testing.assert_array_equal(f(data, out=good), [2.0, 2.0, 2.0])


# -- closing --------------------------------------------------------------------------

def test_a_closed_transformer_says_so(backend):
    F = _axis(2, "F")
    x = ng.placeholder([F])
    t = ng.make_transformer(backend)
    f = t.computation(x + 1.0, x)
    c = ng.constant(np.ones(2), [F])
    g = t.computation(c * 2.0)
    f(np.ones(2))
    t.close()
    for call in (lambda: f(np.ones(2)), lambda: g(), lambda: t.computation(x * 2.0, x)):
        with pytest.raises(ng.TransformerClosedError, match="closed") as info:
            call()
        assert isinstance(info.value, ng.AxgraphError) and isinstance(info.value, RuntimeError)
        assert "test_calls.py" in str(info.value)


# -- the feeding rule: NumPy's same_kind casting, and values must fit -------------------

@pytest.mark.parametrize("data, dtype", [
    (np.array([1, 2, 3], np.int64), np.float32),
    (np.array([True, False, True]), np.float32),
    (np.array([1.5, 2.5, -3.25], np.float64), np.float32),
    (np.array([7, -8, 9], np.int64), np.int32),
    (np.array([1, 2, 3], np.uint8), np.int32),
])
def test_same_kind_feeds_are_converted(transformer, data, dtype):
    F = _axis(3, "F")
    x = ng.placeholder([F], dtype=dtype)
    got = transformer.computation(x * 1, x)(data)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, data.astype(dtype))


def test_floats_into_an_int_placeholder_are_refused(transformer):
    F = _axis(2, "F")
    x = ng.placeholder([F], dtype=np.int32, name="counts")
    with pytest.raises(ng.FeedError, match="counts.*int32.*float64.*same_kind"):
        transformer.computation(x + 1, x)(np.array([1.0, 2.0]))


@pytest.mark.parametrize("data, dtype, shown", [
    (np.array([1, 2 ** 40 + 5], np.int64), np.int32, str(2 ** 40 + 5)),
    (np.array([-200, 2], np.int16), np.int8, "-200"),
    (np.array([2 ** 63], np.uint64), np.int64, str(2 ** 63)),
    (np.array([1.0, 1e300], np.float64), np.float32, "1e+300"),
])
def test_values_that_do_not_fit_are_refused(transformer, data, dtype, shown):
    F = _axis(len(data), "F")
    x = ng.placeholder([F], dtype=dtype, name="narrow")
    with pytest.raises(ng.FeedError) as info:
        transformer.computation(x * 1, x)(data)
    assert "narrow" in str(info.value) and shown in str(info.value)
    assert "test_calls.py" in str(info.value)


def test_inf_and_nan_floats_still_feed_a_narrower_float(transformer):
    F = _axis(3, "F")
    x = ng.placeholder([F], dtype=np.float32)
    got = transformer.computation(x * 1, x)(np.array([np.inf, -np.inf, np.nan]))
    np.testing.assert_array_equal(got, np.array([np.inf, -np.inf, np.nan], np.float32))


# -- indices ----------------------------------------------------------------------------

@pytest.mark.parametrize("item", [(1.5, slice(None)), (slice(0, 2.0),),
                                  (slice(None, None, 1.0),), (np.float64(1.0),)])
def test_non_integer_indices_are_refused_like_numpy(item):
    A, B = _axis(4, "A"), _axis(3, "B")
    x = ng.placeholder([A, B], name="grid")
    with pytest.raises(ng.AxgraphError) as info:
        x[item]
    assert isinstance(info.value, IndexError) and isinstance(info.value, TypeError)
    assert "grid" in str(info.value) and "test_calls.py" in str(info.value)
    with pytest.raises((IndexError, TypeError)):
        np.zeros((4, 3))[item]


def test_numpy_integer_indices_still_work(transformer):
    A, B = _axis(4, "A"), _axis(3, "B")
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    x = ng.placeholder([A, B])
    got = transformer.computation(x[np.int64(2), 1:np.int32(3)], x)(data)
    np.testing.assert_array_equal(got, data[2, 1:3])


# -- a variable sized by a fed batch axis ------------------------------------------------

def test_a_variable_made_with_one_batch_length_refuses_another(transformer):
    N = ng.make_axis(name="N")
    F = _axis(2, "F")
    x = ng.placeholder([N, F], name="batch")
    memory = ng.variable([N, F], initial_value=0.0, name="memory")
    step = ng.assign(memory, memory + x)
    line = memory.location[1]
    f = transformer.computation([step, memory * 1.0], x)
    f(np.ones((4, 2)))
    with pytest.raises(ng.FeedError) as info:
        f(np.ones((3, 2)))
    message = str(info.value)
    assert "memory" in message and "N" in message and "4" in message and "3" in message
    assert f"test_calls.py:{line}" in message  # where the variable was made
    assert "test_calls.py" in message.splitlines()[-1]  # and the failing call's line
    np.testing.assert_array_equal(f(np.ones((4, 2)))[1], np.full((4, 2), 2.0))
