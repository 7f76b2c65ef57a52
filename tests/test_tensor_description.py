"""Tensor descriptions (seed 003), checked against NumPy as the independent reference.

Every view operation is applied both to a description (then bound to a real
buffer with ``as_array``) and to a NumPy array of the same buffer; values must
agree, and ``np.shares_memory`` must prove no copy was made.  Reshape must
refuse exactly where NumPy's ``copy=False`` reshape refuses.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import axgraph as ng
from axgraph.errors import AxgraphError, DTypeError, LayoutError, ShapeError, TensorIndexError
from axgraph.strides import column_major_strides, row_major_strides
from axgraph.tensor_description import PaddedView, TensorDescription

NUMPY_HAS_RESHAPE_COPY = tuple(int(p) for p in np.__version__.split(".")[:2]) >= (2, 1)


def numpy_reshape_view(arr: np.ndarray, shape: Sequence[int]) -> Optional[np.ndarray]:
    """NumPy's no-copy reshape, or None where NumPy would have to copy."""
    if NUMPY_HAS_RESHAPE_COPY:
        try:
            return np.reshape(arr, tuple(shape), copy=False)
        except ValueError:
            return None
    view = arr.view()
    try:
        view.shape = tuple(shape)
    except AttributeError:
        return None
    return view


def filled(desc: TensorDescription) -> np.ndarray:
    """A buffer for `desc` holding distinct values 0, 1, 2, ... so any mix-up shows."""
    buf = desc.buffer.allocate()
    buf[...] = np.arange(buf.size, dtype=buf.dtype)
    return buf


def check_view(desc: TensorDescription, buf: np.ndarray, expected: np.ndarray) -> None:
    """Values equal NumPy's, the array is a view of `buf`, and the strides are NumPy's."""
    got = desc.as_array(buf)
    assert got.shape == expected.shape == desc.shape
    np.testing.assert_array_equal(got, expected)
    if desc.size:  # empty tensors reach no memory, so neither sharing nor strides mean anything
        assert np.shares_memory(got, buf)
        for n, ours, theirs in zip(desc.shape, desc.strides, expected.strides):
            if n > 1:
                assert ours == theirs


# --------------------------------------------------------------------------- layouts


def test_seed_example_strides_both_orders():
    assert row_major_strides((5, 3, 2)) == (6, 2, 1)
    assert column_major_strides((5, 3, 2)) == (1, 5, 15)
    assert TensorDescription.row_major((5, 3, 2)).element_strides == (6, 2, 1)
    assert TensorDescription.column_major((5, 3, 2)).element_strides == (1, 5, 15)


def test_strides_come_from_allocated_sizes_not_shape():
    row = TensorDescription.row_major((4, 3, 1), sizes=(5, 3, 2))
    col = TensorDescription.column_major((4, 3, 1), sizes=(5, 3, 2))
    assert row.element_strides == (6, 2, 1)
    assert col.element_strides == (1, 5, 15)
    assert row.allocated_elements == col.allocated_elements == 30
    assert row.size == 12


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16])
def test_row_and_column_major_match_numpy_orders(dtype):
    row = TensorDescription.row_major((5, 3, 2), dtype)
    col = TensorDescription.column_major((5, 3, 2), dtype)
    buf = filled(row)
    np.testing.assert_array_equal(row.as_array(buf), buf.reshape((5, 3, 2)))
    np.testing.assert_array_equal(col.as_array(buf), buf.reshape((5, 3, 2), order="F"))
    assert row.strides == buf.reshape((5, 3, 2)).strides
    assert col.strides == buf.reshape((5, 3, 2), order="F").strides
    assert row.c_contiguous and not row.f_contiguous
    assert col.f_contiguous and not col.c_contiguous


def test_basic_properties():
    t = TensorDescription.row_major((5, 3, 2), np.float64, name="x")
    assert (t.rank, t.size, t.itemsize, t.nbytes) == (3, 30, 8, 240)
    assert t.dtype == np.dtype(np.float64)
    assert t.is_base() and t.base is t and not t.read_only
    assert t.buffer.elements == 30 and t.buffer.nbytes == 240
    v = t.transpose().slice((0,))
    assert not v.is_base() and v.base is t and v.shares_buffer(t)
    scalar = TensorDescription.row_major(())
    assert (scalar.rank, scalar.ndim, scalar.size, scalar.strides) == (0, 0, 1, ())


def test_equality_is_layout_over_the_same_buffer():
    t = TensorDescription.row_major((2, 3))
    assert t.transpose().transpose() == t
    assert hash(t.transpose().transpose()) == hash(t)
    other = TensorDescription.row_major((2, 3))
    assert other != t  # same layout, different memory
    assert other.same_layout(t)


def test_sizes_smaller_than_shape_rejected():
    with pytest.raises(LayoutError, match="sizes"):
        TensorDescription.row_major((4, 3), sizes=(3, 3))


def test_layout_reaching_outside_buffer_rejected():
    six = TensorDescription.row_major((6,), np.float32)
    a, b3, b4 = ng.make_axis(2, name="A"), ng.make_axis(3, name="B"), ng.make_axis(4, name="B")
    with pytest.raises(LayoutError, match="outside buffer"):
        TensorDescription([a, b4], base=six)
    with pytest.raises(LayoutError, match="outside buffer"):
        TensorDescription([a, b3], base=six, full_strides=(-12, 4))
    ok = TensorDescription([a, b3], base=six, full_strides=(-12, 4), offset=12)
    assert ok.extent == (0, 5) and ok.element_strides == (-3, 1) and ok.element_offset == 3
    buf = filled(six)
    np.testing.assert_array_equal(ok.as_array(buf), buf.reshape(2, 3)[::-1])


def test_non_integer_shape_rejected():
    with pytest.raises(LayoutError, match="integer"):
        TensorDescription.row_major((2.0, 3))
    with pytest.raises(LayoutError, match="negative"):
        TensorDescription.row_major((-1, 3))


# --------------------------------------------------------------------------- transpose


@pytest.mark.parametrize("perm", [(0, 1, 2), (2, 1, 0), (1, 0, 2), (2, 0, 1), None])
@pytest.mark.parametrize("order", ["row", "col"])
def test_transpose_is_a_view_like_numpy(perm, order):
    make = TensorDescription.row_major if order == "row" else TensorDescription.column_major
    t = make((5, 3, 2), np.float32)
    buf = filled(t)
    arr = t.as_array(buf)
    check_view(t.transpose(perm), buf, np.transpose(arr, perm))


