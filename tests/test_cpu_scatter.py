"""The cpu backend's ScatterAdd loop (transformers/cpu/scatter.py) against a hand-written
Python loop, over layouts, axes, repeats and element types, and its fallbacks."""
import numpy as np
import pytest

from axgraph.errors import ExecutionError
from axgraph.transformers.cpu import kernel_c, scatter


def hand_scatter(inputs, indices, updates, axis):
    """Each update added at its index, one position at a time, in position order."""
    result = np.array(inputs, copy=True)
    k = indices.ndim
    for position in np.ndindex(*indices.shape):
        where = [slice(None)] * result.ndim
        where[axis] = indices[position]
        picked = [slice(None)] * updates.ndim
        picked[axis:axis + k] = position
        result[tuple(where)] += updates[tuple(picked)]
    return result


needs_c = pytest.mark.skipif(not kernel_c.c_available(), reason="no C compiler")


@needs_c
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "reversed"])
def test_rows_of_an_embedding_table(rng, dtype, layout):
    table, ids = (7, 5), rng.integers(0, 7, (6, 4))  # repeats certain: 24 ids, 7 rows
    ids[0, 0] = ids[3, 2] = 6
    if layout == "transposed":  # (5, 6, 4) buffer seen as (6, 4, 5): lanes are the long jump
        updates = np.transpose(rng.standard_normal((5, 6, 4)).astype(dtype), (1, 2, 0))
    elif layout == "reversed":
        updates = rng.standard_normal((6, 4, 5)).astype(dtype)[::-1, :, ::-1]
    else:
        updates = rng.standard_normal((6, 4, 5)).astype(dtype)
    base = rng.standard_normal(table).astype(dtype)
    out = np.full(table, np.nan, dtype)
    assert scatter.scatter_add(base, ids, updates, 0, out=out) is out
    want = hand_scatter(base, ids, updates, 0)
    np.testing.assert_array_equal(out, want)  # same additions in the same order
    reference = np.array(base, copy=True)
    np.add.at(reference, ids, updates)
    np.testing.assert_array_equal(out, reference)


@needs_c
def test_inner_axis_and_broadcast_inputs(rng):
    ids = np.array([2, 0, 2, 2, 1])
    updates = rng.standard_normal((3, 5, 2)).astype(np.float32)
    base = np.broadcast_to(np.float32(0.5), (3, 4, 2))
    out = np.empty((3, 4, 2), np.float32)
    scatter.scatter_add(base, ids, updates, 1, out=out)
    np.testing.assert_array_equal(out, hand_scatter(base, ids, updates, 1))


def test_other_types_and_layouts_take_the_reference(rng):
    ids = np.array([1, 1, 0])
    ints = rng.integers(-5, 5, (3, 4))
    out = np.empty((2, 4), ints.dtype)
    scatter.scatter_add(np.zeros((2, 4), ints.dtype), ids, ints, 0, out=out)
    np.testing.assert_array_equal(out, hand_scatter(np.zeros((2, 4), ints.dtype), ids, ints, 0))
    # lanes that form no single run: every other column of a (3, 4, 6) buffer, then sliced
    lanes = rng.standard_normal((3, 4, 6))[:, :, ::2][:, ::2]
    out = np.empty((2, 2, 3))
    scatter.scatter_add(np.ones((2, 2, 3)), ids, lanes, 0, out=out)
    np.testing.assert_allclose(out, hand_scatter(np.ones((2, 2, 3)), ids, lanes, 0), rtol=1e-15)


def test_indices_out_of_range_are_an_error():
    out = np.empty((3, 2), np.float32)
    with pytest.raises(ExecutionError, match=r"indices must lie in \[0, 3\); got -1..1"):
        scatter.scatter_add(np.zeros((3, 2), np.float32), np.array([0, -1, 1]),
                            np.ones((3, 2), np.float32), 0, out=out)


def test_merged_runs():
    assert scatter.merged((4, 5), (20, 4), 4) == (20, 1)
    assert scatter.merged((4, 1, 5), (4, 999, 16), 4) is None
    assert scatter.merged((4, 5), (4, 16), 4) is None
    assert scatter.merged((), (), 4) == (1, 0)
    assert scatter.merged((3,), (-8,), 8) == (3, -1)
