"""The cpu backend's unfused Sums over the innermost or outermost dims, run as products with
ones (axgraph/transformers/cpu/sums_as_products.py): the same values as float64 sums."""
from __future__ import annotations

import numpy as np
import pytest

from axgraph import core
from axgraph.transformers.cpu.sums_as_products import MAX_ROW, MIN_ELEMENTS

f32 = core.f32


def ops(compiled) -> list:
    return [node.op for node in compiled.last_program.function.nodes]


@pytest.mark.parametrize("axes, expected_shape", [((2,), (256, 16)), ((1, 2), (256,)),
                                                  ((0,), (16, 16)), ((0, 1), (16,))])
def test_innermost_and_outermost_sums_are_products_with_ones(axes, expected_shape):
    x = core.Parameter(f32, (256, 16, 16), name="x")  # too large for one C function
    total = core.Sum(x, axes)  # a reduction alone, of a small result: left unfused
    f = core.Function([core.Multiply(total, total)], [x])
    compiled = core.compile(f, backend="cpu")
    values = np.random.default_rng(0).standard_normal((256, 16, 16)).astype(np.float32)
    (got,) = compiled(values)
    want = values.astype(np.float64).sum(axis=axes)
    assert got.shape == expected_shape
    np.testing.assert_allclose(got, want * want, rtol=2e-5, atol=1e-4)
    assert "Sum" not in ops(compiled) and "Dot" in ops(compiled)


def test_sums_that_stay_sums():
    x = core.Parameter(f32, (32, 32, 64), name="x")
    middle = core.Sum(x, (1,))  # neither innermost nor outermost
    across = core.Sum(core.Transpose(x, (2, 1, 0)), (2,))  # x's outermost dim, strided
    small = core.Sum(core.Parameter(f32, (4, 8), name="y"), (1,))
    long_rows = core.Sum(core.Reshape(x, (64, 1024)), (1,))  # pairwise in NumPy: kept
    f = core.Function([middle, across, small, long_rows], [x, small.inputs[0]])
    compiled = core.compile(f, backend="cpu")
    values = np.random.default_rng(1).standard_normal((32, 32, 64)).astype(np.float32)
    y = np.ones((4, 8), np.float32)
    got = compiled(values, y)
    np.testing.assert_allclose(got[0], values.sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[1], values.transpose(2, 1, 0).sum(axis=2), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_array_equal(got[2], np.full(4, 8.0, np.float32))
    np.testing.assert_allclose(got[3], values.reshape(64, 1024).sum(axis=1, dtype=np.float64),
                               rtol=1e-5, atol=1e-4)
    assert ops(compiled).count("Sum") == 4
    assert 4 * 8 < MIN_ELEMENTS and 1024 > MAX_ROW


def test_a_program_small_enough_for_one_c_function_keeps_its_sums():
    x = core.Parameter(f32, (64, 64), name="x")
    total = core.Sum(x, (1,))
    f = core.Function([core.Multiply(total, total)], [x])
    compiled = core.compile(f, backend="cpu")
    compiled(np.ones((64, 64), np.float32))
    assert "Sum" in ops(compiled)