def test_transpose_permutes_sizes_too():
    t = TensorDescription.row_major((4, 3), sizes=(5, 6))
    assert t.transpose().sizes == (6, 5)
    assert t.transpose().element_strides == (1, 6)


@pytest.mark.parametrize("perm", [(0, 0, 1), (0, 1), (0, 1, 3), (0, 1, 2, 3), (-1, 0, 1)])
def test_bad_permutation_is_a_clear_error(perm):
    t = TensorDescription.row_major((5, 3, 2), name="x")
    with pytest.raises(ShapeError, match=r"not a permutation .*'x'"):
        t.transpose(perm)


# --------------------------------------------------------------------------- slice


SLICES = [
    (slice(None),),
    (slice(1, 4), slice(None, None, 2)),
    (slice(None, None, -1),),
    (slice(4, 0, -2), slice(None), slice(None, None, -1)),
    (slice(-2, None), 1),
    (2,),
    (-1, slice(2, None, -1), 0),
    (slice(10, 20),),          # clipped to empty, like Python
    (slice(None, None, 3), slice(1, 2), slice(None, None, -2)),
    [slice(0, 5, 2), -2],      # a list works like a tuple
]


@pytest.mark.parametrize("index", SLICES, ids=str)
@pytest.mark.parametrize("order", ["row", "col"])
def test_slice_is_a_view_like_numpy(index, order):
    make = TensorDescription.row_major if order == "row" else TensorDescription.column_major
    t = make((5, 3, 2), np.float64)
    buf = filled(t)
    check_view(t.slice(index), buf, t.as_array(buf)[tuple(index)])


def test_negative_step_slice_moves_offset_and_flips_stride():
    t = TensorDescription.row_major((4, 6))
    v = t.slice((slice(None, None, -1), slice(5, None, -2)))
    assert v.element_offset == 3 * 6 + 5 and v.offset == 4 * (3 * 6 + 5)
    assert v.element_strides == (-6, -2) and v.strides == (-24, -8)
    assert v.shape == (4, 3)
    buf = filled(t)
    check_view(v, buf, buf.reshape(4, 6)[::-1, 5::-2])
    # slicing a negative-stride view again composes correctly
    check_view(v.slice((slice(1, None, -1),)), buf, buf.reshape(4, 6)[::-1, 5::-2][1::-1])


def test_slice_int_out_of_range_is_a_clear_error():
    t = TensorDescription.row_major((5, 3), name="x")
    with pytest.raises(TensorIndexError, match="out of bounds for dimension 1 of tensor 'x'"):
        t.slice((0, 3))
    with pytest.raises(TensorIndexError, match="rank 2"):
        t.slice((0, 0, 0))
    with pytest.raises(LayoutError, match="slice"):
        t.slice((slice(None, None, 0),))


# --------------------------------------------------------------------------- reshape


def _transposed(shape):
    return TensorDescription.row_major(shape).transpose()


RESHAPE_CASES = [
    # (description factory, target shape)
    (lambda: TensorDescription.row_major((4, 6)), (24,)),
    (lambda: TensorDescription.row_major((4, 6)), (2, 2, 3, 2)),
    (lambda: TensorDescription.row_major((4, 6)), (1, 4, 1, 6, 1)),
    (lambda: TensorDescription.row_major((4, 6)), (-1, 8)),
    (lambda: _transposed((4, 6)), (24,)),              # NumPy must copy
    (lambda: _transposed((4, 6)), (3, 2, 4)),          # splitting one dim is fine
    (lambda: _transposed((4, 6)), (6, 2, 2)),
    (lambda: _transposed((4, 6)), (2, 12)),            # merges non-contiguous dims
    (lambda: TensorDescription.column_major((4, 6)), (24,)),
    (lambda: TensorDescription.column_major((4, 6)), (4, 3, 2)),
    (lambda: TensorDescription.row_major((4, 6)).slice((slice(None), slice(0, 3))), (2, 2, 3)),
    (lambda: TensorDescription.row_major((4, 6)).slice((slice(None), slice(0, 3))), (12,)),
    (lambda: TensorDescription.row_major((4, 6)).slice((slice(None, None, 2),)), (12,)),
    (lambda: TensorDescription.row_major((4, 6)).slice((slice(None, None, -1),)), (2, 2, 6)),
    (lambda: TensorDescription.row_major((4, 1, 6)).transpose((1, 0, 2)), (24,)),  # size-1 moved
    (lambda: TensorDescription.row_major((3, 1)).transpose(), (3,)),
    (lambda: TensorDescription.row_major((2, 3)).broadcast((4, 2, 3)), (8, 3)),
    (lambda: TensorDescription.row_major((2, 3)).broadcast((4, 2, 3)), (4, 6)),
    (lambda: TensorDescription.row_major((2, 3)).broadcast((4, 2, 3)), (24,)),
    (lambda: TensorDescription.row_major((1, 3)).broadcast((5, 3)), (15,)),
    (lambda: TensorDescription.row_major((5, 1)).broadcast((5, 4)), (20,)),
    (lambda: TensorDescription.row_major(()), (1, 1)),
    (lambda: TensorDescription.row_major((1, 1)), ()),
]


@pytest.mark.parametrize("make, target", RESHAPE_CASES)
def test_reshape_is_a_view_exactly_where_numpy_needs_no_copy(make, target):
    desc = make()
    buf = filled(desc.base)
    arr = desc.as_array(buf)
    expected = numpy_reshape_view(arr, target)
    view = desc.reshape(target)
    assert (view is None) == (expected is None), (desc, target)
    if view is not None:
        check_view(view, buf, expected)
    else:
        assert desc.reshape((desc.size,)) is None or len(target) != 1


def test_transposed_matrix_to_1d_needs_a_copy():
    t = TensorDescription.row_major((4, 6), np.float32)
    assert t.transpose().reshape((24,)) is None
    buf = filled(t)
    if NUMPY_HAS_RESHAPE_COPY:
        with pytest.raises(ValueError):
            np.reshape(t.as_array(buf).T, (24,), copy=False)


