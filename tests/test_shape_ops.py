"""Shape ops: broadcast, cast_axes, axes_with_order, flatten/unflatten, slicing,
concat, stack and pad. Expected values are built with plain NumPy (often with
explicit loops), never with the library."""
import numpy as np
import pytest

import axgraph as ng



def _run(transformer, result, *feeds):
    """Compute `result` with (placeholder, value) pairs fed positionally."""
    placeholders = [p for p, _ in feeds]
    values = [v for _, v in feeds]
    return transformer.computation(result, *placeholders)(*values)


def _axes3():
    A = ng.make_axis(2, name="A")
    B = ng.make_axis(3, name="B")
    C = ng.make_axis(4, name="C")
    return A, B, C


# -- broadcast -------------------------------------------------------------------

def test_broadcast_to_new_axes_in_any_order(transformer, rng):
    C = ng.make_axis(2, name="C")
    H = ng.make_axis(3, name="H")
    W = ng.make_axis(4, name="W")
    x = ng.placeholder([C, H])
    xv = rng.standard_normal((2, 3)).astype(np.float32)

    b = ng.broadcast(x, [W, H, C])
    assert b.axes == ng.make_axes([W, H, C])
    assert b.axes.lengths == (4, 3, 2)
    got = _run(transformer, b, (x, xv))
    assert got.shape == (4, 3, 2)
    expected = np.empty((4, 3, 2), np.float32)
    for w in range(4):
        for h in range(3):
            for c in range(2):
                expected[w, h, c] = xv[c, h]
    np.testing.assert_array_equal(got, expected)


def test_broadcast_keeps_order_and_adds_axis_in_middle(transformer, rng):
    C = ng.make_axis(2, name="C")
    H = ng.make_axis(3, name="H")
    W = ng.make_axis(4, name="W")
    x = ng.placeholder([C, H])
    xv = rng.standard_normal((2, 3)).astype(np.float32)
    b = ng.broadcast(x, [C, W, H])
    assert b.axes == ng.make_axes([C, W, H])
    got = _run(transformer, b, (x, xv))
    expected = np.repeat(xv[:, None, :], 4, axis=1)
    np.testing.assert_array_equal(got, expected)


def test_broadcast_must_include_original_axes():
    C = ng.make_axis(2, name="C")
    H = ng.make_axis(3, name="H")
    W = ng.make_axis(4, name="W")
    x = ng.placeholder([C, H])
    with pytest.raises(ng.AxesError):
        ng.broadcast(x, [C, W])


# -- cast_axes --------------------------------------------------------------------

def test_cast_axes_relabels_so_addition_pairs(transformer, rng):
    C1 = ng.make_axis(3, name="C1")
    C2 = ng.make_axis(3, name="C2")
    N = ng.make_axis(4, name="N")
    h1 = ng.placeholder([C1, N])
    h2 = ng.placeholder([C2, N])
    v1 = rng.standard_normal((3, 4)).astype(np.float32)
    v2 = rng.standard_normal((3, 4)).astype(np.float32)

    direct = h1 + h2
    assert direct.axes == ng.make_axes([C1, N, C2])

    cast = ng.cast_axes(h2, [C1, N])
    assert cast.axes == ng.make_axes([C1, N])
    total = h1 + cast
    assert total.axes == ng.make_axes([C1, N])
    got = transformer.computation(total, h1, h2)(v1, v2)
    np.testing.assert_allclose(got, v1 + v2, rtol=1e-6)

    got_direct = transformer.computation(direct, h1, h2)(v1, v2)
    assert got_direct.shape == (3, 4, 3)
    expected_direct = np.empty((3, 4, 3), np.float32)
    for i in range(3):
        for n in range(4):
            for j in range(3):
                expected_direct[i, n, j] = v1[i, n] + v2[j, n]
    np.testing.assert_allclose(got_direct, expected_direct, rtol=1e-6)


def test_cast_axes_matches_by_position_not_name(transformer, rng):
    A = ng.make_axis(2, name="A")
    B = ng.make_axis(3, name="B")
    P = ng.make_axis(2, name="P")
    Q = ng.make_axis(3, name="Q")
    x = ng.placeholder([A, B])
    xv = rng.standard_normal((2, 3)).astype(np.float32)
    y = ng.cast_axes(x, [P, Q])
    assert y.axes == ng.make_axes([P, Q])
    np.testing.assert_array_equal(_run(transformer, y, (x, xv)), xv)


