"""The NumPy engines' own vectorized erf (`runtime.erf`) against math.erf.

The reference keeps math.erf per element (slow, independent); the cpu backend unfused
and the blocked-NumPy fused engine call `runtime.erf`, an odd polynomial below |x| = 1
and 1 - e^(-x^2) P(x)/Q(x) above, evaluated in float64. Checked here over a dense range
and the special values, for float64 and float32, in place and into strided outputs.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import axgraph as ng
from axgraph import core
from axgraph.transformers.cpu import runtime
from axgraph.transformers.cpu.fusion import compile_group, find_fusion_groups

erf_math = np.vectorize(math.erf, otypes=[np.float64])


def _ulps(got: np.ndarray, exact: np.ndarray, dtype) -> np.ndarray:
    """|got - exact| in units of the spacing of `dtype` at `exact` (subnormal steps near 0)."""
    return np.abs(got.astype(np.float64) - exact) / np.spacing(
        np.abs(exact).astype(dtype)).astype(np.float64)


def _dense() -> np.ndarray:
    """Every 0.00002 of [-7, 7], both sides of the switch at 1 and of where erf rounds to 1,
    and magnitudes from the subnormals up."""
    tiny = np.geomspace(5e-324, 1.0, 20001)
    edges = np.concatenate([np.nextafter(1.0, 0) - np.arange(50) * 2e-16,
                            1.0 + np.arange(50) * 2.2e-16, np.linspace(5.85, 6.1, 2001)])
    values = np.concatenate([np.linspace(-7, 7, 700001), tiny, edges])
    return np.concatenate([values, -values])


def test_float64_is_within_one_ulp_of_math_erf():
    x = _dense()
    out = np.empty_like(x)
    assert runtime.erf(x, out) is out
    ulps = _ulps(out, erf_math(x), np.float64)
    assert ulps.max() <= 1.0, x[np.argmax(ulps)]
    assert np.mean(ulps) < 0.1


def test_float32_is_rounded_once_from_float64():
    x = _dense().astype(np.float32)
    out = np.empty_like(x)
    runtime.erf(x, out)
    assert out.dtype == np.float32
    ulps = _ulps(out, erf_math(x.astype(np.float64)), np.float32)
    assert ulps.max() <= 0.5 + 1e-6, x[np.argmax(ulps)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values(dtype):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 6.0, -6.0, 1e30, 1.0, -1.0], dtype)
    out = runtime.erf(x, np.empty_like(x))
    expected = [0.0, -0.0, 1.0, -1.0, np.nan, 1.0, -1.0, 1.0, math.erf(1.0), -math.erf(1.0)]
    np.testing.assert_array_equal(out, np.array(expected).astype(dtype))
    assert list(np.signbit(out[:2])) == [False, True]


def test_out_may_be_x_or_strided():
    x = np.linspace(-3, 3, 30001)
    expected = erf_math(x)
    in_place = x.copy()
    runtime.erf(in_place, in_place)
    np.testing.assert_allclose(in_place, expected, rtol=3e-16, atol=0)
    grid = np.linspace(-3, 3, 600).reshape(20, 30)
    transposed = np.empty((30, 20)).T  # a column-major out
    runtime.erf(grid, transposed)
    np.testing.assert_allclose(transposed, erf_math(grid), rtol=3e-16, atol=0)


def test_x_broadcasts_to_out_as_a_ufuncs_input_does():
    """A program hands a Broadcast on as a view with fewer elements (a row for a matrix):
    every row of out gets the row's erf, none is left as the memory was."""
    row = np.array([[1.5, 0.5, -2.0]], np.float32)
    out = np.full((4, 3), np.nan, np.float32)
    runtime.erf(row, out)
    np.testing.assert_array_equal(out, np.repeat(erf_math(row).astype(np.float32), 4, axis=0))


def test_erf_of_a_broadcast_in_a_program_is_every_rows_erf():
    """Found by the fuzzer: erf of a broadcast seen through a transpose left the rows past
    the first uncomputed (whatever the memory held), fused or not."""
    A, B = ng.make_axis(2, name="A"), ng.make_axis(3, name="B")
    x = ng.placeholder([B])
    y = ng.axes_with_order(ng.erf(ng.axes_with_order(ng.broadcast(x, [A, B]), [B, A])), [A, B])
    feed = np.array([1.5, 0.5, -2.0], np.float32)
    want = np.repeat(erf_math(feed)[None, :], 2, axis=0).astype(np.float32)
    for options in ({}, {"fuse": True}):
        with ng.make_transformer("cpu", **options) as t:
            got = t.computation([-x, y], x)(feed)[1]
        np.testing.assert_array_equal(got, want, err_msg=str(options))


def test_both_numpy_paths_call_it():
    """The cpu backend's generated program and the blocked-NumPy fused kernel call it (no
    math.erf per element), with its values."""
    n = 5000
    values = np.linspace(-4, 4, n, dtype=np.float32)
    exact = erf_math(values.astype(np.float64)) * values
    A = ng.make_axis(n, name="A")
    placeholder = ng.placeholder([A])
    with ng.make_transformer("cpu", fuse=False) as transformer:
        computation = transformer.computation(ng.erf(placeholder) * placeholder, placeholder)
        result = computation(values)
        assert "rt.erf(" in computation.source
    assert _ulps(result, exact, np.float32).max() <= 1.5  # two roundings: erf, product
    x = core.Parameter(core.f32, core.Shape(n))
    function = core.Function([core.Multiply(core.Erf(x), x)], [x])
    (group,) = find_fusion_groups(function)
    kernel = compile_group(group, {m: (n,) for m in group.nodes + group.inputs}, "numpy")
    assert "erf(" in kernel.source and runtime.erf in kernel._kernel.__globals__.values()
    out = np.empty_like(values)
    kernel(values, out=out)
    assert _ulps(out, exact, np.float32).max() <= 1.5