def test_reshape_or_copy_inserts_a_copy_only_when_needed():
    t = TensorDescription.row_major((4, 6), np.float32)
    buf = filled(t)
    view, copied = t.reshape_or_copy((6, 4))
    assert not copied and view.shares_buffer(t)

    tt = t.transpose()
    result, copied = tt.reshape_or_copy((24,))
    assert copied and not result.shares_buffer(t)
    copy_desc = result.base
    assert copy_desc.c_contiguous and not copy_desc.read_only and copy_desc.shape == (6, 4)
    copy_buf = copy_desc.buffer.allocate()
    copy_desc.as_array(copy_buf)[...] = tt.as_array(buf)
    np.testing.assert_array_equal(result.as_array(copy_buf), buf.reshape(4, 6).T.reshape(24))


def test_copy_to_contiguous_of_r_tensor_is_an_l_tensor():
    r = TensorDescription.row_major((3, 4), read_only=True).slice((slice(None, None, -1),))
    c = r.copy_to_contiguous()
    assert c.read_only is False and c.c_contiguous and c.is_base()
    assert c.shape == r.shape and c.dtype == r.dtype and not c.shares_buffer(r)


def test_reshape_resolves_minus_one_and_rejects_wrong_sizes():
    t = TensorDescription.row_major((4, 6), name="x")
    assert t.reshape((-1,)).shape == (24,)
    assert t.reshape((3, -1)).shape == (3, 8)
    with pytest.raises(ShapeError, match=r"'x' of shape \(4, 6\)"):
        t.reshape((5, 5))
    with pytest.raises(ShapeError):
        t.reshape((-1, -1))
    with pytest.raises(ShapeError):
        t.reshape((7, -1))


def test_reshape_of_empty_tensor_is_always_a_view():
    t = TensorDescription.row_major((0, 3)).transpose()
    v = t.reshape((0,))
    assert v is not None and v.shape == (0,)
    assert v.as_array(filled(t.base)).shape == (0,)


def test_flatten_of_an_empty_broadcast_view_is_a_view_as_in_numpy():
    # Found by hypothesis: A is broadcast (stride 0) and C is empty, so no element is
    # reached and any stride describes A*B; NumPy reshapes such an array without a copy.
    A, B, C = ng.make_axis(2, "A"), ng.make_axis(2, "B"), ng.make_axis(0, "C")
    t = ng.TensorDescription([A, B, C], dtype=np.float64, full_strides=(0, 8, 8))
    flat = t.flatten([ng.FlattenedAxis([A, B]), C])
    expected = np.lib.stride_tricks.as_strided(np.empty(0), (2, 2, 0), (0, 8, 8)).reshape(4, 0)
    assert flat.shape == expected.shape
    assert flat.strides[1:] == expected.strides[1:]


def test_reshape_drops_padding_from_sizes():
    t = TensorDescription.row_major((4, 6), sizes=(4, 8))
    assert t.reshape((24,)) is None  # rows are not adjacent: the padding sits between them
    v = t.reshape((4, 2, 3))
    buf = filled(t)
    check_view(v, buf, t.as_array(buf).reshape(4, 2, 3))
    assert v.sizes == (4, 2, 3)


# --------------------------------------------------------------------------- broadcast


def test_broadcast_new_axes_have_stride_zero_and_share_memory():
    t = TensorDescription.row_major((2, 3), np.float32)
    buf = filled(t)
    b = t.broadcast((4, 2, 3))
    assert b.element_strides == (0, 3, 1) and b.strides == (0, 12, 4)
    check_view(b, buf, np.broadcast_to(t.as_array(buf), (4, 2, 3)))
    assert b.size == 24 and b.extent == (0, 5)


def test_broadcast_stretches_size_one_dims():
    t = TensorDescription.row_major((3, 1), np.float64)
    buf = filled(t)
    b = t.broadcast((2, 3, 5))
    assert b.element_strides == (0, 1, 0)
    check_view(b, buf, np.broadcast_to(t.as_array(buf), (2, 3, 5)))


@pytest.mark.parametrize("new_axes, target", [((1,), (2, 7, 3)), ((0, 2), (5, 2, 4, 3)),
                                              ((-1,), (2, 3, 6)), ((), (2, 3))])
def test_broadcast_with_new_axes_in_the_middle(new_axes, target):
    t = TensorDescription.row_major((2, 3), np.float32)
    buf = filled(t)
    arr = np.expand_dims(t.as_array(buf), new_axes) if new_axes else t.as_array(buf)
    check_view(t.broadcast(target, new_axes), buf, np.broadcast_to(arr, target))


def test_broadcast_errors():
    t = TensorDescription.row_major((2, 3), name="x")
    with pytest.raises(ShapeError, match="only length-1 dimensions stretch"):
        t.broadcast((4, 3))
    with pytest.raises(ShapeError, match="lower-rank"):
        t.broadcast((3,))
    with pytest.raises(ShapeError, match="new_axes"):
        t.broadcast((2, 2, 3), new_axes=(0, 0))
    with pytest.raises(ShapeError, match="leaves"):
        t.broadcast((2, 2, 3), new_axes=(0, 1))


def test_writes_through_views_reach_the_base():
    t = TensorDescription.row_major((3, 4), np.float32)
    buf = filled(t)
    t.transpose().slice((1, slice(None, None, -1))).as_array(buf)[...] = -1.0
    assert np.all(buf.reshape(3, 4)[:, 1] == -1.0)
    assert np.all(np.delete(buf.reshape(3, 4), 1, axis=1) >= 0)


# --------------------------------------------------------------------------- index_of


def test_index_of_matches_numpy_positions():
    t = TensorDescription.row_major((5, 3, 2), np.float64, sizes=(5, 4, 3))
    buf = filled(t)
    for view in (t, t.transpose((2, 0, 1)), t.slice((slice(None, None, -2), slice(1, 3))),
                 t.broadcast((2, 5, 3, 2))):
        arr = view.as_array(buf)
        for index in np.ndindex(*view.shape):
            assert buf[view.index_of(index)] == arr[index]
            assert view.element(index, buf) == arr[index]
        assert [buf[o] for o in view.iter_element_offsets()] == list(arr.ravel())


def test_index_of_formula():
    t = TensorDescription.row_major((5, 3, 2))
    assert t.index_of((4, 2, 1)) == 4 * 6 + 2 * 2 + 1
    assert t.slice((slice(1, None),)).index_of((0, 0, 0)) == 6