def test_cast_axes_rejects_different_lengths():
    A = ng.make_axis(2, name="A")
    B = ng.make_axis(3, name="B")
    x = ng.placeholder([A, B])
    with pytest.raises(ng.IncompatibleAxesError):
        ng.cast_axes(x, [B, A])
    with pytest.raises(ng.IncompatibleAxesError):
        ng.cast_axes(x, [A])


# -- axes_with_order ----------------------------------------------------------------

def test_axes_with_order_transposes_values(transformer, rng):
    A, B, C = _axes3()
    x = ng.placeholder([A, B, C])
    xv = rng.standard_normal((2, 3, 4)).astype(np.float32)
    y = ng.axes_with_order(x, [C, A, B])
    assert y.axes == ng.make_axes([C, A, B])
    assert y.axes.lengths == (4, 2, 3)
    got = _run(transformer, y, (x, xv))
    assert got.shape == (4, 2, 3)
    for a in range(2):
        for b in range(3):
            for c in range(4):
                assert got[c, a, b] == xv[a, b, c]


def test_axes_with_order_requires_same_axes():
    A, B, C = _axes3()
    x = ng.placeholder([A, B])
    with pytest.raises(ng.AxesError):
        ng.axes_with_order(x, [A, C])
    with pytest.raises(ng.AxesError):
        ng.axes_with_order(x, [A])


# -- flatten / unflatten -------------------------------------------------------------

def test_flatten_all_axes(transformer, rng):
    A, B, C = _axes3()
    x = ng.placeholder([A, B, C])
    xv = rng.standard_normal((2, 3, 4)).astype(np.float32)
    f = ng.flatten(x)
    assert len(f.axes) == 1
    assert f.axes[0].length == 24
    assert isinstance(f.axes[0], ng.FlattenedAxis)
    assert f.axes[0].axes == ng.make_axes([A, B, C])
    got = _run(transformer, f, (x, xv))
    assert got.shape == (24,)
    expected = [xv[a, b, c] for a in range(2) for b in range(3) for c in range(4)]
    np.testing.assert_array_equal(got, np.array(expected, np.float32))


def test_flatten_into_given_order(transformer, rng):
    A, B, C = _axes3()
    x = ng.placeholder([A, B])
    xv = rng.standard_normal((2, 3)).astype(np.float32)
    target = ng.make_axes([B, A]).flatten()
    f = ng.flatten(x, [target])
    assert f.axes.lengths == (6,)
    got = _run(transformer, f, (x, xv))
    expected = [xv[a, b] for b in range(3) for a in range(2)]
    np.testing.assert_array_equal(got, np.array(expected, np.float32))


