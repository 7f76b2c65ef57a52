"""ng.log1p: log(1 + x), accurate near 0, on every transformer and in fused kernels.

The op was added as docs/architecture.md ("Adding an op") says: the core op with its
traits (axgraph/core/ops/elementwise.py), its adjoint (autodiff.py), the reference's own
expression (reference_kernels.py) and this file. Values are checked against `math.log1p` in
float64 on every transformer, the cpu backend's fused C and blocked-NumPy kernels
included; the gradient against float64 central differences.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import axgraph as ng
from axgraph.testing import ExecutorFactory, check_derivative
from conftest import ENGINES

#: Near 0 (where log(1 + x) loses x), around -1 (the pole), large, and IEEE specials.
SPECIAL = [0.0, -0.0, 1e-300, -1e-300, 1e-12, -1e-12, 3e-8, -0.5, -0.999999, -1.0, -1.5,
           1.0, 2.5, 1e30, np.inf, -np.inf, np.nan]


def math_log1p(values: np.ndarray) -> np.ndarray:
    """math.log1p of each element in float64 (NaN where it is undefined, -inf at -1)."""
    def one(v: float) -> float:
        if v == -1.0:
            return -math.inf
        if v < -1.0 or math.isnan(v):
            return math.nan
        return math.log1p(v)
    return np.array([one(float(v)) for v in values.ravel()]).reshape(values.shape)


def ulps_apart(got: np.ndarray, want: np.ndarray, dtype) -> np.ndarray:
    """How many units in the last place of `dtype` got is from want (0 where both agree
    exactly, NaN with NaN and infinities included)."""
    want = want.astype(dtype)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    spacing = np.spacing(np.abs(want).astype(dtype))
    with np.errstate(invalid="ignore"):
        apart = np.abs(got.astype(np.float64) - want.astype(np.float64)) / spacing
    return np.where(same, 0.0, apart)


@pytest.fixture(autouse=True)
def private_kernel_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AXGRAPH_CACHE_DIR", str(tmp_path))


@pytest.mark.parametrize("name", list(ENGINES))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_values_match_math_log1p_on_every_transformer(name, dtype):
    rng = np.random.default_rng(5)
    values = np.concatenate([np.array(SPECIAL), rng.uniform(-1, 4, 3000),
                             10.0 ** rng.uniform(-20, 20, 3000)]).astype(dtype)
    A = ng.make_axis(len(values), name="A")
    x, one = ng.placeholder([A], dtype=dtype), ng.placeholder([A], dtype=dtype)
    kind, options = ENGINES[name]
    with ng.make_transformer(kind, **options) as transformer:
        # with a second op, fused transformers run log1p inside a fused kernel
        computation = transformer.computation(ng.log1p(x) * one, x, one)
        got = computation(values, np.ones_like(values))
        source = computation.source if kind == "cpu" else ""
    if name.startswith("cpu-fused"):
        assert "# Log1p " not in source and "F" in source, source
    assert got.dtype == dtype
    # libm and libmvec (glibc documents its vector math within 4 ulp) vs correctly rounded
    apart = ulps_apart(got, math_log1p(values.astype(np.float64)), dtype)
    assert apart.max() <= 4, values[np.argmax(apart)]
    tiny = np.abs(values) < 1e-7
    np.testing.assert_allclose(got[tiny], values[tiny], rtol=1e-7)  # log1p(x) ~ x
    assert np.signbit(got[1]) and got[9] == -np.inf and np.isnan(got[10])


@pytest.mark.parametrize("dtype", [np.int32, np.bool_])
def test_integers_and_booleans_give_float32(dtype):
    A = ng.make_axis(4, name="A")
    x = ng.placeholder([A], dtype=dtype)
    values = np.array([0, 1, 3, 7]).astype(dtype)
    with ng.make_transformer("numpy") as transformer:
        got = transformer.computation(ng.log1p(x), x)(values)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, math_log1p(values.astype(np.float64)).astype(np.float32))
    with pytest.raises(ng.DTypeError, match="Log1p of int32: the result is a float"):
        ng.log1p(ng.placeholder([A], dtype=np.int32), dtype=np.int32)


@pytest.mark.parametrize("backend", ["numpy", "interpreter", "cpu"])
def test_gradient_matches_finite_differences(backend):
    A = ng.make_axis(7, name="A")
    x = ng.placeholder([A], dtype=np.float64)
    xv = np.array([-0.9, -0.3, -1e-3, 0.0, 0.4, 2.0, 30.0])
    with ExecutorFactory(backend):
        check_derivative(ng.log1p(x), x, 1e-7, xv, rtol=1e-6, atol=1e-9)
    with ExecutorFactory(backend) as factory:
        gradient = factory.executor(ng.deriv(ng.sum(ng.log1p(x), out_axes=()), x), x)(xv)
    np.testing.assert_allclose(gradient, 1 / (1 + xv), rtol=1e-15)


def test_the_public_function_is_documented_and_exported():
    assert "log1p" in ng.__all__ and ng.log1p.__module__ == "axgraph.op_graph.elementwise"
    assert ng.log1p.__doc__.startswith("The natural logarithm of 1 + x")
    assert "DTypeError\n    If `dtype` is not a float type." in ng.log1p.__doc__
    assert type(ng.log1p(ng.placeholder([ng.make_axis(2, name="A")]))).__name__ == "Log1p"