@pytest.mark.parametrize("index, match", [((5, 0, 0), r"out of bounds .*'x' of shape \(5, 3, 2\)"),
                                          ((0, -1, 0), r"entry 1 must be in \[0, 3\)"),
                                          ((0, 0), "has rank 3"),
                                          ((0, 0, 0, 0), "has rank 3"),
                                          ((0, 1.0, 0), "not an integer")])
def test_index_of_errors_are_clear(index, match):
    t = TensorDescription.row_major((5, 3, 2), name="x")
    with pytest.raises(TensorIndexError, match=match) as info:
        t.index_of(index)
    assert isinstance(info.value, AxgraphError)


# --------------------------------------------------------------------------- as_array


def test_read_only_arrays_are_not_writeable():
    r = TensorDescription.row_major((2, 3), read_only=True)
    buf = filled(r)
    arr = r.as_array(buf)
    assert not arr.flags.writeable
    with pytest.raises(ValueError):
        arr[0, 0] = 1
    for view in (r.transpose(), r.slice((0,)), r.reshape((6,)), r.broadcast((2, 2, 3))):
        assert view.read_only and not view.as_array(buf).flags.writeable
    lt = TensorDescription.row_major((2, 3))
    assert lt.as_array(filled(lt)).flags.writeable
    assert lt.as_read_only().as_array(filled(lt)).flags.writeable is False


def test_as_array_checks_the_buffer():
    t = TensorDescription.row_major((2, 3), np.float32, name="x")
    with pytest.raises(DTypeError):
        t.as_array(np.zeros(6, np.float64))
    with pytest.raises(LayoutError, match="reaches elements 0..5"):
        t.as_array(np.zeros(5, np.float32))
    with pytest.raises(LayoutError, match="1-d"):
        t.as_array(np.zeros((2, 3), np.float32))
    with pytest.raises(LayoutError, match="contiguous"):
        t.as_array(np.zeros(12, np.float32)[::2])


# --------------------------------------------------------------------------- same layout


def test_same_layout_lets_one_flat_offset_walk_two_tensors():
    t = TensorDescription.row_major((2, 3, 4), np.float64)
    a, b = t.slice((0,)).transpose(), t.slice((1,)).transpose()
    assert a.same_layout(b) and a.element_offset != b.element_offset
    buf = filled(t)
    delta = b.element_offset - a.element_offset
    # one iterator (a's offsets) reaches matching elements of both tensors
    pairs = [(buf[k], buf[k + delta]) for k in a.iter_element_offsets()]
    assert pairs == list(zip(a.as_array(buf).ravel(), b.as_array(buf).ravel()))
    assert not a.same_layout(t.slice((1,)))


# --------------------------------------------------------------------------- alignment


@pytest.mark.parametrize("dtype, alignment, shape, sizes", [
    (np.float32, 16, (3, 5), (3, 8)),
    (np.float64, 64, (2, 3), (2, 8)),
    (np.int8, 16, (4, 17), (4, 32)),
    (np.float32, 16, (3, 8), (3, 8)),        # already aligned: no padding
    (np.complex128, 8, (2, 3), (2, 3)),       # every element is already aligned
    (np.float32, 16, (7,), (8,)),
])
def test_row_major_alignment_pads_the_innermost_size(dtype, alignment, shape, sizes):
    t = TensorDescription.row_major(shape, dtype, alignment=alignment)
    assert t.shape == shape and t.sizes == sizes
    assert t.element_strides == row_major_strides(sizes)
    assert t.allocated_elements == math.prod(sizes) >= t.size
    assert t.nbytes == t.size * np.dtype(dtype).itemsize
    assert t.tensor_size == math.prod(sizes) * np.dtype(dtype).itemsize
    buf = t.buffer.allocate()
    assert buf.ctypes.data % alignment == 0
    arr = t.as_array(buf)
    assert arr.shape == shape
    for row in np.ndindex(*shape[:-1]):
        assert arr[row].ctypes.data % alignment == 0
    assert t.c_contiguous == (sizes == shape or len(shape) == 1)  # trailing padding only


def test_aligned_tensor_views_see_only_the_shape():
    t = TensorDescription.row_major((3, 5), np.float32, alignment=16)
    buf = filled(t)
    expected = buf.reshape(3, 8)[:, :5]
    np.testing.assert_array_equal(t.as_array(buf), expected)
    check_view(t.transpose(), buf, expected.T)
    check_view(t.slice((slice(None, None, -1), slice(1, None, 2))), buf, expected[::-1, 1::2])
    assert t.reshape((15,)) is None  # padding separates the rows


def test_column_major_alignment_pads_the_first_dim():
    t = TensorDescription.column_major((3, 4), np.float32, alignment=16)
    assert t.sizes == (4, 4) and t.element_strides == (1, 4)
    buf = filled(t)
    arr = t.as_array(buf)
    assert arr.shape == (3, 4)
    assert all(arr[:, j].ctypes.data % 16 == 0 for j in range(4))


def test_bad_alignment_rejected():
    with pytest.raises(LayoutError, match="alignment"):
        TensorDescription.row_major((2, 3), alignment=0)


# --------------------------------------------------------------------------- padded view


@pytest.mark.parametrize("below, above, value", [((1, 2), (3, 0), 0), (1, 1, 7.5), ((0, 0), (0, 2), -1)])
def test_padded_view_matches_np_pad(below, above, value):
    t = TensorDescription.row_major((3, 4), np.float32)
    buf = filled(t)
    p = PaddedView(t, below, above, value)
    b = (below,) * 2 if isinstance(below, int) else below
    a = (above,) * 2 if isinstance(above, int) else above
    expected = np.pad(t.as_array(buf), list(zip(b, a)), constant_values=value)
    assert p.shape == expected.shape and p.read_only and p.rank == 2
    np.testing.assert_array_equal(p.materialize(buf), expected)
    for index in np.ndindex(*p.shape):
        assert p.element(index, buf) == expected[index]


def test_padded_view_selection_function_is_the_seeds():
    t = TensorDescription.row_major((2, 3), np.int32)
    buf = filled(t)
    p = t.pad((1, 0), (0, 2))
    src = t.as_array(buf)
    for index in np.ndindex(*p.shape):
        which, inner = p.select(index)
        tensors = [src, np.asarray(p.value)]
        assert tensors[which][inner] == p.element(index, buf)
        inside = 1 <= index[0] < 3 and index[1] < 3
        assert which == (0 if inside else 1)
        if inside:
            assert inner == (index[0] - 1, index[1])