@pytest.mark.parametrize("idx, lengths", [(1, (2, 12)), (2, (6, 4))])
def test_flatten_at(transformer, rng, idx, lengths):
    A, B, C = _axes3()
    x = ng.placeholder([A, B, C])
    xv = rng.standard_normal((2, 3, 4)).astype(np.float32)
    f = ng.flatten_at(x, idx)
    assert f.axes.lengths == lengths
    if idx == 1:
        assert f.axes[0] is A
        assert f.axes[1].axes == ng.make_axes([B, C])
    else:
        assert f.axes[0].axes == ng.make_axes([A, B])
        assert f.axes[1] is C
    got = _run(transformer, f, (x, xv))
    expected = np.empty(lengths, np.float32)
    for a in range(2):
        for b in range(3):
            for c in range(4):
                flat = a * 12 + b * 4 + c
                expected[flat // lengths[1], flat % lengths[1]] = xv[a, b, c]
    np.testing.assert_array_equal(got, expected)


def test_unflatten_round_trip(transformer, rng):
    A, B, C = _axes3()
    x = ng.placeholder([A, B, C])
    xv = rng.standard_normal((2, 3, 4)).astype(np.float32)
    u = ng.unflatten(ng.flatten(x))
    assert u.axes == ng.make_axes([A, B, C])
    np.testing.assert_array_equal(_run(transformer, u, (x, xv)), xv)

    u2 = ng.unflatten(ng.flatten_at(x, 1))
    assert u2.axes == ng.make_axes([A, B, C])
    np.testing.assert_array_equal(_run(transformer, u2, (x, xv)), xv)


def test_unflatten_after_arithmetic_on_flat_values(transformer, rng):
    A, B, C = _axes3()
    x = ng.placeholder([A, B, C])
    xv = rng.standard_normal((2, 3, 4)).astype(np.float32)
    u = ng.unflatten(ng.flatten(x) * 2.0)
    assert u.axes == ng.make_axes([A, B, C])
    np.testing.assert_allclose(_run(transformer, u, (x, xv)), xv * 2.0, rtol=1e-6)


def test_unflatten_with_axes_reorders(transformer, rng):
    A, B, C = _axes3()
    x = ng.placeholder([A, B, C])
    xv = rng.standard_normal((2, 3, 4)).astype(np.float32)
    u = ng.unflatten(ng.flatten(x), [C, A, B])
    assert u.axes == ng.make_axes([C, A, B])
    got = _run(transformer, u, (x, xv))
    for a in range(2):
        for b in range(3):
            for c in range(4):
                assert got[c, a, b] == xv[a, b, c]


# -- slice_along_axis -----------------------------------------------------------------

def test_slice_along_axis_int_removes_axis(transformer, rng):
    A, B, C = _axes3()
    x = ng.placeholder([A, B, C])
    xv = rng.standard_normal((2, 3, 4)).astype(np.float32)
    s = ng.slice_along_axis(x, B, 1)
    assert s.axes == ng.make_axes([A, C])
    got = _run(transformer, s, (x, xv))
    expected = np.array([[xv[a, 1, c] for c in range(4)] for a in range(2)], np.float32)
    np.testing.assert_array_equal(got, expected)


def test_slice_along_axis_negative_int(transformer, rng):
    A, B, C = _axes3()
    x = ng.placeholder([A, B, C])
    xv = rng.standard_normal((2, 3, 4)).astype(np.float32)
    s = ng.slice_along_axis(x, C, -1)
    assert s.axes == ng.make_axes([A, B])
    got = _run(transformer, s, (x, xv))
    expected = np.array([[xv[a, b, 3] for b in range(3)] for a in range(2)], np.float32)
    np.testing.assert_array_equal(got, expected)


def test_slice_along_axis_slice_keeps_shorter_new_axis(transformer, rng):
    A, B, C = _axes3()
    x = ng.placeholder([A, B, C])
    xv = rng.standard_normal((2, 3, 4)).astype(np.float32)
    s = ng.slice_along_axis(x, C, slice(1, 3))
    assert len(s.axes) == 3
    assert s.axes[0] is A and s.axes[1] is B
    new = s.axes[2]
    assert new is not C
    assert new.parent is C and new.name == "C[1:3]"
    assert new.length == 2
    got = _run(transformer, s, (x, xv))
    expected = np.empty((2, 3, 2), np.float32)
    for a in range(2):
        for b in range(3):
            for k, c in enumerate([1, 2]):
                expected[a, b, k] = xv[a, b, c]
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("item, picked", [
    (slice(None, None, 2), [0, 2, 4, 6]),
    (slice(1, None, 3), [1, 4]),
    (slice(-3, None), [4, 5, 6]),
    (slice(None, None, -1), [6, 5, 4, 3, 2, 1, 0]),
    (slice(5, 0, -2), [5, 3, 1]),
    (slice(-2, -6, -1), [5, 4, 3, 2]),
])
def test_slice_along_axis_steps_and_negative_bounds(transformer, rng, item, picked):
    H = ng.make_axis(2, name="H")
    W = ng.make_axis(7, name="W")
    x = ng.placeholder([H, W])
    xv = rng.standard_normal((2, 7)).astype(np.float32)
    s = ng.slice_along_axis(x, W, item)
    assert s.axes[0] is H
    assert s.axes[1].parent is W and s.axes[1] is not W
    assert s.axes.lengths == (2, len(picked))
    got = _run(transformer, s, (x, xv))
    expected = np.array([[xv[h, w] for w in picked] for h in range(2)], np.float32)
    np.testing.assert_array_equal(got, expected)


def test_slice_along_axis_full_slice_keeps_same_axis(transformer, rng):
    H = ng.make_axis(2, name="H")
    W = ng.make_axis(5, name="W")
    x = ng.placeholder([H, W])
    xv = rng.standard_normal((2, 5)).astype(np.float32)
    s = ng.slice_along_axis(x, W, slice(None))
    assert s.axes == ng.make_axes([H, W])
    np.testing.assert_array_equal(_run(transformer, s, (x, xv)), xv)


def test_slice_along_axis_errors():
    H = ng.make_axis(2, name="H")
    W = ng.make_axis(5, name="W")
    other = ng.make_axis(5, name="W")
    x = ng.placeholder([H, W])
    with pytest.raises(ng.AxesError):
        ng.slice_along_axis(x, other, 0)
    with pytest.raises(ng.AxesError):
        ng.slice_along_axis(x, W, 5)
    with pytest.raises(ng.AxesError):
        ng.slice_along_axis(x, W, -6)


# -- tensor_slice / indexing ----------------------------------------------------------

def test_getitem_int_and_slice(transformer, rng):
    A, B, C = _axes3()
    x = ng.placeholder([A, B, C])
    xv = rng.standard_normal((2, 3, 4)).astype(np.float32)
    s = x[1, :, 1:4:2]
    assert len(s.axes) == 2
    assert s.axes[0] is B
    assert s.axes[1].name == "C[1::2]" and s.axes[1].length == 2
    got = _run(transformer, s, (x, xv))
    expected = np.array([[xv[1, b, c] for c in (1, 3)] for b in range(3)], np.float32)
    np.testing.assert_array_equal(got, expected)


def test_getitem_fewer_indices_than_axes(transformer, rng):
    A, B, C = _axes3()
    x = ng.placeholder([A, B, C])
    xv = rng.standard_normal((2, 3, 4)).astype(np.float32)
    s = x[-1]
    assert s.axes == ng.make_axes([B, C])
    np.testing.assert_array_equal(_run(transformer, s, (x, xv)), xv[1])
    s2 = x[0, -2]
    assert s2.axes == ng.make_axes([C])
    got = _run(transformer, s2, (x, xv))
    np.testing.assert_array_equal(got, np.array([xv[0, 1, c] for c in range(4)], np.float32))


def test_getitem_all_ints_gives_scalar(transformer, rng):
    A, B, C = _axes3()
    x = ng.placeholder([A, B, C])
    xv = rng.standard_normal((2, 3, 4)).astype(np.float32)
    s = x[1, 2, 3]
    assert len(s.axes) == 0
    got = _run(transformer, s, (x, xv))
    assert got.shape == ()
    assert got == xv[1, 2, 3]


def test_tensor_slice_with_given_axes(transformer, rng):
    A, B, C = _axes3()
    x = ng.placeholder([A, B, C])
    xv = rng.standard_normal((2, 3, 4)).astype(np.float32)
    B2 = ng.make_axis(2, name="B2")
    s = ng.tensor_slice(x, (0, slice(1, 3), slice(None)), axes=[B2, C])
    assert s.axes == ng.make_axes([B2, C])
    got = _run(transformer, s, (x, xv))
    expected = np.array([[xv[0, b, c] for c in range(4)] for b in (1, 2)], np.float32)
    np.testing.assert_array_equal(got, expected)


def test_tensor_slice_errors():
    A, B, C = _axes3()
    x = ng.placeholder([A, B])
    with pytest.raises(ng.AxesError):
        x[0, 0, 0]
    with pytest.raises(ng.AxesError):
        x[2]
    with pytest.raises(ng.AxesError):
        ng.tensor_slice(x, (slice(0, 1), slice(None)), axes=[ng.make_axis(2), B])


# -- concat_along_axis ----------------------------------------------------------------

def test_concat_same_name_axes_different_lengths(transformer, rng):
    H = ng.make_axis(3, name="H")
    X1 = ng.make_axis(2, name="X")
    X2 = ng.make_axis(5, name="X")
    a = ng.placeholder([H, X1])
    b = ng.placeholder([X2, H])  # other axes in another order
    av = rng.standard_normal((3, 2)).astype(np.float32)
    bv = rng.standard_normal((5, 3)).astype(np.float32)
    c = ng.concat_along_axis([a, b], X1)
    assert len(c.axes) == 2
    assert c.axes[0] is H
    assert c.axes[1].name == "X"
    assert c.axes[1].length == 7
    got = transformer.computation(c, a, b)(av, bv)
    expected = np.empty((3, 7), np.float32)
    for h in range(3):
        for i in range(2):
            expected[h, i] = av[h, i]
        for i in range(5):
            expected[h, 2 + i] = bv[i, h]
    np.testing.assert_array_equal(got, expected)


def test_concat_tensors_sharing_the_axis_object(transformer, rng):
    H = ng.make_axis(3, name="H")
    X = ng.make_axis(2, name="X")
    a = ng.placeholder([H, X])
    b = ng.placeholder([X, H])
    av = rng.standard_normal((3, 2)).astype(np.float32)
    bv = rng.standard_normal((2, 3)).astype(np.float32)
    c = ng.concat_along_axis([a, b], X)
    assert c.axes[0] is H
    assert c.axes[1] is not X and c.axes[1].name == "X" and c.axes[1].length == 4
    got = transformer.computation(c, a, b)(av, bv)
    expected = np.empty((3, 4), np.float32)
    for h in range(3):
        expected[h, 0], expected[h, 1] = av[h, 0], av[h, 1]
        expected[h, 2], expected[h, 3] = bv[0, h], bv[1, h]
    np.testing.assert_array_equal(got, expected)


def test_concat_three_tensors_three_axes(transformer, rng):
    A = ng.make_axis(2, name="A")
    B = ng.make_axis(3, name="B")
    K1 = ng.make_axis(1, name="K")
    K2 = ng.make_axis(2, name="K")
    K3 = ng.make_axis(3, name="K")
    x = ng.placeholder([A, K1, B])
    y = ng.placeholder([B, A, K2])
    z = ng.placeholder([K3, B, A])
    xv = rng.standard_normal((2, 1, 3)).astype(np.float32)
    yv = rng.standard_normal((3, 2, 2)).astype(np.float32)
    zv = rng.standard_normal((3, 3, 2)).astype(np.float32)
    # the axis passed need not belong to any tensor: it is matched by name
    c = ng.concat_along_axis([x, y, z], ng.make_axis(name="K"))
    assert c.axes[0] is A and c.axes[2] is B
    assert c.axes[1].name == "K" and c.axes[1].length == 6
    got = transformer.computation(c, x, y, z)(xv, yv, zv)
    expected = np.empty((2, 6, 3), np.float32)
    for a in range(2):
        for b in range(3):
            expected[a, 0, b] = xv[a, 0, b]
            for k in range(2):
                expected[a, 1 + k, b] = yv[b, a, k]
            for k in range(3):
                expected[a, 3 + k, b] = zv[k, b, a]
    np.testing.assert_array_equal(got, expected)


def test_concat_errors():
    H = ng.make_axis(3, name="H")
    W = ng.make_axis(3, name="W")
    X1 = ng.make_axis(2, name="X")
    X2 = ng.make_axis(2, name="X")
    a = ng.placeholder([H, X1])
    with pytest.raises(ng.AxesError):
        ng.concat_along_axis([a, ng.placeholder([H, W])], X1)  # no X in the second
    with pytest.raises(ng.AxesError):
        ng.concat_along_axis([a, ng.placeholder([W, X2])], X1)  # other axes differ


# -- stack ----------------------------------------------------------------------------

@pytest.mark.parametrize("pos", [0, 1, 2])
def test_stack_positions(transformer, rng, pos):
    H = ng.make_axis(2, name="H")
    W = ng.make_axis(3, name="W")
    S = ng.make_axis(name="S")
    x = ng.placeholder([H, W])
    y = ng.placeholder([W, H])  # reordered to x's order before stacking
    z = ng.placeholder([H, W])
    xv = rng.standard_normal((2, 3)).astype(np.float32)
    yv = rng.standard_normal((3, 2)).astype(np.float32)
    zv = rng.standard_normal((2, 3)).astype(np.float32)
    s = ng.stack([x, y, z], S, pos=pos)
    assert S.length == 3
    expected_axes = [H, W]
    expected_axes.insert(pos, S)
    assert s.axes == ng.make_axes(expected_axes)
    got = transformer.computation(s, x, y, z)(xv, yv, zv)
    parts = [xv, yv.T, zv]
    for k in range(3):
        for h in range(2):
            for w in range(3):
                index = [h, w]
                index.insert(pos, k)
                assert got[tuple(index)] == parts[k][h, w]


def test_stack_errors():
    H = ng.make_axis(2, name="H")
    W = ng.make_axis(3, name="W")
    x = ng.placeholder([H, W])
    with pytest.raises(ng.AxesError):
        ng.stack([x, x], ng.make_axis(3, name="S"))  # wrong length
    with pytest.raises(ng.AxesError):
        ng.stack([x, ng.placeholder([H])], ng.make_axis(name="S"))
    with pytest.raises(ng.AxesError):
        ng.stack([x, x], ng.make_axis(name="S"), pos=3)


# -- pad ------------------------------------------------------------------------------

def test_pad_int_and_pairs(transformer, rng):
    H = ng.make_axis(2, name="H")
    W = ng.make_axis(3, name="W")
    x = ng.placeholder([H, W])
    xv = rng.standard_normal((2, 3)).astype(np.float32) + 5.0
    p = ng.pad(x, [1, (0, 2)])
    assert [a.name for a in p.axes] == ["H+pad(1,1)", "W+pad(0,2)"]
    assert p.axes.lengths == (4, 5)
    got = _run(transformer, p, (x, xv))
    expected = np.zeros((4, 5), np.float32)
    for h in range(2):
        for w in range(3):
            expected[h + 1, w] = xv[h, w]
    np.testing.assert_array_equal(got, expected)


def test_pad_zero_keeps_axis(transformer, rng):
    H = ng.make_axis(2, name="H")
    W = ng.make_axis(3, name="W")
    x = ng.placeholder([H, W])
    xv = rng.standard_normal((2, 3)).astype(np.float32) + 5.0
    p = ng.pad(x, [0, (2, 1)])
    assert p.axes[0] is H
    assert p.axes[1] is not W and p.axes.lengths == (2, 6)
    got = _run(transformer, p, (x, xv))
    expected = np.zeros((2, 6), np.float32)
    expected[:, 2:5] = xv
    np.testing.assert_array_equal(got, expected)


def test_pad_errors():
    H = ng.make_axis(2, name="H")
    W = ng.make_axis(3, name="W")
    x = ng.placeholder([H, W])
    with pytest.raises(ng.AxesError):
        ng.pad(x, [1])
    with pytest.raises(ng.AxesError):
        ng.pad(x, [1, (-1, 0)])


def test_pad_accepts_numpy_integers(transformer):
    """Paddings computed with NumPy (np.int64) are ints too."""
    H = ng.make_axis(2, name="H")
    W = ng.make_axis(3, name="W")
    x = ng.placeholder([H, W])
    xv = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)
    p = ng.pad(x, [np.int64(1), (np.int64(0), np.int64(1))])
    assert p.axes.lengths == (4, 4)
    expected = np.zeros((4, 4), np.float32)
    expected[1:3, 0:3] = xv
    np.testing.assert_array_equal(transformer.computation(p, x)(xv), expected)


def test_mean_over_a_concat_along_an_axis_without_a_length(transformer):
    # The joined axis gets its length only when the concat runs; the count must wait for it.
    N, A = ng.make_axis(name="N"), ng.make_axis(length=2, name="A")
    x = ng.placeholder([N, A], dtype=np.float64)
    joined = ng.concat_along_axis([x, ng.exp(x)], N)
    data = np.arange(8.0).reshape(4, 2) / 10
    got = transformer.computation(ng.mean(joined, out_axes=()), x)(data)
    np.testing.assert_allclose(got, np.concatenate([data, np.exp(data)]).mean(), rtol=1e-12)
