"""The cpu backend's ScatterAdd loop (transformers/cpu/scatter.py) against a hand-written
Python loop, over layouts, axes, repeats and element types, and its fallbacks."""
import numpy as np
import pytest

from axgraph.errors import ExecutionError
from axgraph.transformers.cpu import indexing, kernel_c


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
    assert indexing.scatter_add(base, ids, updates, 0, out=out) is out
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
    indexing.scatter_add(base, ids, updates, 1, out=out)
    np.testing.assert_array_equal(out, hand_scatter(base, ids, updates, 1))


def test_other_types_and_layouts_take_the_reference(rng):
    ids = np.array([1, 1, 0])
    ints = rng.integers(-5, 5, (3, 4))
    out = np.empty((2, 4), ints.dtype)
    indexing.scatter_add(np.zeros((2, 4), ints.dtype), ids, ints, 0, out=out)
    np.testing.assert_array_equal(out, hand_scatter(np.zeros((2, 4), ints.dtype), ids, ints, 0))
    # lanes that form no single run: every other column of a (3, 4, 6) buffer, then sliced
    lanes = rng.standard_normal((3, 4, 6))[:, :, ::2][:, ::2]
    out = np.empty((2, 2, 3))
    indexing.scatter_add(np.ones((2, 2, 3)), ids, lanes, 0, out=out)
    np.testing.assert_allclose(out, hand_scatter(np.ones((2, 2, 3)), ids, lanes, 0), rtol=1e-15)


def test_indices_out_of_range_are_an_error():
    out = np.empty((3, 2), np.float32)
    with pytest.raises(ExecutionError, match=r"indices must lie in \[0, 3\); got -1..1"):
        indexing.scatter_add(np.zeros((3, 2), np.float32), np.array([0, -1, 1]),
                            np.ones((3, 2), np.float32), 0, out=out)


def test_merged_runs():
    assert indexing.merged((4, 5), (20, 4), 4) == (20, 1)
    assert indexing.merged((4, 1, 5), (4, 999, 16), 4) is None
    assert indexing.merged((4, 5), (4, 16), 4) is None
    assert indexing.merged((), (), 4) == (1, 0)
    assert indexing.merged((3,), (-8,), 8) == (3, -1)


def hand_gather(params, indices, axis):
    """out[..., i..., ...] = params[..., indices[i...], ...], one index position at a time."""
    k = indices.ndim
    shape = params.shape[:axis] + indices.shape + params.shape[axis + 1:]
    out = np.empty(shape, params.dtype)
    for position in np.ndindex(*indices.shape):
        where = [slice(None)] * len(shape)
        where[axis:axis + k] = position
        picked = [slice(None)] * params.ndim
        picked[axis] = indices[position]
        out[tuple(where)] = params[tuple(picked)]
    return out


@pytest.mark.parametrize("axis, order", [
    (0, (2, 0, 1)),        # rows of a (V, D) table into (T, N, D) laid out (D, T, N)
    (0, (0, 1, 2)),        # row-major out: np.take as it is
    (1, (1, 2, 0, 3)),     # columns of a (A, V, B) table, index dims outermost in memory
    (1, (3, 0, 1, 2)),     # the index dims in memory order, B outermost
    (0, (1, 0, 2)),        # the index dims split in memory: np.take into out as it is
])
def test_gather_into_any_dense_layout(rng, axis, order):
    params = rng.standard_normal((5, 3) if axis == 0 else (2, 5, 3)).astype(np.float32)
    indices = rng.integers(0, 5, (4, 2))
    want = hand_gather(params, indices, axis)
    physical = np.full(tuple(want.shape[i] for i in order), np.nan, np.float32)
    out = physical.transpose(tuple(int(i) for i in np.argsort(order)))
    assert out.shape == want.shape
    assert indexing.gather(params, indices, axis, out=out) is out
    np.testing.assert_array_equal(out, want)
    with pytest.raises(ExecutionError, match=r"indices must lie in \[0, 5\); got 0..5"):
        indexing.gather(params, np.array([[0, 5]] * 4), axis, out=out)


def test_a_gather_read_through_a_transpose_is_laid_out_for_it(rng):
    from axgraph import core
    from axgraph.transformers.cpu.schedule import schedule_function

    table = core.Parameter(core.f32, (7, 4))
    ids = core.Parameter(core.i32, (3, 2))
    rows = core.Gather(table, ids)                        # (3, 2, 4)
    features_first = core.Transpose(rows, (2, 0, 1))      # (4, 3, 2)
    result = core.Exp(features_first)
    function = core.Function([result], [table, ids])
    schedule = schedule_function(function, {})
    assert schedule.layout[features_first].element_strides == (6, 2, 1)  # row-major view
    t = rng.standard_normal((7, 4)).astype(np.float32)
    i = rng.integers(0, 7, (3, 2)).astype(np.int32)
    (got,) = core.compile(function, backend="cpu")(t, i)
    np.testing.assert_allclose(got, np.exp(np.transpose(hand_gather(t, i, 0), (2, 0, 1))),
                               rtol=1e-6)