def test_padded_view_of_a_strided_source():
    t = TensorDescription.row_major((4, 5), np.float64)
    buf = filled(t)
    src = t.transpose().slice((slice(None, None, -2),))
    p = PaddedView(src, (2, 1), (0, 3), value=-9)
    expected = np.pad(buf.reshape(4, 5).T[::-2], ((2, 0), (1, 3)), constant_values=-9)
    np.testing.assert_array_equal(p.materialize(buf), expected)
    assert not np.shares_memory(p.materialize(buf), buf)


def test_padded_view_errors():
    t = TensorDescription.row_major((2, 3), name="x")
    with pytest.raises(ShapeError, match="negative"):
        PaddedView(t, (0, -1), 0)
    with pytest.raises(ShapeError, match="rank 2"):
        PaddedView(t, (1,), 0)
    with pytest.raises(TensorIndexError, match="out of bounds"):
        t.pad(1, 1).element((4, 0), filled(t))


# --------------------------------------------------------------------------- property test


def _factorize(n: int) -> list:
    factors, p = [], 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    return factors


@st.composite
def reshape_targets(draw, size: int):
    """A random shape with `size` elements: shuffled prime factors grouped, plus some 1s."""
    if size == 0:
        return (0,)
    factors = draw(st.permutations(_factorize(size)))
    dims = []
    for f in factors:
        if dims and draw(st.booleans()):
            dims[-1] *= f
        else:
            dims.append(f)
    for _ in range(draw(st.integers(0, 2))):
        dims.insert(draw(st.integers(0, len(dims))), 1)
    return tuple(dims)


@st.composite
def slice_items(draw, shape):
    items = []
    for n in shape:
        if n > 0 and draw(st.integers(0, 4)) == 0:
            items.append(draw(st.integers(-n, n - 1)))
        else:
            bound = st.one_of(st.none(), st.integers(-n - 1, n + 1))
            step = st.one_of(st.none(), st.integers(-3, 3).filter(bool))
            items.append(slice(draw(bound), draw(bound), draw(step)))
    return tuple(items)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_random_view_chains_match_numpy(data):
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=4), label="shape"))
    column = data.draw(st.booleans(), label="column_major")
    make = TensorDescription.column_major if column else TensorDescription.row_major
    desc = make(shape, np.float64)
    buf = filled(desc)
    arr = buf.reshape(shape, order="F" if column else "C")
    check_view(desc, buf, arr)
    for _ in range(data.draw(st.integers(1, 6), label="steps")):
        op = data.draw(st.sampled_from(["transpose", "slice", "reshape", "broadcast"]))
        if op == "transpose":
            perm = tuple(data.draw(st.permutations(range(desc.rank))))
            desc, arr = desc.transpose(perm), np.transpose(arr, perm)
        elif op == "slice":
            items = data.draw(slice_items(desc.shape))
            desc, arr = desc.slice(items), arr[items]
        elif op == "reshape":
            target = data.draw(reshape_targets(desc.size))
            view, expected = desc.reshape(target), numpy_reshape_view(arr, target)
            assert (view is None) == (expected is None), (desc, target)
            if view is None:  # the caller's copy, then a view of the copy
                copy_desc = desc.copy_to_contiguous()
                copy_buf = copy_desc.buffer.allocate()
                copy_desc.as_array(copy_buf)[...] = desc.as_array(buf)
                view, buf, expected = copy_desc.reshape(target), copy_buf, arr.reshape(target)
            desc, arr = view, expected
        else:
            if desc.rank >= 5 or desc.size > 200:
                continue
            pos = data.draw(st.integers(0, desc.rank))
            length = data.draw(st.integers(1, 3))
            target = list(desc.shape)
            target.insert(pos, length)
            target = tuple(data.draw(st.integers(1, 3)) if n == 1 and i != pos else n
                           for i, n in enumerate(target))
            desc = desc.broadcast(target, new_axes=(pos,))
            arr = np.broadcast_to(np.expand_dims(arr, pos), target)
        check_view(desc, buf, arr)


# --------------------------------------------------------------------------- v0.4: built from axes
#
# Nervana Graph v0.4 bound a description to memory with np.ndarray(buffer=...), strides and
# offset in bytes; every view below is bound that way and compared with NumPy's own
# slicing / transpose / broadcast_to / reshape of the same data.


def bound(td: TensorDescription, buf: np.ndarray) -> np.ndarray:
    """The array `td` describes in `buf`, as v0.4's tests made it."""
    return np.ndarray(shape=td.shape, dtype=td.dtype, buffer=buf, offset=td.offset,
                      strides=td.strides)


def axes_abc():
    return ng.make_axis(2, name="A"), ng.make_axis(3, name="B"), ng.make_axis(4, name="C")


def test_v04_scalar_description_broadcasts_to_1d_and_2d():
    a, b, _ = axes_abc()
    td = TensorDescription(())
    assert (td.shape, td.strides, td.offset, td.ndim) == ((), (), 0, 0)
    x = np.zeros(td.shape, td.dtype)
    one, two = bound(td.broadcast([a]), x), bound(td.broadcast([a, b]), x)
    x[()] = 3
    assert one.shape == (2,) and two.shape == (2, 3)
    assert np.all(one == 3) and np.all(two == 3)
    assert np.shares_memory(two, x)
    assert TensorDescription(axes=()).dtype == np.float32


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16])
def test_v04_description_is_row_major_in_bytes(dtype):
    a, b, c = axes_abc()
    td = TensorDescription(axes=[a, b, c], dtype=dtype)
    item = np.dtype(dtype).itemsize
    assert td.axes == ng.make_axes([a, b, c]) and td.shape == (2, 3, 4)
    assert td.strides == (12 * item, 4 * item, item) and td.offset == 0
    assert td.element_strides == (12, 4, 1)
    assert td.sizes == (2, 3, 4) and td.tensor_size == 24 * item and td.ndim == 3
    assert td.c_contiguous and td.broadcast_contiguous and not td.f_contiguous
    assert td.is_base() and td.base is td
    data = np.arange(24).astype(dtype).reshape(2, 3, 4)
    view = bound(td, data)
    np.testing.assert_array_equal(view, data)
    assert view.strides == data.strides


def test_v04_nested_axes_make_flattened_axes_with_nested_strides():
    a, b, c = axes_abc()
    td = TensorDescription([(a, b), c])
    assert td.axes[0] is ng.FlattenedAxis([a, b]) and td.shape == (6, 4)
    assert td.full_strides == ((48, 16), 4) and td.full_sizes == ((2, 3), 4)
    assert td.strides == (16, 4) and td.sizes == (6, 4)
    assert ng.reduce_strides(td.full_strides) == td.strides
    assert TensorDescription.reduce_strides(td.full_strides) == td.strides
    data = np.arange(24, dtype=np.float32)
    np.testing.assert_array_equal(bound(td, data), data.reshape(6, 4))


def test_v04_broadcast_adds_zero_strides_and_reorders():
    a, b, c = axes_abc()
    td = TensorDescription([a, b], dtype=np.float64)
    data = np.arange(6, dtype=np.float64).reshape(2, 3)
    front = td.broadcast([c, a, b])
    assert front.strides == (0, 24, 8) and front.axes == ng.make_axes([c, a, b])
    np.testing.assert_array_equal(bound(front, data), np.broadcast_to(data, (4, 2, 3)))
    moved = td.broadcast([b, c, a])  # kept axes reordered, the new one in between
    got = bound(moved, data)
    np.testing.assert_array_equal(got, np.broadcast_to(data.T[:, None, :], (3, 4, 2)))
    assert np.shares_memory(got, data)
    assert not front.c_contiguous and front.broadcast_contiguous
    assert td.broadcast([a, c, b]).broadcast_contiguous
    assert not moved.broadcast_contiguous


def test_v04_broadcast_to_a_flattened_axis_has_nested_zero_strides():
    a, b, c = axes_abc()
    td = TensorDescription(axes=[a])
    data = np.array([5.0, 7.0], dtype=np.float32)
    wide = td.broadcast([(b, c), a])
    assert wide.full_strides == ((0, 0), 4) and wide.full_sizes == ((3, 4), 2)
    assert wide.shape == (12, 2) and wide.strides == (0, 4)
    np.testing.assert_array_equal(bound(wide, data), np.broadcast_to(data, (12, 2)))


def test_v04_broadcast_keeps_every_axis():
    a, b, c = axes_abc()
    td = TensorDescription([a, b], name="x")
    with pytest.raises(ng.IncompatibleAxesError, match=r"'x'.*leaves out Axes\(B: 3\)") as info:
        td.broadcast([a, c])
    assert isinstance(info.value, ValueError)
    with pytest.raises(ng.AxgraphTypeError, match="new_axes"):
        td.broadcast([c, a, b], new_axes=(0,))


def test_v04_reorder_and_transpose_are_numpy_transposes():
    a, b, c = axes_abc()
    td = TensorDescription([a, b, c], dtype=np.int32)
    data = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    reordered = td.reorder([c, a, b])
    assert reordered.axes == ng.make_axes([c, a, b])
    np.testing.assert_array_equal(bound(reordered, data), np.transpose(data, (2, 0, 1)))
    reversed_ = td.transpose()
    assert reversed_.axes == ng.make_axes([c, b, a])
    np.testing.assert_array_equal(bound(reversed_, data), data.T)
    assert bound(reversed_, data).strides == data.T.strides
    with pytest.raises(ng.IncompatibleAxesError, match="reorder"):
        td.reorder([a, b])


def test_v04_flatten_and_unflatten_are_numpy_reshapes():
    a, b, c = axes_abc()
    td = TensorDescription([a, b, c])
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for new_axes, shape in [([(a, b), c], (6, 4)), ([a, (b, c)], (2, 12)), ([(a, b, c)], (24,)),
                            ([ng.FlattenedAxis([a, b]), c], (6, 4))]:
        flat = td.flatten(new_axes)
        assert flat.shape == shape and not flat.is_base() and flat.base is td
        got = bound(flat, data)
        np.testing.assert_array_equal(got, data.reshape(shape))
        assert np.shares_memory(got, data)
        back = flat.unflatten([a, b, c])
        assert back.axes == td.axes and back.strides == td.strides
        np.testing.assert_array_equal(bound(back, data), data)
    assert td.flatten([(a, b), c]).full_strides == ((48, 16), 4)


def test_v04_simple_tensors_walk_through():
    """v0.4's own reaxe example: a vector broadcast three ways, a matrix flattened."""
    a, b, c = axes_abc()
    td1, td2 = TensorDescription(axes=[a]), TensorDescription(axes=[a, b])
    e1, e2 = np.zeros(td1.shape, td1.dtype), np.zeros(td2.shape, td2.dtype)
    e1_1, e1_2 = bound(td1.broadcast([a, b]), e1), bound(td1.broadcast([b, a]), e1)
    e1_3 = bound(td1.broadcast([(b, c), a]), e1)
    e2_1 = bound(td2.broadcast([b, a]), e2)
    e2_2 = bound(td2.broadcast([a, b]), e2)
    e2_3 = bound(td2.flatten((ng.FlattenedAxis((a, b)),)), e2_2)
    for i in range(2):
        e1_1[i] = i  # writing through a broadcast view writes the vector
    np.testing.assert_array_equal(e1, [0, 1])
    np.testing.assert_array_equal(e1_2, np.broadcast_to(e1, (3, 2)))
    np.testing.assert_array_equal(e1_3, np.broadcast_to(e1, (12, 2)))
    e2[...] = np.add.outer(np.arange(2) + 1, np.arange(3) + 2)
    np.testing.assert_array_equal(e2_1, e2.T)
    np.testing.assert_array_equal(e2_2, e2)
    np.testing.assert_array_equal(e2_3, e2.ravel())


@pytest.mark.parametrize("make, new_axes", [
    (lambda td: td.transpose(), lambda a, b, c: [(c, b), a]),
    (lambda td: td.reorder([b_ for b_ in td.axes[1:]] + [td.axes[0]]),
     lambda a, b, c: [(b, c, a)]),
])
def test_v04_flatten_of_axes_not_contiguous_raises_instead_of_a_wrong_view(make, new_axes):
    a, b, c = axes_abc()
    td = make(TensorDescription([a, b, c], name="x"))
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    arr = bound(td, data)
    target = (arr.shape[0] * arr.shape[1], arr.shape[2]) if len(new_axes(a, b, c)) == 2 else (24,)
    assert not np.shares_memory(arr.reshape(target), data)  # NumPy has to copy as well
    with pytest.raises(ng.LayoutError, match=r"'x\..*not contiguous.*a copy is needed") as info:
        td.flatten(new_axes(a, b, c))
    assert isinstance(info.value, ng.AxgraphError) and isinstance(info.value, ValueError)
    copy = td.copy_to_contiguous()
    assert copy.axes == td.axes and copy.c_contiguous
    copy_buf = np.ascontiguousarray(arr)
    np.testing.assert_array_equal(bound(copy.flatten(new_axes(a, b, c)), copy_buf),
                                  arr.reshape(target))


def test_v04_flatten_of_padded_or_strided_axes_raises():
    a, b, _ = axes_abc()
    padded = TensorDescription([a, b], full_sizes=(2, 4), name="p")
    assert padded.strides == (16, 4) and padded.tensor_size == 32
    with pytest.raises(ng.LayoutError, match="'p'"):
        padded.flatten([(a, b)])
    stepped = TensorDescription([a, b]).slice([slice(None), slice(None, None, 2)])
    with pytest.raises(ng.LayoutError):
        stepped.flatten([tuple(stepped.axes)])


def test_v04_flatten_of_reversed_axes_walks_backwards():
    """Both axes reversed stay contiguous: one stride of -1 element (v0.4's smallest-stride
    rule would have taken -3 elements and read outside the values)."""
    a, b, _ = axes_abc()
    td = TensorDescription([a, b]).slice([slice(None, None, -1), slice(None, None, -1)])
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    flat = td.flatten([tuple(td.axes)])
    assert flat.strides == (-4,) and flat.offset == 20
    got = bound(flat, data)
    np.testing.assert_array_equal(got, data[::-1, ::-1].reshape(6))
    assert np.shares_memory(got, data)


def test_v04_flatten_and_unflatten_need_the_same_axes_in_order():
    a, b, c = axes_abc()
    td = TensorDescription([a, b, c], name="x")
    with pytest.raises(ng.IncompatibleAxesError, match="same axes in the same order"):
        td.flatten([(b, a), c])
    with pytest.raises(ng.IncompatibleAxesError):
        td.flatten([(a, b)])
    with pytest.raises(ng.IncompatibleAxesError):
        td.flatten([(a, b), c]).unflatten([b, a, c])


def test_v04_unflatten_of_an_axis_walked_by_one_stride():
    """A flattened axis reached through a cast keeps no part strides; its parts are
    row-major in its one stride (here, every other element)."""
    a, b, _ = axes_abc()
    wide = TensorDescription.row_major((12,), np.float32).slice([slice(None, None, 2)])
    flat = wide.cast([(a, b)])
    assert flat.full_strides == ((24, 8),)
    split = flat.unflatten([a, b])
    data = np.arange(12, dtype=np.float32)
    np.testing.assert_array_equal(bound(split, data), data[::2].reshape(2, 3))


@pytest.mark.parametrize("index, expected", [
    ((slice(None, None, -1), 1), lambda d: d[::-1, 1]),
    ((slice(1, None), slice(None, None, -2)), lambda d: d[1:, ::-2]),
    ((0, slice(2, 0, -1)), lambda d: d[0, 2:0:-1]),
    ([-1], lambda d: d[-1]),
    ((slice(None), slice(3, 1)), lambda d: d[:, 3:1]),
])
def test_v04_slice_matches_numpy(index, expected):
    a, _, c = axes_abc()
    td = TensorDescription([a, c], dtype=np.float64)
    data = np.arange(8, dtype=np.float64).reshape(2, 4)
    kept = sum(isinstance(item, slice) for item in index) + 2 - len(index)
    new_axes = [ng.make_axis(name=f"S{k}") for k in range(kept)]
    view = td.slice(index, new_axes)
    want = expected(data)
    assert view.axes == ng.make_axes(new_axes)
    assert [axis.length for axis in new_axes] == list(want.shape)  # set from the slices
    got = bound(view, data)
    np.testing.assert_array_equal(got, want)
    if want.size:
        assert np.shares_memory(got, data)
        assert got.strides == want.strides


def test_v04_slice_moves_offset_to_first_element_for_negative_steps():
    a, b, _ = axes_abc()
    td = TensorDescription([a, b])
    view = td.slice([slice(None, None, -1), slice(2, None, -2)])
    assert view.offset == (3 + 2) * 4 and view.strides == (-12, -8)


def test_v04_slice_labels_without_new_axes_are_sliced_axes():
    a, b, _ = axes_abc()
    td = TensorDescription([a, b])
    view = td.slice([slice(None), slice(None, None, -1)])
    assert view.axes[0] is a and view.axes[1] is ng.SlicedAxis.of(b, slice(None, None, -1))
    assert td.slice([1]).axes == ng.make_axes([b])


def test_v04_slice_new_axes_are_checked():
    a, b, _ = axes_abc()
    td = TensorDescription([a, b], name="x")
    with pytest.raises(ng.AxesError, match="keeps 1 dimensions, but 2 new axes"):
        td.slice([0], [ng.make_axis(name="P"), ng.make_axis(name="Q")])
    with pytest.raises(ng.AxisLengthError, match="selects 2 positions") as info:
        td.slice([0, slice(1, None)], [ng.make_axis(5, name="P")])
    assert isinstance(info.value, ValueError)
    ok = ng.make_axis(2, name="P")
    assert td.slice([0, slice(1, None)], [ok]).axes[0] is ok


def test_v04_cast_relabels_and_scalar_cast_repeats():
    a, b, _ = axes_abc()
    td = TensorDescription([a, b])
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    x, y = ng.make_axis(2, name="X"), ng.make_axis(3, name="Y")
    cast = td.cast([x, y])
    assert cast.axes == ng.make_axes([x, y]) and cast.strides == td.strides
    np.testing.assert_array_equal(bound(cast, data), data)
    with pytest.raises(ng.IncompatibleAxesError, match=r"lengths \(2, 3\) and \(3, 2\)"):
        td.cast([y, x])
    scalar = np.array(4.0, dtype=np.float32)
    np.testing.assert_array_equal(bound(TensorDescription(()).cast([a, b]), scalar),
                                  np.full((2, 3), 4.0))


def test_v04_clone_is_an_equal_view():
    a, b, _ = axes_abc()
    td = TensorDescription([a, b])
    clone = td.clone()
    assert clone is not td and clone == td and clone.axes == td.axes and clone.base is td


def test_v04_view_of_a_base():
    a, b, _ = axes_abc()
    td = TensorDescription([a, b], dtype=np.float64)
    data = np.arange(6, dtype=np.float64).reshape(2, 3)
    row = TensorDescription([b], base=td, full_strides=(8,), offset=24)
    assert row.dtype == np.float64 and row.base is td and not row.is_base()
    assert row.shares_buffer(td)
    got = bound(row, data)
    np.testing.assert_array_equal(got, data[1])
    assert np.shares_memory(got, data)
    column = TensorDescription([a], base=row, full_strides=(24,), offset=16)
    assert column.base is td
    np.testing.assert_array_equal(bound(column, data), data[:, 2])


def test_v04_axis_without_length_is_a_value_error_naming_it():
    a, _, _ = axes_abc()
    h = ng.make_axis(name="H")
    with pytest.raises(ng.AxisLengthError, match="axis H has no length") as info:
        TensorDescription([a, h])
    assert isinstance(info.value, ValueError) and isinstance(info.value, ng.AxgraphValueError)
    with pytest.raises(ng.AxisLengthError, match="axis H has no length"):
        TensorDescription([(a, h)])
    with pytest.raises(ng.AxisLengthError, match="axis H"):
        TensorDescription([a]).broadcast([a, h])


def test_v04_strides_and_offsets_must_be_whole_elements():
    a, b, _ = axes_abc()
    with pytest.raises(ng.LayoutError, match="multiples of the item size 4"):
        TensorDescription([a, b], full_strides=(12, 2))
    with pytest.raises(ng.LayoutError, match="multiples of the item size 4"):
        TensorDescription([a, b], offset=2)
    with pytest.raises(ng.LayoutError, match="3 entries for the 2 axes"):
        TensorDescription([a, b], full_strides=(12, 4, 4))
    with pytest.raises(ng.LayoutError, match="not a FlattenedAxis"):
        TensorDescription([a, b], full_strides=((12, 4), 4))
    with pytest.raises(ng.LayoutError, match="not contiguous"):
        TensorDescription([(a, b)], full_strides=((4, 8),))


def test_v04_reduce_strides():
    assert ng.reduce_strides(((48, 16), 4, 0)) == (16, 4, 0)
    assert ng.reduce_strides(((-12, -4),), ((2, 3),)) == (-4,)   # exact with lengths
    assert ng.reduce_strides(((0, 8),), ((1, 3),)) == (8,)       # a length-1 part never moves
    with pytest.raises(ng.LayoutError, match="not contiguous"):
        ng.reduce_strides(((4, 12),), ((2, 3),))


def test_v04_descriptions_made_from_shapes_get_axes_on_first_use():
    pos = TensorDescription.row_major((2, 3))
    assert pos.axes is pos.axes and pos.axes.lengths == (2, 3)
    flat = pos.flatten([tuple(pos.axes)])
    assert flat.shape == (6,) and flat.element_strides == (1,)


def test_op_tensor_description_describes_its_value():
    a, b, _ = axes_abc()
    x = ng.placeholder([a, b], dtype=np.float64).named("x")
    td = x.tensor_description()
    assert td is x.tensor_description()
    assert td.axes == x.axes and td.dtype == np.float64 and td.name == "x"
    assert td.strides == (24, 8) and td.is_base()
    e = ng.exp(x)
    assert e.tensor_description().axes == e.axes
    assert e.tensor_description().dtype == e.dtype
    v = ng.variable([a], initial_value=0.0)
    assert ng.assign(v, 1.0).tensor_description() is None


def test_op_tensor_description_needs_every_length():
    a = ng.make_axis(2, name="A")
    n = ng.make_axis(name="N")
    x = ng.placeholder([a, n]).named("x")
    with pytest.raises(ng.AxisLengthError, match=r"'x'.*axis N has no length") as info:
        x.tensor_description()
    assert isinstance(info.value, ValueError)
    assert info.value.location is not None and info.value.location[0] == __file__


@st.composite
def axes_view_steps(draw):
    kinds = ["reorder", "slice", "broadcast", "flatten", "flatten", "unflatten", "unflatten"]
    return [draw(st.sampled_from(kinds)) for _ in range(draw(st.integers(2, 7)))]


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_random_axes_view_chains_match_numpy(data):
    """Chains of v0.4 views against the same NumPy operations; flatten raises exactly
    where NumPy's reshape would have to copy."""
    lengths = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3), label="lengths")
    axes = [ng.make_axis(n) for n in lengths]
    td = TensorDescription(axes, dtype=np.float64)
    buf = np.arange(math.prod(lengths), dtype=np.float64)
    arr = buf.reshape(lengths)
    for step in data.draw(axes_view_steps(), label="steps"):
        own = list(td.axes)
        if step == "reorder":
            perm = data.draw(st.permutations(range(len(own))))
            td, arr = td.reorder([own[p] for p in perm]), np.transpose(arr, perm)
        elif step == "slice":
            items = data.draw(slice_items(td.shape))
            td, arr = td.slice(items), arr[items]
        elif step == "broadcast":
            if td.rank >= 4:
                continue
            new = ng.make_axis(data.draw(st.integers(1, 3)))
            pos = data.draw(st.integers(0, len(own)))
            td = td.broadcast(own[:pos] + [new] + own[pos:])
            arr = np.broadcast_to(np.expand_dims(arr, pos), td.shape)
        elif step == "flatten":
            if len(own) < 2:
                continue
            i = data.draw(st.integers(0, len(own) - 2))
            merged = own[:i] + [(own[i], own[i + 1])] + own[i + 2:]
            target = arr.shape[:i] + (arr.shape[i] * arr.shape[i + 1],) + arr.shape[i + 2:]
            expected = numpy_reshape_view(arr, target)
            if expected is None:
                with pytest.raises(ng.LayoutError):
                    td.flatten(merged)
                continue
            td, arr = td.flatten(merged), expected
        else:
            flat = [k for k, axis in enumerate(own) if isinstance(axis, ng.FlattenedAxis)]
            if not flat:
                continue
            k = flat[0]
            parts = list(own[k].axes)
            td = td.unflatten(own[:k] + parts + own[k + 1:])
            arr = arr.reshape(arr.shape[:k] + tuple(p.length for p in parts) + arr.shape[k + 1:])
        got = bound(td, buf)
        np.testing.assert_array_equal(got, arr)
        if arr.size:
            assert np.shares_memory(got, buf)
